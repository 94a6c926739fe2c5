#include "textflag.h"

// Both functions undo HDF5's shuffle of 16 items at a time: 16 bytes from each byte plane
// (plane j at in+j*n) are interleaved with SSE2 unpacks into 16 whole items at out, count
// rounds. Registers: DI out, SI plane 0, DX n (the distance between planes), CX rounds
// left, R8 3n.
#define ARGS \
	MOVQ out+0(FP), DI; \
	MOVQ in+8(FP), SI; \
	MOVQ n+16(FP), DX; \
	MOVQ count+24(FP), CX; \
	LEAQ (DX)(DX*2), R8

// LOAD4 loads the next 16 bytes of planes 0-3 into X0-X3.
#define LOAD4 \
	MOVOU (SI), X0; \
	MOVOU (SI)(DX*1), X1; \
	MOVOU (SI)(DX*2), X2; \
	MOVOU (SI)(R8*1), X3

// ZIP(LO, HI, a, b, t) interleaves a and b: the low halves into a, the high halves into t.
#define ZIP(LO, HI, a, b, t) \
	MOVO a, t; \
	LO   b, a; \
	HI   b, t

// func unshuffle8x16(out, in *byte, n, count int)
//
// 8-byte items: three rounds of unpacks (bytes, 16-bit pairs, 32-bit quads), 128 bytes out.
TEXT ·unshuffle8x16(SB), NOSPLIT, $0-32
	ARGS
	LEAQ (DX)(DX*4), R9   // 5n
	LEAQ (R8)(R8*1), R10  // 6n
	LEAQ (R10)(DX*1), R11 // 7n

loop8:
	LOAD4
	MOVOU (SI)(DX*4), X4
	MOVOU (SI)(R9*1), X5
	MOVOU (SI)(R10*1), X6
	MOVOU (SI)(R11*1), X7

	// Bytes of planes 0+1, 2+3, 4+5, 6+7: low halves items 0-7, high halves 8-15.
	ZIP(PUNPCKLBW, PUNPCKHBW, X0, X1, X8)
	ZIP(PUNPCKLBW, PUNPCKHBW, X2, X3, X9)
	ZIP(PUNPCKLBW, PUNPCKHBW, X4, X5, X10)
	ZIP(PUNPCKLBW, PUNPCKHBW, X6, X7, X11)

	// 16-bit pairs: bytes 0-3 (X0, X1, X8, X3) and 4-7 (X4, X5, X10, X7) of items 0-3,
	// 4-7, 8-11 and 12-15.
	ZIP(PUNPCKLWL, PUNPCKHWL, X0, X2, X1)
	ZIP(PUNPCKLWL, PUNPCKHWL, X8, X9, X3)
	ZIP(PUNPCKLWL, PUNPCKHWL, X4, X6, X5)
	ZIP(PUNPCKLWL, PUNPCKHWL, X10, X11, X7)

	// 32-bit quads: whole items, two per register.
	ZIP(PUNPCKLLQ, PUNPCKHLQ, X0, X4, X2)
	ZIP(PUNPCKLLQ, PUNPCKHLQ, X1, X5, X6)
	ZIP(PUNPCKLLQ, PUNPCKHLQ, X8, X10, X9)
	ZIP(PUNPCKLLQ, PUNPCKHLQ, X3, X7, X11)

	MOVOU X0, 0(DI)
	MOVOU X2, 16(DI)
	MOVOU X1, 32(DI)
	MOVOU X6, 48(DI)
	MOVOU X8, 64(DI)
	MOVOU X9, 80(DI)
	MOVOU X3, 96(DI)
	MOVOU X11, 112(DI)

	ADDQ $16, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop8
	RET

// func unshuffle4x16(out, in *byte, n, count int)
//
// 4-byte items: two rounds of unpacks (bytes, 16-bit pairs), 64 bytes out.
TEXT ·unshuffle4x16(SB), NOSPLIT, $0-32
	ARGS

loop4:
	LOAD4

	// Bytes of planes 0+1 and 2+3: low halves items 0-7, high halves 8-15.
	ZIP(PUNPCKLBW, PUNPCKHBW, X0, X1, X4)
	ZIP(PUNPCKLBW, PUNPCKHBW, X2, X3, X5)

	// 16-bit pairs: whole items, four per register.
	ZIP(PUNPCKLWL, PUNPCKHWL, X0, X2, X1)
	ZIP(PUNPCKLWL, PUNPCKHWL, X4, X5, X3)

	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X4, 32(DI)
	MOVOU X3, 48(DI)

	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop4
	RET
