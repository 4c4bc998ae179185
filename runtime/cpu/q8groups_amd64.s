#include "textflag.h"

// LayoutQ8x16 kernels (q8groups.go). A weight block of a group is 544
// bytes: 16 fp16 row scales, then for k = 0..7 the 16 rows' quants
// 4k..4k+3 plus 128 (64 bytes). A token's block is 40 bytes: 32 signed
// quants, int32 -128*sum of them, float32 scale. Per block and token each
// of the 16 lanes (rows) computes the exact integer dot s, then
// acc = fma(float32(s), d_w*d_x, acc): dotQ8Group's order.

// G16LOADAT loads the block at w: row scales into Z8, quant groups
// Z0..Z7.
#define G16LOADAT(w) \
	VCVTPH2PS (w), Z8; \
	VMOVDQU32 32(w), Z0; \
	VMOVDQU32 96(w), Z1; \
	VMOVDQU32 160(w), Z2; \
	VMOVDQU32 224(w), Z3; \
	VMOVDQU32 288(w), Z4; \
	VMOVDQU32 352(w), Z5; \
	VMOVDQU32 416(w), Z6; \
	VMOVDQU32 480(w), Z7

// G16TOK4 accumulates the block of the lone token at p into acc (as
// GTOKN does), its 8 VPDPBUSD in four chains of two, then
// added up (the same exact integer sums), so that they overlap.
#define G16TOK4(p, acc) \
	VPBROADCASTD 32(p), Z24; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; \
	VPDPBUSD.BCST 0(p), Z0, Z24; \
	VPDPBUSD.BCST 4(p), Z1, Z26; \
	VPDPBUSD.BCST 8(p), Z2, Z27; \
	VPDPBUSD.BCST 12(p), Z3, Z28; \
	VPDPBUSD.BCST 16(p), Z4, Z24; \
	VPDPBUSD.BCST 20(p), Z5, Z26; \
	VPDPBUSD.BCST 24(p), Z6, Z27; \
	VPDPBUSD.BCST 28(p), Z7, Z28; \
	VPADDD Z26, Z24, Z24; \
	VPADDD Z28, Z27, Z27; \
	VPADDD Z27, Z24, Z24; \
	VCVTDQ2PS Z24, Z24; \
	VMULPS.BCST 36(p), Z8, Z25; \
	VFMADD231PS Z25, Z24, acc

// G16PREFETCH fetches the block six ahead of SI into L1 and the block 24
// ahead into L2: a kernel of several tokens streaming a group from memory
// overlaps its arithmetic with the loads best so (one thread, T=8: ~10%
// over the L1 prefetch alone; the lone-token kernel gains nothing from
// either and has none).
#define G16PREFETCH \
	PREFETCHT0 3264(SI); \
	PREFETCHT0 3328(SI); \
	PREFETCHT0 3392(SI); \
	PREFETCHT0 3456(SI); \
	PREFETCHT0 3520(SI); \
	PREFETCHT0 3584(SI); \
	PREFETCHT0 3648(SI); \
	PREFETCHT0 3712(SI); \
	PREFETCHT0 3776(SI); \
	PREFETCHT1 13056(SI); \
	PREFETCHT1 13120(SI); \
	PREFETCHT1 13184(SI); \
	PREFETCHT1 13248(SI); \
	PREFETCHT1 13312(SI); \
	PREFETCHT1 13376(SI); \
	PREFETCHT1 13440(SI); \
	PREFETCHT1 13504(SI); \
	PREFETCHT1 13568(SI)

// func q8x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer)
TEXT ·q8x16Gemv(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	VPXORD Z16, Z16, Z16
	TESTQ CX, CX
	JEQ done1
loop1:
	G16LOADAT(SI)
	G16TOK4(DI, Z16)
	ADDQ $544, SI
	ADDQ $40, DI
	DECQ CX
	JNZ loop1
done1:
	MOVQ out+24(FP), BX
	VMOVUPS Z16, (BX)
	VZEROUPPER
	RET

DATA q8x16flip<>+0(SB)/8, $0x8080808080808080
GLOBL q8x16flip<>(SB), RODATA|NOPTR, $8
DATA q8x16ones<>+0(SB)/8, $0x0001000100010001
GLOBL q8x16ones<>(SB), RODATA|NOPTR, $8

// G8DOT adds to the int32 lanes acc the dots of the 8 rows' quant dword at
// off(SI) (plus 128: flipped back with Y0) and the broadcast token dword Y6:
// |w| times x with w's sign, pairwise to 16 bits (at most 2*128*127, no
// saturation), then pairwise to 32 bits (Y1: ones).
#define G8DOT(off, acc) \
	VPXOR off(SI), Y0, Y7; \
	VPSIGNB Y7, Y6, Y9; \
	VPABSB Y7, Y7; \
	VPMADDUBSW Y9, Y7, Y7; \
	VPMADDWD Y1, Y7, Y7; \
	VPADDD Y7, acc, acc

// func q8x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer)
TEXT ·q8x16GemvAVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	VPBROADCASTQ q8x16flip<>(SB), Y0
	VPBROADCASTQ q8x16ones<>(SB), Y1
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JEQ doneavx2
loopavx2:
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPBROADCASTD 0(DI), Y6
	G8DOT(32, Y2)
	G8DOT(64, Y3)
	VPBROADCASTD 4(DI), Y6
	G8DOT(96, Y2)
	G8DOT(128, Y3)
	VPBROADCASTD 8(DI), Y6
	G8DOT(160, Y2)
	G8DOT(192, Y3)
	VPBROADCASTD 12(DI), Y6
	G8DOT(224, Y2)
	G8DOT(256, Y3)
	VPBROADCASTD 16(DI), Y6
	G8DOT(288, Y2)
	G8DOT(320, Y3)
	VPBROADCASTD 20(DI), Y6
	G8DOT(352, Y2)
	G8DOT(384, Y3)
	VPBROADCASTD 24(DI), Y6
	G8DOT(416, Y2)
	G8DOT(448, Y3)
	VPBROADCASTD 28(DI), Y6
	G8DOT(480, Y2)
	G8DOT(512, Y3)
	VCVTPH2PS 0(SI), Y4
	VCVTPH2PS 16(SI), Y5
	VBROADCASTSS 36(DI), Y8
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VFMADD231PS Y4, Y2, Y10
	VFMADD231PS Y5, Y3, Y11
	ADDQ $544, SI
	ADDQ $40, DI
	DECQ CX
	JNZ loopavx2
doneavx2:
	MOVQ out+24(FP), BX
	VMOVUPS Y10, (BX)
	VMOVUPS Y11, 32(BX)
	VZEROUPPER
	RET

// GTOKN accumulates the block of the token at p plus the index x (a
// register times a scale) into acc: 8 VPDPBUSD of the broadcast
// quant dwords against Z0..Z7, started from the token's correction (so each
// lane holds the exact signed dot), then converted, times (Z8 * the token's
// scale), fused-added into acc; t and u are its temporaries, so that
// consecutive tokens' chains use different registers.
#define GTOKN(p, x, acc, t, u) \
	VPBROADCASTD 32(p)x, t; \
	VPDPBUSD.BCST 0(p)x, Z0, t; \
	VPDPBUSD.BCST 4(p)x, Z1, t; \
	VPDPBUSD.BCST 8(p)x, Z2, t; \
	VPDPBUSD.BCST 12(p)x, Z3, t; \
	VPDPBUSD.BCST 16(p)x, Z4, t; \
	VPDPBUSD.BCST 20(p)x, Z5, t; \
	VPDPBUSD.BCST 24(p)x, Z6, t; \
	VPDPBUSD.BCST 28(p)x, Z7, t; \
	VCVTDQ2PS t, t; \
	VMULPS.BCST 36(p)x, Z8, u; \
	VFMADD231PS u, t, acc

// func q8x16GemmN(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr, n int)
//
// Tokens 0..n-1 (1 <= n <= 16): token 4j+i at (DI, R8, R9, R10)[j] plus
// (0, AX, 2*AX, BX = 3*AX)[i] (R11 = 0), its accumulator Z16+4j+i.
TEXT ·q8x16GemmN(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), AX
	MOVQ n+48(FP), DX
	LEAQ (AX)(AX*2), BX
	LEAQ (DI)(AX*4), R8
	LEAQ (R8)(AX*4), R9
	LEAQ (R9)(AX*4), R10
	XORQ R11, R11
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JEQ donen
loopn:
	G16PREFETCH
	G16LOADAT(SI)
	GTOKN(DI, (R11*1), Z16, Z9, Z10)
	CMPQ DX, $1
	JLE nextn
	GTOKN(DI, (AX*1), Z17, Z11, Z12)
	CMPQ DX, $2
	JLE nextn
	GTOKN(DI, (AX*2), Z18, Z9, Z10)
	CMPQ DX, $3
	JLE nextn
	GTOKN(DI, (BX*1), Z19, Z11, Z12)
	CMPQ DX, $4
	JLE nextn
	GTOKN(R8, (R11*1), Z20, Z9, Z10)
	CMPQ DX, $5
	JLE nextn
	GTOKN(R8, (AX*1), Z21, Z11, Z12)
	CMPQ DX, $6
	JLE nextn
	GTOKN(R8, (AX*2), Z22, Z9, Z10)
	CMPQ DX, $7
	JLE nextn
	GTOKN(R8, (BX*1), Z23, Z11, Z12)
	CMPQ DX, $8
	JLE nextn
	GTOKN(R9, (R11*1), Z24, Z9, Z10)
	CMPQ DX, $9
	JLE nextn
	GTOKN(R9, (AX*1), Z25, Z11, Z12)
	CMPQ DX, $10
	JLE nextn
	GTOKN(R9, (AX*2), Z26, Z9, Z10)
	CMPQ DX, $11
	JLE nextn
	GTOKN(R9, (BX*1), Z27, Z11, Z12)
	CMPQ DX, $12
	JLE nextn
	GTOKN(R10, (R11*1), Z28, Z9, Z10)
	CMPQ DX, $13
	JLE nextn
	GTOKN(R10, (AX*1), Z29, Z11, Z12)
	CMPQ DX, $14
	JLE nextn
	GTOKN(R10, (AX*2), Z30, Z9, Z10)
	CMPQ DX, $15
	JLE nextn
	GTOKN(R10, (BX*1), Z31, Z11, Z12)
nextn:
	ADDQ $544, SI
	ADDQ $40, DI
	ADDQ $40, R8
	ADDQ $40, R9
	ADDQ $40, R10
	DECQ CX
	JNZ loopn
donen:
	MOVQ out+32(FP), R12
	MOVQ ostride+40(FP), R13
	VMOVUPS Z16, (R12)
	CMPQ DX, $1
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z17, (R12)
	CMPQ DX, $2
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z18, (R12)
	CMPQ DX, $3
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z19, (R12)
	CMPQ DX, $4
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z20, (R12)
	CMPQ DX, $5
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z21, (R12)
	CMPQ DX, $6
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z22, (R12)
	CMPQ DX, $7
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z23, (R12)
	CMPQ DX, $8
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z24, (R12)
	CMPQ DX, $9
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z25, (R12)
	CMPQ DX, $10
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z26, (R12)
	CMPQ DX, $11
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z27, (R12)
	CMPQ DX, $12
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z28, (R12)
	CMPQ DX, $13
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z29, (R12)
	CMPQ DX, $14
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z30, (R12)
	CMPQ DX, $15
	JLE retn
	ADDQ R13, R12
	VMOVUPS Z31, (R12)
retn:
	VZEROUPPER
	RET

// G8X2 adds to the int32 lanes accp and accq the dots of the 8 rows'
// quant dword (signed values Y10, magnitudes Y11) and the dwords at
// xoff(p) and xoff(q) of two tokens, as G8DOT does.
#define G8X2(xoff, p, q, accp, accq) \
	VPBROADCASTD xoff(p), Y12; \
	VPBROADCASTD xoff(q), Y13; \
	VPSIGNB Y10, Y12, Y12; \
	VPSIGNB Y10, Y13, Y13; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDUBSW Y13, Y11, Y13; \
	VPMADDWD Y1, Y12, Y12; \
	VPMADDWD Y1, Y13, Y13; \
	VPADDD Y12, accp, accp; \
	VPADDD Y13, accq, accq

// G8X4 adds to the int32 lanes Y2..Y5 (tokens 0..3 at R9..R12) the dots
// of the 8 rows' quant dword at qoff(SI) (plus 128: flipped back with Y0)
// and the tokens' dword at xoff: the weights' signed values Y10 and
// magnitudes Y11 computed once for the four tokens.
#define G8X4(qoff, xoff) \
	VPXOR qoff(SI), Y0, Y10; \
	VPABSB Y10, Y11; \
	G8X2(xoff, R9, R10, Y2, Y3); \
	G8X2(xoff, R11, R12, Y4, Y5)

// G8X2SCALE adds the int32 dots ip and iq of the tokens at p and q,
// converted, times (the 8 rows' scales Y10 * the token's scale), into fp
// and fq.
#define G8X2SCALE(p, q, ip, iq, fp, fq) \
	VBROADCASTSS 36(p), Y12; \
	VBROADCASTSS 36(q), Y13; \
	VMULPS Y12, Y10, Y12; \
	VMULPS Y13, Y10, Y13; \
	VCVTDQ2PS ip, ip; \
	VCVTDQ2PS iq, iq; \
	VFMADD231PS Y12, ip, fp; \
	VFMADD231PS Y13, iq, fq

// G8X4SCALE adds the block's int32 dots Y2..Y5, converted, times (the 8
// rows' scales at (R13) * each token's scale), into Y6..Y9.
#define G8X4SCALE \
	VCVTPH2PS (R13), Y10; \
	G8X2SCALE(R9, R10, Y2, Y3, Y6, Y7); \
	G8X2SCALE(R11, R12, Y4, Y5, Y8, Y9)

// G8X4START points SI at the group, CX at its block count, R9..R12 at
// the four tokens, and zeroes their float accumulators Y6..Y9.
#define G8X4START \
	MOVQ w+0(FP), SI; \
	MOVQ nb+8(FP), CX; \
	MOVQ x+16(FP), R8; \
	MOVQ 0(R8), R9; \
	MOVQ 8(R8), R10; \
	MOVQ 16(R8), R11; \
	MOVQ 24(R8), R12; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9

// func q8x16Gemm4AVX2(w unsafe.Pointer, nb int, x *[4]unsafe.Pointer, out *[4]unsafe.Pointer)
//
// Rows 0..7 of the group over every block, then rows 8..15: DX is the
// half's byte offset within each 64 bytes of quants (0 or 32) and within
// each token's 64 bytes of results; its scales are at DX/2 in each block
// (R13).
TEXT ·q8x16Gemm4AVX2(SB), NOSPLIT, $0-32
	VPBROADCASTQ q8x16flip<>(SB), Y0
	VPBROADCASTQ q8x16ones<>(SB), Y1
	XORQ DX, DX
half4avx2:
	G8X4START
	MOVQ DX, AX
	SHRQ $1, AX
	LEAQ (SI)(AX*1), R13
	ADDQ DX, SI
	TESTQ CX, CX
	JEQ store4avx2
loop4avx2:
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	G8X4(32, 0)
	G8X4(96, 4)
	G8X4(160, 8)
	G8X4(224, 12)
	G8X4(288, 16)
	G8X4(352, 20)
	G8X4(416, 24)
	G8X4(480, 28)
	G8X4SCALE
	ADDQ $544, SI
	ADDQ $544, R13
	ADDQ $40, R9
	ADDQ $40, R10
	ADDQ $40, R11
	ADDQ $40, R12
	DECQ CX
	JNZ loop4avx2
store4avx2:
	// In reverse, so that token 0's store is the last where tokens repeat.
	MOVQ out+24(FP), R8
	MOVQ 24(R8), BX
	VMOVUPS Y9, (BX)(DX*1)
	MOVQ 16(R8), BX
	VMOVUPS Y8, (BX)(DX*1)
	MOVQ 8(R8), BX
	VMOVUPS Y7, (BX)(DX*1)
	MOVQ 0(R8), BX
	VMOVUPS Y6, (BX)(DX*1)
	ADDQ $32, DX
	CMPQ DX, $64
	JLT half4avx2
	VZEROUPPER
	RET
