#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 attention kernels (see attention.go), bit for bit the reference's
// order (attentionRef: dotVecF32, softmaxInPlace, attnValues), and the
// other elementwise kernels.
//   - scores: 16 key positions in 16 lanes; per lane dotVecF32's order:
//     for each dimension residue r < 16 and accumulator k < 4, the fma
//     chain over the steps of 64 of dimension 64s+16k+r, folded as
//     (c0+c2)+(c1+c3) and reduced over r by reduce16's tree; then the
//     dimensions past the last 64 as one fma chain, then * scale;
//   - softmax: max, expfV per 16 (EXPFV), each 16's reduce16 added in
//     float64 in order, then * float32(1/sum);
//   - values: 16 head dimensions in 16 lanes; per position class j%16 one
//     fma chain over its positions in order, stored per class; attnReduce
//     then folds the classes as reduce16 does.

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

// The score kernel's 4 pairs p (query, chunk): K of pair p's chunk at
// 8p(SP) (dimension i at +i*kstride), pairs 0 and 1 take query a.q[0],
// pairs 2 and 3 a.q[1]. Per dimension residue r, the chains of pair p are
// Z(4p+k), k < 4; tree partials are Z20+p, Z24+p, Z28+p.

// SSTEP is one step of 64 dims for the 4 pairs: R8, R9 the queries at the
// step's dim r, R10..R13 the pairs' K there, DX = 16 kstride, SI = 48 kstride.
#define SSTEP \
	VBROADCASTSS 0(R8), Z16; \
	VBROADCASTSS 0(R9), Z17; \
	VFMADD231PS  (R10), Z16, Z0; \
	VFMADD231PS  (R11), Z16, Z4; \
	VFMADD231PS  (R12), Z17, Z8; \
	VFMADD231PS  (R13), Z17, Z12; \
	VBROADCASTSS 64(R8), Z16; \
	VBROADCASTSS 64(R9), Z17; \
	VFMADD231PS  (R10)(DX*1), Z16, Z1; \
	VFMADD231PS  (R11)(DX*1), Z16, Z5; \
	VFMADD231PS  (R12)(DX*1), Z17, Z9; \
	VFMADD231PS  (R13)(DX*1), Z17, Z13; \
	VBROADCASTSS 128(R8), Z16; \
	VBROADCASTSS 128(R9), Z17; \
	VFMADD231PS  (R10)(DX*2), Z16, Z2; \
	VFMADD231PS  (R11)(DX*2), Z16, Z6; \
	VFMADD231PS  (R12)(DX*2), Z17, Z10; \
	VFMADD231PS  (R13)(DX*2), Z17, Z14; \
	VBROADCASTSS 192(R8), Z16; \
	VBROADCASTSS 192(R9), Z17; \
	VFMADD231PS  (R10)(SI*1), Z16, Z3; \
	VFMADD231PS  (R11)(SI*1), Z16, Z7; \
	VFMADD231PS  (R12)(SI*1), Z17, Z11; \
	VFMADD231PS  (R13)(SI*1), Z17, Z15

// SSTEP2 is SSTEP when pairs 2 and 3 score the chunks of pairs 0 and 1
// (R12 = R10, R13 = R11: two query vectors over the same two chunks): each
// key row is loaded once for both queries, the same fmas on the same
// values. The memory operands of SSTEP load every row twice, and the
// kernel waits on loads more than on its fmas.
#define SSTEP2 \
	SDIM2(0, (R10), (R11), Z0, Z4, Z8, Z12); \
	SDIM2(64, (R10)(DX*1), (R11)(DX*1), Z1, Z5, Z9, Z13); \
	SDIM2(128, (R10)(DX*2), (R11)(DX*2), Z2, Z6, Z10, Z14); \
	SDIM2(192, (R10)(SI*1), (R11)(SI*1), Z3, Z7, Z11, Z15)

// SDIM2(qo, k0, k1, c0, c1, c2, c3) is one of SSTEP2's 4 dims: the queries'
// element at byte qo from R8 and R9, the key rows k0 and k1 of the two
// chunks, into the chains of pairs 0..3.
#define SDIM2(qo, k0, k1, c0, c1, c2, c3) \
	VBROADCASTSS qo(R8), Z16; \
	VBROADCASTSS qo(R9), Z17; \
	VMOVUPS      k0, Z18; \
	VMOVUPS      k1, Z19; \
	VFMADD231PS  Z18, Z16, c0; \
	VFMADD231PS  Z19, Z16, c1; \
	VFMADD231PS  Z18, Z17, c2; \
	VFMADD231PS  Z19, Z17, c3

// SCHAIN(lbl, r) leaves in Z0, Z4, Z8, Z12 the 4 pairs' (c0+c2)+(c1+c3)
// for dimension residue r, ck = the fma chain (from zero) over the steps s
// of dim 64s+16k+r. DI = 64 kstride; 288(SP) nonzero selects SSTEP2
// (lbl2, lbl1: its labels). Clobbers AX, R8..R14, Z0..Z19.
#define SCHAIN(lbl, lbl2, lbl1, r) \
	MOVQ   $r, R14; \
	IMULQ  SA_KSTRIDE(BX), R14; \
	MOVQ   0(SP), R10; \
	ADDQ   R14, R10; \
	MOVQ   8(SP), R11; \
	ADDQ   R14, R11; \
	MOVQ   16(SP), R12; \
	ADDQ   R14, R12; \
	MOVQ   24(SP), R13; \
	ADDQ   R14, R13; \
	MOVQ   SA_Q+0(BX), R8; \
	ADDQ   $(4*r), R8; \
	MOVQ   SA_Q+8(BX), R9; \
	ADDQ   $(4*r), R9; \
	MOVQ   SA_STEPS(BX), AX; \
	VXORPS Z0, Z0, Z0; \
	VXORPS Z1, Z1, Z1; \
	VXORPS Z2, Z2, Z2; \
	VXORPS Z3, Z3, Z3; \
	VXORPS Z4, Z4, Z4; \
	VXORPS Z5, Z5, Z5; \
	VXORPS Z6, Z6, Z6; \
	VXORPS Z7, Z7, Z7; \
	VXORPS Z8, Z8, Z8; \
	VXORPS Z9, Z9, Z9; \
	VXORPS Z10, Z10, Z10; \
	VXORPS Z11, Z11, Z11; \
	VXORPS Z12, Z12, Z12; \
	VXORPS Z13, Z13, Z13; \
	VXORPS Z14, Z14, Z14; \
	VXORPS Z15, Z15, Z15; \
lbl: \
	CMPQ   288(SP), $0; \
	JEQ    lbl1; \
	SSTEP2; \
	JMP    lbl2; \
lbl1: \
	SSTEP; \
lbl2: \
	ADDQ   DI, R10; \
	ADDQ   DI, R11; \
	ADDQ   DI, R12; \
	ADDQ   DI, R13; \
	ADDQ   $256, R8; \
	ADDQ   $256, R9; \
	DECQ   AX; \
	JNZ    lbl; \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z3, Z1, Z1; \
	VADDPS Z1, Z0, Z0; \
	VADDPS Z6, Z4, Z4; \
	VADDPS Z7, Z5, Z5; \
	VADDPS Z5, Z4, Z4; \
	VADDPS Z10, Z8, Z8; \
	VADDPS Z11, Z9, Z9; \
	VADDPS Z9, Z8, Z8; \
	VADDPS Z14, Z12, Z12; \
	VADDPS Z15, Z13, Z13; \
	VADDPS Z13, Z12, Z12

// TSET(a, b, c, d) sets the pairs' partial to SCHAIN's result; TADD adds
// the result to it; TCOMB(a..d, e..h) adds partial e..h into a..d.
#define TSET(a, b, c, d) \
	VMOVAPS Z0, a; \
	VMOVAPS Z4, b; \
	VMOVAPS Z8, c; \
	VMOVAPS Z12, d

#define TADD(a, b, c, d) \
	VADDPS Z0, a, a; \
	VADDPS Z4, b, b; \
	VADDPS Z8, c, c; \
	VADDPS Z12, d, d

#define TCOMB(a, b, c, d, e, f, g, h) \
	VADDPS e, a, a; \
	VADDPS f, b, b; \
	VADDPS g, c, c; \
	VADDPS h, d, d

// The partials below: P1 = Z20..Z23, P2 = Z24..Z27, P3 = Z28..Z31.

// SKBASE(c, p) sets R14 to pair p's K base in the step whose first chunk
// is c: a.k + 4*a.koffs[c + a.pchunk[p]] (R8 = a.koffs, R9 = a.k).
#define SKBASE(c, p) \
	MOVQ c, R14; \
	ADDQ SA_PCHUNK+(8*p)(BX), R14; \
	MOVQ (R8)(R14*8), R14; \
	LEAQ (R9)(R14*4), R14

// SPAIRK(p) stores pair p's K base at 8p(SP).
#define SPAIRK(p) \
	SKBASE(CX, p); \
	MOVQ R14, (8*p)(SP)

// SSTORE(p, z) stores pair p's 16 scores z at a.out[p] + 64*(CX + a.pchunk[p]).
#define SSTORE(p, z) \
	MOVQ    CX, R14; \
	ADDQ    SA_PCHUNK+(8*p)(BX), R14; \
	SHLQ    $6, R14; \
	ADDQ    SA_OUT+(8*p)(BX), R14; \
	VMOVUPS z, (R14)

// SPFCHUNK(lbl, p) prefetches the hd key rows (kstride = DX apart) of
// pair p's chunk of the next step (AX = its first chunk; R8 = a.koffs, R9
// = a.k, R13 = ceil(hd/4)). Clobbers R12, R14.
#define SPFCHUNK(lbl, p) \
	SKBASE(AX, p); \
	MOVQ R13, R12; \
lbl: \
	PREFETCHT0 (R14); \
	PREFETCHT0 (R14)(DX*1); \
	PREFETCHT0 (R14)(DX*2); \
	PREFETCHT0 (R14)(SI*1); \
	LEAQ (R14)(DX*4), R14; \
	DECQ R12; \
	JNZ  lbl

// SPFSTEP(l0, l1, l2, l3, done) prefetches the key rows of the chunks of
// the step whose first chunk is AX: those of pairs 0 and 1, and with
// a.cstep 4 those of pairs 2 and 3. Clobbers DX, SI, R12..R14.
#define SPFSTEP(l0, l1, l2, l3, done) \
	MOVQ SA_KSTRIDE(BX), DX; \
	LEAQ (DX)(DX*2), SI; \
	MOVQ SA_STEPS(BX), R13; \
	SHLQ $6, R13; \
	ADDQ SA_REST(BX), R13; \
	ADDQ $3, R13; \
	SHRQ $2, R13; \
	SPFCHUNK(l0, 0); \
	SPFCHUNK(l1, 1); \
	CMPQ SA_CSTEP(BX), $4; \
	JNE  done; \
	SPFCHUNK(l2, 2); \
	SPFCHUNK(l3, 3); \
done:

// SPREFETCH prefetches the key rows of the next step's chunks while this
// step scores: a decode batch's chunks lie in scattered pages, and the
// score passes read each chunk's rows 16 dims apart, which the hardware
// prefetchers do not run ahead of. Clobbers AX, DX, SI, R12..R14.
#define SPREFETCH \
	MOVQ CX, AX; \
	ADDQ SA_CSTEP(BX), AX; \
	CMPQ AX, SA_NC(BX); \
	JGE  spfdone; \
	SPFSTEP(spf0, spf1, spf2, spf3, spfdone)

// func attnScores(a *scoreArgs)
// For chunks c = 0, a.cstep, ... below a.nc and the 4 pairs p: a.out[p][16(c+a.pchunk[p]) + l]
// = dotVecF32(K lane l, q) * a.scale, where K of chunk c' has dimension i
// of its 16 positions at a.k + 4*a.koffs[c'] + i*a.kstride, q = a.q[p/2]
// and hd = 64*a.steps + a.rest.
TEXT ·attnScores(SB), NOSPLIT, $296-8
	MOVQ a+0(FP), BX
	XORQ CX, CX

schunk:
	CMPQ CX, SA_NC(BX)
	JGE  sdone
	MOVQ SA_KOFFS(BX), R8
	MOVQ SA_K(BX), R9
	SPAIRK(0)
	SPAIRK(1)
	SPAIRK(2)
	SPAIRK(3)
	// 288(SP) = 1 when pairs 2 and 3 share the K of pairs 0 and 1.
	MOVQ $0, 288(SP)
	MOVQ 0(SP), R14
	CMPQ R14, 16(SP)
	JNE  spairsdone
	MOVQ 8(SP), R14
	CMPQ R14, 24(SP)
	JNE  spairsdone
	MOVQ $1, 288(SP)
