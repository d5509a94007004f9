package bandit

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
