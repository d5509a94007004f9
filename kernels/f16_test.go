package kernels

import (
	"math"
	"testing"
)

func TestF16KnownBits(t *testing.T) {
	for _, c := range []struct {
		f    float32
		bits uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},                 // largest half
		{65519.99, 0x7bff},              // below the midpoint to infinity
		{65520, 0x7c00},                 // the midpoint rounds (to even) to infinity
		{float32(math.Inf(1)), 0x7c00},  //
		{float32(math.Inf(-1)), 0xfc00}, //
		{0x1p-24, 0x0001},               // smallest subnormal
		{0x1p-25, 0x0000},               // half of it: tie, to even (zero)
		{0x1.8p-25, 0x0001},             // above the tie
		{0x3p-25, 0x0002},               // 1.5 subnormal units: tie, to even (2)
		{0x1p-14, 0x0400},               // smallest normal
		{0x1.ffcp-15, 0x0400},           // largest subnormal plus half a unit: tie, to even (smallest normal)
		{0x1.ff8p-15, 0x03ff},           // largest subnormal
		{1 + 0x1p-11, 0x3c00},           // tie between 1 and 1+2^-10: to even (1)
		{1 + 0x3p-11, 0x3c02},           // tie between 1+2^-10 and 1+2^-9: to even
		{1 + 0x1p-11 + 0x1p-20, 0x3c01}, // just above the tie
		{float32(math.Copysign(0, -1)), 0x8000},
		{1e-10, 0},
	} {
		if got := F16FromFloat32(c.f); got != c.bits {
			t.Errorf("F16FromFloat32(%g) = %#04x, want %#04x", c.f, got, c.bits)
		}
	}
	if h := F16FromFloat32(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x, not a NaN", h)
	}
	for _, c := range []struct {
		bits uint16
		f    float32
	}{{0x3c00, 1}, {0x7bff, 65504}, {0x0001, 0x1p-24}, {0x8001, -0x1p-24}, {0x03ff, 0x3ffp-24}, {0x0400, 0x1p-14}, {0x3555, 0x1.554p-2}} {
		if got := F16ToFloat32(c.bits); got != c.f {
			t.Errorf("F16ToFloat32(%#04x) = %g, want %g", c.bits, got, c.f)
		}
	}
	if f := F16ToFloat32(0x7e00); !math.IsNaN(float64(f)) {
		t.Errorf("F16ToFloat32(0x7e00) = %g, want NaN", f)
	}
	if f := F16ToFloat32(0xfc00); !math.IsInf(float64(f), -1) {
		t.Errorf("F16ToFloat32(0xfc00) = %g, want -Inf", f)
	}
}

// TestF16RoundTripAll checks every one of the 65536 halves survives a
// round trip through float32.
func TestF16RoundTripAll(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToFloat32(uint16(h))
		got := F16FromFloat32(f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Errorf("NaN %#04x came back as %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Errorf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

// TestF16NearestEven checks, on random float32s across the half range,
// that the result is the nearest half (with ties to the even mantissa),
// comparing against both neighbours in float64.
func TestF16NearestEven(t *testing.T) {
	r := newRand(16)
	for range 200000 {
		// Exponents from 2^-26 to 2^16, either sign.
		f := float32(math.Ldexp(1+r.Float64(), r.IntN(43)-26))
		if r.IntN(2) == 0 {
			f = -f
		}
		h := F16FromFloat32(f)
		v := float64(F16ToFloat32(h))
		err := math.Abs(v - float64(f))
		if math.IsInf(v, 0) {
			if math.Abs(float64(f)) < 65520 {
				t.Fatalf("%g rounded to infinity", f)
			}
			continue
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7fff >= 0x7c00 || (h&0x7fff == 0 && nb == h-1) {
				continue
			}
			e := math.Abs(float64(F16ToFloat32(nb)) - float64(f))
			if e < err || (e == err && h&1 == 1) {
				t.Fatalf("%g -> %#04x (%g), but %#04x (%g) is nearer or the even tie", f, h, v, nb, F16ToFloat32(nb))
			}
		}
	}
}
