package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// stepPlacer runs -strategy auto: each decode step runs in one of a few
// modes, as bandit.Modes chooses on the steps' times (modelled under a
// Timeline, else by the wall clock): the per-op learner's placement
// (learned); the learner's placement frozen (each op where the learner
// put it in its fastest step while it ran alone, later in a learned step
// once the learner's record beats the frozen one's); every op on one
// backend; or, with weights in host memory, every op where its weights
// live (home: llama.cpp's rule below its batch threshold). The learner
// prices each op alone; on a real GPU its device switches cost the step
// more than they save (BENCHMARKS.md, the real-GPU rows), which only the
// step's own time shows, and what it learns from the other modes' ops
// can move its placement to a slower one (h100 beside cpu2 at batch 1,
// steps not gathered: from about 730 µs a step to 944, the GPU alone
// taking 916), which the
// frozen mode keeps from costing the steps (TestAutoFrozenMode). The
// learner runs the first learnerSteps decode steps alone; then a backend
// becomes a mode when the learner's posteriors put a whole step on it,
// its weight copies included, within ruleSlack of the best such step and
// of the learner's fastest. Prompt steps are the learner's (Modes.Resume:
// a decode step after one follows a change of mode unless it is
// learned), and the learner learns from every op that is timed: all of
// its own steps' and, where steps are not gathered (stepGather), the
// other modes' too. With -db the modes' records are kept in the store
// beside the posteriors, and a later run of the same steps (stepRecords)
// starts from them: it runs neither the learner alone nor each mode's
// warm-up (TestAutoRestoresStepModes).
type stepPlacer struct {
	telemetry func() adaptive.Telemetry // the Scheduler's, once it exists
	transfer  func(backend string, toDevice bool, bytes int64) float64
	names     []string      // the backends', from the Scheduler
	modes     *bandit.Modes // nil until the modes are known
	table     []stepMode    // mode k is table[k]
	home      *llamaCPP     // the weights' home; nil without -gpu-mem
	weights   weightHolder  // the Executor, whose weight caches home steps hold
	seed      uint64
	sig       string        // the decode step's signature: whose records a later run may restore (stepRecords)
	store     stepStore     // with -db: where the modes' records are kept; nil without
	keys      []learned.Key // mode k's record's key in the store
	alone     int           // decode steps the learner ran alone, before the modes
	restored  bool          // the modes are the store's (restore)
	gathered  bool          // steps placed before they run are gathered (stepGather): faster than the learner's
	offHost   []bool        // by backend: its work runs off the host's cores (a GPU): its steps may overlap
	shared    []bool        // by backend: it shares its hardware with another backend (backends.HardwareGroup)
	cur       atomic.Int32  // the running step's mode; counting while learning
	prompting atomic.Bool   // the running step is a prompt's
	recording atomic.Bool   // the running step is a decode step of the learner's: its choices are kept (ran)
	steps     int           // decode steps run
	mu        sync.Mutex    // guards the maps: Place and Observed may run on the Executor's goroutines
	count     map[adaptive.BucketID]int
	copyUs    []float64                        // the counted step's weight copies, by the backend its ops would have run on
	ran       map[adaptive.BucketID][]frozenOp // the running learner step's choices by bucket, in order
	frozen    map[adaptive.BucketID][]frozenOp // the frozen mode's: the fastest learner step's ran
	homeOf    int                              // the home mode's backend for the op being decided (-1: no home mode)
	frozenUs  float64                          // that step's time
	learnUs   []float64                        // the learner's steps while it ran alone
	occ       map[adaptive.BucketID]int        // the running frozen step's ops by bucket so far
}

// modeKind is how a step mode places an op.
type modeKind uint8

const (
	learnedMode modeKind = iota // the learner decides
	frozenMode                  // stepPlacer.frozen's choice for the op
	onlyMode                    // every op on one backend
	homeMode                    // every op where its weights live
)

