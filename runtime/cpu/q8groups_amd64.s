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

// STORE4 stores Z16..Z19 at out+32(FP) + i*ostride (ostride+40(FP)).
#define STORE4 \
	MOVQ out+32(FP), BX; \
	MOVQ ostride+40(FP), AX; \
	VMOVUPS Z16, (BX); \
	ADDQ AX, BX; \
	VMOVUPS Z17, (BX); \
	ADDQ AX, BX; \
	VMOVUPS Z18, (BX); \
	ADDQ AX, BX; \
	VMOVUPS Z19, (BX)

// G16TOK accumulates the block of the token at p into acc: 8 VPDPBUSD of
// the broadcast quant dwords against Z0..Z7, started from the token's
// correction (so each lane holds the exact signed dot), then converted,
// times (Z8 * the token's scale), fused-added into acc.
#define G16TOK(p, acc) \
	VPBROADCASTD 32(p), Z24; \
	VPDPBUSD.BCST 0(p), Z0, Z24; \
	VPDPBUSD.BCST 4(p), Z1, Z24; \
	VPDPBUSD.BCST 8(p), Z2, Z24; \
	VPDPBUSD.BCST 12(p), Z3, Z24; \
	VPDPBUSD.BCST 16(p), Z4, Z24; \
	VPDPBUSD.BCST 20(p), Z5, Z24; \
	VPDPBUSD.BCST 24(p), Z6, Z24; \
	VPDPBUSD.BCST 28(p), Z7, Z24; \
	VCVTDQ2PS Z24, Z24; \
	VMULPS.BCST 36(p), Z8, Z25; \
	VFMADD231PS Z25, Z24, acc

// G16TOK4 is G16TOK for a lone token: its 8 VPDPBUSD in four chains of
// two, then added up (the same exact integer sums), so that they overlap.
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

// G16PREFETCH fetches the block after next.
#define G16PREFETCH \
	PREFETCHT0 1088(SI); \
	PREFETCHT0 1152(SI); \
	PREFETCHT0 1216(SI); \
	PREFETCHT0 1280(SI); \
	PREFETCHT0 1344(SI); \
	PREFETCHT0 1408(SI); \
	PREFETCHT0 1472(SI); \
	PREFETCHT0 1536(SI); \
	PREFETCHT0 1600(SI)

// func q8x16Gemm8(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr)
TEXT ·q8x16Gemm8(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), AX
	LEAQ (DI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	LEAQ (R11)(AX*1), R12
	LEAQ (R12)(AX*1), R13
	LEAQ (R13)(AX*1), R14
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JEQ done8
loop8:
	G16PREFETCH
	G16LOADAT(SI)
	G16TOK(DI, Z16)
	G16TOK(R8, Z17)
	G16TOK(R9, Z18)
	G16TOK(R10, Z19)
	G16TOK(R11, Z20)
	G16TOK(R12, Z21)
	G16TOK(R13, Z22)
	G16TOK(R14, Z23)
	ADDQ $544, SI
	ADDQ $40, DI
	ADDQ $40, R8
	ADDQ $40, R9
	ADDQ $40, R10
	ADDQ $40, R11
	ADDQ $40, R12
	ADDQ $40, R13
	ADDQ $40, R14
	DECQ CX
	JNZ loop8
done8:
	STORE4
	ADDQ AX, BX
	VMOVUPS Z20, (BX)
	ADDQ AX, BX
	VMOVUPS Z21, (BX)
	ADDQ AX, BX
	VMOVUPS Z22, (BX)
	ADDQ AX, BX
	VMOVUPS Z23, (BX)
	VZEROUPPER
	RET

// func q8x16Gemm4(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr)
TEXT ·q8x16Gemm4(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), AX
	LEAQ (DI)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	TESTQ CX, CX
	JEQ done4
loop4:
	G16PREFETCH
	G16LOADAT(SI)
	G16TOK(DI, Z16)
	G16TOK(R8, Z17)
	G16TOK(R9, Z18)
	G16TOK(R10, Z19)
	ADDQ $544, SI
	ADDQ $40, DI
	ADDQ $40, R8
	ADDQ $40, R9
	ADDQ $40, R10
	DECQ CX
	JNZ loop4
done4:
	STORE4
	VZEROUPPER
	RET

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
