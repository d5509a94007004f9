package kernels

import "math"

// The shape rules of each op (Spec.Validate), one function per op that
// has any.

// validateShapes checks s's shapes against its op's rules, then its
// params.
func (s Spec) validateShapes() error {
	var err error
	switch s.Op {
	case MatMul:
		err = s.checkMatMul()
	case QuantizedMatMul:
		err = s.checkQuantizedMatMul()
	case Dequantize, Copy:
		if s.DType.Quantized() && s.last(0)%QK != 0 {
			err = specErr(s.Op, 0, "last dimension %d is not a multiple of the %v block (%d)", s.last(0), s.DType, QK)
		}
	case Attention:
		err = s.checkAttention()
	case Add, Mul:
		a, b := s.In[0], s.In[1]
		if len(b) > len(a) || !Shape(a[len(a)-len(b):]).Equal(b) {
			err = specErr(s.Op, 1, "shape %v neither equals nor broadcasts to input 0's %v", b, a)
		}
	case SwiGLU:
		if !s.In[0].Equal(s.In[1]) {
			err = specErr(s.Op, 1, "shape %v does not match input 0's %v", s.In[1], s.In[0])
		}
	case RMSNorm, LayerNorm:
		err = s.checkNorm()
	case RoPE:
		err = s.checkRoPE()
	case Transpose:
		err = s.rank(0, 2, MaxRank)
	case KVAppend:
		err = s.checkKVAppend()
	case Argmax:
		err = s.checkArgmax()
	case GetRows:
		err = s.checkGetRows()
	}
	if err != nil {
		return err
	}
	return s.checkParams()
}

// rank checks that input i has rank lo to hi.
func (s Spec) rank(i, lo, hi int) error {
	if r := len(s.In[i]); r < lo || r > hi {
		if lo == hi {
			return specErr(s.Op, i, "rank %d, want %d", r, lo)
		}
		return specErr(s.Op, i, "rank %d, want %d to %d", r, lo, hi)
	}
	return nil
}

// last returns input i's last dimension.
func (s Spec) last(i int) int { return s.In[i][len(s.In[i])-1] }

// checkMatMul: ranks 2 or 3, inner dimensions and batches that match.
func (s Spec) checkMatMul() error {
	if err := s.rank(0, 2, 3); err != nil {
		return err
	}
	if err := s.rank(1, 2, 3); err != nil {
		return err
	}
	a, b := s.In[0], s.In[1]
	k := a[len(a)-1]
	if kb := b[len(b)-2]; kb != k {
		return specErr(s.Op, 1, "inner dimension %d does not match input 0's %d", kb, k)
	}
	if len(b) == 3 && (len(a) != 3 || a[0] != b[0]) {
		return specErr(s.Op, 1, "batch dimension %d does not match input 0 (%v)", b[0], a)
	}
	return nil
}

// checkQuantizedMatMul: a [N, K] weight whose K matches the activations'
// and is a whole number of blocks.
func (s Spec) checkQuantizedMatMul() error {
	if err := s.rank(0, 2, 3); err != nil {
		return err
	}
	if err := s.rank(1, 2, 2); err != nil {
		return err
	}
	k := s.last(0)
	if s.In[1][1] != k {
		return specErr(s.Op, 1, "inner dimension %d does not match input 0's %d", s.In[1][1], k)
	}
	if k%QK != 0 {
		return specErr(s.Op, 1, "inner dimension %d is not a multiple of the %v block (%d)", k, s.DType, QK)
	}
	return nil
}

// checkAttention: rank-4 queries, keys and values, keys shaped as
// values, matching batch and head dimension, KV heads dividing query
// heads, and no more queries than keys when causal.
func (s Spec) checkAttention() error {
	for i := range 3 {
		if err := s.rank(i, 4, 4); err != nil {
			return err
		}
	}
	q, k, v := s.In[0], s.In[1], s.In[2]
	switch {
	case !k.Equal(v):
		return specErr(s.Op, 2, "shape %v does not match keys %v", v, k)
	case k[0] != q[0]:
		return specErr(s.Op, 1, "batch dimension %d does not match queries' %d", k[0], q[0])
	case k[3] != q[3]:
		return specErr(s.Op, 1, "head dimension %d does not match queries' %d", k[3], q[3])
	case q[1]%k[1] != 0:
		return specErr(s.Op, 1, "%d KV heads do not divide %d query heads", k[1], q[1])
	case s.Params.Keys < 0 || s.Params.Keys > k[2]:
		return specErr(s.Op, 1, "%d keys in use, want 0 (all) to %d", s.Params.Keys, k[2])
	case s.Params.Causal && q[2] > s.AttentionKeys():
		return specErr(s.Op, 0, "causal: %d queries exceed %d keys", q[2], s.AttentionKeys())
	}
	return nil
}