spairsdone:
	SPREFETCH
	MOVQ SA_KSTRIDE(BX), DX
	SHLQ $4, DX
	LEAQ (DX)(DX*2), SI
	MOVQ DX, DI
	SHLQ $2, DI
	CMPQ SA_STEPS(BX), $0
	JEQ  snotree

	// reduce16 over r of u_r: ((u12+u4) + (u8+u0)) + ... in the order
	// (T0 + T2) + (T1 + T3), T_i = (u_{12+i} + u_{4+i}) + (u_{8+i} + u_i).
	SCHAIN(sr0, sr0b, sr0c, 0)
	TSET(Z20, Z21, Z22, Z23)
	SCHAIN(sr8, sr8b, sr8c, 8)
	TADD(Z20, Z21, Z22, Z23)
	SCHAIN(sr4, sr4b, sr4c, 4)
	TSET(Z24, Z25, Z26, Z27)
	SCHAIN(sr12, sr12b, sr12c, 12)
	TADD(Z24, Z25, Z26, Z27)
	TCOMB(Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27)
	SCHAIN(sr2, sr2b, sr2c, 2)
	TSET(Z24, Z25, Z26, Z27)
	SCHAIN(sr10, sr10b, sr10c, 10)
	TADD(Z24, Z25, Z26, Z27)
	SCHAIN(sr6, sr6b, sr6c, 6)
	TSET(Z28, Z29, Z30, Z31)
	SCHAIN(sr14, sr14b, sr14c, 14)
	TADD(Z28, Z29, Z30, Z31)
	TCOMB(Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31)
	TCOMB(Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27)
	VMOVUPS Z20, 32(SP)
	VMOVUPS Z21, 96(SP)
	VMOVUPS Z22, 160(SP)
	VMOVUPS Z23, 224(SP)
	SCHAIN(sr1, sr1b, sr1c, 1)
	TSET(Z20, Z21, Z22, Z23)
	SCHAIN(sr9, sr9b, sr9c, 9)
	TADD(Z20, Z21, Z22, Z23)
	SCHAIN(sr5, sr5b, sr5c, 5)
	TSET(Z24, Z25, Z26, Z27)
	SCHAIN(sr13, sr13b, sr13c, 13)
	TADD(Z24, Z25, Z26, Z27)
	TCOMB(Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27)
	SCHAIN(sr3, sr3b, sr3c, 3)
	TSET(Z24, Z25, Z26, Z27)
	SCHAIN(sr11, sr11b, sr11c, 11)
	TADD(Z24, Z25, Z26, Z27)
	SCHAIN(sr7, sr7b, sr7c, 7)
	TSET(Z28, Z29, Z30, Z31)
	SCHAIN(sr15, sr15b, sr15c, 15)
	TADD(Z28, Z29, Z30, Z31)
	TCOMB(Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31)
	TCOMB(Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27)
	VMOVUPS 32(SP), Z16
	VADDPS  Z20, Z16, Z20
	VMOVUPS 96(SP), Z16
	VADDPS  Z21, Z16, Z21
	VMOVUPS 160(SP), Z16
	VADDPS  Z22, Z16, Z22
	VMOVUPS 224(SP), Z16
	VADDPS  Z23, Z16, Z23
	JMP     srest

snotree:
	VXORPS Z20, Z20, Z20
	VXORPS Z21, Z21, Z21
	VXORPS Z22, Z22, Z22
	VXORPS Z23, Z23, Z23

srest:
	// The dims from np = 64*steps on: one fma chain each.
	MOVQ  SA_REST(BX), AX
	TESTQ AX, AX
	JEQ   sscale
	MOVQ  SA_STEPS(BX), R14
	SHLQ  $6, R14
	MOVQ  SA_Q+0(BX), R8
	LEAQ  (R8)(R14*4), R8
	MOVQ  SA_Q+8(BX), R9
	LEAQ  (R9)(R14*4), R9
	MOVQ  SA_KSTRIDE(BX), DX
	IMULQ DX, R14
	MOVQ  0(SP), R10
	ADDQ  R14, R10
	MOVQ  8(SP), R11
	ADDQ  R14, R11
	MOVQ  16(SP), R12
	ADDQ  R14, R12
	MOVQ  24(SP), R13
	ADDQ  R14, R13

srestloop:
	VBROADCASTSS (R8), Z16
	VBROADCASTSS (R9), Z17
	VFMADD231PS  (R10), Z16, Z20
	VFMADD231PS  (R11), Z16, Z21
	VFMADD231PS  (R12), Z17, Z22
	VFMADD231PS  (R13), Z17, Z23
	ADDQ         $4, R8
	ADDQ         $4, R9
	ADDQ         DX, R10
	ADDQ         DX, R11
	ADDQ         DX, R12
	ADDQ         DX, R13
	DECQ         AX
	JNZ          srestloop

sscale:
	VBROADCASTSS SA_SCALE(BX), Z16
	VMULPS       Z16, Z20, Z20
	VMULPS       Z16, Z21, Z21
	VMULPS       Z16, Z22, Z22
	VMULPS       Z16, Z23, Z23
	SSTORE(0, Z20)
	SSTORE(1, Z21)
	SSTORE(2, Z22)
	SSTORE(3, Z23)
	ADDQ SA_CSTEP(BX), CX
	JMP  schunk

sdone:
	VZEROUPPER
	RET

// func softmaxV(s *float32, n int)
// softmaxInPlace(s[:n]) (n >= 1), bit for bit.
TEXT ·softmaxV(SB), NOSPLIT, $0-16
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0
	VMOVAPS Z0, Z8
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9

smxloop:
	CMPQ   AX, R9
	JGE    smxtail
	VMAXPS (SI)(AX*4), Z0, Z0
	ADDQ   $16, AX
	JMP    smxloop

smxtail:
	CMPQ AX, CX
	JGE  smxreduce
	TAILMASK(R8)
	VMOVUPS (SI)(AX*4), K1, Z8
	VMAXPS  Z8, Z0, Z0

smxreduce:
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VBROADCASTSS  X0, Z7

	EXPFVSETUP
	VPXORD Z18, Z18, Z18
	VXORPD X11, X11, X11
	XORQ   AX, AX

sexloop:
	CMPQ AX, CX
	JGE  sexdone
	MOVL $0xffff, R8
	KMOVW R8, K1
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $16
	JGE  sexfull
	TAILMASK(R8)

sexfull:
	VMOVUPS.Z     (SI)(AX*4), K1, Z0
	VSUBPS        Z7, Z0, Z0
	EXPFV(Z0, Z8)
	VMOVAPS.Z     Z8, K1, Z8
	VMOVUPS       Z8, K1, (SI)(AX*4)
	VEXTRACTF32X8 $1, Z8, Y9
	VADDPS        Y9, Y8, Y9
	VEXTRACTF128  $1, Y9, X10
	VADDPS        X10, X9, X9
	VMOVHLPS      X9, X9, X10
	VADDPS        X10, X9, X9
	VMOVSHDUP     X9, X10
	VADDSS        X10, X9, X9
	VCVTSS2SD     X9, X9, X9
	VADDSD        X9, X11, X11
	ADDQ          $16, AX
	JMP           sexloop

sexdone:
	MOVQ         $0x3ff0000000000000, R8
	VMOVQ        R8, X12
	VDIVSD       X11, X12, X12
	VCVTSD2SS    X12, X12, X12
	VBROADCASTSS X12, Z12
	XORQ         AX, AX

smlloop:
	CMPQ    AX, R9
	JGE     smltail
	VMULPS  (SI)(AX*4), Z12, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     smlloop

smltail:
	CMPQ AX, CX
	JGE  smldone
	TAILMASK(R8)
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMULPS    Z12, Z0, Z0
	VMOVUPS   Z0, K1, (SI)(AX*4)

smldone:
	VZEROUPPER
	RET

// The value kernels: position j = 16m + r (chunk m, row r) is class r;
// its V row is at a.v + 4*a.voffs[m] + r*a.vrow, its weight a.w[j]. A pass
// takes rows 4g..4g+3 (R8 = g) of the chunks m = 0, 1, ... with each
// class's chain in a register.

// VPOS4(o0..o3, wd, a, b, c, d) fuses the row whose 4 dim vectors are o0..o3 (weight wd(R12))
// into accumulators a..d (64 dims).
#define VPOS4(o0, o1, o2, o3, wd, a, b, c, d) \
	VBROADCASTSS wd(R12), Z16; \
	VFMADD231PS  o0, Z16, a; \
	VFMADD231PS  o1, Z16, b; \
	VFMADD231PS  o2, Z16, c; \
	VFMADD231PS  o3, Z16, d

// VPOS1 is VPOS4 for one vector of dims, lanes K1.
#define VPOS1(off, wd, a) \
	VBROADCASTSS wd(R12), Z16; \
	VFMADD231PS  off, Z16, K1, a

// VCHUNK sets, for chunk R10 of pass R8: R13 = positions of the
// pass's rows left (n - 16m - 4g; jumps to done if none), R12 = their
// weights, R11 = the V row of row 4g. Clobbers R14.
#define VCHUNK(done) \
	MOVQ  R10, R11; \
	SHLQ  $4, R11; \
	LEAQ  (R11)(R8*4), R11; \
	MOVQ  VA_N(BX), R13; \
	SUBQ  R11, R13; \
	JLE   done; \
	MOVQ  VA_W(BX), R12; \
	LEAQ  (R12)(R11*4), R12; \
	MOVQ  VA_VOFFS(BX), R11; \
	MOVQ  (R11)(R10*8), R11; \
	MOVQ  VA_V(BX), R14; \
	LEAQ  (R14)(R11*4), R11; \
	MOVQ  R8, R14; \
	SHLQ  $2, R14; \
	IMULQ DX, R14; \
	ADDQ  R14, R11

// VACCP sets R14 to the accumulators of class 4g (64 bytes a class).
#define VACCP \
	MOVQ R8, R14; \
	SHLQ $8, R14; \
	ADDQ VA_ACC(BX), R14

