#include "textflag.h"

// func prefetch(p unsafe.Pointer, n uintptr)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ (AX)(CX*1), CX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JB loop
	RET