// frozenOp is the learner's choice for an op: a backend, or, where that
// was the op's home (with -gpu-mem), the op's home at the time it runs,
// which follows the weights the cache moves.
type frozenOp struct {
	backend int
	home    bool
}

// stepMode is one of auto's ways of running a decode step.
type stepMode struct {
	kind    modeKind
	backend int // onlyMode's
}

const (
	// learnerSteps is how many decode steps the learner runs before the
	// modes are compared: 8 at batch 1 are about 1,600 ops of a 12-layer
	// decoder, past the trials of a cold start (TestAutoStepModes).
	learnerSteps = 8
	// learnerRecord is how many of the learner's last steps alone make
	// its mode's first record: the later half, past most trials. Rule:
	// more than two. Reason: a record of two steps is a Student t of
	// about 2.5 degrees, whose tail drew the learner's mode, 1.35× slower
	// than the GPU alone on igpu at batch 16, late in 3 of the 6 192-step
	// runs looked at (bandit's TestModesRecordSteps); with four, auto
	// there gained 0.46% over 10 seeds, and every seed reached 0.99 of
	// the GPU alone, against 6 (BENCHMARKS.md).
	learnerRecord = learnerSteps / 2
	// ruleSlack is how much slower than the best backend's predicted
	// step, and than the learner's fastest measured one, a whole step on
	// a backend may be predicted and still be tried: a step of 1.5× costs
	// half a step to learn, one of 5× four. The prediction is the longer
	// of the per-op means' sum and the weight copies' (setModes), not what
	// the host waits for between ops, so it is a step's least: a mode
	// predicted 1.5× the learner's measured step is slower still.
	ruleSlack = 1.5
	// counting marks a step of the learner's whose ops are counted by
	// bucket (Place) for the prediction of whole steps.
	counting = -1
)

var _ executor.Placer = (*stepPlacer)(nil)

func newStepPlacer(seed uint64) *stepPlacer {
	return &stepPlacer{seed: seed, count: map[adaptive.BucketID]int{},
		ran: map[adaptive.BucketID][]frozenOp{}, occ: map[adaptive.BucketID]int{}, homeOf: -1}
}

// stepPlacer returns -strategy auto's placer, made st's Placer, with the
// weights-home mode under -gpu-mem when there are a CPU and a GPU; nil
// for another strategy.
func (o *options) stepPlacer(st *choice, bes []backends.Backend) *stepPlacer {
	if !st.steps {
		return nil
	}
	p := newStepPlacer(o.model.Seed)
	p.sig = o.stepSignature(bes)
	for _, b := range bes {
		p.offHost = append(p.offHost, b.Info().Kind != backends.CPU)
	}
	p.shared = sharesHardware(bes)
	if o.gpuMem.set {
		p.home, _ = newLlamaCPP(bes) // nil without a CPU and a GPU: no home mode
	}
	st.placer = p
	return p
}

// sharesHardware reports, by backend, whether bes holds another backend
// of the same backends.HardwareGroup.
func sharesHardware(bes []backends.Backend) []bool {
	n := map[string]int{}
	for _, b := range bes {
		if g, ok := b.(backends.HardwareGroup); ok {
			n[g.HardwareGroup()]++
		}
	}
	shared := make([]bool, len(bes))
	for i, b := range bes {
		if g, ok := b.(backends.HardwareGroup); ok {
			shared[i] = n[g.HardwareGroup()] > 1
		}
	}
	return shared
}

// weightHolder holds the Executor's weight caches
// (executor.Executor.HoldWeights) and names the placement their rule
// weighs uses by (executor.Executor.WeighFor).
type weightHolder interface {
	HoldWeights(hold bool)
	WeighFor(regime int) error
}

// stepStore keeps the modes' records (history.DB): Records gives the
// current machine's records (another machine's step times say nothing of
// this one's), PutWithPrior keeps a mode's record for the next flush.
type stepStore interface {
	Records() []history.Record
	PutWithPrior(k learned.Key, prior, posterior bandit.NormalGamma)
}

