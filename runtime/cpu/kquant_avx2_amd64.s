#include "textflag.h"
#include "lanes_amd64.h"

// AVX2 (with FMA and F16C) kernels for Q4_K, Q5_K and Q6_K weights against
// Q8_K activations, bit for bit the reference dots: 4 weight rows and one
// token per call (dot4) or one row and 4 tokens (dot1x4). Only VEX-encoded
// instructions and Y0..Y15. Per super-block of 256, each 32-element chunk
// of weights is unpacked to unsigned bytes in one register, multiplied with
// the signed activations by VPMADDUBSW (pairs of products as int16, which
// cannot saturate: weights are at most 63) and weighted by its sub-block
// scales with VPMADDWD, so int32 lane l holds the chunk's elements 4l..4l+3
// (kLanes' layout). The integer sums are exact in any order; the float work
// is the reference's, lane for lane.

// a2k4bc: VPSHUFB controls (entry c at 32c) that spread byte c of each
// 128-bit lane (the Q4_K/Q5_K scale of chunk c, the 8 scales as bytes in
// both lanes) to 16 words, zero-extended.
DATA a2k4bc<>+0(SB)/8, $0x8000800080008000
DATA a2k4bc<>+8(SB)/8, $0x8000800080008000
DATA a2k4bc<>+16(SB)/8, $0x8000800080008000
DATA a2k4bc<>+24(SB)/8, $0x8000800080008000
DATA a2k4bc<>+32(SB)/8, $0x8001800180018001
DATA a2k4bc<>+40(SB)/8, $0x8001800180018001
DATA a2k4bc<>+48(SB)/8, $0x8001800180018001
DATA a2k4bc<>+56(SB)/8, $0x8001800180018001
DATA a2k4bc<>+64(SB)/8, $0x8002800280028002
DATA a2k4bc<>+72(SB)/8, $0x8002800280028002
DATA a2k4bc<>+80(SB)/8, $0x8002800280028002
DATA a2k4bc<>+88(SB)/8, $0x8002800280028002
DATA a2k4bc<>+96(SB)/8, $0x8003800380038003
DATA a2k4bc<>+104(SB)/8, $0x8003800380038003
DATA a2k4bc<>+112(SB)/8, $0x8003800380038003
DATA a2k4bc<>+120(SB)/8, $0x8003800380038003
DATA a2k4bc<>+128(SB)/8, $0x8004800480048004
DATA a2k4bc<>+136(SB)/8, $0x8004800480048004
DATA a2k4bc<>+144(SB)/8, $0x8004800480048004
DATA a2k4bc<>+152(SB)/8, $0x8004800480048004
DATA a2k4bc<>+160(SB)/8, $0x8005800580058005
DATA a2k4bc<>+168(SB)/8, $0x8005800580058005
DATA a2k4bc<>+176(SB)/8, $0x8005800580058005
DATA a2k4bc<>+184(SB)/8, $0x8005800580058005
DATA a2k4bc<>+192(SB)/8, $0x8006800680068006
DATA a2k4bc<>+200(SB)/8, $0x8006800680068006
DATA a2k4bc<>+208(SB)/8, $0x8006800680068006
DATA a2k4bc<>+216(SB)/8, $0x8006800680068006
DATA a2k4bc<>+224(SB)/8, $0x8007800780078007
DATA a2k4bc<>+232(SB)/8, $0x8007800780078007
DATA a2k4bc<>+240(SB)/8, $0x8007800780078007
DATA a2k4bc<>+248(SB)/8, $0x8007800780078007
GLOBL a2k4bc<>(SB), RODATA|NOPTR, $256

// a2q6bc: VPSHUFB controls (entry k at 32k) that take, from 8 scale words
// repeated in both 128-bit lanes, word 2k to the 8 words of the low lane
// and word 2k+1 to the high lane's: the scales of the two 16-element
// sub-blocks of Q6_K chunk k of a half.
DATA a2q6bc<>+0(SB)/8, $0x0100010001000100
DATA a2q6bc<>+8(SB)/8, $0x0100010001000100
DATA a2q6bc<>+16(SB)/8, $0x0302030203020302
DATA a2q6bc<>+24(SB)/8, $0x0302030203020302
DATA a2q6bc<>+32(SB)/8, $0x0504050405040504
DATA a2q6bc<>+40(SB)/8, $0x0504050405040504
DATA a2q6bc<>+48(SB)/8, $0x0706070607060706
DATA a2q6bc<>+56(SB)/8, $0x0706070607060706
DATA a2q6bc<>+64(SB)/8, $0x0908090809080908
DATA a2q6bc<>+72(SB)/8, $0x0908090809080908
DATA a2q6bc<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA a2q6bc<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA a2q6bc<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA a2q6bc<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA a2q6bc<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA a2q6bc<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL a2q6bc<>(SB), RODATA|NOPTR, $128

// a2dsh: VPSHUFB control, the [d, dmin] fp16 pairs of 4 rows (one dword
// each) to the 4 d's, then the 4 dmin's.
DATA a2dsh<>+0(SB)/8, $0x0d0c090805040100
DATA a2dsh<>+8(SB)/8, $0x0f0e0b0a07060302
GLOBL a2dsh<>(SB), RODATA|NOPTR, $16

