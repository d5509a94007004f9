package bandit

import "math"

// NormalGamma is the conjugate posterior over the mean μ and precision τ of
// y = ln(duration_us), with y ~ N(μ, 1/τ), τ ~ Gamma(α, rate β) and
// μ | τ ~ N(Mu, 1/(κτ)) (DESIGN.md § The bandit). One observation y
// updates it exactly:
//
//	κ' = κ + 1
//	μ' = (κ·μ + y) / κ'
//	α' = α + 1/2
//	β' = β + κ·(y − μ)² / (2·κ')
//
// The zero value is not a valid posterior: build one with a prior.
type NormalGamma struct {
	Mu    float64 // posterior mean of ln(duration_us)
	Kappa float64 // pseudo-observations behind Mu (> 0)
	Alpha float64 // Gamma shape of the precision (> 0)
	Beta  float64 // Gamma rate of the precision (> 0)
}

// Update adds one observation y = ln(duration_us).
func (p *NormalGamma) Update(y float64) {
	k1 := p.Kappa + 1
	d := y - p.Mu
	p.Beta += p.Kappa * d * d / (2 * k1)
	p.Mu = (p.Kappa*p.Mu + y) / k1
	p.Kappa = k1
	p.Alpha += 0.5
}

// updateDiscounted is Update(y) then Discount(prior, gamma), the
// statistics of the updated posterior taken without forming it: two
// divisions where the two steps took three, on the path of every
// Observe (BenchmarkBucket).
func (p *NormalGamma) updateDiscounted(prior NormalGamma, y, gamma float64) {
	inv := 1 / (p.Kappa + 1)
	d := y - p.Mu
	beta := p.Beta + p.Kappa*d*d*inv/2
	km := p.Kappa*p.Mu + y // κ'μ' of the updated posterior
	c := prior.Kappa * prior.Mu
	*p = prior.withStats(stats{
		n:     gamma * (p.Kappa + 1 - prior.Kappa),
		sum:   gamma * (km - c),
		sumSq: gamma * (2*(beta-prior.Beta) - c*prior.Mu + km*km*inv),
	})
}

// stats are the weighted sufficient statistics that turned prior into p:
// n observations (weights after discounting), Σy and Σy².
type stats struct{ n, sum, sumSq float64 }

// statsSince recovers the statistics that turned prior into p, from
// κ = κ0+n, κμ = κ0μ0+Σy, β = β0 + (Σy² + κ0μ0² − κμ²)/2.
func (p NormalGamma) statsSince(prior NormalGamma) stats {
	return stats{
		n:     p.Kappa - prior.Kappa,
		sum:   p.Kappa*p.Mu - prior.Kappa*prior.Mu,
		sumSq: 2*(p.Beta-prior.Beta) - prior.Kappa*prior.Mu*prior.Mu + p.Kappa*p.Mu*p.Mu,
	}
}

// withStats returns prior updated by s. s.n may be zero with a non-zero
// sum: that is a widened posterior (see Widen), whose mean and β differ
// from the prior's while its evidence equals the prior's; scaling such
// statistics by γ moves the mean and β smoothly back toward the prior.
// Statistics that would leave κ or α non-positive (a posterior weaker than
// the prior it is said to have grown from) give the prior.
func (prior NormalGamma) withStats(s stats) NormalGamma {
	k := prior.Kappa + s.n
	alpha := prior.Alpha + s.n/2
	if !(k > 0) || !(alpha > 0) {
		return prior
	}
	mu := (prior.Kappa*prior.Mu + s.sum) / k
	beta := prior.Beta + (s.sumSq+prior.Kappa*prior.Mu*prior.Mu-k*mu*mu)/2
	if !(beta > 0) {
		beta = prior.Beta // cancellation when every y is equal
	}
	return NormalGamma{Mu: mu, Kappa: k, Alpha: alpha, Beta: beta}
}

// Merge returns the posterior of the union of the observations behind p
// and q, both grown from prior: posteriors are sufficient statistics, so
// snapshots from machines with the same fingerprint combine exactly.
func Merge(prior, p, q NormalGamma) NormalGamma {
	a, b := p.statsSince(prior), q.statsSince(prior)
	return prior.withStats(stats{n: a.n + b.n, sum: a.sum + b.sum, sumSq: a.sumSq + b.sumSq})
}

// Rebase returns to updated by the observations that turned from into p,
// recovered from their sufficient statistics: how a posterior grown from
// one prior (an old hardware fingerprint, another machine's cost model)
// carries its evidence over to another. p with no evidence beyond from
// gives to, and so does p weaker than from. A widened p (N 0, a learned
// mean: Widen) keeps its mean's shift from its prior (TestRebaseWidened).
func Rebase(from, p, to NormalGamma) NormalGamma {
	s := p.statsSince(from)
	if s.n < 0 {
		return to
	}
	return to.withStats(s)
}

// shifted returns p with its mean moved by d: the same evidence, every
// observation d further (with its prior's mean moved by d too, the
// statistics since the prior are those of the observations moved).
func (p NormalGamma) shifted(d float64) NormalGamma {
	p.Mu += d
	return p
}

// muScale2 is the squared scale of μ's marginal, Student's t with 2α
// degrees and location μ: β/(ακ), the variance of the mean that
// surelyCheaper and the skip's bounds weigh.
func (p *NormalGamma) muScale2() float64 { return p.Beta / (p.Alpha * p.Kappa) }

// usable reports whether p is finite with positive κ, α and β.
func (p NormalGamma) usable() bool {
	return math.Abs(p.Mu) <= math.MaxFloat64 && p.Kappa > 0 && p.Kappa <= math.MaxFloat64 &&
		p.Alpha > 0 && p.Alpha <= math.MaxFloat64 && p.Beta > 0 && p.Beta <= math.MaxFloat64
}

// Discount pulls p back toward prior by forgetting a fraction 1−gamma of
// its evidence: the observations' weights are scaled by gamma (0 < gamma
// ≤ 1), so the effective memory is about 1/(1−gamma) observations.
func (p *NormalGamma) Discount(prior NormalGamma, gamma float64) {
	s := p.statsSince(prior)
	s.n *= gamma
	s.sum *= gamma
	s.sumSq *= gamma
	*p = prior.withStats(s)
}
