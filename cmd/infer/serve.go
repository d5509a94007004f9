package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
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
		decode := generated && !prompt
		if steps != nil {
			if decode {
				steps.begin()
			} else {
				steps.prompt()
			}
		}
		before, began := clock.read().MakespanUs, time.Now()
		if decode {
			if err := gather.begin(); err != nil {
				return nil, err
			}
		}
		next, err := bt.Forward(seqs, &sv.ops)
		if err := errors.Join(err, gather.end()); err != nil {
			return nil, err
		}
		if steps != nil && decode {
			us := float64(time.Since(began).Nanoseconds()) / 1e3
			if clock.tl != nil {
				us = clock.read().MakespanUs - before
			}
			if err := steps.end(us); err != nil {
				return nil, err
			}
		}
		if o.stepTimes {
			sv.stepModelledUs = append(sv.stepModelledUs, clock.read().MakespanUs-before)
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
		if err := serveRequest(bt, o, r, req, forward, stdout); err != nil {
			return sv, err
		}
	}
	return sv, nil
}

// serveRequest serves batch req: a prompt of a length drawn from -prompt
// per sequence, prefilled in micro-batches of -ubatch tokens, then
// -tokens tokens decoded (the first from the prefill), each step through
// forward.
func serveRequest(bt *Batch, o options, r *rand.Rand, req int,
	forward func(seqs [][]int, prompt, generated bool) ([]int, error), stdout io.Writer) error {
	bt.Reset()
	if bt.route != nil {
		bt.route.request(req)
	}
	plen := o.prompts[r.IntN(len(o.prompts))]
	prompts := make([][]int, o.batch)
	for i := range prompts {
		for range plen {
			prompts[i] = append(prompts[i], r.IntN(o.model.Vocab))
		}
	}
	var cur []int
	var err error
	for p := 0; p < plen; p += o.ubatch {
		n := min(o.ubatch, plen-p)
		seqs := make([][]int, o.batch)
		for i := range seqs {
			seqs[i] = prompts[i][p : p+n]
		}
		if cur, err = forward(seqs, true, p+n == plen); err != nil {
			return err
		}
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
		}
		if cur, err = forward(seqs, false, true); err != nil {
			return err
		}
	}
}