// a2dd: VPSHUFB control, one row's [d, dmin] fp16 pair to [d x4, dmin x4].
DATA a2dd<>+0(SB)/8, $0x0100010001000100
DATA a2dd<>+8(SB)/8, $0x0302030203020302
GLOBL a2dd<>(SB), RODATA|NOPTR, $16

// Byte masks.
DATA a2m0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2m0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2m0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2m0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL a2m0f<>(SB), RODATA|NOPTR, $32
DATA a2m10<>+0(SB)/8, $0x1010101010101010
DATA a2m10<>+8(SB)/8, $0x1010101010101010
DATA a2m10<>+16(SB)/8, $0x1010101010101010
DATA a2m10<>+24(SB)/8, $0x1010101010101010
GLOBL a2m10<>(SB), RODATA|NOPTR, $32
DATA a2m30<>+0(SB)/8, $0x3030303030303030
DATA a2m30<>+8(SB)/8, $0x3030303030303030
DATA a2m30<>+16(SB)/8, $0x3030303030303030
DATA a2m30<>+24(SB)/8, $0x3030303030303030
GLOBL a2m30<>(SB), RODATA|NOPTR, $32

// The sign bit of every float32 lane.
DATA a2sign<>+0(SB)/8, $0x8000000080000000
DATA a2sign<>+8(SB)/8, $0x8000000080000000
GLOBL a2sign<>(SB), RODATA|NOPTR, $16

// A2Q4KPAIR adds chunks 2j and 2j+1 of a Q4_K row (nibbles at off(row):
// low for chunk 2j, high for 2j+1) against the activations at act(DI) and
// act+32(DI), weighted by their scales (a2k4bc entries s0 and s1 applied
// to Y11 = the 8 scale bytes in both lanes), into the 8 int32 lanes of
// acc. Needs Y15 = 0x0f bytes; clobbers Y8, Y9, Y10.
#define A2Q4KPAIR(row, off, act, s0, s1, acc) \
	VMOVDQU    off(row), Y8; \
	VPSRLW     $4, Y8, Y9; \
	VPAND      Y15, Y8, Y8; \
	VPAND      Y15, Y9, Y9; \
	VPSHUFB    a2k4bc<>+s0(SB), Y11, Y10; \
	VPMADDUBSW act(DI), Y8, Y8; \
	VPMADDWD   Y10, Y8, Y8; \
	VPADDD     Y8, acc, acc; \
	VPSHUFB    a2k4bc<>+s1(SB), Y11, Y10; \
	VPMADDUBSW act+32(DI), Y9, Y9; \
	VPMADDWD   Y10, Y9, Y9; \
	VPADDD     Y9, acc, acc

// A2Q4KROW sums the products of the Q4_K super-block at (row) with the
// token's activations (DI), weighted by the sub-block scales, into the 8
// int32 lanes of acc, and its 4 groups' mins terms (X13 = the token's 8
// chunk sums as words) into the 4 lanes of mins. Clobbers AX, R8, R9, R14,
// R15, Y8..Y12.
#define A2Q4KROW(row, acc, mins) \
	K4SCALEMIN(row); \
	VMOVQ        R14, X11; \
	VPBROADCASTQ X11, Y11; \
	VMOVQ        AX, X12; \
	VPMOVZXBW    X12, X12; \
	VPMADDWD     X13, X12, mins; \
	VPXOR        acc, acc, acc; \
	A2Q4KPAIR(row, 16, 0, 0, 32, acc); \
	A2Q4KPAIR(row, 48, 64, 64, 96, acc); \
	A2Q4KPAIR(row, 80, 128, 128, 160, acc); \
	A2Q4KPAIR(row, 112, 192, 192, 224, acc)

// func q4KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ4K(row i, x) for the 4 Q4_K rows w + i*wstride
// (strides in bytes), x being nb Q8_K blocks: quants xq (256 per block),
// scales xd (float32) and sums xb (16 int16 per block). Per super-block,
// each row's integer sums q and m are reduced to one int32 each, and one
// 8-lane fused multiply-add takes [q0..q3, m0..m3] times
// [d0..d3, dm0..dm3] (d = fp16 d * x.d, dm = fp16 dmin * x.d) into
// Y14 = [acc0..acc3, accm0..accm3]; at the end out = acc - accm.
TEXT ·q4KDot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU a2m0f<>(SB), Y15
	VXORPS  Y14, Y14, Y14
	TESTQ   CX, CX
	JEQ     q4kdone
q4kloop:
	VMOVDQU (R13), X13
	VPHADDW 16(R13), X13, X13
	A2Q4KROW(SI, Y0, X4)
	A2Q4KROW(R10, Y1, X5)
	A2Q4KROW(R11, Y2, X6)
	A2Q4KROW(R12, Y3, X7)
	// [q0..q3, m0..m3] in Y0.
	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y3, Y2, Y2
	VPHADDD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPHADDD      X5, X4, X4
	VPHADDD      X7, X6, X6
	VPHADDD      X6, X4, X4
	VINSERTI128  $1, X4, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	// [d0..d3, dm0..dm3].
	VMOVD        (SI), X8
	VPINSRD      $1, (R10), X8, X8
	VPINSRD      $2, (R11), X8, X8
	VPINSRD      $3, (R12), X8, X8
	VPSHUFB      a2dsh<>(SB), X8, X8
	VCVTPH2PS    X8, Y8
	VBROADCASTSS (DX), Y9
	VMULPS       Y9, Y8, Y8
	VFMADD231PS  Y0, Y8, Y14
	ADDQ $144, SI
	ADDQ $144, R10
	ADDQ $144, R11
	ADDQ $144, R12
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q4kloop
q4kdone:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	VEXTRACTF128 $1, Y14, X1
	VSUBPS       X1, X14, X0
	VMOVSS       X0, (BX)
	VEXTRACTPS   $1, X0, (BX)(R9*1)
	VEXTRACTPS   $2, X0, (BX)(R9*2)
	LEAQ         (BX)(R9*2), BX
	VEXTRACTPS   $3, X0, (BX)(R9*1)
	VZEROUPPER
	RET

