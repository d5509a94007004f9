package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Options configure a Device. Build them with DefaultOptions and the With
// methods; a zero Options is valid too (seed 0, computing results).
type Options struct {
	seed        uint64
	skipCompute bool
	events      []Event
	timeline    *Timeline
}

// DefaultOptions returns the defaults: seed 1, results computed with the
// reference kernels, no scheduled events, a Timeline of the device's own
// in the Serial model.
func DefaultOptions() Options { return Options{seed: 1} }

// WithTimeline returns o with the virtual clock the device runs on
// (default: a Timeline of its own in the Serial model, so that a device
// opened alone reports the durations it always has). Devices of one run
// share one Timeline, which reports the run's makespan.
func (o Options) WithTimeline(t *Timeline) Options { o.timeline = t; return o }

// WithSeed returns o with the seed of the device's noise (default 1): two
// devices with the same profile, seed and calls report the same durations.
func (o Options) WithSeed(seed uint64) Options { o.seed = seed; return o }

// WithSkipCompute returns o set to skip computing results (default false):
// Run then only models the duration and leaves out untouched, for fast
// evaluation of schedules.
func (o Options) WithSkipCompute(skip bool) Options { o.skipCompute = skip; return o }

// WithEvents returns o with events scheduled on the device (default none);
// their At counts the device's Run calls from 0, and the allocations an
// event failed (Alloc).
func (o Options) WithEvents(events ...Event) Options {
	o.events = append([]Event(nil), events...)
	return o
}

// Device is a simulated backend: buffers live in host memory, Run computes
// with kernels.Reference (unless told to skip) and reports the duration
// its profile's ground truth draws, without sleeping; Write and Read report
// the modelled link time. Scheduled events slow it down or make it fail.
// A Device is safe for concurrent use.
type Device struct {
	prof   Profile
	opt    Options
	mu     sync.Mutex
	rng    *rand.Rand
	runs   int64           // Run calls so far: the op index events count
	seen   map[string]bool // kernels (op, dtype) already run once (warm-up)
	used   int64           // bytes allocated and not freed
	closed bool
	tl     *Timeline
	lanes  []int      // the device's lanes on tl: compute, then the link if it has one
	failed []*work    // queued work that failed, for Sync
	gather *gathering // ops gathered and not launched; nil when not gathering (gather.go)
	// segments and gatheredSince count the gatherings and ops launched
	// since Record, lastGathering the ops of the last Record to Flush.
	segments, gatheredSince, lastGathering int
	// gatheredUs and gatheredN are the device time and count of the ops
	// gathered so far, whose mean, with the profile's host costs, plans
	// the segments (backends.SegmentPlanner).
	gatheredUs float64
	gatheredN  int
	planner    backends.SegmentPlanner
	launching  sync.Mutex // held while a gathering is placed
	// losable is set when a DeviceLost event is scheduled: pending then
	// keeps, in queue order, the work queued that may not have ended,
	// which the loss fails (lose); it keeps too the work with roots,
	// which another device's loss may fail. lostErr is the loss once a
	// call has met it, lostDone set once lose has run.
	losable  bool
	pending  []*work
	lostErr  error
	lostDone bool
}

var _ backends.Backend = (*Device)(nil)

// Open returns a Device for the profile called name.
func Open(name string, opt Options) (*Device, error) {
	p, err := LookupProfile(name)
	if err != nil {
		return nil, &backends.UnavailableError{Backend: "sim:" + name, Reason: err.Error(), Cause: err}
	}
	return New(p, opt)
}

// New returns a Device that behaves as p (copied). It fails when p or one
// of the events is invalid.
func New(p *Profile, opt Options) (*Device, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	for _, e := range opt.events {
		if err := e.Validate(); err != nil {
			return nil, err
		}
	}
	d := &Device{
		prof: *p, opt: opt,
		rng:  rand.New(rand.NewPCG(opt.seed, 0x5eed_0f_de71ce)),
		seen: map[string]bool{},
		tl:   opt.timeline,
	}
	if d.tl == nil {
		d.tl = NewTimeline(Serial)
	}
	for _, e := range opt.events {
		d.losable = d.losable || e.Kind == DeviceLost
	}
	d.lanes = append(d.lanes, d.tl.Lane("sim:"+p.Name))
	if !p.Shared {
		d.lanes = append(d.lanes, d.tl.Lane("sim:"+p.Name+" link"))
	}
	return d, nil
}

// Timeline returns the virtual clock the device runs on.
func (d *Device) Timeline() *Timeline { return d.tl }

// Profile returns a copy of the device's profile.
func (d *Device) Profile() Profile { return d.prof }

// Info implements backends.Backend.
func (d *Device) Info() backends.Info { return d.prof.Info() }

