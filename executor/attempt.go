package executor

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// resident is how runResident ended.
type resident int

const (
	undecided resident = iota // the decision failed: its error stands
	elsewhere                 // decided, but some copy is not in place: attempt it
	ran                       // decided and run (its error a *backendFailure)
)

// runResident is a synchronous op's first try, nothing excluded, no
// input a weight and no backend in back-off: it takes its tensors' locks
// (lockSet), reads where its inputs are, decides (into d) and, when its
// copies are in place on the chosen backend, runs it there, all under
// those locks. Rule: the common op locks each of its tensors once.
// Reason: reading the residency under locks of its own, then making the
// copies under the writer's lock, then running under lockSet, took each
// tensor's lock three times, a third of the Executor's own work per op
// (BenchmarkExecutorOnly).
func (e *Executor) runResident(d *adaptive.Decision, sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor,
	restore bool, why adaptive.Reason) (backends.Timing, resident, error) {
	locks := e.lockSet(sc, ts, o, false)
	var res adaptive.Residency
	res.Consumers = o.consumersHint()
	for _, t := range ts {
		v := t.valid
		if t.unwritten() {
			v = e.anywhere // no contents to move: as good as everywhere (decideOp)
		}
		res.Add(v, t.size)
	}
	o.decisions++
	if err := e.choose(d, sc.h, o.decisions, s, &res, 0, why); err != nil {
		unlockSet(sc, locks)
		return backends.Timing{}, undecided, err
	}
	a := d.Backend
	if !inputsOn(ts, o, a, nil) {
		unlockSet(sc, locks)
		return backends.Timing{}, elsewhere, nil
	}
	for _, t := range ts {
		t.markRead(adaptive.Backend(a))
	}
	tm, err := e.runLocked(s, ts, o, a, restore)
	unlockSet(sc, locks)
	return tm, ran, err
}

// inputsOn reports whether o and every input of ts have a valid copy on
// backend a, or a weight staged for the op, and puts the inputs' buffers
// in o.args (cleared when it reports false); the caller holds the
// tensors' locks. staged may be nil.
func inputsOn(ts []*Tensor, o *Tensor, a int, staged *[adaptive.MaxInputs]backends.Buffer) bool {
	if o.freed || o.copies[a] == nil {
		return false
	}
	for i, t := range ts {
		if staged != nil && staged[i] != nil {
			o.args[i] = staged[i]
			continue
		}
		if !t.valid.Has(a) || t.copies[a] == nil {
			clear(o.args[:i])
			return false
		}
		o.args[i] = t.copies[a]
	}
	return true
}

// attempt runs s on backend a: inputs made resident, output allocated,
// then the kernel under the tensors' locks.
func (e *Executor) attempt(sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool) (backends.Timing, float64, error) {
	var staged [adaptive.MaxInputs]backends.Buffer // weights copied for this op alone
	tm, us, err := e.attemptOn(sc, s, ts, o, a, restore, &staged)
	for _, b := range staged {
		if b != nil {
			b.Free()
		}
	}
	return tm, us, err
}

// attemptOn is attempt, the weights it copies for the op alone kept in
// staged. Rule: its first try goes straight to the run, under the
// tensors' locks, when no input is a weight: the copies an op needs are
// usually in place, and only when one is not does it make them
// (prepare) and try again. Reason: making them first took each input's
// lock and the output's once more per op (BenchmarkExecutorOnly).
func (e *Executor) attemptOn(sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool,
	staged *[adaptive.MaxInputs]backends.Buffer) (backends.Timing, float64, error) {
	var xferUs float64
	for try := 0; ; try++ {
		if try > 0 || anyWeight(ts) {
			us, err := e.prepare(ts, o, a, restore, staged, &sc.wuses)
			xferUs += us
			if err != nil {
				return backends.Timing{}, xferUs, err
			}
		}
		locks := e.lockSet(sc, ts, o, false)
		if !inputsOn(ts, o, a, staged) {
			unlockSet(sc, locks)
			if try < maxAttempts {
				continue // not in place, or an eviction or a loss raced with us: move again
			}
			return backends.Timing{}, xferUs, fmt.Errorf("%w: inputs keep leaving %s", ErrBadTensor, e.s.BackendName(a))
		}
		for i, t := range ts {
			if staged[i] == nil {
				t.markRead(adaptive.Backend(a))
			}
		}
		tm, err := e.runLocked(s, ts, o, a, restore)
		unlockSet(sc, locks)
		return tm, xferUs, err
	}
}

