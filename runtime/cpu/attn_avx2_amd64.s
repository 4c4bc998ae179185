#include "textflag.h"

// AVX2 + FMA versions of the attention kernels of attn_amd64.s, bit for bit
// the same results: every 16-lane vector there is two 8-lane halves here
// (lanes 0..7, 8..15) with the same fused multiply-adds in the same order
// and the same reduction trees; masked lanes become VMASKMOVPS and blends;
// VSCALEFPS becomes two exact power-of-two products (see EXPFV2).

// expfV's constants, as in attn_amd64.s: the 1.5*2^23 shift, 1/ln2, ln2's
// low and high parts, the |n| bound, the polynomial's p0..p4, 1, +Inf, the
// |x| mask and the exponent bias 127.
DATA expfvTab2<>+0(SB)/4, $0x4b400000
DATA expfvTab2<>+4(SB)/4, $0x3fb8aa3b
DATA expfvTab2<>+8(SB)/4, $0x35bfbe8e
DATA expfvTab2<>+12(SB)/4, $0x3f317200
DATA expfvTab2<>+16(SB)/4, $0x43400000
DATA expfvTab2<>+20(SB)/4, $0x3c072010
DATA expfvTab2<>+24(SB)/4, $0x3d2b9f17
DATA expfvTab2<>+28(SB)/4, $0x3e2aaf33
DATA expfvTab2<>+32(SB)/4, $0x3efffedb
DATA expfvTab2<>+36(SB)/4, $0x3f7ffff6
DATA expfvTab2<>+40(SB)/4, $0x3f800000
DATA expfvTab2<>+44(SB)/4, $0x7f800000
DATA expfvTab2<>+48(SB)/4, $0x7fffffff
DATA expfvTab2<>+52(SB)/4, $127
GLOBL expfvTab2<>(SB), RODATA|NOPTR, $56

// laneTab2: at 0 the bit of each lane l < 16 (1<<l), at 64 sixteen all-ones
// lanes then sixteen zero lanes (the tail masks), at 192 -Inf.
DATA laneTab2<>+0(SB)/4, $0x1
DATA laneTab2<>+4(SB)/4, $0x2
DATA laneTab2<>+8(SB)/4, $0x4
DATA laneTab2<>+12(SB)/4, $0x8
DATA laneTab2<>+16(SB)/4, $0x10
DATA laneTab2<>+20(SB)/4, $0x20
DATA laneTab2<>+24(SB)/4, $0x40
DATA laneTab2<>+28(SB)/4, $0x80
DATA laneTab2<>+32(SB)/4, $0x100
DATA laneTab2<>+36(SB)/4, $0x200
DATA laneTab2<>+40(SB)/4, $0x400
DATA laneTab2<>+44(SB)/4, $0x800
DATA laneTab2<>+48(SB)/4, $0x1000
DATA laneTab2<>+52(SB)/4, $0x2000
DATA laneTab2<>+56(SB)/4, $0x4000
DATA laneTab2<>+60(SB)/4, $0x8000
DATA laneTab2<>+64(SB)/8, $-1
DATA laneTab2<>+72(SB)/8, $-1
DATA laneTab2<>+80(SB)/8, $-1
DATA laneTab2<>+88(SB)/8, $-1
DATA laneTab2<>+96(SB)/8, $-1
DATA laneTab2<>+104(SB)/8, $-1
DATA laneTab2<>+112(SB)/8, $-1
DATA laneTab2<>+120(SB)/8, $-1
DATA laneTab2<>+128(SB)/8, $0
DATA laneTab2<>+136(SB)/8, $0
DATA laneTab2<>+144(SB)/8, $0
DATA laneTab2<>+152(SB)/8, $0
DATA laneTab2<>+160(SB)/8, $0
DATA laneTab2<>+168(SB)/8, $0
DATA laneTab2<>+176(SB)/8, $0
DATA laneTab2<>+184(SB)/8, $0
DATA laneTab2<>+192(SB)/4, $0xff800000
GLOBL laneTab2<>(SB), RODATA|NOPTR, $196

// softmaxVAVX2's frame holds expfV's constants broadcast, 32 bytes each.
#define EX_SHIFT 0(SP)
#define EX_INVLN2 32(SP)
#define EX_LN2LO 64(SP)
#define EX_LN2HI 96(SP)
#define EX_BOUND 128(SP)
#define EX_P0 160(SP)
#define EX_P1 192(SP)
#define EX_P2 224(SP)
#define EX_P3 256(SP)
#define EX_P4 288(SP)
#define EX_ONE 320(SP)
#define EX_INF 352(SP)
#define EX_ABS 384(SP)
#define EX_BIAS 416(SP)

