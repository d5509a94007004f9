package adaptive

import (
	"math"
	"sync"
	"sync/atomic"
)

// linkModel is the online transfer model of one link direction (DESIGN.md
// § Priors, transfers): duration_us = latency + bytes / bandwidth, fitted
// by recursive least squares with forgetting on (1, MB) → µs, each copy
// weighted by its relative error so that one large copy does not swamp the
// latency. It starts from the nominal figures. The fit sits under a mutex
// (ObserveTransfer is off the hot path); the published latency and slope
// are atomics that Select reads without locking. A hand-written 2×2 RLS:
// gonum has batch least squares but no recursive form.
type linkModel struct {
	mu    sync.Mutex
	theta [2]float64    // latency µs, µs per MB
	p     [2][2]float64 // covariance (in units of the relative noise)
	n     int64

	lat, perMB atomic.Uint64 // float64 bits, published after each fit
}

const (
	linkForget = 0.98 // RLS forgetting factor per copy: memory of ~50 copies
	linkMaxP   = 1e6  // bound on the covariance diagonal (no windup without excitation)
)

// newLink returns a model at the nominal latency (µs) and bandwidth (GB/s).
func newLink(latencyUs, gbps float64) *linkModel {
	l := &linkModel{}
	l.theta = [2]float64{latencyUs, 1e3 / gbps}
	// A loose prior: the first few copies dominate it.
	l.p = [2][2]float64{{math.Max(latencyUs*latencyUs, 1), 0}, {0, l.theta[1] * l.theta[1]}}
	l.publish()
	return l
}

func (l *linkModel) publish() {
	l.lat.Store(math.Float64bits(math.Max(l.theta[0], 0)))
	l.perMB.Store(math.Float64bits(math.Max(l.theta[1], 1e-6)))
}

// predict returns the predicted duration in µs of moving bytes; 0 for none.
func (l *linkModel) predict(bytes float64) float64 {
	if bytes <= 0 {
		return 0
	}
	return math.Float64frombits(l.lat.Load()) + math.Float64frombits(l.perMB.Load())*bytes*1e-6
}

// figures returns the current latency (µs) and bandwidth (GB/s).
func (l *linkModel) figures() (latencyUs, gbps float64) {
	return math.Float64frombits(l.lat.Load()), 1e3 / math.Float64frombits(l.perMB.Load())
}

// observe folds one measured copy into the fit.
func (l *linkModel) observe(bytes, us float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := [2]float64{1, bytes * 1e-6}
	pred := l.theta[0] + l.theta[1]*x[1]
	// Weight by 1/size of the copy: relative errors.
	w := 1 / math.Max(math.Max(pred, us), 1)
	x[0] *= w
	x[1] *= w
	y := us * w
	px := [2]float64{l.p[0][0]*x[0] + l.p[0][1]*x[1], l.p[1][0]*x[0] + l.p[1][1]*x[1]}
	den := linkForget + x[0]*px[0] + x[1]*px[1]
	k := [2]float64{px[0] / den, px[1] / den}
	e := y - (l.theta[0]*x[0] + l.theta[1]*x[1])
	l.theta[0] += k[0] * e
	l.theta[1] += k[1] * e
	for i := range 2 {
		for j := range 2 {
			l.p[i][j] = (l.p[i][j] - k[i]*px[j]) / linkForget
		}
	}
	for i := range 2 {
		if l.p[i][i] > linkMaxP*(1+l.theta[i]*l.theta[i]) {
			s := linkMaxP * (1 + l.theta[i]*l.theta[i]) / l.p[i][i]
			l.p[i][0] *= s
			l.p[i][1] *= s
			l.p[0][i] *= s
			l.p[1][i] *= s
		}
	}
	l.n++
	l.publish()
}
