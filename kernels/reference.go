package kernels

import (
	"fmt"
	"math"
)

// Reference runs s on host buffers with plain, obviously correct Go: the
// oracle that every backend and every fast kernel is tested against. It
// accumulates sums in float64 and favours clarity over speed. It calls
// CheckBuffers first, and an Opaque op fails with ErrNotExecutable. The
// inputs are only read; out is overwritten, except by KVAppend, whose out
// may be its cache (input 0) itself.
func Reference(s Spec, in [][]byte, out []byte) error {
	if err := CheckBuffers(s, in, out); err != nil {
		return err
	}
	if done, err := refMoves(s, in, out); done {
		return err
	}
	var x []float32
	if s.InDType(0) == F32 {
		x = AsF32(in[0])
	}
	y := AsF32(out)
	if refElementwise(s, x, in, y) {
		return nil
	}
	switch s.Op {
	case MatMul:
		refMatMul(s.In[0], s.In[1], x, AsF32(in[1]), y)
	case QuantizedMatMul:
		refQMatMul(s, x, in[1], y)
	case Softmax:
		n := lastDim(s.In[0])
		for r := range rows(s.In[0]) {
			refSoftmax(x[r*n:(r+1)*n], y[r*n:(r+1)*n])
		}
	case Attention:
		refAttention(s, x, AsF32(in[1]), AsF32(in[2]), y)
	case RMSNorm:
		refRMSNorm(s, x, AsF32(in[1]), y)
	case LayerNorm:
		refLayerNorm(s, x, AsF32(in[1]), AsF32(in[2]), y)
	case RoPE:
		refRoPE(s, x, y)
	case Transpose:
		refTranspose(s.In[0], x, y)
	case Argmax:
		refArgmax(lastDim(s.In[0]), x, y)
	}
	return nil
}

// refArgmax writes the index of each row's largest value, as a float32:
// the lowest index among equal values (-0 equals +0), NaN never the
// largest, 0 for a row of NaN. This is greedy decoding's token, as a
// host loop keeping the first strictly larger value picks it.
func refArgmax(n int, x, y []float32) {
	for r := range y {
		row := x[r*n : (r+1)*n]
		best := -1
		for j, v := range row {
			if !math.IsNaN(float64(v)) && (best < 0 || v > row[best]) {
				best = j
			}
		}
		y[r] = float32(max(best, 0))
	}
}

// refElementwise runs the ops that map each output element from the
// inputs' elements at the same place (b broadcast for Add and Mul);
// false for every other op.
func refElementwise(s Spec, x []float32, in [][]byte, y []float32) bool {
	switch s.Op {
	case Add, Mul:
		b := AsF32(in[1])
		for i := range y {
			if s.Op == Add {
				y[i] = x[i] + b[i%len(b)]
			} else {
				y[i] = x[i] * b[i%len(b)]
			}
		}
	case Scale:
		for i := range y {
			y[i] = x[i] * s.Params.Scale
		}
	case SiLU:
		for i, v := range x {
			y[i] = float32(refSiLU(float64(v)))
		}
	case GELU:
		for i, v := range x {
			u := float64(v)
			y[i] = float32(0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u))))
		}
	case SwiGLU:
		up := AsF32(in[1])
		for i, v := range x {
			y[i] = float32(refSiLU(float64(v)) * float64(up[i]))
		}
	default:
		return false
	}
	return true
}

// refRMSNorm normalises each row of x by its root mean square, times w.
func refRMSNorm(s Spec, x, w, y []float32) {
	n := len(w)
	for r := range rows(s.In[0]) {
		xs, ys := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
		var ss float64
		for _, v := range xs {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+s.Params.eps())
		for i, v := range xs {
			ys[i] = float32(float64(v) * inv * float64(w[i]))
		}
	}
}

// refLayerNorm normalises each row of x to mean 0 and variance 1, times g
// plus b.
func refLayerNorm(s Spec, x, g, b, y []float32) {
	n := len(g)
	for r := range rows(s.In[0]) {
		xs, ys := x[r*n:(r+1)*n], y[r*n:(r+1)*n]
		var sum float64
		for _, v := range xs {
			sum += float64(v)
		}
		mean := sum / float64(n)
		var vs float64
		for _, v := range xs {
			vs += (float64(v) - mean) * (float64(v) - mean)
		}
		inv := 1 / math.Sqrt(vs/float64(n)+s.Params.eps())
		for i, v := range xs {
			ys[i] = float32((float64(v)-mean)*inv*float64(g[i]) + float64(b[i]))
		}
	}
}

// refTranspose swaps the last two dimensions of sh, batch by batch.
func refTranspose(sh Shape, x, y []float32) {
	r, c := sh[len(sh)-2], sh[len(sh)-1]
	for b := range len(x) / (r * c) {
		for i := range r {
			for j := range c {
				y[b*r*c+j*r+i] = x[b*r*c+i*c+j]
			}
		}
	}
}

func refSiLU(u float64) float64 { return u / (1 + math.Exp(-u)) }

// refMoves runs the ops that move or convert data rather than compute
// (Copy, Dequantize, KVAppend) and rejects Opaque; done is false for
// every other op.
func refMoves(s Spec, in [][]byte, out []byte) (done bool, err error) {
	switch s.Op {
	case Opaque:
		return true, notExecutable(s)
	case Copy:
		copy(out, in[0])
	case Dequantize:
		dequantize(s.DType, AsF32(out), in[0])
	case KVAppend:
		copy(out, in[0]) // a no-op in place
		refKVAppend(s, AsF32(in[1]), AsF32(out))
	case GetRows:
		return true, refGetRows(s, in[0], AsF32(in[1]), AsF32(out))
	default:
		return false, nil
	}
	return true, nil
}