// Argument blocks (struct offsets; see scoreArgs and valueArgs in attention.go).
#define SA_Q 0
#define SA_OUT 16
#define SA_PCHUNK 48
#define SA_K 80
#define SA_KOFFS 88
#define SA_NC 96
#define SA_CSTEP 104
#define SA_KSTRIDE 112
#define SA_STEPS 120
#define SA_REST 128
#define SA_SCALE 136

#define VA_W 0
#define VA_ACC 32
#define VA_N 64
#define VA_V 96
#define VA_VOFFS 104
#define VA_VROW 112
#define VA_NMIN 120
#define VA_NMAX 128
#define VA_ACCSTRIDE 136
#define VA_MASK 144

// TAILMASK2(lo, hi) sets lo and hi to the lane masks of the low CX - AX
// (1..16) lanes of 16 (clobbers DX, R8).
#define TAILMASK2(lo, hi) \
	MOVQ    $16, DX; \
	SUBQ    CX, DX; \
	ADDQ    AX, DX; \
	LEAQ    laneTab2<>+64(SB), R8; \
	VMOVDQU (R8)(DX*4), lo; \
	VMOVDQU 32(R8)(DX*4), hi

// LANEMASKS(gpr, x, lo, hi) sets lo (x its low 128 bits) and hi to the
// lane masks of the 16-bit lane set in gpr.
#define LANEMASKS(gpr, x, lo, hi) \
	VMOVQ        gpr, x; \
	VPBROADCASTD x, lo; \
	VMOVDQA      lo, hi; \
	VPAND        laneTab2<>+0(SB), lo, lo; \
	VPCMPEQD     laneTab2<>+0(SB), lo, lo; \
	VPAND        laneTab2<>+32(SB), hi, hi; \
	VPCMPEQD     laneTab2<>+32(SB), hi, hi

// The score kernel takes its 4 pairs p (query a.q[p/2], chunk c +
// a.pchunk[p]) one at a time: R10 = the pair's K (dimension i at
// +i*kstride), R8 = its query. Per dimension residue r, chain k of half h
// is Y(2k+h); tree partials are Y9/Y10, Y11/Y12, Y13/Y14 (lo/hi).

// SCHAIN2(lbl, r) leaves in Y0 (lo) and Y1 (hi) the pair's
// (c0+c2)+(c1+c3) for dimension residue r, ck = the fma chain (from zero)
// over the steps s of dim 64s+16k+r. DX, SI, DI = 16, 48, 64 kstride.
// Clobbers AX, R11, R12, Y0..Y8.
#define SCHAIN2(lbl, r) \
	MOVQ   $r, R11; \
	IMULQ  SA_KSTRIDE(BX), R11; \
	ADDQ   R10, R11; \
	LEAQ   (4*r)(R8), R12; \
	MOVQ   SA_STEPS(BX), AX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
lbl: \
	VBROADCASTSS 0(R12), Y8; \
	VFMADD231PS  (R11), Y8, Y0; \
	VFMADD231PS  32(R11), Y8, Y1; \
	VBROADCASTSS 64(R12), Y8; \
	VFMADD231PS  (R11)(DX*1), Y8, Y2; \
	VFMADD231PS  32(R11)(DX*1), Y8, Y3; \
	VBROADCASTSS 128(R12), Y8; \
	VFMADD231PS  (R11)(DX*2), Y8, Y4; \
	VFMADD231PS  32(R11)(DX*2), Y8, Y5; \
	VBROADCASTSS 192(R12), Y8; \
	VFMADD231PS  (R11)(SI*1), Y8, Y6; \
	VFMADD231PS  32(R11)(SI*1), Y8, Y7; \
	ADDQ         DI, R11; \
	ADDQ         $256, R12; \
	DECQ         AX; \
	JNZ          lbl; \
	VADDPS       Y4, Y0, Y0; \
	VADDPS       Y6, Y2, Y2; \
	VADDPS       Y2, Y0, Y0; \
	VADDPS       Y5, Y1, Y1; \
	VADDPS       Y7, Y3, Y3; \
	VADDPS       Y3, Y1, Y1

// TSET2(a, b) sets a partial (lo a, hi b) to SCHAIN2's result; TADD2 adds
// the result to it; TCOMB2(a, b, e, f) adds partial e, f into a, b.
#define TSET2(a, b) \
	VMOVAPS Y0, a; \
	VMOVAPS Y1, b

#define TADD2(a, b) \
	VADDPS Y0, a, a; \
	VADDPS Y1, b, b

#define TCOMB2(a, b, e, f) \
	VADDPS e, a, a; \
	VADDPS f, b, b

// func attnScoresAVX2(a *scoreArgs)
// attnScores: for chunks c = 0, a.cstep, ... below a.nc and the 4 pairs p:
// a.out[p][16(c+a.pchunk[p]) + l] = dotVecF32(K lane l, q) * a.scale.
TEXT ·attnScoresAVX2(SB), NOSPLIT, $64-8
	MOVQ a+0(FP), BX
	MOVQ SA_KSTRIDE(BX), DX
	SHLQ $4, DX
	LEAQ (DX)(DX*2), SI
	MOVQ DX, DI
	SHLQ $2, DI
	XORQ CX, CX

