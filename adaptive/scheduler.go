package adaptive

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive/cost"
	"github.com/adaptsched/adaptsched/adaptive/link"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// shard is one slice of the shape→bucket cache's index, padded to its
// own cache lines. Lookups read tab without a lock (shapeTable); adds
// take mu.
type shard struct {
	tab atomic.Pointer[shapeTable]
	mu  sync.Mutex
	_   [112]byte
}

// entry is a cached shape: its bucket (and the bucket's ID, read here
// rather than from a cache line of the bucket) and the backends that
// support it.
type entry struct {
	b       *bucket
	node    *shapeNode // nil for a shape the cache cannot key
	id      BucketID
	capable Mask
	out     int64 // the output's bytes
}

// Scheduler places ops on backends (DESIGN.md § The data path). Select,
// SelectExcept, Observe, ObserveTransfer, Telemetry and Changes are
// safe for concurrent use from many goroutines: buckets are found
// through a sharded cache that lookups read without a lock, and each
// bucket has its own mutex and random source; no lock is global on the
// hot path.
type Scheduler struct {
	cfg    Config
	e      *engine
	n      int
	names  [MaxBackends]string
	kinds  [MaxBackends]backends.Kind
	gpus   Mask                        // GPU backends
	shared Mask                        // backends that read host memory directly
	only   int                         // Only's backend index
	links  [MaxBackends][2]*link.Model // [toDevice, toHost]; nil for shared-memory backends
	// linkEpoch counts link observations: a Handle's cached transfers
	// (transferCache) hold while it stands still.
	linkEpoch atomic.Uint64
	log       *slog.Logger
	// logInfo, logDebug: the logger enables those levels (read in New),
	// so that Select and Observe neither ask it nor box arguments for it.
	logInfo, logDebug bool

	shards    []shard
	shardMask uint64
	entries   shapeEntries // the shards' entries, in first-sight order

	regMu   sync.Mutex
	byKey   map[kernels.BucketKey]*bucket
	buckets []*bucket                          // by BucketID
	shapes  []*bucket                          // the shapes' own buckets (shapeBucket)
	loaded  map[learned.Key]bandit.NormalGamma // Config.Warm

	// The change tracking (nil: not tracked, Track). Observe queues a
	// bucket on dirty when it first changes after a Changes call and
	// counts its records; Changes takes them.
	track atomic.Pointer[tracker]
	dirty atomic.Pointer[bucket]

	fold   atomic.Pointer[Fold] // nil until Fold is called
	closed atomic.Bool
}

// New validates cfg and settles each backend's cost-model figures
// (calibrating CPUs with unknown figures).
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, n: len(cfg.Backends), log: cfg.Logger, only: -1, byKey: map[kernels.BucketKey]*bucket{}}
	s.logInfo = s.log.Enabled(context.Background(), slog.LevelInfo)
	s.logDebug = s.log.Enabled(context.Background(), slog.LevelDebug)
	models := make([]cost.Roofline, s.n)
	for i, b := range cfg.Backends {
		info := b.Info()
		s.names[i], s.kinds[i] = info.Name, info.Kind
		if info.Kind == backends.GPU {
			s.gpus |= Backend(i)
		}
		if info.SharedMemory || info.Kind == backends.CPU {
			s.shared |= Backend(i)
		}
		if cfg.Strategy.kind == only && cfg.Strategy.name == info.Name {
			s.only = i
		}
		nom, err := cost.Figures(b, info, cfg.NoCalibration)
		if err != nil {
			s.log.Warn("adaptive: calibration failed; using default CPU figures", "err", err, "backend", info.Name)
		}
		models[i] = cost.NewRoofline(nom.GFLOPS, nom.MemGBps, nom.DispatchUs)
		if !s.shared.Has(i) {
			s.links[i] = [2]*link.Model{link.New(nom.LinkLatencyUs, nom.LinkGBps), link.New(nom.LinkLatencyUs, nom.LinkGBps)}
		}
		s.log.Info("adaptive: backend figures", "backend", info.Name, "kind", info.Kind.String(),
			"gflops", nom.GFLOPS, "mem_gbps", nom.MemGBps, "dispatch_us", nom.DispatchUs)
	}
	s.e = newEngine(cfg.Bandit, models, s.gpus, cfg.Seed)
	s.shards = make([]shard, cfg.Shards)
	s.shardMask = uint64(cfg.Shards - 1)
	s.loaded = cfg.Warm
	return s, nil
}

