package adaptive

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestStrategiesAndReasons checks DESIGN.md § Strategies and telemetry:
// each strategy's choice and reason on a fresh bucket, with capability
// gaps (the GPU lacks Softmax, the CPU lacks RoPE) and exclusions.
func TestStrategiesAndReasons(t *testing.T) {
	mm := matmul(64, 512, 512)
	softmax := kernels.Spec{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{64, 512}}}
	rope := kernels.Spec{Op: kernels.RoPE, DType: kernels.F32, In: []kernels.Shape{{1, 8, 64, 64}}}
	cpuOnly := []backends.Backend{newFake("cpu", backends.CPU, cpuNominal), newFake("cpu1", backends.CPU, cpuNominal)}
	cases := []struct {
		name     string
		strategy Strategy
		bes      []backends.Backend
		spec     kernels.Spec
		exclude  Mask
		why      Reason
		want     string
		reason   Reason
		err      error
	}{
		{name: "automatic fresh bucket", strategy: Automatic, spec: mm, want: "gpu", reason: Prior},
		{name: "automatic capability", strategy: Automatic, spec: softmax, want: "cpu", reason: Unsupported},
		{name: "automatic capability gpu", strategy: Automatic, spec: rope, want: "gpu", reason: Unsupported},
		{name: "gpu preferred", strategy: GPUPreferred, spec: mm, want: "gpu", reason: UserPreference},
		{name: "gpu preferred unsupported", strategy: GPUPreferred, spec: softmax, want: "cpu", reason: Unsupported},
		{name: "gpu preferred no gpu", strategy: GPUPreferred, bes: cpuOnly, spec: mm, reason: GPUUnavailable},
		{name: "cpu preferred", strategy: CPUPreferred, spec: mm, want: "cpu", reason: UserPreference},
		{name: "cpu preferred unsupported", strategy: CPUPreferred, spec: rope, want: "gpu", reason: Unsupported},
		{name: "only gpu", strategy: Only("gpu"), spec: mm, want: "gpu", reason: UserPreference},
		{name: "only gpu unsupported", strategy: Only("gpu"), spec: softmax, err: ErrNoBackend},
		{name: "memory constraint", strategy: Automatic, spec: mm, exclude: Backend(1), why: MemoryConstraint, want: "cpu", reason: MemoryConstraint},
		{name: "fallback", strategy: GPUPreferred, spec: mm, exclude: Backend(1), why: Fallback, want: "cpu", reason: Fallback},
		{name: "all excluded", strategy: Automatic, spec: mm, exclude: Backend(0) | Backend(1), why: Fallback, err: ErrNoBackend},
		{name: "excluded and unsupported", strategy: Automatic, spec: softmax, exclude: Backend(0), why: Fallback, err: ErrNoBackend},
		{name: "invalid spec", strategy: Automatic, spec: kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{2, 3}, {4, 5}}}, err: kernels.ErrInvalidSpec},
		{name: "invalid arity", strategy: Automatic, spec: kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{1}, {1}, {1}, {1}}}, err: kernels.ErrInvalidSpec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestScheduler(t, Config{Backends: c.bes, Strategy: c.strategy, Seed: 7})
			d, err := s.SelectExcept(c.spec, Residency{}, c.exclude, c.why)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.want != "" && d.Name != c.want {
				t.Errorf("backend %s, want %s", d.Name, c.want)
			}
			if d.Reason != c.reason {
				t.Errorf("reason %v, want %v", d.Reason, c.reason)
			}
			if d.Name != s.Backends()[d.Backend] {
				t.Errorf("Name %s does not match Backend %d", d.Name, d.Backend)
			}
			for i := range MaxBackends {
				candidate := i < len(s.Backends()) && !c.exclude.Has(i)
				if got := !math.IsNaN(d.Estimates[i]); candidate && !got && c.reason != Unsupported {
					t.Errorf("estimate %d is NaN for a candidate", i)
				} else if i >= len(s.Backends()) && got {
					t.Errorf("estimate %d = %v for no backend", i, d.Estimates[i])
				}
			}
			if tel := s.Telemetry(); tel.Reasons[c.reason] != 1 || tel.Decisions != 1 {
				t.Errorf("telemetry reasons %v, decisions %d", tel.Reasons, tel.Decisions)
			}
		})
	}
}

