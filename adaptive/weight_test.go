package adaptive

import (
	"math/rand/v2"
	"testing"
)

// TestWeightCopyPerOp checks DESIGN.md § The bandit, hysteresis: a weight
// copy (Residency.AddWeight) is priced at face value, outside the margin.
// The GPU holds the bucket (100 µs against the CPU's 1,000); an op whose
// weight is not on the GPU would copy it in 1,000 µs, so the GPU costs
// 10% more than the CPU, within the 15% margin: the op runs on the CPU,
// and the bucket keeps the GPU for the ops whose weight it holds. The
// same bytes told as an activation (Residency.Add) stay in the margin,
// which keeps a chain where it runs.
func TestWeightCopyPerOp(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	spec := matmul(64, 512, 512)
	s := newTestScheduler(t, Config{Seed: 7})
	d, err := s.Select(spec, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	teach(t, s, d, 1, 100, 0.05, 200, r)
	teach(t, s, d, 0, 1000, 0.05, 200, r)
	// The weight's bytes for a 1,000 µs copy by the link model.
	p1, p2 := s.PredictTransfer("gpu", true, 1<<20), s.PredictTransfer("gpu", true, 2<<20)
	perMiB := p2 - p1
	bytes := int64((1000 - (p1 - perMiB)) / perMiB * (1 << 20))
	if got := s.PredictTransfer("gpu", true, bytes); got < 990 || got > 1010 {
		t.Fatalf("copy of %d bytes predicted %.0f µs, want 1,000", bytes, got)
	}
	run := func(res Residency) (cpu int) {
		for range 400 {
			d, err := s.Select(spec, res)
			if err != nil {
				t.Fatal(err)
			}
			if d.Name == "cpu" {
				cpu++
			}
		}
		return cpu
	}
	var lacking, held, activation Residency
	lacking.AddWeight(Host, bytes)
	held.AddWeight(Host|Backend(1), bytes)
	activation.Add(Host, bytes)
	for i := range 3 {
		if cpu := run(lacking); cpu < 380 {
			t.Errorf("round %d: weight not on the GPU: %d of 400 on the CPU, want ≥ 380", i, cpu)
		}
		if inc := s.Telemetry().Buckets[0].Incumbent; inc != "gpu" {
			t.Errorf("round %d: incumbent %q after the CPU ran the copies' ops, want gpu", i, inc)
		}
		if cpu := run(held); cpu > 4 {
			t.Errorf("round %d: weight on the GPU: %d of 400 on the CPU, want ≤ 4", i, cpu)
		}
	}
	if cpu := run(activation); cpu > 20 {
		t.Errorf("activation within the margin: %d of 400 on the CPU, want ≤ 20 (held)", cpu)
	}
}