schunk:
	CMPQ CX, SA_NC(BX)
	JGE  sdone
	XORQ R9, R9

spair:
	MOVQ SA_PCHUNK(BX)(R9*8), R14
	ADDQ CX, R14
	MOVQ SA_KOFFS(BX), R10
	MOVQ (R10)(R14*8), R14
	MOVQ SA_K(BX), R10
	LEAQ (R10)(R14*4), R10
	MOVQ R9, R14
	SHRQ $1, R14
	MOVQ SA_Q(BX)(R14*8), R8
	CMPQ SA_STEPS(BX), $0
	JEQ  snotree

	// reduce16 over r, as attnScores: (T0 + T2) + (T1 + T3).
	SCHAIN2(sr0, 0)
	TSET2(Y9, Y10)
	SCHAIN2(sr8, 8)
	TADD2(Y9, Y10)
	SCHAIN2(sr4, 4)
	TSET2(Y11, Y12)
	SCHAIN2(sr12, 12)
	TADD2(Y11, Y12)
	TCOMB2(Y9, Y10, Y11, Y12)
	SCHAIN2(sr2, 2)
	TSET2(Y11, Y12)
	SCHAIN2(sr10, 10)
	TADD2(Y11, Y12)
	SCHAIN2(sr6, 6)
	TSET2(Y13, Y14)
	SCHAIN2(sr14, 14)
	TADD2(Y13, Y14)
	TCOMB2(Y11, Y12, Y13, Y14)
	TCOMB2(Y9, Y10, Y11, Y12)
	VMOVUPS Y9, 0(SP)
	VMOVUPS Y10, 32(SP)
	SCHAIN2(sr1, 1)
	TSET2(Y9, Y10)
	SCHAIN2(sr9, 9)
	TADD2(Y9, Y10)
	SCHAIN2(sr5, 5)
	TSET2(Y11, Y12)
	SCHAIN2(sr13, 13)
	TADD2(Y11, Y12)
	TCOMB2(Y9, Y10, Y11, Y12)
	SCHAIN2(sr3, 3)
	TSET2(Y11, Y12)
	SCHAIN2(sr11, 11)
	TADD2(Y11, Y12)
	SCHAIN2(sr7, 7)
	TSET2(Y13, Y14)
	SCHAIN2(sr15, 15)
	TADD2(Y13, Y14)
	TCOMB2(Y11, Y12, Y13, Y14)
	TCOMB2(Y9, Y10, Y11, Y12)
	VMOVUPS 0(SP), Y8
	VADDPS  Y9, Y8, Y9
	VMOVUPS 32(SP), Y8
	VADDPS  Y10, Y8, Y10
	JMP     srest

snotree:
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10

srest:
	// The dims from np = 64*steps on: one fma chain each.
	MOVQ  SA_REST(BX), AX
	TESTQ AX, AX
	JEQ   sscale
	MOVQ  SA_STEPS(BX), R14
	SHLQ  $6, R14
	LEAQ  (R8)(R14*4), R12
	IMULQ SA_KSTRIDE(BX), R14
	LEAQ  (R10)(R14*1), R11
	MOVQ  SA_KSTRIDE(BX), R14

srestloop:
	VBROADCASTSS (R12), Y8
	VFMADD231PS  (R11), Y8, Y9
	VFMADD231PS  32(R11), Y8, Y10
	ADDQ         $4, R12
	ADDQ         R14, R11
	DECQ         AX
	JNZ          srestloop

sscale:
	VBROADCASTSS SA_SCALE(BX), Y8
	VMULPS       Y8, Y9, Y9
	VMULPS       Y8, Y10, Y10
	MOVQ         SA_PCHUNK(BX)(R9*8), R14
	ADDQ         CX, R14
	SHLQ         $6, R14
	ADDQ         SA_OUT(BX)(R9*8), R14
	VMOVUPS      Y9, (R14)
	VMOVUPS      Y10, 32(R14)
	INCQ         R9
	CMPQ         R9, $4
	JLT          spair
	ADDQ         SA_CSTEP(BX), CX
	JMP          schunk

sdone:
	VZEROUPPER
	RET

#define EXBCAST(off, dst) \
	VBROADCASTSS expfvTab2<>+off(SB), Y0; \
	VMOVUPS      Y0, dst