// TestNewRejects checks Config.validate (CONVENTIONS.md 5).
func TestNewRejects(t *testing.T) {
	cpu := newFake("cpu", backends.CPU, cpuNominal)
	var nine []backends.Backend
	for i := range 9 {
		nine = append(nine, newFake(string(rune('a'+i)), backends.CPU, cpuNominal))
	}
	cases := map[string]Config{
		"no backends":   {},
		"nine backends": {Backends: nine},
		"nil backend":   {Backends: []backends.Backend{cpu, nil}},
		"duplicate":     {Backends: []backends.Backend{cpu, newFake("cpu", backends.GPU, gpuNominal)}},
		"unnamed":       {Backends: []backends.Backend{newFake("", backends.CPU, cpuNominal)}},
		"only unknown":  {Backends: []backends.Backend{cpu}, Strategy: Only("rocm")},
		"bad discount":  {Backends: []backends.Backend{cpu}, Bandit: bandit.Config{Discount: 2}},
		"bad shards":    {Backends: []backends.Backend{cpu}, Shards: 6},
	}
	for name, cfg := range cases {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

// TestStrings checks the enums' names and numeric fallbacks.
func TestStrings(t *testing.T) {
	for r, want := range map[Reason]string{Exploit: "Exploit", HysteresisHold: "HysteresisHold", Fallback: "Fallback", 0: "Reason(0)", 99: "Reason(99)"} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", uint8(r), r.String(), want)
		}
	}
	if got := len(Reasons()); got != 9 {
		t.Errorf("%d reasons, want the 9 of DESIGN.md", got)
	}
	for st, want := range map[Strategy]string{Automatic: "automatic", GPUPreferred: "gpu-preferred", CPUPreferred: "cpu-preferred", Only("rocm"): "only(rocm)", {kind: 9}: "Strategy(9)"} {
		if st.String() != want {
			t.Errorf("%q, want %q", st.String(), want)
		}
	}
	if (Strategy{}) != Automatic {
		t.Error("zero Strategy is not Automatic")
	}
}

// TestResidencyAdd checks that merging past MaxInputs never hides a
// transfer.
func TestResidencyAdd(t *testing.T) {
	var r Residency
	for range MaxInputs - 1 {
		r.Add(Host, 10)
	}
	r.Add(Backend(1)|Host, 10)
	r.Add(Backend(1), 5)
	if r.N != MaxInputs {
		t.Fatalf("N = %d", r.N)
	}
	if last := r.Inputs[MaxInputs-1]; last.On != Backend(1) || last.Bytes != 15 {
		t.Errorf("merged entry %+v, want on gpu only, 15 bytes", last)
	}
	r.Add(Backend(2), 1)
	if last := r.Inputs[MaxInputs-1]; last.On != Host || last.Bytes != 16 {
		t.Errorf("merged entry %+v, want host, 16 bytes", last)
	}
}

// TestResidencyAddOverflow checks that merging into a full Residency
// never lowers the merged entry's bytes: sums saturate rather than wrap
// below zero, and non-positive bytes add nothing, so the transfer that
// Select charges for the entry stays.
func TestResidencyAddOverflow(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	for _, extra := range [][]int64{{math.MaxInt64, math.MaxInt64}, {-(1 << 20)}, {math.MinInt64}} {
		var r Residency
		for range MaxInputs - 1 {
			r.Add(Backend(1), 10)
		}
		r.Add(Host, 1<<20)
		for _, b := range extra {
			r.Add(Host, b)
		}
		if last := r.Inputs[MaxInputs-1]; last.Bytes < 1<<20 {
			t.Errorf("after adding %v: merged entry %+v lost bytes", extra, last)
		}
		d, err := s.Select(matmul(64, 64, 64), r)
		if err != nil {
			t.Fatal(err)
		}
		if !(d.Transfer[1] > 0) {
			t.Errorf("after adding %v: gpu transfer %v, want > 0", extra, d.Transfer[1])
		}
	}
}

// TestHugeDimension checks the uncached path: a dimension of 2^33 (2^36
// bytes read and written: class 72) does
// not fit the shape key, and Select still places the op.
func TestHugeDimension(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	spec := kernels.Spec{Op: kernels.Scale, DType: kernels.F32, In: []kernels.Shape{{1 << 33}}}
	for range 2 {
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.BucketName(d.Bucket); got != kernels.BucketName(spec) || got != "Scale/f32/s72" {
			t.Errorf("bucket %q, want Scale/f32/s72", got)
		}
	}
}

// TestBestMean checks the test of Explore against Exploit, which settles
// most arms without exponentials, against its definition: arm has the
// lowest exp(μ + E[1/τ]/2) + transfer of the allowed arms, the lowest
// index winning a tie. Means and transfers are drawn so that arms often
// trade one term for the other, and some tie exactly.
func TestBestMean(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	e := &engine{n: 4}
	b := &bucket{}
	b.bb.Arms = make([]bandit.NormalGamma, 4)
	for trial := range 20000 {
		var extra [MaxBackends]float64
		for a := range 4 {
			b.bb.Arms[a] = bandit.NewPrior(float64(1+r.IntN(4))*50, 1, 0.2)
			extra[a] = float64(r.IntN(4)) * 40
		}
		allowed := Mask(1 + r.IntN(15))
		ext := &extra
		if trial%5 == 0 {
			ext = nil
		}
		best, bestC := -1, math.Inf(1)
		for a := range 4 {
			if !allowed.Has(a) {
				continue
			}
			c := b.bb.Arms[a].MeanUs()
			if ext != nil {
				c += ext[a]
			}
			if c < bestC {
				best, bestC = a, c
			}
		}
		for a := range 4 {
			if !allowed.Has(a) {
				continue
			}
			if got := e.bestMean(b, a, allowed, ext, nil, 0); got != (a == best) {
				t.Fatalf("trial %d: arms %+v, transfers %v, allowed %04b: bestMean(%d) = %v, the cheapest is %d",
					trial, b.bb.Arms, ext, allowed, a, got, best)
			}
		}
	}
}
