package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/weightcache"
)

// The arms of an offload run: the host's CPU and one GPU.
const (
	offCPU = 0
	offGPU = 1
)

// OffloadEnv is an offload workload (sim.Offload) against a CPU and a
// GPU, with each op's compute duration on both drawn once per seed, so
// that every policy is charged the same draws.
//
// # Cost
//
// A policy's total is the sum over ops of the compute on the arm it
// chose, the copy of the op's activation when the op before ran on the
// other side of the link, and the copy of the op's weight to the GPU when
// the op runs there and the weight is not resident (its home is host
// memory and no cached copy is there); a weight a cache admits without
// the op having copied it costs its copy too. Copies are charged at the
// GPU profile's true link time (none for a GPU that shares host memory).
// Copies and compute are summed (the Serial model): a weight copy is not
// overlapped with compute here.
type OffloadEnv struct {
	w       *sim.Offload
	profs   [2]*sim.Profile
	arms    []Arm
	dur     []float64 // [2·op + arm] µs, drawn for seed
	mean    []float64 // [2·op + arm] µs, the true expected duration
	copyUs  []float64 // per weight: its true copy time to the GPU
	nominal []float64 // per weight: its copy time by the GPU's datasheet link
}

// NewOffloadEnv draws w's durations on cpu and gpu for seed. The weights
// w places on the GPU (those homed there and the cache's budget) must
// fit gpu's memory (a GPU that shares host memory has none of its own):
// a budget the card cannot hold is an error, not a figure.
func NewOffloadEnv(w *sim.Offload, cpu, gpu *sim.Profile, seed uint64) (*OffloadEnv, error) {
	if cpu == nil || gpu == nil || len(w.Ops) == 0 {
		return nil, fmt.Errorf("%w: offload needs a CPU, a GPU and ops", ErrInvalidSetup)
	}
	if err := fitsGPU(w, gpu); err != nil {
		return nil, err
	}
	e := &OffloadEnv{w: w, profs: [2]*sim.Profile{cpu, gpu}}
	for _, p := range e.profs {
		e.arms = append(e.arms, ArmOf(p.Info()))
	}
	r := rand.New(rand.NewPCG(seed, 0x0ff10ad))
	e.dur = make([]float64, 2*len(w.Ops))
	e.mean = make([]float64, 2*len(w.Ops))
	for i := range w.Ops {
		s := w.Ops[i].Spec
		for a, p := range e.profs {
			us, sigma, err := sim.Arm{Profile: p}.Truth(s)
			if err != nil {
				return nil, fmt.Errorf("%w: op %d: %w", ErrInvalidSetup, i, err)
			}
			e.mean[2*i+a] = us * p.SpikeMean()
			us *= math.Exp(sigma*r.NormFloat64() - sigma*sigma/2)
			if p.SpikeProb > 0 && r.Float64() < p.SpikeProb {
				us *= p.SpikeFactor
			}
			e.dur[2*i+a] = us
		}
	}
	n := gpu.Nominal
	for _, wt := range w.Weights {
		e.copyUs = append(e.copyUs, gpu.LinkUs(wt.Bytes))
		nom := 0.0
		if !gpu.Shared && n.LinkGBps > 0 {
			nom = n.LinkLatencyUs + float64(wt.Bytes)/(n.LinkGBps*1e3)
		}
		e.nominal = append(e.nominal, nom)
	}
	return e, nil
}

// fitsGPU reports an error when the weights w keeps on gpu, homed there
// or cached within its budget, exceed gpu's memory.
func fitsGPU(w *sim.Offload, gpu *sim.Profile) error {
	if gpu.Shared || gpu.Memory <= 0 {
		return nil
	}
	var home int64
	for _, wt := range w.Weights {
		if wt.OnGPU {
			home += wt.Bytes
		}
	}
	if home+w.Budget <= gpu.Memory {
		return nil
	}
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	return fmt.Errorf("%w: offload: %.2f GiB of weights on the GPU (%.2f homed there, a cache budget of %.2f) exceed %s's memory of %.2f GiB",
		ErrInvalidSetup, gib(home+w.Budget), gib(home), gib(w.Budget), gpu.Name, gib(gpu.Memory))
}

// Workload returns the workload.
func (e *OffloadEnv) Workload() *sim.Offload { return e.w }

// DurationUs returns op i's drawn compute duration on arm (0 the CPU, 1
// the GPU).
func (e *OffloadEnv) DurationUs(i, arm int) float64 { return e.dur[2*i+arm] }

