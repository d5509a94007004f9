package adaptive

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/kernels"
)

// ExecutorConfig configures an Executor: the Scheduler's Config plus what
// the Executor adds. Zero fields take the documented defaults.
type ExecutorConfig struct {
	Config
	// Name is the Executor's backend name (Info().Name); "" means
	// "adaptive".
	Name string
	// Recorder, when not nil, receives one trace event per op (DESIGN.md §
	// Traces); Record never blocks, so a slow writer drops events rather
	// than slow the ops. The Executor does not close it.
	Recorder *history.Recorder
	// BackoffBase is how long a failed backend is kept out before it is
	// probed again (one op let through), doubling with each consecutive
	// failure up to BackoffMax. Defaults: 50 ms and 5 s.
	BackoffBase, BackoffMax time.Duration
	// CloseBackends makes Close close every backend in Backends (the
	// Executor then owns them, as when it was opened through
	// backends.Open("adaptive:...")).
	CloseBackends bool
}

func (c *ExecutorConfig) validate() error {
	if c.Name == "" {
		c.Name = "adaptive"
	}
	if c.BackoffBase < 0 || c.BackoffMax < 0 {
		return fmt.Errorf("%w: negative back-off %v, %v", ErrConfig, c.BackoffBase, c.BackoffMax)
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
	return nil
}

// Executor runs ops adaptively on several backends while itself being a
// backends.Backend, so code written against one backend runs on all of
// them unchanged (DESIGN.md § The data path). Its buffers are Tensors that
// know where their valid copies live; each op goes through Select, moves
// the inputs the chosen backend lacks (timed, feeding the link model),
// runs, and feeds the kernel's Timing to Observe. A backend that fails is
// kept out with exponential back-off while the op falls back to the next
// best capable backend; one that runs out of memory has its cold copies
// evicted; tensors lost with a device are recomputed from their lineage.
//
// An Executor is safe for concurrent use by many goroutines. Ops on
// distinct tensors run in parallel; ops that read the same tensor (shared
// weights) run in parallel too; an op that writes a tensor waits for those
// that read it. Concurrent writes of one tensor, or a write concurrent with
// a read of it, are the caller's race, as with any backend.
type Executor struct {
	cfg    ExecutorConfig
	s      *Scheduler
	bes    []backends.Backend
	n      int
	names  []string
	shared Mask // backends reading host memory directly: no link to observe
	// alias holds the CPU backends that work on a tensor's host copy in
	// place (backends.HostMapper): wherever the host copy is valid, so is
	// theirs, and an op they run writes the host copy. No copy is ever
	// made for them and none is registered against their memory.
	alias Mask
	info  backends.Info

	ids  atomic.Uint64
	tick atomic.Int64 // op counter: last-use stamps and trace sequence

	healthMu sync.Mutex
	sick     atomic.Uint32 // Mask of backends in back-off or probing
	health   [MaxBackends]healthState

	resMu    sync.Mutex
	resident [MaxBackends]map[*Tensor]struct{} // tensors with a buffer on each backend

	ops         [MaxBackends]atomic.Int64
	failures    [MaxBackends]atomic.Int64
	copiesIn    [MaxBackends]atomic.Int64
	bytesIn     [MaxBackends]atomic.Int64
	transferNs  [MaxBackends]atomic.Int64
	fallbacks   atomic.Int64
	memRetries  atomic.Int64
	evictions   atomic.Int64
	recoveries  atomic.Int64
	invalidated atomic.Int64
	seq         atomic.Int64 // trace sequence
	closeOnce   sync.Once
	closeErr    error
	scratchPool sync.Pool
}

// healthState is one backend's back-off (healthMu held).
type healthState struct {
	failures int
	until    time.Time
	probing  bool
	lastErr  error
}

var _ backends.Backend = (*Executor)(nil)

// NewExecutor validates cfg and builds the Executor and its Scheduler.
func NewExecutor(cfg ExecutorConfig) (*Executor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s, err := New(cfg.Config)
	if err != nil {
		return nil, err
	}
	e := &Executor{cfg: cfg, s: s, bes: append([]backends.Backend(nil), cfg.Backends...), n: len(cfg.Backends)}
	var models []string
	for i, b := range e.bes {
		in := b.Info()
		e.names = append(e.names, in.Name)
		models = append(models, in.Name)
		if in.SharedMemory || in.Kind == backends.CPU {
			e.shared |= Backend(i)
		}
		if in.Kind == backends.CPU && mapsHost(b) {
			e.alias |= Backend(i)
		}
		e.resident[i] = map[*Tensor]struct{}{}
	}
	e.info = backends.Info{Name: cfg.Name, Kind: backends.CPU, Platform: "adaptive",
		Model: "adaptive(" + strings.Join(models, ",") + ")", Runtime: "adaptsched", SharedMemory: true}
	e.scratchPool.New = func() any { return new(opScratch) }
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

// Scheduler returns the Executor's Scheduler, for Telemetry and
// Collectors.
func (e *Executor) Scheduler() *Scheduler { return e.s }

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
	for i, b := range e.bes {
		if e.s.only >= 0 && i != e.s.only {
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

// Tensor is the Executor's Buffer: n bytes whose valid copies may sit in
// host memory and on any of the backends. Alloc reserves nothing; a copy
// is made where an op first needs it and stays valid until the tensor is
// written.
type Tensor struct {
	e    *Executor
	id   uint64
	size int64

	mu      sync.RWMutex
	freed   bool
	valid   Mask // Host and backend bits
	host    []byte
	copies  [MaxBackends]backends.Buffer
	lastUse [MaxBackends]int64
	version uint64
	lin     lineage
	// readers is where the current version has been read (backends whose
	// ops read it, Host for the program); consumers is where the last
	// version that was read was: where a new version will likely be
	// needed too, which Select charges moving the output to
	// (Residency.Consumers).
	readers, consumers Mask
}

// newVersion notes that t is being overwritten (t.mu held).
func (t *Tensor) newVersion() {
	t.consumers = t.consumersHint()
	t.readers = 0
}

// consumersHint is where the value about to overwrite t will likely be
// read: where t's current value was, else where the last one read was
// (t.mu held).
func (t *Tensor) consumersHint() Mask {
	if t.readers != 0 {
		return t.readers
	}
	return t.consumers
}

// lineage is the op that produced a tensor's current version: enough to
// recompute it when its only copy was lost with a device. Its slices are
// reused across writes, so that recording it does not allocate.
type lineage struct {
	ok     bool
	spec   kernels.Spec
	dims   []int
	shapes []kernels.Shape
	in     []*Tensor
	vers   []uint64
}

var _ backends.Buffer = (*Tensor)(nil)

// Size implements backends.Buffer.
func (t *Tensor) Size() int64 { return t.size }

// Valid returns where the tensor's valid copies are: Host and backend
// bits (Config.Backends order).
func (t *Tensor) Valid() Mask {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.valid
}

// Free implements backends.Buffer: it releases every copy. Free is
// idempotent.
func (t *Tensor) Free() {
	t.mu.Lock()
	if t.freed {
		t.mu.Unlock()
		return
	}
	t.freed = true
	t.host = nil
	t.valid = 0
	var held Mask
	for a, c := range t.copies {
		if c != nil {
			c.Free()
			t.copies[a] = nil
			held |= Backend(a)
		}
	}
	t.lin = lineage{}
	t.mu.Unlock()
	t.e.unregister(t, held)
}

// Alloc implements backends.Backend. It reserves no memory: copies are
// made where ops need them.
func (e *Executor) Alloc(n int64) (backends.Buffer, error) {
	if n < 0 {
		return nil, &backends.DeviceError{Backend: e.cfg.Name, Op: "alloc", Err: fmt.Errorf("%w: %d bytes", kernels.ErrBufferSize, n)}
	}
	return &Tensor{e: e, id: e.ids.Add(1), size: n}, nil
}

// tensorOf returns b as a live Tensor of e.
func (e *Executor) tensorOf(b backends.Buffer) (*Tensor, error) {
	t, ok := b.(*Tensor)
	if !ok || t == nil || t.e != e {
		return nil, backends.ErrForeignBuffer
	}
	return t, nil
}

// allocHost returns n bytes of 4-byte aligned host memory.
func allocHost(n int64) []byte {
	return kernels.AsBytes(make([]float32, (n+3)/4))[:n:n]
}

// Write implements backends.Backend: the host copy becomes the only valid
// one (device copies stay allocated for reuse). The timing is the copy's
// wall-clock time.
func (e *Executor) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	t, err := e.tensorOf(dst)
	if err != nil {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write", Err: err}
	}
	if int64(len(src)) != t.size {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write",
			Err: fmt.Errorf("%w: %d bytes into a tensor of %d", kernels.ErrBufferSize, len(src), t.size)}
	}
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write", Err: backends.ErrForeignBuffer}
	}
	if t.host == nil {
		t.host = allocHost(t.size)
	}
	copy(t.host, src)
	t.valid = Host | e.alias
	t.newVersion()
	t.version++
	t.lin.ok = false
	return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
}

// Read implements backends.Backend: from the host copy, else from a valid
// device copy (timed, feeding the link model), which then stays cached in
// host memory. A tensor lost with its device is recomputed first.
func (e *Executor) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	t, err := e.tensorOf(src)
	if err != nil {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read", Err: err}
	}
	if int64(len(dst)) != t.size {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read",
			Err: fmt.Errorf("%w: tensor of %d bytes into %d", kernels.ErrBufferSize, t.size, len(dst))}
	}
	start := time.Now()
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read", Err: backends.ErrForeignBuffer}
		}
		if t.valid&Host == 0 {
			if _, err := e.toHost(t, attempt); err != nil {
				t.mu.Unlock()
				if attempt < maxAttempts {
					continue
				}
				return backends.Timing{}, err
			}
		}
		copy(dst, t.host)
		t.readers |= Host
		t.mu.Unlock()
		return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
	}
}

// maxAttempts bounds the retries of one copy or op around failures.
const maxAttempts = 8

// toHost makes t's host copy valid (t.mu held, t.valid has no Host bit).
// With no valid copy left it recomputes t (releasing and retaking t.mu).
// A failed read marks its backend failed and returns the error; the caller
// retries. It returns the read's µs.
func (e *Executor) toHost(t *Tensor, depth int) (float64, error) {
	if t.valid == 0 {
		t.mu.Unlock()
		err := e.recover(t, depth)
		t.mu.Lock()
		if err != nil {
			return 0, err
		}
		if t.valid&Host != 0 {
			return 0, nil
		}
		if t.valid == 0 {
			return 0, fmt.Errorf("%w: tensor %d lost again during recovery", ErrTensorLost, t.id)
		}
	}
	j := e.sourceOf(t.valid)
	if t.host == nil {
		t.host = allocHost(t.size)
	}
	tm, err := e.bes[j].Read(t.host, t.copies[j])
	if err != nil {
		t.mu.Unlock()
		e.failed(j, err)
		t.mu.Lock()
		return 0, err
	}
	e.observeCopy(j, false, t.size, tm)
	t.valid |= Host | e.alias
	return tm.Micros(), nil
}

// sourceOf picks the copy to read from: a shared-memory backend if one
// holds it, else the lowest-numbered.
func (e *Executor) sourceOf(valid Mask) int {
	if v := valid & e.shared; v != 0 {
		return lowest(v)
	}
	return lowest(valid &^ Host)
}

// observeCopy counts a copy over backend a's link and feeds its timing to
// the link model (links of shared-memory backends are not modelled).
func (e *Executor) observeCopy(a int, toDevice bool, bytes int64, tm backends.Timing) {
	if toDevice {
		e.copiesIn[a].Add(1)
		e.bytesIn[a].Add(bytes)
	}
	e.transferNs[a].Add(int64(tm.Duration))
	if !e.shared.Has(a) && bytes > 0 && tm.Duration > 0 {
		_ = e.s.ObserveTransfer(e.names[a], toDevice, bytes, tm) // only bad figures fail: nothing to learn
	}
}

// backendFailure is a failure attributed to one backend.
type backendFailure struct {
	a   int
	err error
}

func (f *backendFailure) Error() string { return f.err.Error() }
func (f *backendFailure) Unwrap() error { return f.err }

// opScratch is the per-op scratch, pooled so that Run does not allocate.
type opScratch struct {
	ts    [MaxInputs]*Tensor
	bufs  [MaxInputs]backends.Buffer
	locks [MaxInputs + 1]*Tensor
	write [MaxInputs + 1]bool
}

// Run implements backends.Backend: it places s on the best backend, moves
// the inputs it lacks, runs it, and falls back on failure. The Timing is
// the kernel's, as the chosen backend measured it. The output may alias
// an input. It returns an error wrapping ErrAllFailed, joining each
// backend's failure, only when every capable backend failed.
func (e *Executor) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	return e.run(s, in, out, false, 0)
}

// maxDepth bounds the recursion of recomputing lost tensors.
const maxDepth = 4096

func (e *Executor) run(s kernels.Spec, in []backends.Buffer, out backends.Buffer, restore bool, depth int) (backends.Timing, error) {
	if depth > maxDepth {
		return backends.Timing{}, fmt.Errorf("%w: recomputation deeper than %d ops", ErrTensorLost, maxDepth)
	}
	if len(in) != len(s.In) || len(in) > MaxInputs {
		return backends.Timing{}, e.opErr(s, fmt.Errorf("%w: %d buffers for %d inputs (at most %d)", kernels.ErrBufferSize, len(in), len(s.In), MaxInputs))
	}
	if err := s.Validate(); err != nil {
		return backends.Timing{}, e.opErr(s, err)
	}
	sc := e.scratchPool.Get().(*opScratch)
	defer func() { *sc = opScratch{}; e.scratchPool.Put(sc) }()
	ts := sc.ts[:len(in)]
	var res Residency
	for i, b := range in {
		t, err := e.tensorOf(b)
		if err != nil {
			return backends.Timing{}, e.opErr(s, fmt.Errorf("input %d: %w", i, err))
		}
		if t.size != s.InBytes(i) {
			return backends.Timing{}, e.opErr(s, fmt.Errorf("%w: input %d: tensor of %d bytes, want %d", kernels.ErrBufferSize, i, t.size, s.InBytes(i)))
		}
		ts[i] = t
	}
	o, err := e.tensorOf(out)
	if err != nil {
		return backends.Timing{}, e.opErr(s, fmt.Errorf("output: %w", err))
	}
	if o.size != s.OutBytes() {
		return backends.Timing{}, e.opErr(s, fmt.Errorf("%w: output: tensor of %d bytes, want %d", kernels.ErrBufferSize, o.size, s.OutBytes()))
	}
	var failed, oomed Mask
	var errs [MaxBackends]error
	why := Reason(0)
	for {
		res.N = 0
		o.mu.RLock()
		res.Consumers = o.consumersHint()
		o.mu.RUnlock()
		for _, t := range ts {
			t.mu.RLock()
			v := t.valid
			t.mu.RUnlock()
			res.Add(v, t.size)
		}
		sick, probes := e.unhealthy()
		d, err := e.s.SelectExcept(s, res, failed|sick, why)
		if errors.Is(err, ErrNoBackend) && sick&^failed != 0 {
			// Every healthy backend failed or none can run it: try those
			// in back-off rather than fail.
			d, err = e.s.SelectExcept(s, res, failed, why)
		}
		if probes != 0 {
			e.releaseProbes(probes, d.Backend, err == nil)
		}
		if err != nil {
			if failed == 0 {
				return backends.Timing{}, err
			}
			return backends.Timing{}, e.allFailed(s, failed, &errs, err)
		}
		a := d.Backend
		tm, xferUs, err := e.attempt(sc, s, ts, o, a, restore, depth)
		if err == nil {
			e.healthy(a)
			e.ops[a].Add(1)
			if d.Reason == Fallback || d.Reason == MemoryConstraint {
				e.fallbacks.Add(1)
			}
			if tm.Duration > 0 {
				_ = e.s.Observe(d, tm) // a zero or absurd timing teaches nothing
			}
			if e.cfg.Recorder != nil {
				e.record(s, d, tm, xferUs)
			}
			return tm, nil
		}
		var bf *backendFailure
		if !errors.As(err, &bf) {
			e.release(a)
			return backends.Timing{}, err
		}
		f := bf.a
		failed |= Backend(f)
		if errs[f] == nil {
			errs[f] = bf.err
		}
		if errors.Is(bf.err, backends.ErrOutOfMemory) {
			e.release(f)
			e.memRetries.Add(1)
			freed := e.evict(f, ts, o)
			why = MemoryConstraint
			// The only backend left may be this one: after an eviction it
			// gets one more try.
			if freed > 0 && !oomed.Has(f) {
				oomed |= Backend(f)
				if e.noneLeft(s, failed) {
					failed &^= Backend(f)
				}
			}
			continue
		}
		e.failed(f, bf.err)
		why = Fallback
	}
}

// noneLeft reports whether excluding failed leaves no backend that may
// run s.
func (e *Executor) noneLeft(s kernels.Spec, failed Mask) bool {
	for a, b := range e.bes {
		if failed.Has(a) || e.s.only >= 0 && a != e.s.only {
			continue
		}
		if b.Supports(s) == nil {
			return false
		}
	}
	return true
}

// opErr wraps an error of the caller's op.
func (e *Executor) opErr(s kernels.Spec, err error) error {
	return &backends.DeviceError{Backend: e.cfg.Name, Op: s.Op.String(), Err: err}
}

// allFailed builds the error of an op that every capable backend failed.
func (e *Executor) allFailed(s kernels.Spec, failed Mask, errs *[MaxBackends]error, last error) error {
	var all []error
	for a := range e.n {
		if !failed.Has(a) || errs[a] == nil {
			continue
		}
		var de *backends.DeviceError
		if errors.As(errs[a], &de) {
			all = append(all, errs[a])
		} else {
			all = append(all, &backends.DeviceError{Backend: e.names[a], Op: s.Op.String(), Err: errs[a]})
		}
	}
	return fmt.Errorf("%w: %v: %w", ErrAllFailed, s, errors.Join(all...))
}

// attempt runs s on backend a: inputs made resident, output allocated,
// then the kernel under the tensors' locks.
func (e *Executor) attempt(sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool, depth int) (backends.Timing, float64, error) {
	be := e.bes[a]
	stamp := e.tick.Add(1)
	var xferUs float64
	for try := 0; ; try++ {
		for _, t := range ts {
			us, err := e.ensureOn(t, a, stamp, depth)
			if err != nil {
				return backends.Timing{}, xferUs, err
			}
			xferUs += us
		}
		if err := e.outputOn(o, a); err != nil {
			return backends.Timing{}, xferUs, err
		}
		locks := e.lockSet(sc, ts, o)
		ok := o.copies[a] != nil
		for i, t := range ts {
			if !t.valid.Has(a) || t.copies[a] == nil {
				ok = false
				break
			}
			sc.bufs[i] = t.copies[a]
		}
		if !ok {
			unlockSet(sc, locks)
			if try < maxAttempts {
				continue // an eviction or a loss raced with us: move again
			}
			return backends.Timing{}, xferUs, fmt.Errorf("%w: inputs keep leaving %s", ErrBadTensor, e.names[a])
		}
		tm, err := be.Run(s, sc.bufs[:len(ts)], o.copies[a])
		if err != nil {
			unlockSet(sc, locks)
			return backends.Timing{}, xferUs, &backendFailure{a: a, err: err}
		}
		o.newVersion()
		o.valid = Backend(a)
		if e.alias.Has(a) {
			o.valid = Host | e.alias // written in place in the host copy
		}
		o.lastUse[a] = stamp
		if !restore {
			o.version++
			o.setLineage(s, ts)
		}
		unlockSet(sc, locks)
		return tm, xferUs, nil
	}
}

// lockSet takes the locks of an op's tensors in id order (so that ops
// sharing tensors cannot deadlock): the output's for writing, the
// inputs' for reading. It returns how many it took.
func (e *Executor) lockSet(sc *opScratch, ts []*Tensor, o *Tensor) int {
	n := 0
	add := func(t *Tensor, w bool) {
		for i := range n {
			if sc.locks[i] == t {
				sc.write[i] = sc.write[i] || w
				return
			}
		}
		sc.locks[n], sc.write[n] = t, w
		n++
	}
	add(o, true)
	for _, t := range ts {
		add(t, false)
	}
	for i := 1; i < n; i++ { // insertion sort: at most MaxInputs+1 entries
		for j := i; j > 0 && sc.locks[j].id < sc.locks[j-1].id; j-- {
			sc.locks[j], sc.locks[j-1] = sc.locks[j-1], sc.locks[j]
			sc.write[j], sc.write[j-1] = sc.write[j-1], sc.write[j]
		}
	}
	for i := range n {
		if sc.write[i] {
			sc.locks[i].mu.Lock()
		} else {
			sc.locks[i].mu.RLock()
		}
	}
	return n
}

func unlockSet(sc *opScratch, n int) {
	for i := n - 1; i >= 0; i-- {
		if sc.write[i] {
			sc.locks[i].mu.Unlock()
		} else {
			sc.locks[i].mu.RUnlock()
		}
	}
}

// ensureOn makes t valid on backend a: allocated there and copied from
// host memory (itself filled from another device if need be). It returns
// the copies' time in µs, the read from another device included. A
// failure of a is a *backendFailure for a; a failed read from another
// backend marks that one failed and retries.
func (e *Executor) ensureOn(t *Tensor, a int, stamp int64, depth int) (float64, error) {
	var us float64
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			return us, fmt.Errorf("%w: tensor %d is freed", ErrBadTensor, t.id)
		}
		t.readers |= Backend(a)
		if t.valid.Has(a) && t.copies[a] != nil {
			t.lastUse[a] = stamp
			t.mu.Unlock()
			return us, nil
		}
		if t.valid&Host == 0 {
			down, err := e.toHost(t, depth+1)
			us += down
			if err != nil {
				t.mu.Unlock()
				if errors.Is(err, ErrTensorLost) || attempt >= maxAttempts {
					return us, err
				}
				continue
			}
		}
		be := e.bes[a]
		if e.alias.Has(a) {
			err := e.mapHost(t, a) // the host copy is valid: no copy to make
			if err == nil {
				t.lastUse[a] = stamp
			}
			t.mu.Unlock()
			return us, err
		}
		if t.copies[a] == nil {
			c, err := be.Alloc(t.size)
			if err != nil {
				t.mu.Unlock()
				return us, &backendFailure{a: a, err: err}
			}
			t.copies[a] = c
			e.register(t, a)
		}
		tm, err := be.Write(t.copies[a], t.host)
		if err != nil {
			t.mu.Unlock()
			return us, &backendFailure{a: a, err: err}
		}
		e.observeCopy(a, true, t.size, tm)
		us += tm.Micros()
		t.valid |= Backend(a)
		t.lastUse[a] = stamp
		t.mu.Unlock()
		return us, nil
	}
}

// mapHost makes t's copy on alias backend a its host copy, allocating
// that (t.mu held). The mapping holds no memory of a's: it is not
// registered, so neither eviction nor a lost device drops it.
func (e *Executor) mapHost(t *Tensor, a int) error {
	if t.copies[a] != nil {
		return nil
	}
	if t.host == nil {
		t.host = allocHost(t.size)
	}
	c, err := e.bes[a].(backends.HostMapper).MapHost(t.host)
	if err != nil {
		return &backendFailure{a: a, err: err}
	}
	t.copies[a] = c
	return nil
}

// outputOn allocates o's copy on backend a if it has none.
func (e *Executor) outputOn(o *Tensor, a int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.freed {
		return fmt.Errorf("%w: output tensor %d is freed", ErrBadTensor, o.id)
	}
	if o.copies[a] != nil {
		return nil
	}
	if e.alias.Has(a) {
		return e.mapHost(o, a)
	}
	c, err := e.bes[a].Alloc(o.size)
	if err != nil {
		return &backendFailure{a: a, err: err}
	}
	o.copies[a] = c
	e.register(o, a)
	return nil
}

// setLineage records s and its inputs' versions as what produced o's
// current version (o.mu held; inputs read-locked, or o itself).
func (o *Tensor) setLineage(s kernels.Spec, ts []*Tensor) {
	l := &o.lin
	l.ok = true
	for _, t := range ts {
		if t == o { // computed from its own previous version: not recomputable
			l.ok = false
			return
		}
	}
	l.dims = l.dims[:0]
	for _, sh := range s.In {
		l.dims = append(l.dims, sh...)
	}
	l.shapes = l.shapes[:0]
	off := 0
	for _, sh := range s.In {
		l.shapes = append(l.shapes, kernels.Shape(l.dims[off:off+len(sh):off+len(sh)]))
		off += len(sh)
	}
	l.spec = kernels.Spec{Op: s.Op, DType: s.DType, In: l.shapes, Params: s.Params}
	l.in = append(l.in[:0], ts...)
	l.vers = l.vers[:0]
	for _, t := range ts {
		l.vers = append(l.vers, t.version)
	}
}

// recover recomputes t, whose every copy was lost, by running the op of
// its lineage again on a healthy backend; the inputs are recovered first
// if they were lost too. It fails with ErrTensorLost when t has no
// lineage (the host wrote it) or an input has changed or been freed since.
func (e *Executor) recover(t *Tensor, depth int) error {
	t.mu.Lock()
	if t.valid != 0 {
		t.mu.Unlock()
		return nil
	}
	if !t.lin.ok || t.freed {
		t.mu.Unlock()
		return fmt.Errorf("%w: tensor %d (%d bytes) has no other copy and no lineage", ErrTensorLost, t.id, t.size)
	}
	spec := t.lin.spec
	spec.In = make([]kernels.Shape, len(t.lin.shapes))
	for i, sh := range t.lin.shapes {
		spec.In[i] = append(kernels.Shape(nil), sh...)
	}
	ins := make([]backends.Buffer, len(t.lin.in))
	vers := append([]uint64(nil), t.lin.vers...)
	for i, x := range t.lin.in {
		ins[i] = x
	}
	t.mu.Unlock()
	for i, b := range ins {
		x := b.(*Tensor)
		x.mu.RLock()
		ok := !x.freed && x.version == vers[i]
		x.mu.RUnlock()
		if !ok {
			return fmt.Errorf("%w: tensor %d: input %d of its %v was written or freed since", ErrTensorLost, t.id, i, spec.Op)
		}
	}
	if _, err := e.run(spec, ins, t, true, depth+1); err != nil {
		return fmt.Errorf("%w: recomputing tensor %d: %w", ErrTensorLost, t.id, err)
	}
	e.recoveries.Add(1)
	return nil
}

// register notes that t holds a buffer on backend a.
func (e *Executor) register(t *Tensor, a int) {
	e.resMu.Lock()
	e.resident[a][t] = struct{}{}
	e.resMu.Unlock()
}

// unregister forgets t's buffers on the backends in held.
func (e *Executor) unregister(t *Tensor, held Mask) {
	if held == 0 {
		return
	}
	e.resMu.Lock()
	for a := range e.n {
		if held.Has(a) {
			delete(e.resident[a], t)
		}
	}
	e.resMu.Unlock()
}

// residentOn returns the tensors holding a buffer on backend a.
func (e *Executor) residentOn(a int) []*Tensor {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	out := make([]*Tensor, 0, len(e.resident[a]))
	for t := range e.resident[a] {
		out = append(out, t)
	}
	return out
}

// evict frees the copies on backend a of every tensor that the current op
// does not use and that no other op holds, reading a copy to host memory
// first when it is the tensor's only valid one. It returns the bytes
// freed.
func (e *Executor) evict(a int, ts []*Tensor, o *Tensor) int64 {
	var freed int64
	for _, t := range e.residentOn(a) {
		if t == o || containsTensor(ts, t) || !t.mu.TryLock() {
			continue
		}
		c := t.copies[a]
		if c == nil {
			t.mu.Unlock()
			continue
		}
		if t.valid == Backend(a) {
			if t.host == nil {
				t.host = allocHost(t.size)
			}
			tm, err := e.bes[a].Read(t.host, c)
			if err != nil {
				t.mu.Unlock()
				continue // keep the only copy
			}
			e.observeCopy(a, false, t.size, tm)
			t.valid |= Host | e.alias
		}
		c.Free()
		t.copies[a] = nil
		t.valid &^= Backend(a)
		t.mu.Unlock()
		e.unregister(t, Backend(a))
		e.evictions.Add(1)
		freed += t.size
	}
	return freed
}

func containsTensor(ts []*Tensor, t *Tensor) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// dropCopies frees every tensor's copy on backend a, marks it invalid and
// returns how many copies it dropped.
func (e *Executor) dropCopies(a int) int64 {
	var n int64
	for _, t := range e.residentOn(a) {
		t.mu.Lock()
		if c := t.copies[a]; c != nil {
			c.Free()
			t.copies[a] = nil
			t.valid &^= Backend(a)
			n++
		}
		t.mu.Unlock()
		e.unregister(t, Backend(a))
	}
	return n
}

// invalidate drops every copy on backend a, which was lost: tensors left
// without a valid copy are recomputed when next needed.
func (e *Executor) invalidate(a int) {
	e.invalidated.Add(e.dropCopies(a))
}

// unhealthy returns the backends in back-off, and those whose back-off
// has expired and that this op may probe (one probing op at a time).
func (e *Executor) unhealthy() (out, probes Mask) {
	sick := Mask(e.sick.Load())
	if sick == 0 {
		return 0, 0
	}
	now := e.cfg.Now()
	e.healthMu.Lock()
	for a := range e.n {
		if !sick.Has(a) {
			continue
		}
		h := &e.health[a]
		if h.probing || now.Before(h.until) {
			out |= Backend(a)
			continue
		}
		h.probing = true
		probes |= Backend(a)
	}
	e.healthMu.Unlock()
	return out, probes
}

// releaseProbes ends the probes that the op did not take up: every one
// but the chosen backend's (when chosen).
func (e *Executor) releaseProbes(probes Mask, chosen int, ok bool) {
	if ok {
		probes &^= Backend(chosen)
	}
	if probes == 0 {
		return
	}
	e.healthMu.Lock()
	for a := range e.n {
		if probes.Has(a) {
			e.health[a].probing = false
		}
	}
	e.healthMu.Unlock()
}

// failed marks backend a failed: its back-off doubles (from BackoffBase
// up to BackoffMax); a lost device's copies are dropped.
func (e *Executor) failed(a int, err error) {
	e.failures[a].Add(1)
	e.healthMu.Lock()
	h := &e.health[a]
	d := e.cfg.BackoffBase << min(h.failures, 30)
	if d <= 0 || d > e.cfg.BackoffMax {
		d = e.cfg.BackoffMax
	}
	h.failures++
	h.until = e.cfg.Now().Add(d)
	h.probing = false
	h.lastErr = err
	e.sick.Store(e.sick.Load() | uint32(Backend(a)))
	e.healthMu.Unlock()
	e.cfg.Logger.Warn().Err(err).Str("backend", e.names[a]).Dur("backoff", d).Msg("adaptive: backend failed; falling back")
	if errors.Is(err, backends.ErrDeviceLost) {
		e.invalidate(a)
	}
}

// healthy clears backend a's back-off after an op succeeded there.
func (e *Executor) healthy(a int) {
	if !Mask(e.sick.Load()).Has(a) {
		return
	}
	e.healthMu.Lock()
	e.health[a] = healthState{}
	e.sick.Store(e.sick.Load() &^ uint32(Backend(a)))
	e.healthMu.Unlock()
}

// release ends a probe of backend a that did not conclude.
func (e *Executor) release(a int) {
	if !Mask(e.sick.Load()).Has(a) {
		return
	}
	e.healthMu.Lock()
	e.health[a].probing = false
	e.healthMu.Unlock()
}

// record hands one trace event to the Recorder.
func (e *Executor) record(s kernels.Spec, d Decision, tm backends.Timing, xferUs float64) {
	ev := history.EventOf(s)
	ev.Seq = e.seq.Add(1)
	ev.Bucket = e.s.BucketName(d.Bucket)
	ev.Backend = d.Name
	ev.Reason = d.Reason.String()
	ev.ActualUs = tm.Micros()
	ev.TransferUs = xferUs
	e.cfg.Recorder.Record(ev)
}

// ExecutorStats is a snapshot of what an Executor did.
type ExecutorStats struct {
	Backends []ExecutorBackendStats // in Config order
	// Fallbacks counts ops that ran on a backend other than the first one
	// chosen, after a failure; MemoryRetries counts out-of-memory
	// failures; Evictions counts copies evicted for memory; Recoveries
	// counts tensors recomputed after a device was lost; Invalidated
	// counts copies dropped with a lost device.
	Fallbacks, MemoryRetries, Evictions, Recoveries, Invalidated int64
}

// ExecutorBackendStats is one backend's share of an Executor's work.
type ExecutorBackendStats struct {
	Name       string
	Ops        int64         // ops that ran here
	Failures   int64         // failed allocations, copies and ops
	CopiesIn   int64         // copies into the backend's memory
	BytesIn    int64         // bytes of those copies
	Transfer   time.Duration // time of copies in and out, as the backend timed them
	Healthy    bool          // not in back-off
	LastError  string        // the failure that started the current back-off
	ResidentMB float64       // MB of buffers the Executor holds here
}

// Stats returns a snapshot of the Executor's counters. It is safe for
// concurrent use.
func (e *Executor) Stats() ExecutorStats {
	st := ExecutorStats{Fallbacks: e.fallbacks.Load(), MemoryRetries: e.memRetries.Load(),
		Evictions: e.evictions.Load(), Recoveries: e.recoveries.Load(), Invalidated: e.invalidated.Load()}
	sick := Mask(e.sick.Load())
	for a := range e.n {
		b := ExecutorBackendStats{Name: e.names[a], Ops: e.ops[a].Load(), Failures: e.failures[a].Load(),
			CopiesIn: e.copiesIn[a].Load(), BytesIn: e.bytesIn[a].Load(),
			Transfer: time.Duration(e.transferNs[a].Load()), Healthy: !sick.Has(a)}
		e.healthMu.Lock()
		if err := e.health[a].lastErr; err != nil && sick.Has(a) {
			b.LastError = err.Error()
		}
		e.healthMu.Unlock()
		var bytes int64
		for _, t := range e.residentOn(a) {
			bytes += t.size
		}
		b.ResidentMB = float64(bytes) / 1e6
		st.Backends = append(st.Backends, b)
	}
	return st
}

// Close implements backends.Backend: it closes the Scheduler (handing the
// posteriors to the store, which the caller closes), frees every device
// copy, and closes the backends when CloseBackends is set. Tensors must
// not be used afterwards. Close is idempotent.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		errs := []error{e.s.Close()}
		for a := range e.n {
			e.dropCopies(a)
		}
		if e.cfg.CloseBackends {
			for _, b := range e.bes {
				errs = append(errs, b.Close())
			}
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

func init() {
	backends.Register("adaptive", openExecutor)
}

// openExecutor is the registry's factory: "adaptive:cpu,cpu1,sim:h100"
// opens each listed backend (their packages must be imported) and an
// Executor that owns them, with the default Config.
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
	e, err := NewExecutor(ExecutorConfig{Config: Config{Backends: bes}, CloseBackends: true})
	if err != nil {
		closeAll()
		return nil, err
	}
	return e, nil
}