// EXPFV2(x, res) leaves expfV(x) of the 8 lanes of x in res, every
// operation EXPFV's; VSCALEFPS(j, n) is (j * 2^(n>>1)) * 2^(n - n>>1),
// the first product exact (j is near 1, both powers normal for |n| <= 192)
// and the second the one rounding of j * 2^n. Lanes with |n| > 192 are 0
// (n <= 0) or +Inf. Needs the EX_ frame; clobbers Y1..Y6.
#define EXPFV2(x, res) \
	VMOVUPS      EX_SHIFT, Y1; \
	VFMADD231PS  EX_INVLN2, x, Y1; \
	VSUBPS       EX_SHIFT, Y1, Y1; \
	VMOVAPS      x, Y2; \
	VFNMADD231PS EX_LN2HI, Y1, Y2; \
	VFNMADD231PS EX_LN2LO, Y1, Y2; \
	VANDPS       EX_ABS, Y1, Y3; \
	VCMPPS       $0x1e, EX_BOUND, Y3, Y3; \
	VMULPS       Y2, Y2, Y4; \
	VMOVUPS      EX_P1, Y5; \
	VFMADD231PS  EX_P0, Y2, Y5; \
	VMOVUPS      EX_P3, Y6; \
	VFMADD231PS  EX_P2, Y2, Y6; \
	VFMADD213PS  Y6, Y4, Y5; \
	VMOVUPS      EX_ONE, Y6; \
	VFMADD231PS  EX_P4, Y2, Y6; \
	VFMADD213PS  Y6, Y4, Y5; \
	VCVTTPS2DQ   Y1, Y4; \
	VPSRAD       $1, Y4, Y6; \
	VPSUBD       Y6, Y4, Y4; \
	VPADDD       EX_BIAS, Y6, Y6; \
	VPSLLD       $23, Y6, Y6; \
	VPADDD       EX_BIAS, Y4, Y4; \
	VPSLLD       $23, Y4, Y4; \
	VMULPS       Y6, Y5, Y5; \
	VMULPS       Y4, Y5, Y5; \
	VXORPS       Y6, Y6, Y6; \
	VCMPPS       $0x12, Y6, Y1, Y4; \
	VMOVUPS      EX_INF, Y2; \
	VBLENDVPS    Y4, Y6, Y2, Y2; \
	VBLENDVPS    Y3, Y2, Y5, res

// func softmaxVAVX2(s *float32, n int)
// softmaxV: softmaxInPlace(s[:n]) (n >= 1), bit for bit.
TEXT ·softmaxVAVX2(SB), NOSPLIT, $448-16
	EXBCAST(0, EX_SHIFT)
	EXBCAST(4, EX_INVLN2)
	EXBCAST(8, EX_LN2LO)
	EXBCAST(12, EX_LN2HI)
	EXBCAST(16, EX_BOUND)
	EXBCAST(20, EX_P0)
	EXBCAST(24, EX_P1)
	EXBCAST(28, EX_P2)
	EXBCAST(32, EX_P3)
	EXBCAST(36, EX_P4)
	EXBCAST(40, EX_ONE)
	EXBCAST(44, EX_INF)
	EXBCAST(48, EX_ABS)
	EXBCAST(52, EX_BIAS)
	MOVQ         s+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS laneTab2<>+192(SB), Y0
	VMOVAPS      Y0, Y1
	XORQ         AX, AX
	MOVQ         CX, R9
	ANDQ         $-16, R9

smxloop:
	CMPQ   AX, R9
	JGE    smxtail
	VMAXPS (SI)(AX*4), Y0, Y0
	VMAXPS 32(SI)(AX*4), Y1, Y1
	ADDQ   $16, AX
	JMP    smxloop

smxtail:
	CMPQ         AX, CX
	JGE          smxreduce
	TAILMASK2(Y12, Y13)
	VMASKMOVPS   (SI)(AX*4), Y12, Y2
	VMASKMOVPS   32(SI)(AX*4), Y13, Y3
	VBROADCASTSS laneTab2<>+192(SB), Y4
	VBLENDVPS    Y12, Y2, Y4, Y2
	VBLENDVPS    Y13, Y3, Y4, Y3
	VMAXPS       Y2, Y0, Y0
	VMAXPS       Y3, Y1, Y1

smxreduce:
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VBROADCASTSS X0, Y14
	VXORPD       X11, X11, X11
	XORQ         AX, AX

sexloop:
	CMPQ    AX, CX
	JGE     sexdone
	MOVQ    CX, DX
	SUBQ    AX, DX
	CMPQ    DX, $16
	JLT     sexpart
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y7
	VSUBPS  Y14, Y0, Y0
	VSUBPS  Y14, Y7, Y7
	EXPFV2(Y0, Y8)
	EXPFV2(Y7, Y9)
	VMOVUPS Y8, (SI)(AX*4)
	VMOVUPS Y9, 32(SI)(AX*4)
	JMP     sexsum

