package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// router picks each token's experts: in proportion to a routing's counts
// per layer (sim.Routing: a file's, or a Zipf skew), switching to a
// second routing once drift is set (-routing-drift).
type router struct {
	rng   *rand.Rand
	cur   sim.Routing
	next  *sim.Routing // the drift's routing, from the request at switchAt on
	at    int
	topK  int
	picks []int
}

// pick returns the experts of one token at layer l.
func (r *router) pick(l int) []int {
	r.picks = r.cur.Pick(r.rng, l, r.topK, r.picks)
	return r.picks
}

// request notes that request req starts: the drift's routing takes over
// from its request on.
func (r *router) request(req int) {
	if r.next != nil && req >= r.at {
		r.cur, r.next = *r.next, nil
	}
}

// moeFFN runs block li's mixture of experts on s.h2 (rows tokens) into
// s.d: each token's top-K experts (the router's) each run on the rows
// routed to them, the outputs averaged. Rows are gathered for each expert
// and its output scattered back in host memory (no gather kernel in the
// op catalogue); an expert no token picked runs nothing.
//
// Rule: every expert is issued before any output is read, and by
// projection: every expert's gate, then every up, every SwiGLU, every
// down, as ggml's graph of mul_mat_id nodes runs them. Reason: experts
// placed on different backends then run at once (TestMoEExpertsOverlap;
// reading each before issuing the next ran them one after another), and
// each op is decided with the layer's other experts already in the GPU's
// queue, which sends some of them to the CPU (TestMoEByProjection). Issued
// expert by expert, each expert's down projection waited for its own
// SwiGLU and the GPU's queue held at most about two projections when one
// was decided: at -moe 8,2, batch 4, igpu with cpu2, every expert ran on
// the GPU in the steps looked at, and auto reached 1.10× the GPU alone
// against 1.22× (BENCHMARKS.md).
func (bt *Batch) moeFFN(li int, s *scratch, rows int) (int64, error) {
	c, be, l := bt.m.cfg, bt.m.be, &bt.m.layers[li]
	if bt.route == nil {
		return 0, fmt.Errorf("infer: a mixture of experts without a router")
	}
	h := make([]float32, rows*c.Dim)
	if _, err := be.Read(kernels.AsBytes(h), s.h2); err != nil {
		return 0, err
	}
	routed := make([][]int, len(l.experts))
	for r := range rows {
		for _, x := range bt.route.pick(li) {
			routed[x] = append(routed[x], r)
		}
	}
	var runs []expertRun
	defer func() {
		for _, r := range runs {
			r.free()
		}
	}()
	var ops [][expertOps]opStep
	for x, rs := range routed {
		if len(rs) == 0 {
			continue
		}
		r, st, err := bt.prepareExpert(&l.experts[x], h, rs)
		runs = append(runs, r)
		if err != nil {
			return 0, err
		}
		ops = append(ops, st)
	}
	n := int64(0)
	for k := range expertOps {
		for _, st := range ops {
			if err := bt.run(st[k].spec, st[k].out, st[k].in...); err != nil {
				return n, err
			}
			n++
		}
	}
	sum := make([]float32, rows*c.Dim)
	w := 1 / float32(c.TopK)
	for _, r := range runs {
		out := make([]float32, len(r.rows)*c.Dim)
		if _, err := be.Read(kernels.AsBytes(out), r.out); err != nil {
			return n, err
		}
		for i, row := range r.rows {
			dst, src := sum[row*c.Dim:(row+1)*c.Dim], out[i*c.Dim:(i+1)*c.Dim]
			for j := range dst {
				dst[j] += w * src[j]
			}
		}
	}
	_, err := be.Write(s.d, kernels.AsBytes(sum))
	return n, err
}

// expertRun is one expert issued on its rows: its buffers (out among
// them), freed once its output is read.
type expertRun struct {
	rows []int
	bufs []backends.Buffer
	out  backends.Buffer
}

func (r expertRun) free() {
	for _, b := range r.bufs {
		b.Free()
	}
}

// expertOps is the ops of one expert's FFN: gate, up, SwiGLU, down.
const expertOps = 4

