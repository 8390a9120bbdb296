#include "textflag.h"

// func fmaPassSSE(mem *byte, half *[65536]float32, off, stride uint32, y *[4]float32, z *[4]float64, n int64) int64
//
// fmaPass's loop for a strided operand a (mem[off], then off += stride,
// wrapping at 32 bits) and an invariant one whose lanes' values are y:
// the four products in one MULPS (exact), widened (CVTPS2PD), added to
// z in two ADDPD (each sum rounded to nearest even in FP64, as the
// scalar ADDSD does), each sum's bits rounded in place to 10 mantissa
// bits (h4fmaFastY's integer arithmetic, on both lanes of a register at
// once). An iteration is taken when every sum is zero or its magnitude
// is in [2^-14 - 2^-26, 65520), which are the sums that round to zero or
// to [2^-14, 2^16) (fmaLane's check on the rounded bits; NaNs compare
// false); else the loop stops before it. It returns the iterations run.
TEXT ·fmaPassSSE(SB), NOSPLIT, $0-56
	MOVQ mem+0(FP), SI
	MOVQ half+8(FP), DI
	MOVL off+16(FP), R8
	MOVL stride+20(FP), R9
	MOVQ y+24(FP), DX
	MOVUPS 0(DX), X8 // y0..y3
	MOVQ z+32(FP), BX
	MOVUPD 0(BX), X0 // z0, z1
	MOVUPD 16(BX), X1 // z2, z3
	MOVQ n+40(FP), CX

	MOVQ $0x000001ffffffffff, AX // tie - 1
	MOVQ AX, X10
	PUNPCKLQDQ X10, X10
	MOVQ $1, AX
	MOVQ AX, X11
	PUNPCKLQDQ X11, X11
	MOVQ $0xfffffc0000000000, AX // clears the 42 bits below the kept mantissa
	MOVQ AX, X12
	PUNPCKLQDQ X12, X12
	MOVQ $0x7fffffffffffffff, AX // magnitude
	MOVQ AX, X13
	PUNPCKLQDQ X13, X13
	MOVQ $0x3f0ffe0000000000, AX // 2^-14 - 2^-26
	MOVQ AX, X14
	PUNPCKLQDQ X14, X14
	MOVQ $0x40effe0000000000, AX // 65520
	MOVQ AX, X15
	PUNPCKLQDQ X15, X15
	XORPD X9, X9 // zeros

	XORQ AX, AX // iterations run
loop:
	CMPQ AX, CX
	JGE done
	MOVQ (SI)(R8*1), DX
	MOVWQZX DX, R10
	MOVSS (DI)(R10*4), X2
	SHRQ $16, DX
	MOVWQZX DX, R10
	MOVSS (DI)(R10*4), X3
	SHRQ $16, DX
	MOVWQZX DX, R10
	MOVSS (DI)(R10*4), X4
	SHRQ $16, DX
	MOVSS (DI)(DX*4), X5
	UNPCKLPS X3, X2 // x0, x1
	UNPCKLPS X5, X4 // x2, x3
	MOVLHPS X4, X2  // x0..x3
	MULPS X8, X2
	CVTPS2PD X2, X3 // p0, p1
	MOVHLPS X2, X2
	CVTPS2PD X2, X4 // p2, p3
	ADDPD X0, X3    // sums 0, 1
	ADDPD X1, X4    // sums 2, 3

	// The check: |s| < 65520 and (|s| >= 2^-14 - 2^-26 or s == 0).
	MOVAPD X3, X5
	ANDPD X13, X5
	MOVAPD X4, X6
	ANDPD X13, X6
	MOVAPD X5, X2
	CMPPD X15, X2, $1 // |s| < 65520
	MOVAPD X5, X7
	CMPPD X14, X7, $5 // !(|s| < low)
	CMPPD X9, X5, $0  // s == 0
	ORPD X7, X5
	ANDPD X2, X5
	MOVAPD X6, X2
	CMPPD X15, X2, $1
	MOVAPD X6, X7
	CMPPD X14, X7, $5
	CMPPD X9, X6, $0
	ORPD X7, X6
	ANDPD X2, X6
	ANDPD X6, X5
	MOVMSKPD X5, DX
	CMPQ DX, $3
	JNE done

	// Round the sums' bits in place: (s + (tie-1) + bit 42 of s) with
	// the 42 bits below cleared.
	MOVAPD X3, X5
	PSRLQ $42, X5
	PAND X11, X5
	PADDQ X10, X5
	PADDQ X5, X3
	PAND X12, X3
	MOVAPD X4, X6
	PSRLQ $42, X6
	PAND X11, X6
	PADDQ X10, X6
	PADDQ X6, X4
	PAND X12, X4
	MOVAPD X3, X0
	MOVAPD X4, X1
	ADDL R9, R8
	INCQ AX
	JMP loop
done:
	MOVUPD X0, 0(BX)
	MOVUPD X1, 16(BX)
	MOVQ AX, ret+48(FP)
	RET