sexpart:
	TAILMASK2(Y12, Y13)
	VMASKMOVPS (SI)(AX*4), Y12, Y0
	VMASKMOVPS 32(SI)(AX*4), Y13, Y7
	VSUBPS     Y14, Y0, Y0
	VSUBPS     Y14, Y7, Y7
	EXPFV2(Y0, Y8)
	EXPFV2(Y7, Y9)
	VANDPS     Y12, Y8, Y8
	VANDPS     Y13, Y9, Y9
	VMASKMOVPS Y8, Y12, (SI)(AX*4)
	VMASKMOVPS Y9, Y13, 32(SI)(AX*4)

sexsum:
	VADDPS       Y9, Y8, Y9
	VEXTRACTF128 $1, Y9, X10
	VADDPS       X10, X9, X9
	VMOVHLPS     X9, X9, X10
	VADDPS       X10, X9, X9
	VMOVSHDUP    X9, X10
	VADDSS       X10, X9, X9
	VCVTSS2SD    X9, X9, X9
	VADDSD       X9, X11, X11
	ADDQ         $16, AX
	JMP          sexloop

sexdone:
	MOVQ         $0x3ff0000000000000, R8
	VMOVQ        R8, X12
	VDIVSD       X11, X12, X12
	VCVTSD2SS    X12, X12, X12
	VBROADCASTSS X12, Y15
	XORQ         AX, AX

smlloop:
	CMPQ    AX, R9
	JGE     smltail
	VMULPS  (SI)(AX*4), Y15, Y0
	VMULPS  32(SI)(AX*4), Y15, Y1
	VMOVUPS Y0, (SI)(AX*4)
	VMOVUPS Y1, 32(SI)(AX*4)
	ADDQ    $16, AX
	JMP     smlloop

smltail:
	CMPQ       AX, CX
	JGE        smldone
	TAILMASK2(Y12, Y13)
	VMASKMOVPS (SI)(AX*4), Y12, Y0
	VMASKMOVPS 32(SI)(AX*4), Y13, Y1
	VMULPS     Y15, Y0, Y0
	VMULPS     Y15, Y1, Y1
	VMASKMOVPS Y0, Y12, (SI)(AX*4)
	VMASKMOVPS Y1, Y13, 32(SI)(AX*4)

smldone:
	VZEROUPPER
	RET

// The value kernels: position j = 16m + r (chunk m, row r) is class r;
// its V row is at a.v + 4*a.voffs[m] + r*a.vrow, its weight a.w[j]. A pass
// takes row r (R8) of the chunks m = 0, 1, ... (R10 = m) with each class's
// chain in registers, as many dims as the kernel's registers hold.

// VJ2 sets R12 = j = 16m + r.
#define VJ2 \
	MOVQ R10, R12; \
	SHLQ $4, R12; \
	ADDQ R8, R12

// VROW2(off) sets R11 to the V row of (m, r) plus off bytes (clobbers DI).
#define VROW2(off) \
	MOVQ  VA_VOFFS(BX), R11; \
	MOVQ  (R11)(R10*8), R11; \
	MOVQ  VA_V(BX), DI; \
	LEAQ  (DI)(R11*4), R11; \
	MOVQ  R8, DI; \
	IMULQ DX, DI; \
	ADDQ  DI, R11; \
	ADDQ  off, R11

// VCLASS2 sets R11 to 64 times class r (the class's byte offset in a dim
// vector's accumulators).
#define VCLASS2 \
	MOVQ R8, R11; \
	SHLQ $6, R11

#define VZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// func attnValues4AVX2(a *valueArgs)
// attnValues4: for the 64 dims at a.v and each class c: a.acc + 64c +
// k*a.accStride (dim vector k < 4) = the fma chain (from zero) of w_j * V_j
// over the class's positions j < a.n[0] in order.
TEXT ·attnValues4AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_VROW(BX), DX
	MOVQ VA_ACCSTRIDE(BX), SI
	MOVQ VA_W(BX), CX
	MOVQ VA_N(BX), R13
	XORQ R8, R8

a4row:
	VZERO8
	XORQ R10, R10

a4chunk:
	VJ2
	CMPQ         R12, R13
	JGE          a4store
	VROW2($0)
	VBROADCASTSS (CX)(R12*4), Y8
	VFMADD231PS  (R11), Y8, Y0
	VFMADD231PS  32(R11), Y8, Y1
	VFMADD231PS  64(R11), Y8, Y2
	VFMADD231PS  96(R11), Y8, Y3
	VFMADD231PS  128(R11), Y8, Y4
	VFMADD231PS  160(R11), Y8, Y5
	VFMADD231PS  192(R11), Y8, Y6
	VFMADD231PS  224(R11), Y8, Y7
	INCQ         R10
	JMP          a4chunk

a4store:
	VCLASS2
	ADDQ    VA_ACC(BX), R11
	LEAQ    (SI)(SI*2), R12
	VMOVUPS Y0, (R11)
	VMOVUPS Y1, 32(R11)
	VMOVUPS Y2, (R11)(SI*1)
	VMOVUPS Y3, 32(R11)(SI*1)
	VMOVUPS Y4, (R11)(SI*2)
	VMOVUPS Y5, 32(R11)(SI*2)
	VMOVUPS Y6, (R11)(R12*1)
	VMOVUPS Y7, 32(R11)(R12*1)
	INCQ    R8
	CMPQ    R8, $16
	JLT     a4row
	VZEROUPPER
	RET

