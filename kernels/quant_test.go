package kernels

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// TestQuantizeKnownBlocks checks one block of each format against bytes
// worked out by hand from ggml's reference quantizers, for x_j = j - 16.
func TestQuantizeKnownBlocks(t *testing.T) {
	x := make([]float32, QK)
	for j := range x {
		x[j] = float32(j - 16)
	}
	q8, err := Quantize(Q8_0, x)
	if err != nil {
		t.Fatal(err)
	}
	// d = 16/127 = 0.12598 → f16 0x3008 (0.125 + 8·2^-13); q = round(x·127/16).
	if d := binary.LittleEndian.Uint16(q8); d != 0x3008 {
		t.Errorf("q8_0 scale %#04x, want 0x3008", d)
	}
	for j, want := range map[int]int8{0: -127, 1: -119, 16: 0, 20: 32, 31: 119} {
		if got := int8(q8[2+j]); got != want {
			t.Errorf("q8_0 q[%d] = %d, want %d", j, got, want)
		}
	}
	q4, err := Quantize(Q4_0, x)
	if err != nil {
		t.Fatal(err)
	}
	// max = -16 (the first value of largest magnitude), d = 2, q = min(15,
	// trunc(x/2 + 8.5)); byte j holds q_j low and q_{j+16} high.
	// Low nibbles 0 1 1 2 2 … 7 7 8, high nibbles 8 9 9 10 10 … 15 15 15.
	want := []byte{0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8}
	if !bytes.Equal(q4, want) {
		t.Errorf("q4_0 block\n got % x\nwant % x", q4, want)
	}
	y := make([]float32, QK)
	if err := DequantizeInto(Q4_0, y, q4); err != nil {
		t.Fatal(err)
	}
	// The clamped top value: q = 15 decodes to (15-8)·2 = 14, not 15.
	if y[0] != -16 || y[17] != 2 || y[31] != 14 {
		t.Errorf("q4_0 decode: y[0]=%g y[17]=%g y[31]=%g, want -16 2 14", y[0], y[17], y[31])
	}
	// A positive maximum gives a negative scale.
	pos := make([]float32, QK)
	pos[3] = 3
	pos[5] = -1
	q4, _ = Quantize(Q4_0, pos)
	if d := F16ToFloat32(binary.LittleEndian.Uint16(q4)); d != -0.375 {
		t.Errorf("q4_0 scale for max 3: %g, want -0.375", d)
	}
}

// TestQuantRoundTripBounds checks the per-element error of both block
// formats on random blocks whose magnitudes span 1e-4 to 1e3. The bounds,
// derived from the quantizers: d is the scale before f16 rounding, which
// moves it by at most e = max(|d|·2^-11, 2^-25) (2^-25 is half the f16
// subnormal step, reached for |d| < 2^-14), and |q| (|q-8|) is at most
// 127 (8), so
//
//	Q8_0: |x - q·d16| ≤ d/2 + 127·e        (d = amax/127, d/2 = amax/254)
//	Q4_0: |x - (q-8)·d16| ≤ |d|/2 + 8·e    (|d| = amax/8) where x/d < 7.5;
//	      a value with x/d in [7.5, 8] (the far end from max, clamped to
//	      q = 15) is within |d| + 8·e.
//
// A slack of 1e-6·amax covers the float32 products inside the quantizers.
func TestQuantRoundTripBounds(t *testing.T) {
	r := newRand(8)
	const blocks = 2000
	x := make([]float32, blocks*QK)
	for b := range blocks {
		scale := float32(math.Pow(10, float64(r.IntN(8)-4)))
		for j := range QK {
			x[b*QK+j] = (2*r.Float32() - 1) * scale
		}
	}
	y := make([]float32, len(x))
	for _, dt := range []DType{Q8_0, Q4_0} {
		enc, err := Quantize(dt, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := DequantizeInto(dt, y, enc); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for b := range blocks {
			var amax, mx float64
			for _, v := range x[b*QK : (b+1)*QK] {
				if math.Abs(float64(v)) > amax {
					amax, mx = math.Abs(float64(v)), float64(v)
				}
			}
			for j := b * QK; j < (b+1)*QK; j++ {
				err := math.Abs(float64(x[j] - y[j]))
				var bound float64
				if dt == Q8_0 {
					d := amax / 127
					bound = d/2 + 127*max(d*0x1p-11, 0x1p-25)
				} else {
					d := amax / 8
					bound = d/2 + 8*max(d*0x1p-11, 0x1p-25)
					if float64(x[j])/(mx/-8) >= 7.5 {
						bound += d / 2
					}
				}
				bound += 1e-6 * amax
				if err > bound {
					t.Fatalf("%v block %d: |%g - %g| = %g exceeds %g", dt, b, x[j], y[j], err, bound)
				}
				worst = max(worst, err/amax)
			}
		}
		t.Logf("%v: worst error %.5f·amax", dt, worst)
	}
}

func TestF16QuantizeRoundTrip(t *testing.T) {
	x := randF32(newRand(3), 1001)
	enc, err := Quantize(F16, x)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := DequantizeInto(F16, y, enc); err != nil {
		t.Fatal(err)
	}
	// Halves carry 11 significant bits: relative error ≤ 2^-11.
	assertClose(t, "f16", y, x, 0x1p-24, 0x1p-11)
}

func TestQuantizeErrors(t *testing.T) {
	if _, err := Quantize(Q8_0, make([]float32, 31)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("31 values in q8_0: %v, want ErrBufferSize", err)
	}
	if err := QuantizeInto(Q4_0, make([]byte, 17), make([]float32, 32)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("short q4_0 dst: %v, want ErrBufferSize", err)
	}
	if err := DequantizeInto(F16, make([]float32, 3), make([]byte, 8)); !errors.Is(err, ErrBufferSize) {
		t.Errorf("long f16 src: %v, want ErrBufferSize", err)
	}
	if _, err := Quantize(DType(9), make([]float32, 32)); !errors.Is(err, ErrUnknownDType) {
		t.Errorf("dtype 9: %v, want ErrUnknownDType", err)
	}
}
