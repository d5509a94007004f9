package kernels

// The CPU's row kernels: each opTask method computes a range of rows
// (query rows, normalised rows, rotated heads, tiles, blocks, elements)
// of one op, as CPU.Run hands them out over its Pool.

import "math"

// attention computes query rows [lo, hi), a row being (batch, head, i).
func (t *opTask) attention(lo, hi int) {
	d, sq, tk, nk := t.d, t.sq, t.t, t.keys
	group := t.hq / t.hkv
	sp := getScratch(tk)
	w := *sp
	for r := lo; r < hi; r++ {
		i := r % sq
		bh := r / sq
		b, h := bh/t.hq, bh%t.hq
		kv := (b*t.hkv + h/group) * tk * d
		keys := nk
		if t.p.Causal {
			keys = nk - sq + i + 1
		}
		qr := t.x[r*d : (r+1)*d]
		mx := float32(math.Inf(-1))
		for j := range keys {
			s := dot(qr, t.w[kv+j*d:kv+(j+1)*d]) * t.scale
			w[j] = s
			mx = max(mx, s)
		}
		var sum float32
		for j := range keys {
			e := expf(w[j] - mx)
			w[j] = e
			sum += e
		}
		o := t.y[r*d : (r+1)*d]
		clear(o)
		for j := range keys {
			axpy(w[j], t.v[kv+j*d:kv+(j+1)*d], o)
		}
		inv := 1 / sum
		for e := range o {
			o[e] *= inv
		}
	}
	scratchPool.Put(sp)
}

// kvAppend copies rows lo to hi of the new rows, [B, S, H, D] flattened
// to rows of D, into the cache [B, H, C, D] at position Pos+s.
func (t *opTask) kvAppend(lo, hi int) {
	d, sq, h := t.d, t.sq, t.hkv
	for r := lo; r < hi; r++ {
		hh, i, b := r%h, (r/h)%sq, r/(h*sq)
		dst := ((b*h+hh)*t.t + t.p.Pos + i) * d
		copy(t.y[dst:dst+d], t.w[r*d:(r+1)*d])
	}
}

func (t *opTask) softmax(lo, hi int) {
	n := t.n
	for r := lo; r < hi; r++ {
		x, y := t.x[r*n:(r+1)*n], t.y[r*n:(r+1)*n]
		mx := x[0]
		for _, v := range x {
			mx = max(mx, v)
		}
		var sum float32
		for i, v := range x {
			e := expf(v - mx)
			y[i] = e
			sum += e
		}
		inv := 1 / sum
		for i := range y {
			y[i] *= inv
		}
	}
}

// argmax writes the index of rows [lo, hi)'s largest value (the lowest
// of equal ones; NaN skipped, a row of NaN gives 0), as refArgmax.
func (t *opTask) argmax(lo, hi int) {
	n := t.n
	for r := lo; r < hi; r++ {
		x := t.x[r*n : (r+1)*n]
		best, bv := 0, float32(math.NaN())
		for j, v := range x {
			if v > bv || (bv != bv && v == v) {
				best, bv = j, v
			}
		}
		t.y[r] = float32(best)
	}
}

// getRows writes table rows t.w[lo:hi] (indices checked) as f32.
func (t *opTask) getRows(lo, hi int) {
	n, rb := t.n, int(t.dt.RowBytes(int64(t.n)))
	for r := lo; r < hi; r++ {
		i := int(t.w[r])
		dequantize(t.dt, t.y[r*n:(r+1)*n], t.raw[i*rb:(i+1)*rb])
	}
}

func (t *opTask) rmsNorm(lo, hi int) {
	n := t.n
	eps := float32(t.p.eps())
	for r := lo; r < hi; r++ {
		x, y := t.x[r*n:(r+1)*n], t.y[r*n:(r+1)*n]
		inv := float32(1 / math.Sqrt(float64(dot(x, x)/float32(n)+eps)))
		w := t.w[:len(x)]
		for i, v := range x {
			y[i] = v * inv * w[i]
		}
	}
}

func (t *opTask) layerNorm(lo, hi int) {
	n := t.n
	eps := float32(t.p.eps())
	for r := lo; r < hi; r++ {
		x, y := t.x[r*n:(r+1)*n], t.y[r*n:(r+1)*n]
		var sum float32
		for _, v := range x {
			sum += v
		}
		mean := sum / float32(n)
		var vs float32
		for _, v := range x {
			vs += (v - mean) * (v - mean)
		}
		inv := float32(1 / math.Sqrt(float64(vs/float32(n)+eps)))
		g, b := t.w[:len(x)], t.v[:len(x)]
		for i, v := range x {
			y[i] = (v-mean)*inv*g[i] + b[i]
		}
	}
}

// rope precomputes the frequencies once per call, then rotates rows of
// H heads in parallel (one item is one position of one batch).
func (c *CPU) rope(t *opTask, sh Shape) {
	r := len(sh)
	tl, d := sh[r-3], sh[r-1]
	t.heads, t.d, t.t = sh[r-2], d, tl
	tp := thetaPool.Get().(*[]float64)
	if cap(*tp) < d/2 {
		*tp = make([]float64, d/2)
	}
	t.theta = (*tp)[:d/2]
	base := t.p.ropeBase()
	for i := range t.theta {
		t.theta[i] = math.Pow(base, -2*float64(i)/float64(d))
	}
	c.par(len(t.x)/(t.heads*d), t.heads*d*3, t)
	thetaPool.Put(tp)
}

func (t *opTask) rope(lo, hi int) {
	d, half := t.d, t.d/2
	sp := getScratch(d)
	cs := *sp
	cos, sin := cs[:half], cs[half:]
	for row := lo; row < hi; row++ {
		pos := float64(t.p.Pos + row%t.t)
		for i, th := range t.theta {
			s, c := math.Sincos(pos * th)
			cos[i], sin[i] = float32(c), float32(s)
		}
		for h := range t.heads {
			o := (row*t.heads + h) * d
			x, y := t.x[o:o+d], t.y[o:o+d]
			x1, x2 := x[:half], x[half:]
			y1, y2 := y[:half], y[half:]
			for i := range half {
				a, b := x1[i], x2[i]
				y1[i] = a*cos[i] - b*sin[i]
				y2[i] = b*cos[i] + a*sin[i]
			}
		}
	}
	scratchPool.Put(sp)
}

// transposeTile is the side of the square tiles a transpose copies: 16
// floats are one cache line, so each output row segment of a tile is one
// whole line written at once, and the tile's 16 input lines stay in L1.
// Writing a tile column by column (input rows strided) measured several
// times faster than row by row on 4096-wide matrices, whose power-of-two
// stride makes strided writes conflict in the cache.
const transposeTile = 16

// transpose handles strips [lo, hi): strip s is input rows
// [16·(s mod strips), +16) of matrix s / strips.
func (t *opTask) transpose(lo, hi int) {
	r, c := t.rows, t.n
	strips := (r + transposeTile - 1) / transposeTile
	for s := lo; s < hi; s++ {
		b := s / strips
		i0 := s % strips * transposeTile
		i1 := min(i0+transposeTile, r)
		x, y := t.x[b*r*c:(b+1)*r*c], t.y[b*r*c:(b+1)*r*c]
		for j := range c {
			yr := y[j*r+i0 : j*r+i1]
			for i := range yr {
				yr[i] = x[(i0+i)*c+j]
			}
		}
	}
}

// dequantize decodes blocks (quantized) or values (f16) [lo, hi).
func (t *opTask) dequantize(lo, hi int) {
	switch t.dt {
	case Q8_0:
		for b := lo; b < hi; b++ {
			dequantQ8Block(t.y[b*QK:(b+1)*QK], t.raw[b*q8Block:(b+1)*q8Block])
		}
	case Q4_0:
		for b := lo; b < hi; b++ {
			dequantQ4Block(t.y[b*QK:(b+1)*QK], t.raw[b*q4Block:(b+1)*q4Block])
		}
	default:
		dequantize(t.dt, t.y[lo:hi], t.raw[t.dt.RowBytes(int64(lo)):t.dt.RowBytes(int64(hi))])
	}
}

// elementwise runs Add, Mul, Scale, SiLU, GELU and SwiGLU on [lo, hi).
func (t *opTask) elementwise(lo, hi int) {
	x, y := t.x[lo:hi], t.y[lo:hi]
	switch t.op {
	case Add, Mul:
		// b repeats every n elements: walk it in runs, not with i % n.
		n := t.n
		for i := 0; i < len(y); {
			j := (lo + i) % n
			run := min(n-j, len(y)-i)
			xs, ys, bs := x[i:i+run], y[i:i+run], t.w[j:j+run]
			if t.op == Add {
				for e := range ys {
					ys[e] = xs[e] + bs[e]
				}
			} else {
				for e := range ys {
					ys[e] = xs[e] * bs[e]
				}
			}
			i += run
		}
	case Scale:
		a := t.p.Scale
		for i, v := range x {
			y[i] = v * a
		}
	case SiLU:
		for i, v := range x {
			y[i] = sigmoidMul(v, v)
		}
	case GELU:
		for i, v := range x {
			y[i] = geluTanh(v)
		}
	case SwiGLU:
		up := t.w[lo:hi]
		for i, v := range x {
			y[i] = sigmoidMul(v, v) * up[i]
		}
	}
}