// OffloadResult is one policy's run.
type OffloadResult struct {
	Policy string
	// TotalUs = ComputeUs + WeightCopyUs + ActCopyUs.
	TotalUs, ComputeUs, WeightCopyUs, ActCopyUs float64
	// WeightCopies counts the weights copied to the GPU; GPUShare is the
	// share of ops the GPU ran.
	WeightCopies int64
	GPUShare     float64
	Ops          int64
	// MaxCachedBytes is the most bytes the policy's cache held at once
	// (never above Budget).
	MaxCachedBytes, Budget int64
	// Threshold is threshold-best's batch threshold (math.MaxInt: never
	// offload) and the llama.cpp-style rules'; ExpertThreshold the one
	// for experts (ikllama: 32 × experts / active).
	Threshold, ExpertThreshold int
	// OpUs[i] is what op i was charged, its copies included; Arms[i]
	// the arm it ran on (0 the CPU, 1 the GPU).
	OpUs []float64
	Arms []int8
}

// SegmentUs returns the total charged to ops [from, to).
func (r OffloadResult) SegmentUs(from, to int) float64 {
	var s float64
	for _, v := range r.OpUs[max(from, 0):min(to, len(r.OpUs))] {
		s += v
	}
	return s
}

// OffloadPolicies are the policies Run knows, in report order.
var OffloadPolicies = []string{"thompson", "llamacpp", "ikllama", "threshold-best", "lru", "frequency", "oracle"}

// thresholds are the batch thresholds threshold-best sweeps.
var thresholds = []int{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, math.MaxInt}

// Run runs the policy called name: one of OffloadPolicies.
func (e *OffloadEnv) Run(name string) (OffloadResult, error) {
	switch name {
	case "threshold-best":
		var best OffloadResult
		for _, t := range thresholds {
			r, err := e.run(offloadRule{name: name, threshold: t, expertThreshold: t})
			if err != nil {
				return OffloadResult{}, err
			}
			if best.OpUs == nil || r.TotalUs < best.TotalUs {
				best = r
			}
		}
		return best, nil
	case "llamacpp", "ikllama", "lru", "frequency", "thompson", "oracle":
		rule := offloadRule{name: name, threshold: 32, expertThreshold: 32}
		if m := e.w.Model; name == "ikllama" && m.Experts > 0 {
			rule.expertThreshold = 32 * m.Experts / m.TopK
		}
		return e.run(rule)
	}
	return OffloadResult{}, fmt.Errorf("%w: unknown offload policy %q (known: %v)", ErrInvalidSetup, name, OffloadPolicies)
}

// offloadRule is one policy: how it places ops and keeps weights.
type offloadRule struct {
	name                       string
	threshold, expertThreshold int // llama.cpp's rule: offload iff tokens ≥ threshold
}

// run replays the workload under rule.
func (e *OffloadEnv) run(rule offloadRule) (OffloadResult, error) {
	w := e.w
	res := OffloadResult{Policy: rule.name, Ops: int64(len(w.Ops)), Budget: w.Budget, Threshold: rule.threshold, ExpertThreshold: rule.expertThreshold,
		OpUs: make([]float64, len(w.Ops)), Arms: make([]int8, len(w.Ops))}
	keep, err := e.newKeeper(rule.name)
	if err != nil {
		return res, err
	}
	var th *Thompson
	var task Task
	if rule.name == "thompson" {
		if th, err = NewThompson(adaptive.Config{Seed: 1}, e.arms); err != nil {
			return res, err
		}
		defer th.Close()
		task.Transfer = make([]float64, 2)
	}
	prev, gpuOps := offGPU, int64(0)
	for i := range w.Ops {
		op := &w.Ops[i]
		resident := op.Weight < 0 || w.Weights[op.Weight].OnGPU || keep.cached(op.Weight)
		// A weight the cache wants for its own sake at this use is copied
		// before the op, which then runs on it.
		early := !resident && keep.wants(op.Weight, op.Step)
		resident = resident || early
		var a int
		switch rule.name {
		case "thompson":
			e.fillTask(&task, op, prev, resident)
			a = th.Choose(&task)
		case "oracle":
			a = e.cheaper(i, prev, resident)
		default:
			a = rule.place(op, prev, resident, w.Model.Experts > 0 && op.Weight >= 0 && w.Weights[op.Weight].Expert >= 0)
		}
		cost, err := e.charge(&res, i, prev, a, resident, early, keep, th)
		if err != nil {
			return res, fmt.Errorf("eval: %s: op %d: %w", rule.name, i, err)
		}
		if th != nil {
			th.Observe(&task, a, e.dur[2*i+a])
		}
		if a == offGPU {
			gpuOps++
		}
		res.OpUs[i], res.Arms[i] = cost, int8(a)
		res.TotalUs += cost
		prev = a
	}
	res.GPUShare = float64(gpuOps) / float64(len(w.Ops))
	if th != nil && th.Err() != nil {
		return res, th.Err()
	}
	return res, nil
}

