package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/rs/zerolog/log"
)

// serve serves -requests batches (forever with 0) until ctx ends: each
// batch draws a prompt length from -prompt, prefills the prompts in
// micro-batches of -ubatch tokens per sequence, then decodes -tokens
// tokens (the first comes from the prefill). It returns the tokens
// generated and prefilled, the ops run, and the time they took by the
// wall clock and by the modelled clock. The first -warmup steps (a
// micro-batch or a decode step each) are recorded apart.
func serve(ctx context.Context, m *Model, o options, stdout io.Writer, status *statusLine, clock modelClock, steps *stepPlacer, gather *stepGather) (sv served, err error) {
	bt, err := m.NewBatch(o.batch)
	if err != nil {
		return sv, err
	}
	defer bt.Free()
	if o.model.Experts > 0 {
		bt.route = o.routing.newRouter(o.model.TopK, o.model.Seed)
	}
	r := rand.New(rand.NewPCG(o.model.Seed, 0x9e3779b9))
	rec := &recovery{log: func(msg string, err error) { log.Warn().Err(err).Msg(msg) }}
	defer func() { sv.restarts = rec.restarts }()
	start := time.Now()
	clock0 := clock.read()
	last := start
	step := 0
	defer func() {
		sv.wall, sv.clock = time.Since(start), clock.read().Sub(clock0)
		// A run that ends inside its warm-up measured nothing: its prompt
		// tokens too, or prompt_tokens counts them (TestWarmupPastRun).
		if step <= o.warmup {
			sv.warmSteps, sv.warmTokens, sv.warmPrompt = step, sv.tokens, sv.promptTokens
			sv.warmWall, sv.warmClock = sv.wall, sv.clock
		}
	}()
	dec := &decoder{ctx: ctx, bt: bt, clock: clock, steps: steps, gather: gather, overlap: o.overlap, ops: &sv.ops, lastMode: -1}
	defer func() { sv.overlapped = dec.overlapped }()
	// tally keeps the books of a step whose tokens the host has read.
	dec.tally = func(tokens int, prompt, generated bool, modelledUs, wallUs float64, mode string) {
		if o.stepTimes {
			sv.stepModelledUs = append(sv.stepModelledUs, modelledUs)
			sv.stepWallUs = append(sv.stepWallUs, wallUs)
			if steps != nil {
				sv.stepModes = append(sv.stepModes, mode)
			}
		}
		step++
		if prompt {
			sv.promptTokens += int64(tokens)
		}
		if generated {
			sv.tokens += int64(o.batch)
		}
		if step == o.warmup {
			sv.warmSteps, sv.warmTokens, sv.warmPrompt = step, sv.tokens, sv.promptTokens
			sv.warmWall, sv.warmClock = time.Since(start), clock.read().Sub(clock0)
		}
		if status != nil && time.Since(last) >= 250*time.Millisecond {
			last = time.Now()
			status.show(sv.tokens, time.Since(start))
		}
	}
	// The step read next must end the warm-up with nothing queued behind
	// it, so that the measured steps' work is all measured.
	dec.endsWarmup = func() bool { return step+1 == o.warmup }
	for req := 0; o.requests == 0 || req < o.requests; req++ {
		if err := serveRequest(bt, o, r, req, dec, stdout, rec); err != nil {
			return sv, err
		}
	}
	return sv, nil
}

// overlaps reports whether a fixed strategy's decode steps may overlap
// (-overlap): where some of their work runs off the host's cores (a
// GPU), which works while the host reads and issues. On CPU backends
// alone the host would issue on the cores that run the step: with
// another process keeping one core busy, infer -backends cpu,cpu1
// decoded 5-10% slower overlapped, averaged over 3 rounds (BENCHMARKS.md).
func overlaps(on bool, st choice, bes []backends.Backend) bool {
	if !on || st.placer == nil && st.strategy == adaptive.CPUPreferred {
		return false
	}
	for _, b := range bes {
		in := b.Info()
		if in.Kind == backends.CPU {
			continue
		}
		switch {
		case st.placer != nil, st.strategy == adaptive.Automatic, st.strategy == adaptive.GPUPreferred,
			st.strategy == adaptive.Only(in.Name):
			return true
		}
	}
	return false
}

// decoder runs a batch's steps and keeps their books (tally): a prompt's
// micro-batches (forward) on the tokens given, and decode steps on the
// tokens the last step left on the backend (issue, then complete), one
// issued before the last one's tokens are read where ahead allows.
type decoder struct {
	ctx        context.Context
	bt         *Batch
	clock      modelClock
	steps      *stepPlacer // -strategy auto's, else nil
	gather     *stepGather
	overlap    bool   // -overlap
	ops        *int64 // ops run, counted
	overlapped int64  // decode steps issued before the last one's tokens were read
	tally      func(tokens int, prompt, generated bool, modelledUs, wallUs float64, mode string)
	endsWarmup func() bool // the step read next is the warm-up's last
	lastMode   int         // the mode of the step issued last (-1: none this request)
}

