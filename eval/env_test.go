package eval

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// sliceWorkload replays a fixed list of ops.
type sliceWorkload struct{ ops []sim.Op }

func (w *sliceWorkload) Name() string { return "slice" }
func (w *sliceWorkload) Next() (sim.Op, bool) {
	if len(w.ops) == 0 {
		return sim.Op{}, false
	}
	op := w.ops[0]
	w.ops = w.ops[1:]
	return op, true
}

// handCase is DESIGN.md § Evaluation's oracle on a case worked out by
// hand: ops X, Y, X, Y; X costs 10 µs on the GPU and 40 on the CPU, Y 30
// and 12; every op's activation is 1000 bytes, and the GPU's link costs
// latency + 1000 B / 1 GB/s = latency + 1 µs per crossing.
func handCase(t *testing.T, linkLatency float64) *Env {
	t.Helper()
	csv := "op,shape,backend,mean_us,std_us,n\n" +
		"Add,1000;1000,gpu,10,0,1\nAdd,1000;1000,cpu,40,0,1\n" +
		"Add,4000;4000,gpu,30,0,1\nAdd,4000;4000,cpu,12,0,1\n"
	tab, err := sim.LoadTable(strings.NewReader(csv), "hand")
	if err != nil {
		t.Fatal(err)
	}
	arms := tab.Arms()
	arms[0].Profile.Shared, arms[0].Profile.LinkGBps, arms[0].Profile.LinkLatencyUs = false, 1, linkLatency
	x := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1000}, {1000}}}
	y := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4000}, {4000}}}
	w := &sliceWorkload{ops: []sim.Op{
		{Spec: x, Key: 0, Bucket: 0, BucketName: "X", ActBytes: 1000},
		{Spec: y, Key: 1, Bucket: 1, BucketName: "Y", ActBytes: 1000},
		{Spec: x, Key: 0, Bucket: 0, BucketName: "X", ActBytes: 1000},
		{Spec: y, Key: 1, Bucket: 1, BucketName: "Y", ActBytes: 1000},
	}}
	env, err := NewEnv(w, arms, EnvOptions{Checkpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestOracleByHand(t *testing.T) {
	cases := []struct {
		latency    float64
		oracle     float64 // worked out by hand
		assign     []int32 // X, Y
		gpu, cpu   float64 // everything on one arm
		xGPU, yCPU float64
	}{
		// Link 5 µs (6 per crossing): X on GPU, Y on CPU, every op crosses:
		// (10+6) + (12+6) + (10+6) + (12+6) = 68. All GPU: 6 + 80 = 86;
		// all CPU: 104; X on CPU, Y on GPU: 40 + 36 + 46 + 36 = 158.
		{latency: 5, oracle: 68, assign: []int32{0, 1}, gpu: 86, cpu: 104},
		// Link 50 µs (51 per crossing): the crossings make the compute-best
		// split cost 10+51+12+51+10+51+12+51 = 248, so the oracle keeps
		// everything on the CPU: 104 (all GPU: 51 + 80 = 131).
		{latency: 50, oracle: 104, assign: []int32{1, 1}, gpu: 131, cpu: 104},
	}
	for _, c := range cases {
		env := handCase(t, c.latency)
		if math.Abs(env.OracleUs()-c.oracle) > 1e-9 {
			t.Errorf("link %v µs: oracle %v µs, want %v", c.latency, env.OracleUs(), c.oracle)
		}
		if env.assign[0] != c.assign[0] || env.assign[1] != c.assign[1] {
			t.Errorf("link %v µs: oracle assignment %v, want %v", c.latency, env.assign, c.assign)
		}
		arms := env.Arms()
		for _, p := range []struct {
			pol  Policy
			want float64
		}{
			{NewOracle(arms, env.Truth), c.oracle},
			{NewFixed(arms, 0), c.gpu},
			{NewFixed(arms, 1), c.cpu},
		} {
			r, err := env.Run(p.pol, 1)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.TotalUs-p.want) > 1e-9 {
				t.Errorf("link %v µs: %s costs %v µs, want %v", c.latency, r.Policy, r.TotalUs, p.want)
			}
			if want := (p.want - c.oracle) / c.oracle * 100; math.Abs(r.RegretPct-want) > 1e-9 {
				t.Errorf("link %v µs: %s regret %v%%, want %v", c.latency, r.Policy, r.RegretPct, want)
			}
			if len(r.Points) != 5 || r.Points[4].PolicyUs != r.TotalUs || r.Points[4].OracleUs != c.oracle {
				t.Errorf("link %v µs: %s points %+v", c.latency, r.Policy, r.Points)
			}
		}
	}
}

// TestEnvRejectsErrorEvents: the harness replays throttle and contention
// only; a device-lost event is injected through sim.Device.
func TestEnvRejectsErrorEvents(t *testing.T) {
	w, _ := sim.Decode(sim.Qwen25_05B, 1, 128, 10)
	if _, err := NewEnv(w, []sim.Arm{{Profile: sim.MustProfile("h100"), Events: []sim.Event{{Kind: sim.DeviceLost}}}}, EnvOptions{}); !errors.Is(err, ErrInvalidSetup) && !errors.Is(err, sim.ErrInvalidEvent) {
		t.Errorf("harness accepted a device-lost event: %v", err)
	}
}

// TestContentionSlowsLinks: a contention event slows its arm's link as
// well as its compute (sim.Contention), in the copies a run is charged,
// in the makespan under every model, and in the oracle, which no fixed
// policy beats; a throttle slows compute alone.
func TestContentionSlowsLinks(t *testing.T) {
	const n, at = 2000, 1000
	for _, m := range []sim.ExecModel{sim.Serial, sim.Async, sim.Synchronous} {
		run := func(ev ...sim.Event) (Result, *Env) {
			w, _ := sim.Decode(sim.Qwen25_05B, 1, 128, n)
			env, err := NewEnv(w, []sim.Arm{{Profile: sim.MustProfile("h100"), Events: ev}, {Profile: sim.MustProfile("cpu2")}}, EnvOptions{Model: m, Checkpoint: at})
			if err != nil {
				t.Fatal(err)
			}
			arms := make([]int, n)
			for i := range arms {
				arms[i] = i % 2 // every op's input crosses h100's link
			}
			r, err := env.Run(&scripted{arms: arms}, 1)
			if err != nil {
				t.Fatal(err)
			}
			return r, env
		}
		base, _ := run()
		thr, _ := run(sim.Event{At: at, Kind: sim.Throttle, Factor: 3})
		con, env := run(sim.Event{At: at, Kind: sim.Contention, Factor: 3})
		if math.Abs(thr.TransferUs-base.TransferUs) > 1e-6*base.TransferUs {
			t.Errorf("%v: a throttle moved the copies from %.1f to %.1f µs", m, base.TransferUs, thr.TransferUs)
		}
		// The second half's copies take 3× as long: 2× the half in all.
		if want := 2 * base.TransferUs; math.Abs(con.TransferUs-want) > 0.01*want {
			t.Errorf("%v: copies under ×3 contention from the middle on: %.1f µs, want about %.1f (2× %.1f)", m, con.TransferUs, want, base.TransferUs)
		}
		if con.MakespanUs < thr.MakespanUs+0.5*base.TransferUs { // copies may hide behind the host's issue
			t.Errorf("%v: makespan %.1f µs under contention, %.1f under a throttle: the slower links did not show", m, con.MakespanUs, thr.MakespanUs)
		}
		ps, err := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Name() != "cpu" && p.Name() != "gpu" {
				continue
			}
			r, err := env.Run(p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.TotalUs < r.OracleUs*(1-1e-9) {
				t.Errorf("%v: %s %.1f µs under the oracle's %.1f", m, p.Name(), r.TotalUs, r.OracleUs)
			}
		}
	}
}

// TestTableDurations: a table workload's durations are drawn around the
// measured means (testdata/small.csv's cpu column, within 2%).
func TestTableDurations(t *testing.T) {
	f, err := os.Open("../sim/testdata/small.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := sim.LoadTable(f, "small.csv")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := tab.Workload(60000, 1, 1)
	env, err := NewEnv(w, w.Arms(), EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := env.Run(NewFixed(env.Arms(), 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	cpu := w.Arms()[1]
	var want float64
	w3, _ := tab.Workload(60000, 1, 1)
	for {
		op, ok := w3.Next()
		if !ok {
			break
		}
		m, _, err := cpu.Truth(op.Spec)
		if err != nil {
			t.Fatal(err)
		}
		want += m
	}
	if math.Abs(r.TotalUs-want)/want > 0.02 {
		t.Errorf("cpu total %.0f µs, measured means give %.0f", r.TotalUs, want)
	}
}

// assigned places each op by its bucket: assign[bucket].
type assigned []int

func (p assigned) Name() string                { return "assigned" }
func (p assigned) Choose(t *Task) int          { return p[t.Bucket] }
func (p assigned) Observe(*Task, int, float64) {}

// TestOracleReadsAfter: the oracle prices an op's copies from the ops it
// reads (sim.Op.After), as Run charges them, not from the op before it.
// Ops X, Y, X, Y as in handCase (link 5 µs), each X after 2 reading the
// X before it and each Y the Y: X on the GPU and Y on the CPU cross the
// link twice, 6 + 10 + 18 + 10 + 12 = 56 µs, where the op before would
// cross it at every op (68). No fixed assignment beats the oracle, and
// the oracle's costs what it says.
func TestOracleReadsAfter(t *testing.T) {
	env := handCase(t, 5)
	x, y := env.keys[0].spec, env.keys[1].spec
	w := &sliceWorkload{ops: []sim.Op{
		{Spec: x, Key: 0, Bucket: 0, BucketName: "X", ActBytes: 1000},
		{Spec: y, Key: 1, Bucket: 1, BucketName: "Y", ActBytes: 1000},
		{Spec: x, Key: 0, Bucket: 0, BucketName: "X", ActBytes: 1000, After: []int{2}},
		{Spec: y, Key: 1, Bucket: 1, BucketName: "Y", ActBytes: 1000, After: []int{2}},
	}}
	env, err := NewEnv(w, env.arms, EnvOptions{Checkpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := env.OracleUs(); math.Abs(got-56) > 1e-9 {
		t.Errorf("oracle %v µs, want 56", got)
	}
	for _, p := range []Policy{NewOracle(env.Arms(), env.Truth), assigned{0, 1}, assigned{0, 0}, assigned{1, 1}, assigned{1, 0}} {
		r, err := env.Run(p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := p.(assigned); ok {
			r.Policy += fmt.Sprint(a)
		}
		if r.RegretPct < -1e-9 {
			t.Errorf("%s: %v µs, regret %v%% against the oracle's %v", r.Policy, r.TotalUs, r.RegretPct, r.OracleUs)
		}
	}
}

// TestStoppedShares: a run that EnvOptions.Stop ends early reports the
// ops it ran, and the oracle's shares over the whole workload, as its
// per-bucket decisions: each set of shares adds up to 1.
func TestStoppedShares(t *testing.T) {
	env := handCase(t, 5)
	env.stop = func() bool { return true } // at the checkpoint of op 1
	r, err := env.Run(NewFixed(env.Arms(), 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Stopped || r.Ops != 1 {
		t.Fatalf("stopped %v after %d ops, want 1", r.Stopped, r.Ops)
	}
	var share, oracle float64
	for a := range r.Share {
		share += r.Share[a]
		oracle += r.OracleShare[a]
	}
	if math.Abs(share-1) > 1e-9 || math.Abs(oracle-1) > 1e-9 {
		t.Errorf("shares add up to %v, the oracle's to %v (%v): want 1 each", share, oracle, r.OracleShare)
	}
}

// TestEnvRejectsTooManyArms: more arms than adaptive.MaxBackends is a
// setup error, not a panic at the first op of an async run.
func TestEnvRejectsTooManyArms(t *testing.T) {
	csv := "op,shape,backend,mean_us,std_us,n\n"
	for i := range adaptive.MaxBackends + 1 {
		csv += fmt.Sprintf("Add,1000;1000,dev%d,%d,0,1\n", i, 10+i)
	}
	tab, err := sim.LoadTable(strings.NewReader(csv), "many")
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1000}, {1000}}}
	w := &sliceWorkload{ops: []sim.Op{{Spec: x, BucketName: "X", ActBytes: 1000}, {Spec: x, BucketName: "X", ActBytes: 1000}}}
	_, err = NewEnv(w, tab.Arms(), EnvOptions{Model: sim.Async})
	want := fmt.Sprintf("%d arms, at most %d", adaptive.MaxBackends+1, adaptive.MaxBackends)
	if !errors.Is(err, ErrInvalidSetup) || !strings.Contains(fmt.Sprint(err), want) {
		t.Fatalf("NewEnv with %d arms: %v, want ErrInvalidSetup saying %q", len(tab.Arms()), err, want)
	}
}
