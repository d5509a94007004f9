package main

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// opStep is one op of a layer: spec, output, inputs.
type opStep struct {
	spec kernels.Spec
	out  backends.Buffer
	in   []backends.Buffer
}

// Forward feeds S tokens of each sequence (seqs[b], all of one length) at
// the current position: a decode step when S is 1, a prompt's micro-batch
// otherwise (every matmul then has B·S rows). It returns the greedy next
// token of each sequence after its last token, and advances the position
// by S. Ops are counted into ops. A micro-batch's activations are
// allocated for it; the attention's query and output are reordered
// between [B, S, heads, headDim] and [B, heads, S, headDim] in host
// memory (the op catalogue has no permute), which a decode step, where
// both are one layout, skips.
func (bt *Batch) Forward(seqs [][]int, ops *int64) ([]int, error) {
	m, B := bt.m, bt.b
	if len(seqs) != B || len(seqs[0]) == 0 {
		return nil, fmt.Errorf("infer: %d sequences for a batch of %d", len(seqs), B)
	}
	S := len(seqs[0])
	if err := bt.fits(S); err != nil {
		return nil, err
	}
	x, err := bt.embed(seqs, S)
	if err != nil {
		return nil, err
	}
	x0 := bt.x0
	var mb *microBatch
	if S > 1 {
		var err error
		if mb, err = bt.newMicroBatch(S); err != nil {
			return nil, err
		}
		defer mb.free()
		x0 = mb.x0
	}
	if _, err := m.be.Write(x0, kernels.AsBytes(x)); err != nil {
		return nil, err
	}
	p, err := bt.body(x0, S, mb, ops)
	if err != nil {
		return nil, err
	}
	return bt.Tokens(p)
}

// Issued is a step whose tokens are on the backend, not read yet.
type Issued struct {
	tokens backends.Buffer // [B]: the step's Argmax
	pos    int             // the step's position
}

// Issue runs a decode step on the tokens the last step wrote where its
// Argmax ran: their embeddings are looked up there (GetRows of the tied
// embedding table), so that nothing waits for the host to read them.
// Only the step's ops are queued; Tokens reads its tokens. A caller that
// issues the next step before it reads this one's keeps the backend busy
// while the host reads, as vLLM's and SGLang's overlapped schedulers do.
// The step after next overwrites this step's tokens, so they must be
// read before it is issued. Ops are counted into ops.
func (bt *Batch) Issue(ops *int64) (Issued, error) {
	m, c, a := bt.m, bt.m.cfg, &bt.arena
	if bt.last < 0 {
		return Issued{}, fmt.Errorf("infer: step %d: no tokens on the backend to decode from: a prompt runs first", bt.pos)
	}
	if err := bt.fits(1); err != nil {
		return Issued{}, err
	}
	a.reset()
	embed := kernels.Spec{Op: kernels.GetRows, DType: kernels.Q8_0, In: a.shapes(a.shape(c.Vocab, c.Dim), a.shape(bt.b))}
	if err := bt.run(embed, bt.x0, m.out, bt.tokens[bt.last]); err != nil {
		return Issued{}, err
	}
	if ops != nil {
		*ops++
	}
	return bt.body(bt.x0, 1, nil, ops)
}

// fits checks that S more positions fit the context, growing the KV
// caches as they need.
func (bt *Batch) fits(S int) error {
	if c := bt.m.cfg; bt.pos+S > c.Ctx {
		return fmt.Errorf("infer: positions %d to %d beyond the context of %d", bt.pos, bt.pos+S-1, c.Ctx)
	}
	return bt.reserve(bt.pos + S)
}

// body runs the layers on x0 (B·S rows) and the head on each sequence's
// last row, the greedy tokens left on the backend, and advances the
// position by S.
func (bt *Batch) body(x0 backends.Buffer, S int, mb *microBatch, ops *int64) (Issued, error) {
	n := int64(0)
	defer func() {
		if ops != nil {
			*ops += n
		}
	}()
	xin := x0
	for li := range bt.m.layers {
		s := &bt.layers[li]
		if mb != nil {
			s = &mb.s
		}
		out, k, err := bt.layer(li, s, mb, xin, S)
		n += k
		if err != nil {
			return Issued{}, err
		}
		xin = out
	}
	last := xin
	if S > 1 {
		if err := bt.lastRows(xin, mb.last, S); err != nil {
			return Issued{}, err
		}
		last = mb.last
	}
	tokens, err := bt.head(last)
	if err != nil {
		return Issued{}, err
	}
	n += 3
	p := Issued{tokens: tokens, pos: bt.pos}
	bt.pos += S
	return p, nil
}

