package adaptive

import (
	"fmt"
	"strconv"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
)

// thompson is the "thompson" policy of the simulator's harness and replay:
// the Scheduler's bucket logic (engine) keyed by Task.Bucket, priors from
// the same roofline on each Arm's nominal figures, transfers of
// Task.Transfer bytes over each arm's nominal link. An arm without a link
// (a CPU, shared memory) receives its bytes from a device, over that
// device's link: the first arm that has one, as in a CPU+GPU pair.
type thompson struct {
	e       *engine
	arms    []bandit.Arm
	links   []*linkModel // nil for arms without a link
	buckets []*bucket    // by Task.Bucket
	all     Mask
	extra   [MaxBackends]float64
	est     [MaxBackends]float64
}

var _ bandit.Policy = (*thompson)(nil)

// NewThompson returns the "thompson" policy over arms (1 to MaxBackends),
// seed 1: the Scheduler's Automatic strategy for the simulator and replay,
// sharing its code. It is not safe for concurrent use, like every
// bandit.Policy. cfg's zero fields take bandit's defaults.
func NewThompson(cfg bandit.Config, arms []bandit.Arm) (bandit.Policy, error) {
	return NewThompsonSeed(cfg, arms, 1)
}

// NewThompsonSeed is NewThompson with the seed of the buckets' random
// sources (each bucket's PCG stream is seed and the hash of its index).
func NewThompsonSeed(cfg bandit.Config, arms []bandit.Arm, seed uint64) (bandit.Policy, error) {
	if len(arms) == 0 || len(arms) > MaxBackends {
		return nil, fmt.Errorf("%w: %d arms, want 1 to %d", ErrConfig, len(arms), MaxBackends)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	p := &thompson{arms: append([]bandit.Arm(nil), arms...), links: make([]*linkModel, len(arms))}
	models := make([]roofline, len(arms))
	var gpus Mask
	for i, a := range arms {
		def := defaultCPU
		if a.GPU {
			def = defaultGPU
			gpus |= Backend(i)
		}
		f := a.Nominal
		nom := fillNominal(backends.Nominal{GFLOPS: f.GFLOPS, MemGBps: f.MemGBps, DispatchUs: f.DispatchUs}, def)
		models[i] = newRoofline(nom.GFLOPS, nom.MemGBps, nom.DispatchUs)
		if f.LinkGBps > 0 {
			p.links[i] = newLink(f.LinkLatencyUs, f.LinkGBps)
		}
	}
	for i := range p.links {
		if p.links[i] != nil {
			continue
		}
		for _, l := range p.links {
			if l != nil && !arms[i].GPU {
				p.links[i] = l
				break
			}
		}
	}
	p.e = newEngine(cfg, models, gpus, seed)
	p.all = Mask(1)<<uint(len(arms)) - 1
	return p, nil
}

// Name returns "thompson".
func (p *thompson) Name() string { return "thompson" }

// bucket returns t's bucket, made on first sight from t's work.
func (p *thompson) bucket(t *bandit.Task) *bucket {
	if t.Bucket < 0 {
		panic(fmt.Sprintf("adaptive: thompson: negative Task.Bucket %d", t.Bucket))
	}
	for t.Bucket >= len(p.buckets) {
		p.buckets = append(p.buckets, nil)
	}
	b := p.buckets[t.Bucket]
	if b == nil {
		bytes := t.BytesRead + t.BytesWritten
		class := sizeClass(max(t.FLOPs, bytes))
		name := strconv.Itoa(t.Bucket)
		b = p.e.newBucket(BucketID(t.Bucket), name, t.Op, class, t.FLOPs, bytes)
		p.buckets[t.Bucket] = b
	}
	return b
}

// Choose implements bandit.Policy. A negative Task.Bucket is a programmer
// error and panics.
func (p *thompson) Choose(t *bandit.Task) int {
	b := p.bucket(t)
	var extra *[MaxBackends]float64
	if t.Transfer != nil {
		p.extra = [MaxBackends]float64{}
		for i, l := range p.links {
			if l != nil && i < len(t.Transfer) && t.Transfer[i] > 0 {
				// Inputs that must come to arm i come from where the
				// pipeline runs, and the output must go back there.
				p.extra[i] = l.predict(t.Transfer[i]) + l.predict(t.BytesWritten)
			}
		}
		extra = &p.extra
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := p.e.choose(b, p.all, extra, &p.est)
	b.record(c.arm, c.reason, c.switched)
	return c.arm
}

// Observe implements bandit.Policy: us is the measured compute duration.
// An arm out of range is a programmer error and panics.
func (p *thompson) Observe(t *bandit.Task, arm int, us float64) {
	if arm < 0 || arm >= len(p.arms) {
		panic(fmt.Sprintf("adaptive: thompson: arm %d of %d", arm, len(p.arms)))
	}
	if !(us > 0 && us < maxObservedUs) {
		return
	}
	b := p.bucket(t)
	b.mu.Lock()
	p.e.observe(b, arm, us)
	b.mu.Unlock()
}
