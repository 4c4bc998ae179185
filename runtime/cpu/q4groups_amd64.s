#include "textflag.h"

// LayoutQ4x16 kernels (q4groups.go). A weight block of a group is 288
// bytes: 16 fp16 row scales, then for j = 0..3 the 16 rows' quant bytes
// 4j..4j+3 (64 bytes: low nibbles quants 4j..4j+3, high nibbles
// 16+4j..16+4j+3). A token's block is q8GroupActs' 40 bytes: 32 signed
// quants, int32 -128*sum of them, float32 scale. The level table lv (a
// q4Levels) maps nibbles to levels: bytes 0..15 the levels plus 128,
// 16..31 the signed levels. Per block and token each of the 16 lanes
// (rows) computes the exact integer dot s of the levels and the quants,
// then acc = fma(float32(s), d_w*d_x, acc): dotQ4Group's order.

DATA q4x16nibble<>+0(SB)/4, $0x0f0f0f0f
GLOBL q4x16nibble<>(SB), RODATA|NOPTR, $4
DATA q4x16ones<>+0(SB)/8, $0x0001000100010001
GLOBL q4x16ones<>(SB), RODATA|NOPTR, $8

// Q4CONST loads the nibble mask into Z9 and the unsigned level table (at
// lv) into Z10.
#define Q4CONST(lv) \
	VPBROADCASTD q4x16nibble<>(SB), Z9; \
	MOVQ lv, DX; \
	VBROADCASTI32X4 (DX), Z10

// Q4NIBBLES loads quants 4k..4k+3 of the 16 rows of the block at w into
// Zk (k = 0..7), the bare nibbles, with Z9 the nibble mask.
#define Q4NIBBLES(w) \
	VMOVDQU32 32(w), Z0; \
	VMOVDQU32 96(w), Z1; \
	VMOVDQU32 160(w), Z2; \
	VMOVDQU32 224(w), Z3; \
	VPSRLW $4, Z0, Z4; \
	VPSRLW $4, Z1, Z5; \
	VPSRLW $4, Z2, Z6; \
	VPSRLW $4, Z3, Z7; \
	VPANDD Z9, Z0, Z0; \
	VPANDD Z9, Z1, Z1; \
	VPANDD Z9, Z2, Z2; \
	VPANDD Z9, Z3, Z3; \
	VPANDD Z9, Z4, Z4; \
	VPANDD Z9, Z5, Z5; \
	VPANDD Z9, Z6, Z6; \
	VPANDD Z9, Z7, Z7

// Q4LEVELS loads the levels plus 128 of quants 4k..4k+3 of the 16 rows of
// the block at w into Zk (k = 0..7), with Z9 the nibble mask and Z10 the
// table: the block's quants as LayoutQ8x16 holds them.
#define Q4LEVELS(w) \
	Q4NIBBLES(w); \
	VPSHUFB Z0, Z10, Z0; \
	VPSHUFB Z1, Z10, Z1; \
	VPSHUFB Z2, Z10, Z2; \
	VPSHUFB Z3, Z10, Z3; \
	VPSHUFB Z4, Z10, Z4; \
	VPSHUFB Z5, Z10, Z5; \
	VPSHUFB Z6, Z10, Z6; \
	VPSHUFB Z7, Z10, Z7

// Q4TOK1 accumulates the block of the lone token at p into acc: 8
// VPDPBUSD of the broadcast quant dwords against Z0..Z7 in four chains of
// two, the first started from the token's -128*sum, added up (so each lane
// holds the exact signed dot); then converted, times (Z8 * the token's
// scale), fused-added into acc: the LayoutQ8x16 kernels' arithmetic.
#define Q4TOK1(p, acc) \
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

