package bandit

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// stepUs draws a step of mean us with 5% lognormal noise.
func stepUs(r *rand.Rand, us float64) float64 { return us * math.Exp(0.05*r.NormFloat64()) }

// TestModesPicksFaster: of two modes 1.4× apart, the faster runs at least
// 98% of the last 200 of 300 steps, whichever it is, over 20 seeds.
func TestModesPicksFaster(t *testing.T) {
	for seed := range uint64(20) {
		for fast := range 2 {
			m, err := NewModes(2, seed)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 1))
			late := 0
			for step := range 300 {
				k := m.Next()
				us := 1000.0
				if k != fast {
					us = 1400
				}
				if err := m.Done(k, stepUs(r, us)); err != nil {
					t.Fatal(err)
				}
				if step >= 100 && k == fast {
					late++
				}
			}
			if late < 196 {
				t.Errorf("seed %d, fast mode %d: %d of the last 200 steps on it, want ≥ 196", seed, fast, late)
			}
		}
	}
}

// TestModesRetry: a mode 2× slower, left alone, is tried again, and taken
// once it has become the faster: mode 1 costs 2,000 µs against mode 0's
// 1,000 for 200 steps, then 500. Within 300 steps of the change it runs
// most steps, in every one of 20 seeds.
func TestModesRetry(t *testing.T) {
	for seed := range uint64(20) {
		m, _ := NewModes(2, seed)
		r := rand.New(rand.NewPCG(seed, 2))
		late := 0
		for step := range 700 {
			k := m.Next()
			us := 1000.0
			if k == 1 {
				us = 2000
				if step >= 200 {
					us = 500
				}
			}
			if err := m.Done(k, stepUs(r, us)); err != nil {
				t.Fatal(err)
			}
			if step >= 500 && k == 1 {
				late++
			}
		}
		if late < 150 {
			t.Errorf("seed %d: mode 1 ran %d of the last 200 steps after becoming 2× faster, want ≥ 150", seed, late)
		}
	}
}

// TestModesBadInput: no modes, an unknown mode and a step that is not a
// positive finite time are errors wrapping ErrBadStep, and change nothing.
func TestModesBadInput(t *testing.T) {
	if _, err := NewModes(0, 1); !errors.Is(err, ErrBadStep) {
		t.Errorf("NewModes(0): %v", err)
	}
	m, _ := NewModes(2, 1)
	for _, c := range []struct {
		mode int
		us   float64
	}{{-1, 10}, {2, 10}, {0, 0}, {0, -5}, {0, math.NaN()}, {0, math.Inf(1)}} {
		if err := m.Done(c.mode, c.us); !errors.Is(err, ErrBadStep) {
			t.Errorf("Done(%d, %v): %v, want ErrBadStep", c.mode, c.us, err)
		}
	}
	if runs := m.Runs(); runs[0] != 0 || runs[1] != 0 {
		t.Errorf("runs after bad steps: %v", runs)
	}
	if k := m.Next(); k != 0 {
		t.Errorf("first mode %d, want 0 (warm-up in order)", k)
	}
}
