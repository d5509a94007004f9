package adaptive

import (
	"fmt"
	"math/bits"
)

// MaxBackends is the most backends one Scheduler chooses among: decisions
// and residency masks are fixed arrays and bitmasks of this size, so that
// the hot path does not allocate.
const MaxBackends = 8

// strategyKind enumerates the strategies; the zero value is Automatic.
type strategyKind uint8

const (
	automatic strategyKind = iota
	gpuPreferred
	cpuPreferred
	only
	placement
)

// Strategy is how the Scheduler picks a backend, as the HybridScheduler
// it replaces did (DESIGN.md § Strategies and telemetry). The zero value is
// Automatic.
type Strategy struct {
	kind   strategyKind
	name   string          // Only's backend
	policy PlacementPolicy // Placement's policy
}

// The fixed strategies. Only(name) and Placement(policy) build the others.
var (
	// Automatic lets the per-bucket Thompson-sampling bandit choose among
	// the capable backends.
	Automatic = Strategy{kind: automatic}
	// GPUPreferred runs every op on the first capable GPU backend (in
	// Config order), and on the bandit's choice among the others when no
	// GPU can run it (Reason GPUUnavailable or Unsupported).
	GPUPreferred = Strategy{kind: gpuPreferred}
	// CPUPreferred runs every op on the first capable CPU backend, and on
	// the bandit's choice among the others when no CPU can run it.
	CPUPreferred = Strategy{kind: cpuPreferred}
)

// Only runs every op on the backend registered as name; Select fails with
// ErrNoBackend for an op that backend cannot run. New rejects a name that
// is not one of the Config's backends.
func Only(name string) Strategy { return Strategy{kind: only, name: name} }

var _ fmt.Stringer = Automatic

// String returns "automatic", "gpu-preferred", "cpu-preferred",
// "only(name)" or "placement(policy name)".
func (s Strategy) String() string {
	switch s.kind {
	case automatic:
		return "automatic"
	case gpuPreferred:
		return "gpu-preferred"
	case cpuPreferred:
		return "cpu-preferred"
	case only:
		return "only(" + s.name + ")"
	case placement:
		if s.policy == nil {
			return "placement(nil)"
		}
		return "placement(" + s.policy.Name() + ")"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s.kind))
}

// Reason says why a Decision chose its backend (DESIGN.md § Strategies
// and telemetry). The zero value is not a reason.
type Reason uint8

// The reasons.
const (
	// UserPreference: the strategy (GPUPreferred, CPUPreferred, Only, or
	// the policy of a Placement) named this backend and it can run the op.
	UserPreference Reason = iota + 1
	// GPUUnavailable: GPUPreferred, but no GPU backend is configured or
	// allowed.
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

// Mask is a set of backends: bit i is Config.Backends[i]. Host (bit 15)
// stands for host memory in a Residency.
type Mask uint16

// Host marks data in host memory: resident on every backend whose device
// reads host memory directly (Info.SharedMemory).
const Host Mask = 1 << 15

// Backend returns the mask holding only backend i.
func Backend(i int) Mask { return 1 << uint(i) }

// Has reports whether backend i is in m.
func (m Mask) Has(i int) bool { return m&(1<<uint(i)) != 0 }

// Count returns the number of backends in m (Host not counted).
func (m Mask) Count() int { return bits.OnesCount16(uint16(m &^ Host)) }

// MaxInputs is the number of residency entries one Residency holds.
const MaxInputs = 8

// Input is one entry of a Residency: Bytes of input that sit on the
// backends in On (On == 0 means host memory only).
type Input struct {
	On    Mask
	Bytes int64
}

// Residency tells Select where an op's inputs are, so that each backend's
// cost includes moving what it lacks (DESIGN.md § The data path). Entries
// need not be one per input: inputs with the same residency may be summed
// into one entry, which is how an op with more than MaxInputs inputs is
// described. The zero Residency means every input is resident everywhere
// (no transfer is charged). A Residency is a value: building one does not
// allocate.
type Residency struct {
	N      int // entries in use
	Inputs [MaxInputs]Input
	// Consumers is where the output's previous value was read: the
	// backends whose ops read it, and Host when the program did. The
	// Executor fills it for a tensor written again (a decode loop's
	// activations), and each backend is charged moving the output there.
	// 0 means unknown: then a backend that pulls inputs away from where
	// they live is charged sending its output back.
	Consumers Mask
}

// Add records bytes of input resident on the backends in on. When the
// table is full they are merged into the last entry, which then counts as
// resident only where both were (host memory when they share nothing), so
// merging can raise the predicted transfer but never hide one.
func (r *Residency) Add(on Mask, bytes int64) {
	if r.N < MaxInputs {
		r.Inputs[r.N] = Input{On: on, Bytes: bytes}
		r.N++
		return
	}
	last := &r.Inputs[MaxInputs-1]
	last.Bytes += bytes
	if on == 0 {
		on = Host
	}
	if last.On == 0 {
		last.On = Host
	}
	if last.On &= on; last.On == 0 {
		last.On = Host
	}
}