// decodeStep is a decode step issued, its tokens not read yet.
type decodeStep struct {
	issued    Issued
	ticket    stepTicket // the step placer's, for it (mode 0 without one)
	overlaps  bool       // the next step may be begun before it is read
	changed   bool       // the step before it ran in another mode, or none did
	issueUs   float64    // the host's time issuing it, modelled
	issueWall time.Duration
}

// forward runs a prompt's micro-batch (seqs) as the learner's step and
// reads its tokens (generated: they are the prompt's first generated
// ones).
func (d *decoder) forward(seqs [][]int, generated bool) ([]int, error) {
	if err := d.ctx.Err(); err != nil {
		return nil, err
	}
	if d.steps != nil {
		if err := d.steps.prompt(); err != nil {
			return nil, err
		}
	}
	d.lastMode = -1 // the learner's, not timed as a mode
	before := d.clock.read().MakespanUs
	began := time.Now()
	next, err := d.bt.Forward(seqs, d.ops)
	if err != nil {
		return nil, err
	}
	modelledUs := d.clock.read().MakespanUs - before
	d.tally(len(seqs)*len(seqs[0]), true, generated, modelledUs, float64(time.Since(began).Nanoseconds())/1e3, "prompt")
	return next, nil
}

// begin chooses the mode of the next decode step (the step placer's).
func (d *decoder) begin() decodeStep {
	st := decodeStep{overlaps: true}
	if d.steps != nil {
		st.ticket, st.overlaps = d.steps.begin()
	}
	return st
}

// issue queues decode step st, begun, on the last tokens, gathered where
// its placement is set.
func (d *decoder) issue(st decodeStep) (decodeStep, error) {
	if err := d.ctx.Err(); err != nil {
		return st, err
	}
	st.changed, d.lastMode = d.steps != nil && st.ticket.mode != d.lastMode, st.ticket.mode
	us, began := d.clock.hostUs(), time.Now()
	if err := d.gather.begin(); err != nil {
		return st, err
	}
	var err error
	st.issued, err = d.bt.Issue(d.ops)
	err = errors.Join(err, d.gather.end())
	st.issueUs, st.issueWall = d.clock.hostUs()-us, time.Since(began)
	return st, err
}

// ahead reports whether the step after st may be begun before st's
// tokens are read: -overlap, the step placer allowing it, st not the first
// of its mode (bandit.Modes holds a mode whose change is not priced yet
// only once it has seen that change's step: chosen before, the step
// after a change drew the modes afresh, and frozen and only:sim:h100
// then took turns, each step paying a change), st not the warm-up's
// last, and the run not stopping.
func (d *decoder) ahead(st decodeStep) bool {
	return d.overlap && st.overlaps && !st.changed && !d.endsWarmup() && d.ctx.Err() == nil
}

// complete reads st's tokens and times the step for the step placer:
// the host's time issuing it and waiting for its tokens (modelled under
// a Timeline, else by the wall clock). A step issued while the one
// before ran is not charged for that one's wait, nor the one before it
// for this one's issue: each step's own cost, whether or not its
// neighbours overlapped it, so that a step before a change of mode (not
// overlapped by the next) is not timed as if free.
func (d *decoder) complete(st decodeStep) ([]int, error) {
	us, began := d.clock.hostUs(), time.Now()
	next, err := d.bt.Tokens(st.issued)
	if err != nil {
		return nil, err
	}
	modelledUs := st.issueUs + d.clock.hostUs() - us
	wallUs := float64((st.issueWall + time.Since(began)).Nanoseconds()) / 1e3
	mode := ""
	if d.steps != nil {
		us := wallUs
		if d.clock.tl != nil {
			us = modelledUs
		}
		if err := d.steps.end(st.ticket, us); err != nil {
			return nil, err
		}
		mode = d.steps.stepMode(st.ticket.mode)
	}
	d.tally(d.bt.b, false, true, modelledUs, wallUs, mode)
	return next, nil
}