// stepRecords is the store's Backend of the modes' records, which no
// backend is named; their Bucket is the step's signature and the mode's
// name. A Scheduler warm-started from the store finds no bucket of its
// own under it.
const stepRecords = "steps"

// stepSignature names the decode steps whose modes' records a later run
// may restore: the model's shape, the batch, the backends, the execution
// model and what else moves a step's time. The weights' seed, the prompts
// and the context length are left out: the modes share a workload level
// that follows the steps' growth (bandit.Modes).
func (o *options) stepSignature(bes []backends.Backend) string {
	var b strings.Builder
	c := o.model
	fmt.Fprintf(&b, "decode/d%d.l%d.h%d.kv%d.ffn%d.v%d/b%d/", c.Dim, c.Layers, c.Heads, c.KVHeads, c.FFN, c.Vocab, o.batch)
	for i, be := range bes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(be.Info().Name)
	}
	fmt.Fprintf(&b, "/%v/graphs=%t/overlap=%t", o.execModel, o.graphs, o.overlap)
	if o.gpuMemS != "" {
		fmt.Fprintf(&b, "/gpu-mem=%s", o.gpuMemS)
	}
	if c.Experts > 0 {
		fmt.Fprintf(&b, "/moe=%d,%d/routing=%s/zipf=%g/drift=%s", c.Experts, c.TopK, o.routingFile, o.zipf, o.drift)
	}
	return b.String()
}

// attach gives p the Scheduler whose posteriors predict whole steps, and
// its backends' names, the Executor whose weight caches the home mode
// holds, and the store (nil: none) that keeps the modes' records, whose
// records for p's steps, when there is one for every mode, p starts from
// (nil p: nothing to do).
func (p *stepPlacer) attach(s *adaptive.Scheduler, w weightHolder, st stepStore) error {
	if p == nil {
		return nil
	}
	p.weights = w
	p.telemetry, p.transfer, p.names = s.Telemetry, s.PredictTransfer, s.Backends()
	p.copyUs = make([]float64, len(p.names))
	if st == nil {
		return nil
	}
	p.store = st
	return p.restore(st.Records())
}

// restore sets up the modes from recs, the store's records, when they
// hold one for each mode p's steps would have: the learner's, the frozen
// placement's, each backend's that had a mode and ran (one bounded out
// and never run has no record, and is left out as one predicted past
// ruleSlack is), and home with -gpu-mem. Without one for each, p starts
// as a cold run does. The frozen placement
// itself is not kept: until the learner runs a step, a frozen step is
// the learner's (begin).
func (p *stepPlacer) restore(recs []history.Record) error {
	prefix := p.sig + "/"
	kept := map[string]history.Record{}
	for _, r := range recs {
		if r.Key.Backend == stepRecords && strings.HasPrefix(r.Key.Bucket, prefix) {
			kept[r.Key.Bucket[len(prefix):]] = r
		}
	}
	if len(kept) == 0 {
		return nil
	}
	table := []stepMode{{kind: learnedMode}, {kind: frozenMode}}
	for i, name := range p.names {
		if _, ok := kept["only:"+name]; ok {
			table = append(table, stepMode{kind: onlyMode, backend: i})
		}
	}
	if p.home != nil {
		table = append(table, stepMode{kind: homeMode})
	}
	m, err := bandit.NewModes(len(table), p.seed)
	if err != nil {
		return fmt.Errorf("infer: auto's step modes: %w", err)
	}
	p.table = table
	for k := range table {
		r, ok := kept[p.modeName(k)]
		if !ok {
			p.table = nil
			return nil
		}
		if err := m.Restore(k, r.Prior, r.Posterior); err != nil {
			p.table = nil
			return fmt.Errorf("infer: auto's step modes from the store: %s: %w", r.Key.Bucket, err)
		}
	}
	p.modes, p.restored = m, true
	p.setKeys()
	return nil
}