// A2Q4KGRP computes group g of a Q4_K super-block (chunks 2g and 2g+1,
// nibbles at off(SI)) against the activations of tokens 0..3 at act(DI),
// act(DI)(R10*1), act(DI)(R10*2) and act(BX): X0 = [q t0..t3], each q the
// group's sum of the sub-block scale times weight times quant. Needs Y11 =
// the scale bytes in both lanes, Y15 = 0x0f bytes; clobbers Y0..Y3, Y8..Y10,
// Y12, Y13.
#define A2Q4KGRP(off, act, s0, s1) \
	VMOVDQU      off(SI), Y8; \
	VPSRLW       $4, Y8, Y9; \
	VPAND        Y15, Y8, Y8; \
	VPAND        Y15, Y9, Y9; \
	VPSHUFB      a2k4bc<>+s0(SB), Y11, Y10; \
	VPSHUFB      a2k4bc<>+s1(SB), Y11, Y12; \
	VPMADDUBSW   act(DI), Y8, Y0; \
	VPMADDWD     Y10, Y0, Y0; \
	VPMADDUBSW   act+32(DI), Y9, Y13; \
	VPMADDWD     Y12, Y13, Y13; \
	VPADDD       Y13, Y0, Y0; \
	VPMADDUBSW   act(DI)(R10*1), Y8, Y1; \
	VPMADDWD     Y10, Y1, Y1; \
	VPMADDUBSW   act+32(DI)(R10*1), Y9, Y13; \
	VPMADDWD     Y12, Y13, Y13; \
	VPADDD       Y13, Y1, Y1; \
	VPMADDUBSW   act(DI)(R10*2), Y8, Y2; \
	VPMADDWD     Y10, Y2, Y2; \
	VPMADDUBSW   act+32(DI)(R10*2), Y9, Y13; \
	VPMADDWD     Y12, Y13, Y13; \
	VPADDD       Y13, Y2, Y2; \
	VPMADDUBSW   act(BX), Y8, Y3; \
	VPMADDWD     Y10, Y3, Y3; \
	VPMADDUBSW   act+32(BX), Y9, Y13; \
	VPMADDWD     Y12, Y13, Y13; \
	VPADDD       Y13, Y3, Y3; \
	VPHADDD      Y1, Y0, Y0; \
	VPHADDD      Y3, Y2, Y2; \
	VPHADDD      Y2, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD       X1, X0, X0

// func q4KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)
// One Q4_K row (w) against 4n tokens of Q8_K activations, token t's
// quants at xq + t*xqstride, scales at xd + t*xdstride and sums at
// xb + t*xbstride (strides in bytes): out + t*otok = dotQ4K(row, token
// t), bit for bit q4KDot4x1AVX2 (n >= 1 groups per call). The integer sums
// of groups g = 0..3 of 64 elements are added, then per super-block one
// 8-lane fused multiply-add takes [q t0..t3, m t0..t3] times [d t0..t3,
// dm t0..t3] (d = fp16 d * x.d, dm = fp16 dmin * x.d) into Y14 = [acc
// t0..t3, accm t0..t3]; at the end out = acc - accm.
TEXT ·q4KDot1x4AVX2(SB), NOSPLIT, $0-88
	MOVQ xqstride+16(FP), R10
	MOVQ xdstride+32(FP), R11
	MOVQ xbstride+48(FP), R12
	VMOVDQU a2m0f<>(SB), Y15
q4k14group:
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+40(FP), R13
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	VXORPS Y14, Y14, Y14
	TESTQ  CX, CX
	JEQ    q4k14done
