package adaptive

import (
	"fmt"
	"math/bits"

	"github.com/adaptsched/adaptsched/backends"
)

// transfers adds each allowed backend's predicted transfer of the inputs
// it lacks, and of its output (out bytes) to res.Consumers, or, when
// those are unknown, back to where the largest moved input lived, into t
// (µs), the copies of weights (Input.Weight) also into w, and reports
// whether any is charged.
func (s *Scheduler) transfers(res *Residency, out int64, allowed Mask, t, w *[MaxBackends]float64) bool {
	any := false
	var home [MaxBackends]Mask // where each arm's largest moved input came from
	var homeBytes [MaxBackends]int64
	for i := range min(res.N, MaxInputs) {
		in := res.Inputs[i]
		if in.Bytes <= 0 {
			continue
		}
		on := in.On
		if on == 0 {
			on = Host
		}
		for a := range s.n {
			if !allowed.Has(a) || on.Has(a) {
				continue
			}
			if c := s.move(on, a, float64(in.Bytes)); c > 0 {
				t[a] += c
				any = true
				if in.Weight {
					w[a] += c
				}
			}
			if in.Bytes > homeBytes[a] {
				home[a], homeBytes[a] = on, in.Bytes
			}
		}
	}
	// Rule: the output of an op that pulled its inputs away from where
	// they lived is charged its way back there for the ops that follow
	// (the pipeline runs where its data is). Reason: without it a small
	// op looks cheap on the CPU in the middle of a GPU pipeline and the
	// activations ping-pong over the link (cmd/infer's TestSimPlacement,
	// a simulated decode, holds it).
	if out > 0 && res.Consumers != 0 {
		for a := range s.n {
			if allowed.Has(a) {
				if c := s.toConsumers(a, res.Consumers, float64(out)); c > 0 {
					t[a] += c
					any = true
				}
			}
		}
	} else if out > 0 {
		for a := range s.n {
			if home[a] == 0 {
				continue
			}
			if c := s.move(Backend(a), lowestHome(home[a], s.n), float64(out)); c > 0 {
				t[a] += c
				any = true
			}
		}
	}
	return any
}

// queued writes into x each allowed arm's transfer (extra, nil: none)
// plus its queue's expected wait, and reports whether any arm waits;
// when none does x is untouched and the decision is today's.
func queued(res *Residency, allowed Mask, n int, extra *[MaxBackends]float64, x *[MaxBackends]float64) bool {
	any := false
	for a := range n {
		if allowed.Has(a) && res.QueueUs[a] > 0 {
			any = true
		}
	}
	if !any {
		return false
	}
	if extra != nil {
		*x = *extra
	}
	for a := range n {
		if allowed.Has(a) && res.QueueUs[a] > 0 {
			x[a] += float64(res.QueueUs[a])
		}
	}
	return true
}

// toConsumers predicts the µs to bring bytes of output made on backend a
// to where they will be read (Residency.Consumers): host memory and the
// shared-memory backends through a's device→host link, each other GPU
// over its own link as well.
func (s *Scheduler) toConsumers(a int, consumers Mask, bytes float64) float64 {
	c := 0.0
	if consumers&(Host|s.shared) != 0 {
		c = s.move(Backend(a), -1, bytes)
	}
	for g := range s.n {
		if g != a && consumers.Has(g) && !s.shared.Has(g) {
			c += s.move(Backend(a), g, bytes)
		}
	}
	return c
}

// lowestHome returns the backend index that stands for residency mask on:
// its lowest backend, or -1 for host memory only.
func lowestHome(on Mask, n int) int {
	if b := bits.TrailingZeros16(uint16(on &^ Host)); b < n {
		return b
	}
	return -1
}

// move predicts the µs to bring bytes resident on the backends in on to
// backend a (a = -1: host memory). Data on a GPU reaches a shared-memory
// backend or the host through that GPU's device→host link, and another
// GPU through host memory (both links).
func (s *Scheduler) move(on Mask, a int, bytes float64) float64 {
	if a >= 0 && on.Has(a) {
		return 0
	}
	c := 0.0
	if on&(Host|s.shared) == 0 {
		if g := bits.TrailingZeros16(uint16(on)); g < s.n && s.links[g][1] != nil {
			c = s.links[g][1].Predict(bytes)
		}
	}
	if a >= 0 && !s.shared.Has(a) {
		c += s.links[a][0].Predict(bytes)
	}
	return c
}

// ObserveTransfer is ObserveTransferAt for the backend called backend.
// It returns an error wrapping ErrUnknownBackend for a name that is not
// a configured backend.
func (s *Scheduler) ObserveTransfer(backend string, toDevice bool, bytes int64, t backends.Timing) error {
	i := s.index(backend)
	if i < 0 {
		return fmt.Errorf("%w: %q has no host link", ErrUnknownBackend, backend)
	}
	return s.ObserveTransferAt(i, toDevice, bytes, t)
}

// ObserveTransferAt folds one measured copy of bytes over the link of
// backend i (Config.Backends order; toDevice: host→device, else
// device→host) into the link model. It returns an error wrapping
// ErrUnknownBackend for an index that is not a configured backend with a
// link (shared-memory backends have none, see Shared), and ErrBadTiming
// for a non-positive duration or byte count. It is safe for concurrent
// use and takes only the link direction's own lock.
func (s *Scheduler) ObserveTransferAt(i int, toDevice bool, bytes int64, t backends.Timing) error {
	if i < 0 || i >= s.n {
		return fmt.Errorf("%w: backend %d of %d", ErrUnknownBackend, i, s.n)
	}
	if s.links[i][0] == nil {
		return fmt.Errorf("%w: %q has no host link", ErrUnknownBackend, s.names[i])
	}
	us := t.Micros()
	if bytes <= 0 || !(us > 0 && us < maxObservedUs) {
		return fmt.Errorf("%w: %d bytes in %v", ErrBadTiming, bytes, t.Duration)
	}
	dir := 1
	if toDevice {
		dir = 0
	}
	s.links[i][dir].Observe(float64(bytes), us)
	s.linkEpoch.Add(1)
	return nil
}

// PredictTransfer returns the link model's current prediction, in µs, of
// moving bytes over backend's link in one direction; 0 for a shared-memory
// backend, −1 for an unknown name.
func (s *Scheduler) PredictTransfer(backend string, toDevice bool, bytes int64) float64 {
	i := s.index(backend)
	switch {
	case i < 0:
		return -1
	case s.links[i][0] == nil:
		return 0
	case toDevice:
		return s.links[i][0].Predict(float64(bytes))
	}
	return s.links[i][1].Predict(float64(bytes))
}