// sayRestored writes a line to w if p restored its step modes from the
// store in dir (nothing for a nil p, or one that starts cold).
func (p *stepPlacer) sayRestored(w io.Writer, dir string) {
	if p != nil && p.restored {
		fmt.Fprintf(w, "infer: -db %s: auto's %d step modes restored: no learner steps alone\n", dir, len(p.table))
	}
}

// setKeys names each mode's record in the store.
func (p *stepPlacer) setKeys() {
	p.keys = make([]learned.Key, len(p.table))
	for k := range p.table {
		p.keys[k] = learned.Key{Backend: stepRecords, Bucket: p.sig + "/" + p.modeName(k)}
	}
}

// save keeps every mode's record in the store, if there is one.
func (p *stepPlacer) save() {
	if p.store == nil {
		return
	}
	for k, key := range p.keys {
		if prior, post, ok := p.modes.Record(k); ok {
			p.store.PutWithPrior(key, prior, post)
		}
	}
}

// Name implements executor.Placer.
func (p *stepPlacer) Name() string { return "auto" }

// Place implements executor.Placer: the running mode's backend for the
// op, or the learner's choice (counted by bucket while learning).
func (p *stepPlacer) Place(s kernels.Spec, res adaptive.Residency, b adaptive.BucketID) int {
	k := p.cur.Load()
	if k == counting {
		p.mu.Lock()
		p.count[b]++
		p.addCopies(&res)
		p.mu.Unlock()
	}
	if k <= 0 { // the learner's, or a prompt before the modes are known
		if p.home != nil && p.recording.Load() {
			p.mu.Lock()
			p.homeOf = p.home.home(s, res)
			p.mu.Unlock()
		}
		return executor.Learned
	}
	switch m := p.table[k]; m.kind {
	case frozenMode:
		p.mu.Lock()
		defer p.mu.Unlock()
		i := p.occ[b]
		p.occ[b]++
		switch {
		case i >= len(p.frozen[b]):
		case p.frozen[b][i].home:
			return p.home.home(s, res)
		default:
			return p.frozen[b][i].backend
		}
	case onlyMode:
		return m.backend
	case homeMode:
		return p.home.home(s, res)
	}
	return executor.Learned
}

// addCopies adds to copyUs the link model's time to copy the op's
// weights (res) to each backend that lacks them.
func (p *stepPlacer) addCopies(res *adaptive.Residency) {
	for i := range min(res.N, adaptive.MaxInputs) {
		in := res.Inputs[i]
		if !in.Weight || in.Bytes <= 0 {
			continue
		}
		for a, name := range p.names {
			if !in.On.Has(a) {
				p.copyUs[a] += max(0, p.transfer(name, true, in.Bytes))
			}
		}
	}
}

// placedOn reports whether the running decode step's placement is set
// before it runs (a mode other than the learner's: its ops need no
// timings of their own, so they can be gathered) and puts ops on a
// backend a for which on[a] holds.
func (p *stepPlacer) placedOn(on []bool) bool {
	k := p.cur.Load()
	if k <= 0 {
		return false
	}
	switch m := p.table[k]; m.kind {
	case onlyMode:
		return on[m.backend]
	case homeMode:
		return on[p.home.cpu] || on[p.home.gpu]
	case frozenMode:
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, ops := range p.frozen {
			for _, op := range ops {
				if (op.home && (on[p.home.cpu] || on[p.home.gpu])) || (!op.home && on[op.backend]) {
					return true
				}
			}
		}
	}
	return false
}

// Observed implements executor.Placer: the learner learns on its own.
func (p *stepPlacer) Observed(adaptive.BucketID, int, float64) {}

// SawLearned implements executor.LearnedSeer: while the learner runs
// alone, the backends it chose, by bucket in the order of the step's
// ops, for the frozen mode.
func (p *stepPlacer) SawLearned(b adaptive.BucketID, backend int) {
	if !p.recording.Load() {
		return
	}
	p.mu.Lock()
	p.ran[b] = append(p.ran[b], frozenOp{backend: backend, home: backend == p.homeOf})
	p.homeOf = -1
	p.mu.Unlock()
}

