package adaptive

import "fmt"

// strategyKind enumerates the strategies; the zero value is Automatic.
type strategyKind uint8

const (
	automatic strategyKind = iota
	gpuPreferred
	cpuPreferred
	only
)

// Strategy is how the Scheduler picks a backend, as the HybridScheduler
// it replaces did (DESIGN.md § Strategies and telemetry). The zero value is
// Automatic.
type Strategy struct {
	kind strategyKind
	name string // Only's backend
}

// The fixed strategies. Only(name) builds the others. (A baseline
// placement is no strategy: executor.Config.Placer runs one through
// SelectOn.)
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

// String returns "automatic", "gpu-preferred", "cpu-preferred" or
// "only(name)".
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
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s.kind))
}
