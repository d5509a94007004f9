package adaptive

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// verifyWork is the workload of the verification tests: matmuls of four
// sizes, each with its true mean µs on the fake cpu and gpu (the GPU wins
// the large ones, the CPU the smallest).
var verifyWork = []struct {
	spec     kernels.Spec
	cpu, gpu float64
}{
	{matmul(1, 256, 256), 6, 12},
	{matmul(8, 512, 512), 40, 15},
	{matmul(64, 512, 512), 300, 25},
	{matmul(64, 1024, 1024), 1200, 60},
}

// runVerify runs n ops of verifyWork through s (noise σ 0.1, seeded) and
// returns their total µs and the share of Explore and Prior decisions.
func runVerify(t *testing.T, s *Scheduler, n int) (total, explore float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 5))
	var learning int
	for i := range n {
		w := verifyWork[i%len(verifyWork)]
		d, err := s.Select(w.spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason == Explore || d.Reason == Prior {
			learning++
		}
		mean := w.cpu
		if d.Name == "gpu" {
			mean = w.gpu
		}
		x := lognormal(r, mean, 0.1)
		total += x
		if err := s.Observe(d, us(x)); err != nil {
			t.Fatal(err)
		}
	}
	return total, float64(learning) / float64(n)
}

// claim returns n observations of mean µs as Stats (σ 0.1 of ln).
func claim(n, meanUs float64) bandit.Stats {
	m := math.Log(meanUs)
	return bandit.Stats{N: n, Sum: n * m, SumSq: n * (m*m + 0.01)}
}

// TestFoldContradicted: the poisoning of issue's experiment in small: a
// fleet whose evidence claims the GPU takes 403 µs (N = 10,000), or
// e^12 µs (N = 10⁹), everywhere. The node probes the GPU, finds it 3× off
// and more, sets the fleet's evidence aside, and ends within 3% of its
// solo total; its Changes (what its store keeps) hold none of the claim.
// An honest fleet is not set aside, and the node explores at most a
// tenth as much as alone.
func TestFoldContradicted(t *testing.T) {
	const n = 4000
	solo := newTestScheduler(t, Config{Seed: 3})
	defer solo.Close()
	soloUs, soloExplore := runVerify(t, solo, n)
	run := func(st func(gpuUs float64) bandit.Stats, cpu bool) (*Scheduler, float64, float64) {
		s := newTestScheduler(t, Config{Seed: 3})
		s.Track(1)
		var batch []learned.Foreign
		for _, w := range verifyWork {
			name := kernels.BucketName(w.spec)
			batch = append(batch, learned.Foreign{Key: learned.Key{Backend: "gpu", Bucket: name}, Stats: st(w.gpu)})
			if cpu {
				batch = append(batch, learned.Foreign{Key: learned.Key{Backend: "cpu", Bucket: name}, Stats: claim(1000, w.cpu)})
			}
		}
		s.Fold().Foreign(batch)
		total, explore := runVerify(t, s, n)
		return s, total, explore
	}
	for _, c := range []struct {
		name string
		st   func(float64) bandit.Stats
	}{
		{"403us", func(float64) bandit.Stats { return claim(1e4, 403) }},
		{"e^12us", func(float64) bandit.Stats { return claim(1e9, math.Exp(12)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, total, _ := run(c.st, false)
			defer s.Close()
			backend, ratio, ok := s.Fold().Contradicted()
			if !ok || backend != "gpu" || ratio > 1.0/verifyRatio {
				t.Errorf("contradicted %v: %s ×%.3g", ok, backend, ratio)
			}
			if total > 1.03*soloUs {
				t.Errorf("total %.0f µs, solo %.0f: over 3%% more", total, soloUs)
			}
			for _, ch := range s.Changes(nil) {
				if ch.Key.Backend == "gpu" && ch.Posterior.MeanUs() > 200 {
					t.Errorf("%v: the store would keep a GPU at %.0f µs", ch.Key, ch.Posterior.MeanUs())
				}
			}
			t.Logf("total %.0f µs, solo %.0f µs (%+.2f%%)", total, soloUs, 100*(total/soloUs-1))
		})
	}
	s, total, explore := run(func(gpu float64) bandit.Stats { return claim(1000, gpu) }, true)
	defer s.Close()
	if _, _, bad := s.Fold().Contradicted(); bad {
		t.Error("an honest fleet was set aside")
	}
	if explore > soloExplore/10 || soloExplore == 0 {
		t.Errorf("explored %.4f with an honest fleet, %.4f alone: want at most a tenth", explore, soloExplore)
	}
	t.Logf("honest fleet: total %.0f µs (solo %.0f), explore %.4f (solo %.4f)", total, soloUs, explore, soloExplore)
}

// TestProbeSwitchCounted: a fleet probe (verifier.probe) due at a
// decision where the bandit switches the bucket's incumbent waits for the
// next decision, so that the bucket's switch count and the backends'
// both equal the changes of the backend that ran, the probes' runs left
// out (DESIGN.md § The bandit: every switch is counted and reported).
// The setup: the GPU runs first; the CPU, stored at 50 µs but really
// 5 µs, takes the bucket; gpu2, which a peer claims takes 150 µs and the
// cost model finds cheaper than the CPU, is probed when the CPU is chosen.
func TestProbeSwitchCounted(t *testing.T) {
	spec := matmul(64, 512, 512)
	name := kernels.BucketName(spec)
	truth := map[string]float64{"gpu": 30, "gpu2": 15, "cpu": 5}
	due := 0 // probes at a switch or right after
	for seed := uint64(1); seed <= 8; seed++ {
		warm := map[learned.Key]bandit.NormalGamma{{Backend: "cpu", Bucket: name}: bandit.NewPrior(50, 3, 0.5)}
		s := newTestScheduler(t, Config{Seed: seed, Warm: warm, Backends: []backends.Backend{
			newFake("gpu", backends.GPU, gpuNominal),
			newFake("gpu2", backends.GPU, backends.Nominal{GFLOPS: 5000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}),
			newFake("cpu", backends.CPU, cpuNominal),
		}})
		s.Fold().Foreign([]learned.Foreign{{Key: learned.Key{Backend: "gpu2", Bucket: name}, Stats: claim(1000, 150)}})
		r := rand.New(rand.NewPCG(seed, 1))
		var changes int64
		last, inc, switchedAt := "", -1, -2
		for i := range 300 {
			d, err := s.Select(spec, Residency{})
			if err != nil {
				t.Fatal(err)
			}
			d.b.mu.Lock()
			if now := d.b.bb.Incumbent; now != inc {
				if inc >= 0 {
					switchedAt = i
				}
				inc = now
			}
			d.b.mu.Unlock()
			if d.Name == "gpu2" { // a probe
				if i-switchedAt <= 1 {
					due++
				}
			} else {
				if last != "" && d.Name != last {
					changes++
				}
				last = d.Name
			}
			if err := s.Observe(d, us(lognormal(r, truth[d.Name], 0.1))); err != nil {
				t.Fatal(err)
			}
		}
		tel := s.Telemetry()
		var backendSw int64
		for _, bk := range tel.Backends {
			backendSw += bk.Switches
		}
		if sw := tel.Buckets[0].Switches; sw != changes || backendSw != changes {
			t.Errorf("seed %d: %d switches in the bucket, %d in the backends; the backend that ran changed %d times",
				seed, sw, backendSw, changes)
		}
		s.Close()
	}
	if due == 0 {
		t.Fatal("no probe was due at a switch: the test checks nothing")
	}
}
