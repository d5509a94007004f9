package executor

import "github.com/adaptsched/adaptsched/adaptive"

// copyWanted copies each weight of ts that a backend's cache wants for
// its own sake at this use (weightcache.Cache.Wants) there before the op
// is placed, so that Select sees it held and the op may run on it rather
// than beside its copy (TestWeightCopiedBeforeOp). The use is counted in
// that cache now, as a use that copied the weight, and marked in us, the
// op's counted masks, so that the op's staging (touchWeight) and ownSake
// do not count it there again (TestWantedCopyCountsOnce); a cache that
// counted it already is not asked. queued: the copy is queued
// (copyToDevice), else made at once. Only with weight caches
// (Executor.weighs).
func (e *Executor) copyWanted(ts []*Tensor, us *[adaptive.MaxInputs]adaptive.Mask, queued bool) {
	if e.wc.held.Load() {
		return
	}
	for i, t := range ts {
		if !t.weight.Load() {
			continue
		}
		t.mu.Lock()
		for b := range e.bes {
			if us[i].Has(b) || !e.wants(t, b) {
				continue
			}
			us[i] |= adaptive.Backend(b)
			if !e.admit(t, b, ts, true, 0) {
				continue
			}
			if !queued {
				e.copyInSync(t, b)
			} else if _, err := e.copyToDevice(t, b); err != nil && t.copies[b] == nil {
				e.unreserve(t, b)
			}
		}
		t.mu.Unlock()
	}
}

// wants reports whether backend b's cache wants weight t (t.mu held) for
// its own sake at this use: b has a budget and no copy of t, and the
// rule, by t's past uses there, would copy it in.
func (e *Executor) wants(t *Tensor, b int) bool {
	if e.wc.budget[b] < 0 || e.alias.Has(b) || t.freed || t.copies[b] != nil || t.valid&adaptive.Host == 0 {
		return false
	}
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	r := e.wc.rule[b]
	// At the step this use will count at (touchWeight, when the op's
	// inputs are staged), as ownSake would ask after the op.
	next := float64(e.wc.tick+1) / float64(max(e.wc.n, 1))
	return r != nil && r.Wants(t.wuse.id, next)
}

// copyInSync copies weight t, admitted on backend b, there at once (t.mu
// held); a copy that cannot be made gives its room back.
func (e *Executor) copyInSync(t *Tensor, b int) {
	c, err := e.bes[b].Alloc(t.size)
	if err != nil {
		e.unreserve(t, b)
		return
	}
	tm, err := e.bes[b].Write(c, t.host)
	if err != nil {
		c.Free()
		e.unreserve(t, b)
		return
	}
	e.observeCopy(b, true, t.size, tm)
	t.copies[b] = c
	e.register(t, b)
	t.valid |= adaptive.Backend(b)
}