// serveRequest serves batch req: a prompt of a length drawn from -prompt
// per sequence, prefilled in micro-batches of -ubatch tokens, then
// -tokens tokens decoded (the first from the prefill), each decode step
// fed the tokens the last one left on the backend, and issued before
// they are read where dec allows (decoder.ahead). When a device is lost
// with the batch's KV caches on it, the request goes on elsewhere: new
// caches, the tokens fed so far prefilled again (recover), the steps in
// flight dropped.
func serveRequest(bt *Batch, o options, r *rand.Rand, req int, dec *decoder, stdout io.Writer, rec *recovery) error {
	bt.Reset()
	if bt.route != nil {
		bt.route.request(req)
	}
	plen := o.prompts[r.IntN(len(o.prompts))]
	if err := bt.Reserve(plen + o.tokens - 1); err != nil { // the last token is not fed back
		return err
	}
	fed := make([][]int, o.batch) // each sequence's tokens fed so far
	for i := range fed {
		for range plen {
			fed[i] = append(fed[i], r.IntN(o.model.Vocab))
		}
	}
	cur, err := prefill(fed, o.ubatch, dec.forward)
	if err != nil {
		if cur, err = rec.recover(bt, err, fed, o.ubatch, dec.forward); err != nil {
			return err
		}
	}
	var next *decodeStep // issued before cur's step was read
	for k := 0; ; k++ {
		if o.stream {
			for i, tok := range cur {
				fmt.Fprintf(stdout, "%d:%d ", req*o.batch+i, tok)
			}
			fmt.Fprintln(stdout)
		}
		if k == o.tokens-1 {
			return nil
		}
		for i := range fed {
			fed[i] = append(fed[i], cur[i])
		}
		toks, err := decodeNext(dec, &next, k+1 < o.tokens-1)
		if err != nil {
			next = nil
			if toks, err = rec.recover(bt, err, fed, o.ubatch, dec.forward); err != nil {
				return err
			}
		}
		cur = toks
	}
}

// decodeNext returns the tokens of the step after the last one read: the
// step issued already (*next), or one issued now. When more steps follow
// and dec allows (decoder.ahead), the step after it is begun before they
// are read, and left in *next: issued before the read when it runs in the
// same mode, after it otherwise, so that each mode's steps are timed
// among steps of their own mode.
func decodeNext(dec *decoder, next **decodeStep, more bool) ([]int, error) {
	var st decodeStep
	if *next != nil {
		st, *next = **next, nil
	} else {
		var err error
		if st, err = dec.issue(dec.begin()); err != nil {
			return nil, err
		}
	}
	if !more || !dec.ahead(st) {
		return dec.complete(st)
	}
	after := dec.begin()
	if after.ticket.mode != st.ticket.mode {
		toks, err := dec.complete(st)
		if err != nil {
			return nil, err
		}
		if after, err = dec.issue(after); err != nil {
			return nil, err
		}
		*next = &after
		return toks, nil
	}
	after, err := dec.issue(after)
	if err != nil {
		return nil, err
	}
	*next = &after
	dec.overlapped++
	return dec.complete(st)
}

// prefill feeds fed (each sequence's tokens, all of one length) in
// micro-batches of ubatch tokens as prompt steps, and returns the next
// token of each sequence, which the last micro-batch generates.
func prefill(fed [][]int, ubatch int, forward func(seqs [][]int, generated bool) ([]int, error)) ([]int, error) {
	n := len(fed[0])
	var cur []int
	for p := 0; p < n; p += ubatch {
		m := min(ubatch, n-p)
		seqs := make([][]int, len(fed))
		for i := range seqs {
			seqs[i] = fed[i][p : p+m]
		}
		var err error
		if cur, err = forward(seqs, p+m == n); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// recovery restarts requests whose KV caches were lost with a device.
type recovery struct {
	log      func(msg string, err error)
	restarts int64 // requests restarted
}

// maxRestarts bounds the restarts of one run: each loses a device, and a
// machine does not have many.
const maxRestarts = 4

// recover handles the error err of a prompt's or a decode step: when it
// is a tensor lost with its device, it gives bt new caches and prefills
// fed again, returning the step's next tokens; otherwise it returns err.
// Rule: a prompt's micro-batches recover as a decode step does. Reason:
// a GPU lost while the prompt ran ended the run, its tensors having no
// lineage (TestGPULostInPrompt).
func (rc *recovery) recover(bt *Batch, err error, fed [][]int, ubatch int,
	forward func(seqs [][]int, generated bool) ([]int, error)) ([]int, error) {
	if !errors.Is(err, executor.ErrTensorLost) || rc.restarts >= maxRestarts {
		return nil, err
	}
	rc.restarts++
	rc.log("infer: a device was lost with the batch's KV caches; prefilling its tokens again elsewhere", err)
	// The lost step's queued work that could not run again is reported
	// once, here: the request it belonged to goes on.
	if s, ok := bt.m.be.(interface{ Sync(context.Context) error }); ok {
		if serr := s.Sync(context.Background()); serr != nil {
			rc.log("infer: the lost step's queued work", serr)
		}
	}
	if rerr := bt.Restart(); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	return prefill(fed, ubatch, forward)
}
