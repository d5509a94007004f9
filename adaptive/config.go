package adaptive

import (
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// Config configures a Scheduler. Zero fields take the defaults that
// validate fills in (DESIGN.md § Priors, § Strategies and telemetry).
type Config struct {
	// Backends are the backends to choose among, 1 to MaxBackends, with
	// distinct Info().Name. The Scheduler calls only Info and Supports
	// (Supports once per distinct op shape), and a CPU's Calibrate
	// (backends.Calibrator); it never closes them.
	Backends []backends.Backend
	// Strategy picks the backend; the zero value is Automatic.
	Strategy Strategy
	// Bandit is the bandit's tuning (hysteresis, discount γ per
	// observation of a bucket, prior strength in pseudo-observations,
	// spread of ln µs, CUSUM in standard deviations); zero fields take
	// bandit's defaults.
	Bandit bandit.Config
	// Warm, when not nil, warm-starts the posteriors: a bucket made takes
	// the posterior of each of its arms found here, keyed by backend name
	// and BucketName (history.DB.Load reads them from a store). The
	// Scheduler reads it from New on: do not change it after.
	Warm map[learned.Key]bandit.NormalGamma
	// Logger receives decisions at debug level, backend figures,
	// incumbent switches and change alarms at info, failed calibrations
	// at warn; the levels it enables are read once, in New. Nil logs
	// nothing. (A zerolog logger serves through zerolog.NewSlogHandler.)
	Logger *slog.Logger
	// Now is the clock of telemetry timestamps; nil means time.Now. A
	// backend's Calibrate times hardware with the real monotonic clock.
	Now func() time.Time
	// Seed seeds every bucket's random source (each bucket's PCG stream is
	// Seed and the hash of the bucket's name), so runs replay exactly.
	Seed uint64
	// ShapeHits is how often a shape is selected, in a bucket that holds
	// other shapes too, before it learns on its own, its prior its
	// bucket's (Scheduler.shapeBucket): 0 means DefaultShapeHits; a
	// negative value never (the shapes of a bucket share its posterior).
	ShapeHits int
	// Shards is the number of shards of the shape→bucket cache, a power of
	// two; 0 means the smallest power of two ≥ 4·GOMAXPROCS (at least 8).
	Shards int
	// NoCalibration skips the start-up calibration of CPU backends whose
	// Nominal figures are zero (backends.Calibrator): they take the
	// documented CPU defaults (100 GFLOP/s, 20 GB/s, 1 µs dispatch).
	NoCalibration bool
}

// validate fills the defaults and rejects impossible values.
func (c *Config) validate() error {
	if len(c.Backends) == 0 || len(c.Backends) > MaxBackends {
		return fmt.Errorf("%w: %d backends, want 1 to %d", ErrConfig, len(c.Backends), MaxBackends)
	}
	seen := map[string]bool{}
	for i, b := range c.Backends {
		if b == nil {
			return fmt.Errorf("%w: backend %d is nil", ErrConfig, i)
		}
		name := b.Info().Name
		if name == "" || seen[name] {
			return fmt.Errorf("%w: backend %d name %q is empty or repeated", ErrConfig, i, name)
		}
		seen[name] = true
	}
	if c.Strategy.kind > only {
		return fmt.Errorf("%w: unknown strategy %v", ErrConfig, c.Strategy)
	}
	if c.Strategy.kind == only && !seen[c.Strategy.name] {
		return fmt.Errorf("%w: %v names no configured backend", ErrConfig, c.Strategy)
	}
	if err := c.Bandit.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.ShapeHits == 0:
		c.ShapeHits = DefaultShapeHits
	case c.ShapeHits < 0:
		c.ShapeHits = math.MaxInt32
	}
	if c.Shards < 0 || c.Shards&(c.Shards-1) != 0 {
		return fmt.Errorf("%w: Shards %d is not a power of two", ErrConfig, c.Shards)
	}
	if c.Shards == 0 {
		c.Shards = max(8, 1<<bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)))
	}
	return nil
}
