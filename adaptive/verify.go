package adaptive

import (
	"math"
	"sync"

	"github.com/adaptsched/adaptsched/bandit"
)

// Evidence from elsewhere (a fleet's Fold) is a prior the Scheduler holds
// only while its own measurements agree with it. The test, per backend:
// every own observation y = ln µs of an arm whose prior holds foreign
// evidence is compared with that evidence's mean m, the difference
// clamped to ±ln 10 (one spike must not decide); once verifyMin
// differences are in, a mean difference above ln verifyRatio either way
// (the foreign figures 3× off this node's, on average) sets all
// foreign evidence aside for the rest of the Scheduler's life: every arm
// goes back to its own prior and its own evidence. Nodes of one
// fingerprint are the same hardware, whose run-to-run spread is about 20%
// (DESIGN.md § The bandit); 3× is no spread. TestFoldContradicted.
//
// A peer that claims an arm is slow keeps a node from running it, and so
// from measuring it: Select runs such an arm itself (a probe, reason
// Explore) where the cost model finds it cheaper than the arm chosen and
// this bucket has never learned from it, up to maxProbes per backend,
// until the check has its verifyMin differences.
const (
	verifyMin   = 3
	verifyRatio = 3.0
	verifyClamp = 2.302585092994046 // ln 10
	// maxProbes bounds the probes per backend: verifyMin, with room for
	// probes whose run never reaches the check (a probe counts when Select
	// makes it; an op that fails over runs on another backend).
	maxProbes = 3 * verifyMin
)

// verifier is the Fold's check of foreign evidence against own
// measurements. Its lock is a leaf: taken under a bucket's, never the
// other way round.
type verifier struct {
	mu        sync.Mutex
	sum, n    [MaxBackends]float64 // Σ clamped (y − m), and their count, per backend
	probes    [MaxBackends]int     // probes run, per backend
	set       bool                 // contradicted: the foreign evidence is set aside
	contra    int                  // the backend that contradicted it
	ratio     float64              // exp of its mean difference
	suspended bool                 // the Fold has set its evidence aside (f.mu)
}

// check records an own observation y (ln µs) of arm a, whose foreign
// evidence has mean m, and reports whether the foreign evidence is now
// contradicted (the first time only), or agrees (the first time backend
// a has verifyMin differences).
func (v *verifier) check(a int, y, m float64) (contradicted, agrees bool) {
	d := max(-verifyClamp, min(verifyClamp, y-m))
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.set {
		return false, false
	}
	v.sum[a] += d
	v.n[a]++
	if v.n[a] < verifyMin {
		return false, false
	}
	if mean := v.sum[a] / v.n[a]; math.Abs(mean) > math.Log(verifyRatio) {
		v.set, v.contra, v.ratio = true, a, math.Exp(mean)
		return true, false
	}
	return false, v.n[a] == verifyMin
}

// verified reports whether backend a's check has its verifyMin
// differences and found no contradiction.
func (v *verifier) verified(a int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.set && v.n[a] >= verifyMin
}

// plausibleRatio bounds how far foreign evidence may be from this node's
// own cost model to enter an arm's prior before the node's measurements
// of that backend have agreed with the fleet's: further off, it waits
// (foldBucket.held). The model may be wrong by this much (DESIGN.md §
// Priors: a profile's figures 30× off are learned from); a claim further
// off must be measured before it steers. TestFoldContradicted.
const plausibleRatio = 10.0

// plausible reports whether st, foreign evidence for arm a of b, is
// within plausibleRatio of the arm's cost model; no evidence (Fold.set
// makes N ≤ 0 so) is.
func plausible(b *bucket, a int, st bandit.Stats) bool {
	return st.N <= 0 || math.Abs(st.Sum/st.N-b.per[a].lnModel) <= math.Log(plausibleRatio)
}

// probe returns the arm that Select runs instead of chosen to test the
// foreign evidence, or -1 (b.mu held): an allowed arm with foreign
// evidence that this bucket never ran, which the cost model finds cheaper
// than chosen, while its backend's check lacks differences and probes.
func (v *verifier) probe(b *bucket, allowed Mask, chosen int) int {
	fb := b.fb
	for a := range MaxBackends {
		if a == chosen || !allowed.Has(a) || fb.folded[a].N == 0 || b.per[a].learned > 0 || b.per[a].lnModel >= b.per[chosen].lnModel {
			continue
		}
		v.mu.Lock()
		ok := !v.set && v.n[a] < verifyMin && v.probes[a] < maxProbes
		if ok {
			v.probes[a]++
		}
		v.mu.Unlock()
		if ok {
			return a
		}
	}
	return -1
}

// verifyObserved checks an own observation of us µs on arm a of b against
// the arm's foreign evidence, folded or held (b.mu held), and reports
// whether the check reached a verdict: the caller then calls settle,
// without b.mu.
func (f *Fold) verifyObserved(b *bucket, a int, us float64) bool {
	fb := b.fb
	st := fb.folded[a]
	if st.N == 0 {
		st = fb.held[a]
	}
	if st.N == 0 {
		return false
	}
	contradicted, agrees := f.v.check(a, math.Log(us), st.Sum/st.N)
	return contradicted || agrees
}

// settle acts on backend a's verdict: the foreign evidence set aside when
// contradicted, its held part folded in when it agrees.
func (f *Fold) settle(a int) {
	if _, _, contradicted := f.Contradicted(); contradicted {
		f.setAside()
		return
	}
	f.release(a)
}

// release folds in the foreign evidence of backend a that waited for this
// node's measurements to agree with the fleet's.
func (f *Fold) release(a int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v.suspended {
		return
	}
	for _, fb := range f.buckets {
		if fb.held[a].N > 0 {
			fb.b.mu.Lock()
			st := fb.held[a]
			fb.held[a] = bandit.Stats{}
			f.rebase(fb, a, st)
			fb.b.mu.Unlock()
		}
	}
}

// setAside takes the foreign evidence out of every arm's prior, for good,
// and says so.
func (f *Fold) setAside() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.v.suspended {
		return
	}
	f.v.suspended = true
	for _, fb := range f.buckets {
		fb.b.mu.Lock()
		for a := range f.s.n {
			if fb.folded[a] != (bandit.Stats{}) {
				f.rebase(fb, a, bandit.Stats{}) // and in its shapes; no data of its own: its prior again
			}
		}
		fb.b.mu.Unlock()
	}
	f.v.mu.Lock()
	name, ratio := f.s.names[f.v.contra], f.v.ratio
	f.v.mu.Unlock()
	f.s.log.Warn("adaptive: the fleet's evidence is contradicted by this node's own measurements; set aside, the node runs on its own evidence",
		"backend", name, "own_over_fleet", ratio)
}

// Contradicted reports whether this Scheduler's own measurements
// contradicted the foreign evidence (which it then set aside), and of
// which backend, with the ratio of its own durations to the foreign ones.
func (f *Fold) Contradicted() (backend string, ratio float64, ok bool) {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	if !f.v.set {
		return "", 0, false
	}
	return f.s.names[f.v.contra], f.v.ratio, true
}