// head runs the final norm, the logits and their Argmax on last ([B,
// Dim]) where the Executor places them, into the tokens buffer the last
// step did not write, which it returns.
func (bt *Batch) head(last backends.Buffer) (backends.Buffer, error) {
	m, c, B := bt.m, bt.m.cfg, bt.b
	a := &bt.arena
	a.reset()
	act := a.shape(B, c.Dim)
	rms := kernels.Spec{Op: kernels.RMSNorm, In: a.shapes(act, a.shape(c.Dim))}
	if err := bt.run(rms, bt.hn, last, m.norm); err != nil {
		return nil, err
	}
	if err := bt.run(a.qmm(act, c.Vocab), bt.logits, bt.hn, m.out); err != nil {
		return nil, err
	}
	next := (bt.last + 1) % len(bt.tokens)
	argmax := kernels.Spec{Op: kernels.Argmax, In: a.shapes(a.shape(B, c.Vocab))}
	if err := bt.run(argmax, bt.tokens[next], bt.logits); err != nil {
		return nil, err
	}
	bt.last = next
	return bt.tokens[next], nil
}

// Tokens reads back the greedy tokens of step p (4·B bytes, not B·Vocab
// logits), waiting for them, and the logits when KeepLogits is set
// (those of the last step issued).
func (bt *Batch) Tokens(p Issued) ([]int, error) {
	m, c, B := bt.m, bt.m.cfg, bt.b
	idx := bt.idx
	if _, err := m.be.Read(kernels.AsBytes(idx), p.tokens); err != nil {
		return nil, err
	}
	if bt.KeepLogits {
		if len(bt.Logits) != B*c.Vocab {
			bt.Logits = make([]float32, B*c.Vocab)
		}
		if _, err := m.be.Read(kernels.AsBytes(bt.Logits), bt.logits); err != nil {
			return nil, err
		}
	}
	next := make([]int, B)
	for i, v := range idx {
		if !(v >= 0 && v < float32(c.Vocab)) || v != float32(int(v)) {
			return nil, fmt.Errorf("infer: step %d: sequence %d's greedy token %v is no index of the vocabulary of %d", p.pos, i, v, c.Vocab)
		}
		next[i] = int(v)
	}
	return next, nil
}

// embed returns the embeddings of seqs' tokens, [B·S, Dim].
func (bt *Batch) embed(seqs [][]int, S int) ([]float32, error) {
	c := bt.m.cfg
	x := make([]float32, len(seqs)*S*c.Dim)
	for i, seq := range seqs {
		if len(seq) != S {
			return nil, fmt.Errorf("infer: sequence %d has %d tokens, sequence 0 %d", i, len(seq), S)
		}
		for s, tok := range seq {
			if tok < 0 || tok >= c.Vocab {
				return nil, fmt.Errorf("infer: token %d outside the vocabulary of %d", tok, c.Vocab)
			}
			copy(x[(i*S+s)*c.Dim:], bt.m.embed[tok*c.Dim:(tok+1)*c.Dim])
		}
	}
	return x, nil
}

// lastRows writes each sequence's last row of xin ([B·S, Dim]) into dst
// ([B, Dim]): only a sequence's last token gives a next token.
func (bt *Batch) lastRows(xin, dst backends.Buffer, S int) error {
	c, B := bt.m.cfg, bt.b
	all := bt.rows(B * S * c.Dim)
	if _, err := bt.m.be.Read(kernels.AsBytes(all), xin); err != nil {
		return err
	}
	rows := make([]float32, B*c.Dim)
	for b := range B {
		copy(rows[b*c.Dim:(b+1)*c.Dim], all[(b*S+S-1)*c.Dim:])
	}
	_, err := bt.m.be.Write(dst, kernels.AsBytes(rows))
	return err
}