// prompt sets the learner's placement for a prompt step: the learned
// mode's, so that its next decode step follows no change of mode.
func (p *stepPlacer) prompt() error {
	p.prompting.Store(true)
	p.recording.Store(false)
	p.holdWeights(0)
	if p.modes == nil {
		return nil
	}
	p.cur.Store(0)
	return p.modes.Resume(0)
}

// stepTicket is a decode step begun: its mode and, for a step of the
// learner's, the choices it makes (ran), which its end may freeze.
type stepTicket struct {
	mode int
	ran  map[adaptive.BucketID][]frozenOp
}

// begin chooses the mode of a decode step: the learner's, counted, for
// the first learnerSteps, then bandit.Modes'. It returns the step's
// ticket, for end, and whether the next step may be issued before this
// one's tokens are read: a step of one backend's mode, on a backend
// whose work runs off the host's cores (overlaps). Overlapped too, the
// modes that mix backends (learned, frozen, home) took turns in short
// runs whose steps each timed near the others (a change draining the
// overlap), and serving with half the weights in host memory fell from
// 734.2 to 708.5 modelled tokens/s (seeds 1-8, BENCHMARKS.md).
func (p *stepPlacer) begin() (t stepTicket, ahead bool) {
	p.prompting.Store(false)
	p.mu.Lock()
	p.ran = map[adaptive.BucketID][]frozenOp{}
	clear(p.occ)
	if p.modes == nil {
		clear(p.count)
		clear(p.copyUs)
	}
	p.mu.Unlock()
	k := counting
	if p.modes != nil {
		k = p.modes.Next()
		if p.table[k].kind == frozenMode && p.frozen == nil && p.restored {
			// Restored (restore): no placement to replay until the
			// learner runs, so a draw of frozen would run the learner's
			// step instead. Rule: only when frozen's record is the best,
			// else the running mode goes on. Reason: a draw against the
			// odds paid a learner step, 2.1× the GPU alone's on h100
			// beside cpu2 at batch 16, not a frozen one
			// (TestAutoRestoredFrozenDraw). Frozen did not run: its
			// retry waits anew (Modes.Skip, TestAutoRestoredFrozenRetry).
			_ = p.modes.Skip(k) // k is Next's: a mode, so no error
			k = p.restoredFrozen()
		}
	}
	p.recording.Store(k <= 0)
	p.cur.Store(int32(k))
	p.holdWeights(k)
	p.mu.Lock()
	t = stepTicket{mode: k, ran: p.ran}
	p.mu.Unlock()
	return t, k > 0 && p.table[k].kind == onlyMode && p.offHost[p.table[k].backend]
}

// restoredFrozen returns the mode to run where a restored run with no
// frozen placement yet drew frozen: the learner (whose step gives frozen
// its placement) when frozen's record is the best of all modes', else
// the running mode (the learner before any ran).
func (p *stepPlacer) restoredFrozen() int {
	best := 1
	for k := range p.table {
		if p.modes.Mean(k) < p.modes.Mean(best) {
			best = k
		}
	}
	if last := int(p.cur.Load()); best != 1 && last >= 0 && last < len(p.table) {
		return last // never frozen: frozen has not run without a placement
	}
	return 0
}

// holdWeights sets the weight caches up for a step of mode k (counting,
// the learner alone, and a prompt run the learner's placement). It holds
// them for a home step, whose ops run where the weights are: trading
// copies under it (about 15 evictions a home step, simulated, at
// -gpu-mem 50%) moved its ops between devices, 10.5–13 ms a step on an
// H100 where held ones take 5.5–7.6 (TestHomeStepsHoldWeights,
// BENCHMARKS.md). And it names the regime the caches weigh uses by
// (weightRegime).
func (p *stepPlacer) holdWeights(k int) {
	if p.weights == nil {
		return
	}
	p.weights.HoldWeights(k > 0 && p.table[k].kind == homeMode)
	_ = p.weights.WeighFor(p.weightRegime(k)) // below 1 + MaxBackends: a regime
}

