package main

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// meter wraps b to sum the durations it reports into ns, keeping the
// optional capabilities the Scheduler and the Executor look for:
// backends.Calibrator (without it a CPU would get the default figures
// instead of its calibration; calibration's own runs are not metered),
// backends.Queuer (its timings counted when its events report them),
// on a backend that queues, backends.HardwareGroup (cpu and cpu1 keep
// sharing their cores) and backends.Recorder (a GPU gathers a step; its
// events stay Deferred). A HardwareGroup without Queuer is not forwarded:
// no backend has that pair, nor has one a Recorder with a HardwareGroup
// or a Calibrator.
func meter(b backends.Backend, ns *atomic.Int64) backends.Backend {
	m := metered{Backend: b, ns: ns}
	c, isC := b.(backends.Calibrator)
	q, isQ := b.(backends.Queuer)
	if !isQ {
		if isC {
			return calibratedMeter{m, c}
		}
		return m
	}
	mq := meteredQueue{metered: m, q: q}
	if r, isR := b.(backends.Recorder); isR {
		return meteredRecorder{mq, r}
	}
	g, isG := b.(backends.HardwareGroup)
	switch {
	case isG && isC:
		return calibratedGroup{meteredGroup{mq, g}, c}
	case isG:
		return meteredGroup{mq, g}
	case isC:
		return calibratedQueue{mq, c}
	}
	return mq
}

// calibratedMeter is metered over a backend that calibrates itself.
type calibratedMeter struct {
	metered
	backends.Calibrator
}

// calibratedQueue is meteredQueue over a backend that calibrates itself.
type calibratedQueue struct {
	meteredQueue
	backends.Calibrator
}

// calibratedGroup is meteredGroup over a backend that calibrates itself.
type calibratedGroup struct {
	meteredGroup
	backends.Calibrator
}

// meteredQueue is metered for a backend that queues work.
type meteredQueue struct {
	metered
	q backends.Queuer
}

var _ backends.Queuer = meteredQueue{}

// unwrapped returns the backend m meters.
func (m metered) unwrapped() backends.Backend { return m.Backend }

// meteredRecorder is meteredQueue for a backend that gathers.
type meteredRecorder struct {
	meteredQueue
	r backends.Recorder
}

var _ backends.Recorder = meteredRecorder{}

// Record implements backends.Recorder.
func (m meteredRecorder) Record() error { return m.r.Record() }

// Flush implements backends.Recorder.
func (m meteredRecorder) Flush() error { return m.r.Flush() }

// meteredGroup is meteredQueue for a backend that shares hardware.
type meteredGroup struct {
	meteredQueue
	g backends.HardwareGroup
}

var _ backends.HardwareGroup = meteredGroup{}

// HardwareGroup implements backends.HardwareGroup: the wrapped backend's.
func (m meteredGroup) HardwareGroup() string { return m.g.HardwareGroup() }

// unwrap returns the events of the wrapped backends, as they expect them
// (after itself when none is wrapped).
func unwrap(after []backends.Event) []backends.Event {
	var out []backends.Event
	for i, e := range after {
		me, ok := e.(*meteredEvent)
		if !ok {
			continue
		}
		if out == nil {
			out = slices.Clone(after)
		}
		out[i] = me.Event
	}
	if out == nil {
		return after
	}
	return out
}

// wrap wraps e to count its duration. A gathered op's event, Deferred
// and not launched, is handed back as it is: its Timing has no duration
// (backends.Recorder), and each op of a gathered step would otherwise
// cost an allocation here and the clone of its dependencies in unwrap.
func (m meteredQueue) wrap(e backends.Event, err error) (backends.Event, error) {
	if err != nil || e == nil {
		return e, err
	}
	if d, ok := e.(backends.Deferred); ok {
		select {
		case <-d.Launched():
		default:
			return e, nil
		}
	}
	return &meteredEvent{Event: e, ns: m.ns}, nil
}

// RunAsync implements backends.Queuer.
func (m meteredQueue) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	return m.wrap(m.q.RunAsync(s, in, out, unwrap(after)))
}

// WriteAsync implements backends.Queuer.
func (m meteredQueue) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	return m.wrap(m.q.WriteAsync(dst, src, unwrap(after)))
}

// ReadAsync implements backends.Queuer.
func (m meteredQueue) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	return m.wrap(m.q.ReadAsync(dst, src, unwrap(after)))
}

// Sync implements backends.Queuer.
func (m meteredQueue) Sync() error { return m.q.Sync() }

// meteredEvent counts its work's duration once, the first time a Wait
// reports it.
type meteredEvent struct {
	backends.Event
	ns   *atomic.Int64
	once sync.Once
}

var _ backends.Deferred = (*meteredEvent)(nil)

// Launched implements backends.Deferred: the wrapped event's, closed
// when it is not Deferred.
func (e *meteredEvent) Launched() <-chan struct{} {
	if d, ok := e.Event.(backends.Deferred); ok {
		return d.Launched()
	}
	return launchedAlready
}

// Launch implements backends.Deferred.
func (e *meteredEvent) Launch() error {
	if d, ok := e.Event.(backends.Deferred); ok {
		return d.Launch()
	}
	return nil
}

var launchedAlready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Wait implements backends.Event.
func (e *meteredEvent) Wait() (backends.Timing, error) {
	t, err := e.Event.Wait()
	if err == nil {
		e.once.Do(func() { e.ns.Add(int64(t.Duration)) })
	}
	return t, err
}
