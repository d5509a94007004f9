package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

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
		if step <= o.warmup {
			sv.warmSteps, sv.warmTokens, sv.warmWall, sv.warmClock = step, sv.tokens, sv.wall, sv.clock
		}
	}()
	// forward runs one step and keeps the books.
	forward := func(seqs [][]int, prompt, generated bool) ([]int, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		began := time.Now()
		next, modelledUs, err := runStep(bt, seqs, prompt, generated && !prompt, &sv.ops, clock, steps, gather)
		if err != nil {
			return nil, err
		}
		if o.stepTimes {
			sv.stepModelledUs = append(sv.stepModelledUs, modelledUs)
			sv.stepWallUs = append(sv.stepWallUs, float64(time.Since(began).Nanoseconds())/1e3)
			if steps != nil {
				sv.stepModes = append(sv.stepModes, steps.mode())
			}
		}
		step++
		if prompt {
			sv.promptTokens += int64(len(seqs) * len(seqs[0]))
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
		return next, nil
	}
	for req := 0; o.requests == 0 || req < o.requests; req++ {
		if err := serveRequest(bt, o, r, req, forward, stdout, rec); err != nil {
			return sv, err
		}
	}
	return sv, nil
}

// runStep runs one step of bt: a decode step through the step placer's
// mode and the gatherer, timed for the placer (modelled under a Timeline,
// else by the wall clock); a prompt step as the learner's. It returns the
// next tokens and the step's modelled µs.
func runStep(bt *Batch, seqs [][]int, prompt, decode bool, ops *int64, clock modelClock, steps *stepPlacer,
	gather *stepGather) ([]int, float64, error) {
	if steps != nil {
		if decode {
			steps.begin()
		} else if err := steps.prompt(); err != nil {
			return nil, 0, err
		}
	}
	before, began := clock.read().MakespanUs, time.Now()
	if decode {
		if err := gather.begin(); err != nil {
			return nil, 0, err
		}
	}
	next, err := bt.Forward(seqs, ops)
	if err := errors.Join(err, gather.end()); err != nil {
		return nil, 0, err
	}
	modelledUs := clock.read().MakespanUs - before
	if steps != nil && decode {
		us := float64(time.Since(began).Nanoseconds()) / 1e3
		if clock.tl != nil {
			us = modelledUs
		}
		if err := steps.end(us); err != nil {
			return nil, 0, err
		}
	}
	return next, modelledUs, nil
}

// serveRequest serves batch req: a prompt of a length drawn from -prompt
// per sequence, prefilled in micro-batches of -ubatch tokens, then
// -tokens tokens decoded (the first from the prefill), each step through
// forward. When a device is lost with the batch's KV caches on it, the
// request goes on elsewhere: new caches, the tokens fed so far prefilled
// again (recover).
func serveRequest(bt *Batch, o options, r *rand.Rand, req int,
	forward func(seqs [][]int, prompt, generated bool) ([]int, error), stdout io.Writer, rec *recovery) error {
	bt.Reset()
	if bt.route != nil {
		bt.route.request(req)
	}
	plen := o.prompts[r.IntN(len(o.prompts))]
	if err := bt.Reserve(plen + o.tokens); err != nil {
		return err
	}
	fed := make([][]int, o.batch) // each sequence's tokens fed so far
	for i := range fed {
		for range plen {
			fed[i] = append(fed[i], r.IntN(o.model.Vocab))
		}
	}
	cur, err := prefill(fed, o.ubatch, forward)
	if err != nil {
		return err
	}
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
		seqs := make([][]int, o.batch)
		for i := range seqs {
			seqs[i] = []int{cur[i]}
			fed[i] = append(fed[i], cur[i])
		}
		next, err := forward(seqs, false, true)
		if err != nil {
			if next, err = rec.recover(bt, err, fed, o.ubatch, forward); err != nil {
				return err
			}
		}
		cur = next
	}
}

// prefill feeds fed (each sequence's tokens, all of one length) in
// micro-batches of ubatch tokens as prompt steps, and returns the next
// token of each sequence, which the last micro-batch generates.
func prefill(fed [][]int, ubatch int, forward func(seqs [][]int, prompt, generated bool) ([]int, error)) ([]int, error) {
	n := len(fed[0])
	var cur []int
	for p := 0; p < n; p += ubatch {
		m := min(ubatch, n-p)
		seqs := make([][]int, len(fed))
		for i := range seqs {
			seqs[i] = fed[i][p : p+m]
		}
		var err error
		if cur, err = forward(seqs, true, p+m == n); err != nil {
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

// recover handles the error err of a decode step: when it is a tensor
// lost with its device, it gives bt new caches and prefills fed again,
// returning the step's next tokens; otherwise it returns err.
func (rc *recovery) recover(bt *Batch, err error, fed [][]int, ubatch int,
	forward func(seqs [][]int, prompt, generated bool) ([]int, error)) ([]int, error) {
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