// func attnValues4(a *valueArgs)
// For the 64 dims at a.v and each class c: a.acc + 64c + k*a.accStride
// (dim vector k < 4) = the fma chain (from zero) of w_j * V_j over the
// class's positions j < a.n in order.
TEXT ·attnValues4(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ VA_VROW(BX), DX
	LEAQ (DX)(DX*2), SI
	MOVQ VA_ACCSTRIDE(BX), DI
	XORQ R8, R8

v4group:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15
	XORQ   R10, R10

v4chunk:
	VCHUNK(v4store)
	CMPQ R13, $4
	JLT  v4part
	VPOS4((R11), 64(R11), 128(R11), 192(R11), 0, Z0, Z1, Z2, Z3)
	VPOS4((R11)(DX*1), 64(R11)(DX*1), 128(R11)(DX*1), 192(R11)(DX*1), 4, Z4, Z5, Z6, Z7)
	VPOS4((R11)(DX*2), 64(R11)(DX*2), 128(R11)(DX*2), 192(R11)(DX*2), 8, Z8, Z9, Z10, Z11)
	VPOS4((R11)(SI*1), 64(R11)(SI*1), 128(R11)(SI*1), 192(R11)(SI*1), 12, Z12, Z13, Z14, Z15)
	INCQ R10
	JMP  v4chunk

v4part:
	VPOS4((R11), 64(R11), 128(R11), 192(R11), 0, Z0, Z1, Z2, Z3)
	CMPQ R13, $1
	JEQ  v4store
	VPOS4((R11)(DX*1), 64(R11)(DX*1), 128(R11)(DX*1), 192(R11)(DX*1), 4, Z4, Z5, Z6, Z7)
	CMPQ R13, $2
	JEQ  v4store
	VPOS4((R11)(DX*2), 64(R11)(DX*2), 128(R11)(DX*2), 192(R11)(DX*2), 8, Z8, Z9, Z10, Z11)

v4store:
	VACCP
	LEAQ    (DI)(DI*2), R11
	VMOVUPS Z0, (R14)
	VMOVUPS Z1, (R14)(DI*1)
	VMOVUPS Z2, (R14)(DI*2)
	VMOVUPS Z3, (R14)(R11*1)
	VMOVUPS Z4, 64(R14)
	VMOVUPS Z5, 64(R14)(DI*1)
	VMOVUPS Z6, 64(R14)(DI*2)
	VMOVUPS Z7, 64(R14)(R11*1)
	VMOVUPS Z8, 128(R14)
	VMOVUPS Z9, 128(R14)(DI*1)
	VMOVUPS Z10, 128(R14)(DI*2)
	VMOVUPS Z11, 128(R14)(R11*1)
	VMOVUPS Z12, 192(R14)
	VMOVUPS Z13, 192(R14)(DI*1)
	VMOVUPS Z14, 192(R14)(DI*2)
	VMOVUPS Z15, 192(R14)(R11*1)
	INCQ    R8
	CMPQ    R8, $4
	JLT     v4group
	VZEROUPPER
	RET

// func attnValues1(a *valueArgs)
// attnValues4 for the one vector of dims at a.v whose lanes a.mask selects
// (the others stay 0).
TEXT ·attnValues1(SB), NOSPLIT, $0-8
	MOVQ  a+0(FP), BX
	MOVQ  VA_MASK(BX), R8
	KMOVW R8, K1
	MOVQ  VA_VROW(BX), DX
	LEAQ  (DX)(DX*2), SI
	XORQ  R8, R8

v1group:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ   R10, R10

v1chunk:
	VCHUNK(v1store)
	CMPQ R13, $4
	JLT  v1part
	VPOS1((R11), 0, Z0)
	VPOS1((R11)(DX*1), 4, Z1)
	VPOS1((R11)(DX*2), 8, Z2)
	VPOS1((R11)(SI*1), 12, Z3)
	INCQ R10
	JMP  v1chunk

v1part:
	VPOS1((R11), 0, Z0)
	CMPQ R13, $1
	JEQ  v1store
	VPOS1((R11)(DX*1), 4, Z1)
	CMPQ R13, $2
	JEQ  v1store
	VPOS1((R11)(DX*2), 8, Z2)

v1store:
	VACCP
	VMOVUPS Z0, (R14)
	VMOVUPS Z1, 64(R14)
	VMOVUPS Z2, 128(R14)
	VMOVUPS Z3, 192(R14)
	INCQ    R8
	CMPQ    R8, $4
	JLT     v1group
	VZEROUPPER
	RET

// The multi-query value kernels: a pass takes rows R*g..R*g+R-1 (R8 = g)
// of the chunks m = 0, 1, ... (R10 = m) for Q query
// vectors (R*Q = 4), the V row in registers shared by the queries; query
// u's weights a.w[u] (CX, AX, R13, R14), its positions below a.n[u], its
// class accumulators at a.acc[u].

// VQCHUNK(rowsh, done, slow) sets R12 = 16m + R*g (R = 1<<rowsh), jumps to
// done if no query has positions there, sets R11 to the V row of row R*g
// of chunk m and jumps to slow unless every query has all R rows.
#define VQCHUNK(rowsh, done, slow) \
	MOVQ  R8, R12; \
	SHLQ  $rowsh, R12; \
	MOVQ  R10, DI; \
	SHLQ  $4, DI; \
	ADDQ  DI, R12; \
	MOVQ  VA_NMAX(BX), R11; \
	SUBQ  R12, R11; \
	JLE   done; \
	MOVQ  VA_VOFFS(BX), R11; \
	MOVQ  (R11)(R10*8), R11; \
	MOVQ  VA_V(BX), DI; \
	LEAQ  (DI)(R11*4), R11; \
	MOVQ  R8, DI; \
	SHLQ  $rowsh, DI; \
	IMULQ DX, DI; \
	ADDQ  DI, R11; \
	MOVQ  VA_NMIN(BX), DI; \
	SUBQ  R12, DI; \
	CMPQ  DI, $(1<<rowsh); \
	JLT   slow

// VQSETUP loads the weights' pointers and DX = vrow.
#define VQSETUP \
	MOVQ a+0(FP), BX; \
	MOVQ VA_W+0(BX), CX; \
	MOVQ VA_W+8(BX), AX; \
	MOVQ VA_W+16(BX), R13; \
	MOVQ VA_W+24(BX), R14; \
	MOVQ VA_VROW(BX), DX; \
	XORQ R8, R8

// VQSTORE(u, rowsh, disp, a, b, c, d) stores accumulators a..d (dim
// vectors 0..3) of query u's class R*g + disp/64.
#define VQSTORE(u, rowsh, disp, a, b, c, d) \
	MOVQ    R8, DI; \
	SHLQ    $(rowsh+6), DI; \
	MOVQ    VA_ACC+(8*u)(BX), SI; \
	ADDQ    DI, SI; \
	MOVQ    VA_ACCSTRIDE(BX), DI; \
	VMOVUPS a, disp(SI); \
	VMOVUPS b, disp(SI)(DI*1); \
	VMOVUPS c, disp(SI)(DI*2); \
	ADDQ    DI, SI; \
	VMOVUPS d, disp(SI)(DI*2)

#define VZERO16 \
	VXORPS Z0, Z0, Z0; \
	VXORPS Z1, Z1, Z1; \
	VXORPS Z2, Z2, Z2; \
	VXORPS Z3, Z3, Z3; \
	VXORPS Z4, Z4, Z4; \
	VXORPS Z5, Z5, Z5; \
	VXORPS Z6, Z6, Z6; \
	VXORPS Z7, Z7, Z7; \
	VXORPS Z8, Z8, Z8; \
	VXORPS Z9, Z9, Z9; \
	VXORPS Z10, Z10, Z10; \
	VXORPS Z11, Z11, Z11; \
	VXORPS Z12, Z12, Z12; \
	VXORPS Z13, Z13, Z13; \
	VXORPS Z14, Z14, Z14; \
	VXORPS Z15, Z15, Z15

// VROWLD(base, x0, x1, x2, x3) loads the 4 dim vectors of a V row.
#define VROWLD(o0, o1, o2, o3, x0, x1, x2, x3) \
	VMOVUPS o0, x0; \
	VMOVUPS o1, x1; \
	VMOVUPS o2, x2; \
	VMOVUPS o3, x3

// VQFMA(wp, wdisp, wz, x0..x3, a..d): a..d += x0..x3 * the weight at
// wdisp(wp)(R12*4).
#define VQFMA(wp, wdisp, wz, x0, x1, x2, x3, a, b, c, d) \
	VBROADCASTSS wdisp(wp)(R12*4), wz; \
	VFMADD231PS  x0, wz, a; \
	VFMADD231PS  x1, wz, b; \
	VFMADD231PS  x2, wz, c; \
	VFMADD231PS  x3, wz, d

// func attnValues4q(a *valueArgs)
// attnValues4 for 4 query vectors, one row a pass.
TEXT ·attnValues4q(SB), NOSPLIT, $0-8
	VQSETUP

vq4group:
	VZERO16
	XORQ R10, R10

vq4chunk:
	VQCHUNK(0, vq4store, vq4slow)
	VROWLD((R11), 64(R11), 128(R11), 192(R11), Z16, Z17, Z18, Z19)
	VQFMA(CX, 0, Z20, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)
	VQFMA(AX, 0, Z21, Z16, Z17, Z18, Z19, Z4, Z5, Z6, Z7)
	VQFMA(R13, 0, Z22, Z16, Z17, Z18, Z19, Z8, Z9, Z10, Z11)
	VQFMA(R14, 0, Z23, Z16, Z17, Z18, Z19, Z12, Z13, Z14, Z15)
	INCQ R10
	JMP  vq4chunk

vq4slow:
	VROWLD((R11), 64(R11), 128(R11), 192(R11), Z16, Z17, Z18, Z19)
	CMPQ R12, VA_N+0(BX)
	JGE  vq4s1
	VQFMA(CX, 0, Z20, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)

vq4s1:
	CMPQ R12, VA_N+8(BX)
	JGE  vq4s2
	VQFMA(AX, 0, Z21, Z16, Z17, Z18, Z19, Z4, Z5, Z6, Z7)

vq4s2:
	CMPQ R12, VA_N+16(BX)
	JGE  vq4s3
	VQFMA(R13, 0, Z22, Z16, Z17, Z18, Z19, Z8, Z9, Z10, Z11)

vq4s3:
	CMPQ R12, VA_N+24(BX)
	JGE  vq4snext
	VQFMA(R14, 0, Z23, Z16, Z17, Z18, Z19, Z12, Z13, Z14, Z15)

vq4snext:
	INCQ R10
	JMP  vq4chunk

vq4store:
	VQSTORE(0, 0, 0, Z0, Z1, Z2, Z3)
	VQSTORE(1, 0, 0, Z4, Z5, Z6, Z7)
	VQSTORE(2, 0, 0, Z8, Z9, Z10, Z11)
	VQSTORE(3, 0, 0, Z12, Z13, Z14, Z15)
	INCQ R8
	CMPQ R8, $16
	JLT  vq4group
	VZEROUPPER
	RET

// func attnValues2q(a *valueArgs)
// attnValues4 for 2 query vectors, two rows a pass.
TEXT ·attnValues2q(SB), NOSPLIT, $0-8
	VQSETUP

vq2group:
	VZERO16
	XORQ R10, R10

vq2chunk:
	VQCHUNK(1, vq2store, vq2slow)
	VROWLD((R11), 64(R11), 128(R11), 192(R11), Z16, Z17, Z18, Z19)
	VROWLD((R11)(DX*1), 64(R11)(DX*1), 128(R11)(DX*1), 192(R11)(DX*1), Z24, Z25, Z26, Z27)
	VQFMA(CX, 0, Z20, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)
	VQFMA(AX, 0, Z21, Z16, Z17, Z18, Z19, Z4, Z5, Z6, Z7)
	VQFMA(CX, 4, Z22, Z24, Z25, Z26, Z27, Z8, Z9, Z10, Z11)
	VQFMA(AX, 4, Z23, Z24, Z25, Z26, Z27, Z12, Z13, Z14, Z15)
	INCQ R10
	JMP  vq2chunk

vq2slow:
	VROWLD((R11), 64(R11), 128(R11), 192(R11), Z16, Z17, Z18, Z19)
	VROWLD((R11)(DX*1), 64(R11)(DX*1), 128(R11)(DX*1), 192(R11)(DX*1), Z24, Z25, Z26, Z27)
	LEAQ 1(R12), SI
	CMPQ R12, VA_N+0(BX)
	JGE  vq2s1
	VQFMA(CX, 0, Z20, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)

vq2s1:
	CMPQ R12, VA_N+8(BX)
	JGE  vq2s2
	VQFMA(AX, 0, Z21, Z16, Z17, Z18, Z19, Z4, Z5, Z6, Z7)

vq2s2:
	CMPQ SI, VA_N+0(BX)
	JGE  vq2s3
	VQFMA(CX, 4, Z22, Z24, Z25, Z26, Z27, Z8, Z9, Z10, Z11)

vq2s3:
	CMPQ SI, VA_N+8(BX)
	JGE  vq2snext
	VQFMA(AX, 4, Z23, Z24, Z25, Z26, Z27, Z12, Z13, Z14, Z15)

vq2snext:
	INCQ R10
	JMP  vq2chunk

vq2store:
	VQSTORE(0, 1, 0, Z0, Z1, Z2, Z3)
	VQSTORE(1, 1, 0, Z4, Z5, Z6, Z7)
	VQSTORE(0, 1, 64, Z8, Z9, Z10, Z11)
	VQSTORE(1, 1, 64, Z12, Z13, Z14, Z15)
	INCQ R8
	CMPQ R8, $8
	JLT  vq2group
	VZEROUPPER
	RET

// RED16 reduces the 16 vectors Z0..Z15 as reduce16 reduces lanes, into Z0.
#define RED16 \
	VADDPS Z8, Z0, Z0; \
	VADDPS Z9, Z1, Z1; \
	VADDPS Z10, Z2, Z2; \
	VADDPS Z11, Z3, Z3; \
	VADDPS Z12, Z4, Z4; \
	VADDPS Z13, Z5, Z5; \
	VADDPS Z14, Z6, Z6; \
	VADDPS Z15, Z7, Z7; \
	VADDPS Z4, Z0, Z0; \
	VADDPS Z5, Z1, Z1; \
	VADDPS Z6, Z2, Z2; \
	VADDPS Z7, Z3, Z3; \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z3, Z1, Z1; \
	VADDPS Z1, Z0, Z0

// LD16(l, z) loads class l of the dim vector at SI into z.
#define LD16(l, z) VMOVUPS (64*l)(SI), z

#define LDALL(LD) \
	LD(0, Z0); \
	LD(1, Z1); \
	LD(2, Z2); \
	LD(3, Z3); \
	LD(4, Z4); \
	LD(5, Z5); \
	LD(6, Z6); \
	LD(7, Z7); \
	LD(8, Z8); \
	LD(9, Z9); \
	LD(10, Z10); \
	LD(11, Z11); \
	LD(12, Z12); \
	LD(13, Z13); \
	LD(14, Z14); \
	LD(15, Z15)

// func attnReduce(acc, out *float32, nvec int, mask uint64)
// For each dim vector k < nvec (its 16 classes at acc + 64*(16k + c)):
// out[16k:16k+16] = reduce16 of the classes, lane by lane; the last
// vector's lanes by mask.
TEXT ·attnReduce(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), SI
	MOVQ out+8(FP), DI
	MOVQ nvec+16(FP), CX
	KXNORW K1, K1, K1

rdloop:
	CMPQ  CX, $1
	JNE   rdfull
	MOVQ  mask+24(FP), AX
	KMOVW AX, K1

rdfull:
	LDALL(LD16)
	RED16
	VMOVUPS Z0, K1, (DI)
	ADDQ    $1024, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     rdloop
	VZEROUPPER
	RET

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

// func quantQ8K(x *float32, nb int, qs *int8, d *float32, bsums *int16)
// quantizeQ8K of the nb blocks of 256 finite values at x, bit for bit:
// m = the first element of largest magnitude, iscale = -127/m, q =
// min(127, round-half-even(iscale*x)), d = 1/iscale, and the sums of each
// 16 quants; an all-zero block gets d = 0 and zero quants and sums.
TEXT ·quantQ8K(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ qs+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ bsums+32(FP), R8
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z13
	MOVL $127, AX
	VPBROADCASTD AX, Z14
	TESTQ CX, CX
	JEQ   qkdone

qkloop:
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX
qkmax:
	VANDPS (SI)(AX*4), Z13, Z1
	VMAXPS Z1, Z0, Z0
	ADDQ   $16, AX
	CMPQ   AX, $256
	JLT    qkmax
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VXORPS        X1, X1, X1
	VUCOMISS      X1, X0
	JEQ           qkzero
	VBROADCASTSS  X0, Z2
	XORQ          AX, AX
qkfind:
	VANDPS   (SI)(AX*4), Z13, Z1
	VCMPPS   $0, Z2, Z1, K1
	KMOVW    K1, R9
	TESTL    R9, R9
	JNE      qkfound
	ADDQ     $16, AX
	JMP      qkfind
qkfound:
	TZCNTL   R9, R9
	ADDQ     R9, AX
	MOVL     $0xc2fe0000, R9
	VMOVD    R9, X3
	VDIVSS   (SI)(AX*4), X3, X3
	MOVL     $0x3f800000, R9
	VMOVD    R9, X4
	VDIVSS   X3, X4, X4
	VMOVSS   X4, (DX)
	VBROADCASTSS X3, Z3
	XORQ     AX, AX
qkquant:
	VMULPS    (SI)(AX*4), Z3, Z5
	VCVTPS2DQ Z5, Z5
	VPMINSD   Z14, Z5, Z5
	VPMOVDB   Z5, (DI)(AX*1)
	VEXTRACTI64X4 $1, Z5, Y6
	VPADDD    Y6, Y5, Y5
	VEXTRACTI128  $1, Y5, X6
	VPADDD    X6, X5, X5
	VPSHUFD   $0x4e, X5, X6
	VPADDD    X6, X5, X5
	VPSHUFD   $0xb1, X5, X6
	VPADDD    X6, X5, X5
	VMOVD     X5, R9
	MOVQ      AX, R10
	SHRQ      $3, R10
	MOVW      R9, (R8)(R10*1)
	ADDQ      $16, AX
	CMPQ      AX, $256
	JLT       qkquant
	JMP       qknext

qkzero:
	VMOVSS  X1, (DX)
	VPXORD  Z1, Z1, Z1
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z1, 128(DI)
	VMOVDQU64 Z1, 192(DI)
	VMOVDQU64 Y1, (R8)

qknext:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R8
	DECQ CX
	JNZ  qkloop

qkdone:
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

// The loads of kvTranspose16's rows by value type: 16 values at m into z.
#define KTLD_F32(m, z) VMOVUPS m, z
#define KTLD_F16(m, z) VCVTPH2PS m, z
#define KTLD_BF16(m, z) VPMOVZXWD m, z; VPSLLD $16, z, z

// KTROWS(LD) loads 16 values of rows 0..15 (R9, R10, R11, R12 = rows 0,
// 4, 8, 12; DX = row stride, R8 = 3 strides) into Z0..Z15.
#define KTROWS(LD) \
	LD((R9), Z0); \
	LD((R9)(DX*1), Z1); \
	LD((R9)(DX*2), Z2); \
	LD((R9)(R8*1), Z3); \
	LD((R10), Z4); \
	LD((R10)(DX*1), Z5); \
	LD((R10)(DX*2), Z6); \
	LD((R10)(R8*1), Z7); \
	LD((R11), Z8); \
	LD((R11)(DX*1), Z9); \
	LD((R11)(DX*2), Z10); \
	LD((R11)(R8*1), Z11); \
	LD((R12), Z12); \
	LD((R12)(DX*1), Z13); \
	LD((R12)(DX*2), Z14); \
	LD((R12)(R8*1), Z15)

// KTSTORE transposes Z0..Z15 (row r, lane i = value i of row r) in place
// (Z16..Z31 clobbered) and stores vector i = lane r of each row at
// DI + 64i.
#define KTSTORE \
	VUNPCKLPS  Z1, Z0, Z16; \
	VUNPCKHPS  Z1, Z0, Z17; \
	VUNPCKLPS  Z3, Z2, Z18; \
	VUNPCKHPS  Z3, Z2, Z19; \
	VUNPCKLPS  Z5, Z4, Z20; \
	VUNPCKHPS  Z5, Z4, Z21; \
	VUNPCKLPS  Z7, Z6, Z22; \
	VUNPCKHPS  Z7, Z6, Z23; \
	VUNPCKLPS  Z9, Z8, Z24; \
	VUNPCKHPS  Z9, Z8, Z25; \
	VUNPCKLPS  Z11, Z10, Z26; \
	VUNPCKHPS  Z11, Z10, Z27; \
	VUNPCKLPS  Z13, Z12, Z28; \
	VUNPCKHPS  Z13, Z12, Z29; \
	VUNPCKLPS  Z15, Z14, Z30; \
	VUNPCKHPS  Z15, Z14, Z31; \
	VSHUFPS    $0x44, Z18, Z16, Z0; \
	VSHUFPS    $0xEE, Z18, Z16, Z1; \
	VSHUFPS    $0x44, Z19, Z17, Z2; \
	VSHUFPS    $0xEE, Z19, Z17, Z3; \
	VSHUFPS    $0x44, Z22, Z20, Z4; \
	VSHUFPS    $0xEE, Z22, Z20, Z5; \
	VSHUFPS    $0x44, Z23, Z21, Z6; \
	VSHUFPS    $0xEE, Z23, Z21, Z7; \
	VSHUFPS    $0x44, Z26, Z24, Z8; \
	VSHUFPS    $0xEE, Z26, Z24, Z9; \
	VSHUFPS    $0x44, Z27, Z25, Z10; \
	VSHUFPS    $0xEE, Z27, Z25, Z11; \
	VSHUFPS    $0x44, Z30, Z28, Z12; \
	VSHUFPS    $0xEE, Z30, Z28, Z13; \
	VSHUFPS    $0x44, Z31, Z29, Z14; \
	VSHUFPS    $0xEE, Z31, Z29, Z15; \
	VSHUFF32X4 $0x88, Z4, Z0, Z16; \
	VSHUFF32X4 $0x88, Z5, Z1, Z17; \
	VSHUFF32X4 $0x88, Z6, Z2, Z18; \
	VSHUFF32X4 $0x88, Z7, Z3, Z19; \
	VSHUFF32X4 $0xDD, Z4, Z0, Z20; \
	VSHUFF32X4 $0xDD, Z5, Z1, Z21; \
	VSHUFF32X4 $0xDD, Z6, Z2, Z22; \
	VSHUFF32X4 $0xDD, Z7, Z3, Z23; \
	VSHUFF32X4 $0x88, Z12, Z8, Z24; \
	VSHUFF32X4 $0x88, Z13, Z9, Z25; \
	VSHUFF32X4 $0x88, Z14, Z10, Z26; \
	VSHUFF32X4 $0x88, Z15, Z11, Z27; \
	VSHUFF32X4 $0xDD, Z12, Z8, Z28; \
	VSHUFF32X4 $0xDD, Z13, Z9, Z29; \
	VSHUFF32X4 $0xDD, Z14, Z10, Z30; \
	VSHUFF32X4 $0xDD, Z15, Z11, Z31; \
	VSHUFF32X4 $0x88, Z24, Z16, Z0; \
	VSHUFF32X4 $0x88, Z25, Z17, Z1; \
	VSHUFF32X4 $0x88, Z26, Z18, Z2; \
	VSHUFF32X4 $0x88, Z27, Z19, Z3; \
	VSHUFF32X4 $0x88, Z28, Z20, Z4; \
	VSHUFF32X4 $0x88, Z29, Z21, Z5; \
	VSHUFF32X4 $0x88, Z30, Z22, Z6; \
	VSHUFF32X4 $0x88, Z31, Z23, Z7; \
	VSHUFF32X4 $0xDD, Z24, Z16, Z8; \
	VSHUFF32X4 $0xDD, Z25, Z17, Z9; \
	VSHUFF32X4 $0xDD, Z26, Z18, Z10; \
	VSHUFF32X4 $0xDD, Z27, Z19, Z11; \
	VSHUFF32X4 $0xDD, Z28, Z20, Z12; \
	VSHUFF32X4 $0xDD, Z29, Z21, Z13; \
	VSHUFF32X4 $0xDD, Z30, Z22, Z14; \
	VSHUFF32X4 $0xDD, Z31, Z23, Z15; \
	VMOVUPS    Z0, (DI); \
	VMOVUPS    Z1, 64(DI); \
	VMOVUPS    Z2, 128(DI); \
	VMOVUPS    Z3, 192(DI); \
	VMOVUPS    Z4, 256(DI); \
	VMOVUPS    Z5, 320(DI); \
	VMOVUPS    Z6, 384(DI); \
	VMOVUPS    Z7, 448(DI); \
	VMOVUPS    Z8, 512(DI); \
	VMOVUPS    Z9, 576(DI); \
	VMOVUPS    Z10, 640(DI); \
	VMOVUPS    Z11, 704(DI); \
	VMOVUPS    Z12, 768(DI); \
	VMOVUPS    Z13, 832(DI); \
	VMOVUPS    Z14, 896(DI); \
	VMOVUPS    Z15, 960(DI)

// KTNEXT(bytes) moves the row pointers on by bytes and DI by 16 vectors.
#define KTNEXT(bytes) \
	ADDQ $bytes, R9; \
	ADDQ $bytes, R10; \
	ADDQ $bytes, R11; \
	ADDQ $bytes, R12; \
	ADDQ $1024, DI

// KTLOOP(lbl, LD, bytes) transposes the CX groups of 16 values that LD
// loads (bytes per row and group), then jumps to ktdone.
#define KTLOOP(lbl, LD, bytes) \
lbl: \
	KTROWS(LD); \
	KTSTORE; \
	KTNEXT(bytes); \
	DECQ CX; \
	JNZ  lbl; \
	JMP  ktdone

// func kvTranspose16(dst *float32, src unsafe.Pointer, rowStride uintptr, n16, kind int)
// dst[16j + r] = value j of row r, as float32, for r < 16 and j < 16*n16:
// row r's values at src + r*rowStride, float32 (kind 0), binary16 (1) or
// bfloat16 (2). It turns 16 positions' key rows into the [dim][position]
// chunk layout of the score kernel.
TEXT ·kvTranspose16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), R9
	MOVQ rowStride+16(FP), DX
	MOVQ n16+24(FP), CX
	MOVQ kind+32(FP), AX
	TESTQ CX, CX
	JEQ   ktdone
	LEAQ (DX)(DX*2), R8
	LEAQ (R9)(DX*4), R10
	LEAQ (R10)(DX*4), R11
	LEAQ (R11)(DX*4), R12
	CMPQ AX, $1
	JEQ  ktf16
	JGT  ktbf16

	KTLOOP(ktf32, KTLD_F32, 64)
ktf16:
	KTLOOP(ktf16l, KTLD_F16, 32)
ktbf16:
	KTLOOP(ktbf16l, KTLD_BF16, 32)

ktdone:
	VZEROUPPER
	RET