// Decision is the Scheduler's choice for one op: which backend, in which
// bucket, why, and what each backend was estimated to cost. It is a value
// (fixed arrays, no allocation); hand it back to Observe with the
// measured timing.
type Decision struct {
	Ticket        // the backend, the bucket, the reason, and what Observe needs
	Name   string // the backend's Info().Name
	// Estimates[i] is backend i's cost in µs as the decision saw it: the
	// Thompson sample (or posterior mean, for strategies that do not
	// sample) plus the predicted transfer of its non-resident inputs and
	// its queue's expected wait (Residency.QueueUs); NaN
	// for a backend that was not a candidate or is not configured.
	Estimates [MaxBackends]float64
	// Transfer[i] is the predicted transfer in µs included in
	// Estimates[i].
	Transfer [MaxBackends]float64
}

// Ticket is the part of a Decision that Observe reads. Rule: a caller
// that keeps its decision until the op's timing arrives (the Executor's
// queued ops) keeps the Ticket, 56 bytes, not the Decision's 200.
// Reason: the queued op's record is allocated per op, and halving its
// bytes cut the Executor's host cost per queued op by about 30%
// (executor's BenchmarkExecutorStep).
type Ticket struct {
	Backend int // index into Config.Backends
	Bucket  BucketID
	Reason  Reason
	// BucketName is the bucket's stable name (Scheduler.BucketName),
	// shared with the bucket rather than copied, so that a caller naming
	// it (a trace) takes no lock.
	BucketName string

	b    *bucket
	s    *Scheduler
	node *shapeNode // the shape's cache node; nil for a shape not cached
}

// Select chooses the backend for spec given where its inputs are. It is
// SelectExcept with nothing excluded.
func (s *Scheduler) Select(spec kernels.Spec, res Residency) (d Decision, err error) {
	err = s.selectInto(&d, &spec, &res, 0, 0, false, 0)
	return d, err
}

// SelectExcept chooses the backend for spec among those not in exclude:
// the Executor's retry after a backend ran out of memory or failed. why,
// when MemoryConstraint or Fallback and exclude is not empty, becomes the
// decision's Reason. An invalid spec returns Validate's error; an op that
// no allowed backend can run returns an error wrapping ErrNoBackend. It
// does not allocate once the op's shape has been seen, and is safe for
// concurrent use.
func (s *Scheduler) SelectExcept(spec kernels.Spec, res Residency, exclude Mask, why Reason) (d Decision, err error) {
	err = s.selectInto(&d, &spec, &res, exclude, why, false, 0)
	return d, err
}

// selectInto is SelectExcept writing into the caller's result (zero): a
// Decision is 200 bytes, which returning it from here and again from
// Select copied twice. placed: the caller named arm (SelectOn).
func (s *Scheduler) selectInto(d *Decision, spec *kernels.Spec, res *Residency, exclude Mask, why Reason, placed bool, arm int) error {
	if s.closed.Load() {
		return ErrClosed
	}
	ent, err := s.lookup(spec)
	if err != nil {
		return err
	}
	return s.decideInto(d, &ent, spec, res, exclude, why, placed, arm, nil)
}

// decideInto is selectInto once spec's entry is known: the bucket (a
// shape's own, once it learns alone), the transfers (from tc when it
// holds this residency's, and into it), the strategy's choice.
func (s *Scheduler) decideInto(d *Decision, ent *entry, spec *kernels.Spec, res *Residency, exclude Mask, why Reason, placed bool, arm int, tc *transferCache) error {
	allowed := ent.capable &^ exclude
	if allowed == 0 || s.only >= 0 && !allowed.Has(s.only) {
		return s.noBackend(*spec, ent.capable, exclude)
	}
	b := ent.b
	b.prefetch(s.n)
	if ent.node != nil && s.cfg.ShapeHits < math.MaxInt32 && b.shapes.Load() > 1 {
		if c := s.shapeBucket(ent.node, b, spec); c != b {
			b = c
			b.prefetch(s.n)
		}
	}
	d.Bucket, d.BucketName, d.b, d.s, d.node = ent.id, ent.b.name, b, s, ent.node
	var extra, copies *[MaxBackends]float64
	var weights [MaxBackends]float64
	if res.N > 0 || res.Consumers != 0 {
		var any, cp bool
		if tc != nil {
			any, cp = tc.transfers(s, res, ent.out, allowed, &d.Transfer, &weights)
		} else {
			any = s.transfers(res, ent.out, allowed, &d.Transfer, &weights)
			cp = weights != [MaxBackends]float64{}
		}
		if any {
			extra = &d.Transfer
			if cp {
				copies = &weights
			}
		}
	}
	var withQueue [MaxBackends]float64
	if queued(res, allowed, s.n, extra, &withQueue) {
		extra = &withQueue
	}
	b.mu.Lock()
	if b.isShape && b.seen&allowed != allowed {
		s.e.inherit(b)
	}
	s.e.refresh(b)
	var c choice
	if placed {
		c = s.placeDecide(arm, b, allowed, extra, copies, &d.Estimates)
	} else {
		c = s.decide(b, allowed, extra, copies, &d.Estimates)
	}
	if exclude != 0 || b.fb != nil { // the common case calls nothing
		c = s.override(c, b, allowed, exclude, why, placed)
	}
	s.e.record(b, c.arm, c.reason, c.switched)
	b.mu.Unlock()
	for i := s.n; i < MaxBackends; i++ {
		d.Estimates[i] = math.NaN()
	}
	d.Backend, d.Name, d.Reason = c.arm, s.names[c.arm], c.reason
	if c.switched && s.logInfo {
		s.logSwitch(b.name, d.Name)
	}
	if s.logDebug {
		s.logDecision(b.name, d.Name, d.Reason, d.Estimates)
	}
	return nil
}

// override returns the strategy's choice c as it stands (b.mu held): its
// reason the caller's why after a failure or out of memory, or its arm a
// test of the fleet's evidence (verify.go's probe). Under Only no other
// backend runs (TestOnlyNoProbe), nor after a placement's choice; a
// shape's own bucket probes nothing: the check is its parent's. Rule: a
// decision that switched the bucket's incumbent runs it, and a probe
// waits for the next decision. Reason: run in its place, the probe left
// a switch counted to a backend that never ran (TestProbeSwitchCounted).
func (s *Scheduler) override(c choice, b *bucket, allowed, exclude Mask, why Reason, placed bool) choice {
	if exclude != 0 && (why == MemoryConstraint || why == Fallback) {
		c.reason = why
	} else if b.fb != nil && !placed && s.only < 0 && !b.isShape && !c.switched {
		if a := s.fold.Load().v.probe(b, allowed, c.arm); a >= 0 {
			c = choice{arm: a, reason: Explore}
		}
	}
	return c
}

// logDecision logs a decision at debug level. It takes the estimates by
// value: sliced from the caller's Decision, they would move every
// Decision to the heap.
func (s *Scheduler) logDecision(bucket, backend string, r Reason, est [MaxBackends]float64) {
	s.log.Debug("adaptive: decision", "bucket", bucket, "backend", backend, "reason", r.String(),
		"estimates_us", est[:s.n])
}

// decide applies the strategy (b.mu held).
func (s *Scheduler) decide(b *bucket, allowed Mask, extra, copies, est *[MaxBackends]float64) choice {
	var pref Mask
	switch s.cfg.Strategy.kind {
	case only:
		s.e.means(b, allowed, extra, est)
		return choice{arm: s.only, reason: UserPreference}
	case gpuPreferred:
		pref = s.gpus
	case cpuPreferred:
		pref = ^s.gpus
	default:
		return s.e.choose(b, allowed, extra, copies, est)
	}
	if p := allowed & pref; p != 0 {
		s.e.means(b, allowed, extra, est)
		return choice{arm: lowest(p), reason: UserPreference}
	}
	c := s.e.choose(b, allowed, extra, copies, est)
	c.reason = Unsupported
	if s.cfg.Strategy.kind == gpuPreferred && s.gpus == 0 {
		c.reason = GPUUnavailable
	}
	return c
}