// Supports implements backends.Backend: every valid op of the catalogue;
// Opaque ops are not executable.
func (d *Device) Supports(s kernels.Spec) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %w", backends.ErrUnsupported, err)
	}
	if s.Op == kernels.Opaque {
		return fmt.Errorf("%w: %v is opaque", backends.ErrUnsupported, s)
	}
	return nil
}

func (d *Device) fail(op string, err error) error {
	return &backends.DeviceError{Backend: "sim:" + d.prof.Name, Op: op, Err: err}
}

// injected returns the error an event injects into op i, if any.
func (d *Device) injected(i int64, alloc bool) error {
	for _, e := range d.opt.events {
		if !e.covers(i) {
			continue
		}
		switch {
		case e.Kind == DeviceLost:
			return fmt.Errorf("%w (scheduled at op %d)", backends.ErrDeviceLost, e.At)
		case e.Kind == OutOfMemory:
			return fmt.Errorf("%w (scheduled at op %d)", backends.ErrOutOfMemory, e.At)
		case e.Kind == TransientError && !alloc:
			return fmt.Errorf("%w (scheduled at op %d)", backends.ErrTransient, e.At)
		}
	}
	return nil
}

// Alloc implements backends.Backend. It fails with ErrOutOfMemory when the
// profile's memory would be exceeded or an OutOfMemory event covers the
// next op.
func (d *Device) Alloc(n int64) (backends.Buffer, error) {
	if n < 0 {
		return nil, d.fail("alloc", fmt.Errorf("%w: %d bytes", kernels.ErrBufferSize, n))
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, d.fail("alloc", backends.ErrDeviceLost)
	}
	if err := d.lost(d.runs); err != nil {
		d.mu.Unlock()
		d.lose()
		return nil, d.fail("alloc", err)
	}
	defer d.mu.Unlock()
	if err := d.injected(d.runs, true); err != nil {
		// A failed allocation counts as one of the event's Span attempts,
		// as a failed run does: otherwise a device that runs out of memory
		// on allocations would stay out of memory for ever.
		d.runs++
		return nil, d.fail("alloc", err)
	}
	if d.prof.Memory > 0 && d.used+n > d.prof.Memory {
		return nil, d.fail("alloc", fmt.Errorf("%w: %d bytes asked, %d of %d in use", backends.ErrOutOfMemory, n, d.used, d.prof.Memory))
	}
	d.used += n
	return &simBuffer{HostBuffer: backends.NewHostBuffer(d, n), dev: d}, nil
}

// MapHost implements backends.HostMapper for CPU profiles, whose kernels
// run on host memory in place: the buffer aliases b and counts against no
// device memory. Other profiles fail with ErrUnsupported (an integrated
// GPU's buffers are its own allocations, copied into).
func (d *Device) MapHost(b []byte) (backends.Buffer, error) {
	if d.prof.Kind != backends.CPU {
		return nil, d.fail("map", fmt.Errorf("%w: %s is not a CPU", backends.ErrUnsupported, d.prof.Name))
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, d.fail("map", backends.ErrDeviceLost)
	}
	h, err := backends.WrapHost(d, b)
	if err != nil {
		return nil, d.fail("map", err)
	}
	return &simBuffer{HostBuffer: h, dev: d, mapped: true}, nil
}

var _ backends.HostMapper = (*Device)(nil)

// simBuffer returns its bytes to the device's memory count when freed
// (a mapped one holds none).
type simBuffer struct {
	*backends.HostBuffer
	dev    *Device
	mapped bool
	once   sync.Once
}

// Free implements backends.Buffer.
func (b *simBuffer) Free() {
	b.once.Do(func() {
		b.HostBuffer.Free()
		if b.mapped {
			return
		}
		b.dev.mu.Lock()
		b.dev.used -= b.Size()
		b.dev.mu.Unlock()
	})
}

func (d *Device) bytesOf(b backends.Buffer) ([]byte, error) {
	sb, ok := b.(*simBuffer)
	if !ok || sb.dev != d {
		return nil, backends.ErrForeignBuffer
	}
	return backends.HostBytes(d, sb.HostBuffer)
}

// transfer returns the modelled time of a copy of n bytes.
//
// Rule: Contention's link factor slows a memcpy in shared memory too.
// Reason: the second tenant it stands for shares the memory the copy
// streams through; the copy ran at full speed beside compute slowed by
// the same event (TestContentionSlowsCopies).
func (d *Device) transfer(n int64) backends.Timing {
	_, link := Slowdown(d.opt.events, d.runs)
	us := d.prof.LinkUs(n)
	if d.prof.Shared {
		_, gbps := d.prof.peaks()
		us = float64(n) / (gbps * 1e3 * d.prof.BWEff) // a memcpy in shared memory
	}
	us *= link
	return backends.Timing{Duration: micros(us), Clock: backends.Simulated}
}

