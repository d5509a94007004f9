package adaptive

import "github.com/adaptsched/adaptsched/kernels"

// Handle is a caller's hold on one op site: its spec's bucket and
// capable backends, found once, so that Handle.Select decides without
// keying, hashing or looking up the spec (the Executor per op site, a
// graph, a long-running program). It also keeps the transfers it last
// priced, for as long as the residency and the link models are the
// same. Make one with Scheduler.Handle. A Handle is not safe for
// concurrent use: give each goroutine its own (two handles of one spec
// share the bucket, which has its own lock).
type Handle struct {
	s   *Scheduler
	ent entry
	tc  transferCache
	// spec is a deep copy: a shape's own bucket is made from it. After
	// tc, which every Select reads, as it is read only then.
	spec kernels.Spec
}

// Handle returns a handle on spec's op site, making its bucket on first
// sight as Select does. An invalid spec returns Validate's error.
func (s *Scheduler) Handle(spec kernels.Spec) (*Handle, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	spec.In = append([]kernels.Shape(nil), spec.In...)
	for i, sh := range spec.In {
		spec.In[i] = append(kernels.Shape(nil), sh...)
	}
	ent, err := s.lookup(&spec)
	if err != nil {
		return nil, err
	}
	return &Handle{s: s, ent: ent, spec: spec}, nil
}

// Select chooses the backend for the handle's op given where its inputs
// are: Scheduler.Select without the lookup, the same decision. It does
// not allocate; hand the Decision to Scheduler.Observe.
func (h *Handle) Select(res Residency) (d Decision, err error) {
	err = h.SelectInto(&d, &res, 0, 0)
	return d, err
}

// SelectExcept is Scheduler.SelectExcept by handle.
func (h *Handle) SelectExcept(res Residency, exclude Mask, why Reason) (d Decision, err error) {
	err = h.SelectInto(&d, &res, exclude, why)
	return d, err
}

// SelectInto is SelectExcept writing its Decision into *d (overwritten),
// the residency taken by reference, for a caller that keeps both in
// place (the Executor; a loop over handles, with Scheduler.ObserveRef):
// a Residency is 176 bytes and a Decision 200, and copying
// them in and out was a sixth of a decision by handle
// (BenchmarkSelectObserve's handle cases).
func (h *Handle) SelectInto(d *Decision, res *Residency, exclude Mask, why Reason) error {
	*d = Decision{}
	if h.s.closed.Load() {
		return ErrClosed
	}
	return h.s.decideInto(d, &h.ent, &h.spec, res, exclude, why, false, 0, &h.tc)
}

// SelectOnInto is Scheduler.SelectOn by handle, writing into *d as
// SelectInto: a Placer's choice without the lookup and the copies of
// the spec, the residency and the decision (the Executor's placed ops,
// BenchmarkExecutorStep's "placed").
func (h *Handle) SelectOnInto(d *Decision, res *Residency, arm int, exclude Mask, why Reason) error {
	*d = Decision{}
	if h.s.closed.Load() {
		return ErrClosed
	}
	return h.s.decideInto(d, &h.ent, &h.spec, res, exclude, why, true, arm, &h.tc)
}

// Bucket returns the handle's bucket.
func (h *Handle) Bucket() BucketID { return h.ent.id }

// transferCache is the transfers a handle last priced: for the inputs
// and consumers of a residency (n, consumers, inputs[:n]; its QueueUs is
// priced apart) over the allowed backends, while the link models have
// learned nothing new (Scheduler.linkEpoch at epoch). Rule: what every
// Select reads (the key's head, t, the first inputs) comes first, in two
// cache lines, and w, read only where copies, last. Reason: with a copy
// of the whole Residency between them, a Select by handle read five
// lines of it (BenchmarkSelectObserve's handle cases).
type transferCache struct {
	ok, any   bool
	copies    bool // w is not all zero
	allowed   Mask
	consumers Mask
	n         int32
	epoch     uint64
	t         [MaxBackends]float64
	inputs    [MaxInputs]Input
	w         [MaxBackends]float64
}

// holds reports whether c holds the transfers of r: the same inputs in
// use and consumers (the entries past N are not read). Comparing the
// whole Residency was a tenth of the Executor's own work per op
// (BenchmarkExecutorOnly).
func (c *transferCache) holds(r *Residency) bool {
	n := min(r.N, MaxInputs)
	if int(c.n) != n || c.consumers != r.Consumers {
		return false
	}
	for i := range n {
		if c.inputs[i] != r.Inputs[i] {
			return false
		}
	}
	return true
}

// transfers is Scheduler.transfers through the cache: the same figures,
// priced again only when the residency, the allowed backends or the
// links have changed. copies reports whether w holds any copy (w is
// written only then).
func (c *transferCache) transfers(s *Scheduler, res *Residency, out int64, allowed Mask, t, w *[MaxBackends]float64) (any, copies bool) {
	ep := s.linkEpoch.Load()
	if c.ok && c.epoch == ep && c.allowed == allowed && c.holds(res) {
		*t = c.t
		if c.copies {
			*w = c.w
		}
		return c.any, c.copies
	}
	*t, *w = [MaxBackends]float64{}, [MaxBackends]float64{}
	any = s.transfers(res, out, allowed, t, w)
	copies = *w != [MaxBackends]float64{}
	*c = transferCache{ok: true, any: any, copies: copies, allowed: allowed, consumers: res.Consumers,
		n: int32(min(res.N, MaxInputs)), epoch: ep, t: *t, inputs: res.Inputs, w: *w}
	return any, copies
}
