#include "textflag.h"

// attnScores4q: the prompt tiles' score kernel (see attention.go,
// score4Args), bit for bit attnScores' order (dotVecF32's: per lane, for
// each dimension residue r < 16 and accumulator k < 4, the fma chain over
// the steps of 64 of dimension 64s+16k+r, folded as (c0+c2)+(c1+c3), the
// residues reduced by reduce16's tree, then * scale) for 4 query vectors
// and 2 chunks of 16 key positions at a time: each key row loaded serves 4
// query vectors (8 fmas per 2 key loads and 4 broadcasts). The 8 (query,
// chunk) pairs' chains of one (r, k) are Z0..Z7, Z8..Z15 or Z16..Z23 (pair
// 2u+c: query u, chunk c), the reduce16 tree's partials are kept in
// a.tree.

// Argument block offsets (score4Args).
#define S4_Q 0
#define S4_OUT 32
#define S4_K 64
#define S4_KOFFS 72
#define S4_NC 80
#define S4_KSTRIDE 88
#define S4_STEPS 96
#define S4_SCALE 104
#define S4_PFOFFS 112
#define S4_PFN 120
#define S4_KA 128
#define S4_KB 136
#define S4_RA 144
#define S4_RB 152
#define S4_DA 160
#define S4_DB 168
#define S4_TREE 176

// The partials' slots from a.tree (64-byte aligned: the kernel stores and
// reloads them within tens of cycles, and split lines do not forward).
#define S4_TA 0
#define S4_TB 512
#define S4_TX 1024
#define S4_TY 1536

// Q4DIM is one dimension of the 8 pairs: the two chunks' 16 key values at
// (R10) and (R11), the 4 queries' element at R14 bytes from SI, DI, R8, R9.
#define Q4DIM(a0, a1, b0, b1, c0, c1, d0, d1) \
	VMOVUPS          (R10), Z28; \
	VMOVUPS          (R11), Z29; \
	VFMADD231PS.BCST (SI)(R14*1), Z28, a0; \
	VFMADD231PS.BCST (SI)(R14*1), Z29, a1; \
	VFMADD231PS.BCST (DI)(R14*1), Z28, b0; \
	VFMADD231PS.BCST (DI)(R14*1), Z29, b1; \
	VFMADD231PS.BCST (R8)(R14*1), Z28, c0; \
	VFMADD231PS.BCST (R8)(R14*1), Z29, c1; \
	VFMADD231PS.BCST (R9)(R14*1), Z28, d0; \
	VFMADD231PS.BCST (R9)(R14*1), Z29, d1

// Q4CHAIN(lbl, KSET, qoff, a0..d1) leaves in a0..d1 the 8 pairs' fma chains
// (from zero) over the steps of the dimension KSET points R10 and R11 at
// (DX = 16 kstride), qoff its byte offset in a query vector, and
// prefetches the key rows R12 and R13 bytes on (the same dimension of the
// chunks to prefetch). Clobbers AX, R10, R11, R14, Z28, Z29.
#define Q4CHAIN(lbl, KSET, qoff, a0, a1, b0, b1, c0, c1, d0, d1) \
	VXORPS a0, a0, a0; \
	VXORPS a1, a1, a1; \
	VXORPS b0, b0, b0; \
	VXORPS b1, b1, b1; \
	VXORPS c0, c0, c0; \
	VXORPS c1, c1, c1; \
	VXORPS d0, d0, d0; \
	VXORPS d1, d1, d1; \
	KSET; \
	MOVQ $qoff, R14; \
	MOVQ S4_STEPS(BX), AX; \
lbl: \
	PREFETCHT0 (R10)(R12*1); \
	PREFETCHT0 (R11)(R13*1); \
	Q4DIM(a0, a1, b0, b1, c0, c1, d0, d1); \
	LEAQ (R10)(DX*4), R10; \
	LEAQ (R11)(DX*4), R11; \
	ADDQ $256, R14; \
	DECQ AX; \
	JNZ  lbl

// KkSET points R10 and R11 at dimension 16k of the chunks' residue row
// (a.ra, a.rb).
#define K0SET MOVQ S4_RA(BX), R10; MOVQ S4_RB(BX), R11
#define K1SET K0SET; ADDQ DX, R10; ADDQ DX, R11
#define K2SET K0SET; LEAQ (R10)(DX*2), R10; LEAQ (R11)(DX*2), R11
#define K3SET K2SET; ADDQ DX, R10; ADDQ DX, R11

// ADD8(s0..s7, d0..d7) adds registers s0..s7 into d0..d7.
#define ADD8(s0, s1, s2, s3, s4, s5, s6, s7, d0, d1, d2, d3, d4, d5, d6, d7) \
	VADDPS s0, d0, d0; \
	VADDPS s1, d1, d1; \
	VADDPS s2, d2, d2; \
	VADDPS s3, d3, d3; \
	VADDPS s4, d4, d4; \
	VADDPS s5, d5, d5; \
	VADDPS s6, d6, d6; \
	VADDPS s7, d7, d7

// Q4RES(r, l0, l1, l2, l3) leaves in Z0..Z7 the 8 pairs' (c0+c2)+(c1+c3)
// for dimension residue r. Clobbers AX, R10..R14, Z0..Z29.
#define Q4RES(r, l0, l1, l2, l3) \
	MOVQ  $r, R12; \
	IMULQ S4_KSTRIDE(BX), R12; \
	MOVQ  R12, R13; \
	ADDQ  S4_KA(BX), R12; \
	ADDQ  S4_KB(BX), R13; \
	MOVQ  R12, S4_RA(BX); \
	MOVQ  R13, S4_RB(BX); \
	MOVQ  S4_DA(BX), R12; \
	MOVQ  S4_DB(BX), R13; \
	Q4CHAIN(l0, K0SET, (4*r), Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	Q4CHAIN(l2, K2SET, (4*r+128), Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	ADD8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	Q4CHAIN(l1, K1SET, (4*r+64), Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	Q4CHAIN(l3, K3SET, (4*r+192), Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23); \
	ADD8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	ADD8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)

// TSTORE(slot) stores Z0..Z7 at slot; TADDM(slot) adds slot's into them.
// Both clobber R12.
#define TSTORE(slot) \
	MOVQ    S4_TREE(BX), R12; \
	VMOVUPS Z0, slot+0(R12); \
	VMOVUPS Z1, slot+64(R12); \
	VMOVUPS Z2, slot+128(R12); \
	VMOVUPS Z3, slot+192(R12); \
	VMOVUPS Z4, slot+256(R12); \
	VMOVUPS Z5, slot+320(R12); \
	VMOVUPS Z6, slot+384(R12); \
	VMOVUPS Z7, slot+448(R12)

#define TADDM(slot) \
	MOVQ   S4_TREE(BX), R12; \
	VADDPS slot+0(R12), Z0, Z0; \
	VADDPS slot+64(R12), Z1, Z1; \
	VADDPS slot+128(R12), Z2, Z2; \
	VADDPS slot+192(R12), Z3, Z3; \
	VADDPS slot+256(R12), Z4, Z4; \
	VADDPS slot+320(R12), Z5, Z5; \
	VADDPS slot+384(R12), Z6, Z6; \
	VADDPS slot+448(R12), Z7, Z7

// Q4T(a, b, c, d, labels) leaves in Z0..Z7 reduce16's partial T_i = (u_d +
// u_c) + (u_b + u_a) of the residues' results u_r, a = i, b = 8+i, c =
// 4+i, d = 12+i; the 16 labels are Q4RES's of a, b, c and d.
#define Q4T(a, b, c, d, la0, la1, la2, la3, lb0, lb1, lb2, lb3, lc0, lc1, lc2, lc3, ld0, ld1, ld2, ld3) \
	Q4RES(a, la0, la1, la2, la3); \
	TSTORE(S4_TA); \
	Q4RES(b, lb0, lb1, lb2, lb3); \
	TADDM(S4_TA); \
	TSTORE(S4_TA); \
	Q4RES(c, lc0, lc1, lc2, lc3); \
	TSTORE(S4_TB); \
	Q4RES(d, ld0, ld1, ld2, ld3); \
	TADDM(S4_TB); \
	TADDM(S4_TA)

// Q4OUT(uoff, za, zb) stores query u's scores za, zb of the chunk pair at
// byte R12 of its row a.out[u] (uoff = 8u). Clobbers R13.
#define Q4OUT(uoff, za, zb) \
	MOVQ    S4_OUT+uoff(BX), R13; \
	VMOVUPS za, (R13)(R12*1); \
	VMOVUPS zb, 64(R13)(R12*1)

// func attnScores4q(a *score4Args)
// For chunk pairs c = 0, 2, ... below a.nc and queries u < 4:
// a.out[u][16c' + l] = dotVecF32(K lane l of chunk c', a.q[u]) * a.scale
// for c' = c, c+1, where chunk c' has dimension i of its 16 positions at
// a.k + 4*a.koffs[c'] + i*a.kstride and hd = 64*a.steps (a.steps >= 1).
// While it scores chunks c and c+1 for c < a.pfn, it prefetches the key
// rows of chunks a.pfoffs[c] and a.pfoffs[c+1] (offsets as a.koffs').
TEXT ·attnScores4q(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), BX
	MOVQ S4_Q+0(BX), SI
	MOVQ S4_Q+8(BX), DI
	MOVQ S4_Q+16(BX), R8
	MOVQ S4_Q+24(BX), R9
	MOVQ S4_KSTRIDE(BX), DX
	SHLQ $4, DX
	XORQ CX, CX

q4chunk:
	CMPQ CX, S4_NC(BX)
	JGE  q4done
	MOVQ S4_KOFFS(BX), R12
	MOVQ S4_K(BX), R13
	MOVQ (R12)(CX*8), R10
	LEAQ (R13)(R10*4), R10
	MOVQ R10, S4_KA(BX)
	MOVQ 8(R12)(CX*8), R10
	LEAQ (R13)(R10*4), R10
	MOVQ R10, S4_KB(BX)
	// a.da, a.db: from this pair's K to that of the pair to prefetch
	// (a.pfoffs[CX], a.pfoffs[CX+1]), or 0.
	XORQ R10, R10
	XORQ R11, R11
	CMPQ CX, S4_PFN(BX)
	JGE  q4nopf
	MOVQ S4_PFOFFS(BX), R12
	MOVQ (R12)(CX*8), R10
	LEAQ (R13)(R10*4), R10
	SUBQ S4_KA(BX), R10
	MOVQ 8(R12)(CX*8), R11
	LEAQ (R13)(R11*4), R11
	SUBQ S4_KB(BX), R11

q4nopf:
	MOVQ R10, S4_DA(BX)
	MOVQ R11, S4_DB(BX)

	// reduce16's tree: ((T0 + T2) + (T1 + T3)).
	Q4T(0, 8, 4, 12, q4r0k0, q4r0k1, q4r0k2, q4r0k3, q4r8k0, q4r8k1, q4r8k2, q4r8k3, q4r4k0, q4r4k1, q4r4k2, q4r4k3, q4r12k0, q4r12k1, q4r12k2, q4r12k3)
	TSTORE(S4_TX)
	Q4T(2, 10, 6, 14, q4r2k0, q4r2k1, q4r2k2, q4r2k3, q4r10k0, q4r10k1, q4r10k2, q4r10k3, q4r6k0, q4r6k1, q4r6k2, q4r6k3, q4r14k0, q4r14k1, q4r14k2, q4r14k3)
	TADDM(S4_TX)
	TSTORE(S4_TX)
	Q4T(1, 9, 5, 13, q4r1k0, q4r1k1, q4r1k2, q4r1k3, q4r9k0, q4r9k1, q4r9k2, q4r9k3, q4r5k0, q4r5k1, q4r5k2, q4r5k3, q4r13k0, q4r13k1, q4r13k2, q4r13k3)
	TSTORE(S4_TY)
	Q4T(3, 11, 7, 15, q4r3k0, q4r3k1, q4r3k2, q4r3k3, q4r11k0, q4r11k1, q4r11k2, q4r11k3, q4r7k0, q4r7k1, q4r7k2, q4r7k3, q4r15k0, q4r15k1, q4r15k2, q4r15k3)
	TADDM(S4_TY)
	TADDM(S4_TX)

	VBROADCASTSS S4_SCALE(BX), Z30
	VMULPS       Z30, Z0, Z0
	VMULPS       Z30, Z1, Z1
	VMULPS       Z30, Z2, Z2
	VMULPS       Z30, Z3, Z3
	VMULPS       Z30, Z4, Z4
	VMULPS       Z30, Z5, Z5
	VMULPS       Z30, Z6, Z6
	VMULPS       Z30, Z7, Z7
	MOVQ         CX, R12
	SHLQ         $6, R12
	Q4OUT(0, Z0, Z1)
	Q4OUT(8, Z2, Z3)
	Q4OUT(16, Z4, Z5)
	Q4OUT(24, Z6, Z7)
	ADDQ         $2, CX
	JMP          q4chunk

q4done:
	VZEROUPPER
	RET
