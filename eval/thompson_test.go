package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// handPairs is a workload of pairs of ops X (Add over 250 elements: 10 µs
// on the GPU, 40 on the CPU) and Y (SiLU over 250: 60 and 12), each
// output and so each activation 1000 bytes; the GPU's link costs 5 µs +
// 1000 B / 1 GB/s = 6 µs per crossing (its datasheet says 10 µs +
// 1 GB/s), the CPU shares host memory.
func handPairs(t *testing.T, pairs int) (*Env, kernels.Spec) {
	t.Helper()
	csv := "op,shape,backend,mean_us,std_us,n\n" +
		"Add,250;250,gpu,10,0,1\nAdd,250;250,cpu,40,0,1\n" +
		"SiLU,250,gpu,60,0,1\nSiLU,250,cpu,12,0,1\n"
	tab, err := sim.LoadTable(strings.NewReader(csv), "hand")
	if err != nil {
		t.Fatal(err)
	}
	arms := tab.Arms()
	arms[0].Profile.Shared, arms[0].Profile.LinkGBps, arms[0].Profile.LinkLatencyUs = false, 1, 5
	arms[0].Profile.Nominal.LinkGBps, arms[0].Profile.Nominal.LinkLatencyUs = 1, 10
	x := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{250}, {250}}}
	y := kernels.Spec{Op: kernels.SiLU, DType: kernels.F32, In: []kernels.Shape{{250}}}
	var ops []sim.Op
	for range pairs {
		ops = append(ops, sim.Op{Spec: x, Key: 0, Bucket: 0, BucketName: "X", ActBytes: 1000},
			sim.Op{Spec: y, Key: 1, Bucket: 1, BucketName: "Y", ActBytes: 1000})
	}
	ops[0].Key, ops[0].Bucket = 0, 0
	env, err := NewEnv(&sliceWorkload{ops: ops}, arms, EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env, y
}

// TestThompsonTransfersByHand: the Scheduler behind thompson and the
// harness agree on handPairs, transfers included.
//   - Before learning, the Scheduler charges a CPU run of Y whose input
//     sits on the GPU the GPU's nominal device→host copy of the 1000-byte
//     input (10 µs + 1000 B / 1 GB/s = 11 µs) and the 1000-byte output's
//     return to the GPU (11 µs): 22 µs; a GPU run nothing.
//   - The harness's total is the sum, worked out here from thompson's
//     decisions, of each op's cost on the backend chosen and 6 µs per
//     crossing of the GPU's link.
//   - The copies the harness charges reach the Scheduler's link model: it
//     predicts a 1000-byte copy at the true 6 µs (within 5%), not the
//     nominal 11.
func TestThompsonTransfersByHand(t *testing.T) {
	env, y := handPairs(t, 200)
	fresh, err := NewThompson(adaptive.Config{Seed: 1}, env.Arms())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var res adaptive.Residency
	res.Add(adaptive.Backend(0), 1000)
	d, err := fresh.Scheduler().Select(y, res)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(d.Transfer[1]-22) > 1e-9 || d.Transfer[0] != 0 {
		t.Errorf("transfers charged %v (gpu, cpu), want 0 and 22 µs", d.Transfer[:2])
	}

	th, err := NewThompson(adaptive.Config{Seed: 1}, env.Arms())
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	cost := [2][2]float64{{10, 40}, {60, 12}} // [X or Y][gpu, cpu]
	var byHand float64
	loc, i := -1, 0
	r, err := env.RunEach(th, 1, func(_ *Task, arm int, us float64) {
		if c := cost[i%2][arm]; math.Abs(us-c) > 1e-9 {
			t.Fatalf("op %d on arm %d drew %v µs, want %v", i, arm, us, c)
		}
		byHand += cost[i%2][arm]
		if arm != loc && (arm == 0 || loc == 0) {
			byHand += 6
		}
		loc = arm
		i++
	})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.TotalUs-byHand) > 1e-9 {
		t.Errorf("harness total %v µs, by hand %v", r.TotalUs, byHand)
	}
	if err := th.Err(); err != nil {
		t.Fatal(err)
	}
	for _, toDevice := range []bool{true, false} {
		if got := th.Scheduler().PredictTransfer("sim:gpu", toDevice, 1000); math.Abs(got-6)/6 > 0.05 {
			t.Errorf("learned copy (toDevice %v) %v µs, want 6 within 5%%", toDevice, got)
		}
	}
	// It settles on the split (X on the GPU, Y on the CPU: 34 µs a pair
	// against 70 all on the GPU, 52 all on the CPU): regret within 10%
	// over 400 ops.
	if r.RegretPct > 10 {
		t.Errorf("regret %.2f%%, want ≤ 10%%", r.RegretPct)
	}
}

// TestThompsonLearnsCrossover: through the Policy interface, thompson
// learns which backend wins each of ten matmul sizes 2× or more apart
// (90% right in the last third of 6,000 decisions).
func TestThompsonLearnsCrossover(t *testing.T) {
	arms := []Arm{ArmOf(testCPU), ArmOf(testGPU)}
	p, err := NewThompson(adaptive.Config{Seed: 1}, arms)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var tasks []Task
	var specs []kernels.Spec
	for m := 1; m <= 512; m *= 2 {
		specs = append(specs, kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, 1024}, {1024, 1024}}})
	}
	for i := range specs {
		tasks = append(tasks, NewTask(i, &specs[i]))
	}
	truth := func(tk *Task, arm int) float64 {
		if arm == 0 {
			return 2 + tk.FLOPs/100e3
		}
		return 300 + tk.FLOPs/5e6
	}
	r := rand.New(rand.NewPCG(21, 22))
	right, total := 0, 0
	const steps = 6000
	for i := range steps {
		tk := &tasks[i%len(tasks)]
		arm := p.Choose(tk)
		us := truth(tk, arm) * math.Exp(0.1*r.NormFloat64()-0.005)
		p.Observe(tk, arm, us)
		c, g := truth(tk, 0), truth(tk, 1)
		if i >= steps*2/3 && max(c, g)/min(c, g) >= 2 {
			total++
			if (c < g) == (arm == 0) {
				right++
			}
		}
	}
	if float64(right) < 0.9*float64(total) {
		t.Errorf("right %d of %d", right, total)
	}
	var n int64
	for _, k := range p.Reasons() {
		n += k
	}
	if n != steps {
		t.Errorf("reasons add up to %d, want %d", n, steps)
	}
}