q4k14loop:
	K4SCALEMIN(SI)
	VMOVQ        R14, X11
	VPBROADCASTQ X11, Y11
	// Mins terms: Y4 = [m[0] t0..t3, m[2] t0..t3], Y5 = [m[1], m[3]].
	VMOVQ        AX, X0
	VPMOVZXBW    X0, X0
	VPERMQ       $0x50, Y0, Y0 // [mins 0..3 twice, mins 4..7 twice]
	LEAQ         (R13)(R12*2), R9
	VMOVDQU      (R13), Y1
	VPHADDW      (R13)(R12*1), Y1, Y1 // [c0..c3 t0, c0..c3 t1, c4..c7 t0, c4..c7 t1]
	VMOVDQU      (R9), Y2
	VPHADDW      (R9)(R12*1), Y2, Y2
	VPMADDWD     Y0, Y1, Y1 // [m[0] t0, m[1] t0, m[0] t1, m[1] t1, m[2] t0, ...]
	VPMADDWD     Y0, Y2, Y2
	VPUNPCKLDQ   Y2, Y1, Y3
	VPUNPCKHDQ   Y2, Y1, Y1
	VPUNPCKLDQ   Y1, Y3, Y4
	VPUNPCKHDQ   Y1, Y3, Y5
	// Y6 = [d t0..t3, dm t0..t3].
	LEAQ         (DX)(R11*2), R9
	VMOVSS       (DX), X6
	VINSERTPS    $0x10, (DX)(R11*1), X6, X6
	VINSERTPS    $0x20, (R9), X6, X6
	VINSERTPS    $0x30, (R9)(R11*1), X6, X6
	VINSERTF128  $1, X6, Y6, Y6
	VMOVD        (SI), X7
	VPSHUFB      a2dd<>(SB), X7, X7
	VCVTPH2PS    X7, Y7
	VMULPS       Y6, Y7, Y6
	A2Q4KGRP(16, 0, 0, 32)
	VMOVDQA      X0, X7
	A2Q4KGRP(48, 64, 64, 96)
	VPADDD       X0, X7, X7
	A2Q4KGRP(80, 128, 128, 160)
	VPADDD       X0, X7, X7
	A2Q4KGRP(112, 192, 192, 224)
	VPADDD       X0, X7, X7
	// The whole super-block's sums [q t0..t3, m t0..t3], scaled once.
	VPADDD       Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VINSERTI128  $1, X4, Y7, Y7
	VCVTDQ2PS    Y7, Y7
	VFMADD231PS  Y7, Y6, Y14
	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q4k14loop
q4k14done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	VEXTRACTF128 $1, Y14, X1
	VSUBPS       X1, X14, X0
	VMOVSS       X0, (BX)
	VEXTRACTPS   $1, X0, (BX)(R9*1)
	VEXTRACTPS   $2, X0, (BX)(R9*2)
	LEAQ         (BX)(R9*2), AX
	VEXTRACTPS   $3, X0, (AX)(R9*1)
	// The next 4 tokens.
	SHLQ $2, R9
	ADDQ R9, out+64(FP)
	MOVQ xq+8(FP), DI
	LEAQ (DI)(R10*4), DI
	MOVQ DI, xq+8(FP)
	MOVQ xd+24(FP), DX
	LEAQ (DX)(R11*4), DX
	MOVQ DX, xd+24(FP)
	MOVQ xb+40(FP), R13
	LEAQ (R13)(R12*4), R13
	MOVQ R13, xb+40(FP)
	DECQ n+80(FP)
	JNZ  q4k14group
	VZEROUPPER
	RET

// The Q6_K kernels follow dotQ6K: per super-block and token, the 8 lanes
// of kLanes (each chunk's unsigned 6-bit weights against the quants, the
// low 128-bit lane weighted by the chunk's first sub-block scale and the
// high lane by its second) minus 32 times the scaled bsums of two
// sub-blocks per lane, converted to float32 and accumulated as
// acc = fma(d, s, acc) with d = x.d * fp16 d; out = hsum8(acc).

// A2Q6KCHUNK adds chunk k of a half (its weights in Y5) against the
// activations at act(DI) into Y2, weighted by the scales of a2q6bc entry k
// applied to Y1 = the half's 8 scale words in both lanes. Clobbers Y5, Y7.
#define A2Q6KCHUNK(act, k) \
	VPSHUFB    a2q6bc<>+k(SB), Y1, Y7; \
	VPMADDUBSW act(DI), Y5, Y5; \
	VPMADDWD   Y7, Y5, Y5; \
	VPADDD     Y5, Y2, Y2

// A2Q6KHALF adds the 4 chunks of one half of the Q6_K super-block at
// (row) into Y2: low nibbles ql at qlo(row) (64 bytes), high bit pairs qh
// at qh(row) (32 bytes), activations from act(DI). Chunk k of the half
// takes the low nibbles of ql bytes 32(k&1).. (k < 2) or their high ones
// (k >= 2), and qh bits 2k, 2k+1. Needs Y1, Y14 = 0x30 bytes, Y15 = 0x0f
// bytes; clobbers Y3..Y7.
#define A2Q6KHALF(row, qlo, qh, act) \
	VMOVDQU qh(row), Y4; \
	VMOVDQU qlo(row), Y3; \
	VPAND   Y15, Y3, Y5; \
	VPSLLW  $4, Y4, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	A2Q6KCHUNK(act, 0); \
	VPSRLW  $4, Y3, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPAND   Y14, Y4, Y6; \
	VPOR    Y6, Y5, Y5; \
	A2Q6KCHUNK(act+64, 64); \
	VMOVDQU qlo+32(row), Y3; \
	VPAND   Y15, Y3, Y5; \
	VPSLLW  $2, Y4, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	A2Q6KCHUNK(act+32, 32); \
	VPSRLW  $4, Y3, Y5; \
	VPAND   Y15, Y5, Y5; \
	VPSRLW  $2, Y4, Y6; \
	VPAND   Y14, Y6, Y6; \
	VPOR    Y6, Y5, Y5; \
	A2Q6KCHUNK(act+96, 96)

