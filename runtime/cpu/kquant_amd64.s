#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 (F, BW, VL, VNNI) kernels for Q4_K, Q5_K and Q6_K weights against
// Q8_K activations: 4 weight rows and one token per call (dot4), 2 rows and
// 2 tokens (dot2x2) or one row and 4 tokens (dot1x4), bit for bit the
// reference dots. Per super-block of 256, the weights are unpacked to
// unsigned bytes two 32-element chunks per 512-bit register, multiplied
// with the signed activations by VPMADDUBSW (pairs of products as int16,
// which cannot saturate: weights are at most 63), and weighted by the
// chunk's sub-block scales with VPMADDWD, so each int32 lane holds 4
// products. For Q5_K and Q6_K the lanes of the two chunks are added, giving
// exactly kLanes, and the float work is dotQ5K's / dotQ6K's, lane for lane;
// Q4_K's integer sums are reduced further (see q4KDot4x1), and its 8-token
// kernel q4KDot1x8 transposes the row instead. Q5_K's dot4 and dot1x4 are
// the AVX2 ones (kquant_avx2_amd64.s), which are faster.

// Word indices for VPERMW: Q4_K chunk pair j takes scale 2j for its first
// 16 words and 2j+1 for the next 16; Q6_K chunk pair p takes scale 4p+w/8
// for word w (sub-blocks of 16 elements).
DATA q4kidx<>+0(SB)/8, $0x0000000000000000
DATA q4kidx<>+8(SB)/8, $0x0000000000000000
DATA q4kidx<>+16(SB)/8, $0x0000000000000000
DATA q4kidx<>+24(SB)/8, $0x0000000000000000
DATA q4kidx<>+32(SB)/8, $0x0001000100010001
DATA q4kidx<>+40(SB)/8, $0x0001000100010001
DATA q4kidx<>+48(SB)/8, $0x0001000100010001
DATA q4kidx<>+56(SB)/8, $0x0001000100010001
DATA q4kidx<>+64(SB)/8, $0x0002000200020002
DATA q4kidx<>+72(SB)/8, $0x0002000200020002
DATA q4kidx<>+80(SB)/8, $0x0002000200020002
DATA q4kidx<>+88(SB)/8, $0x0002000200020002
DATA q4kidx<>+96(SB)/8, $0x0003000300030003
DATA q4kidx<>+104(SB)/8, $0x0003000300030003
DATA q4kidx<>+112(SB)/8, $0x0003000300030003
DATA q4kidx<>+120(SB)/8, $0x0003000300030003
DATA q4kidx<>+128(SB)/8, $0x0004000400040004
DATA q4kidx<>+136(SB)/8, $0x0004000400040004
DATA q4kidx<>+144(SB)/8, $0x0004000400040004
DATA q4kidx<>+152(SB)/8, $0x0004000400040004
DATA q4kidx<>+160(SB)/8, $0x0005000500050005
DATA q4kidx<>+168(SB)/8, $0x0005000500050005
DATA q4kidx<>+176(SB)/8, $0x0005000500050005
DATA q4kidx<>+184(SB)/8, $0x0005000500050005
DATA q4kidx<>+192(SB)/8, $0x0006000600060006
DATA q4kidx<>+200(SB)/8, $0x0006000600060006
DATA q4kidx<>+208(SB)/8, $0x0006000600060006
DATA q4kidx<>+216(SB)/8, $0x0006000600060006
DATA q4kidx<>+224(SB)/8, $0x0007000700070007
DATA q4kidx<>+232(SB)/8, $0x0007000700070007
DATA q4kidx<>+240(SB)/8, $0x0007000700070007
DATA q4kidx<>+248(SB)/8, $0x0007000700070007
GLOBL q4kidx<>(SB), RODATA|NOPTR, $256

DATA q6kidx<>+0(SB)/8, $0x0000000000000000
DATA q6kidx<>+8(SB)/8, $0x0000000000000000
DATA q6kidx<>+16(SB)/8, $0x0001000100010001
DATA q6kidx<>+24(SB)/8, $0x0001000100010001
DATA q6kidx<>+32(SB)/8, $0x0002000200020002
DATA q6kidx<>+40(SB)/8, $0x0002000200020002
DATA q6kidx<>+48(SB)/8, $0x0003000300030003
DATA q6kidx<>+56(SB)/8, $0x0003000300030003
DATA q6kidx<>+64(SB)/8, $0x0004000400040004
DATA q6kidx<>+72(SB)/8, $0x0004000400040004
DATA q6kidx<>+80(SB)/8, $0x0005000500050005
DATA q6kidx<>+88(SB)/8, $0x0005000500050005
DATA q6kidx<>+96(SB)/8, $0x0006000600060006
DATA q6kidx<>+104(SB)/8, $0x0006000600060006
DATA q6kidx<>+112(SB)/8, $0x0007000700070007
DATA q6kidx<>+120(SB)/8, $0x0007000700070007
DATA q6kidx<>+128(SB)/8, $0x0008000800080008
DATA q6kidx<>+136(SB)/8, $0x0008000800080008
DATA q6kidx<>+144(SB)/8, $0x0009000900090009
DATA q6kidx<>+152(SB)/8, $0x0009000900090009
DATA q6kidx<>+160(SB)/8, $0x000a000a000a000a
DATA q6kidx<>+168(SB)/8, $0x000a000a000a000a
DATA q6kidx<>+176(SB)/8, $0x000b000b000b000b
DATA q6kidx<>+184(SB)/8, $0x000b000b000b000b
DATA q6kidx<>+192(SB)/8, $0x000c000c000c000c
DATA q6kidx<>+200(SB)/8, $0x000c000c000c000c
DATA q6kidx<>+208(SB)/8, $0x000d000d000d000d
DATA q6kidx<>+216(SB)/8, $0x000d000d000d000d
DATA q6kidx<>+224(SB)/8, $0x000e000e000e000e
DATA q6kidx<>+232(SB)/8, $0x000e000e000e000e
DATA q6kidx<>+240(SB)/8, $0x000f000f000f000f
DATA q6kidx<>+248(SB)/8, $0x000f000f000f000f
GLOBL q6kidx<>(SB), RODATA|NOPTR, $256

// Q4KSC unpacks the 8 scales and 8 mins of the K-quant super-block at
// (row) (12 packed bytes at 4(row), get_scale_min_k4) into X10 and X11 as
// words (the upper lanes of Z10 and Z11 zeroed). Clobbers AX, R8, R9, R14,
// R15.
#define Q4KSC(row) \
	K4SCALEMIN(row); \
	VMOVQ     R14, X10; \
	VPMOVZXBW X10, X10; \
	VMOVQ     AX, X11; \
	VPMOVZXBW X11, X11

// Q4KSC2 is Q4KSC with the 8 scales and 8 mins both in Y10 as words
// (scales 0..7, mins 8..15; the upper lanes of Z10 zeroed). Clobbers AX,
// R8, R9, R14, R15.
#define Q4KSC2(row) \
	K4SCALEMIN(row); \
	VMOVQ     R14, X10; \
	VPINSRQ   $1, AX, X10, X10; \
	VPMOVZXBW X10, Y10

// The Q4_K kernels follow ggml's repacked Q4_K kernels (dotQ4K and
// dotQ4KGemm): the integer sums of a super-block (or of each of its four
// groups of 64 elements) are reduced to one int32 per row and token
// before any float work, which is then a 4-lane fused multiply-add per
// super-block (or per group), lane for lane the reference's.

// Word indices for VPSHUFB: the [d, dmin] fp16 pairs of 4 rows to the 4
// d's, then the 4 dmin's.
DATA q4kdsh<>+0(SB)/8, $0x0d0c090805040100
DATA q4kdsh<>+8(SB)/8, $0x0f0e0b0a07060302
GLOBL q4kdsh<>(SB), RODATA|NOPTR, $16

// Dword indices for VPERMD. q4kgemv: [q, ., m, .] in each 128-bit lane r
// (row r) to [q0..q3, m0..m3].
DATA q4kgemv<>+0(SB)/8, $0x0000000400000000
DATA q4kgemv<>+8(SB)/8, $0x0000000c00000008
DATA q4kgemv<>+16(SB)/8, $0x0000000600000002
DATA q4kgemv<>+24(SB)/8, $0x0000000e0000000a
DATA q4kgemv<>+32(SB)/8, $0
DATA q4kgemv<>+40(SB)/8, $0
DATA q4kgemv<>+48(SB)/8, $0
DATA q4kgemv<>+56(SB)/8, $0
GLOBL q4kgemv<>(SB), RODATA|NOPTR, $64

// Word indices for VPERMW: each of the 16 bsums of a token (twice, for
// two tokens) takes the min of its 32-element sub-block, mins[w%16/2].
DATA q4kmdup<>+0(SB)/8, $0x0001000100000000
DATA q4kmdup<>+8(SB)/8, $0x0003000300020002
DATA q4kmdup<>+16(SB)/8, $0x0005000500040004
DATA q4kmdup<>+24(SB)/8, $0x0007000700060006
DATA q4kmdup<>+32(SB)/8, $0x0001000100000000
DATA q4kmdup<>+40(SB)/8, $0x0003000300020002
DATA q4kmdup<>+48(SB)/8, $0x0005000500040004
DATA q4kmdup<>+56(SB)/8, $0x0007000700060006
GLOBL q4kmdup<>(SB), RODATA|NOPTR, $64

// Q4KUNPACK unpacks chunks 2j and 2j+1 of the Q4_K row at (row) (nibbles
// at off(row): low for chunk 2j, high for 2j+1) into Z8 as bytes and their
// scale words (index vector idx) into Z9. Needs Z10 = the 8 scales as
// words, Z30 = 0x0f bytes.
#define Q4KUNPACK(row, off, idx) \
	VMOVDQU      off(row), Y8; \
	VPSRLW       $4, Y8, Y9; \
	VINSERTI64X4 $1, Y9, Z8, Z8; \
	VPANDQ       Z30, Z8, Z8; \
	VPERMW       Z10, idx, Z9

// Q4KRED4 reduces the 16 int32 lanes of each of Z0..Z3 to 4 partial sums:
// dst's 128-bit lane i holds 4 lanes adding up to the lanes of Zi.
// Clobbers Z4..Z7.
#define Q4KRED4(dst) \
	VSHUFI64X2 $0x44, Z1, Z0, Z4; \
	VSHUFI64X2 $0xee, Z1, Z0, Z5; \
	VPADDD     Z5, Z4, Z4; \
	VSHUFI64X2 $0x44, Z3, Z2, Z5; \
	VSHUFI64X2 $0xee, Z3, Z2, Z6; \
	VPADDD     Z6, Z5, Z5; \
	VSHUFI64X2 $0x88, Z5, Z4, Z6; \
	VSHUFI64X2 $0xdd, Z5, Z4, Z7; \
	VPADDD     Z7, Z6, dst

// Q4KROW sums the products of the Q4_K super-block at (row) with the
// token's activations (Z20..Z23), weighted by the sub-block scales, into
// the 16 lanes of zacc, and puts its 4 groups' mins terms (X14 = the
// token's 8 chunk sums as words) into 128-bit lane `lane` of Z15. VPDPWSSD
// adds the same pair products VPMADDWD and VPADDD do. Clobbers AX, R8, R9,
// R14, R15, Z8..Z11.
#define Q4KROW(row, zacc, lane) \
	Q4KSC(row); \
	VPMADDWD     X14, X11, X11; \
	VINSERTI32X4 $lane, X11, Z15, Z15; \
	Q4KUNPACK(row, 16, Z26); \
	VPMADDUBSW   Z20, Z8, Z8; \
	VPMADDWD     Z9, Z8, zacc; \
	Q4KUNPACK(row, 48, Z27); \
	VPMADDUBSW   Z21, Z8, Z8; \
	VPDPWSSD     Z9, Z8, zacc; \
	Q4KUNPACK(row, 80, Z28); \
	VPMADDUBSW   Z22, Z8, Z8; \
	VPDPWSSD     Z9, Z8, zacc; \
	Q4KUNPACK(row, 112, Z29); \
	VPMADDUBSW   Z23, Z8, Z8; \
	VPDPWSSD     Z9, Z8, zacc

