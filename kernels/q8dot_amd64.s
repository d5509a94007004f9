#include "textflag.h"

// The Q8_0 dot kernels: a block is a little-endian f16 scale d and 32
// int8 values q; a block's part of a dot product is Σ (q·d)·x. Each block
// is widened to four vectors of 8 floats (VPMOVSXBD, VCVTDQ2PS), scaled by
// d (VCVTPH2PS, broadcast) and multiplied into the accumulators with FMA.

// Q8BLOCK widens the block at SI into w0–w3, scaled by its d, through
// scale (a vector register) and AX.
#define Q8BLOCK(scalex, scale, w0, w1, w2, w3) \
	MOVWLZX (SI), AX \
	VMOVQ AX, scalex \
	VCVTPH2PS scalex, scalex \
	VBROADCASTSS scalex, scale \
	VPMOVSXBD 2(SI), w0 \
	VPMOVSXBD 10(SI), w1 \
	VPMOVSXBD 18(SI), w2 \
	VPMOVSXBD 26(SI), w3 \
	VCVTDQ2PS w0, w0 \
	VCVTDQ2PS w1, w1 \
	VCVTDQ2PS w2, w2 \
	VCVTDQ2PS w3, w3 \
	VMULPS scale, w0, w0 \
	VMULPS scale, w1, w1 \
	VMULPS scale, w2, w2 \
	VMULPS scale, w3, w3

// func q8Dot1(row *byte, x *float32, nb int) float32
TEXT ·q8Dot1(SB), NOSPLIT, $0-28
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JLE done1

loop1:
	Q8BLOCK(X8, Y8, Y4, Y5, Y6, Y7)
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loop1

done1:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func q8Dot4(row *byte, x *float32, nb, stride int, out *[4]float32)
//
// Four rows of x, stride floats apart, against one weight row: each block
// is widened once for the four. Two accumulators a row keep the FMA
// chains short.
TEXT ·q8Dot4(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JLE done4

loop4:
	Q8BLOCK(X12, Y12, Y8, Y9, Y10, Y11)
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y0
	VFMADD231PS 96(DI), Y11, Y1
	VFMADD231PS (DI)(R8*1), Y8, Y2
	VFMADD231PS 32(DI)(R8*1), Y9, Y3
	VFMADD231PS 64(DI)(R8*1), Y10, Y2
	VFMADD231PS 96(DI)(R8*1), Y11, Y3
	VFMADD231PS (DI)(R8*2), Y8, Y4
	VFMADD231PS 32(DI)(R8*2), Y9, Y5
	VFMADD231PS 64(DI)(R8*2), Y10, Y4
	VFMADD231PS 96(DI)(R8*2), Y11, Y5
	VFMADD231PS (DI)(R9*1), Y8, Y6
	VFMADD231PS 32(DI)(R9*1), Y9, Y7
	VFMADD231PS 64(DI)(R9*1), Y10, Y6
	VFMADD231PS 96(DI)(R9*1), Y11, Y7
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loop4

done4:
	MOVQ out+32(FP), DX
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	// Pairwise sums within 128-bit lanes: (r0, r0, r1, r1), (r2, r2, r3,
	// r3), then (r0, r1, r2, r3) in each lane; the two lanes added last.
	VHADDPS Y2, Y0, Y0
	VHADDPS Y6, Y4, Y4
	VHADDPS Y4, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET
