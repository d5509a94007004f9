package executor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// seerSpy leaves every other op to the Strategy and records, in order,
// its Place calls and the choices it is told of (executor.LearnedSeer).
type seerSpy struct {
	n      int
	events []string // "learned", "placed" (Place) and "saw" (SawLearned)
	saw    []int    // the backends told, by call
}

func (s *seerSpy) Name() string                             { return "seer" }
func (s *seerSpy) Observed(adaptive.BucketID, int, float64) {}
func (s *seerSpy) Place(kernels.Spec, adaptive.Residency, adaptive.BucketID) int {
	s.n++
	if s.n%2 == 1 {
		s.events = append(s.events, "learned")
		return executor.Learned
	}
	s.events = append(s.events, "placed")
	return 1
}
func (s *seerSpy) SawLearned(_ adaptive.BucketID, backend int) {
	s.events = append(s.events, "saw")
	s.saw = append(s.saw, backend)
}

// TestLearnedSeer: a Placer that is an executor.LearnedSeer is told the
// Strategy's choice right after each op it left to it (Learned), and of
// no other op, queued or synchronous, and the backends it is told are
// those the ops ran on.
func TestLearnedSeer(t *testing.T) {
	for _, sync := range []bool{false, true} {
		spy := &seerSpy{}
		e := newExec(t, executor.Config{Placer: spy, Synchronous: sync}, open(t, "cpu"), open(t, "sim:h100"))
		ch := newChain(t, rand.New(rand.NewPCG(9, 10)), 6, 4, 64)
		ch.run(t, e)
		if len(spy.events) == 0 {
			t.Fatalf("sync %v: no op placed", sync)
		}
		for i, ev := range spy.events {
			switch {
			case ev == "learned" && (i+1 >= len(spy.events) || spy.events[i+1] != "saw"):
				t.Errorf("sync %v: event %d: an op left to the Strategy, not followed by its choice: %v", sync, i, spy.events)
			case ev == "saw" && (i == 0 || spy.events[i-1] != "learned"):
				t.Errorf("sync %v: event %d: a choice told of an op not left to the Strategy: %v", sync, i, spy.events)
			}
		}
		var ran int64
		for _, b := range e.Stats().Backends {
			ran += b.Ops
		}
		if int64(spy.n) != ran {
			t.Errorf("sync %v: %d ops placed, %d ran", sync, spy.n, ran)
		}
		var onCPU int64 // the placed ops go to the GPU: the CPU's are the learned ones
		for _, b := range spy.saw {
			if b == 0 {
				onCPU++
			}
		}
		t.Logf("sync %v: %d ops, %d told, %d on the CPU", sync, spy.n, len(spy.saw), onCPU)
		if got := e.Stats().Backends[0].Ops; onCPU != got {
			t.Errorf("sync %v: told of %d ops on the CPU, %d ran there", sync, onCPU, got)
		}
	}
}