// miss handles a shape not in the cache: validate the spec, find or make
// its bucket, ask every backend whether it supports the shape, and cache
// the answer in sh under k, whose hash is h (sh nil: a shape the cache
// cannot key).
func (s *Scheduler) miss(spec kernels.Spec, sh *shard, k *shapeKey, h uint64) (entry, error) {
	if err := spec.Validate(); err != nil {
		return entry{}, err
	}
	var capable Mask
	for i, be := range s.cfg.Backends {
		if be.Supports(spec) == nil {
			capable |= Backend(i)
		}
	}
	w := spec.Work()
	b := s.bucketFor(spec, w)
	ent := entry{b: b, id: b.id, capable: capable, out: spec.OutBytes()}
	if sh != nil {
		ent.node = new(shapeNode)
		for a := range s.n {
			ent.node.lnModel[a] = float32(s.e.lnModel(a, w))
		}
		ent = sh.add(&s.entries, k, h, ent)
	}
	return ent, nil
}

// bucketFor returns spec's bucket, creating it (with priors and any stored
// posteriors) on first sight; w is spec's Work.
func (s *Scheduler) bucketFor(spec kernels.Spec, w kernels.Work) *bucket {
	key := kernels.BucketKeyOf(spec)
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if b := s.byKey[key]; b != nil {
		return b
	}
	name := key.String()
	b := s.e.newBucket(BucketID(len(s.buckets)), name, key.Family(), key.Op.Class(), int(key.Class), w)
	for a := range s.n {
		if p, ok := s.loaded[learned.Key{Backend: s.names[a], Bucket: name}]; ok && validPosterior(p) {
			b.warm(a, p)
		}
	}
	if f := s.fold.Load(); f != nil {
		f.made(b)
	}
	s.byKey[key] = b
	s.buckets = append(s.buckets, b)
	return b
}

// validPosterior reports whether a stored posterior can be used.
func validPosterior(p bandit.NormalGamma) bool {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	return ok(p.Mu) && ok(p.Kappa) && ok(p.Alpha) && ok(p.Beta) && p.Kappa > 0 && p.Alpha > 0 && p.Beta > 0
}

// noBackend builds the ErrNoBackend error: each backend's reason.
func (s *Scheduler) noBackend(spec kernels.Spec, capable, exclude Mask) error {
	var why []string
	for i, b := range s.cfg.Backends {
		switch {
		case s.only >= 0 && i != s.only:
			continue
		case exclude.Has(i):
			why = append(why, s.names[i]+": excluded")
		case !capable.Has(i):
			why = append(why, fmt.Sprintf("%s: %v", s.names[i], b.Supports(spec)))
		}
	}
	return fmt.Errorf("%w: %v (%s)", ErrNoBackend, spec, strings.Join(why, "; "))
}

// maxObservedUs bounds a credible duration (about 11.6 days).
const maxObservedUs = 1e12

// Observe folds the measured compute duration of a decision's op into its
// bucket's posterior (transfers go to ObserveTransfer). The first run of
// an op on a GPU in a bucket that has no data for it is the device's
// warm-up: it is counted in telemetry (Warmup) but neither learned from
// nor handed out (see engine.observe). Otherwise, when changes are
// tracked (Track), it only marks the bucket for Changes and counts the
// records that adds, after Close too. It does not allocate and is safe for concurrent use. It returns
// ErrForeignDecision for a decision this Scheduler did not
// make and ErrBadTiming for a non-positive or absurd duration.
func (s *Scheduler) Observe(d Decision, t backends.Timing) error {
	return s.ObserveRef(&d, t)
}

// ObserveRef is Observe of *d, for a caller that keeps its Decision in
// place (Handle.SelectInto).
func (s *Scheduler) ObserveRef(d *Decision, t backends.Timing) error {
	return s.ObserveTicket(&d.Ticket, t)
}

// ObserveTicket is Observe of the decision whose Ticket d is, for a
// caller that keeps only the Ticket.
func (s *Scheduler) ObserveTicket(d *Ticket, t backends.Timing) error {
	if d.s != s || d.b == nil || d.Backend < 0 || d.Backend >= s.n {
		return ErrForeignDecision
	}
	us := t.Micros()
	if !(us > 0 && us < maxObservedUs) {
		return badTiming(t, s.names[d.Backend])
	}
	b := d.b
	tr := s.track.Load()
	var records int // records the next Changes gains
	if b.isShape {  // a shape's bucket, then its parent's
		b.mu.Lock()
		had := b.kept()
		_, learned := s.e.observe(b, d.Backend, us, 0)
		records = s.mark(tr, b, had, learned)
		b.mu.Unlock()
		b = b.parent
	}
	var shift float64 // the shape's model against the bucket's
	if d.node != nil && b.shapes.Load() > 1 {
		shift = float64(d.node.lnModel[d.Backend]) - b.per[d.Backend].lnModel
	}
	b.mu.Lock()
	had := b.kept()
	alarm, learned := s.e.observe(b, d.Backend, us, shift)
	records += s.mark(tr, b, had, learned)
	var meanUs float64 // for the alarm's log
	if alarm && s.logInfo {
		meanUs = b.bb.Arms[d.Backend].MeanUs()
	}
	verdict := b.fb != nil && learned && s.fold.Load().verifyObserved(b, d.Backend, us)
	b.mu.Unlock()
	if verdict {
		s.fold.Load().settle(d.Backend)
	}
	if records > 0 {
		tr.add(uint32(b.id), records)
	}
	if alarm && s.logInfo {
		s.logAlarm(b.name, s.names[d.Backend], us, meanUs)
	}
	return nil
}

