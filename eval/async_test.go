package eval

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/sim"
)

// The execution-model targets (DESIGN.md § Execution models): decode from
// a context of 1,024 tokens on each simulated GPU paired with cpu2, at
// batch 1 and 16: Llama-3.2-1B (8-bit), whose ops form one chain, and
// Qwen1.5-MoE-A2.7B, whose experts are independent branches. Modelled
// figures are deterministic by seed. Tests run asyncTestOps ops,
// BenchmarkAsync fullOps.
const asyncTestOps = 25_000

var asyncGPUs = []string{"h100", "mi300x", "rx7900xtx", "igpu"}

// fixedPolicies are the rules the learner must not lose to: everything
// on one device, and the static baselines.
var fixedPolicies = []string{"cpu", "gpu", "static2x", "pcie5x"}

// decodeRun is one policy's decode: modelled (makespan) and bound
// tokens per second, and its Result.
type decodeRun struct {
	modelled, bound float64
	res             Result
}

// runDecode runs thompson and the fixed policies (only the named ones
// when names are given) on a decode of m at batch on gpu with cpu2 under
// model x, n ops. The Env is returned too.
func runDecode(tb testing.TB, m sim.Model, gpu string, batch int, x sim.ExecModel, n int, names ...string) (map[string]decodeRun, *Env) {
	tb.Helper()
	w, err := sim.Decode(m, batch, 1024, n)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := NewEnv(w, []sim.Arm{{Profile: sim.MustProfile(gpu)}, {Profile: sim.MustProfile("cpu2")}}, EnvOptions{Model: x})
	if err != nil {
		tb.Fatal(err)
	}
	ps, err := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]decodeRun{}
	for _, p := range ps {
		if p.Name() != "thompson" && !isFixed(p.Name()) || len(names) > 0 && !slices.Contains(names, p.Name()) {
			continue
		}
		r, err := env.Run(p, 1)
		if err != nil {
			tb.Fatal(err)
		}
		tokens := float64(r.Steps * int64(batch))
		out[p.Name()] = decodeRun{modelled: tokens / r.MakespanUs * 1e6, bound: tokens / r.BoundUs * 1e6, res: r}
	}
	return out, env
}

func isFixed(name string) bool {
	for _, f := range fixedPolicies {
		if f == name {
			return true
		}
	}
	return false
}

// bestFixed returns the fixed policy of the highest modelled throughput.
func bestFixed(rs map[string]decodeRun) (string, float64) {
	best, tps := "", 0.0
	for _, f := range fixedPolicies {
		if r := rs[f]; r.modelled > tps {
			best, tps = f, r.modelled
		}
	}
	return best, tps
}

// overlapLimit is the most any placement of env's ops over arms 0 and 1
// could gain over the faster arm alone, dependencies, copies and the
// host ignored: each op may even be split between the arms. Work goes
// first to the arm where it is relatively cheapest (a fractional
// knapsack), until both arms finish together.
func overlapLimit(env *Env) float64 {
	type w struct{ g, c float64 }
	var ops []w
	var g, c float64
	for _, o := range env.ops {
		k := env.keys[o.key]
		ops = append(ops, w{k.base[0], k.base[1]})
		g += k.base[0]
		c += k.base[1]
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].c/ops[i].g < ops[j].c/ops[j].g })
	// The CPU takes ops from the front (cheapest for it relative to the
	// GPU) while its time stays below the GPU's remainder.
	cpu, gpu := 0.0, g
	for _, o := range ops {
		if cpu+o.c > gpu-o.g {
			// Split this op so that both end together.
			f := (gpu - cpu) / (o.c + o.g)
			cpu += f * o.c
			gpu -= f * o.g
			break
		}
		cpu += o.c
		gpu -= o.g
	}
	return min(g, c) / max(cpu, gpu)
}

// TestAsyncTargets holds the execution-model targets that the figures
// meet (DESIGN.md § Execution models): only:gpu reaches 0.9 of its bound
// on every GPU and batch; the async model is at least 2× the synchronous
// one at batch 1 on the discrete AMD GPUs (igpu's kernels are long against
// its launch costs: BENCHMARKS.md); on h100, whose launch costs were
// measured through this Executor (sim/launch.go), it stays within 1.1–2×,
// about the 1.17–1.55× measured on an H200; thompson is within 1% of the
// best fixed policy at this reduced size (the learning it pays for), 3%
// on igpu at batch 1, where each trial of the CPU inside the GPU's chain
// pays two handoffs: the host's wait for the CPU's output and the CPU's
// resume after igpu's (1.020× at full size while handoffs were free,
// 0.980× since).
func TestAsyncTargets(t *testing.T) {
	for _, g := range asyncGPUs {
		for _, b := range []int{1, 16} {
			as, _ := runDecode(t, sim.Llama32_1B, g, b, sim.Async, asyncTestOps)
			sy, _ := runDecode(t, sim.Llama32_1B, g, b, sim.Synchronous, asyncTestOps, "gpu")
			gpu := as["gpu"]
			if gpu.modelled < 0.9*gpu.bound {
				t.Errorf("%s b%d: only:gpu %.0f modelled tokens/s, below 0.9 × its bound %.0f", g, b, gpu.modelled, gpu.bound)
			}
			r := gpu.modelled / sy["gpu"].modelled
			switch {
			case b != 1 || g == "igpu":
			case g == "h100" && (r < 1.1 || r > 2):
				t.Errorf("h100 b1: async %.2f× the synchronous model, want 1.1–2 (measured on an H200: 1.17–1.55)", r)
			case g != "h100" && r < 2:
				t.Errorf("%s b1: async %.2f× the synchronous model, want ≥ 2", g, r)
			}
			best, tps := bestFixed(as)
			within := 0.99
			if g == "igpu" && b == 1 {
				within = 0.97 // measured 0.981: each CPU trial's handoff costs igpu's SyncUs (TestCPUWaitsForGPUResumes)
			}
			if th := as["thompson"].modelled; th < within*tps {
				t.Errorf("%s b%d: thompson %.0f modelled tokens/s, below %v × %s's %.0f", g, b, th, within, best, tps)
			}
		}
	}
}

// TestAsyncSerialIsTotal: under the Serial model the makespan is the sum
// of the durations (the model before queues), and the Async model's
// makespan of a chain on one device is its busy time plus what the host
// adds.
func TestAsyncSerialIsTotal(t *testing.T) {
	se, _ := runDecode(t, sim.Qwen25_05B, "h100", 1, sim.Serial, 5_000)
	as, _ := runDecode(t, sim.Qwen25_05B, "h100", 1, sim.Async, 5_000)
	for _, p := range []string{"thompson", "gpu", "cpu"} {
		r := se[p].res
		if d := r.MakespanUs - r.TotalUs; d > 1e-6*r.TotalUs || d < -1e-6*r.TotalUs || r.IssueUs != 0 || r.SyncUs != 0 {
			t.Errorf("%s serial: makespan %.1f µs, total %.1f, issue %.1f, sync %.1f", p, r.MakespanUs, r.TotalUs, r.IssueUs, r.SyncUs)
		}
	}
	r := as["gpu"].res
	if r.MakespanUs < r.BoundUs || r.MakespanUs > r.BusyUs[0]+r.IssueUs+r.SyncUs {
		t.Errorf("async gpu: makespan %.1f µs outside [bound %.1f, busy %.1f + issue %.1f + sync %.1f]", r.MakespanUs, r.BoundUs, r.BusyUs[0], r.IssueUs, r.SyncUs)
	}
}

