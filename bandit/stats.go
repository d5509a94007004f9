package bandit

import "math"

// Stats is the evidence that turned a prior into a posterior: the weighted
// count N of observations y = ln(duration_us) (pseudo-observations after
// discounting), Σy and Σy². Evidence from disjoint observations adds
// (Add), which is how posteriors learned on several machines of the same
// kind pool exactly (DESIGN.md § Persistence). N may be 0 with a non-zero
// Sum: a widened posterior (see Widen). The zero value is no evidence.
type Stats struct {
	N     float64 // observations (weights after discounting)
	Sum   float64 // Σy
	SumSq float64 // Σy²
}

// Bounds on evidence that durations can give, for evidence taken from
// elsewhere (adaptive.Fold.Foreign, the fleet's ledger), in ln µs:
// MaxMeanLn bounds |Σy/N| (a duration observed, 1 ns to 11.6 days, is
// within ±28); MaxSpreadLn the standard deviation, ln 10, a tenfold
// spread at one σ where one machine's runs of a bucket spread by a few
// per cent; SpreadRoundingLn how far below zero, relative to Σy²/N, an
// honest spread may round, Σy² being recovered from posteriors (Since)
// as a difference of terms as large as itself and summed over nodes.
const (
	MaxMeanLn        = 64
	MaxSpreadLn      = 2.302585092994046
	SpreadRoundingLn = 1e-9
)

// MeanWithin reports whether s (N > 0) claims a mean ln µs within
// ±MaxMeanLn; NaN is not.
func (s Stats) MeanWithin() bool { return math.Abs(s.Sum/s.N) <= MaxMeanLn }

// SpreadWithin reports whether s (N > 0) claims a spread Σy²/N − (Σy/N)²
// between zero, less rounding (SpreadRoundingLn), and MaxSpreadLn²; NaN
// and an overflow to ±Inf are not. Rule: every test is one NaN fails.
// Reason: a spread that overflowed to NaN or −Inf passed a test of
// "wider than" (adaptive TestFoldNoDurationsMean).
func (s Stats) SpreadWithin() bool {
	m, sq := s.Sum/s.N, s.SumSq/s.N
	v := sq - m*m
	return v <= MaxSpreadLn*MaxSpreadLn && v >= -SpreadRoundingLn*math.Abs(sq)
}

// Add returns the evidence of s and o together.
func (s Stats) Add(o Stats) Stats {
	return Stats{N: s.N + o.N, Sum: s.Sum + o.Sum, SumSq: s.SumSq + o.SumSq}
}

// Since returns the evidence that turned prior into p (the inverse of
// With): κ = κ0+N, κμ = κ0μ0+Σy, β = β0 + (Σy² + κ0μ0² − κμ²)/2.
func (p NormalGamma) Since(prior NormalGamma) Stats {
	s := p.statsSince(prior)
	return Stats{N: s.n, Sum: s.sum, SumSq: s.sumSq}
}

// With returns prior updated by the evidence s. Evidence that would leave
// κ or α non-positive gives the prior, and a non-positive β the prior's β
// (see withStats).
func (prior NormalGamma) With(s Stats) NormalGamma {
	return prior.withStats(stats{n: s.N, sum: s.Sum, sumSq: s.SumSq})
}