// weightRegime is the weight caches' regime for a step of mode k: 1 + b
// for a GPU's alone (backend b, off the host: offHost), 0 for the modes
// that mix backends (the learner's, frozen, home; counting and prompts
// too) and a CPU's alone, which reads the host copies. Rule: a GPU-alone
// mode's weights are worth what its own uses save. Reason: weighed by the
// learner's uses, where the output projection ran on the CPU and saved
// nothing resident, the GPU alone at -gpu-mem 50% beside desktop16
// streamed it for about 50 steps (2,031–2,186 µs a step against 1,829
// alone) and was left: 0.90 of only:GPU over 1,000 tokens, 0.96–0.98
// with a regime of its own. The others share one: with a regime for each
// mode, a new regime's first uses set its figures alone, each change
// traded copies, and cpu2 beside pcie3x8 lost 1.4% (seeds 1–5), serving
// beside desktop16 3.3% in one seed of five (BENCHMARKS.md;
// TestHomeStepsHoldWeights).
func (p *stepPlacer) weightRegime(k int) int {
	if k <= 0 || p.table[k].kind != onlyMode || !p.offHost[p.table[k].backend] {
		return 0
	}
	return 1 + p.table[k].backend
}

// end records that the decode step of ticket t took us µs; while the
// learner runs alone it keeps the fastest step's placement, and after the
// learnerSteps-th it sets up the modes from the last step's ops.
func (p *stepPlacer) end(t stepTicket, us float64) error {
	p.steps++
	k := t.mode
	if p.modes == nil {
		p.alone++
		p.freeze(t.ran, us)
		p.learnUs = append(p.learnUs, us)
		if p.steps < learnerSteps {
			return nil
		}
		return p.setModes()
	}
	if err := p.modes.Done(k, us); err != nil {
		return err
	}
	p.save()
	if k == 0 && p.frozen == nil {
		p.freeze(t.ran, us) // the first placement a restored run has to freeze
	}
	if k == 0 && us <= p.modes.Mean(0) && p.modes.Mean(0) < p.modes.Mean(1) {
		// The learner now does better than the placement frozen: its
		// latest step's, if no slower than its record (not a step of
		// trials), takes the frozen one's place, with its record moved
		// by how far frozen steps fell from the records adopted before
		// (Modes.Adopt).
		p.mu.Lock()
		p.frozen = t.ran // begin gives the next step a map of its own
		p.mu.Unlock()
		return p.modes.Adopt(1, 0)
	}
	return nil
}

// freeze makes the learner step just run, of us µs and choices ran, the
// frozen mode's placement if it is the fastest so far: each op on the
// backend the learner chose for it, told apart by its bucket and its
// place among the step's ops of that bucket.
func (p *stepPlacer) freeze(ran map[adaptive.BucketID][]frozenOp, us float64) {
	if p.frozen != nil && us >= p.frozenUs {
		return
	}
	p.mu.Lock()
	p.frozen, p.frozenUs = ran, us
	p.mu.Unlock()
}

// setModes predicts a whole step on each backend from the learner's
// posterior means of the buckets of the last step or the copies of the
// weights the backend lacks, whichever is longer, and makes a mode of every backend within
// ruleSlack of the best prediction and of the learner's fastest step,
// bounded below by its prediction. The learned and frozen modes start
// from the learner's own steps.
func (p *stepPlacer) setModes() error {
	tel := p.telemetry()
	pred := make([]float64, len(p.copyUs)) // the ops' means, then the step's least
	p.mu.Lock()
	for b, n := range p.count {
		if int(b) >= len(tel.Buckets) {
			continue
		}
		for _, a := range tel.Buckets[b].Arms {
			for i, name := range p.names {
				if a.Backend == name {
					pred[i] += float64(n) * a.MeanUs
				}
			}
		}
	}
	p.mu.Unlock()
	// The weight copies run on the link beside the kernels (a copy stream,
	// the simulator's link lane): a step takes at least the longer of the
	// two, not their sum. Summed, only:sim:pcie3x8 at -gpu-mem 50% was
	// predicted 3,268 µs a step (1,645 of copies) where it ran 1,829, past
	// ruleSlack of the CPU's 1,894, and was never a mode
	// (TestAutoCopiesBesideKernels).
	for i, c := range p.copyUs {
		pred[i] = max(pred[i], c)
	}
	// A backend that shares its hardware with another (cpu, cpu1) had its
	// ops timed beside the other's, caches and cores moving between them:
	// its ops summed to 15-25% more than its own steps took at batch 1,
	// and in some runs past ruleSlack, leaving the fastest backend out of
	// the modes for the whole run. Its prediction neither makes the base
	// nor leaves it out, so it is tried (TestSharedBackendsNotBoundedOut).
	shared := func(i int) bool { return i < len(p.shared) && p.shared[i] }
	base := p.frozenUs
	for i := range pred {
		if !shared(i) {
			base = min(base, pred[i])
		}
	}
	p.table = []stepMode{{kind: learnedMode}, {kind: frozenMode}}
	for i := range pred {
		if pred[i] > 0 && (shared(i) || pred[i] <= ruleSlack*base) {
			p.table = append(p.table, stepMode{kind: onlyMode, backend: i})
		}
	}
	if p.home != nil {
		p.table = append(p.table, stepMode{kind: homeMode})
	}
	m, err := bandit.NewModes(len(p.table), p.seed)
	if err != nil {
		return fmt.Errorf("infer: auto's step modes: %w", err)
	}
	for _, us := range p.learnUs[len(p.learnUs)-learnerRecord:] {
		if err := m.Observe(0, us); err != nil {
			return fmt.Errorf("infer: auto's step modes: %w", err)
		}
	}
	// A backend's predicted step is its least (Modes.Bound): one surely
	// slower than the learner's steps waits for its retry. Not so for a
	// backend that shares its hardware with another (above): it is tried
	// at once.
	for k, md := range p.table {
		if md.kind == onlyMode && !shared(md.backend) {
			if err := m.Bound(k, pred[md.backend]); err != nil {
				return fmt.Errorf("infer: auto's step modes: %w", err)
			}
		}
	}
	// The frozen placement is one of the learner's steps, its time the
	// least of learnerSteps (biased low): its record starts as the
	// learner's, unless its steps are gathered and the learner's are not.
	if !p.gathered {
		if err := m.Adopt(1, 0); err != nil {
			return fmt.Errorf("infer: auto's step modes: %w", err)
		}
	}
	p.modes = m
	p.setKeys()
	return nil
}

// modeName names mode k: "learned", "frozen", "only:NAME" or "home".
func (p *stepPlacer) modeName(k int) string {
	switch m := p.table[k]; m.kind {
	case frozenMode:
		return "frozen"
	case onlyMode:
		return "only:" + p.names[m.backend]
	case homeMode:
		return "home"
	}
	return "learned"
}

// stepMode names mode k of a decode step as modeName ("learned" while
// the learner runs alone).
func (p *stepPlacer) stepMode(k int) string {
	if k <= 0 {
		return "learned"
	}
	return p.modeName(k)
}

// runs returns the decode steps each mode ran, by name ("learned" counts
// the first learnerSteps); nil for a nil p.
func (p *stepPlacer) runs() map[string]int64 {
	if p == nil {
		return nil
	}
	if p.modes == nil {
		return map[string]int64{"learned": int64(p.alone)}
	}
	out := map[string]int64{}
	for k, n := range p.modes.Runs() {
		out[p.modeName(k)] = n
	}
	out["learned"] += int64(p.alone)
	return out
}