// layer runs block li on xin (B·S rows) with activations s, and returns
// its output and the ops it ran.
func (bt *Batch) layer(li int, s *scratch, mb *microBatch, xin backends.Buffer, S int) (backends.Buffer, int64, error) {
	m, c, B, a := bt.m, bt.m.cfg, bt.b, &bt.arena
	a.reset()
	l := &m.layers[li]
	hd, T := c.headDim(), bt.pos+S
	rowsN := B * S
	act := a.shape(rowsN, c.Dim)
	rms := kernels.Spec{Op: kernels.RMSNorm, In: a.shapes(act, a.shape(c.Dim))}
	add := kernels.Spec{Op: kernels.Add, In: a.shapes(act, act)}
	var n int64
	err := bt.runOps(&n,
		opStep{rms, s.h, a.in(xin, l.attnNorm)},
		opStep{a.qmm(act, c.Dim), s.q, a.in(s.h, l.wq)},
		opStep{a.qmm(act, c.kvDim()), s.k, a.in(s.h, l.wk)},
		opStep{a.qmm(act, c.kvDim()), s.v, a.in(s.h, l.wv)},
		opStep{kernels.Spec{Op: kernels.RoPE, In: a.shapes(a.shape(B, S, c.Heads, hd)), Params: kernels.Params{Pos: bt.pos}}, s.qr, a.in(s.q)},
		opStep{kernels.Spec{Op: kernels.RoPE, In: a.shapes(a.shape(B, S, c.KVHeads, hd)), Params: kernels.Params{Pos: bt.pos}}, s.kr, a.in(s.k)},
	)
	if err != nil {
		return nil, n, err
	}
	// This step's keys and values join the layer's caches in place, where
	// the backend that runs KVAppend holds them (no copy through the
	// host); the attention reads their first T positions.
	cache := a.shape(B, c.KVHeads, bt.kvCap, hd)
	kvApp := kernels.Spec{Op: kernels.KVAppend, In: a.shapes(cache, a.shape(B, S, c.KVHeads, hd)), Params: kernels.Params{Pos: bt.pos}}
	kc, vc := bt.kc[li], bt.vc[li]
	if err := bt.runOps(&n, opStep{kvApp, kc, a.in(kc, s.kr)}, opStep{kvApp, vc, a.in(vc, s.v)}); err != nil {
		return nil, n, err
	}
	q, att := s.qr, s.att
	if mb != nil {
		if err := bt.permute(s.qr, mb.qt, S, c.Heads, hd, false); err != nil {
			return nil, n, err
		}
		q, att = mb.qt, mb.attT
	}
	attn := kernels.Spec{Op: kernels.Attention, In: a.shapes(a.shape(B, c.Heads, S, hd), cache, cache),
		Params: kernels.Params{Causal: true, Keys: T}}
	if err := bt.runOps(&n, opStep{attn, att, a.in(q, kc, vc)}); err != nil {
		return nil, n, err
	}
	if mb != nil {
		if err := bt.permute(mb.attT, s.att, S, c.Heads, hd, true); err != nil {
			return nil, n, err
		}
	}
	err = bt.runOps(&n,
		opStep{a.qmm(act, c.Dim), s.o, a.in(s.att, l.wo)},
		opStep{add, s.x1, a.in(xin, s.o)},
		opStep{rms, s.h2, a.in(s.x1, l.ffnNorm)},
	)
	if err != nil {
		return nil, n, err
	}
	if len(l.experts) > 0 {
		k, err := bt.moeFFN(li, s, rowsN)
		n += k
		if err != nil {
			return nil, n, err
		}
	} else if err := bt.ffn(li, s, rowsN, &n); err != nil {
		return nil, n, err
	}
	if err := bt.runOps(&n, opStep{add, s.x2, a.in(s.x1, s.d)}); err != nil {
		return nil, n, err
	}
	return s.x2, n, nil
}

// runOps runs steps in order, counting each into n.
func (bt *Batch) runOps(n *int64, steps ...opStep) error {
	for _, st := range steps {
		if err := bt.run(st.spec, st.out, st.in...); err != nil {
			return err
		}
		*n++
	}
	return nil
}

// ffn runs block li's feed-forward network on s.h2 into s.d, counting
// its ops into n.
func (bt *Batch) ffn(li int, s *scratch, rowsN int, n *int64) error {
	c, l, a := bt.m.cfg, &bt.m.layers[li], &bt.arena
	act, ffAct := a.shape(rowsN, c.Dim), a.shape(rowsN, c.FFN)
	return bt.runOps(n,
		opStep{a.qmm(act, c.FFN), s.g, a.in(s.h2, l.w1)},
		opStep{a.qmm(act, c.FFN), s.u, a.in(s.h2, l.w3)},
		opStep{kernels.Spec{Op: kernels.SwiGLU, In: a.shapes(ffAct, ffAct)}, s.sw, a.in(s.g, s.u)},
		opStep{a.qmm(ffAct, c.Dim), s.d, a.in(s.sw, l.w2)},
	)
}

