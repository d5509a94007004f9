package metrics_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/metrics"
)

// TestCollectors runs a Scheduler over a CPU and a GPU and checks each
// counter against a tally kept here (ops, compute time) and against the
// Scheduler's Telemetry (switches, explorations).
func TestCollectors(t *testing.T) {
	bes := []backends.Backend{
		backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
			Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}}),
		backends.Described(backends.Info{Name: "gpu", Kind: backends.GPU,
			Nominal: backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 5, LinkGBps: 25, LinkLatencyUs: 10}}),
	}
	s, err := adaptive.New(adaptive.Config{Backends: bes, Seed: 9, NoCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(9, 10))
	var ops [2]float64
	var total [2]float64
	for i := range 300 {
		m := []int{1, 64, 512}[i%3]
		spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, 512}, {512, 512}}}
		d, err := s.Select(spec, adaptive.Residency{})
		if err != nil {
			t.Fatal(err)
		}
		x := math.Round([]float64{50, 20}[d.Backend] * math.Exp(0.3*r.NormFloat64()))
		if err := s.Observe(d, backends.Timing{Duration: time.Duration(x * 1e3), Clock: backends.Simulated}); err != nil {
			t.Fatal(err)
		}
		ops[d.Backend]++ // a GPU's warm-up run is counted too
		total[d.Backend] += x
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.Collectors(s)...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for a, b := range s.Telemetry().Backends {
		want := map[string]float64{
			"adaptsched_ops_total/":          ops[a],
			"adaptsched_op_seconds_total/":   total[a] * 1e-6,
			"adaptsched_switches_total/":     float64(b.Switches),
			"adaptsched_explorations_total/": float64(b.Explorations),
		}
		for k, v := range want {
			if g := got[k+b.Name]; math.Abs(g-v) > 1e-9 {
				t.Errorf("%s%s = %v, want %v", k, b.Name, g, v)
			}
		}
	}
	if got["adaptsched_ops_total/cpu"]+got["adaptsched_ops_total/gpu"] != 300 {
		t.Errorf("ops counted %v, want 300", got)
	}
}