// A2Q6KROW accumulates the Q6_K super-block at (row) against the token
// (activations at DI, sums at R13, Y9 = x.d in 8 lanes) into facc.
// Clobbers Y0..Y7.
#define A2Q6KROW(row, facc) \
	VPMOVSXBW    192(row), Y0; \
	VPMADDWD     (R13), Y0, Y6; \
	VPSLLD       $5, Y6, Y6; \
	VPXOR        Y2, Y2, Y2; \
	VPSUBD       Y6, Y2, Y2; \
	VPERMQ       $0x44, Y0, Y1; \
	A2Q6KHALF(row, 0, 128, 0); \
	VPERMQ       $0xee, Y0, Y1; \
	A2Q6KHALF(row, 64, 160, 128); \
	VCVTDQ2PS    Y2, Y2; \
	VPBROADCASTW 208(row), X6; \
	VCVTPH2PS    X6, Y6; \
	VMULPS       Y9, Y6, Y6; \
	VFMADD231PS  Y2, Y6, facc

// func q6KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q4KDot4x1AVX2 for Q6_K rows: out + i*ostride = dotQ6K(row i, x).
TEXT ·q6KDot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU a2m0f<>(SB), Y15
	VMOVDQU a2m30<>(SB), Y14
	VXORPS  Y10, Y10, Y10
	VXORPS  Y11, Y11, Y11
	VXORPS  Y12, Y12, Y12
	VXORPS  Y13, Y13, Y13
	TESTQ   CX, CX
	JEQ     q6kdone
q6kloop:
	VBROADCASTSS (DX), Y9
	A2Q6KROW(SI, Y10)
	A2Q6KROW(R10, Y11)
	A2Q6KROW(R11, Y12)
	A2Q6KROW(R12, Y13)
	ADDQ $210, SI
	ADDQ $210, R10
	ADDQ $210, R11
	ADDQ $210, R12
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q6kloop
q6kdone:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	HSUM8X(Y10, X10, X0, X1)
	VMOVSS X0, (BX)
	HSUM8X(Y11, X11, X0, X1)
	VMOVSS X0, (BX)(R9*1)
	HSUM8X(Y12, X12, X0, X1)
	VMOVSS X0, (BX)(R9*2)
	LEAQ   (BX)(R9*2), BX
	HSUM8X(Y13, X13, X0, X1)
	VMOVSS X0, (BX)(R9*1)
	VZEROUPPER
	RET

// A2Q6KCH4 is A2Q6KCHUNK for four tokens: the chunk's weights (Y11) and
// scale words (a2q6bc entry k applied to Y8) against the activations of
// tokens 0..3 at act(DI), act(DI)(R10*1), act(DI)(R10*2) and act(BX) into
// Y0..Y3. Clobbers Y13, Y14.
#define A2Q6KCH4(act, k) \
	VPSHUFB    a2q6bc<>+k(SB), Y8, Y13; \
	VPMADDUBSW act(DI), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y0, Y0; \
	VPMADDUBSW act(DI)(R10*1), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y1, Y1; \
	VPMADDUBSW act(DI)(R10*2), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y2, Y2; \
	VPMADDUBSW act(BX), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y3, Y3

// A2Q6KHALF4 is A2Q6KHALF for four tokens: one half of the Q6_K
// super-block at SI, each chunk unpacked once (as A2Q6KHALF does) into
// Y11 and multiplied into Y0..Y3 (A2Q6KCH4). Needs Y8 = the half's scale
// words in both lanes, Y15 = 0x0f bytes; clobbers Y9..Y14.
#define A2Q6KHALF4(qlo, qh, act) \
	VMOVDQU qh(SI), Y10; \
	VMOVDQU qlo(SI), Y9; \
	VPAND   Y15, Y9, Y11; \
	VPSLLW  $4, Y10, Y12; \
	VPAND   a2m30<>(SB), Y12, Y12; \
	VPOR    Y12, Y11, Y11; \
	A2Q6KCH4(act, 0); \
	VPSRLW  $4, Y9, Y11; \
	VPAND   Y15, Y11, Y11; \
	VPAND   a2m30<>(SB), Y10, Y12; \
	VPOR    Y12, Y11, Y11; \
	A2Q6KCH4(act+64, 64); \
	VMOVDQU qlo+32(SI), Y9; \
	VPAND   Y15, Y9, Y11; \
	VPSLLW  $2, Y10, Y12; \
	VPAND   a2m30<>(SB), Y12, Y12; \
	VPOR    Y12, Y11, Y11; \
	A2Q6KCH4(act+32, 32); \
	VPSRLW  $4, Y9, Y11; \
	VPAND   Y15, Y11, Y11; \
	VPSRLW  $2, Y10, Y12; \
	VPAND   a2m30<>(SB), Y12, Y12; \
	VPOR    Y12, Y11, Y11; \
	A2Q6KCH4(act+96, 96)

// A2Q6KCORR starts token lane sums acc at minus 32 times the token's
// scaled sums (16 words at sums; Y8 = the 16 scale words, Y9 = 0).
#define A2Q6KCORR(sums, acc) \
	VPMADDWD sums, Y8, acc; \
	VPSLLD   $5, acc, acc; \
	VPSUBD   acc, Y9, acc

// A2Q6KTOK4 finishes one token's share of a Q6_K super-block: its lanes
// in acc as float32, times d = the row's fp16 d (Y9, as float32) times the
// token's x.d (at dptr), into facc. Clobbers Y10.
#define A2Q6KTOK4(acc, dptr, facc) \
	VCVTDQ2PS    acc, acc; \
	VBROADCASTSS dptr, Y10; \
	VMULPS       Y9, Y10, Y10; \
	VFMADD231PS  acc, Y10, facc

