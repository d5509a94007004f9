package sim

import (
	"fmt"
	"math"
)

// EventKind is what a scheduled event does to a device.
type EventKind uint8

// The event kinds.
const (
	// Throttle multiplies every compute duration by Factor from op At on
	// (for Span ops; 0 = to the end): a clock drop under a power or
	// thermal cap.
	Throttle EventKind = iota
	// Contention multiplies compute and copy durations (over the link, or
	// a memcpy in shared memory) by Factor from op At for Span ops (0 =
	// to the end): a second tenant sharing the device. The eval harness
	// slows its arm's link copies the same way.
	Contention
	// TransientError fails Span ops (0 means 1) from op At with an error
	// wrapping backends.ErrTransient.
	TransientError
	// OutOfMemory fails Span allocations and runs (0 means 1) from op At
	// with an error wrapping backends.ErrOutOfMemory.
	OutOfMemory
	// DeviceLost fails every call from op At on with an error wrapping
	// backends.ErrDeviceLost, and the work queued before that had not
	// ended when a call first met the loss.
	DeviceLost
)

var _ fmt.Stringer = Throttle

// String returns the kind's name, or EventKind(n) for an unknown value.
func (k EventKind) String() string {
	switch k {
	case Throttle:
		return "throttle"
	case Contention:
		return "contention"
	case TransientError:
		return "transient-error"
	case OutOfMemory:
		return "out-of-memory"
	case DeviceLost:
		return "device-lost"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a change scheduled on one simulated device. At counts ops: the
// device's Run calls (and the allocations an event failed) for a Device,
// the workload's op index for the harness.
type Event struct {
	At     int64
	Kind   EventKind
	Factor float64 // slowdown of Throttle and Contention (×, ≥ 1 slows down)
	Span   int64   // ops the event lasts; see each kind for what 0 means
}

// Validate reports what is wrong with e.
func (e Event) Validate() error {
	switch {
	case e.Kind > DeviceLost:
		return fmt.Errorf("%w: kind %v", ErrInvalidEvent, e.Kind)
	case e.At < 0 || e.Span < 0:
		return fmt.Errorf("%w: %v at op %d for %d ops: negative", ErrInvalidEvent, e.Kind, e.At, e.Span)
	case (e.Kind == Throttle || e.Kind == Contention) && (!(e.Factor > 0) || math.IsInf(e.Factor, 0)):
		return fmt.Errorf("%w: %v factor %v, must be positive and finite", ErrInvalidEvent, e.Kind, e.Factor)
	}
	return nil
}

// covers reports whether op i falls inside e.
func (e Event) covers(i int64) bool {
	if i < e.At {
		return false
	}
	span := e.Span
	switch e.Kind {
	case DeviceLost:
		return true
	case TransientError, OutOfMemory:
		span = max(span, 1)
	}
	return span == 0 || i < e.At+span
}

// Slowdown returns the compute and link factors that events put on op i.
func Slowdown(events []Event, i int64) (compute, link float64) {
	compute, link = 1, 1
	for _, e := range events {
		if !e.covers(i) {
			continue
		}
		switch e.Kind {
		case Throttle:
			compute *= e.Factor
		case Contention:
			compute *= e.Factor
			link *= e.Factor
		}
	}
	return compute, link
}