// func attnValues1AVX2(a *valueArgs)
// attnValues1: attnValues4AVX2 for the one vector of dims at a.v whose
// lanes a.mask selects (the others stay 0).
TEXT ·attnValues1AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_MASK(BX), R11
	LANEMASKS(R11, X12, Y12, Y13)
	MOVQ VA_VROW(BX), DX
	MOVQ VA_W(BX), CX
	MOVQ VA_N(BX), R13
	XORQ R8, R8

a1row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   R10, R10

a1chunk:
	VJ2
	CMPQ         R12, R13
	JGE          a1store
	VROW2($0)
	VBROADCASTSS (CX)(R12*4), Y8
	VMASKMOVPS   (R11), Y12, Y2
	VMASKMOVPS   32(R11), Y13, Y3
	VFMADD231PS  Y2, Y8, Y0
	VFMADD231PS  Y3, Y8, Y1
	INCQ         R10
	JMP          a1chunk

a1store:
	VCLASS2
	ADDQ    VA_ACC(BX), R11
	VMOVUPS Y0, (R11)
	VMOVUPS Y1, 32(R11)
	INCQ    R8
	CMPQ    R8, $16
	JLT     a1row
	VZEROUPPER
	RET

// QFMA2(wp, a, b) adds to a, b (lo, hi) the V row in Y8, Y9 times query
// weights wp's weight j (R12).
#define QFMA2(wp, a, b) \
	VBROADCASTSS (wp)(R12*4), Y10; \
	VFMADD231PS  Y8, Y10, a; \
	VFMADD231PS  Y9, Y10, b

// QSTORE2(u, a, b) stores a, b (lo, hi) at query u's accumulators of the
// class at offset R11, dim vector offset DI (R12 clobbered).
#define QSTORE2(u, a, b) \
	MOVQ    VA_ACC+(8*u)(BX), R12; \
	ADDQ    R11, R12; \
	VMOVUPS a, (R12)(DI*1); \
	VMOVUPS b, 32(R12)(DI*1)

// func attnValues4qAVX2(a *valueArgs)
// attnValues4q: attnValues4AVX2 for 4 query vectors (weights a.w[u],
// positions below a.n[u], accumulators a.acc[u]), one 16-dim vector (SI =
// its byte offset in the row) of one row a pass, the V row shared.
TEXT ·attnValues4qAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_W+0(BX), CX
	MOVQ VA_W+8(BX), AX
	MOVQ VA_W+16(BX), R13
	MOVQ VA_W+24(BX), R14
	MOVQ VA_VROW(BX), DX
	XORQ SI, SI

q4vec:
	XORQ R8, R8

q4row:
	VZERO8
	XORQ R10, R10

q4chunk:
	VJ2
	CMPQ    R12, VA_NMAX(BX)
	JGE     q4store
	VROW2(SI)
	VMOVUPS (R11), Y8
	VMOVUPS 32(R11), Y9
	CMPQ    R12, VA_NMIN(BX)
	JGE     q4slow
	QFMA2(CX, Y0, Y1)
	QFMA2(AX, Y2, Y3)
	QFMA2(R13, Y4, Y5)
	QFMA2(R14, Y6, Y7)

q4next:
	INCQ R10
	JMP  q4chunk

q4slow:
	CMPQ R12, VA_N+0(BX)
	JGE  q4s1
	QFMA2(CX, Y0, Y1)

q4s1:
	CMPQ R12, VA_N+8(BX)
	JGE  q4s2
	QFMA2(AX, Y2, Y3)

q4s2:
	CMPQ R12, VA_N+16(BX)
	JGE  q4s3
	QFMA2(R13, Y4, Y5)

q4s3:
	CMPQ R12, VA_N+24(BX)
	JGE  q4next
	QFMA2(R14, Y6, Y7)
	JMP  q4next

q4store:
	VCLASS2
	MOVQ  SI, DI
	SHRQ  $6, DI
	IMULQ VA_ACCSTRIDE(BX), DI
	QSTORE2(0, Y0, Y1)
	QSTORE2(1, Y2, Y3)
	QSTORE2(2, Y4, Y5)
	QSTORE2(3, Y6, Y7)
	INCQ  R8
	CMPQ  R8, $16
	JLT   q4row
	ADDQ  $64, SI
	CMPQ  SI, $256
	JLT   q4vec
	VZEROUPPER
	RET