// prepareExpert writes the rows rs of h for one expert's FFN and returns
// its ops, in order, to run them, their output [len(rs), Dim] in the
// run's out. On an error the run holds what it allocated, for the caller
// to free.
func (bt *Batch) prepareExpert(x *expert, h []float32, rs []int) (expertRun, [expertOps]opStep, error) {
	c, be := bt.m.cfg, bt.m.be
	n := len(rs)
	in := make([]float32, n*c.Dim)
	for i, r := range rs {
		copy(in[i*c.Dim:(i+1)*c.Dim], h[r*c.Dim:(r+1)*c.Dim])
	}
	run := expertRun{rows: rs}
	alloc := func(floats int) (backends.Buffer, error) {
		b, err := be.Alloc(int64(4 * floats))
		if err == nil {
			run.bufs = append(run.bufs, b)
		}
		return b, err
	}
	xin, err := alloc(n * c.Dim)
	if err != nil {
		return run, [expertOps]opStep{}, err
	}
	if _, err := be.Write(xin, kernels.AsBytes(in)); err != nil {
		return run, [expertOps]opStep{}, err
	}
	g, err1 := alloc(n * c.FFN)
	u, err2 := alloc(n * c.FFN)
	sw, err3 := alloc(n * c.FFN)
	d, err4 := alloc(n * c.Dim)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return run, [expertOps]opStep{}, err
		}
	}
	act, ffAct := kernels.Shape{n, c.Dim}, kernels.Shape{n, c.FFN}
	qmm := func(in kernels.Shape, rows int) kernels.Spec {
		return kernels.Spec{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{in, {rows, in[1]}}}
	}
	run.out = d
	return run, [expertOps]opStep{
		{qmm(act, c.FFN), g, []backends.Buffer{xin, x.w1}},
		{qmm(act, c.FFN), u, []backends.Buffer{xin, x.w3}},
		{kernels.Spec{Op: kernels.SwiGLU, In: []kernels.Shape{ffAct, ffAct}}, sw, []backends.Buffer{g, u}},
		{qmm(ffAct, c.Dim), d, []backends.Buffer{sw, x.w2}},
	}, nil
}

// moeRouting is -moe's routing: the first, and the drift's from request
// driftAt on (driftAt < 0: none).
type moeRouting struct {
	first, drift sim.Routing
	driftAt      int
}

// parseMoE reads -moe E,K into the model config and the routing flags:
// -routing FILE (read by readRouting), else a Zipf skew of -zipf, and
// -routing-drift FILE@F.
func (o *options) parseMoE() error {
	if o.moe == "" {
		if o.routingFile != "" || o.drift != "" {
			return fmt.Errorf("infer: -routing and -routing-drift need -moe E,K")
		}
		return nil
	}
	var e, k int
	if n, err := fmt.Sscanf(o.moe, "%d,%d", &e, &k); err != nil || n != 2 || e < 1 || k < 1 || k > e || e > maxExperts || fmt.Sprintf("%d,%d", e, k) != o.moe {
		return fmt.Errorf("infer: -moe %q: want E,K with 1 <= K <= E <= %d (8,2: 8 experts, the top 2 per token)", o.moe, maxExperts)
	}
	o.model.Experts, o.model.TopK = e, k
	if o.routingFile == "" {
		var err error
		if o.routing.first, err = sim.ZipfRouting(o.model.Layers, e, o.zipf, o.model.Seed); err != nil {
			return fmt.Errorf("infer: -zipf: %w", err)
		}
	}
	o.routing.driftAt = -1
	if o.drift == "" {
		return nil
	}
	at := strings.LastIndex(o.drift, "@")
	if at < 0 {
		return fmt.Errorf("infer: -routing-drift %q: want FILE@F, F the fraction of the requests after which FILE routes", o.drift)
	}
	f, err := strconv.ParseFloat(o.drift[at+1:], 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return fmt.Errorf("infer: -routing-drift %q: %q is not a fraction from 0 to 1", o.drift, o.drift[at+1:])
	}
	if o.requests == 0 {
		return fmt.Errorf("infer: -routing-drift needs -requests N (a fraction of a run without end)")
	}
	o.driftFile, o.routing.driftAt = o.drift[:at], int(f*float64(o.requests))
	return nil
}

// readRouting reads the files of -routing and -routing-drift, whose
// layers and experts must be the model's. Their errors are bad input, not
// bad flags: exit status 1, as replay's for a bad trace or table
// (TestRoutingFileErrors); run calls it before any file is written
// (TestBadFlagKeepsTrace).
func (o *options) readRouting() error {
	var err error
	if o.routingFile != "" {
		if o.routing.first, err = sim.ReadRouting(o.routingFile, o.model.Layers, o.model.Experts); err != nil {
			return fmt.Errorf("infer: -routing: %w", err)
		}
	}
	if o.driftFile != "" {
		if o.routing.drift, err = sim.ReadRouting(o.driftFile, o.model.Layers, o.model.Experts); err != nil {
			return fmt.Errorf("infer: -routing-drift: %w", err)
		}
	}
	return nil
}

// newRouter returns the router of o's routing, seeded by the model's seed.
func (r moeRouting) newRouter(topK int, seed uint64) *router {
	rt := &router{rng: rand.New(rand.NewPCG(seed, 0x6d6f65)), cur: r.first, topK: topK}
	if r.driftAt >= 0 {
		d := r.drift
		rt.next, rt.at = &d, r.driftAt
	}
	return rt
}