// Rule: what Select and Observe rarely do (log, build an error) is a
// call of its own, out of their bodies, which every op runs through.
// Reason: the code an op runs is what the core's instruction caches
// hold, and the Executor's figure moved by 20–60 ns with its layout
// (BenchmarkExecutorOnly, BENCHMARKS.md).

// logSwitch logs an incumbent switch in bucket to backend.
func (s *Scheduler) logSwitch(bucket, backend string) {
	s.log.Info("adaptive: incumbent switched", "bucket", bucket, "to", backend)
}

// logAlarm logs a change alarm in bucket on backend, after a run of us
// µs against a posterior mean of meanUs.
func (s *Scheduler) logAlarm(bucket, backend string, us, meanUs float64) {
	s.log.Info("adaptive: change alarm; posterior widened", "bucket", bucket, "backend", backend,
		"us", us, "mean_us", meanUs)
}

// badTiming builds Observe's ErrBadTiming error for t on backend.
func badTiming(t backends.Timing, backend string) error {
	return fmt.Errorf("%w: %v on %s", ErrBadTiming, t.Duration, backend)
}

// mark queues b for the next Changes after an observation that changed
// its posteriors (learned; had: b.kept() before it), b.mu held, and
// returns the records that Changes gains from b. Queued under b.mu,
// Close's pass over the buckets' locks knows every Observe that came
// before it has queued. A warm-up run (engine.observe) changed no
// posterior: there is nothing to hand out. t is s.track (nil: nothing is
// tracked).
func (s *Scheduler) mark(t *tracker, b *bucket, had Mask, learned bool) int {
	if !learned || t == nil {
		return 0
	}
	// A queued bucket's records are counted already: only an arm's first
	// data is a new one.
	switch {
	case !b.queued:
		s.queue(b)
		return b.kept().Count()
	case b.kept() != had:
		return 1
	}
	return 0
}

// index returns the index of the backend called name, or −1.
func (s *Scheduler) index(name string) int {
	for i := range s.n {
		if s.names[i] == name {
			return i
		}
	}
	return -1
}

// Backends returns the configured backends' names in Config order. The
// caller owns the returned slice.
func (s *Scheduler) Backends() []string { return append([]string(nil), s.names[:s.n]...) }

// BucketName returns the stable name of bucket id, or "" for an id this
// Scheduler has not assigned. It takes the bucket registry's lock: a
// Decision carries its bucket's name (Decision.BucketName) without one.
func (s *Scheduler) BucketName(id BucketID) string {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if int(id) >= len(s.buckets) {
		return ""
	}
	return s.buckets[id].name
}

// Close stops the Scheduler: later Selects fail with ErrClosed. When
// changes are tracked it returns once every Observe under way has marked
// its bucket, so that a Changes after it takes them all; an Observe after
// Close (of a decision made before) still marks its bucket. Close is
// idempotent.
func (s *Scheduler) Close() error {
	if s.closed.Swap(true) || s.track.Load() == nil {
		return nil
	}
	// An Observe queues its bucket under the bucket's lock: once every
	// lock has been taken, each Observe under way has.
	buckets, shapes := s.snapshot()
	for _, b := range append(buckets, shapes...) {
		b.mu.Lock()
		b.mu.Unlock() // empty: it waits for the Observes inside
	}
	return nil
}

// snapshot returns the buckets and the shapes' own buckets made so far:
// every shape's parent is among the buckets.
func (s *Scheduler) snapshot() (buckets, shapes []*bucket) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	return append([]*bucket(nil), s.buckets...), append([]*bucket(nil), s.shapes...)
}