// TestQueueWaitRelative: clock.queueWait gives each arm its wait beyond
// the least, and an op's inputs count in every arm's wait. Two busy
// queues read as the difference of their ends, not as both waits; an op
// that reads the busy GPU's output gains nothing on the idle CPU, so its
// wait is none on either.
func TestQueueWaitRelative(t *testing.T) {
	var arms []sim.Arm
	for _, name := range []string{"cpu2", "h100"} {
		p, err := sim.LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		arms = append(arms, sim.Arm{Profile: p})
	}
	c := newClock(sim.Async, arms, 2)
	c.run(0, nil, 1, 5000, false) // 5 ms on the GPU, not waited for
	c.run(1, nil, 0, 1000, false) // then 1 ms on the CPU
	if c.ends[0]-c.ends[1] < 3000 {
		t.Fatalf("the GPU's op ends at %.1f µs, the CPU's at %.1f: not the case this test is for", c.ends[0], c.ends[1])
	}
	var res adaptive.Residency
	c.queueWait(&res, nil)
	if want := float32(c.ends[0] - c.ends[1]); res.QueueUs[0] != 0 || math.Abs(float64(res.QueueUs[1]-want)) > 1e-3 {
		t.Errorf("both queues busy: waits %v µs, want [0 %v]", res.QueueUs[:2], want)
	}
	c.queueWait(&res, []input{{op: 0, arm: 1, bytes: 4096}})
	if res.QueueUs[0] != 0 || res.QueueUs[1] != 0 {
		t.Errorf("an input the GPU's op makes: waits %v µs, want none on either arm", res.QueueUs[:2])
	}
}

// TestGPUWaitsForCPUOnHost: the harness times a handoff between arms as
// the devices do (sim.Device, backends/rocm): an op placed on a GPU that
// reads a CPU op's output is issued once the host has waited for it; a
// CPU op that reads a GPU op's output waits on its own queue, the host
// going on.
func TestGPUWaitsForCPUOnHost(t *testing.T) {
	for _, gpu := range []string{"igpu", "h100"} {
		arms := []sim.Arm{{Profile: sim.MustProfile("cpu2")}, {Profile: sim.MustProfile(gpu)}}
		g := arms[1].Profile
		c := newClock(sim.Async, arms, 4)
		c.run(0, nil, 0, 1000, false)                                 // 1 ms on the CPU
		c.run(1, []input{{op: 0, arm: 0, bytes: 4096}}, 1, 10, false) // the GPU reads it
		if h := c.tl.HostUs(); h < c.ends[0] {
			t.Errorf("%s: host at %.1f µs after issuing a GPU op on a CPU op ending at %.1f: it did not wait", gpu, h, c.ends[0])
		}
		if want := c.ends[0] + g.IssueUs + 10; c.ends[1] < want-1e-9 {
			t.Errorf("%s: the GPU op ends at %.1f µs, before %.1f (the CPU's end, the host's issue, its 10 µs)", gpu, c.ends[1], want)
		}
		host := c.tl.HostUs()
		c.run(2, nil, 1, 1000, false)                                 // 1 ms on the GPU
		c.run(3, []input{{op: 2, arm: 1, bytes: 4096}}, 0, 10, false) // the CPU reads it
		if h := c.tl.HostUs(); h >= c.ends[2] || c.ends[3] < c.ends[2]+10 {
			t.Errorf("%s: CPU op after a GPU op ending at %.1f µs ends at %.1f, host at %.1f (from %.1f): want the CPU's queue to wait, not the host",
				gpu, c.ends[2], c.ends[3], h, host)
		}
	}
}

