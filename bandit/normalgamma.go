package bandit

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