// refGetRows writes row idx[k] of table (s.In[0], of s.DType) as f32 to
// row k of y, once every index is checked to be a row.
func refGetRows(s Spec, table []byte, idx, y []float32) error {
	for k, v := range idx {
		if math.IsNaN(float64(v)) || v < 0 || v >= float32(s.In[0][0]) || math.Trunc(float64(v)) != float64(v) {
			return &SpecError{Op: s.Op, Input: 1, Err: ErrIndex,
				Msg: fmt.Sprintf("index %d is %v, not a row of the table's %d", k, v, s.In[0][0])}
		}
	}
	d := s.In[0][1]
	rb := int(s.DType.RowBytes(int64(d)))
	for k, v := range idx {
		i := int(v)
		dequantize(s.DType, y[k*d:(k+1)*d], table[i*rb:(i+1)*rb])
	}
	return nil
}

// refMatMul computes [B,]M×K · [B,]K×N, B's batch broadcast when it has
// none.
func refMatMul(as, bs Shape, a, b, c []float32) {
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	batch := len(a) / (m * k)
	for t := range batch {
		at, ct := a[t*m*k:], c[t*m*n:]
		bt := b
		if len(bs) == 3 {
			bt = b[t*k*n:]
		}
		for i := range m {
			for j := range n {
				var sum float64
				for p := range k {
					sum += float64(at[i*k+p]) * float64(bt[p*n+j])
				}
				ct[i*n+j] = float32(sum)
			}
		}
	}
}

// refQMatMul computes A·Wᵀ with W decoded one row at a time.
func refQMatMul(s Spec, a []float32, w []byte, c []float32) {
	k, n := lastDim(s.In[0]), s.In[1][0]
	rb := int(s.DType.RowBytes(int64(k)))
	row := make([]float32, k)
	for j := range n {
		dequantize(s.DType, row, w[j*rb:(j+1)*rb])
		for r := range len(a) / k {
			var sum float64
			for p, v := range row {
				sum += float64(a[r*k+p]) * float64(v)
			}
			c[r*n+j] = float32(sum)
		}
	}
}

func refSoftmax(x, y []float32) {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - mx)
	}
	for i, v := range x {
		y[i] = float32(math.Exp(float64(v)-mx) / sum)
	}
}

// refKVAppend writes rows [B, S, H, D] into cache [B, H, C, D] at
// positions Pos to Pos+S-1.
func refKVAppend(s Spec, rows, cache []float32) {
	cs, rs := s.In[0], s.In[1]
	nb, h, c, d, sq := cs[0], cs[1], cs[2], cs[3], rs[1]
	for b := range nb {
		for i := range sq {
			for hh := range h {
				src := ((b*sq+i)*h + hh) * d
				dst := ((b*h+hh)*c + s.Params.Pos + i) * d
				copy(cache[dst:dst+d], rows[src:src+d])
			}
		}
	}
}

// refAttention reads the first s.AttentionKeys() of K and V's T positions.
func refAttention(s Spec, q, k, v, out []float32) {
	qs, ks := s.In[0], s.In[1]
	nb, hq, sq, d := qs[0], qs[1], qs[2], qs[3]
	hkv, t, nk := ks[1], ks[2], s.AttentionKeys()
	scale := s.Params.attnScale(d)
	w := make([]float64, t)
	for b := range nb {
		for h := range hq {
			kh := h / (hq / hkv)
			qb := q[((b*hq+h)*sq)*d:]
			kb := k[((b*hkv+kh)*t)*d:]
			vb := v[((b*hkv+kh)*t)*d:]
			ob := out[((b*hq+h)*sq)*d:]
			for i := range sq {
				keys := nk
				if s.Params.Causal {
					keys = nk - sq + i + 1
				}
				mx := math.Inf(-1)
				for j := range keys {
					var dot float64
					for e := range d {
						dot += float64(qb[i*d+e]) * float64(kb[j*d+e])
					}
					w[j] = dot * scale
					mx = max(mx, w[j])
				}
				var sum float64
				for j := range keys {
					w[j] = math.Exp(w[j] - mx)
					sum += w[j]
				}
				for e := range d {
					var acc float64
					for j := range keys {
						acc += w[j] * float64(vb[j*d+e])
					}
					ob[i*d+e] = float32(acc / sum)
				}
			}
		}
	}
}

func refRoPE(s Spec, x, y []float32) {
	sh := s.In[0]
	r := len(sh)
	t, h, d := sh[r-3], sh[r-2], sh[r-1]
	base := s.Params.ropeBase()
	half := d / 2
	for row := range len(x) / d {
		pos := float64(s.Params.Pos + (row/h)%t)
		xs, ys := x[row*d:(row+1)*d], y[row*d:(row+1)*d]
		for i := range half {
			theta := pos * math.Pow(base, -2*float64(i)/float64(d))
			sin, cos := math.Sincos(theta)
			x1, x2 := float64(xs[i]), float64(xs[i+half])
			ys[i] = float32(x1*cos - x2*sin)
			ys[i+half] = float32(x2*cos + x1*sin)
		}
	}
}