// runLocked runs s on backend a over o.args (inputsOn), which it
// clears, its tensors locked (lockSet), and makes its output's new
// version: valid on a alone (and its aliases), its lineage recorded
// unless restore. A failure is a *backendFailure for a.
func (e *Executor) runLocked(s *kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool) (backends.Timing, error) {
	tm, err := e.bes[a].Run(*s, o.args[:len(ts)], o.copies[a])
	clear(o.args[:len(ts)])
	if err != nil {
		return backends.Timing{}, &backendFailure{a: a, err: err}
	}
	o.newVersion()
	o.valid = adaptive.Backend(a)
	if e.alias.Has(a) {
		o.valid = adaptive.Host | e.alias // written in place in the host copy
	}
	if !restore {
		o.version++
		o.setLineage(*s, ts)
	}
	return tm, nil
}

// anyWeight reports whether one of ts is a weight (MarkWeight).
func anyWeight(ts []*Tensor) bool {
	for _, t := range ts {
		if t.weight.Load() {
			return true
		}
	}
	return false
}

// prepare makes the copies an op on backend a needs: its inputs there
// (weights staged for the op alone into staged, lost inputs recovered
// unless restore) and its output allocated. It returns the copies' time
// in µs. wuses are the op's counted masks.
func (e *Executor) prepare(ts []*Tensor, o *Tensor, a int, restore bool, staged *[adaptive.MaxInputs]backends.Buffer,
	wuses *[adaptive.MaxInputs]adaptive.Mask) (float64, error) {
	var xferUs float64
	for i, t := range ts {
		if staged[i] != nil {
			continue
		}
		buf, us, err := e.stageSync(t, a, ts, &wuses[i])
		xferUs += us
		if err != nil {
			return xferUs, err
		}
		if buf != nil {
			staged[i] = buf
			continue
		}
		us, err = e.ensureOn(t, a)
		if errors.Is(err, errNoCopy) && !restore {
			// t lost every copy with a device: the recovery hook
			// recomputes it, then it moves.
			xferUs += us
			if err = e.recover(t); err == nil {
				us, err = e.ensureOn(t, a)
			}
		}
		if err != nil {
			return xferUs, err
		}
		xferUs += us
	}
	if err := e.outputOn(o, a); err != nil {
		return xferUs, err
	}
	return xferUs, nil
}

// lockSet takes the locks of an op's tensors: the output's for writing,
// the inputs' for reading, or for writing too when exclusive (queueing
// work updates the inputs' bookkeeping). It returns how many it took.
// Rule: a synchronous op's set (not exclusive) is tried in argument
// order, and only when one is held elsewhere does lockSet let go and
// wait for them in id order (so that ops sharing tensors cannot
// deadlock). Reason: sorting them at every op cost about a twentieth of
// the Executor's own work per op (BenchmarkExecutorOnly); queueing an op
// costs microseconds, and its exclusive locks on a shared weight are
// often held elsewhere (BenchmarkExecutorParallel), where a failed try
// would be wasted.
func (e *Executor) lockSet(sc *opScratch, ts []*Tensor, o *Tensor, exclusive bool) int {
	if !exclusive {
		if n, ok := tryLockSet(sc, ts, o); ok {
			return n
		}
	}
	sc.locks[0], sc.write[0] = o, true
	n := 1
next:
	for _, t := range ts {
		for i := range n {
			if sc.locks[i] == t {
				sc.write[i] = sc.write[i] || exclusive
				continue next
			}
		}
		j := n // insertion in id order: at most MaxInputs+1 entries
		for ; j > 0 && sc.locks[j-1].id > t.id; j-- {
			sc.locks[j], sc.write[j] = sc.locks[j-1], sc.write[j-1]
		}
		sc.locks[j], sc.write[j] = t, exclusive
		n++
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

// tryLockSet is lockSet without waiting, not exclusive: it takes every
// lock or none. An input that is the output is under the output's lock;
// one that recurs is read-locked twice.
func tryLockSet(sc *opScratch, ts []*Tensor, o *Tensor) (int, bool) {
	if !o.mu.TryLock() {
		return 0, false
	}
	sc.locks[0], sc.write[0] = o, true
	n := 1
	for _, t := range ts {
		if t == o {
			continue
		}
		if !t.mu.TryRLock() {
			unlockSet(sc, n)
			return 0, false
		}
		sc.locks[n], sc.write[n] = t, false
		n++
	}
	return n, true
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
