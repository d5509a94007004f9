package bandit

import "math"

// CUSUM is a two-sided cumulative-sum change detector on standardized
// residuals z = (y − μ)/σ (DESIGN.md § The bandit, non-stationarity):
//
//	S⁺ = max(0, S⁺ + z − K),  S⁻ = max(0, S⁻ − z − K)
//
// and it alarms when either sum exceeds H. K is the slack and H the
// threshold, both in standard deviations; with K = 0.5 and H = 5 a 2σ
// shift is detected in about 4 observations, with the defaults (K = 0.5,
// H = 10, Config) in 7. The zero value with K and H
// set is ready to use; it is not safe for concurrent use.
type CUSUM struct {
	K, H     float64
	pos, neg float64
}

// Add feeds one standardized residual and reports an alarm; the sums are
// reset after an alarm. A NaN residual is ignored.
func (d *CUSUM) Add(z float64) (alarm bool) {
	if math.IsNaN(z) {
		return false
	}
	// Plain comparisons: math.Max is an assembly call on amd64.
	d.pos = pos0(d.pos + z - d.K)
	d.neg = pos0(d.neg - z - d.K)
	if d.pos > d.H || d.neg > d.H {
		d.Reset()
		return true
	}
	return false
}

// pos0 returns max(0, x) for a non-NaN x.
func pos0(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}

// Reset clears both sums (for a new incumbent, or after an alarm).
func (d *CUSUM) Reset() { d.pos, d.neg = 0, 0 }