// lost reports ErrDeviceLost once the device is closed or a DeviceLost
// event covers op i (d.mu held). The first call an event's loss meets
// records it: the caller then calls lose, once it has let go of d.mu.
func (d *Device) lost(i int64) error {
	if d.closed {
		return backends.ErrDeviceLost
	}
	if d.lostErr != nil {
		return d.lostErr
	}
	for _, e := range d.opt.events {
		if e.Kind == DeviceLost && i >= e.At {
			d.lostErr = fmt.Errorf("%w (scheduled at op %d)", backends.ErrDeviceLost, e.At)
			return d.lostErr
		}
	}
	return nil
}

// lose fails the work queued on d that had not ended when its loss was
// met (by the host's clock now), once: each such work's Wait, or else
// the next Sync, reports a *backends.DeviceError naming its op and
// wrapping the loss; its time after the clock leaves its lane and the
// makespan; what is gathered is never launched. Work queued afterwards
// fails at once. The dependents of the failed work (work.dependents),
// other devices' work that had not started, fail too, with an error of
// their own device wrapping ErrDependency and the loss, and leave their
// lanes likewise.
//
// Rule: a lost device's unfinished work fails, as backends/rocm's: once
// a call has met the device's sticky error, the synchronisation with
// each event still queued (Wait, Sync) returns it, and the event's
// DeviceError names its op, so that the Executor falls back and runs it
// again (TestLostDeviceFailsQueuedWork).
func (d *Device) lose() {
	d.launching.Lock() // no gathering is being placed
	defer d.launching.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lostErr == nil || d.lostDone {
		return
	}
	d.lostDone = true
	pending := d.pending
	d.pending = nil
	d.tl.lose(d.lanes, func(hostUs float64) (gone []span) {
		for _, w := range pending {
			if w.gone() { // by another device's loss
				d.failed = append(d.failed, w)
				continue
			}
			placed := w.placed()
			if placed && w.end <= hostUs {
				continue
			}
			e := &backends.DeviceError{Backend: "sim:" + d.prof.Name, Op: w.op, Err: d.lostErr}
			w.lost.Store(e)
			d.failed = append(d.failed, w)
			if placed {
				gone = append(gone, span{lane: w.lane, start: w.start, end: w.end})
			}
			for _, x := range w.dependents {
				if x.lost.Load() == nil { // its Wait, or its device's Sync, reports it (settled)
					x.lost.Store(&backends.DeviceError{Backend: "sim:" + x.dev.prof.Name, Op: x.op,
						Err: fmt.Errorf("%w: %w", ErrDependency, e)})
					gone = append(gone, span{lane: x.lane, start: x.start, end: x.end})
				}
			}
		}
		return gone
	})
	if g := d.gather; g != nil { // its ops failed above: waiters on it go on
		d.gather = nil
		close(g.placed)
	}
}

// admit adds w, just queued, to the work a loss would fail (d.mu held),
// after settling the work at the head.
func (d *Device) admit(w *work) {
	if !d.losable && len(w.roots) == 0 {
		return
	}
	now := d.tl.HostUs()
	n := 0
	for n < len(d.pending) && d.settled(d.pending[n], now) {
		n++
	}
	clear(d.pending[:n])
	d.pending = append(d.pending[n:], w)
}

// settled reports whether pending work w can fail no more (d.mu held):
// it ended by the host's clock now, or it failed by another device's
// loss, which it adds to the failures for Sync.
func (d *Device) settled(w *work, now float64) bool {
	if w.gone() {
		d.failed = append(d.failed, w)
		return true
	}
	if !w.placed() {
		return false
	}
	_, end := w.span()
	return end <= now
}

// Close implements backends.Backend.
func (d *Device) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// sample draws one duration around base µs: lognormal noise of mean 1,
// a spike with probability SpikeProb, the warm-up on a first run.
func (p *Profile) sample(r *rand.Rand, base float64, first bool) float64 {
	us := base
	if p.Sigma > 0 {
		us *= math.Exp(p.Sigma*r.NormFloat64() - p.Sigma*p.Sigma/2)
	}
	if p.SpikeProb > 0 && r.Float64() < p.SpikeProb {
		us *= p.SpikeFactor
	}
	if first && p.WarmupFactor > 1 {
		us *= p.WarmupFactor
	}
	return us
}

// opName names s's op: its op, or an opaque op's own name.
func opName(s kernels.Spec) string {
	if s.Op == kernels.Opaque && s.Params.Name != "" {
		return s.Params.Name
	}
	return s.Op.String()
}

// KernelKey names the kernel that runs s, what warms up once per device
// (Profile.WarmupFactor): its op (or opaque name) and dtype, not its shape.
func KernelKey(s kernels.Spec) string { return opName(s) + "/" + s.DType.String() }

func micros(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }
