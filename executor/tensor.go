package executor

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

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
	valid   adaptive.Mask // Host and backend bits
	host    []byte
	copies  [adaptive.MaxBackends]backends.Buffer
	version uint64
	lin     lineage
	// weight marks a weight (MarkWeight); wuse is its use count, under
	// the weight cache's lock.
	weight atomic.Bool
	wuse   weightUse
	// readers is where the current version has been read (backends whose
	// ops read it, Host for the program), an adaptive.Mask set under t.mu
	// read-locked (markRead) and cleared under it write-locked;
	// consumers is where the last version that was read was: where a new
	// version will likely be needed too, which Select charges moving the
	// output to (Residency.Consumers). readers is read and set with
	// atomic operations, and cleared by a plain store: t.mu write-locked
	// excludes every other access, and an atomic store cost an op as
	// much as a lock (BenchmarkExecutorOnly).
	readers   uint32
	consumers adaptive.Mask

	// Queued work (Executor not Synchronous): ready[l] is the work that
	// makes the copy at location l (Executor.loc) hold the current
	// version, usesOn[l] the work queued on that copy that may not have
	// completed, and endAt when the current version is expected ready (ns
	// since the Executor's epoch).
	ready  [locs]*rec
	usesOn [locs][]*rec
	pruned [locs]int // len(usesOn[l]) after its last pruning
	endAt  int64
	endV   float64 // on simulated devices' virtual clock, µs (backends.VirtualSpan)

	// site is the op site of the ops that write t (site.go); decisions
	// counts the decisions of ops writing t, made under mu write-locked
	// (choose), of which one in latencyEvery is timed.
	site      opSite
	decisions uint64
	// args are the buffers an op writing t hands its backend, under mu
	// write-locked, and cleared before it is let go: with the op's
	// scratch, they made every scratch escape to the heap (an
	// interface's Run keeps its slice).
	args [adaptive.MaxInputs]backends.Buffer
}

// newVersion notes that t is being overwritten (t.mu held).
func (t *Tensor) newVersion() {
	t.consumers = t.consumersHint()
	t.readers = 0 // t.mu write-locked: no concurrent access
}

// markRead notes that the current version has been read at m (t.mu
// held, for reading at least).
func (t *Tensor) markRead(m adaptive.Mask) {
	if adaptive.Mask(atomic.LoadUint32(&t.readers))&m != m {
		atomic.OrUint32(&t.readers, uint32(m))
	}
}

// consumersHint is where the value about to overwrite t will likely be
// read: where t's current value was, else where the last one read was
// (t.mu held).
func (t *Tensor) consumersHint() adaptive.Mask {
	if r := adaptive.Mask(atomic.LoadUint32(&t.readers)); r != 0 {
		return r
	}
	return t.consumers
}

var _ backends.Buffer = (*Tensor)(nil)

// Size implements backends.Buffer.
func (t *Tensor) Size() int64 { return t.size }

// Valid returns where the tensor's valid copies are: Host and backend
// bits (Config.Backends order).
func (t *Tensor) Valid() adaptive.Mask {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.valid
}

// Free implements backends.Buffer: it releases every copy. Free is
// idempotent.
func (t *Tensor) Free() {
	if !t.e.cfg.Synchronous {
		// Queued work that uses t completes first (holding t's lock and
		// the gate's read lock on return).
		if err := t.e.waitUses(t); err != nil {
			return // freed already
		}
		defer t.e.gate.RUnlock()
	} else {
		t.mu.Lock()
	}
	if t.freed {
		t.mu.Unlock()
		return
	}
	t.freed = true
	t.host = nil
	t.valid = 0
	var held adaptive.Mask
	for a, c := range t.copies {
		if c != nil {
			c.Free()
			t.copies[a] = nil
			held |= adaptive.Backend(a)
		}
	}
	t.lin = lineage{}
	t.mu.Unlock()
	t.e.unregister(t, held)
}

// Alloc implements backends.Backend. It reserves no memory: copies are
// made where ops need them. A tensor larger than the machine's physical
// memory and every backend's is refused (backends.ErrOutOfMemory), as
// the CPU backend refuses one beyond its memory: no copy of it could
// ever be made. A tensor never written reads as zeros (zeroFill) until
// an op has read it (unwritten).
func (e *Executor) Alloc(n int64) (backends.Buffer, error) {
	switch {
	case e.closed.Load():
		return nil, &backends.DeviceError{Backend: e.cfg.Name, Op: "alloc", Err: fmt.Errorf("executor: Alloc after Close: %w", adaptive.ErrClosed)}
	case n < 0:
		return nil, &backends.DeviceError{Backend: e.cfg.Name, Op: "alloc", Err: fmt.Errorf("%w: %d bytes", kernels.ErrBufferSize, n)}
	case n > e.maxTensor:
		return nil, &backends.DeviceError{Backend: e.cfg.Name, Op: "alloc",
			Err: fmt.Errorf("%w: %d bytes (the most memory of the host and any backend: %d)", backends.ErrOutOfMemory, n, e.maxTensor)}
	}
	return &Tensor{e: e, id: e.ids.Add(1), size: n}, nil
}

// zeroFill gives t, if never written (no version) and with no copy, a
// host copy of zeros, as a Write of zeros would, so that a Read of it
// gets what the CPU backend's new buffer holds, not ErrTensorLost. It
// reports false only for a tensor lost indeed: written, and with no copy
// now (a freed one is its caller's to reject).
func (t *Tensor) zeroFill() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.freed || t.valid != 0:
		return true
	case t.version > 0:
		return false
	}
	t.host = allocHost(t.size)
	t.valid = adaptive.Host | t.e.alias
	t.newVersion()
	t.version++
	return true
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
	if e.closed.Load() {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write",
			Err: fmt.Errorf("executor: Write after Close: %w", adaptive.ErrClosed)}
	}
	start := time.Now()
	if !e.cfg.Synchronous {
		// The host copy is overwritten once the queued work using t has
		// completed.
		if err := e.waitUses(t); err != nil {
			return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write", Err: err}
		}
		defer e.gate.RUnlock()
		t.ready = [locs]*rec{}
		t.endAt, t.endV = 0, 0
	} else {
		t.mu.Lock()
	}
	defer t.mu.Unlock()
	if t.freed {
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "write",
			Err: fmt.Errorf("%w: Write of freed tensor %d", ErrBadTensor, t.id)}
	}
	if t.weight.Load() {
		e.dropWeightCopies(t) // no stale copy is served, nor holds the budget
	}
	if t.host == nil {
		t.host = allocHost(t.size)
	}
	copy(t.host, src)
	t.valid = adaptive.Host | e.alias
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
	if !e.cfg.Synchronous {
		if err := e.readQueued(dst, t); err != nil {
			return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read", Err: err}
		}
		return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
	}
	if e.closed.Load() { // as queued: no contents after Close (TestSyncBadUseAfterClose)
		return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read",
			Err: fmt.Errorf("executor: Read after Close: %w", adaptive.ErrClosed)}
	}
	for range maxAttempts + 1 {
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			return backends.Timing{}, &backends.DeviceError{Backend: e.cfg.Name, Op: "read",
				Err: fmt.Errorf("%w: Read of freed tensor %d", ErrBadTensor, t.id)}
		}
		err = nil
		if t.valid&adaptive.Host == 0 {
			_, err = e.toHost(t)
		}
		if err == nil {
			copy(dst, t.host)
			t.markRead(adaptive.Host)
			t.mu.Unlock()
			return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
		}
		t.mu.Unlock()
		if errors.Is(err, errNoCopy) {
			if rerr := e.recover(t); rerr != nil {
				err = rerr
			}
		}
	}
	return backends.Timing{}, err
}

// toHost makes t's host copy valid from a device copy (t.mu held, t.valid
// has no Host bit). With no valid copy left it returns errNoCopy: the
// caller recovers t (Executor.recover) and retries. A failed read marks
// its backend failed and returns the error; the caller retries. It
// returns the read's µs.
func (e *Executor) toHost(t *Tensor) (float64, error) {
	if t.valid == 0 {
		return 0, errNoCopy
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
	t.valid |= adaptive.Host | e.alias
	return tm.Micros(), nil
}

// sourceOf picks the copy to read from: a shared-memory backend if one
// holds it, else the lowest-numbered.
func (e *Executor) sourceOf(valid adaptive.Mask) int {
	if v := valid & e.s.Shared(); v != 0 {
		return bits.TrailingZeros16(uint16(v))
	}
	return bits.TrailingZeros16(uint16(valid &^ adaptive.Host))
}

// observeCopy counts a copy over backend a's link and feeds its timing to
// the link model (links of shared-memory backends are not modelled).
func (e *Executor) observeCopy(a int, toDevice bool, bytes int64, tm backends.Timing) {
	if toDevice {
		e.copiesIn[a].Add(1)
		e.bytesIn[a].Add(bytes)
	}
	e.transferNs[a].Add(int64(tm.Duration))
	if !e.s.Shared().Has(a) && bytes > 0 && tm.Duration > 0 {
		_ = e.s.ObserveTransferAt(a, toDevice, bytes, tm) // only bad figures fail: nothing to learn
	}
}

// ensureOn makes t valid on backend a: allocated there and copied from
// host memory (itself filled from another device if need be). It returns
// the copies' time in µs, the read from another device included. A
// failure of a is a *backendFailure for a; a failed read from another
// backend marks that one failed and retries; a tensor with no valid copy
// left is errNoCopy, which the op recovers (Executor.attempt).
func (e *Executor) ensureOn(t *Tensor, a int) (float64, error) {
	var us float64
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			return us, fmt.Errorf("%w: tensor %d is freed", ErrBadTensor, t.id)
		}
		t.markRead(adaptive.Backend(a))
		if t.unwritten() {
			if err := e.freshOn(t, a); err != nil {
				t.mu.Unlock()
				return us, err
			}
		}
		if t.valid.Has(a) && t.copies[a] != nil {
			t.mu.Unlock()
			return us, nil
		}
		if t.valid&adaptive.Host == 0 {
			down, err := e.toHost(t)
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
		t.valid |= adaptive.Backend(a)
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

// unwritten reports whether t was never written, by Write or by an op
// (t.mu held). Its contents are undefined, as a fresh buffer of any
// backend's are: an op that reads it (an in-place update of a buffer it
// fills piece by piece, such as a decoder's KV cache) gets a copy where
// it runs, with no transfer made or priced (TestExecutorUnwrittenInput).
func (t *Tensor) unwritten() bool { return t.version == 0 && t.valid == 0 }

// freshOn gives the unwritten t a copy on backend a (t.mu held).
func (e *Executor) freshOn(t *Tensor, a int) error {
	if err := e.outputOnLocked(t, a); err != nil {
		return err
	}
	t.valid = adaptive.Backend(a)
	if e.alias.Has(a) {
		t.valid = adaptive.Host | e.alias
	}
	return nil
}

// outputOn allocates o's copy on backend a if it has none.
func (e *Executor) outputOn(o *Tensor, a int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return e.outputOnLocked(o, a)
}

// outputOnLocked is outputOn with o.mu held.
func (e *Executor) outputOnLocked(o *Tensor, a int) error {
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