// charge adds op i's compute on arm a and its copies to res, tells the
// policy's cache of the use (thompson: and the Scheduler of each copy),
// checks the budget, and returns what the op cost. early: the cache
// copied the op's weight in before it, for its own sake.
func (e *OffloadEnv) charge(res *OffloadResult, i, prev, a int, resident, early bool, keep keeper, th *Thompson) (float64, error) {
	op := &e.w.Ops[i]
	cost := e.dur[2*i+a]
	res.ComputeUs += cost
	if prev != a && op.ActBytes > 0 {
		x := e.profs[offGPU].LinkUs(op.ActBytes)
		cost += x
		res.ActCopyUs += x
		if th != nil && x > 0 {
			th.ObserveTransfer(offGPU, a == offGPU, op.ActBytes, x)
		}
	}
	// A GPU that shares host memory reads the weight where it lives: no
	// copy, nor one counted (TestOffloadSharedGPUCopiesNothing).
	copied := (a == offGPU && !resident || early) && !e.profs[offGPU].Shared
	if copied {
		x := e.copyUs[op.Weight]
		cost += x
		res.WeightCopyUs += x
		res.WeightCopies++
		if th != nil && x > 0 {
			th.ObserveTransfer(offGPU, true, e.w.Weights[op.Weight].Bytes, x)
		}
	}
	if op.Weight >= 0 && !e.w.Weights[op.Weight].OnGPU {
		admitted, err := keep.used(op.Weight, copied, op.Step, e.savedUs(i, res.Policy, th))
		if err != nil {
			return 0, err
		}
		if admitted && !copied { // the cache copies it in for its own sake
			x := e.copyUs[op.Weight]
			cost += x
			res.WeightCopyUs += x
			res.WeightCopies++
		}
	}
	b := keep.bytes()
	if b > e.w.Budget {
		return 0, fmt.Errorf("%d cached bytes over the budget of %d", b, e.w.Budget)
	}
	res.MaxCachedBytes = max(res.MaxCachedBytes, b)
	return cost, nil
}

// place is llama.cpp's rule (ggml-backend's op offload): an op runs where
// its weight lives, unless it is in host memory and the step's tokens
// reach the threshold, when the weight is copied to the GPU for it; an op
// without a weight stays with the op before. lru runs every expert on
// the GPU (its cache loads what is missing); frequency runs the experts
// it has not pinned on the CPU.
func (r offloadRule) place(op *sim.OffloadOp, prev int, resident, expert bool) int {
	switch {
	case op.Weight < 0:
		return prev
	case resident || r.name == "lru" && expert:
		return offGPU
	case r.name == "frequency" && expert:
		return offCPU // kTransformers: an expert not pinned runs on the CPU
	}
	t := r.threshold
	if expert {
		t = r.expertThreshold
	}
	if op.Tokens >= t {
		return offGPU
	}
	return offCPU
}

// cheaper is the oracle's choice: the arm of least expected cost for op
// i by the true model (not the draw: the oracle knows the devices, not
// the dice), its copies priced.
func (e *OffloadEnv) cheaper(i, prev int, resident bool) int {
	op := &e.w.Ops[i]
	var c [2]float64
	for a := range c {
		c[a] = e.mean[2*i+a]
		if a != prev && op.ActBytes > 0 {
			c[a] += e.profs[offGPU].LinkUs(op.ActBytes)
		}
	}
	if !resident {
		c[offGPU] += e.copyUs[op.Weight]
	}
	if c[offGPU] < c[offCPU] {
		return offGPU
	}
	return offCPU
}

// fillTask describes op to thompson as the Executor does: its activation
// where the op before ran, its weight (Residency.AddWeight) in host
// memory and, when resident, on the GPU too.
func (e *OffloadEnv) fillTask(t *Task, op *sim.OffloadOp, prev int, resident bool) {
	t.Bucket = op.Bucket
	describe(t, &op.Spec)
	t.Res = adaptive.Residency{}
	on := adaptive.Backend(prev)
	if prev == offCPU {
		on |= adaptive.Host
	}
	if op.ActBytes > 0 {
		t.Res.Add(on, op.ActBytes)
	}
	if op.Weight >= 0 {
		wt := adaptive.Host
		if resident {
			wt |= adaptive.Backend(offGPU)
		}
		t.Res.AddWeight(wt, e.w.Weights[op.Weight].Bytes)
	}
	t.Res.Consumers = adaptive.Backend(prev)
}