// TestCPUWaitsForGPUResumes: the harness charges a CPU arm's queue the
// resume after a GPU's output it waited for (sim.Timeline.EnqueueWaiting),
// as sim.Device does: igpu's op ending while the CPU is idle holds the
// CPU's op until its end plus igpu's SyncUs; one ending while the CPU is
// busy costs nothing.
func TestCPUWaitsForGPUResumes(t *testing.T) {
	arms := []sim.Arm{{Profile: sim.MustProfile("cpu2")}, {Profile: sim.MustProfile("igpu")}}
	g := arms[1].Profile
	c := newClock(sim.Async, arms, 5)
	c.run(0, nil, 1, 1000, false)                                 // 1 ms on the GPU
	c.run(1, []input{{op: 0, arm: 1, bytes: 4096}}, 0, 10, false) // the CPU reads it
	if want := c.ends[0] + g.SyncUs + 10; math.Abs(c.ends[1]-want) > 1e-9 {
		t.Errorf("CPU op after a GPU op ending at %.1f µs ends at %.1f, want %.1f (+ igpu's SyncUs, its 10 µs)", c.ends[0], c.ends[1], want)
	}
	c.run(2, nil, 1, 10, false)   // a short GPU op
	c.run(3, nil, 0, 1000, false) // the CPU busy past its end
	c.run(4, []input{{op: 2, arm: 1, bytes: 4096}}, 0, 10, false)
	if want := c.ends[3] + 10; math.Abs(c.ends[4]-want) > 1e-9 {
		t.Errorf("CPU op after a GPU op that ended at %.1f µs, behind CPU work ending at %.1f, ends at %.1f, want %.1f", c.ends[2], c.ends[3], c.ends[4], want)
	}
}

// BenchmarkAsync reports, per GPU and batch of the Llama-3.2-1B decode,
// each policy's modelled tokens per second on the async model, only:gpu's
// bound and synchronous figures, and the ratios the targets read:
// modelled_over_bound and async_over_sync of only:gpu,
// auto_over_best_fixed of thompson.
func BenchmarkAsync(b *testing.B) {
	for _, g := range asyncGPUs {
		for _, batch := range []int{1, 16} {
			b.Run(g+"/b"+strconv.Itoa(batch), func(b *testing.B) {
				var as, sy map[string]decodeRun
				for b.Loop() {
					as, _ = runDecode(b, sim.Llama32_1B, g, batch, sim.Async, fullOps)
					sy, _ = runDecode(b, sim.Llama32_1B, g, batch, sim.Synchronous, fullOps, "gpu")
				}
				gpu := as["gpu"]
				for name, r := range as {
					b.ReportMetric(r.modelled, name+"_tokens/s")
				}
				b.ReportMetric(gpu.bound, "gpu_bound_tokens/s")
				b.ReportMetric(sy["gpu"].modelled, "gpu_sync_tokens/s")
				b.ReportMetric(gpu.modelled/gpu.bound, "modelled_over_bound")
				b.ReportMetric(gpu.modelled/sy["gpu"].modelled, "async_over_sync")
				_, tps := bestFixed(as)
				b.ReportMetric(as["thompson"].modelled/tps, "auto_over_best_fixed")
			})
		}
	}
}

// BenchmarkOverlap is the independent-branches target: the MoE decode on
// each GPU with cpu2, thompson's modelled throughput against the best
// single device (auto_over_best_single), the best fixed policy
// (auto_over_best_fixed), and overlap_limit, the most any placement
// could gain over the faster device (overlapLimit).
func BenchmarkOverlap(b *testing.B) {
	for _, g := range asyncGPUs {
		for _, batch := range []int{1, 16} {
			b.Run(g+"/b"+strconv.Itoa(batch), func(b *testing.B) {
				var as map[string]decodeRun
				var env *Env
				for b.Loop() {
					as, env = runDecode(b, sim.Qwen15MoE, g, batch, sim.Async, fullOps)
				}
				single := max(as["cpu"].modelled, as["gpu"].modelled)
				_, tps := bestFixed(as)
				for name, r := range as {
					b.ReportMetric(r.modelled, name+"_tokens/s")
				}
				b.ReportMetric(as["thompson"].modelled/single, "auto_over_best_single")
				b.ReportMetric(as["thompson"].modelled/tps, "auto_over_best_fixed")
				b.ReportMetric(overlapLimit(env), "overlap_limit")
			})
		}
	}
}

