package kernels

import "math"

// F16FromFloat32 converts f to IEEE 754 binary16 bits, rounding to nearest
// with ties to even. Values beyond the largest half (65504, plus half an
// ulp) become infinities, values below half the smallest subnormal (2^-25)
// become signed zeros, and NaNs stay NaNs (quiet, with the top of their
// payload kept). Written by hand: the standard library has no float16.
func F16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		// Normal: round the 23-bit mantissa to 10 bits. A carry out of the
		// mantissa correctly bumps the exponent (up to infinity).
		h := uint32(e)<<10 | man>>13
		rem := man & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	// Subnormal (or zero) result: the value is m·2^(exp-150) with the
	// implicit bit restored; the half's unit is 2^-24, so shift by 14-e.
	shift := uint(14 - e)
	if exp == 0 || shift > 24 {
		return sign
	}
	m := man | 0x800000
	h := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// F16ToFloat32 converts IEEE 754 binary16 bits to float32 exactly (every
// half is a float32).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}
