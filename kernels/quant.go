package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block sizes in bytes of the quantized formats: one little-endian f16
// scale, then 32 int8 values (Q8_0) or 32 packed 4-bit values (Q4_0).
const (
	q8Block = 34
	q4Block = 18
)

// quantErr builds the error of a quantization call with bad lengths.
func quantErr(dt DType, format string, args ...any) error {
	return fmt.Errorf("%w: %v: %s", ErrBufferSize, dt, fmt.Sprintf(format, args...))
}

// checkQuant checks that dt is a storage format and that dst (encoded
// bytes) matches n values.
func checkQuant(dt DType, n, encoded int) error {
	if !dt.Valid() {
		return fmt.Errorf("%w %v", ErrUnknownDType, dt)
	}
	if dt.Quantized() && n%QK != 0 {
		return quantErr(dt, "%d values is not a multiple of the block (%d)", n, QK)
	}
	if want := dt.RowBytes(int64(n)); int64(encoded) != want {
		return quantErr(dt, "%d bytes for %d values, want %d", encoded, n, want)
	}
	return nil
}

// Quantize encodes src in format dt (Q8_0, Q4_0, F16; F32 copies) and
// returns the new buffer, which the caller owns. For the block formats
// len(src) must be a multiple of QK.
func Quantize(dt DType, src []float32) ([]byte, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("%w %v", ErrUnknownDType, dt)
	}
	if dt.Quantized() && len(src)%QK != 0 {
		return nil, quantErr(dt, "%d values is not a multiple of the block (%d)", len(src), QK)
	}
	dst := make([]byte, dt.RowBytes(int64(len(src))))
	return dst, QuantizeInto(dt, dst, src)
}

// QuantizeInto encodes src in format dt into dst, which must be exactly
// dt.RowBytes(len(src)) bytes. Q8_0 follows ggml's quantize_row_q8_0_ref
// (d = amax/127, q = round(x/d)) and Q4_0 its quantize_row_q4_0_ref
// (d = max/-8 where max is the value of largest magnitude, q = min(15,
// trunc(x/d + 8.5))), bit for bit.
func QuantizeInto(dt DType, dst []byte, src []float32) error {
	if err := checkQuant(dt, len(src), len(dst)); err != nil {
		return err
	}
	switch dt {
	case F32:
		copy(AsF32(dst), src)
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F16FromFloat32(v))
		}
	case Q8_0:
		for b := range len(src) / QK {
			quantizeQ8(dst[b*q8Block:(b+1)*q8Block], src[b*QK:(b+1)*QK])
		}
	case Q4_0:
		for b := range len(src) / QK {
			quantizeQ4(dst[b*q4Block:(b+1)*q4Block], src[b*QK:(b+1)*QK])
		}
	}
	return nil
}

func quantizeQ8(dst []byte, x []float32) {
	var amax float32
	for _, v := range x[:QK] {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, F16FromFloat32(d))
	q := dst[2 : 2+QK]
	for j, v := range x[:QK] {
		// math.Round rounds half away from zero, as C's roundf.
		q[j] = byte(int8(math.Round(float64(float32(v * id)))))
	}
}

func quantizeQ4(dst []byte, x []float32) {
	var amax, mx float32
	for _, v := range x[:QK] {
		if amax < abs32(v) {
			amax, mx = abs32(v), v
		}
	}
	d := mx / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, F16FromFloat32(d))
	q := dst[2 : 2+QK/2]
	for j := range QK / 2 {
		// The explicit float32 conversions keep the compiler from fusing
		// x·id + 8.5 into one FMA: ggml rounds the product first.
		x0 := int8(float32(x[j]*id) + 8.5)
		x1 := int8(float32(x[j+QK/2]*id) + 8.5)
		q[j] = byte(min(15, x0)) | byte(min(15, x1))<<4
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// DequantizeInto decodes src, in format dt, into dst: len(src) must be
// exactly dt.RowBytes(len(dst)).
func DequantizeInto(dt DType, dst []float32, src []byte) error {
	if err := checkQuant(dt, len(dst), len(src)); err != nil {
		return err
	}
	dequantize(dt, dst, src)
	return nil
}

// dequantize decodes without checking: the lengths must match.
func dequantize(dt DType, dst []float32, src []byte) {
	switch dt {
	case F32:
		copy(dst, AsF32(src))
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := range len(dst) / QK {
			dequantQ8Block(dst[b*QK:(b+1)*QK], src[b*q8Block:(b+1)*q8Block])
		}
	case Q4_0:
		for b := range len(dst) / QK {
			dequantQ4Block(dst[b*QK:(b+1)*QK], src[b*q4Block:(b+1)*q4Block])
		}
	}
}

func dequantQ8Block(y []float32, blk []byte) {
	d := F16ToFloat32(binary.LittleEndian.Uint16(blk))
	q := blk[2 : 2+QK]
	y = y[:QK]
	for j := range y {
		y[j] = float32(int8(q[j])) * d
	}
}

func dequantQ4Block(y []float32, blk []byte) {
	d := F16ToFloat32(binary.LittleEndian.Uint16(blk))
	q := blk[2 : 2+QK/2]
	y = y[:QK]
	for j := range QK / 2 {
		y[j] = float32(int(q[j]&0xf)-8) * d
		y[j+QK/2] = float32(int(q[j]>>4)-8) * d
	}
}