// QFMA22(wp, a, b, c, d) adds to a..d the V row's 32 dims in Y8..Y11 times
// query weights wp's weight j (R12).
#define QFMA22(wp, a, b, c, d) \
	VBROADCASTSS (wp)(R12*4), Y12; \
	VFMADD231PS  Y8, Y12, a; \
	VFMADD231PS  Y9, Y12, b; \
	VFMADD231PS  Y10, Y12, c; \
	VFMADD231PS  Y11, Y12, d

// func attnValues2qAVX2(a *valueArgs)
// attnValues2q: attnValues4AVX2 for 2 query vectors (a.w[0..1], a.n[0..1],
// a.acc[0..1]), two 16-dim vectors (SI = the first's byte offset in the
// row) of one row a pass, the V row shared.
TEXT ·attnValues2qAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_W+0(BX), CX
	MOVQ VA_W+8(BX), AX
	MOVQ VA_VROW(BX), DX
	XORQ SI, SI

q2vec:
	XORQ R8, R8

q2row:
	VZERO8
	XORQ R10, R10

q2chunk:
	VJ2
	CMPQ    R12, VA_NMAX(BX)
	JGE     q2store
	VROW2(SI)
	VMOVUPS (R11), Y8
	VMOVUPS 32(R11), Y9
	VMOVUPS 64(R11), Y10
	VMOVUPS 96(R11), Y11
	CMPQ    R12, VA_N+0(BX)
	JGE     q2s1
	QFMA22(CX, Y0, Y1, Y2, Y3)

q2s1:
	CMPQ R12, VA_N+8(BX)
	JGE  q2next
	QFMA22(AX, Y4, Y5, Y6, Y7)

q2next:
	INCQ R10
	JMP  q2chunk

q2store:
	VCLASS2
	MOVQ  SI, DI
	SHRQ  $6, DI
	IMULQ VA_ACCSTRIDE(BX), DI
	QSTORE2(0, Y0, Y1)
	QSTORE2(1, Y4, Y5)
	ADDQ  VA_ACCSTRIDE(BX), DI
	QSTORE2(0, Y2, Y3)
	QSTORE2(1, Y6, Y7)
	INCQ  R8
	CMPQ  R8, $16
	JLT   q2row
	ADDQ  $128, SI
	CMPQ  SI, $256
	JLT   q2vec
	VZEROUPPER
	RET

// RED8 reduces the 8-lane halves Y0..Y7 (classes 0..7, each already plus
// class 8+l) as reduce16 reduces lanes, into Y0.
#define RED8 \
	VADDPS Y4, Y0, Y0; \
	VADDPS Y5, Y1, Y1; \
	VADDPS Y6, Y2, Y2; \
	VADDPS Y7, Y3, Y3; \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y3, Y1, Y1; \
	VADDPS Y1, Y0, Y0

// LD16H(l, y) loads class l + class 8+l of the half at R11 into y.
#define LD16H(l, y) \
	VMOVUPS (64*l)(R11), y; \
	VADDPS  (64*(8+l))(R11), y, y

// func attnReduceAVX2(acc, out *float32, nvec int, mask uint64)
// attnReduce: for each dim vector k < nvec (its 16 classes at acc +
// 64*(16k + c)): out[16k:16k+16] = reduce16 of the classes, lane by lane;
// the last vector's lanes by mask.
TEXT ·attnReduceAVX2(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), SI
	MOVQ out+8(FP), DI
	MOVQ nvec+16(FP), CX

rdloop:
	XORQ R10, R10

rdhalf:
	LEAQ (SI)(R10*1), R11
	LD16H(0, Y0)
	LD16H(1, Y1)
	LD16H(2, Y2)
	LD16H(3, Y3)
	LD16H(4, Y4)
	LD16H(5, Y5)
	LD16H(6, Y6)
	LD16H(7, Y7)
	RED8
	CMPQ       R10, $0
	JNE        rdhi
	VMOVAPS    Y0, Y14
	ADDQ       $32, R10
	JMP        rdhalf

rdhi:
	CMPQ       CX, $1
	JEQ        rdlast
	VMOVUPS    Y14, (DI)
	VMOVUPS    Y0, 32(DI)
	JMP        rdnext

rdlast:
	MOVQ       mask+24(FP), R11
	LANEMASKS(R11, X12, Y12, Y13)
	VMASKMOVPS Y14, Y12, (DI)
	VMASKMOVPS Y0, Y13, 32(DI)

rdnext:
	ADDQ $1024, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  rdloop
	VZEROUPPER
	RET

