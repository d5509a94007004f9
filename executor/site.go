package executor

import (
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
)

// opSite is what an output tensor keeps of the ops that write it, its op
// site. Rule: once one spec has written the tensor twice in a row, the
// site publishes it, with the Scheduler's handle on it
// (adaptive.Handle), as its known spec; an op of the known spec takes no
// lock of the site, skips Validate and decides by the handle, without
// keying or hashing the spec. Reason: a decode loop writes each scratch
// tensor with the same op every step; validating and hashing the spec
// were a third of the Executor's own work per op, and holding the site
// for the op two of its atomic operations (BenchmarkExecutorOnly). A
// site whose spec changes at every op (RoPE's position) never gets a
// known spec, and costs no allocation. Another spec takes the known
// one's place once it has written the tensor twice with nothing written
// between (by the tensor's version, which the known spec's ops advance
// without the site), so that a tensor written by two specs in turn does
// not swap them, allocating, at every op (TestOpSite).
type opSite struct {
	known atomic.Pointer[knownSite] // nil until a spec recurs
	// mu is only tried (TryLock): one op at a time learns a spec, and an
	// op that finds it in use decides by spec.
	mu   sync.Mutex
	ok   bool    // last holds a spec
	last specKey // the spec of the last op, held, that wrote the tensor
	// lastVersion is the tensor's version after that op, read when a
	// known spec was in place.
	lastVersion uint64
}

// knownSite is a site's known spec, validated, and the Scheduler's
// handle on it (nil when the Scheduler gave none: the op then decides by
// spec), which an op uses under the tensor's write
// lock (Executor.choose), a Handle not being safe for concurrent use.
// Never changed once published: its spec, whose shapes are views of the
// key's dimensions, is what the queued ops of the site keep (rec.spec)
// without a copy each.
type knownSite struct {
	key    specKey
	h      *adaptive.Handle
	spec   kernels.Spec
	shapes [adaptive.MaxInputs]kernels.Shape
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

// spec returns the spec k holds, its shapes appended to shapes as views
// of k's dimensions.
func (k *specKey) spec(shapes []kernels.Shape) kernels.Spec {
	for i := range k.n {
		shapes = append(shapes, kernels.Shape(k.dims[i][:k.rank[i]:k.rank[i]]))
	}
	return kernels.Spec{Op: k.op, DType: k.dtype, In: shapes, Params: k.params}
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

// siteOf returns o's site for an op of spec s: the known spec when s
// is it (validated already: decide by its handle), else the site, held
// (release it with releaseSite), or neither when another op holds the
// site or s does not fit one. The second op of a spec in a row publishes
// it as known (one allocation, and the handle's).
func (e *Executor) siteOf(o *Tensor, s *kernels.Spec) (*opSite, *knownSite) {
	st := &o.site
	known := st.known.Load()
	if known != nil && known.key.holds(s) {
		return nil, known
	}
	if !st.mu.TryLock() {
		return nil, nil
	}
	// A spec the key holds fits one. With a known spec in place (it
	// changes under mu alone), its ops may have come between.
	if st.ok && st.last.holds(s) && (known == nil || o.versionNow() == st.lastVersion) {
		k := &knownSite{key: st.last}
		k.spec = k.key.spec(k.shapes[:0])
		k.h, _ = e.s.Handle(*s) // an error leaves the op to decide by spec, which reports it
		st.known.Store(k)
		st.ok = false
		st.mu.Unlock()
		return nil, k
	}
	if !fits(s) {
		st.ok = false
		st.mu.Unlock()
		return nil, nil
	}
	return st, nil
}

// releaseSite lets go of o's site from siteOf after an op of spec s,
// which becomes the site's last spec when valid (it passed Validate).
func releaseSite(st *opSite, o *Tensor, s *kernels.Spec, valid bool) {
	if st == nil {
		return
	}
	st.ok = valid
	if valid {
		st.last.set(s)
		if st.known.Load() != nil {
			st.lastVersion = o.versionNow()
		}
	}
	st.mu.Unlock()
}

// versionNow returns t's version, read under its lock.
func (t *Tensor) versionNow() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.version
}
