package link

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNominal: with no copy observed, the model predicts the nominal
// latency and bandwidth exactly (DESIGN.md § Priors, transfers).
func TestNominal(t *testing.T) {
	l := New(20, 25)
	for _, b := range []float64{1, 4096, 1 << 20, 1 << 30} {
		if got, want := l.Predict(b), 20+b/25e3; math.Abs(got-want) > 1e-9*want {
			t.Errorf("predict(%g) = %g, want %g", b, got, want)
		}
	}
	if l.Predict(0) != 0 {
		t.Errorf("predict(0) = %g, want 0", l.Predict(0))
	}
}

// TestFit: noiseless copies of mixed sizes recover the link's latency
// and bandwidth within 2%, starting from a nominal figure 3× off.
func TestFit(t *testing.T) {
	l := New(10, 10)
	sizes := []float64{4 << 10, 64 << 10, 1 << 20, 16 << 20}
	for i := range 200 {
		b := sizes[i%len(sizes)]
		l.Observe(b, 5+b/30e3)
	}
	lat, gbps := l.Figures()
	if math.Abs(lat-5) > 0.1 || math.Abs(gbps-30) > 0.6 {
		t.Errorf("fit %.3f µs, %.3f GB/s; want 5 µs, 30 GB/s", lat, gbps)
	}
}

// TestSmallCopiesStayBounded replays what an H100 decode at batch 1
// showed (cmd/infer -backends cpu,rocm): thousands of 3 KiB activation
// copies (4 µs, heavy-tailed noise, 1% of them 10× slower) and a large
// weight copy now and then. Copies of one size say nothing about the
// bandwidth; the earlier recursive least squares let its covariance grow
// without bound there, and its prediction for a 3 KiB copy reached
// 4×10⁹ µs, which kept every op off the GPU. Every prediction along the
// way must stay within 4× of the truth.
func TestSmallCopiesStayBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	truth := func(b float64) float64 { return 4 + b/50e3 } // 4 µs, 50 GB/s
	l := New(10, 32)
	for i := range 20000 {
		b := 3072.0
		if i%2000 == 1 {
			b = 26e6
		}
		us := truth(b) * math.Exp(0.3*r.NormFloat64())
		if r.IntN(100) == 0 {
			us *= 10
		}
		l.Observe(b, us)
		for _, q := range []float64{3072, 626688, 26e6} {
			if p := l.Predict(q); p > 4*truth(q) || p < truth(q)/4 {
				t.Fatalf("copy %d: predict(%g) = %.4g µs, truth %.4g", i, q, p, truth(q))
			}
		}
	}
}
