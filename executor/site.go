package executor

import (
	"sync"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
)

// opSite is what an output tensor keeps of the op that last wrote it, its
// op site: the spec, in a fixed-size form that needs no allocation, and
// the Scheduler's handle on it (adaptive.Handle) once the same spec has
// written the tensor twice in a row. Rule: an op whose spec is its
// output's site's skips Validate and decides by the handle, without
// keying or hashing the spec. Reason: a decode loop writes each scratch
// tensor with the same op every step, and validating and hashing the
// spec were a third of the Executor's own work per op
// (BenchmarkExecutorOnly). A site whose spec changes at every op (RoPE's
// position) never gets a handle, and costs no allocation.
type opSite struct {
	// mu is only tried (TryLock): one op at a time uses the site, and an
	// op that finds it in use decides by spec.
	mu  sync.Mutex
	ok  bool // key holds a spec
	key specKey
	h   *adaptive.Handle // the handle on key's spec; nil until it recurs
	// decisions counts the decisions made there, of which one in
	// latencyEvery is timed.
	decisions uint64
}

// maxRank is the rank of the largest input shape a site keeps.
const maxRank = 4

// specKey is a spec as a value: its shapes in fixed arrays.
type specKey struct {
	op     kernels.Op
	dtype  kernels.DType
	n      int
	params kernels.Params
	rank   [adaptive.MaxInputs]int
	dims   [adaptive.MaxInputs][maxRank]int
	// in and out are the spec's input and output bytes, which the op's
	// tensors are checked against (Executor.resolve).
	in  [adaptive.MaxInputs]int64
	out int64
}

// fits reports whether a specKey can hold s.
func fits(s *kernels.Spec) bool {
	if len(s.In) > adaptive.MaxInputs {
		return false
	}
	for _, sh := range s.In {
		if len(sh) > maxRank {
			return false
		}
	}
	return true
}

// set makes k hold s, which fits and is valid.
func (k *specKey) set(s *kernels.Spec) {
	k.op, k.dtype, k.n, k.params = s.Op, s.DType, len(s.In), s.Params
	for i, sh := range s.In {
		k.rank[i] = len(sh)
		copy(k.dims[i][:], sh)
		k.in[i] = s.InBytes(i)
	}
	k.out = s.OutBytes()
}

// holds reports whether k holds s.
func (k *specKey) holds(s *kernels.Spec) bool {
	if k.op != s.Op || k.dtype != s.DType || k.n != len(s.In) || k.params != s.Params {
		return false
	}
	for i, sh := range s.In {
		if k.rank[i] != len(sh) {
			return false
		}
		for j, d := range sh {
			if k.dims[i][j] != d {
				return false
			}
		}
	}
	return true
}

// takeSite returns o's site for an op of spec s, held (release it with
// releaseSite), and whether s is the site's spec, validated already; nil
// when another op holds the site or s does not fit one. A site whose
// spec recurs gets its handle here (one allocation); one whose spec
// changed keeps s instead.
func (e *Executor) takeSite(o *Tensor, s *kernels.Spec) (*opSite, bool) {
	st := &o.site
	if !st.mu.TryLock() {
		return nil, false
	}
	if st.ok && st.key.holds(s) { // a spec the key holds fits one
		if st.h == nil && e.cfg.Placer == nil {
			st.h, _ = e.s.Handle(*s) // an error leaves the op to decide by spec, which reports it
		}
		return st, true
	}
	st.ok, st.h = false, nil
	if !fits(s) {
		st.mu.Unlock()
		return nil, false
	}
	return st, false
}

// releaseSite lets go of a site from takeSite after an op of spec s
// (valid: it passed Validate), which becomes the site's spec.
func releaseSite(st *opSite, s *kernels.Spec, valid bool) {
	if st == nil {
		return
	}
	if valid && !st.ok {
		st.key.set(s)
		st.ok = true
	}
	st.mu.Unlock()
}