// scripted places the i-th op of a run on arms[i]: a placement worked out
// in advance.
type scripted struct {
	arms []int
	i    int
}

func (s *scripted) Name() string { return "scripted" }
func (s *scripted) Choose(*Task) int {
	a := s.arms[s.i]
	s.i++
	return a
}
func (s *scripted) Observe(*Task, int, float64) {}

// myopic places each op on the arm where it would finish first given the
// arms' queues (Task.Res.QueueUs), with its true duration: the greedy
// expected-finish rule with perfect knowledge of each op, and no
// foresight of the ops after it. Copies are not priced.
type myopic struct{ truth func(bucket, arm int) float64 }

func (p *myopic) Name() string { return "myopic" }
func (p *myopic) Choose(t *Task) int {
	best, bestUs := 0, math.Inf(1)
	for a := range 2 {
		if us := p.truth(t.Bucket, a) + float64(t.Res.QueueUs[a]); us < bestUs {
			best, bestUs = a, us
		}
	}
	return best
}
func (p *myopic) Observe(*Task, int, float64) {}

// expertSplit returns, for n ops of the MoE decode at batch, the arms of
// a placement that runs the last k routed experts of every layer on the
// CPU (arm 1) and everything else on the GPU (arm 0): the split a
// placement with foresight of the whole layer would make.
func expertSplit(tb testing.TB, batch, n, k int) []int {
	w, err := sim.Decode(sim.Qwen15MoE, batch, 1024, n)
	if err != nil {
		tb.Fatal(err)
	}
	m := sim.Qwen15MoE
	active := min(m.Experts, batch*m.TopK)
	arms := make([]int, 0, n)
	left := 0 // ops of the current layer's branches still to place
	for {
		op, ok := w.Next()
		if !ok {
			return arms
		}
		arm := 0
		if left > 0 {
			branch := (4*(active+1) - left) % (active + 1) // 0: the shared expert; ops by projection
			if branch > active-k {
				arm = 1
			}
			left--
		}
		if s := op.Spec; len(s.In) == 2 && s.In[1][0] == m.Experts {
			left = 4 * (active + 1) // the router: the branches follow
		}
		arms = append(arms, arm)
	}
}

// BenchmarkOverlapSplit is what placing whole experts on the CPU reaches
// on the MoE decode with igpu: for k routed experts per layer on cpu2,
// the makespan's tokens per second over the GPU alone's
// (split_k_over_gpu), beside thompson's (BenchmarkOverlap) and the
// greedy expected-finish rule's with true durations (myopic_over_gpu):
// what deciding op by op, in order, reaches at best.
func BenchmarkOverlapSplit(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run("igpu/b"+strconv.Itoa(batch), func(b *testing.B) {
			for b.Loop() {
				w, err := sim.Decode(sim.Qwen15MoE, batch, 1024, fullOps)
				if err != nil {
					b.Fatal(err)
				}
				env, err := NewEnv(w, []sim.Arm{{Profile: sim.MustProfile("igpu")}, {Profile: sim.MustProfile("cpu2")}}, EnvOptions{Model: sim.Async})
				if err != nil {
					b.Fatal(err)
				}
				run := func(arms []int) float64 {
					r, err := env.Run(&scripted{arms: arms}, 1)
					if err != nil {
						b.Fatal(err)
					}
					return float64(r.Steps) / r.MakespanUs
				}
				gpu := run(make([]int, fullOps))
				r, err := env.Run(&myopic{truth: env.Truth}, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(r.Steps)/r.MakespanUs/gpu, "myopic_over_gpu")
				active := min(sim.Qwen15MoE.Experts, batch*sim.Qwen15MoE.TopK)
				step := max(1, active/15) // k = 1…4 at batch 1, 4…60 by 4 at batch 16
				for k := step; k <= active; k += step {
					b.ReportMetric(run(expertSplit(b, batch, fullOps, k))/gpu, "split_"+strconv.Itoa(k)+"_over_gpu")
				}
			}
		})
	}
}