// func q6KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)
// One Q6_K row against n groups of four tokens (group g's token t at
// xq + (4g+t)*xqstride, and so on): out + (4g+t)*otok = dotQ6K(row, token
// 4g+t), bit for bit q6KDot4x1AVX2's, each super-block unpacked once per
// group.
TEXT ·q6KDot1x4AVX2(SB), NOSPLIT, $0-88
	MOVQ xqstride+16(FP), R10
	MOVQ xdstride+32(FP), R11
	MOVQ xbstride+48(FP), R12
	VMOVDQU a2m0f<>(SB), Y15
q6k14group:
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+40(FP), R13
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	LEAQ (DX)(R11*2), R8
	ADDQ R11, R8
	LEAQ (R13)(R12*2), AX
	ADDQ R12, AX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JEQ    q6k14done
q6k14loop:
	VPMOVSXBW 192(SI), Y8
	VPXOR     Y9, Y9, Y9
	A2Q6KCORR((R13), Y0)
	A2Q6KCORR((R13)(R12*1), Y1)
	A2Q6KCORR((R13)(R12*2), Y2)
	A2Q6KCORR((AX), Y3)
	VPERMQ    $0x44, Y8, Y8
	A2Q6KHALF4(0, 128, 0)
	VPMOVSXBW 200(SI), X8
	VPERMQ    $0x44, Y8, Y8
	A2Q6KHALF4(64, 160, 128)
	VPBROADCASTW 208(SI), X9
	VCVTPH2PS    X9, Y9
	A2Q6KTOK4(Y0, (DX), Y4)
	A2Q6KTOK4(Y1, (DX)(R11*1), Y5)
	A2Q6KTOK4(Y2, (DX)(R11*2), Y6)
	A2Q6KTOK4(Y3, (R8), Y7)
	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $4, R8
	ADDQ $32, R13
	ADDQ $32, AX
	DECQ CX
	JNZ  q6k14loop
q6k14done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	HSUM8X(Y4, X4, X0, X1)
	VMOVSS X0, (BX)
	HSUM8X(Y5, X5, X0, X1)
	VMOVSS X0, (BX)(R9*1)
	HSUM8X(Y6, X6, X0, X1)
	VMOVSS X0, (BX)(R9*2)
	LEAQ   (BX)(R9*2), BX
	HSUM8X(Y7, X7, X0, X1)
	VMOVSS X0, (BX)(R9*1)
	// The next 4 tokens.
	SHLQ $2, R9
	ADDQ R9, out+64(FP)
	MOVQ xq+8(FP), DI
	LEAQ (DI)(R10*4), DI
	MOVQ DI, xq+8(FP)
	MOVQ xd+24(FP), DX
	LEAQ (DX)(R11*4), DX
	MOVQ DX, xd+24(FP)
	MOVQ xb+40(FP), R13
	LEAQ (R13)(R12*4), R13
	MOVQ R13, xb+40(FP)
	DECQ n+80(FP)
	JNZ  q6k14group
	VZEROUPPER
	RET

// The Q5_K kernels follow dotQ5K: per super-block and token, kLanes of the
// 5-bit weights (Q4_K's nibbles plus bit c of each of the 32 qh bytes for
// chunk c) scaled as acc = fma(d, s, acc) with d = x.d * fp16 d, and the
// mins' products with the chunk sums added as one integer p into
// summs = fma(dmin, float(p), summs) with dmin = -x.d * fp16 dmin;
// out = hsum8(acc) + summs.

// A2Q5KHI puts bit c of each byte of src at bit 4 (0x10), the rest zero,
// into dst: sh is VPSLLW with n = 4-c, or VPSRLW with n = c-4 (word
// shifts: bits crossing into the other byte of a word never land on bit 4).
#define A2Q5KHI(sh, n, src, dst) \
	sh    $n, src, dst; \
	VPAND a2m10<>(SB), dst, dst

// A2Q5KPAIR adds chunks 2j and 2j+1 of a Q5_K row (nibbles at off(row),
// fifth bits from Y1 = the 32 qh bytes by A2Q5KHI(sh0, n0) and (sh1, n1))
// against the activations at act(DI) and act+32(DI), weighted by their
// scales (a2k4bc entries s0 and s1 applied to Y0), into Y2. Needs Y15 =
// 0x0f bytes; clobbers Y3..Y6.
#define A2Q5KPAIR(row, off, act, s0, s1, sh0, n0, sh1, n1) \
	VMOVDQU    off(row), Y3; \
	VPSRLW     $4, Y3, Y4; \
	VPAND      Y15, Y3, Y3; \
	VPAND      Y15, Y4, Y4; \
	A2Q5KHI(sh0, n0, Y1, Y5); \
	VPOR       Y5, Y3, Y3; \
	A2Q5KHI(sh1, n1, Y1, Y5); \
	VPOR       Y5, Y4, Y4; \
	VPSHUFB    a2k4bc<>+s0(SB), Y0, Y6; \
	VPMADDUBSW act(DI), Y3, Y3; \
	VPMADDWD   Y6, Y3, Y3; \
	VPADDD     Y3, Y2, Y2; \
	VPSHUFB    a2k4bc<>+s1(SB), Y0, Y6; \
	VPMADDUBSW act+32(DI), Y4, Y4; \
	VPMADDWD   Y6, Y4, Y4; \
	VPADDD     Y4, Y2, Y2