// savedUs is what a resident use of op i's weight saves, as the policy
// sees it: the cheaper of the CPU and the GPU with the copy, less the GPU
// without it (thompson: from its decision's estimates; oracle: the truth).
func (e *OffloadEnv) savedUs(i int, policy string, th *Thompson) float64 {
	cpu, gpu := e.mean[2*i+offCPU], e.mean[2*i+offGPU]
	cp := e.copyUs[e.w.Ops[i].Weight]
	if policy == "thompson" {
		d := th.Decision()
		cpu, gpu = d.Estimates[offCPU], d.Estimates[offGPU]-d.Transfer[offGPU]
		cp = e.nominal[e.w.Ops[i].Weight]
		if math.IsNaN(cpu) || math.IsNaN(gpu) {
			return 0
		}
	}
	return max(min(cpu, gpu+cp)-gpu, 0)
}

// keeper is a policy's GPU cache of weights whose home is host memory.
type keeper interface {
	cached(w int) bool
	// wants reports whether a use of w at step would copy it in for its
	// own sake (it is then copied before the op, which runs on it).
	wants(w, step int) bool
	// used records a use of w by an op at step (copied: the op copied it
	// to the GPU; savedUs: what a resident use saves), and reports whether
	// w is now kept.
	used(w int, copied bool, step int, savedUs float64) (bool, error)
	bytes() int64
}

func (e *OffloadEnv) newKeeper(policy string) (keeper, error) {
	switch policy {
	case "thompson", "oracle":
		c, err := weightcache.New(e.w.Budget, weightcache.Options{})
		return &worthKeeper{c: c, e: e}, err
	case "lru", "frequency":
		return &countKeeper{e: e, lru: policy == "lru", at: make([]int64, len(e.w.Weights)), in: make([]bool, len(e.w.Weights))}, nil
	}
	return noKeeper{}, nil
}

type noKeeper struct{}

func (noKeeper) cached(int) bool                            { return false }
func (noKeeper) wants(int, int) bool                        { return false }
func (noKeeper) used(int, bool, int, float64) (bool, error) { return false, nil }
func (noKeeper) bytes() int64                               { return 0 }

// worthKeeper is the weightcache rule, priced by the datasheet link (what
// the Scheduler is told).
type worthKeeper struct {
	c *weightcache.Cache
	e *OffloadEnv
}

func (k *worthKeeper) cached(w int) bool { return w >= 0 && k.c.Resident(w) }
func (k *worthKeeper) wants(w, step int) bool {
	return w >= 0 && k.e.nominal[w] > 0 && k.c.Wants(w, float64(step))
}
func (k *worthKeeper) bytes() int64 { return k.c.Used() }
func (k *worthKeeper) used(w int, copied bool, step int, savedUs float64) (bool, error) {
	cu := k.e.nominal[w]
	if cu <= 0 {
		return false, nil // a GPU that reads host memory: nothing to keep
	}
	p, err := k.c.Use(weightcache.Weight{ID: w, Bytes: k.e.w.Weights[w].Bytes, CopyUs: cu, SavedUs: savedUs}, float64(step), copied)
	return p.Admit, err
}

// countKeeper is the lru cache (every weight used on the GPU is kept,
// the least recently used evicted) or the frequency one (the weights used
// most so far are kept, copied in when one overtakes the least used).
type countKeeper struct {
	e     *OffloadEnv
	lru   bool
	at    []int64 // lru: last use (a use counter); frequency: uses
	in    []bool
	n     int64
	held  int64
	order []int
}

func (k *countKeeper) cached(w int) bool { return w >= 0 && k.in[w] }

// wants is false: lru and frequency keep the weights their ops used, as
// their sources do.
func (k *countKeeper) wants(int, int) bool { return false }
func (k *countKeeper) bytes() int64        { return k.held }

func (k *countKeeper) used(w int, copied bool, _ int, _ float64) (bool, error) {
	k.n++
	if k.lru {
		k.at[w] = k.n
	} else {
		k.at[w]++
	}
	if k.in[w] || k.lru && !copied || k.e.profs[offGPU].Shared {
		return false, nil
	}
	size := k.e.w.Weights[w].Bytes
	if size > k.e.w.Budget {
		return false, nil
	}
	// Victims: the least recently (lru) or least often (frequency) used.
	k.order = k.order[:0]
	for v, in := range k.in {
		if in {
			k.order = append(k.order, v)
		}
	}
	slices.SortFunc(k.order, func(a, b int) int {
		if k.at[a] != k.at[b] {
			if k.at[a] < k.at[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	free := k.e.w.Budget - k.held
	n := 0
	for free < size && n < len(k.order) {
		v := k.order[n]
		if !k.lru && k.at[v] >= k.at[w] {
			return false, nil // no weight held is used less often
		}
		free += k.e.w.Weights[v].Bytes
		n++
	}
	if free < size {
		return false, nil
	}
	for _, v := range k.order[:n] {
		k.in[v] = false
		k.held -= k.e.w.Weights[v].Bytes
	}
	k.in[w] = true
	k.held += size
	return true, nil
}
