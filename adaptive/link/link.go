// Package link is the online model of one host↔device link direction
// (DESIGN.md § Priors, transfers): the duration of a copy is latency +
// bytes / bandwidth, fitted to the copies measured. The scheduler keeps
// one per direction of each backend that does not share host memory.
//
// # Usage
//
//	m := link.New(10, 32) // nominal: 10 µs, 32 GB/s
//	m.Observe(1<<20, 45)  // a 1 MB copy took 45 µs
//	us := m.Predict(4096)
//
// Predict and Figures are safe beside Observe, and take no lock.
package link

import (
	"math"
	"sync"
	"sync/atomic"
)

// Model is the online transfer model of one link direction (DESIGN.md
// § Priors, transfers): duration_us = latency + bytes / bandwidth. It is a
// weighted least-squares fit of (1, MB) → µs over the copies seen, each
// copy weighted by 1/duration² (relative errors, so that one large copy
// does not swamp the latency) and by forget^age, regularised toward
// the nominal figures as if by priorWeight copies at each of them.
//
// Ridge regression on decayed sufficient statistics, not recursive least
// squares: copies of a single size (a decode loop's activations) say
// nothing about the bandwidth, and RLS's covariance grows without bound
// in that direction until noise alone moves the slope. On an H100 it
// did: after a few thousand 3 KiB copies the predicted copy reached
// 4×10⁹ µs and kept every op off the GPU (TestSmallCopiesStayBounded).
// Here an unobserved direction falls back to the nominal figure. The fit
// sits under a mutex (ObserveTransfer is off the hot path); the published
// latency and slope are atomics that Select reads without locking. A
// hand-written 2×2 solve: gonum has batch least squares but no decayed
// sufficient statistics.
type Model struct {
	mu    sync.Mutex
	prior [2]float64    // nominal latency µs, µs per MB
	xx    [2][2]float64 // Σ wᵢ xᵢ xᵢᵀ, x = (1, MB), decayed
	xy    [2]float64    // Σ wᵢ xᵢ yᵢ, decayed
	n     int64

	lat, perMB atomic.Uint64 // float64 bits, published after each fit
}

const (
	forget      = 0.98 // weight of a copy per later copy: memory of ~50 copies
	priorWeight = 0.5  // the nominal figures count as this many copies
)

// New returns a model at the nominal latency (µs) and bandwidth (GB/s).
func New(latencyUs, gbps float64) *Model {
	l := &Model{prior: [2]float64{math.Max(latencyUs, 0), 1e3 / gbps}}
	l.publish(l.prior)
	return l
}

func (l *Model) publish(theta [2]float64) {
	l.lat.Store(math.Float64bits(math.Max(theta[0], 0)))
	l.perMB.Store(math.Float64bits(math.Max(theta[1], 1e-6)))
}

// Predict returns the predicted duration in µs of moving bytes; 0 for
// none.
func (l *Model) Predict(bytes float64) float64 {
	if bytes <= 0 {
		return 0
	}
	return math.Float64frombits(l.lat.Load()) + math.Float64frombits(l.perMB.Load())*bytes*1e-6
}

// Figures returns the current latency (µs) and bandwidth (GB/s).
func (l *Model) Figures() (latencyUs, gbps float64) {
	return math.Float64frombits(l.lat.Load()), 1e3 / math.Float64frombits(l.perMB.Load())
}

// Observe folds one measured copy of bytes that took us µs into the fit.
func (l *Model) Observe(bytes, us float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := [2]float64{1, bytes * 1e-6}
	w := 1 / math.Pow(math.Max(math.Max(l.Predict(bytes), us), 1), 2)
	for i := range 2 {
		for j := range 2 {
			l.xx[i][j] = forget*l.xx[i][j] + w*x[i]*x[j]
		}
		l.xy[i] = forget*l.xy[i] + w*x[i]*us
	}
	l.n++
	l.publish(l.solve())
}

// Copies returns how many copies were observed.
func (l *Model) Copies() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// solve returns the ridge estimate (XᵀWX + Λ)⁻¹ (XᵀWy + Λ θ₀), where Λ
// gives each nominal figure the weight of priorWeight copies that
// measure it alone: a latency-sized copy for the latency, a 1 MB copy at
// the nominal bandwidth for the slope.
func (l *Model) solve() [2]float64 {
	lat0, slope0 := math.Max(l.prior[0], 1), l.prior[1]
	lam := [2]float64{
		priorWeight / (lat0 * lat0),
		priorWeight / math.Pow(l.prior[0]+slope0, 2),
	}
	a := [2][2]float64{{l.xx[0][0] + lam[0], l.xx[0][1]}, {l.xx[1][0], l.xx[1][1] + lam[1]}}
	b := [2]float64{l.xy[0] + lam[0]*l.prior[0], l.xy[1] + lam[1]*slope0}
	det := a[0][0]*a[1][1] - a[0][1]*a[1][0]
	return [2]float64{(b[0]*a[1][1] - a[0][1]*b[1]) / det, (a[0][0]*b[1] - a[1][0]*b[0]) / det}
}
