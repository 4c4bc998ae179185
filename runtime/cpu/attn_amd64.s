#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 attention kernels (see attention.go). Each computes every output
// with the same sequence of float32 operations as the reference loops:
//   - scores: 16 key positions in 16 lanes; per lane one sequential chain
//     s = fma(q[i], k[i], s) over the head dimension, then s * scale;
//   - values: 16 head dimensions in 16 lanes; per lane o += w_j * v_j
//     (a rounded multiply, then an add) over positions j in order;
//   - softmax: exp(x) as float32(math.Exp(float64(x))), the float64 sum in
//     index order, then one float32 multiply by float32(1/sum).

// Argument blocks (struct offsets; see scoreArgs and valueArgs in attention.go).
#define SA_Q 0
#define SA_OUT 32
#define SA_K 64
#define SA_KOFFS 72
#define SA_NC 80
#define SA_KSTRIDE 88
#define SA_HD 96
#define SA_SCALE 104

#define VA_W 0
#define VA_O 32
#define VA_V 64
#define VA_VOFFS 72
#define VA_VROW 80
#define VA_J0 88
#define VA_J1 96
#define VA_MASK 104

// func attnScores4(a *scoreArgs)
// For the 4 query vectors a.q[v] and chunks c < a.nc (a multiple of 2) of 16
// key positions whose dimension i lies at a.k + 4*a.koffs[c] + i*a.kstride:
// a.out[v][16c+l] = chain(q_v, k lane l) * a.scale.
TEXT ·attnScores4(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ SA_Q+0(BX), R8
	MOVQ SA_Q+8(BX), R9
	MOVQ SA_Q+16(BX), R10
	MOVQ SA_Q+24(BX), R11
	MOVQ SA_K(BX), SI
	MOVQ SA_KOFFS(BX), DI
	MOVQ SA_KSTRIDE(BX), DX
	VBROADCASTSS SA_SCALE(BX), Z31
	XORQ CX, CX

s4chunk:
	CMPQ CX, SA_NC(BX)
	JGE  s4done
	MOVQ (DI)(CX*8), R12
	LEAQ (SI)(R12*4), R12
	MOVQ 8(DI)(CX*8), R13
	LEAQ (SI)(R13*4), R13
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	XORQ AX, AX
	MOVQ SA_HD(BX), R14

s4dim:
	VMOVUPS      (R12), Z8
	VMOVUPS      (R13), Z9
	VBROADCASTSS (R8)(AX*4), Z10
	VBROADCASTSS (R9)(AX*4), Z11
	VBROADCASTSS (R10)(AX*4), Z12
	VBROADCASTSS (R11)(AX*4), Z13
	VFMADD231PS  Z10, Z8, Z0
	VFMADD231PS  Z10, Z9, Z1
	VFMADD231PS  Z11, Z8, Z2
	VFMADD231PS  Z11, Z9, Z3
	VFMADD231PS  Z12, Z8, Z4
	VFMADD231PS  Z12, Z9, Z5
	VFMADD231PS  Z13, Z8, Z6
	VFMADD231PS  Z13, Z9, Z7
	ADDQ DX, R12
	ADDQ DX, R13
	INCQ AX
	CMPQ AX, R14
	JLT  s4dim

	VMULPS Z31, Z0, Z0
	VMULPS Z31, Z1, Z1
	VMULPS Z31, Z2, Z2
	VMULPS Z31, Z3, Z3
	VMULPS Z31, Z4, Z4
	VMULPS Z31, Z5, Z5
	VMULPS Z31, Z6, Z6
	VMULPS Z31, Z7, Z7
	MOVQ    CX, R14
	SHLQ    $6, R14
	MOVQ    SA_OUT+0(BX), R12
	VMOVUPS Z0, (R12)(R14*1)
	VMOVUPS Z1, 64(R12)(R14*1)
	MOVQ    SA_OUT+8(BX), R12
	VMOVUPS Z2, (R12)(R14*1)
	VMOVUPS Z3, 64(R12)(R14*1)
	MOVQ    SA_OUT+16(BX), R12
	VMOVUPS Z4, (R12)(R14*1)
	VMOVUPS Z5, 64(R12)(R14*1)
	MOVQ    SA_OUT+24(BX), R12
	VMOVUPS Z6, (R12)(R14*1)
	VMOVUPS Z7, 64(R12)(R14*1)
	ADDQ    $2, CX
	JMP     s4chunk

s4done:
	VZEROUPPER
	RET

// func attnScores1(a *scoreArgs)
// attnScores4 for the one query vector a.q[0] (output a.out[0]), four
// chunks at a time: a.nc must be a multiple of 4.
TEXT ·attnScores1(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ SA_Q+0(BX), R8
	MOVQ SA_OUT+0(BX), R9
	MOVQ SA_K(BX), SI
	MOVQ SA_KOFFS(BX), DI
	MOVQ SA_KSTRIDE(BX), DX
	VBROADCASTSS SA_SCALE(BX), Z31
	XORQ CX, CX

s1chunk:
	CMPQ CX, SA_NC(BX)
	JGE  s1done
	MOVQ (DI)(CX*8), R10
	LEAQ (SI)(R10*4), R10
	MOVQ 8(DI)(CX*8), R11
	LEAQ (SI)(R11*4), R11
	MOVQ 16(DI)(CX*8), R12
	LEAQ (SI)(R12*4), R12
	MOVQ 24(DI)(CX*8), R13
	LEAQ (SI)(R13*4), R13
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ AX, AX
	MOVQ SA_HD(BX), R14

s1dim:
	VBROADCASTSS (R8)(AX*4), Z10
	VFMADD231PS  (R10), Z10, Z0
	VFMADD231PS  (R11), Z10, Z1
	VFMADD231PS  (R12), Z10, Z2
	VFMADD231PS  (R13), Z10, Z3
	ADDQ DX, R10
	ADDQ DX, R11
	ADDQ DX, R12
	ADDQ DX, R13
	INCQ AX
	CMPQ AX, R14
	JLT  s1dim

	VMULPS  Z31, Z0, Z0
	VMULPS  Z31, Z1, Z1
	VMULPS  Z31, Z2, Z2
	VMULPS  Z31, Z3, Z3
	MOVQ    CX, R14
	SHLQ    $6, R14
	VMOVUPS Z0, (R9)(R14*1)
	VMOVUPS Z1, 64(R9)(R14*1)
	VMOVUPS Z2, 128(R9)(R14*1)
	VMOVUPS Z3, 192(R9)(R14*1)
	ADDQ    $4, CX
	JMP     s1chunk

s1done:
	VZEROUPPER
	RET

// VROW sets R12 to the V row of position AX: chunk AX/16 starts at
// SI + 4*voffs[AX/16] (DI = voffs), rows are DX bytes apart. Clobbers R13.
#define VROW \
	MOVQ  AX, R12; \
	SHRQ  $4, R12; \
	MOVQ  (DI)(R12*8), R12; \
	LEAQ  (SI)(R12*4), R12; \
	MOVQ  AX, R13; \
	ANDQ  $15, R13; \
	IMULQ DX, R13; \
	ADDQ  R13, R12

// VSETUP loads the common arguments of the value kernels: SI = v,
// DI = voffs, DX = vrow, AX = j0, CX = j1.
#define VSETUP \
	MOVQ VA_V(BX), SI; \
	MOVQ VA_VOFFS(BX), DI; \
	MOVQ VA_VROW(BX), DX; \
	MOVQ VA_J0(BX), AX; \
	MOVQ VA_J1(BX), CX

// VACC adds w * v into acc (w broadcast in wreg, v in vreg; tmp clobbered).
#define VACC(wreg, vreg, tmp, acc) \
	VMULPS wreg, vreg, tmp; \
	VADDPS tmp, acc, acc

// func attnValues4x4(a *valueArgs)
// For the 4 query vectors v < 4 and positions j in [a.j0, a.j1) in order:
// a.o[v][d] += a.w[v][j] * V_j[d] for the 64 dims d at the row of position
// j (chunk j/16 at a.v + 4*a.voffs[j/16], rows a.vrow bytes apart).
TEXT ·attnValues4x4(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_W+0(BX), R8
	MOVQ VA_W+8(BX), R9
	MOVQ VA_W+16(BX), R10
	MOVQ VA_W+24(BX), R11
	MOVQ VA_O+0(BX), R14
	VMOVUPS (R14), Z0
	VMOVUPS 64(R14), Z1
	VMOVUPS 128(R14), Z2
	VMOVUPS 192(R14), Z3
	MOVQ VA_O+8(BX), R14
	VMOVUPS (R14), Z4
	VMOVUPS 64(R14), Z5
	VMOVUPS 128(R14), Z6
	VMOVUPS 192(R14), Z7
	MOVQ VA_O+16(BX), R14
	VMOVUPS (R14), Z8
	VMOVUPS 64(R14), Z9
	VMOVUPS 128(R14), Z10
	VMOVUPS 192(R14), Z11
	MOVQ VA_O+24(BX), R14
	VMOVUPS (R14), Z12
	VMOVUPS 64(R14), Z13
	VMOVUPS 128(R14), Z14
	VMOVUPS 192(R14), Z15
	VSETUP
	CMPQ AX, CX
	JGE  v44done

v44loop:
	VROW
	VMOVUPS (R12), Z16
	VMOVUPS 64(R12), Z17
	VMOVUPS 128(R12), Z18
	VMOVUPS 192(R12), Z19
	VBROADCASTSS (R8)(AX*4), Z20
	VBROADCASTSS (R9)(AX*4), Z21
	VBROADCASTSS (R10)(AX*4), Z22
	VBROADCASTSS (R11)(AX*4), Z23
	VACC(Z20, Z16, Z24, Z0)
	VACC(Z20, Z17, Z25, Z1)
	VACC(Z20, Z18, Z26, Z2)
	VACC(Z20, Z19, Z27, Z3)
	VACC(Z21, Z16, Z28, Z4)
	VACC(Z21, Z17, Z29, Z5)
	VACC(Z21, Z18, Z30, Z6)
	VACC(Z21, Z19, Z31, Z7)
	VACC(Z22, Z16, Z24, Z8)
	VACC(Z22, Z17, Z25, Z9)
	VACC(Z22, Z18, Z26, Z10)
	VACC(Z22, Z19, Z27, Z11)
	VACC(Z23, Z16, Z28, Z12)
	VACC(Z23, Z17, Z29, Z13)
	VACC(Z23, Z18, Z30, Z14)
	VACC(Z23, Z19, Z31, Z15)
	INCQ AX
	CMPQ AX, CX
	JLT  v44loop

v44done:
	MOVQ VA_O+0(BX), R14
	VMOVUPS Z0, (R14)
	VMOVUPS Z1, 64(R14)
	VMOVUPS Z2, 128(R14)
	VMOVUPS Z3, 192(R14)
	MOVQ VA_O+8(BX), R14
	VMOVUPS Z4, (R14)
	VMOVUPS Z5, 64(R14)
	VMOVUPS Z6, 128(R14)
	VMOVUPS Z7, 192(R14)
	MOVQ VA_O+16(BX), R14
	VMOVUPS Z8, (R14)
	VMOVUPS Z9, 64(R14)
	VMOVUPS Z10, 128(R14)
	VMOVUPS Z11, 192(R14)
	MOVQ VA_O+24(BX), R14
	VMOVUPS Z12, (R14)
	VMOVUPS Z13, 64(R14)
	VMOVUPS Z14, 128(R14)
	VMOVUPS Z15, 192(R14)
	VZEROUPPER
	RET

// func attnValues1x4(a *valueArgs)
// attnValues4x4 for the one query vector a.w[0], a.o[0].
TEXT ·attnValues1x4(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_W+0(BX), R8
	MOVQ VA_O+0(BX), R14
	VMOVUPS (R14), Z0
	VMOVUPS 64(R14), Z1
	VMOVUPS 128(R14), Z2
	VMOVUPS 192(R14), Z3
	VSETUP
	CMPQ AX, CX
	JGE  v14done

v14loop:
	VROW
	VBROADCASTSS (R8)(AX*4), Z20
	VMULPS (R12), Z20, Z24
	VADDPS Z24, Z0, Z0
	VMULPS 64(R12), Z20, Z25
	VADDPS Z25, Z1, Z1
	VMULPS 128(R12), Z20, Z26
	VADDPS Z26, Z2, Z2
	VMULPS 192(R12), Z20, Z27
	VADDPS Z27, Z3, Z3
	INCQ AX
	CMPQ AX, CX
	JLT  v14loop

v14done:
	VMOVUPS Z0, (R14)
	VMOVUPS Z1, 64(R14)
	VMOVUPS Z2, 128(R14)
	VMOVUPS Z3, 192(R14)
	VZEROUPPER
	RET

// func attnValues4x1(a *valueArgs)
// attnValues4x4 for the dims of one vector of 16 whose lanes a.mask selects.
TEXT ·attnValues4x1(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ  VA_MASK(BX), R12
	KMOVW R12, K1
	MOVQ VA_W+0(BX), R8
	MOVQ VA_W+8(BX), R9
	MOVQ VA_W+16(BX), R10
	MOVQ VA_W+24(BX), R11
	MOVQ VA_O+0(BX), R14
	VMOVUPS.Z (R14), K1, Z0
	MOVQ VA_O+8(BX), R14
	VMOVUPS.Z (R14), K1, Z1
	MOVQ VA_O+16(BX), R14
	VMOVUPS.Z (R14), K1, Z2
	MOVQ VA_O+24(BX), R14
	VMOVUPS.Z (R14), K1, Z3
	VSETUP
	CMPQ AX, CX
	JGE  v41done

v41loop:
	VROW
	VMOVUPS.Z    (R12), K1, Z16
	VBROADCASTSS (R8)(AX*4), Z20
	VBROADCASTSS (R9)(AX*4), Z21
	VBROADCASTSS (R10)(AX*4), Z22
	VBROADCASTSS (R11)(AX*4), Z23
	VACC(Z20, Z16, Z24, Z0)
	VACC(Z21, Z16, Z25, Z1)
	VACC(Z22, Z16, Z26, Z2)
	VACC(Z23, Z16, Z27, Z3)
	INCQ AX
	CMPQ AX, CX
	JLT  v41loop

v41done:
	MOVQ VA_O+0(BX), R14
	VMOVUPS Z0, K1, (R14)
	MOVQ VA_O+8(BX), R14
	VMOVUPS Z1, K1, (R14)
	MOVQ VA_O+16(BX), R14
	VMOVUPS Z2, K1, (R14)
	MOVQ VA_O+24(BX), R14
	VMOVUPS Z3, K1, (R14)
	VZEROUPPER
	RET

// func attnValues1x1(a *valueArgs)
// attnValues4x1 for the one query vector a.w[0], a.o[0].
TEXT ·attnValues1x1(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ  VA_MASK(BX), R12
	KMOVW R12, K1
	MOVQ VA_W+0(BX), R8
	MOVQ VA_O+0(BX), R14
	VMOVUPS.Z (R14), K1, Z0
	VSETUP
	CMPQ AX, CX
	JGE  v11done

v11loop:
	VROW
	VMOVUPS.Z    (R12), K1, Z16
	VBROADCASTSS (R8)(AX*4), Z20
	VACC(Z20, Z16, Z24, Z0)
	INCQ AX
	CMPQ AX, CX
	JLT  v11loop

v11done:
	VMOVUPS Z0, K1, (R14)
	VZEROUPPER
	RET

// Constants of softmaxExp: the Taylor coefficients 1/j! of exp (j <= 11),
// log2(e), ln(2) split in two, the midpoint test (see softmaxExp) and the
// float32 range bounds.
DATA expTab<>+0(SB)/8, $0x3ff0000000000000
DATA expTab<>+8(SB)/8, $0x3ff0000000000000
DATA expTab<>+16(SB)/8, $0x3fe0000000000000
DATA expTab<>+24(SB)/8, $0x3fc5555555555555
DATA expTab<>+32(SB)/8, $0x3fa5555555555555
DATA expTab<>+40(SB)/8, $0x3f81111111111111
DATA expTab<>+48(SB)/8, $0x3f56c16c16c16c17
DATA expTab<>+56(SB)/8, $0x3f2a01a01a01a01a
DATA expTab<>+64(SB)/8, $0x3efa01a01a01a01a
DATA expTab<>+72(SB)/8, $0x3ec71de3a556c734
DATA expTab<>+80(SB)/8, $0x3e927e4fb7789f5c
DATA expTab<>+88(SB)/8, $0x3e5ae64567f544e4
DATA expTab<>+96(SB)/8, $0x3ff71547652b82fe
DATA expTab<>+104(SB)/8, $0x3fe62e42fee00000
DATA expTab<>+112(SB)/8, $0x3dea39ef35793c76
DATA expTab<>+120(SB)/8, $0x000000000ffff000
DATA expTab<>+128(SB)/8, $0x000000001fffffff
DATA expTab<>+136(SB)/8, $0x0000000000002000
DATA expTab<>+144(SB)/4, $0xc2ae0000
DATA expTab<>+148(SB)/4, $0x42b00000
DATA expTab<>+152(SB)/4, $0xc2d00000
DATA expTab<>+156(SB)/4, $0xff800000
DATA expTab<>+160(SB)/4, $0xc2a00000
DATA expTab<>+164(SB)/4, $0x42a00000
GLOBL expTab<>(SB), RODATA|NOPTR, $168

// EXPHALF computes y = exp(x) for the 8 float64 lanes of x (k, r, p are
// scratch; p holds the result): k = round(x*log2e), r = x - k*ln2 (two
// steps), p = the degree-11 Taylor polynomial of exp(r) by Horner's rule,
// then p * 2^k. The relative error is below 2^-46.
#define EXPHALF(x, k, r, p) \
	VMULPD       Z30, x, k; \
	VRNDSCALEPD  $0, k, k; \
	VMOVAPD      x, r; \
	VFNMADD231PD Z29, k, r; \
	VFNMADD231PD Z28, k, r; \
	VMOVAPD      Z21, p; \
	VFMADD213PD  Z20, r, p; \
	VFMADD213PD  Z19, r, p; \
	VFMADD213PD  Z18, r, p; \
	VFMADD213PD  Z17, r, p; \
	VFMADD213PD  Z16, r, p; \
	VFMADD213PD  Z15, r, p; \
	VFMADD213PD  Z14, r, p; \
	VFMADD213PD  Z13, r, p; \
	VFMADD213PD  Z12, r, p; \
	VFMADD213PD  Z11, r, p; \
	VFMADD213PD  Z10, r, p; \
	VSCALEFPD    k, p, p

// MIDPOINT sets kdst to the lanes of the float64 values y whose float32
// rounding is uncertain: the 29 bits below float32 precision lie within
// 2^12 units of the rounding midpoint 2^28 (t clobbered).
#define MIDPOINT(y, t, kdst) \
	VPSUBQ  Z27, y, t; \
	VPANDQ  Z26, t, t; \
	VPCMPUQ $2, Z25, t, kdst

// func softmaxExp(s *float32, n int, m float32, sum *float64) int
// For chunks of 16 elements in order: s[i] = float32(math.Exp(float64(s[i]-m)))
// and *sum += float64(s[i]) for each i in order. It stops before the first
// chunk holding an element it cannot compute exactly that way (x = s[i]-m
// NaN, outside [-87, 88] but not below -104, whose exp rounds to 0; or whose
// float64 approximation lies too close to a float32 rounding midpoint) and
// returns the number of elements done (n if all).
TEXT ·softmaxExp(SB), NOSPLIT, $128-40
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Z31
	MOVQ sum+24(FP), DI
	VMOVSD (DI), X9
	VBROADCASTSD expTab<>+96(SB), Z30
	VBROADCASTSD expTab<>+104(SB), Z29
	VBROADCASTSD expTab<>+112(SB), Z28
	VPBROADCASTQ expTab<>+120(SB), Z27
	VPBROADCASTQ expTab<>+128(SB), Z26
	VPBROADCASTQ expTab<>+136(SB), Z25
	VBROADCASTSS expTab<>+144(SB), Z24
	VBROADCASTSS expTab<>+148(SB), Z23
	VBROADCASTSS expTab<>+152(SB), Z22
	VBROADCASTSD expTab<>+88(SB), Z21
	VBROADCASTSD expTab<>+80(SB), Z20
	VBROADCASTSD expTab<>+72(SB), Z19
	VBROADCASTSD expTab<>+64(SB), Z18
	VBROADCASTSD expTab<>+56(SB), Z17
	VBROADCASTSD expTab<>+48(SB), Z16
	VBROADCASTSD expTab<>+40(SB), Z15
	VBROADCASTSD expTab<>+32(SB), Z14
	VBROADCASTSD expTab<>+24(SB), Z13
	VBROADCASTSD expTab<>+16(SB), Z12
	VBROADCASTSD expTab<>+8(SB), Z11
	VBROADCASTSD expTab<>+0(SB), Z10
	XORQ AX, AX

sxloop:
	MOVQ CX, DX
	SUBQ AX, DX
	JLE  sxdone
	MOVL $0xffff, R8
	CMPQ DX, $16
	JGE  sxfull
	MOVL  $1, R8
	SHLXL DX, R8, R8
	SUBL  $1, R8

sxfull:
	KMOVW R8, K1
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VSUBPS    Z31, Z0, Z0
	VCMPPS    $0x1d, Z24, Z0, K2
	VCMPPS    $0x12, Z23, Z0, K3
	KANDW     K2, K3, K2
	VCMPPS    $0x11, Z22, Z0, K3
	VCVTPS2PD Y0, Z1
	VEXTRACTF32X8 $1, Z0, Y2
	VCVTPS2PD Y2, Z2
	EXPHALF(Z1, Z3, Z5, Z7)
	EXPHALF(Z2, Z4, Z6, Z8)
	MIDPOINT(Z7, Z1, K4)
	MIDPOINT(Z8, Z2, K5)
	KUNPCKBW K4, K5, K4
	VCVTPD2PS Z7, Y7
	VCVTPD2PS Z8, Y8
	VINSERTF32X8 $1, Y8, Z7, Z7
	VXORPS    Z0, Z0, Z0
	VMOVAPS   Z0, K3, Z7
	// exact lanes: (in range and not near a midpoint) or below -104.
	KANDNW    K2, K4, K2
	KORW      K3, K2, K2
	KANDNW    K1, K2, K5
	KORTESTW  K5, K5
	JNE       sxdone
	VMOVUPS   Z7, K1, (SI)(AX*4)
	VCVTPS2PD Y7, Z1
	VEXTRACTF32X8 $1, Z7, Y2
	VCVTPS2PD Y2, Z2
	VMOVUPD   Z1, 0(SP)
	VMOVUPD   Z2, 64(SP)
	MOVQ      $16, R9
	CMPQ      DX, R9
	CMOVQLT   DX, R9
	XORQ      R10, R10

sxsum:
	VADDSD (SP)(R10*8), X9, X9
	INCQ   R10
	CMPQ   R10, R9
	JLT    sxsum
	ADDQ   $16, AX
	JMP    sxloop

sxdone:
	CMPQ    AX, CX
	CMOVQGT CX, AX
	VMOVSD  X9, (DI)
	MOVQ    AX, ret+32(FP)
	VZEROUPPER
	RET

// func maxF32(s *float32, n int) float32
// The largest of s[:n] (n >= 1), as VMAXPS finds it.
TEXT ·maxF32(SB), NOSPLIT, $0-20
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS expTab<>+156(SB), Z0
	VMOVAPS Z0, Z2
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9

mxloop:
	CMPQ   AX, R9
	JGE    mxtail
	VMAXPS (SI)(AX*4), Z0, Z0
	ADDQ   $16, AX
	JMP    mxloop

mxtail:
	CMPQ AX, CX
	JGE  mxreduce
	TAILMASK(R8)
	VMOVUPS (SI)(AX*4), K1, Z2
	VMAXPS  Z2, Z0, Z0

mxreduce:
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

// func mulF32(s *float32, n int, c float32)
// s[i] *= c for i < n.
TEXT ·mulF32(SB), NOSPLIT, $0-20
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS c+16(FP), Z1
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9

mlloop:
	CMPQ    AX, R9
	JGE     mltail
	VMULPS  (SI)(AX*4), Z1, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     mlloop

mltail:
	CMPQ AX, CX
	JGE  mldone
	TAILMASK(R8)
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMULPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (SI)(AX*4)

mldone:
	VZEROUPPER
	RET

// expfV's constants (kernels.go): the 1.5*2^23 shift, 1/ln2, ln2's low
// and high parts, the |n| bound, the polynomial's p0..p4, 1 and +Inf.
DATA expfvTab<>+0(SB)/4, $0x4b400000
DATA expfvTab<>+4(SB)/4, $0x3fb8aa3b
DATA expfvTab<>+8(SB)/4, $0x35bfbe8e
DATA expfvTab<>+12(SB)/4, $0x3f317200
DATA expfvTab<>+16(SB)/4, $0x43400000
DATA expfvTab<>+20(SB)/4, $0x3c072010
DATA expfvTab<>+24(SB)/4, $0x3d2b9f17
DATA expfvTab<>+28(SB)/4, $0x3e2aaf33
DATA expfvTab<>+32(SB)/4, $0x3efffedb
DATA expfvTab<>+36(SB)/4, $0x3f7ffff6
DATA expfvTab<>+40(SB)/4, $0x3f800000
DATA expfvTab<>+44(SB)/4, $0x7f800000
DATA expfvTab<>+48(SB)/4, $0x7fffffff
GLOBL expfvTab<>(SB), RODATA|NOPTR, $52

// EXPFVSETUP broadcasts expfvTab into Z20..Z31 (Z20 shift, Z21 1/ln2,
// Z22 ln2 low, Z23 ln2 high, Z24 192, Z25..Z29 p0..p4, Z30 1, Z31 +Inf)
// and the |x| mask into Z19.
#define EXPFVSETUP \
	VBROADCASTSS expfvTab<>+0(SB), Z20; \
	VBROADCASTSS expfvTab<>+4(SB), Z21; \
	VBROADCASTSS expfvTab<>+8(SB), Z22; \
	VBROADCASTSS expfvTab<>+12(SB), Z23; \
	VBROADCASTSS expfvTab<>+16(SB), Z24; \
	VBROADCASTSS expfvTab<>+20(SB), Z25; \
	VBROADCASTSS expfvTab<>+24(SB), Z26; \
	VBROADCASTSS expfvTab<>+28(SB), Z27; \
	VBROADCASTSS expfvTab<>+32(SB), Z28; \
	VBROADCASTSS expfvTab<>+36(SB), Z29; \
	VBROADCASTSS expfvTab<>+40(SB), Z30; \
	VBROADCASTSS expfvTab<>+44(SB), Z31; \
	VPBROADCASTD expfvTab<>+48(SB), Z19

// EXPFV leaves expfV(x) of the 16 lanes of x in res, every operation
// expfV's (ggml_v_expf's), lanes with |n| > 192 set to 0 (n <= 0) or +Inf.
// Needs EXPFVSETUP's registers and Z18 = 0; clobbers Z1..Z6, K2, K3.
#define EXPFV(x, res) \
	VMOVAPS      Z20, Z1; \
	VFMADD231PS  Z21, x, Z1; \
	VSUBPS       Z20, Z1, Z1; \
	VMOVAPS      x, Z2; \
	VFNMADD231PS Z23, Z1, Z2; \
	VFNMADD231PS Z22, Z1, Z2; \
	VPANDD       Z19, Z1, Z3; \
	VCMPPS       $0x1e, Z24, Z3, K2; \
	VMULPS       Z2, Z2, Z3; \
	VMOVAPS      Z26, Z4; \
	VFMADD231PS  Z2, Z25, Z4; \
	VMOVAPS      Z28, Z5; \
	VFMADD231PS  Z2, Z27, Z5; \
	VFMADD213PS  Z5, Z3, Z4; \
	VMOVAPS      Z30, Z6; \
	VFMADD231PS  Z2, Z29, Z6; \
	VFMADD213PS  Z6, Z3, Z4; \
	VSCALEFPS    Z1, Z4, res; \
	VCMPPS       $0x12, Z18, Z1, K3; \
	VMOVAPS      Z31, Z5; \
	VMOVAPS      Z18, K3, Z5; \
	VMOVAPS      Z5, K2, res

// func swigluV16(out, gate, up *float32, n16 int)
// out[i] = siluV(gate[i]) * up[i] for i < 16*n16, bit for bit siluV's
// (ggml_v_silu's) operations.
TEXT ·swigluV16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), BX
	MOVQ n16+24(FP), CX
	EXPFVSETUP
	VPXORD Z18, Z18, Z18
	TESTQ  CX, CX
	JEQ    swvdone
swvloop:
	VMOVUPS (SI), Z0
	VSUBPS  Z0, Z18, Z7
	EXPFV(Z7, Z8)
	VADDPS  Z30, Z8, Z8
	VDIVPS  Z8, Z0, Z8
	VMULPS  (BX), Z8, Z8
	VMOVUPS Z8, (DI)
	ADDQ    $64, SI
	ADDQ    $64, BX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     swvloop
swvdone:
	VZEROUPPER
	RET

// func roundF16(dst, src *float32, n int)
// dst[i] = src[i] rounded to the nearest f16 value (ties to even), as a
// float32, for i < n rounded down to a multiple of 16.
TEXT ·roundF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  rf16done

rf16loop:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1
	VCVTPH2PS Y1, Z1
	VMOVUPS   Z1, (DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       rf16loop

rf16done:
	VZEROUPPER
	RET

// func quantQ8(x *float32, nb int, xu *byte, d *float32)
// quantizeQ8 of the nb blocks of 32 values at x, bit for bit, storing each
// quant plus 128 as an unsigned byte (xu, nb*32 bytes) and each block scale
// (d, nb float32), as prepTask does.
TEXT ·quantQ8(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ xu+16(FP), DI
	MOVQ d+24(FP), DX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z13
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y14
	MOVL $0x42fe0000, AX
	VMOVD AX, X15
	TESTQ CX, CX
	JEQ   qqdone

qqloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VANDPS  Z13, Z0, Z2
	VANDPS  Z13, Z1, Z3
	VMAXPS  Z3, Z2, Z2
	VEXTRACTF32X8 $1, Z2, Y3
	VMAXPS        Y3, Y2, Y2
	VEXTRACTF128  $1, Y2, X3
	VMAXPS        X3, X2, X2
	VMOVHLPS      X2, X2, X3
	VMAXPS        X3, X2, X2
	VMOVSHDUP     X2, X3
	VMAXSS        X3, X2, X2
	VDIVSS        X15, X2, X4
	VCVTPS2PH     $0, X4, X5
	VCVTPH2PS     X5, X5
	VMOVSS        X5, (DX)
	VXORPS        X6, X6, X6
	VUCOMISS      X6, X2
	JEQ           qqzero
	VDIVSS        X2, X15, X6

qqzero:
	VBROADCASTSS X6, Z6
	VMULPS       Z6, Z0, Z0
	VMULPS       Z6, Z1, Z1
	VCVTPS2DQ    Z0, Z0
	VCVTPS2DQ    Z1, Z1
	VPMOVDB      Z0, X0
	VPMOVDB      Z1, X1
	VINSERTI128  $1, X1, Y0, Y0
	VPXOR        Y14, Y0, Y0
	VMOVDQU      Y0, (DI)
	ADDQ         $128, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          qqloop

qqdone:
	VZEROUPPER
	RET

// func sumSquares(x *float32, n int) float64
// The float64 sum of float64(x[i]*x[i]) for i < n, added in order, as
// rmsNorm does (one add chain; the products and conversions run ahead).
TEXT ·sumSquares(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPD X0, X0, X0
	TESTQ  CX, CX
	JEQ    ssqdone
ssqloop:
	VMOVSS    (SI), X1
	VMULSS    X1, X1, X1
	VCVTSS2SD X1, X1, X1
	VADDSD    X1, X0, X0
	ADDQ $4, SI
	DECQ CX
	JNZ  ssqloop
ssqdone:
	VMOVSD X0, ret+16(FP)
	RET

// func scaleMul(dst, x, w *float32, n int, s float32)
// dst[i] = (x[i] * s) * w[i] for i < n: the second loop of rmsNorm.
TEXT ·scaleMul(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), BX
	MOVQ n+24(FP), CX
	VBROADCASTSS s+32(FP), Z1
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9
smloop:
	CMPQ    AX, R9
	JGE     smtail
	VMULPS  (SI)(AX*4), Z1, Z0
	VMULPS  (BX)(AX*4), Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     smloop
smtail:
	CMPQ AX, CX
	JGE  smdone
	TAILMASK(R8)
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMULPS    Z1, Z0, Z0
	VMOVUPS.Z (BX)(AX*4), K1, Z2
	VMULPS    Z2, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(AX*4)
smdone:
	VZEROUPPER
	RET
