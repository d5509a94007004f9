package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/kernels"
)

// Op is one op of a workload's stream.
type Op struct {
	// Spec is the op. Specs of the same Key share their In slices: do not
	// modify them.
	Spec kernels.Spec
	// Key is the dense index of the distinct spec within the workload
	// (0, 1, 2, ... in order of first appearance).
	Key int
	// Bucket is the dense index of the spec's bucket within the workload,
	// in order of first appearance; BucketName is its stable name
	// (kernels.BucketName for catalogue ops).
	Bucket     int
	BucketName string
	// ActBytes is the bytes of the op's inputs that earlier ops produced
	// (activations). They live where the previous op of the stream ran and
	// must cross the link when this op runs on the other side; weights and
	// the KV cache are resident on every device.
	ActBytes int64
	// After lists the ops whose outputs this op reads, as distances back
	// in the stream (1: the op just before), ActBytes split evenly among
	// them; nil means the op just before (a chain). Ops that read none of
	// each other's outputs (a MoE layer's experts) may run at once.
	// Shared by ops of the same step: do not modify.
	After []int
	// HostWait marks an op whose result the host reads before it issues
	// more work (a step's last op: the next token is sampled from it).
	HostWait bool
}

// Workload is a deterministic stream of ops. Next returns the next op, or
// false when the stream is over; a workload is read once.
type Workload interface {
	Name() string
	Next() (Op, bool)
}

// catalogue numbers the distinct specs and buckets of a workload.
type catalogue struct {
	keys    map[string]int
	buckets map[string]int
}

func newCatalogue() catalogue {
	return catalogue{keys: map[string]int{}, buckets: map[string]int{}}
}

// number turns templates into ops with their keys and buckets.
func (c *catalogue) number(ts []opTemplate) []Op {
	ops := make([]Op, len(ts))
	for i, t := range ts {
		s := specKey(t.spec)
		k, ok := c.keys[s]
		if !ok {
			k = len(c.keys)
			c.keys[s] = k
		}
		name := kernels.BucketName(t.spec)
		b, ok := c.buckets[name]
		if !ok {
			b = len(c.buckets)
			c.buckets[name] = b
		}
		ops[i] = Op{Spec: t.spec, Key: k, Bucket: b, BucketName: name, ActBytes: t.actBytes, After: t.after, HostWait: i == len(ts)-1}
	}
	return ops
}

// specKey identifies a distinct spec: op, dtype, shapes and parameters.
func specKey(s kernels.Spec) string { return s.String() + fmt.Sprintf(" %+v", s.Params) }

// stream is a Workload built from forward passes, generated lazily: next
// names the following step, or false when none is left.
type stream struct {
	name  string
	model Model
	n     int // ops left
	cat   catalogue
	steps map[step][]Op
	cur   []Op
	next  func() (step, bool)
}

func newStream(name string, m Model, n int, next func() (step, bool)) *stream {
	return &stream{name: name, model: m, n: n, cat: newCatalogue(), steps: map[step][]Op{}, next: next}
}

// Name implements Workload.
func (s *stream) Name() string { return s.name }

// Next implements Workload.
func (s *stream) Next() (Op, bool) {
	if s.n <= 0 {
		return Op{}, false
	}
	for len(s.cur) == 0 {
		st, ok := s.next()
		if !ok {
			s.n = 0
			return Op{}, false
		}
		ops, ok := s.steps[st]
		if !ok {
			ops = s.cat.number(s.model.forward(st))
			s.steps[st] = ops
		}
		s.cur = ops
	}
	op := s.cur[0]
	s.cur = s.cur[1:]
	s.n--
	return op, true
}

// The serving parameters the workloads share.
const (
	// MinSeq and MaxSeq bound prompt and context lengths, in tokens.
	MinSeq, MaxSeq = 128, 8192
	// MaxBatch is the most sequences one decode step carries.
	MaxBatch = 64
	// kvPage rounds KV lengths up, as a paged KV cache does: decode
	// attention over a batch runs to its longest context, padded.
	kvPage = 256
	// promptPage rounds prompt lengths up (chunked prefill pads to it).
	promptPage = 128
)

// batchSizes are the batch sizes a decode step is padded to: vLLM's
// CUDA-graph capture sizes up to 64, the sizes a server actually runs.
var batchSizes = []int{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}

// padBatch returns the smallest capture size ≥ b.
func padBatch(b int) int {
	for _, s := range batchSizes {
		if s >= b {
			return s
		}
	}
	return MaxBatch
}

func roundUp(x, page int) int { return (x + page - 1) / page * page }

func checkN(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: %d ops, want at least 1", ErrInvalidWorkload, n)
	}
	return nil
}

// Decode returns n ops of decoding: batch sequences (1–64) that start with
// a context of context tokens (128–8192) and each gain one token per
// forward pass; the context wraps back to its start when it reaches
// MaxSeq. Its KV lengths are rounded up to 256 (a paged cache).
func Decode(m Model, batch, context, n int) (Workload, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := checkN(n); err != nil {
		return nil, err
	}
	if batch < 1 || batch > MaxBatch || context < MinSeq || context > MaxSeq {
		return nil, fmt.Errorf("%w: decode batch %d (want 1–%d), context %d (want %d–%d)", ErrInvalidWorkload, batch, MaxBatch, context, MinSeq, MaxSeq)
	}
	kv := context
	next := func() (step, bool) {
		st := step{batch: batch, seq: 1, kv: min(roundUp(kv+1, kvPage), MaxSeq)}
		kv++
		if kv >= MaxSeq {
			kv = context
		}
		return st, true
	}
	return newStream(fmt.Sprintf("decode/%s/b%d/c%d", m.Name, batch, context), m, n, next), nil
}

// Prefill returns n ops of prompt processing: one prompt after another,
// lengths drawn log-uniformly in [128, 8192] and rounded up to 128,
// deterministic by seed.
func Prefill(m Model, n int, seed uint64) (Workload, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := checkN(n); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x9ef11))
	next := func() (step, bool) {
		l := promptLen(r)
		return step{batch: 1, seq: l, kv: l}, true
	}
	return newStream(fmt.Sprintf("prefill/%s", m.Name), m, n, next), nil
}

// promptLen draws a prompt length, log-uniform in [MinSeq, MaxSeq],
// rounded up to promptPage.
func promptLen(r *rand.Rand) int {
	l := math.Exp(math.Log(MinSeq) + r.Float64()*(math.Log(MaxSeq)-math.Log(MinSeq)))
	return min(roundUp(int(l), promptPage), MaxSeq)
}

// ServingOptions shape MixedServing's traffic.
type ServingOptions struct {
	// Arrivals is the mean number of requests arriving per decode step
	// (Poisson); default 0.3.
	Arrivals float64
	// MeanOutput is the mean number of tokens a request generates
	// (geometric, at least 1); default 128.
	MeanOutput float64
}

func (o *ServingOptions) validate() error {
	if o.Arrivals == 0 {
		o.Arrivals = 0.3
	}
	if o.MeanOutput == 0 {
		o.MeanOutput = 128
	}
	if !(o.Arrivals > 0) || math.IsInf(o.Arrivals, 0) || !(o.MeanOutput >= 1) || math.IsInf(o.MeanOutput, 0) {
		return fmt.Errorf("%w: serving arrivals %v per step, mean output %v tokens", ErrInvalidWorkload, o.Arrivals, o.MeanOutput)
	}
	return nil
}

// MixedServing returns n ops of a long-running server: requests arrive
// (Poisson, Arrivals per decode step) with prompts of 128–8192 tokens
// (log-uniform) and generate MeanOutput tokens on average (geometric).
// Each iteration admits the waiting requests while fewer than 64 run,
// prefills each admitted prompt, then runs one decode step for every
// running sequence, batch padded to a capture size, KV length the longest
// context rounded up to 256; finished requests leave. So the batch size
// varies over time as a server's does. Deterministic by seed.
func MixedServing(m Model, n int, seed uint64, opt ServingOptions) (Workload, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := checkN(n); err != nil {
		return nil, err
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x5e7e))
	type req struct{ ctx, left int }
	var waiting, running []req
	var pending []step // prefills and the decode step of this iteration
	pNew := 1 / opt.MeanOutput
	next := func() (step, bool) {
		for len(pending) == 0 {
			for range poisson(r, opt.Arrivals) {
				l := promptLen(r)
				out := 1
				for r.Float64() >= pNew && out < MaxSeq-l {
					out++
				}
				waiting = append(waiting, req{ctx: l, left: out})
			}
			for len(waiting) > 0 && len(running) < MaxBatch {
				q := waiting[0]
				waiting = waiting[1:]
				pending = append(pending, step{batch: 1, seq: q.ctx, kv: q.ctx})
				running = append(running, q)
			}
			if len(running) == 0 {
				continue
			}
			kv := 0
			live := running[:0]
			for _, q := range running {
				q.ctx++
				kv = max(kv, q.ctx)
				if q.left--; q.left > 0 {
					live = append(live, q)
				}
			}
			pending = append(pending, step{batch: padBatch(len(running)), seq: 1, kv: min(roundUp(kv, kvPage), MaxSeq)})
			running = live
		}
		st := pending[0]
		pending = pending[1:]
		return st, true
	}
	return newStream(fmt.Sprintf("mixed-serving/%s", m.Name), m, n, next), nil
}

// poisson draws a Poisson count of mean lambda (Knuth's method: lambda is
// small here).
func poisson(r *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
