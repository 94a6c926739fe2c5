#include "textflag.h"

// func unshuffle8x16(out, in *byte, n, count int)
//
// Undoes the shuffle of 8-byte items 16 at a time: 16 bytes from each of the 8 byte planes
// (plane j at in+j*n) are interleaved in three rounds of SSE2 unpacks (bytes, then 16-bit
// pairs, then 32-bit quads) into 16 whole items, 128 bytes at out. count rounds.
TEXT ·unshuffle8x16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ in+8(FP), SI
	MOVQ n+16(FP), DX
	MOVQ count+24(FP), CX
	LEAQ (DX)(DX*2), R8  // 3n
	LEAQ (DX)(DX*4), R9  // 5n
	LEAQ (R8)(R8*1), R10 // 6n
	LEAQ (R10)(DX*1), R11 // 7n

loop:
	MOVOU (SI), X0
	MOVOU (SI)(DX*1), X1
	MOVOU (SI)(DX*2), X2
	MOVOU (SI)(R8*1), X3
	MOVOU (SI)(DX*4), X4
	MOVOU (SI)(R9*1), X5
	MOVOU (SI)(R10*1), X6
	MOVOU (SI)(R11*1), X7

	// Bytes: planes 0+1, 2+3, 4+5, 6+7; low halves are items 0-7, high halves 8-15.
	MOVO      X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVO      X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVO      X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVO      X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11

	// 16-bit pairs: bytes 0-3 (X0, X1, X8, X3) and 4-7 (X4, X5, X10, X7) of items 0-3,
	// 4-7, 8-11 and 12-15.
	MOVO      X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVO      X8, X3
	PUNPCKLWL X9, X8
	PUNPCKHWL X9, X3
	MOVO      X4, X5
	PUNPCKLWL X6, X4
	PUNPCKHWL X6, X5
	MOVO      X10, X7
	PUNPCKLWL X11, X10
	PUNPCKHWL X11, X7

	// 32-bit quads: whole items, two per register.
	MOVO      X0, X2
	PUNPCKLLQ X4, X0
	PUNPCKHLQ X4, X2
	MOVO      X1, X6
	PUNPCKLLQ X5, X1
	PUNPCKHLQ X5, X6
	MOVO      X8, X9
	PUNPCKLLQ X10, X8
	PUNPCKHLQ X10, X9
	MOVO      X3, X11
	PUNPCKLLQ X7, X3
	PUNPCKHLQ X7, X11

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
	JNZ  loop
	RET

// func unshuffle4x16(out, in *byte, n, count int)
//
// The same for 4-byte items: 16 bytes from each of the 4 byte planes, two rounds of
// unpacks (bytes, then 16-bit pairs), 16 items, 64 bytes at out.
TEXT ·unshuffle4x16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ in+8(FP), SI
	MOVQ n+16(FP), DX
	MOVQ count+24(FP), CX
	LEAQ (DX)(DX*2), R8 // 3n

loop4:
	MOVOU (SI), X0
	MOVOU (SI)(DX*1), X1
	MOVOU (SI)(DX*2), X2
	MOVOU (SI)(R8*1), X3

	// Bytes: planes 0+1 and 2+3; low halves are items 0-7, high halves 8-15.
	MOVO      X0, X4
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X4
	MOVO      X2, X5
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X5

	// 16-bit pairs: whole items, four per register.
	MOVO      X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVO      X4, X3
	PUNPCKLWL X5, X4
	PUNPCKHWL X5, X3

	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X4, 32(DI)
	MOVOU X3, 48(DI)

	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop4
	RET