// func swigluV16AVX2(out, gate, up *float32, n16 int)
// swigluV16: out[i] = siluV(gate[i]) * up[i] for i < 16*n16, bit for bit
// (EXPFV2 per 8 lanes).
TEXT ·swigluV16AVX2(SB), NOSPLIT, $448-32
	EXBCAST(0, EX_SHIFT)
	EXBCAST(4, EX_INVLN2)
	EXBCAST(8, EX_LN2LO)
	EXBCAST(12, EX_LN2HI)
	EXBCAST(16, EX_BOUND)
	EXBCAST(20, EX_P0)
	EXBCAST(24, EX_P1)
	EXBCAST(28, EX_P2)
	EXBCAST(32, EX_P3)
	EXBCAST(36, EX_P4)
	EXBCAST(40, EX_ONE)
	EXBCAST(44, EX_INF)
	EXBCAST(48, EX_ABS)
	EXBCAST(52, EX_BIAS)
	MOVQ   out+0(FP), DI
	MOVQ   gate+8(FP), SI
	MOVQ   up+16(FP), BX
	MOVQ   n16+24(FP), CX
	VXORPS Y15, Y15, Y15
	SHLQ   $1, CX
	TESTQ  CX, CX
	JEQ    swv2done

swv2loop:
	VMOVUPS (SI), Y0
	VSUBPS  Y0, Y15, Y7
	EXPFV2(Y7, Y8)
	VADDPS  EX_ONE, Y8, Y8
	VDIVPS  Y8, Y0, Y8
	VMULPS  (BX), Y8, Y8
	VMOVUPS Y8, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     swv2loop

swv2done:
	VZEROUPPER
	RET

// func quantQ8KAVX2(x *float32, nb int, qs *int8, d *float32, bsums *int16)
// quantQ8K at levelAVX2, bit for bit quantizeQ8K: m = the first element
// of largest magnitude, iscale = -127/m, q = min(127,
// round-half-even(iscale*x)), d = 1/iscale, the sums of each 16 quants; an
// all-zero block gets d = 0 and zero quants and sums.
TEXT ·quantQ8KAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         qs+16(FP), DI
	MOVQ         d+24(FP), DX
	MOVQ         bsums+32(FP), R8
	MOVL         $0x7fffffff, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $127, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	TESTQ        CX, CX
	JEQ          qk2done

qk2loop:
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

qk2max:
	VANDPS (SI)(AX*4), Y13, Y1
	VMAXPS Y1, Y0, Y0
	ADDQ   $8, AX
	CMPQ   AX, $256
	JLT    qk2max
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VXORPS       X1, X1, X1
	VUCOMISS     X1, X0
	JEQ          qk2zero
	VBROADCASTSS X0, Y2
	XORQ         AX, AX

qk2find:
	VANDPS    (SI)(AX*4), Y13, Y1
	VCMPPS    $0, Y2, Y1, Y1
	VMOVMSKPS Y1, R9
	TESTL     R9, R9
	JNE       qk2found
	ADDQ      $8, AX
	JMP       qk2find

qk2found:
	BSFL         R9, R9
	ADDQ         R9, AX
	MOVL         $0xc2fe0000, R9
	VMOVD        R9, X3
	VDIVSS       (SI)(AX*4), X3, X3
	MOVL         $0x3f800000, R9
	VMOVD        R9, X4
	VDIVSS       X3, X4, X4
	VMOVSS       X4, (DX)
	VBROADCASTSS X3, Y3
	XORQ         AX, AX

qk2quant:
	// 16 quants and their sum per step.
	VMULPS       (SI)(AX*4), Y3, Y5
	VMULPS       32(SI)(AX*4), Y3, Y6
	VCVTPS2DQ    Y5, Y5
	VCVTPS2DQ    Y6, Y6
	VPMINSD      Y14, Y5, Y5
	VPMINSD      Y14, Y6, Y6
	VPACKSSDW    Y6, Y5, Y7
	VPERMQ       $0xd8, Y7, Y7
	VEXTRACTI128 $1, Y7, X8
	VPACKSSWB    X8, X7, X8
	VMOVDQU      X8, (DI)(AX*1)
	VPADDD       Y6, Y5, Y5
	VEXTRACTI128 $1, Y5, X6
	VPADDD       X6, X5, X5
	VPSHUFD      $0x4e, X5, X6
	VPADDD       X6, X5, X5
	VPSHUFD      $0xb1, X5, X6
	VPADDD       X6, X5, X5
	VMOVD        X5, R9
	MOVQ         AX, R10
	SHRQ         $3, R10
	MOVW         R9, (R8)(R10*1)
	ADDQ         $16, AX
	CMPQ         AX, $256
	JLT          qk2quant
	JMP          qk2next

qk2zero:
	VMOVSS  X1, (DX)
	VXORPS  Y1, Y1, Y1
	VMOVDQU Y1, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y1, 64(DI)
	VMOVDQU Y1, 96(DI)
	VMOVDQU Y1, 128(DI)
	VMOVDQU Y1, 160(DI)
	VMOVDQU Y1, 192(DI)
	VMOVDQU Y1, 224(DI)
	VMOVDQU Y1, (R8)

qk2next:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R8
	DECQ CX
	JNZ  qk2loop

qk2done:
	VZEROUPPER
	RET