// opArena holds the shapes and input lists of a layer's ops, reused
// layer to layer and step to step: a backend's Run keeps none of them
// past its return (the Executor copies what its queued work and lineage
// keep), so that a decode step allocates none (BenchmarkForwardHost).
// Growing it leaves the slices handed out before intact.
type opArena struct {
	bufs  []backends.Buffer
	dims  []int
	lists []kernels.Shape
}

// reset makes the arena's storage free for the next layer's ops.
func (a *opArena) reset() {
	clear(a.bufs)
	a.bufs, a.dims, a.lists = a.bufs[:0], a.dims[:0], a.lists[:0]
}

// in returns the input list bs in the arena.
func (a *opArena) in(bs ...backends.Buffer) []backends.Buffer {
	n := len(a.bufs)
	a.bufs = append(a.bufs, bs...)
	return a.bufs[n:len(a.bufs):len(a.bufs)]
}

// shape returns the shape dims in the arena.
func (a *opArena) shape(dims ...int) kernels.Shape {
	n := len(a.dims)
	a.dims = append(a.dims, dims...)
	return kernels.Shape(a.dims[n:len(a.dims):len(a.dims)])
}

// shapes returns the list of input shapes ss in the arena.
func (a *opArena) shapes(ss ...kernels.Shape) []kernels.Shape {
	n := len(a.lists)
	a.lists = append(a.lists, ss...)
	return a.lists[n:len(a.lists):len(a.lists)]
}

// qmm is the Q8_0 matmul of activations in by a weight of rows rows.
func (a *opArena) qmm(in kernels.Shape, rows int) kernels.Spec {
	return kernels.Spec{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: a.shapes(in, a.shape(rows, in[1]))}
}

// permute copies src, [B, S, H, hd] (back: [B, H, S, hd]), into dst in
// the other layout, through host memory.
func (bt *Batch) permute(src, dst backends.Buffer, S, H, hd int, back bool) error {
	B := bt.b
	n := B * S * H * hd
	in := make([]float32, n)
	if _, err := bt.m.be.Read(kernels.AsBytes(in), src); err != nil {
		return err
	}
	out := bt.rows(n)
	for b := range B {
		for s := range S {
			for h := range H {
				bsh := ((b*S+s)*H + h) * hd
				bhs := ((b*H+h)*S + s) * hd
				if back {
					copy(out[bsh:bsh+hd], in[bhs:bhs+hd])
				} else {
					copy(out[bhs:bhs+hd], in[bsh:bsh+hd])
				}
			}
		}
	}
	_, err := bt.m.be.Write(dst, kernels.AsBytes(out))
	return err
}

// microBatch is the activations of one prompt micro-batch of S tokens per
// sequence, shared by the layers (each layer's ops wait for the last
// layer's reads of them).
type microBatch struct {
	s                  scratch
	x0, qt, attT, last backends.Buffer
}

func (bt *Batch) newMicroBatch(S int) (*microBatch, error) {
	c, be := bt.m.cfg, bt.m.be
	mb := &microBatch{}
	var err error
	f32 := func(n int) backends.Buffer {
		if err != nil {
			return nil
		}
		var buf backends.Buffer
		buf, err = be.Alloc(int64(4 * n))
		return buf
	}
	r := bt.b * S
	d, kv, ff := r*c.Dim, r*c.kvDim(), r*c.FFN
	mb.s = scratch{h: f32(d), q: f32(d), k: f32(kv), v: f32(kv), qr: f32(d), kr: f32(kv), att: f32(d), o: f32(d),
		x1: f32(d), h2: f32(d), g: f32(ff), u: f32(ff), sw: f32(ff), d: f32(d), x2: f32(d)}
	mb.x0, mb.qt, mb.attT, mb.last = f32(d), f32(d), f32(d), f32(bt.b*c.Dim)
	if err != nil {
		mb.free()
		return nil, err
	}
	return mb, nil
}

func (mb *microBatch) free() {
	s := &mb.s
	for _, b := range []backends.Buffer{s.h, s.q, s.k, s.v, s.qr, s.kr, s.att, s.o, s.x1, s.h2, s.g, s.u, s.sw, s.d, s.x2,
		mb.x0, mb.qt, mb.attT, mb.last} {
		if b != nil {
			b.Free()
		}
	}
}
