package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// gpuMem is -gpu-mem: a budget in bytes, or a share of the model's
// weights (pct > 0). The zero value is no budget.
type gpuMem struct {
	set   bool
	bytes int64
	pct   float64
}

// parseGPUMem reads -gpu-mem: bytes (a plain number, or with a K, M or G
// suffix of 1024's powers) or a percentage of the model's weights.
func parseGPUMem(flag string) (gpuMem, error) {
	bad := func(why string) (gpuMem, error) {
		return gpuMem{}, fmt.Errorf("infer: -gpu-mem %q: %s: want bytes (4096, 512M, 8G) or a share of the model's weights (50%%)", flag, why)
	}
	s := flag
	if s == "" {
		return gpuMem{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return bad("not a share from 0% to 100%")
		}
		return gpuMem{set: true, pct: v, bytes: -1}, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return bad("not a size")
	}
	return gpuMem{set: true, bytes: v * mult}, nil
}

// budget returns the bytes of a model whose weights take total bytes.
func (g gpuMem) budget(total int64) int64 {
	if g.bytes >= 0 {
		return g.bytes
	}
	return int64(g.pct / 100 * float64(total))
}

// placeWeights marks every weight of m (homed in host memory) and gives
// each device backend (not a CPU) a weight budget of -gpu-mem; the
// weights that fit are loaded there as llama.cpp's -ngl does, the last
// layers first, the output layer only once every layer fits. pin keeps
// them there for good (the llamacpp strategy); otherwise the cache may
// trade them for weights used more. It returns the budget.
func placeWeights(e *executor.Executor, m *Model, bes []backends.Backend, g gpuMem, pin bool) (int64, error) {
	groups := m.weightGroups()
	var total int64
	for _, grp := range groups {
		for _, w := range grp {
			total += w.Size()
			if err := e.MarkWeight(w); err != nil {
				return 0, err
			}
		}
	}
	budget := g.budget(total)
	for a, b := range bes {
		if b.Info().Kind == backends.CPU {
			continue
		}
		left := budget
		// The layers from the last, then the output (llama.cpp's -ngl).
		order := append([][]backends.Buffer{}, groups[:len(groups)-1]...)
		for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
			order[i], order[j] = order[j], order[i]
		}
		order = append(order, groups[len(groups)-1])
	fill:
		for _, grp := range order {
			var n int64
			for _, w := range grp {
				n += w.Size()
			}
			if n > left {
				break fill
			}
			for _, w := range grp {
				var err error
				if pin {
					err = e.Pin(w, a)
				} else {
					err = e.Preload(w, a)
				}
				if err != nil {
					return 0, err
				}
			}
			left -= n
		}
	}
	return budget, nil
}

// budgets returns Config.WeightBudget for bes: budget for each device,
// none for the CPUs.
func budgets(bes []backends.Backend, budget int64) []int64 {
	out := make([]int64, len(bes))
	for a, b := range bes {
		out[a] = budget
		if b.Info().Kind == backends.CPU {
			out[a] = -1
		}
	}
	return out
}

// llamaCPP is llama.cpp's rule (ggml-backend's scheduler) as a placement:
// an op runs where its weights live, except that an op whose weights are
// in host memory is offloaded to the GPU when its batch (tokens) is at
// least offloadMinBatch; an op without weights runs on the GPU too at
// such a batch (the scheduler expands the GPU over the offloaded ops'
// neighbours), and otherwise where its first input is (where the op
// before it ran).
type llamaCPP struct {
	cpu, gpu int
}

// offloadMinBatch is llama.cpp's GGML_OP_OFFLOAD_MIN_BATCH: the fixed
// threshold this baseline stands for.
const offloadMinBatch = 32

var _ executor.Placer = (*llamaCPP)(nil)

func newLlamaCPP(bes []backends.Backend) (*llamaCPP, error) {
	p := &llamaCPP{cpu: -1, gpu: -1}
	for a, b := range bes {
		if b.Info().Kind == backends.CPU {
			if p.cpu < 0 {
				p.cpu = a
			}
		} else if p.gpu < 0 {
			p.gpu = a
		}
	}
	if p.cpu < 0 || p.gpu < 0 {
		return nil, fmt.Errorf("infer: -strategy llamacpp needs a CPU and a GPU backend in -backends")
	}
	return p, nil
}

func (*llamaCPP) Name() string                             { return "llamacpp" }
func (*llamaCPP) Observed(adaptive.BucketID, int, float64) {}

// Place implements executor.Placer.
func (p *llamaCPP) Place(s kernels.Spec, res adaptive.Residency, _ adaptive.BucketID) int {
	if tokens(s) >= offloadMinBatch {
		return p.gpu
	}
	return p.home(s, res)
}

// home is llama.cpp's rule below its batch threshold: an op runs where
// its weights live, one without weights where its first input is.
func (p *llamaCPP) home(s kernels.Spec, res adaptive.Residency) int {
	on := func(i int) int {
		if i < res.N && res.Inputs[i].On&^adaptive.Host&adaptive.Backend(p.gpu) != 0 {
			return p.gpu
		}
		return p.cpu
	}
	switch s.Op {
	case kernels.QuantizedMatMul, kernels.RMSNorm: // input 1 is a weight
		return on(1)
	case kernels.KVAppend: // the KV cache goes where its layer's projections run
		return on(1)
	}
	return on(0)
}

// tokens returns the tokens an op of the model processes at once: the
// rows of its activation ([B, S, heads, headDim] for RoPE and KVAppend's
// new rows, [B, heads, S, headDim] for the attention's query, GetRows'
// indices).
func tokens(s kernels.Spec) int {
	in := s.In[0]
	switch {
	case s.Op == kernels.RoPE && len(in) == 4:
		return in[0] * in[1]
	case s.Op == kernels.KVAppend:
		return s.In[1][0] * s.In[1][1]
	case s.Op == kernels.GetRows: // a row per token: input 0 is the table
		return int(s.In[1].Elements())
	case s.Op == kernels.Attention && len(in) == 4:
		return in[0] * in[2]
	}
	return in[0]
}

// weightBudgets returns Config.WeightBudget for -gpu-mem (nil without
// it): the budget in bytes is known from the model's shape, the figure
// placeWeights loads up to.
// A budget above a device's memory is a usage error naming it: the
// device could not hold what the budget lets the cache keep.
func (o *options) weightBudgets(bes []backends.Backend) ([]int64, error) {
	if !o.gpuMem.set {
		return nil, nil
	}
	// Rule: -gpu-mem needs a device backend. Reason: it budgets the
	// weights of each GPU, and without one it was silently dropped
	// (TestFlagErrorsOnce).
	var names []string
	for _, be := range bes {
		if be.Info().Kind != backends.CPU {
			names = nil
			break
		}
		names = append(names, be.Info().Name)
	}
	if names != nil {
		return nil, &usageError{err: fmt.Errorf("infer: -gpu-mem %q budgets the weights of each GPU, and -backends (%s) names none",
			o.gpuMemS, strings.Join(names, ", "))}
	}
	b := o.gpuMem.budget(o.model.weightBytes())
	for _, be := range bes {
		in := be.Info()
		if in.Kind != backends.CPU && !in.SharedMemory && in.Memory > 0 && b > in.Memory {
			return nil, &usageError{err: fmt.Errorf("infer: -gpu-mem %q: %.2f GiB of weights exceed %s's memory of %.2f GiB",
				o.gpuMemS, float64(b)/(1<<30), in.Name, float64(in.Memory)/(1<<30))}
		}
	}
	return budgets(bes, b), nil
}

// loadWeights marks and loads m's weights for -gpu-mem (nothing without
// it), pinned under -strategy llamacpp.
func (o *options) loadWeights(e *executor.Executor, m *Model, bes []backends.Backend) error {
	if !o.gpuMem.set {
		return nil
	}
	_, err := placeWeights(e, m, bes, o.gpuMem, o.strategy == "llamacpp")
	return err
}