// A2Q5KROW accumulates the Q5_K super-block at (row) against the token
// (activations at DI, Y7 = x.d in 8 lanes, X14 = the sums of its 8 chunks
// as words) into facc, and puts its mins' integer p into lane lane of X9
// (blend = 1<<lane). Clobbers AX, R8, R9, R14, R15, Y0..Y6.
#define A2Q5KROW(row, facc, blend) \
	K4SCALEMIN(row); \
	VMOVQ        R14, X0; \
	VPBROADCASTQ X0, Y0; \
	VMOVDQU      16(row), Y1; \
	VPXOR        Y2, Y2, Y2; \
	A2Q5KPAIR(row, 48, 0, 0, 32, VPSLLW, 4, VPSLLW, 3); \
	A2Q5KPAIR(row, 80, 64, 64, 96, VPSLLW, 2, VPSLLW, 1); \
	A2Q5KPAIR(row, 112, 128, 128, 160, VPSRLW, 0, VPSRLW, 1); \
	A2Q5KPAIR(row, 144, 192, 192, 224, VPSRLW, 2, VPSRLW, 3); \
	VMOVQ        AX, X3; \
	VPMOVZXBW    X3, X3; \
	VPMADDWD     X14, X3, X3; \
	VPSHUFD      $0x4e, X3, X4; \
	VPADDD       X4, X3, X3; \
	VPSHUFD      $0xb1, X3, X4; \
	VPADDD       X4, X3, X3; \
	VPBLENDD     $blend, X3, X9, X9; \
	VCVTDQ2PS    Y2, Y2; \
	VPBROADCASTW (row), X3; \
	VCVTPH2PS    X3, Y3; \
	VMULPS       Y7, Y3, Y3; \
	VFMADD231PS  Y2, Y3, facc

// func q5KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q4KDot4x1AVX2 for Q5_K rows: out + i*ostride = dotQ5K(row i, x). The 4
// rows' summs are the 4 lanes of X8, updated by one 4-lane fused
// multiply-add per super-block.
TEXT ·q5KDot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU a2m0f<>(SB), Y15
	VXORPS  X8, X8, X8
	VXORPS  Y10, Y10, Y10
	VXORPS  Y11, Y11, Y11
	VXORPS  Y12, Y12, Y12
	VXORPS  Y13, Y13, Y13
	TESTQ   CX, CX
	JEQ     q5kdone
q5kloop:
	VMOVDQU      (R13), X14
	VPHADDW      16(R13), X14, X14
	VBROADCASTSS (DX), Y7
	A2Q5KROW(SI, Y10, 1)
	A2Q5KROW(R10, Y11, 2)
	A2Q5KROW(R11, Y12, 4)
	A2Q5KROW(R12, Y13, 8)
	// summs = fma(-x.d * fp16 dmin, float(p), summs), row r in lane r.
	VCVTDQ2PS   X9, X9
	VMOVD       (SI), X3
	VPINSRD     $1, (R10), X3, X3
	VPINSRD     $2, (R11), X3, X3
	VPINSRD     $3, (R12), X3, X3
	VPSHUFB     a2dsh<>(SB), X3, X3
	VPSHUFD     $0xee, X3, X3
	VCVTPH2PS   X3, X3
	VXORPS      a2sign<>(SB), X7, X4
	VMULPS      X4, X3, X3
	VFMADD231PS X9, X3, X8
	ADDQ $176, SI
	ADDQ $176, R10
	ADDQ $176, R11
	ADDQ $176, R12
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q5kloop
q5kdone:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	HSUM8X(Y10, X10, X0, X1)
	VADDSS  X8, X0, X0
	VMOVSS  X0, (BX)
	HSUM8X(Y11, X11, X0, X1)
	VPSHUFD $0x55, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*1)
	HSUM8X(Y12, X12, X0, X1)
	VPSHUFD $0xaa, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*2)
	LEAQ    (BX)(R9*2), BX
	HSUM8X(Y13, X13, X0, X1)
	VPSHUFD $0xff, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*1)
	VZEROUPPER
	RET

// A2Q5KCH4 multiplies one chunk of Q5_K weights (Y11) weighted by its
// scale (a2k4bc entry s applied to Y9) with the activations of tokens
// 0..3 at act(DI), act(DI)(R10*1), act(DI)(R10*2) and act(BX) into
// Y0..Y3. Clobbers Y13, Y14.
#define A2Q5KCH4(act, s) \
	VPSHUFB    a2k4bc<>+s(SB), Y9, Y13; \
	VPMADDUBSW act(DI), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y0, Y0; \
	VPMADDUBSW act(DI)(R10*1), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y1, Y1; \
	VPMADDUBSW act(DI)(R10*2), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y2, Y2; \
	VPMADDUBSW act(BX), Y11, Y14; \
	VPMADDWD   Y13, Y14, Y14; \
	VPADDD     Y14, Y3, Y3