// func q4KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ4K(row i, x) for the 4 Q4_K rows w + i*wstride
// (strides in bytes), x being nb Q8_K blocks: quants xq (256 per block),
// scales xd (float32) and sums xb (16 int16 per block). Per super-block,
// each row's integer sums q and m are reduced to one int32 each, and one
// 8-lane fused multiply-add takes [q0..q3, m0..m3] times
// [d0..d3, dm0..dm3] (d = fp16 d * x.d, dm = fp16 dmin * x.d) into
// Y16 = [acc0..acc3, accm0..accm3]; at the end out = acc - accm.
TEXT ·q4KDot4x1(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU64 q4kidx<>+0(SB), Z26
	VMOVDQU64 q4kidx<>+64(SB), Z27
	VMOVDQU64 q4kidx<>+128(SB), Z28
	VMOVDQU64 q4kidx<>+192(SB), Z29
	VMOVDQU64 q4kgemv<>(SB), Z24
	VMOVDQU64 q4kdsh<>(SB), X25
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	VPXORD Y16, Y16, Y16
	TESTQ CX, CX
	JEQ   q4kdone
q4kloop:
	VMOVDQU64 (DI), Z20
	VMOVDQU64 64(DI), Z21
	VMOVDQU64 128(DI), Z22
	VMOVDQU64 192(DI), Z23
	VMOVDQU   (R13), X8
	VMOVDQU   16(R13), X9
	VPHADDW   X9, X8, X14
	Q4KROW(SI, Z0, 0)
	Q4KROW(R10, Z1, 1)
	Q4KROW(R11, Z2, 2)
	Q4KROW(R12, Z3, 3)
	Q4KRED4(Z6)
	VPUNPCKLQDQ Z15, Z6, Z4 // lane r: [c0, c1, m0, m1]
	VPUNPCKHQDQ Z15, Z6, Z5 // [c2, c3, m2, m3]
	VPADDD    Z5, Z4, Z4
	VPSHUFD   $0xb1, Z4, Z5
	VPADDD    Z5, Z4, Z4    // [q, q, m, m]
	VPERMD    Z4, Z24, Z4   // [q0..q3, m0..m3]
	VCVTDQ2PS Y4, Y4
	VMOVD     (SI), X5
	VPINSRD   $1, (R10), X5, X5
	VPINSRD   $2, (R11), X5, X5
	VPINSRD   $3, (R12), X5, X5
	VPSHUFB   X25, X5, X5
	VCVTPH2PS X5, Y5
	VBROADCASTSS (DX), Y6
	VMULPS    Y6, Y5, Y5    // [d0..d3, dm0..dm3]
	VFMADD231PS Y4, Y5, Y16
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
	VEXTRACTF32X4 $1, Y16, X1
	VSUBPS X1, X16, X0
	VMOVSS X0, (BX)
	VEXTRACTPS $1, X0, (BX)(R9*1)
	VEXTRACTPS $2, X0, (BX)(R9*2)
	LEAQ (BX)(R9*2), BX
	VEXTRACTPS $3, X0, (BX)(R9*1)
	VZEROUPPER
	RET

// Tables of q4KDot1x4 (see there). q4kx0 and q4kx2: dword indices for
// VPERMT2D, lane i taking lane i^1 (i^4) of the first table when bit 0
// (bit 2) of i is clear, of the second when set. q4ksc01 and q4ksc23:
// word indices for VPERMW, the scale of each dword after the third
// level. q4kfa and q4kfb: dword indices for VPERMI2D, groups 0,1 (2,3) of
// the q sums (first table) and the mins terms (second) as
// [q t0, m t0, q t1, m t1, ..., q t3, m t3] per group.
DATA q4kx0<>+0(SB)/8, $0x0000001000000001
DATA q4kx0<>+8(SB)/8, $0x0000001200000003
DATA q4kx0<>+16(SB)/8, $0x0000001400000005
DATA q4kx0<>+24(SB)/8, $0x0000001600000007
DATA q4kx0<>+32(SB)/8, $0x0000001800000009
DATA q4kx0<>+40(SB)/8, $0x0000001a0000000b
DATA q4kx0<>+48(SB)/8, $0x0000001c0000000d
DATA q4kx0<>+56(SB)/8, $0x0000001e0000000f
GLOBL q4kx0<>(SB), RODATA|NOPTR, $64
DATA q4kx2<>+0(SB)/8, $0x0000000500000004
DATA q4kx2<>+8(SB)/8, $0x0000000700000006
DATA q4kx2<>+16(SB)/8, $0x0000001100000010
DATA q4kx2<>+24(SB)/8, $0x0000001300000012
DATA q4kx2<>+32(SB)/8, $0x0000000d0000000c
DATA q4kx2<>+40(SB)/8, $0x0000000f0000000e
DATA q4kx2<>+48(SB)/8, $0x0000001900000018
DATA q4kx2<>+56(SB)/8, $0x0000001b0000001a
GLOBL q4kx2<>(SB), RODATA|NOPTR, $64
DATA q4ksc01<>+0(SB)/8, $0x0000000000000000
DATA q4ksc01<>+8(SB)/8, $0x0000000000000000
DATA q4ksc01<>+16(SB)/8, $0x0002000200020002
DATA q4ksc01<>+24(SB)/8, $0x0002000200020002
DATA q4ksc01<>+32(SB)/8, $0x0001000100010001
DATA q4ksc01<>+40(SB)/8, $0x0001000100010001
DATA q4ksc01<>+48(SB)/8, $0x0003000300030003
DATA q4ksc01<>+56(SB)/8, $0x0003000300030003
GLOBL q4ksc01<>(SB), RODATA|NOPTR, $64
DATA q4ksc23<>+0(SB)/8, $0x0004000400040004
DATA q4ksc23<>+8(SB)/8, $0x0004000400040004
DATA q4ksc23<>+16(SB)/8, $0x0006000600060006
DATA q4ksc23<>+24(SB)/8, $0x0006000600060006
DATA q4ksc23<>+32(SB)/8, $0x0005000500050005
DATA q4ksc23<>+40(SB)/8, $0x0005000500050005
DATA q4ksc23<>+48(SB)/8, $0x0007000700070007
DATA q4ksc23<>+56(SB)/8, $0x0007000700070007
GLOBL q4ksc23<>(SB), RODATA|NOPTR, $64
DATA q4kfa<>+0(SB)/8, $0x0000001000000000
DATA q4kfa<>+8(SB)/8, $0x0000001800000001
DATA q4kfa<>+16(SB)/8, $0x0000001100000002
DATA q4kfa<>+24(SB)/8, $0x0000001900000003
DATA q4kfa<>+32(SB)/8, $0x0000001200000004
DATA q4kfa<>+40(SB)/8, $0x0000001a00000005
DATA q4kfa<>+48(SB)/8, $0x0000001300000006
DATA q4kfa<>+56(SB)/8, $0x0000001b00000007
GLOBL q4kfa<>(SB), RODATA|NOPTR, $64
DATA q4kfb<>+0(SB)/8, $0x0000001400000008
DATA q4kfb<>+8(SB)/8, $0x0000001c00000009
DATA q4kfb<>+16(SB)/8, $0x000000150000000a
DATA q4kfb<>+24(SB)/8, $0x0000001d0000000b
DATA q4kfb<>+32(SB)/8, $0x000000160000000c
DATA q4kfb<>+40(SB)/8, $0x0000001e0000000d
DATA q4kfb<>+48(SB)/8, $0x000000170000000e
DATA q4kfb<>+56(SB)/8, $0x0000001f0000000f
GLOBL q4kfb<>(SB), RODATA|NOPTR, $64


// q4kmdup with the mins at words 8..15 (Q4KSC2).
DATA q4kmdup8<>+0(SB)/8, $0x0009000900080008
DATA q4kmdup8<>+8(SB)/8, $0x000b000b000a000a
DATA q4kmdup8<>+16(SB)/8, $0x000d000d000c000c
DATA q4kmdup8<>+24(SB)/8, $0x000f000f000e000e
DATA q4kmdup8<>+32(SB)/8, $0x0009000900080008
DATA q4kmdup8<>+40(SB)/8, $0x000b000b000a000a
DATA q4kmdup8<>+48(SB)/8, $0x000d000d000c000c
DATA q4kmdup8<>+56(SB)/8, $0x000f000f000e000e
GLOBL q4kmdup8<>(SB), RODATA|NOPTR, $64

// Q4KGRP multiplies chunks 2j and 2j+1 (group j, nibbles at off(SI)) with
// the activations of tokens 0..3 at actoff(DI), actoff(DI)(R10*1),
// actoff(DI)(R10*2) and actoff(BX) and adds the int16 pair products in two
// levels of a tree (dst word sums of 4 products' pairs each). Dword i of
// dst holds token 2*bit1(i) + bit0(i), chunk 2j + bit3(i). Needs Z26,
// Z30, K1, K2, K5; clobbers Z0..Z8.
#define Q4KGRP(off, actoff, dst) \
	VBROADCASTI64X4 off(SI), Z8; \
	VPSRLW     $4, Z8, K5, Z8; \
	VPANDQ     Z30, Z8, Z8; \
	VPMADDUBSW actoff(DI), Z8, Z0; \
	VPMADDUBSW actoff(DI)(R10*1), Z8, Z1; \
	VPMADDUBSW actoff(DI)(R10*2), Z8, Z2; \
	VPMADDUBSW actoff(BX), Z8, Z3; \
	VPBLENDMD  Z1, Z0, K1, Z4; \
	VPERMT2D   Z1, Z26, Z0; \
	VPADDW     Z0, Z4, Z4; \
	VPBLENDMD  Z3, Z2, K1, Z5; \
	VPERMT2D   Z3, Z26, Z2; \
	VPADDW     Z2, Z5, Z5; \
	VPBLENDMD  Z5, Z4, K2, Z6; \
	VSHUFPS    $0x4e, Z5, Z4, Z7; \
	VPADDW     Z7, Z6, dst

// func q4KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)
// One Q4_K row (w) against 4n tokens of Q8_K activations, token t's
// quants at xq + t*xqstride, scales at xd + t*xdstride and sums at
// xb + t*xbstride (strides in bytes): out + t*otok = dotQ4K(row, token
// t), bit for bit q4KDot4x1 (n >= 1 groups per call, which saves the
// setup and the Go calls). Per
// super-block, the 16 VPMADDUBSW results (4 groups x 4 tokens) are added
// in a tree: each level k blends two vectors (lanes with bit k set from
// the second) and adds the lanes i^k of the same sources, so that every
// lane sums elements of one token and one chunk. The first three levels
// add int16 (at most 8 words of |2*15*128| = 30720, no overflow), then the
// chunks' scales are applied (VPMADDWD) and the last level adds the two
// chunks of each group as int32: q[g][t] in lane t + 4g. The mins terms
// m[g][t] likewise; then the groups' sums are added, acc = fma(float(q),
// d, acc) and accm = fma(float(m), dm, accm), [acc, accm] interleaved in
// the 8 lanes of Y24 for the 4 tokens; at the end out = acc - accm.
TEXT ·q4KDot1x4(SB), NOSPLIT, $0-88
	MOVQ xqstride+16(FP), R10
	MOVQ xdstride+32(FP), R11
	MOVQ xbstride+48(FP), R12
	VMOVDQU64 q4kx0<>(SB), Z26
	VMOVDQU64 q4kx2<>(SB), Z27
	VMOVDQU64 q4ksc01<>(SB), Z28
	VMOVDQU64 q4ksc23<>(SB), Z29
	VMOVDQU64 q4kmdup8<>(SB), Z25
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0xaaaa, AX
	KMOVW AX, K1
	MOVL $0xcccc, AX
	KMOVW AX, K2
	MOVL $0xf0f0, AX
	KMOVW AX, K3
	MOVL $0xff00, AX
	KMOVW AX, K4
	MOVL $0xffff0000, AX
	KMOVD AX, K5
	MOVL $0xc0, AX
	KMOVW AX, K6
q4k14group:
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+40(FP), R13
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	VPXORD Y24, Y24, Y24
	TESTQ CX, CX
	JEQ   q4k14done
q4k14loop:
	Q4KSC2(SI)
	Q4KGRP(16, 0, Z16)
	Q4KGRP(48, 64, Z17)
	Q4KGRP(80, 128, Z18)
	Q4KGRP(112, 192, Z19)
	// Level 3 (bit 2): groups 0,1 and 2,3; then the scales.
	VPBLENDMD Z17, Z16, K3, Z20
	VPERMT2D  Z17, Z27, Z16
	VPADDW    Z16, Z20, Z20
	VPBLENDMD Z19, Z18, K3, Z21
	VPERMT2D  Z19, Z27, Z18
	VPADDW    Z18, Z21, Z21
	VPERMW    Z10, Z28, Z9
	VPMADDWD  Z9, Z20, Z20
	VPERMW    Z10, Z29, Z9
	VPMADDWD  Z9, Z21, Z21
	// Level 4 (bit 3): the two chunks of each group, q[g][t] in lane t+4g.
	VPBLENDMD  Z21, Z20, K4, Z22
	VSHUFI64X2 $0x4e, Z21, Z20, Z23
	VPADDD     Z23, Z22, Z12
	// m: mins[c]*(bs[2c]+bs[2c+1]) per dword, tokens 0,1 and 2,3, lanes
	// 2g, 2g+1 added: m[g][t] in lane (t>>1) + 2g + 8(t&1).
	LEAQ (R13)(R12*2), AX
	VMOVDQU   (R13), Y4
	VINSERTI64X4 $1, (R13)(R12*1), Z4, Z4
	VMOVDQU   (AX), Y5
	VINSERTI64X4 $1, (AX)(R12*1), Z5, Z5
	VPERMW    Z10, Z25, Z7
	VPMADDWD  Z7, Z4, Z4
	VPMADDWD  Z7, Z5, Z5
	VPBLENDMD Z5, Z4, K1, Z6
	VPERMT2D  Z5, Z26, Z4
	VPADDD    Z4, Z6, Z13
	VMOVDQU64 q4kfa<>(SB), Z14
	VPERMI2D  Z13, Z12, Z14
	VMOVDQU64 q4kfb<>(SB), Z15
	VPERMI2D  Z13, Z12, Z15
	// The whole super-block's [q, m] per token: groups 0..3 added.
	VPADDD    Z15, Z14, Z14
	VEXTRACTI64X4 $1, Z14, Y15
	VPADDD    Y15, Y14, Y14
	VCVTDQ2PS Y14, Y14
	// [d, dm] * x.d of tokens 0..3, d = fp16 d, dm = fp16 dmin.
	LEAQ (DX)(R11*2), AX
	VBROADCASTSS (DX), Y4
	VBROADCASTSS (DX)(R11*1), K2, Y4
	VBROADCASTSS (AX), K3, Y4
	VBROADCASTSS (AX)(R11*1), K6, Y4
	VPBROADCASTD (SI), X5
	VCVTPH2PS X5, Y5
	VMULPS    Y4, Y5, Y5
	VFMADD231PS Y14, Y5, Y24
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
	VMOVSHDUP Y24, Y1
	VSUBPS Y1, Y24, Y0
	VMOVSS X0, (BX)
	VEXTRACTPS $2, X0, (BX)(R9*1)
	VEXTRACTF32X4 $1, Y0, X1
	LEAQ (BX)(R9*2), BX
	VMOVSS X1, (BX)
	VEXTRACTPS $2, X1, (BX)(R9*1)
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

// Q6KHALF adds the scaled lanes of the 128 elements of one half of a Q6_K
// super-block into Z15: its low nibbles ql at qloff(row) (64 bytes), high
// bit pairs qh at qhoff(row) (32 bytes); chunks 0,1 (low nibbles, qh bits
// 0-1 and 2-3) against actlo with scale indices idxlo, chunks 2,3 (high
// nibbles, qh bits 4-5 and 6-7) against acthi, idxhi. Needs Y11 = the 16
// scales as words, Z30 = 0x0f bytes, Z31 = 0x30 bytes; clobbers Z8, Z9,
// Z10, Z14.
#define Q6KHALF(row, qloff, qhoff, actlo, idxlo, acthi, idxhi) \
	VMOVDQU64    qloff(row), Z8; \
	VMOVDQU      qhoff(row), Y9; \
	VPSRLW       $2, Y9, Y10; \
	VINSERTI64X4 $1, Y10, Z9, Z9; \
	VPANDQ       Z30, Z8, Z10; \
	VPSLLW       $4, Z9, Z14; \
	VPANDQ       Z31, Z14, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPMADDUBSW   actlo, Z10, Z10; \
	VPERMW       Z11, idxlo, Z14; \
	VPMADDWD     Z14, Z10, Z10; \
	VPADDD       Z10, Z15, Z15; \
	VPSRLW       $4, Z8, Z10; \
	VPANDQ       Z30, Z10, Z10; \
	VPANDQ       Z31, Z9, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPMADDUBSW   acthi, Z10, Z10; \
	VPERMW       Z11, idxhi, Z14; \
	VPMADDWD     Z14, Z10, Z10; \
	VPADDD       Z10, Z15, Z15

// Q6KROW accumulates the Q6_K super-block at (row) into acc. Needs the
// token's activations in Z20..Z23, its 16 sums as words in Y24 and y.d in
// Y25. Clobbers Z8..Z15.
#define Q6KROW(row, acc) \
	VPMOVSXBW 192(row), Y11; \
	VPMADDWD  Y24, Y11, Y12; \
	VPSLLD    $5, Y12, Y12; \
	VPXORD    Z15, Z15, Z15; \
	Q6KHALF(row, 0, 128, Z20, Z26, Z21, Z27); \
	Q6KHALF(row, 64, 160, Z22, Z28, Z23, Z29); \
	VEXTRACTI64X4 $1, Z15, Y8; \
	VPADDD    Y8, Y15, Y8; \
	VPSUBD    Y12, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VPBROADCASTW 208(row), X13; \
	VCVTPH2PS X13, Y13; \
	VMULPS    Y25, Y13, Y13; \
	VFMADD231PS Y8, Y13, acc

// func q6KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q4KDot4x1 for Q6_K rows: out + i*ostride = dotQ6K(row i, x).
TEXT ·q6KDot4x1(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU64 q6kidx<>+0(SB), Z26
	VMOVDQU64 q6kidx<>+64(SB), Z27
	VMOVDQU64 q6kidx<>+128(SB), Z28
	VMOVDQU64 q6kidx<>+192(SB), Z29
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z31
	VXORPS Y16, Y16, Y16
	VXORPS Y17, Y17, Y17
	VXORPS Y18, Y18, Y18
	VXORPS Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   q6kdone
q6kloop:
	VMOVDQU64 (DI), Z20
	VMOVDQU64 64(DI), Z21
	VMOVDQU64 128(DI), Z22
	VMOVDQU64 192(DI), Z23
	VMOVDQU64 (R13), Y24
	VBROADCASTSS (DX), Y25
	Q6KROW(SI, Y16)
	Q6KROW(R10, Y17)
	Q6KROW(R11, Y18)
	Q6KROW(R12, Y19)
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
	KQOUT
	VZEROUPPER
	RET

// Q6KHALF2 is Q6KHALF for two tokens: the half's weights and scale words
// are unpacked once, multiplied with token A's activations at
// lo(DI)/hi(DI) into Z15 and token B's at lo(BX)/hi(BX) into Z0. Needs
// Z11, Z30, Z31; clobbers Z1, Z8, Z9, Z10, Z14.
#define Q6KHALF2(row, qloff, qhoff, lo, idxlo, hi, idxhi) \
	VMOVDQU64    qloff(row), Z8; \
	VMOVDQU      qhoff(row), Y9; \
	VPSRLW       $2, Y9, Y10; \
	VINSERTI64X4 $1, Y10, Z9, Z9; \
	VPANDQ       Z30, Z8, Z10; \
	VPSLLW       $4, Z9, Z14; \
	VPANDQ       Z31, Z14, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPERMW       Z11, idxlo, Z14; \
	VPMADDUBSW   lo(DI), Z10, Z1; \
	VPMADDWD     Z14, Z1, Z1; \
	VPADDD       Z1, Z15, Z15; \
	VPMADDUBSW   lo(BX), Z10, Z1; \
	VPMADDWD     Z14, Z1, Z1; \
	VPADDD       Z1, Z0, Z0; \
	VPSRLW       $4, Z8, Z10; \
	VPANDQ       Z30, Z10, Z10; \
	VPANDQ       Z31, Z9, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPERMW       Z11, idxhi, Z14; \
	VPMADDUBSW   hi(DI), Z10, Z1; \
	VPMADDWD     Z14, Z1, Z1; \
	VPADDD       Z1, Z15, Z15; \
	VPMADDUBSW   hi(BX), Z10, Z1; \
	VPMADDWD     Z14, Z1, Z1; \
	VPADDD       Z1, Z0, Z0

// Q6KROW2 is Q6KROW for two tokens: the Q6_K super-block at (row) into
// accA against token A (activations at DI, its 16 sums as words in Y24,
// y.d in Y25) and into accB against token B (BX, Y22, Y23); every lane
// operation is Q6KROW's. Clobbers Z0, Z1, Z3, Z8..Z15.
#define Q6KROW2(row, accA, accB) \
	VPMOVSXBW 192(row), Y11; \
	VPMADDWD  Y24, Y11, Y12; \
	VPSLLD    $5, Y12, Y12; \
	VPMADDWD  Y22, Y11, Y3; \
	VPSLLD    $5, Y3, Y3; \
	VPXORD    Z15, Z15, Z15; \
	VPXORD    Z0, Z0, Z0; \
	Q6KHALF2(row, 0, 128, 0, Z26, 64, Z27); \
	Q6KHALF2(row, 64, 160, 128, Z28, 192, Z29); \
	VPBROADCASTW 208(row), X13; \
	VCVTPH2PS X13, Y13; \
	VEXTRACTI64X4 $1, Z15, Y8; \
	VPADDD    Y8, Y15, Y8; \
	VPSUBD    Y12, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VMULPS    Y25, Y13, Y9; \
	VFMADD231PS Y8, Y9, accA; \
	VEXTRACTI64X4 $1, Z0, Y8; \
	VPADDD    Y8, Y0, Y8; \
	VPSUBD    Y3, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VMULPS    Y23, Y13, Y9; \
	VFMADD231PS Y8, Y9, accB

// func q6KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
// Two Q6_K rows (w, w + wstride) against two tokens (A: xqa, xda, xba; B:
// xqb, xdb, xbb): out + r*ostride + t*otok = dotQ6K(row r, token t), bit
// for bit q6KDot4x1's, with each super-block's scales and weights unpacked
// once for both tokens.
TEXT ·q6KDot2x2(SB), NOSPLIT, $0-96
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xba+32(FP), R13
	MOVQ xqb+40(FP), BX
	MOVQ xdb+48(FP), R11
	MOVQ xbb+56(FP), R12
	MOVQ nb+64(FP), CX
	VMOVDQU64 q6kidx<>+0(SB), Z26
	VMOVDQU64 q6kidx<>+64(SB), Z27
	VMOVDQU64 q6kidx<>+128(SB), Z28
	VMOVDQU64 q6kidx<>+192(SB), Z29
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0x30303030, AX
	VPBROADCASTD AX, Z31
	VXORPS Y16, Y16, Y16
	VXORPS Y17, Y17, Y17
	VXORPS Y18, Y18, Y18
	VXORPS Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   q6k22done
q6k22loop:
	VMOVDQU64 (R13), Y24
	VBROADCASTSS (DX), Y25
	VMOVDQU64 (R12), Y22
	VBROADCASTSS (R11), Y23
	Q6KROW2(SI, Y16, Y18)
	Q6KROW2(R10, Y17, Y19)
	ADDQ $210, SI
	ADDQ $210, R10
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $4, R11
	ADDQ $32, R13
	ADDQ $32, R12
	DECQ CX
	JNZ  q6k22loop
q6k22done:
	MOVQ out+72(FP), BX
	MOVQ ostride+80(FP), R9
	MOVQ otok+88(FP), R8
	HSUM8(Y16, X16)
	VMOVSS X0, (BX)
	HSUM8(Y17, X17)
	VMOVSS X0, (BX)(R9*1)
	ADDQ R8, BX
	HSUM8(Y18, X18)
	VMOVSS X0, (BX)
	HSUM8(Y19, X19)
	VMOVSS X0, (BX)(R9*1)
	VZEROUPPER
	RET

// Q5KPAIR2 adds the scaled lanes of chunks 2j and 2j+1 of the Q5_K row at
// (row) for two tokens: the weights (their low 4 bits as Q4KUNPACK unpacks
// them, nibbles at off(row); their fifth bit bit 2j (sh) and 2j+1 (sh1) of
// each of the super-block's 32 qh bytes, in Y21) and the chunks' scale
// words are unpacked once, multiplied (VPMADDUBSW, VPMADDWD) with token A's
// activations at actoff(DI) into Z31 and token B's at actoff(BX) into Z0.
// Needs Z10 = the 8 scales as words, Z20 = 0x01 bytes, Z30 = 0x0f bytes;
// clobbers Z1, Z8, Z9, Z12, Z22.
#define Q5KPAIR2(row, off, actoff, idx, sh, sh1) \
	VMOVDQU      off(row), Y8; \
	VPSRLW       $4, Y8, Y9; \
	VINSERTI64X4 $1, Y9, Z8, Z8; \
	VPANDQ       Z30, Z8, Z8; \
	VPSRLW       $sh, Y21, Y9; \
	VPSRLW       $sh1, Y21, Y22; \
	VINSERTI64X4 $1, Y22, Z9, Z9; \
	VPANDQ       Z20, Z9, Z9; \
	VPSLLW       $4, Z9, Z9; \
	VPORQ        Z9, Z8, Z8; \
	VPERMW       Z10, idx, Z9; \
	VPMADDUBSW   actoff(DI), Z8, Z12; \
	VPMADDWD     Z9, Z12, Z12; \
	VPADDD       Z12, Z31, Z31; \
	VPMADDUBSW   actoff(BX), Z8, Z1; \
	VPMADDWD     Z9, Z1, Z1; \
	VPADDD       Z1, Z0, Z0

// Q5KROW2 accumulates the Q5_K super-block at (row) for two tokens, as
// dotQ5K does: into accA (8 lanes) and lane 0 of accmA (the mins term,
// dotQ5K's scalar summs: the mins' products with the chunk sums added as
// one integer, then summs = fma(-dmin*y.d, float(sum), summs)) against
// token A (activations at DI, X13 = its [y.d, -y.d, y.d, y.d], X14 = its
// chunk sums as words), and into accB/accmB against token B (BX, X24,
// X25); the scales and mins in X10 and X11 from Q4KSC.
// Clobbers Z0..Z3, Z8, Z9, Z11, Z12, Y21, Z22, Z31.
#define Q5KROW2(row, accA, accmA, accB, accmB) \
	VPMADDWD  X14, X11, X12; \
	VPSHUFD   $0x4e, X12, X9; \
	VPADDD    X9, X12, X12; \
	VPSHUFD   $0xb1, X12, X9; \
	VPADDD    X9, X12, X12; \
	VCVTDQ2PS X12, X12; \
	VPMADDWD  X25, X11, X11; \
	VPSHUFD   $0x4e, X11, X9; \
	VPADDD    X9, X11, X11; \
	VPSHUFD   $0xb1, X11, X9; \
	VPADDD    X9, X11, X11; \
	VCVTDQ2PS X11, X11; \
	VMOVD     (row), X9; \
	VCVTPH2PS X9, X9; \
	VMULPS    X13, X9, X8; \
	VSHUFPS   $0x55, X8, X8, X1; \
	VFMADD231SS X12, X1, accmA; \
	VBROADCASTSS X8, Y2; \
	VMULPS    X24, X9, X8; \
	VSHUFPS   $0x55, X8, X8, X1; \
	VFMADD231SS X11, X1, accmB; \
	VBROADCASTSS X8, Y3; \
	VMOVDQU64 16(row), Y21; \
	VPXORD    Z31, Z31, Z31; \
	VPXORD    Z0, Z0, Z0; \
	Q5KPAIR2(row, 48, 0, Z26, 0, 1); \
	Q5KPAIR2(row, 80, 64, Z27, 2, 3); \
	Q5KPAIR2(row, 112, 128, Z28, 4, 5); \
	Q5KPAIR2(row, 144, 192, Z29, 6, 7); \
	VEXTRACTI64X4 $1, Z31, Y8; \
	VPADDD    Y8, Y31, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VFMADD231PS Y8, Y2, accA; \
	VEXTRACTI64X4 $1, Z0, Y8; \
	VPADDD    Y8, Y0, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VFMADD231PS Y8, Y3, accB

// func q5KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
// q6KDot2x2 for Q5_K rows: out + r*ostride + t*otok = dotQ5K(row r,
// token t), bit for bit dotQ5K's.
TEXT ·q5KDot2x2(SB), NOSPLIT, $0-96
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xba+32(FP), R13
	MOVQ xqb+40(FP), BX
	MOVQ xdb+48(FP), R11
	MOVQ xbb+56(FP), R12
	MOVQ nb+64(FP), CX
	VMOVDQU64 q4kidx<>+0(SB), Z26
	VMOVDQU64 q4kidx<>+64(SB), Z27
	VMOVDQU64 q4kidx<>+128(SB), Z28
	VMOVDQU64 q4kidx<>+192(SB), Z29
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0x01010101, AX
	VPBROADCASTD AX, Z20
	MOVQ $0x8000000000000000, AX
	VMOVQ AX, X15
	VXORPS Y16, Y16, Y16
	VXORPS Y17, Y17, Y17
	VXORPS Y18, Y18, Y18
	VXORPS Y19, Y19, Y19
	VXORPS X4, X4, X4
	VXORPS X5, X5, X5
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7
	TESTQ CX, CX
	JEQ   q5k22done
q5k22loop:
	VMOVDQU   (R13), X8
	VMOVDQU   16(R13), X9
	VPHADDW   X9, X8, X14
	VBROADCASTSS (DX), X13
	VXORPS    X15, X13, X13
	VMOVDQU   (R12), X8
	VMOVDQU   16(R12), X9
	VPHADDW   X9, X8, X1
	VMOVAPS   X1, X25
	VBROADCASTSS (R11), X1
	VXORPS    X15, X1, X1
	VMOVAPS   X1, X24
	Q4KSC(SI)
	Q5KROW2(SI, Y16, X4, Y18, X6)
	Q4KSC(R10)
	Q5KROW2(R10, Y17, X5, Y19, X7)
	ADDQ $176, SI
	ADDQ $176, R10
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $4, R11
	ADDQ $32, R13
	ADDQ $32, R12
	DECQ CX
	JNZ  q5k22loop
q5k22done:
	MOVQ out+72(FP), BX
	MOVQ ostride+80(FP), R9
	MOVQ otok+88(FP), R8
	HSUM8(Y16, X16)
	VADDSS X4, X0, X0
	VMOVSS X0, (BX)
	HSUM8(Y17, X17)
	VADDSS X5, X0, X0
	VMOVSS X0, (BX)(R9*1)
	ADDQ R8, BX
	HSUM8(Y18, X18)
	VADDSS X6, X0, X0
	VMOVSS X0, (BX)
	HSUM8(Y19, X19)
	VADDSS X7, X0, X0
	VMOVSS X0, (BX)(R9*1)
	VZEROUPPER
	RET

// Lane 1's sign bit: [y.d, -y.d, y.d, y.d] from a broadcast y.d.
DATA q4ksign<>+0(SB)/8, $0x8000000000000000
DATA q4ksign<>+8(SB)/8, $0x0000000000000000
GLOBL q4ksign<>(SB), RODATA|NOPTR, $16

// Q6KMUL4 multiplies the unpacked weights w (two chunks) with the
// activations of tokens 0..3 at aoff(DI), aoff(DI)(R10*1),
// aoff(DI)(R10*2) and aoff(BX), weighted by the scale words sc, into Z0..Z3.
// Clobbers Z12.
#define Q6KMUL4(aoff, w, sc) \
	VPMADDUBSW aoff(DI), w, Z12; \
	VPDPWSSD   sc, Z12, Z0; \
	VPMADDUBSW aoff(DI)(R10*1), w, Z12; \
	VPDPWSSD   sc, Z12, Z1; \
	VPMADDUBSW aoff(DI)(R10*2), w, Z12; \
	VPDPWSSD   sc, Z12, Z2; \
	VPMADDUBSW aoff(BX), w, Z12; \
	VPDPWSSD   sc, Z12, Z3

// Q6KHALF4 is Q6KHALF for four tokens: one half of the Q6_K super-block at
// SI, unpacked once (as Q6KHALF does), into Z0..Z3 (Q6KMUL4). Needs Y11,
// Z30, Z31; clobbers Z8, Z9, Z10, Z12, Z14.
#define Q6KHALF4(qloff, qhoff, alo, idxlo, ahi, idxhi) \
	VMOVDQU64    qloff(SI), Z8; \
	VMOVDQU      qhoff(SI), Y9; \
	VPSRLW       $2, Y9, Y10; \
	VINSERTI64X4 $1, Y10, Z9, Z9; \
	VPANDQ       Z30, Z8, Z10; \
	VPSLLW       $4, Z9, Z14; \
	VPANDQ       Z31, Z14, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPERMW       Z11, idxlo, Z14; \
	Q6KMUL4(alo, Z10, Z14); \
	VPSRLW       $4, Z8, Z10; \
	VPANDQ       Z30, Z10, Z10; \
	VPANDQ       Z31, Z9, Z14; \
	VPORQ        Z14, Z10, Z10; \
	VPERMW       Z11, idxhi, Z14; \
	Q6KMUL4(ahi, Z10, Z14)

// Q6KTOK4 finishes one token's share of a Q6_K super-block, as Q6KROW's
// lane and float work: the lanes in zacc minus 32 times its scaled sums
// (16 words at sums), times d = the row's fp16 d (Y13, as float32) times
// the token's y.d (at dptr), into acc. Needs Y11; clobbers Z8, Y9, Y12.
#define Q6KTOK4(zacc, yacc, sums, dptr, acc) \
	VPMADDWD  sums, Y11, Y12; \
	VPSLLD    $5, Y12, Y12; \
	VEXTRACTI64X4 $1, zacc, Y8; \
	VPADDD    Y8, yacc, Y8; \
	VPSUBD    Y12, Y8, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VBROADCASTSS dptr, Y9; \
	VMULPS    Y9, Y13, Y9; \
	VFMADD231PS Y8, Y9, acc

// func q6KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)
// One Q6_K row against n groups of four tokens (group g's token t at
// xq + (4g+t)*xqstride, and so on): out + (4g+t)*otok = dotQ6K(row, token
// 4g+t), bit for bit q6KDot4x1's, each super-block unpacked once per
// group.
TEXT ·q6KDot1x4(SB), NOSPLIT, $0-88
	MOVQ xqstride+16(FP), R10
	MOVQ xdstride+32(FP), R11
	MOVQ xbstride+48(FP), R12
	VMOVDQU64 q6kidx<>+0(SB), Z26
	VMOVDQU64 q6kidx<>+64(SB), Z27
	VMOVDQU64 q6kidx<>+128(SB), Z28
	VMOVDQU64 q6kidx<>+192(SB), Z29
	MOVL $0x0f0f0f0f, R9
	VPBROADCASTD R9, Z30
	MOVL $0x30303030, R9
	VPBROADCASTD R9, Z31
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
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   q6k14done
q6k14loop:
	VPMOVSXBW 192(SI), Y11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	Q6KHALF4(0, 128, 0, Z26, 64, Z27)
	Q6KHALF4(64, 160, 128, Z28, 192, Z29)
	VPBROADCASTW 208(SI), X13
	VCVTPH2PS X13, Y13
	Q6KTOK4(Z0, Y0, (R13), (DX), Y16)
	Q6KTOK4(Z1, Y1, (R13)(R12*1), (DX)(R11*1), Y17)
	Q6KTOK4(Z2, Y2, (R13)(R12*2), (DX)(R11*2), Y18)
	Q6KTOK4(Z3, Y3, (AX), (R8), Y19)
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
	KQOUT
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

// Tables of q4KDot1x8 (see there). q4kt0 and q4kt1: dword indices for
// VPERMI2D, lane 4p+g taking position p (p+4) of group g from the two
// registers of a super-block's unpacked nibbles (groups 0,1 and 2,3).
// q4kslo and q4kshi: word indices for VPERMW, dword lane 4t+g taking the
// scale of chunk 2g (2g+1) and a zero word. q4kfa8 and q4kfb8: q4kfa and
// q4kfb for q sums in lane 4t+g.
DATA q4kt0<>+0(SB)/8, $0x0000000800000000
DATA q4kt0<>+8(SB)/8, $0x0000001800000010
DATA q4kt0<>+16(SB)/8, $0x0000000900000001
DATA q4kt0<>+24(SB)/8, $0x0000001900000011
DATA q4kt0<>+32(SB)/8, $0x0000000a00000002
DATA q4kt0<>+40(SB)/8, $0x0000001a00000012
DATA q4kt0<>+48(SB)/8, $0x0000000b00000003
DATA q4kt0<>+56(SB)/8, $0x0000001b00000013
GLOBL q4kt0<>(SB), RODATA|NOPTR, $64
DATA q4kt1<>+0(SB)/8, $0x0000000c00000004
DATA q4kt1<>+8(SB)/8, $0x0000001c00000014
DATA q4kt1<>+16(SB)/8, $0x0000000d00000005
DATA q4kt1<>+24(SB)/8, $0x0000001d00000015
DATA q4kt1<>+32(SB)/8, $0x0000000e00000006
DATA q4kt1<>+40(SB)/8, $0x0000001e00000016
DATA q4kt1<>+48(SB)/8, $0x0000000f00000007
DATA q4kt1<>+56(SB)/8, $0x0000001f00000017
GLOBL q4kt1<>(SB), RODATA|NOPTR, $64
DATA q4kslo<>+0(SB)/8, $0x0010000200100000
DATA q4kslo<>+8(SB)/8, $0x0010000600100004
DATA q4kslo<>+16(SB)/8, $0x0010000200100000
DATA q4kslo<>+24(SB)/8, $0x0010000600100004
DATA q4kslo<>+32(SB)/8, $0x0010000200100000
DATA q4kslo<>+40(SB)/8, $0x0010000600100004
DATA q4kslo<>+48(SB)/8, $0x0010000200100000
DATA q4kslo<>+56(SB)/8, $0x0010000600100004
GLOBL q4kslo<>(SB), RODATA|NOPTR, $64
DATA q4kshi<>+0(SB)/8, $0x0010000300100001
DATA q4kshi<>+8(SB)/8, $0x0010000700100005
DATA q4kshi<>+16(SB)/8, $0x0010000300100001
DATA q4kshi<>+24(SB)/8, $0x0010000700100005
DATA q4kshi<>+32(SB)/8, $0x0010000300100001
DATA q4kshi<>+40(SB)/8, $0x0010000700100005
DATA q4kshi<>+48(SB)/8, $0x0010000300100001
DATA q4kshi<>+56(SB)/8, $0x0010000700100005
GLOBL q4kshi<>(SB), RODATA|NOPTR, $64
DATA q4kfa8<>+0(SB)/8, $0x0000001000000000
DATA q4kfa8<>+8(SB)/8, $0x0000001800000004
DATA q4kfa8<>+16(SB)/8, $0x0000001100000008
DATA q4kfa8<>+24(SB)/8, $0x000000190000000c
DATA q4kfa8<>+32(SB)/8, $0x0000001200000001
DATA q4kfa8<>+40(SB)/8, $0x0000001a00000005
DATA q4kfa8<>+48(SB)/8, $0x0000001300000009
DATA q4kfa8<>+56(SB)/8, $0x0000001b0000000d
GLOBL q4kfa8<>(SB), RODATA|NOPTR, $64
DATA q4kfb8<>+0(SB)/8, $0x0000001400000002
DATA q4kfb8<>+8(SB)/8, $0x0000001c00000006
DATA q4kfb8<>+16(SB)/8, $0x000000150000000a
DATA q4kfb8<>+24(SB)/8, $0x0000001d0000000e
DATA q4kfb8<>+32(SB)/8, $0x0000001600000003
DATA q4kfb8<>+40(SB)/8, $0x0000001e00000007
DATA q4kfb8<>+48(SB)/8, $0x000000170000000b
DATA q4kfb8<>+56(SB)/8, $0x0000001f0000000f
GLOBL q4kfb8<>(SB), RODATA|NOPTR, $64

// Q4K8STEP multiplies position p of one chunk parity, the row's 4 bytes
// of each group at woff(SP) (broadcast to the 4 tokens' lanes), with the
// activations at off(DI) (tokens 0..3) and off(DI)(BX*1) (tokens 4..7)
// into accA and accB.
#define Q4K8STEP(woff, off, accA, accB) \
	VBROADCASTI32X4 woff(SP), Z20; \
	VPDPBUSD   off(DI), Z20, accA; \
	VPDPBUSD   off(DI)(BX*1), Z20, accB

// Q4K8MINS computes the mins terms of the 4 tokens whose group block is
// at (x) into dst, in q4KDot1x4's lanes: m[g][t] in lane (t>>1) + 2g +
// 8(t&1). Needs Z8 = the mins as q4kmdup8 spreads them, Z26 = q4kx0, K1;
// clobbers Z12, Z14.
#define Q4K8MINS(x, dst) \
	VPMADDWD 1024(x), Z8, Z12; \
	VPMADDWD 1088(x), Z8, Z14; \
	VPBLENDMD Z14, Z12, K1, dst; \
	VPERMT2D Z14, Z26, Z12; \
	VPADDD Z12, dst, dst

// Q4K8FLOAT scales the q sums q (lane 4t+g) and mins terms m of the 4
// tokens whose group block is at (x) and accumulates them into acc as
// q4KDot1x4 does: [acc, accm] per token, groups 0..3 added first. Needs Y16
// = [d, dmin] of the super-block; clobbers Z14, Z15, Y17.
#define Q4K8FLOAT(q, m, x, acc) \
	VMOVDQU64 q4kfa8<>(SB), Z14; \
	VPERMI2D  m, q, Z14; \
	VMOVDQU64 q4kfb8<>(SB), Z15; \
	VPERMI2D  m, q, Z15; \
	VPADDD    Z15, Z14, Z14; \
	VEXTRACTI64X4 $1, Z14, Y15; \
	VPADDD    Y15, Y14, Y14; \
	VCVTDQ2PS Y14, Y14; \
	VMULPS    1152(x), Y16, Y17; \
	VFMADD231PS Y14, Y17, acc

// Q4K8STORE writes acc - accm of the 4 tokens in acc to (out), R9 apart.
// Clobbers AX, Y0, Y1, X2.
#define Q4K8STORE(acc, out) \
	VMOVSHDUP acc, Y1; \
	VSUBPS Y1, acc, Y0; \
	VMOVSS X0, (out); \
	VEXTRACTPS $2, X0, (out)(R9*1); \
	VEXTRACTF32X4 $1, Y0, X2; \
	LEAQ (out)(R9*2), AX; \
	VMOVSS X2, (AX); \
	VEXTRACTPS $2, X2, (AX)(R9*1)

// func q4KDot1x8(w, x4 unsafe.Pointer, nb int, out unsafe.Pointer, otok uintptr, n int)
// q4KDot1x4 for n groups of 8 tokens whose activations are laid out by 4
// (actQuant.interleave4) from x4 (tokens 4..7 nb*q8KGroupBlock bytes after
// 0..3). The same integer sums and float operations as q4KDot1x4, computed
// another way: the row's nibbles are transposed so that 16 bytes hold
// position p of all 4 groups (VPERMI2D), stored and broadcast to the 4
// tokens' lanes (VBROADCASTI32X4), and VPDPBUSD adds each chunk's 32
// products in lane 4t+g over its 8 positions; the chunk sums are scaled by
// VPMULLD. No reduction tree, and the row's unpacking serves 8 tokens.
TEXT ·q4KDot1x8(SB), NOSPLIT, $256-48
	MOVQ out+24(FP), R10
	MOVQ nb+16(FP), BX
	IMULQ $1184, BX
	VMOVDQU64 q4kx0<>(SB), Z26
	VMOVDQU64 q4kslo<>(SB), Z27
	VMOVDQU64 q4kshi<>(SB), Z28
	VMOVDQU64 q4kmdup8<>(SB), Z25
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	MOVL $0xaaaa, AX
	KMOVW AX, K1
q4k18group:
	MOVQ w+0(FP), SI
	MOVQ x4+8(FP), DI
	MOVQ nb+16(FP), CX
	VPXORD Y24, Y24, Y24
	VPXORD Y23, Y23, Y23
	TESTQ CX, CX
	JEQ   q4k18done
q4k18loop:
	Q4KSC2(SI)
	VPERMW    Z10, Z27, Z11
	VPERMW    Z10, Z28, Z9
	VPERMW    Z10, Z25, Z8
	VMOVDQU64 16(SI), Z12
	VMOVDQU64 80(SI), Z13
	VPSRLW    $4, Z12, Z14
	VPSRLW    $4, Z13, Z15
	VPANDQ    Z30, Z12, Z12
	VPANDQ    Z30, Z13, Z13
	VPANDQ    Z30, Z14, Z14
	VPANDQ    Z30, Z15, Z15
	VMOVDQU64 q4kt0<>(SB), Z16
	VPERMI2D  Z13, Z12, Z16
	VMOVDQU64 q4kt1<>(SB), Z17
	VPERMI2D  Z13, Z12, Z17
	VMOVDQU64 q4kt0<>(SB), Z18
	VPERMI2D  Z15, Z14, Z18
	VMOVDQU64 q4kt1<>(SB), Z19
	VPERMI2D  Z15, Z14, Z19
	VMOVDQU64 Z16, 0(SP)
	VMOVDQU64 Z17, 64(SP)
	VMOVDQU64 Z18, 128(SP)
	VMOVDQU64 Z19, 192(SP)
	VPXORD    Z0, Z0, Z0
	VPXORD    Z1, Z1, Z1
	VPXORD    Z2, Z2, Z2
	VPXORD    Z3, Z3, Z3
	VPXORD    Z4, Z4, Z4
	VPXORD    Z5, Z5, Z5
	VPXORD    Z6, Z6, Z6
	VPXORD    Z7, Z7, Z7
	// Low nibbles (chunks 2g), positions 0..7: even into Z0/Z4, odd Z1/Z5.
	Q4K8STEP(0, 0, Z0, Z4)
	Q4K8STEP(16, 64, Z1, Z5)
	Q4K8STEP(32, 128, Z0, Z4)
	Q4K8STEP(48, 192, Z1, Z5)
	Q4K8STEP(64, 256, Z0, Z4)
	Q4K8STEP(80, 320, Z1, Z5)
	Q4K8STEP(96, 384, Z0, Z4)
	Q4K8STEP(112, 448, Z1, Z5)
	// High nibbles (chunks 2g+1) into Z2/Z6 and Z3/Z7.
	Q4K8STEP(128, 512, Z2, Z6)
	Q4K8STEP(144, 576, Z3, Z7)
	Q4K8STEP(160, 640, Z2, Z6)
	Q4K8STEP(176, 704, Z3, Z7)
	Q4K8STEP(192, 768, Z2, Z6)
	Q4K8STEP(208, 832, Z3, Z7)
	Q4K8STEP(224, 896, Z2, Z6)
	Q4K8STEP(240, 960, Z3, Z7)
	// q[g][t] = sc[2g]*chunk 2g + sc[2g+1]*chunk 2g+1, lane 4t+g.
	VPADDD    Z1, Z0, Z0
	VPADDD    Z3, Z2, Z2
	VPMULLD   Z11, Z0, Z0
	VPMULLD   Z9, Z2, Z2
	VPADDD    Z2, Z0, Z0
	VPADDD    Z5, Z4, Z4
	VPADDD    Z7, Z6, Z6
	VPMULLD   Z11, Z4, Z4
	VPMULLD   Z9, Z6, Z6
	VPADDD    Z6, Z4, Z4
	Q4K8MINS(DI, Z13)
	LEAQ      (DI)(BX*1), R8
	Q4K8MINS(R8, Z21)
	VPBROADCASTD (SI), X16
	VCVTPH2PS X16, Y16
	Q4K8FLOAT(Z0, Z13, DI, Y24)
	Q4K8FLOAT(Z4, Z21, R8, Y23)
	ADDQ $144, SI
	ADDQ $1184, DI
	DECQ CX
	JNZ  q4k18loop
q4k18done:
	MOVQ otok+32(FP), R9
	Q4K8STORE(Y24, R10)
	LEAQ (R10)(R9*4), R8
	Q4K8STORE(Y23, R8)
	// The next 8 tokens.
	LEAQ (R8)(R9*4), R10
	MOVQ x4+8(FP), DI
	LEAQ (DI)(BX*2), DI
	MOVQ DI, x4+8(FP)
	DECQ n+40(FP)
	JNZ  q4k18group
	VZEROUPPER
	RET