// checkKVAppend: a rank-4 cache [B, H, C, D] and new rows [B, S, H, D]
// of the same batch, heads and head dimension, written at positions Pos
// to Pos+S-1 within C.
func (s Spec) checkKVAppend() error {
	for i := range 2 {
		if err := s.rank(i, 4, 4); err != nil {
			return err
		}
	}
	c, r := s.In[0], s.In[1]
	switch {
	case r[0] != c[0] || r[2] != c[1] || r[3] != c[3]:
		return specErr(s.Op, 1, "rows %v do not match the cache %v ([B, S, H, D] for [B, H, C, D])", r, c)
	case !s.PosFits():
		return specErr(s.Op, 1, "%d rows at position %d outside the cache's %d positions", r[1], s.Params.Pos, c[2])
	}
	return nil
}

// MaxArgmaxRow is the longest row Argmax takes: its indices are written
// as float32, whose integers are exact up to 2^24.
const MaxArgmaxRow = 1 << 24

// checkArgmax: rank 2 or more (the output keeps the leading dimensions),
// rows no longer than MaxArgmaxRow.
func (s Spec) checkArgmax() error {
	if err := s.rank(0, 2, MaxRank); err != nil {
		return err
	}
	if n := s.last(0); n > MaxArgmaxRow {
		return specErr(s.Op, 0, "last dimension %d above 2^24: its indices would not be exact as float32", n)
	}
	return nil
}

// checkGetRows: a table [V, D] (rows of s.DType, D a whole number of
// blocks when quantized) of at most MaxArgmaxRow rows, so that every row
// has an exact float32 index, and indices of rank 1 to MaxRank-1 (the
// output appends D).
func (s Spec) checkGetRows() error {
	if err := s.rank(0, 2, 2); err != nil {
		return err
	}
	if err := s.rank(1, 1, MaxRank-1); err != nil {
		return err
	}
	switch v, d := s.In[0][0], s.In[0][1]; {
	case s.DType.Quantized() && d%QK != 0:
		return specErr(s.Op, 0, "row of %d is not a multiple of the %v block (%d)", d, s.DType, QK)
	case v > MaxArgmaxRow:
		return specErr(s.Op, 0, "%d rows above 2^24: their indices would not be exact as float32", v)
	}
	return nil
}

// checkNorm: every input after the first is a vector of input 0's last
// dimension.
func (s Spec) checkNorm() error {
	for i := 1; i < len(s.In); i++ {
		if len(s.In[i]) != 1 || s.In[i][0] != s.last(0) {
			return specErr(s.Op, i, "shape %v, want [%d] (input 0's last dimension)", s.In[i], s.last(0))
		}
	}
	return nil
}

// checkRoPE: rank 3 or 4, an even head dimension, positions Pos to
// Pos+T-1 neither negative nor past math.MaxInt, where a kernel's
// Pos+row would wrap to a negative position (TestValidateRejects).
func (s Spec) checkRoPE() error {
	if err := s.rank(0, 3, 4); err != nil {
		return err
	}
	if s.last(0)%2 != 0 {
		return specErr(s.Op, 0, "head dimension %d is odd", s.last(0))
	}
	if !s.PosFits() {
		return specErr(s.Op, -1, "position %d of %d rows is negative or overflows int", s.Params.Pos, s.In[0][len(s.In[0])-3])
	}
	return nil
}

// PosFits reports whether s's Params.Pos is one its shapes allow: not
// negative; a KVAppend's rows within the cache (Pos+S ≤ C, compared so
// that it cannot overflow); a RoPE's positions Pos to Pos+T-1 within int.
// Shapes of another rank are Validate's to reject: any Pos fits them.
// Validate applies it, and a cache that keys specs without Pos (a decode
// loop's position changes every token) asks it apart (adaptive's shape
// cache).
func (s *Spec) PosFits() bool {
	in, pos := s.In, s.Params.Pos
	switch {
	case pos < 0:
		return false
	case s.Op == KVAppend && len(in) == 2 && len(in[0]) == 4 && len(in[1]) == 4:
		return pos <= in[0][2]-in[1][1]
	case s.Op == RoPE && len(in) == 1 && len(in[0]) >= 3:
		return pos <= math.MaxInt-(in[0][len(in[0])-3]-1)
	}
	return true
}

// checkParams: finite params, eps and rope base not negative, an opaque
// op's work not negative.
func (s Spec) checkParams() error {
	if p := s.Params; isBad(p.Scale) || isBad(p.Eps) || isBad(p.RopeBase) || p.Eps < 0 || p.RopeBase < 0 {
		return specErr(s.Op, -1, "params must be finite and eps, rope base non-negative")
	}
	if s.Op == Opaque && (s.Params.FLOPs < 0 || s.Params.Bytes < 0) {
		return specErr(s.Op, -1, "negative work (flops %d, bytes %d)", s.Params.FLOPs, s.Params.Bytes)
	}
	return nil
}