// func q4x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer)
TEXT ·q4x16Unpack(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	Q4CONST(lv+24(FP))
	TESTQ CX, CX
	JEQ doneu
loopu:
	VMOVDQU (SI), Y8
	VMOVDQU Y8, (DI)
	Q4LEVELS(SI)
	VMOVDQU32 Z0, 32(DI)
	VMOVDQU32 Z1, 96(DI)
	VMOVDQU32 Z2, 160(DI)
	VMOVDQU32 Z3, 224(DI)
	VMOVDQU32 Z4, 288(DI)
	VMOVDQU32 Z5, 352(DI)
	VMOVDQU32 Z6, 416(DI)
	VMOVDQU32 Z7, 480(DI)
	ADDQ $288, SI
	ADDQ $544, DI
	DECQ CX
	JNZ loopu
doneu:
	VZEROUPPER
	RET

// func q4x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)
TEXT ·q4x16Gemv(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	Q4CONST(lv+32(FP))
	VPXORD Z16, Z16, Z16
	TESTQ CX, CX
	JEQ done1
loop1:
	VCVTPH2PS (SI), Z8
	Q4LEVELS(SI)
	Q4TOK1(DI, Z16)
	ADDQ $288, SI
	ADDQ $40, DI
	DECQ CX
	JNZ loop1
done1:
	MOVQ out+24(FP), BX
	VMOVUPS Z16, (BX)
	VZEROUPPER
	RET

// Q4SDOT adds to the int32 lanes acc the dots of the signed levels wv (8
// rows' 4 quants each) and the broadcast token dword xv: |w| times x with
// w's sign, pairwise to 16 bits (at most 2*128*127, no saturation), then
// pairwise to 32 bits (Y1: ones). Clobbers wv and Y14.
#define Q4SDOT(wv, xv, acc) \
	VPSIGNB wv, xv, Y14; \
	VPABSB wv, wv; \
	VPMADDUBSW Y14, wv, wv; \
	VPMADDWD Y1, wv, wv; \
	VPADDD wv, acc, acc

// Q4HALF adds to acc the dots of 8 rows' quant dword at off(SI): the
// levels of the low nibbles (Y12: the signed table) by the broadcast
// token dword Y6, of the high nibbles by Y13.
#define Q4HALF(off, acc) \
	VMOVDQU off(SI), Y7; \
	VPSRLW $4, Y7, Y9; \
	VPAND Y0, Y7, Y7; \
	VPAND Y0, Y9, Y9; \
	VPSHUFB Y7, Y12, Y7; \
	VPSHUFB Y9, Y12, Y9; \
	Q4SDOT(Y7, Y6, acc); \
	Q4SDOT(Y9, Y13, acc)

// Q4XDW broadcasts the token's quant dwords j (Y6) and 4+j (Y13).
#define Q4XDW(j) \
	VPBROADCASTD (4*j)(DI), Y6; \
	VPBROADCASTD (16+4*j)(DI), Y13

// func q4x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)
TEXT ·q4x16GemvAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ lv+32(FP), DX
	VPBROADCASTD q4x16nibble<>(SB), Y0
	VPBROADCASTQ q4x16ones<>(SB), Y1
	VBROADCASTI128 16(DX), Y12
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JEQ doneavx2
loopavx2:
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	Q4XDW(0)
	Q4HALF(32, Y2)
	Q4HALF(64, Y3)
	Q4XDW(1)
	Q4HALF(96, Y2)
	Q4HALF(128, Y3)
	Q4XDW(2)
	Q4HALF(160, Y2)
	Q4HALF(192, Y3)
	Q4XDW(3)
	Q4HALF(224, Y2)
	Q4HALF(256, Y3)
	VCVTPH2PS 0(SI), Y4
	VCVTPH2PS 16(SI), Y5
	VBROADCASTSS 36(DI), Y8
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VFMADD231PS Y4, Y2, Y10
	VFMADD231PS Y5, Y3, Y11
	ADDQ $288, SI
	ADDQ $40, DI
	DECQ CX
	JNZ loopavx2
doneavx2:
	MOVQ out+24(FP), BX
	VMOVUPS Y10, (BX)
	VMOVUPS Y11, 32(BX)
	VZEROUPPER
	RET

// Q5_0 blocks of LayoutQ4x16 are 352 bytes: the 288 of a Q4_0 block (the
// low 4 bits of the quants), then the 16 rows' high bits, a dword each:
// byte m holds at bit k the high bit of quant 4k+m. With q5_0Levels as lv,
// Q4LEVELS gives the levels plus 128 of the quants whose high bit is
// clear; Q5HIGH adds the 16 of the set ones.

DATA q5x16bit4<>+0(SB)/4, $0x10101010
GLOBL q5x16bit4<>(SB), RODATA|NOPTR, $4

// Q5HIGH adds 16 to the bytes of Zk (k = 0..7, Q4LEVELS' quants
// 4k..4k+3 of each row) whose high bit, at 288(w), is set: bit k of each
// byte shifted to bit 4 (no bit crosses a byte at shifts of at most 4),
// masked by Z11 (0x10 bytes). Clobbers Z12, Z13.
#define Q5HIGH(w) Q5HIGHM(w, Z11)

// Q5HIGHM is Q5HIGH with the mask in m.
#define Q5HIGHM(w, m) \
	VMOVDQU32 288(w), Z13; \
	VPSLLW $4, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z0, Z0; \
	VPSLLW $3, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z1, Z1; \
	VPSLLW $2, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z2, Z2; \
	VPSLLW $1, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z3, Z3; \
	VPANDD m, Z13, Z12; \
	VPADDB Z12, Z4, Z4; \
	VPSRLW $1, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z5, Z5; \
	VPSRLW $2, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z6, Z6; \
	VPSRLW $3, Z13, Z12; \
	VPANDD m, Z12, Z12; \
	VPADDB Z12, Z7, Z7

// func q5x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer)
TEXT ·q5x16Unpack(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	Q4CONST(lv+24(FP))
	VPBROADCASTD q5x16bit4<>(SB), Z11
	TESTQ CX, CX
	JEQ done5u
loop5u:
	VMOVDQU (SI), Y8
	VMOVDQU Y8, (DI)
	Q4LEVELS(SI)
	Q5HIGH(SI)
	VMOVDQU32 Z0, 32(DI)
	VMOVDQU32 Z1, 96(DI)
	VMOVDQU32 Z2, 160(DI)
	VMOVDQU32 Z3, 224(DI)
	VMOVDQU32 Z4, 288(DI)
	VMOVDQU32 Z5, 352(DI)
	VMOVDQU32 Z6, 416(DI)
	VMOVDQU32 Z7, 480(DI)
	ADDQ $352, SI
	ADDQ $544, DI
	DECQ CX
	JNZ loop5u
done5u:
	VZEROUPPER
	RET

// func q5x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)
TEXT ·q5x16Gemv(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ x+16(FP), DI
	Q4CONST(lv+32(FP))
	VPBROADCASTD q5x16bit4<>(SB), Z11
	VPXORD Z16, Z16, Z16
	TESTQ CX, CX
	JEQ done51
loop51:
	VCVTPH2PS (SI), Z8
	Q4LEVELS(SI)
	Q5HIGH(SI)
	Q4TOK1(DI, Z16)
	ADDQ $352, SI
	ADDQ $40, DI
	DECQ CX
	JNZ loop51
done51:
	MOVQ out+24(FP), BX
	VMOVUPS Z16, (BX)
	VZEROUPPER
	RET
