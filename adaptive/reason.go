package adaptive

import "fmt"

// Reason says why a Decision chose its backend (DESIGN.md § Strategies
// and telemetry). The zero value is not a reason.
type Reason uint8

// The reasons.
const (
	// UserPreference: the strategy (GPUPreferred, CPUPreferred, Only) or
	// the caller (SelectOn) named this backend and it can run the op.
	UserPreference Reason = iota + 1
	// GPUUnavailable: GPUPreferred, but no GPU backend is configured (one
	// configured but not allowed for the op is Unsupported).
	GPUUnavailable
	// Unsupported: the preferred backend cannot run the op, or only one
	// allowed backend can; capability forced the choice.
	Unsupported
	// Prior: the bucket has no observations yet; the choice rests on the
	// static cost model alone.
	Prior
	// Explore: the bandit chose a backend other than the one with the best
	// posterior mean (transfers included).
	Explore
	// Exploit: the bandit chose the backend with the best posterior mean.
	Exploit
	// HysteresisHold: a challenger sampled cheaper but not by the
	// hysteresis margin, so the bucket stayed on its incumbent.
	HysteresisHold
	// MemoryConstraint: the caller excluded a backend that ran out of
	// memory (SelectExcept) and this is the best remaining one.
	MemoryConstraint
	// Fallback: the caller excluded a backend that failed (SelectExcept)
	// and this is the best remaining one.
	Fallback
	// NumReasons is one past the last reason: the length of an array
	// indexed by Reason.
	NumReasons
)

var reasonNames = [...]string{
	UserPreference:   "UserPreference",
	GPUUnavailable:   "GPUUnavailable",
	Unsupported:      "Unsupported",
	Prior:            "Prior",
	Explore:          "Explore",
	Exploit:          "Exploit",
	HysteresisHold:   "HysteresisHold",
	MemoryConstraint: "MemoryConstraint",
	Fallback:         "Fallback",
}

var _ fmt.Stringer = Exploit

// String returns the reason's name, or Reason(n) for an unknown value.
func (r Reason) String() string {
	if r > 0 && r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Reasons returns every reason in declaration order. The caller owns the
// returned slice.
func Reasons() []Reason {
	out := make([]Reason, 0, NumReasons-1)
	for r := UserPreference; r < NumReasons; r++ {
		out = append(out, r)
	}
	return out
}
