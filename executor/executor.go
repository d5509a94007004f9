package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/internal/host"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/trace"
)

// Config configures an Executor and the Scheduler it makes: one flat
// set of fields, each with one meaning (the Scheduler's take the
// defaults of adaptive.Config, which documents them further). Zero
// fields take the documented defaults.
type Config struct {
	// Backends are the backends to choose among, 1 to
	// adaptive.MaxBackends, with distinct Info().Name.
	Backends []backends.Backend
	// Strategy picks the backend; the zero value is adaptive.Automatic.
	Strategy adaptive.Strategy
	// Bandit is the bandit's tuning; zero fields take bandit's defaults.
	Bandit bandit.Config
	// Warm, when not nil, warm-starts the posteriors (history.DB.Load).
	Warm map[learned.Key]bandit.NormalGamma
	// Logger receives the Scheduler's decisions, switches and alarms, and
	// the Executor's back-offs of failed backends at warn. Nil logs
	// nothing.
	Logger *slog.Logger
	// Now is the clock of back-offs and of telemetry timestamps; nil
	// means time.Now.
	Now func() time.Time
	// Seed seeds the Scheduler's random sources, so runs replay exactly.
	Seed uint64
	// ShapeHits, Shards and NoCalibration are adaptive.Config's: when a
	// shape learns on its own, the shape cache's shards, and no start-up
	// calibration of CPUs.
	ShapeHits, Shards int
	NoCalibration     bool
	// Name is the Executor's backend name (Info().Name); "" means
	// "adaptive".
	Name string
	// Recorder, when not nil, receives one trace event per op (DESIGN.md §
	// Traces); Record never blocks, so a slow writer drops events rather
	// than slow the ops. The Executor does not close it.
	Recorder *trace.Recorder
	// BackoffBase is how long a failed backend is kept out before it is
	// probed again (one op let through), doubling with each consecutive
	// failure up to BackoffMax. Defaults: 50 ms and 5 s.
	BackoffBase, BackoffMax time.Duration
	// CloseBackends makes Close close every backend in Backends (the
	// Executor then owns them, as when it was opened through
	// backends.Open("adaptive:...")).
	CloseBackends bool
	// Synchronous makes each op wait for its completion, as a plain
	// backend's Run does: the Timing Run returns is the kernel's, and no
	// queue is priced. Otherwise Run queues the op on its backend and
	// returns at once (DESIGN.md § Queued execution).
	Synchronous bool
	// WeightBudget[i] is the bytes of weight copies (MarkWeight) that
	// backend i may hold; a negative entry, or a backend past the slice's
	// end, has no budget. A weight an op needs on a backend where the
	// cache does not keep it is copied for that op alone (DESIGN.md §
	// Weights in host memory).
	WeightBudget []int64
	// Placer, when not nil, chooses every op's backend in the Strategy's
	// stead: a baseline placement (eval.Placement) run through the
	// Executor on real work, to be compared with the bandit (DESIGN.md §
	// Evaluation). The Scheduler still learns from every op.
	Placer Placer
}

// Learned is what Placer.Place returns to leave an op to the Strategy:
// the Scheduler decides it, with its own reasons, as without a Placer (a
// placement that runs whole steps its own way and others the learner's).
const Learned = -1

// Placer chooses the backend of every op for Config.Placer. The
// Executor calls it under a lock of its own, so it needs not be safe for
// concurrent use; it must not be shared with another Executor.
type Placer interface {
	// Name names the placement.
	Name() string
	// Place returns the index in Config.Backends of the backend that
	// should run spec, of the Scheduler's bucket, with its inputs where
	// res says. A backend the op cannot run there (out of range,
	// incapable, excluded after a failure) falls back to the bandit's
	// choice (adaptive.Scheduler.SelectOn); Learned leaves the op to the
	// Strategy, as if there were no Placer. spec's shapes must not be
	// kept. (By value: pointers handed to an interface make every op's
	// spec and residency escape to the heap.)
	Place(spec kernels.Spec, res adaptive.Residency, bucket adaptive.BucketID) int
	// Observed reports the measured compute duration in µs of an op of
	// bucket that ran on backend.
	Observed(bucket adaptive.BucketID, backend int, us float64)
}

// LearnedSeer is a Placer told the backend the Strategy chose for each
// op Place left to it (Learned), in the order the ops were decided, so
// that it can replay the learner's placement (cmd/infer's frozen step
// mode). The Executor calls it under the Placer's lock.
type LearnedSeer interface {
	SawLearned(bucket adaptive.BucketID, backend int)
}

func (c *Config) validate() error {
	if c.Name == "" {
		c.Name = "adaptive"
	}
	if c.BackoffBase < 0 || c.BackoffMax < 0 {
		return fmt.Errorf("%w: negative back-off %v, %v", adaptive.ErrConfig, c.BackoffBase, c.BackoffMax)
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = 50 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// scheduler returns the Scheduler's part of c.
func (c *Config) scheduler() adaptive.Config {
	return adaptive.Config{Backends: c.Backends, Strategy: c.Strategy, Bandit: c.Bandit, Warm: c.Warm,
		Logger: c.Logger, Now: c.Now, Seed: c.Seed, ShapeHits: c.ShapeHits, Shards: c.Shards,
		NoCalibration: c.NoCalibration}
}

// Executor runs ops adaptively on several backends while itself being a
// backends.Backend, so code written against one backend runs on all of
// them unchanged (DESIGN.md § The data path). Its buffers are Tensors that
// know where their valid copies live; each op goes through Select, moves
// the inputs the chosen backend lacks (timed, feeding the link model),
// runs, and feeds the kernel's Timing to Observe: queued on the backend,
// unless Config.Synchronous, with the timing observed when it arrives. A backend that fails is
// kept out with exponential back-off while the op falls back to the next
// best capable backend; one that runs out of memory has its cold copies
// evicted; tensors lost with a device are recomputed from their lineage.
//
// An Executor is safe for concurrent use by many goroutines. Ops on
// distinct tensors run in parallel; ops that read the same tensor (shared
// weights) run in parallel too; an op that writes a tensor waits for those
// that read it. Concurrent writes of one tensor, or a write concurrent with
// a read of it, are the caller's race, as with any backend. An op takes
// the locks of its own tensors and its bucket's, and a shard of the
// residency registry when it places or frees a device copy; only while a
// backend is in back-off does it take the back-off's lock, and only a
// timed device copy takes its link direction's (Scheduler.ObserveTransferAt).
// Queued, an op holds its tensors' locks (all for writing) only while it
// is queued, plus its lane's and its hardware group's briefly.
type Executor struct {
	cfg Config
	s   *adaptive.Scheduler
	bes []backends.Backend
	// alias holds the CPU backends that work on a tensor's host copy in
	// place (backends.HostMapper): wherever the host copy is valid, so is
	// theirs, and an op they run writes the host copy. No copy is ever
	// made for them and none is registered against their memory.
	alias adaptive.Mask
	// anywhere is host memory and every backend: where an unwritten
	// tensor's (undefined) contents are as good as valid.
	anywhere adaptive.Mask
	// maxTensor is the most bytes a tensor may hold: the largest of the
	// machine's physical memory and each backend's (Alloc).
	maxTensor int64
	info      backends.Info

	ids atomic.Uint64

	health health
	res    registry
	wc     weightCache
	weighs bool // some backend has a weight budget

	ops         [adaptive.MaxBackends]atomic.Int64
	failures    [adaptive.MaxBackends]atomic.Int64
	copiesIn    [adaptive.MaxBackends]atomic.Int64
	bytesIn     [adaptive.MaxBackends]atomic.Int64
	transferNs  [adaptive.MaxBackends]atomic.Int64
	fallbacks   atomic.Int64
	latency     latency // sampled decision times (Stats.DecisionLatency)
	memRetries  atomic.Int64
	evictions   atomic.Int64
	recoveries  atomic.Int64
	invalidated atomic.Int64
	seq         atomic.Int64 // trace sequence
	closeMu     sync.Mutex
	closeDone   bool
	placeMu     sync.Mutex  // serialises Config.Placer
	seer        LearnedSeer // Config.Placer, when it is one
	closeErr    error

	// Queued work (not Synchronous). gate is held for reading while work
	// is queued, and for writing by recovery and Close; log holds the
	// work queued and not yet seen to succeed, in queue order.
	lanes       [adaptive.MaxBackends]lane
	groupOf     [adaptive.MaxBackends]int
	loads       []load
	epoch       time.Time
	completed   chan *rec
	obs, ran    *notifier // work observed; work run on an ownQueue
	watchers    sync.WaitGroup
	observer    sync.WaitGroup
	gate        sync.RWMutex
	logMu       sync.Mutex
	log         []*rec
	pendingFail atomic.Bool
	recovering  atomic.Bool   // recoverFailed runs (the gate's write lock held)
	lostMask    atomic.Uint32 // backends lost while work was queued: recovery drops their copies
	closed      atomic.Bool
	virtual     atomic.Bool   // some queued work is simulated (backends.VirtualSpan)
	doneV       atomic.Uint64 // latest end of simulated work seen Done (float64 bits, µs)
	simulated   atomic.Uint32 // adaptive.Mask of backends whose timings are simulated
	errMu       sync.Mutex
	asyncErr    error

	// virt is the simulated work queued and not yet handed to the
	// observer, in queue order (observeVirtual); virtDone its scratch.
	virtMu   sync.Mutex
	virt     []*rec
	virtDone []*rec
}

var _ backends.Backend = (*Executor)(nil)

// New validates cfg and builds the Executor and its Scheduler.
func New(cfg Config) (*Executor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s, err := adaptive.New(cfg.scheduler())
	if err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg, s: s, bes: append([]backends.Backend(nil), cfg.Backends...)}
	e.seer, _ = cfg.Placer.(LearnedSeer)
	models := make([]string, len(e.bes))
	e.anywhere = adaptive.Host
	e.maxTensor = host.MemTotal()
	for i, b := range e.bes {
		models[i] = s.BackendName(i)
		e.anywhere |= adaptive.Backend(i)
		e.maxTensor = max(e.maxTensor, b.Info().Memory)
		if b.Info().Kind == backends.CPU && mapsHost(b) {
			e.alias |= adaptive.Backend(i)
		}
	}
	e.res.init()
	if err := e.initWeights(); err != nil {
		return nil, err
	}
	e.info = backends.Info{Name: cfg.Name, Kind: backends.CPU, Platform: "adaptive",
		Model: "adaptive(" + strings.Join(models, ",") + ")", Runtime: "adaptsched", SharedMemory: true}
	if !cfg.Synchronous {
		e.startLanes()
	}
	return e, nil
}

// mapsHost reports whether b maps host memory: it implements
// backends.HostMapper (a wrapper may forward it without the wrapped
// backend supporting it) and maps a probe.
func mapsHost(b backends.Backend) bool {
	hm, ok := b.(backends.HostMapper)
	if !ok {
		return false
	}
	buf, err := hm.MapHost(allocHost(4))
	if err != nil {
		return false
	}
	buf.Free()
	return true
}

// Scheduler returns the Executor's Scheduler, for its Telemetry.
func (e *Executor) Scheduler() *adaptive.Scheduler { return e.s }

// Info implements backends.Backend: the Executor reads and writes host
// memory (SharedMemory), whatever devices lie behind it.
func (e *Executor) Info() backends.Info { return e.info }

// Supports implements backends.Backend: nil when some allowed backend can
// run s, else an error wrapping ErrUnsupported with each backend's reason.
func (e *Executor) Supports(s kernels.Spec) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", backends.ErrUnsupported, e.cfg.Name, err)
	}
	var why []string
	allowed := e.s.Allowed()
	for i, b := range e.bes {
		if !allowed.Has(i) {
			continue
		}
		err := b.Supports(s)
		if err == nil {
			return nil
		}
		why = append(why, err.Error())
	}
	return fmt.Errorf("%w: %s: %v (%s)", backends.ErrUnsupported, e.cfg.Name, s, strings.Join(why, "; "))
}

// Close implements backends.Backend: CloseContext without a deadline.
func (e *Executor) Close() error { return e.CloseContext(context.Background()) }

// CloseContext waits for the queued work to complete and be observed
// (re-running what fails, as Sync), then closes the Scheduler (handing
// the posteriors to the store, which the caller closes), frees every
// device copy, and closes the backends when CloseBackends is set. When
// ctx ends first it returns ctx's error and leaves the Executor open.
// The error of queued work that could not run is joined to its result.
// Tensors must not be used afterwards. Close is idempotent.
func (e *Executor) CloseContext(ctx context.Context) error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closeDone {
		return e.closeErr
	}
	var errs []error
	if !e.cfg.Synchronous {
		err := e.settle(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("executor: Close: %w", ctx.Err())
		}
		errs = append(errs, err)
		e.gate.Lock()
		e.closed.Store(true)
		e.gate.Unlock()
		// Work queued after settle looked, before the gate closed (a Run
		// racing Close), is observed and its failures run again too
		// (TestCloseRecoversRacingRun).
		errs = append(errs, e.settle(context.Background()))
		e.stopLanes()
	}
	e.closed.Store(true)
	errs = append(errs, e.s.Close())
	for a := range e.bes {
		e.dropCopies(a)
	}
	if e.cfg.CloseBackends {
		for _, b := range e.bes {
			errs = append(errs, b.Close())
		}
	}
	e.closeErr = errors.Join(errs...)
	e.closeDone = true
	return e.closeErr
}

func init() {
	backends.Register("adaptive", openExecutor)
}

// openExecutor is the registry's factory: "adaptive:cpu,cpu1,sim:h100" opens each
// listed backend (their packages must be imported) and an Executor that
// owns them, with the default Config.
func openExecutor(arg string) (backends.Backend, error) {
	if arg == "" {
		return nil, &backends.UnavailableError{Backend: "adaptive", Reason: "no backends listed: open adaptive:cpu,cpu1,...", NeedsParam: true}
	}
	var bes []backends.Backend
	closeAll := func() {
		for _, b := range bes {
			b.Close()
		}
	}
	for _, name := range strings.Split(arg, ",") {
		b, err := backends.Open(strings.TrimSpace(name))
		if err != nil {
			closeAll()
			return nil, err
		}
		bes = append(bes, b)
	}
	e, err := New(Config{Backends: bes, CloseBackends: true})
	if err != nil {
		closeAll()
		return nil, err
	}
	return e, nil
}