// A2Q5KPAIR4 is A2Q5KPAIR for four tokens: chunks 2j and 2j+1 of the Q5_K
// row at SI (nibbles at off(SI), fifth bits from Y10 = the qh bytes),
// each unpacked once into Y11 and multiplied into Y0..Y3 (A2Q5KCH4).
// Needs Y15 = 0x0f bytes; clobbers Y11..Y14.
#define A2Q5KPAIR4(off, act, s0, s1, sh0, n0, sh1, n1) \
	VMOVDQU off(SI), Y11; \
	VPAND   Y15, Y11, Y11; \
	A2Q5KHI(sh0, n0, Y10, Y12); \
	VPOR    Y12, Y11, Y11; \
	A2Q5KCH4(act, s0); \
	VMOVDQU off(SI), Y11; \
	VPSRLW  $4, Y11, Y11; \
	VPAND   Y15, Y11, Y11; \
	A2Q5KHI(sh1, n1, Y10, Y12); \
	VPOR    Y12, Y11, Y11; \
	A2Q5KCH4(act+32, s1)

// A2Q5KTOK4 finishes one token's lanes of a Q5_K super-block: acc as
// float32 times d = the row's fp16 d (Y14, as float32) times the token's
// x.d (at dptr), into facc. Clobbers Y11.
#define A2Q5KTOK4(acc, dptr, facc) \
	VCVTDQ2PS    acc, acc; \
	VBROADCASTSS dptr, Y11; \
	VMULPS       Y14, Y11, Y11; \
	VFMADD231PS  acc, Y11, facc

// func q5KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One Q5_K row against 4 tokens (token t at xq + t*xqstride, and so on):
// out + t*otok = dotQ5K(row, token t), bit for bit q5KDot4x1AVX2's, each
// super-block unpacked once. The 4 tokens' summs are the lanes of X8.
TEXT ·q5KDot1x4AVX2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xqstride+16(FP), R10
	MOVQ xd+24(FP), DX
	MOVQ xdstride+32(FP), R11
	MOVQ xb+40(FP), R13
	MOVQ xbstride+48(FP), R12
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	VMOVDQU a2m0f<>(SB), Y15
	VXORPS  X8, X8, X8
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	TESTQ   CX, CX
	JEQ     q5k14done
q5k14loop:
	K4SCALEMIN(SI)
	VMOVQ        R14, X9
	VPBROADCASTQ X9, Y9
	VMOVDQU      16(SI), Y10
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y3, Y3, Y3
	A2Q5KPAIR4(48, 0, 0, 32, VPSLLW, 4, VPSLLW, 3)
	A2Q5KPAIR4(80, 64, 64, 96, VPSLLW, 2, VPSLLW, 1)
	A2Q5KPAIR4(112, 128, 128, 160, VPSRLW, 0, VPSRLW, 1)
	A2Q5KPAIR4(144, 192, 192, 224, VPSRLW, 2, VPSRLW, 3)
	// p of tokens 0..3: the mins' products with the chunk sums, tokens
	// 0, 1 in Y12 and 2, 3 in Y13 ([t0 lo, t0 lo, t1 lo, t1 lo, t0 hi,
	// ...]), then added per token.
	VMOVQ        AX, X11
	VPMOVZXBW    X11, X11
	VPERMQ       $0x50, Y11, Y11
	LEAQ         (R13)(R12*2), R9
	VMOVDQU      (R13), Y12
	VPHADDW      (R13)(R12*1), Y12, Y12
	VPMADDWD     Y11, Y12, Y12
	VMOVDQU      (R9), Y13
	VPHADDW      (R9)(R12*1), Y13, Y13
	VPMADDWD     Y11, Y13, Y13
	VPHADDD      Y13, Y12, Y12
	VEXTRACTI128 $1, Y12, X13
	VPADDD       X13, X12, X12
	VCVTDQ2PS    X12, X12
	// summs = fma(-x.d * fp16 dmin, float(p), summs), token t in lane t.
	LEAQ         (DX)(R11*2), R9
	VMOVSS       (DX), X13
	VINSERTPS    $0x10, (DX)(R11*1), X13, X13
	VINSERTPS    $0x20, (R9), X13, X13
	VINSERTPS    $0x30, (R9)(R11*1), X13, X13
	VXORPS       a2sign<>(SB), X13, X13
	VPBROADCASTW 2(SI), X14
	VCVTPH2PS    X14, X14
	VMULPS       X13, X14, X13
	VFMADD231PS  X12, X13, X8
	VPBROADCASTW (SI), X14
	VCVTPH2PS    X14, Y14
	A2Q5KTOK4(Y0, (DX), Y4)
	A2Q5KTOK4(Y1, (DX)(R11*1), Y5)
	A2Q5KTOK4(Y2, (R9), Y6)
	A2Q5KTOK4(Y3, (R9)(R11*1), Y7)
	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q5k14loop
q5k14done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	HSUM8X(Y4, X4, X0, X1)
	VADDSS  X8, X0, X0
	VMOVSS  X0, (BX)
	HSUM8X(Y5, X5, X0, X1)
	VPSHUFD $0x55, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*1)
	HSUM8X(Y6, X6, X0, X1)
	VPSHUFD $0xaa, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*2)
	LEAQ    (BX)(R9*2), BX
	HSUM8X(Y7, X7, X0, X1)
	VPSHUFD $0xff, X8, X2
	VADDSS  X2, X0, X0
	VMOVSS  X0, (BX)(R9*1)
	VZEROUPPER
	RET
