#include "textflag.h"

// func sumExp16(x *float32, n int, m float32) float64
// The float64 sum of exp(x[i] - m) for i < n (a multiple of 16, > 0), 16
// lanes at a time: d = max(x - m, -87); k = round(d * log2(e)); r = d -
// k*ln2 (ln2 in two parts); exp(r) by the degree-7 Taylor polynomial
// (|r| <= ln2/2: truncation error below 1e-8); times 2^k (VSCALEFPS). Each
// lane's values are widened to float64 before they are added.
TEXT ·sumExp16(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Z1
	MOVL $0x3FB8AA3B, AX // log2(e)
	VPBROADCASTD AX, Z2
	MOVL $0x3F318000, AX // ln2 high part, 0.693359375
	VPBROADCASTD AX, Z3
	MOVL $0xB95E8083, AX // ln2 low part, -2.12194440e-4
	VPBROADCASTD AX, Z4
	MOVL $0xC2AE0000, AX // -87
	VPBROADCASTD AX, Z5
	MOVL $0x39500D01, AX // 1/5040
	VPBROADCASTD AX, Z13
	MOVL $0x3AB60B61, AX // 1/720
	VPBROADCASTD AX, Z14
	MOVL $0x3C088889, AX // 1/120
	VPBROADCASTD AX, Z15
	MOVL $0x3D2AAAAB, AX // 1/24
	VPBROADCASTD AX, Z16
	MOVL $0x3E2AAAAB, AX // 1/6
	VPBROADCASTD AX, Z17
	MOVL $0x3F000000, AX // 1/2
	VPBROADCASTD AX, Z18
	MOVL $0x3F800000, AX // 1
	VPBROADCASTD AX, Z19
	VXORPD Z30, Z30, Z30
	VXORPD Z31, Z31, Z31
	SHRQ $4, CX

sumexploop:
	VMOVUPS      (SI), Z0
	VSUBPS       Z1, Z0, Z0
	VMAXPS       Z5, Z0, Z0
	VMULPS       Z2, Z0, Z8
	VRNDSCALEPS  $0, Z8, Z8
	VMOVAPS      Z0, Z9
	VFNMADD231PS Z3, Z8, Z9
	VFNMADD231PS Z4, Z8, Z9
	VMOVAPS      Z13, Z10
	VFMADD213PS  Z14, Z9, Z10
	VFMADD213PS  Z15, Z9, Z10
	VFMADD213PS  Z16, Z9, Z10
	VFMADD213PS  Z17, Z9, Z10
	VFMADD213PS  Z18, Z9, Z10
	VFMADD213PS  Z19, Z9, Z10
	VFMADD213PS  Z19, Z9, Z10
	VSCALEFPS    Z8, Z10, Z10
	VCVTPS2PD    Y10, Z11
	VADDPD       Z11, Z30, Z30
	VEXTRACTF32X8 $1, Z10, Y12
	VCVTPS2PD    Y12, Z12
	VADDPD       Z12, Z31, Z31
	ADDQ $64, SI
	DECQ CX
	JNZ  sumexploop

	VADDPD        Z31, Z30, Z30
	VEXTRACTF64X4 $1, Z30, Y1
	VADDPD        Y1, Y30, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPD        X1, X0, X0
	VUNPCKHPD     X0, X0, X1
	VADDSD        X1, X0, X0
	VMOVSD        X0, ret+24(FP)
	VZEROUPPER
	RET

// func max16(x *float32, n int) float32
// The largest of x[i] for i < n (a multiple of 16, > 0).
TEXT ·max16(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Z0
	SHRQ $4, CX

max16loop:
	VMAXPS (SI), Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ  max16loop

	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET
