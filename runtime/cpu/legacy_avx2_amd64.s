#include "textflag.h"
#include "lanes_amd64.h"

// AVX2 (with FMA and F16C) kernels for the 32-element block types Q4_1,
// Q5_0, Q5_1 and IQ4_NL: 4 weight rows and one token per call, and 2 rows
// and 2 tokens, bit for bit dotQ4_1, dotQ5_0, dotQ5_1 and dotIQ4NL. Per
// block, the 32 weights are unpacked to bytes in one 256-bit register
// (element j < 16 the low nibble of qs byte j, element j+16 its high
// nibble, plus 16 where bit j of qh is set for Q5_0 and Q5_1), and
// VPMADDUBSW (unsigned by signed bytes, pairs summed to int16) followed by
// VPMADDWD by ones (int16 pairs summed to int32) gives lanes32: int32 lane
// l holds elements 4l..4l+3. Every step is exact:
//   - Q4_1, Q5_1: the unsigned quants q (0..31) by the activations; a pair
//     sum is at most 2*31*128 in magnitude, below VPMADDUBSW's saturation;
//   - Q5_0: the weights are q-16; the unsigned q is multiplied and the
//     int16 pair sums 16*(x_2i + x_2i+1) (VPMADDUBSW of 0x10 bytes by the
//     activations, once per token block) are subtracted before VPMADDWD,
//     which leaves every int16 within 12032 of zero;
//   - IQ4_NL: the signed levels (-127..113, looked up by VPSHUFB) take the
//     signs of the activations (VPSIGNB) and multiply their absolute
//     values (VPABSB, 0..128 as unsigned bytes): the products are the
//     same, each pair sum at most 2*128*127 = 32512 in magnitude, for
//     every int8 activation.
// The float work is then the reference's. Q4_1, Q5_0, Q5_1: d = fp16 d_w
// (VCVTPH2PS) * d_x, acc = fma(d, float(lane), acc) in 8 lanes, block by
// block; for Q4_1 and Q5_1 summs = fma(m_w, s_x, summs) per block; at the
// end hsum8(acc) (+ summs). IQ4_NL: each row's 8 lanes are reduced to the
// block's whole integer sum, and acc = fma(float(sum), d_w*d_x, acc) in one
// float lane per row (per row and token in the 2x2 kernel), block by block;
// no hsum.
//
// The 4x1 kernels take the rows SI, R10, R11, R12 (their current block),
// the token's quants DI, block scales DX and (Q8_1) block sums R13, and
// step two blocks at a time, the last block of an odd count alone. The 2x2
// kernels take the rows SI, R10 and the tokens A (quants DI, scales DX,
// sums R13) and B (quants BX, scales R11, sums R12).

// Dword shift counts: 0 for the low 128 bits (low nibbles, elements 0..15),
// 4 for the high 128 bits (high nibbles, elements 16..31), after a
// VBROADCASTI128 of the 16 qs bytes and before masking with 0x0f.
DATA a2nibshift<>+0(SB)/8, $0
DATA a2nibshift<>+8(SB)/8, $0
DATA a2nibshift<>+16(SB)/8, $0x0000000400000004
DATA a2nibshift<>+24(SB)/8, $0x0000000400000004
GLOBL a2nibshift<>(SB), RODATA|NOPTR, $32

// 0x0f bytes.
DATA a2b0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2b0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2b0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2b0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL a2b0f<>(SB), RODATA|NOPTR, $32

// 0x10 bytes.
DATA a2b10<>+0(SB)/8, $0x1010101010101010
DATA a2b10<>+8(SB)/8, $0x1010101010101010
DATA a2b10<>+16(SB)/8, $0x1010101010101010
DATA a2b10<>+24(SB)/8, $0x1010101010101010
GLOBL a2b10<>(SB), RODATA|NOPTR, $32

// int16 ones, for VPMADDWD.
DATA a2ones16<>+0(SB)/8, $0x0001000100010001
DATA a2ones16<>+8(SB)/8, $0x0001000100010001
DATA a2ones16<>+16(SB)/8, $0x0001000100010001
DATA a2ones16<>+24(SB)/8, $0x0001000100010001
GLOBL a2ones16<>(SB), RODATA|NOPTR, $32

// VPSHUFB indices spreading byte j/8 of a broadcast dword to byte j.
DATA a2qhshuf<>+0(SB)/8, $0x0000000000000000
DATA a2qhshuf<>+8(SB)/8, $0x0101010101010101
DATA a2qhshuf<>+16(SB)/8, $0x0202020202020202
DATA a2qhshuf<>+24(SB)/8, $0x0303030303030303
GLOBL a2qhshuf<>(SB), RODATA|NOPTR, $32

// Byte j holds bit j%8.
DATA a2bitsel<>+0(SB)/8, $0x8040201008040201
DATA a2bitsel<>+8(SB)/8, $0x8040201008040201
DATA a2bitsel<>+16(SB)/8, $0x8040201008040201
DATA a2bitsel<>+24(SB)/8, $0x8040201008040201
GLOBL a2bitsel<>(SB), RODATA|NOPTR, $32

// The 16 IQ4_NL levels (tensor.IQ4NLLevel) as signed bytes.
DATA a2iq4nl<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA a2iq4nl<>+8(SB)/8, $0x7159453526190d01
GLOBL a2iq4nl<>(SB), RODATA|NOPTR, $16

// A2NIB loads the 16 qs bytes at addr as the 32 unsigned nibbles of a
// block into y; shift is a2nibshift and mask a2b0f (registers or memory).
#define A2NIB(addr, y, shift, mask) \
	VBROADCASTI128 addr, y; \
	VPSRLVD        shift, y, y; \
	VPAND          mask, y, y

// A2QH adds 16 to byte j of y (holding nibbles) where bit j of the uint32
// at addr is set; qhshuf, bitsel and b10 are the constants (registers or
// memory). Clobbers t.
#define A2QH(addr, y, t, qhshuf, bitsel, b10) \
	VPBROADCASTD addr, t; \
	VPSHUFB      qhshuf, t, t; \
	VPAND        bitsel, t, t; \
	VPCMPEQB     bitsel, t, t; \
	VPAND        b10, t, t; \
	VPOR         t, y, y

// A2LANEACC adds fma(d, float(lanes), acc), the lanes those of the unsigned
// weight bytes w by the activations x (int16 ones in ones). Clobbers p.
#define A2LANEACC(w, x, ones, d, acc, p) \
	VPMADDUBSW  x, w, p; \
	VPMADDWD    ones, p, p; \
	VCVTDQ2PS   p, p; \
	VFMADD231PS p, d, acc

// A2LANEACCC is A2LANEACC with the int16 pair sums c subtracted before
// VPMADDWD (Q5_0's -16 offset).
#define A2LANEACCC(w, x, c, ones, d, acc, p) \
	VPMADDUBSW  x, w, p; \
	VPSUBW      c, p, p; \
	VPMADDWD    ones, p, p; \
	VCVTDQ2PS   p, p; \
	VFMADD231PS p, d, acc

// ---- Q4_1 and Q5_1, 4 rows x 1 token ----
//
// Y0..Y3 = the rows' accumulators, summs in lane 1 of X4..X7, Y8 = the
// block's activations, Y9 = d_x, s_x interleaved (lanes 2i, 2i+1), Y10 =
// d, Y11 = weights, Y12 = products. Q4_1: Y13 = int16 ones, Y14 =
// a2nibshift, Y15 = 0x0f bytes. Q5_1: Y13 = int16 ones, Y14 = a2bitsel,
// Y15 = 0x10 bytes.

// A2XBLK1 loads the Q8_1 activation block at xoff(DI) into Y8 and its
// scale doff(DX) and sum doff(R13) into Y9. Clobbers Y10.
#define A2XBLK1(xoff, doff) \
	VMOVDQU      xoff(DI), Y8; \
	VBROADCASTSS doff(DX), Y9; \
	VBROADCASTSS doff(R13), Y10; \
	VUNPCKLPS    Y10, Y9, Y9

// A2DM leaves d = d_w*d_x x8 in Y10 and accumulates summ = fma(m_w, s_x,
// summ) in lane 1 of summ, for the block whose fp16 d_w and m_w are at
// off(row) and the activations' d_x, s_x in Y9. (VCVTPH2PS converts the
// block's first 4 fp16 words; lanes 2 and 3 are unused.)
#define A2DM(row, off, summ) \
	VCVTPH2PS    off(row), X10; \
	VFMADD231PS  X9, X10, summ; \
	VMULPS       X9, X10, X10; \
	VBROADCASTSS X10, Y10

// A2Q41ROW accumulates the Q4_1 block at off(row) (20 bytes: fp16 d, fp16
// m, 16 qs) into acc and summ.
#define A2Q41ROW(row, off, acc, summ) \
	A2DM(row, off, summ); \
	A2NIB(off+4(row), Y11, Y14, Y15); \
	A2LANEACC(Y11, Y8, Y13, Y10, acc, Y12)

// A2Q51ROW accumulates the Q5_1 block at off(row) (24 bytes: fp16 d, fp16
// m, qh uint32, 16 qs) into acc and summ.
#define A2Q51ROW(row, off, acc, summ) \
	A2DM(row, off, summ); \
	A2NIB(off+8(row), Y11, a2nibshift<>(SB), a2b0f<>(SB)); \
	A2QH(off+4(row), Y11, Y12, a2qhshuf<>(SB), Y14, Y15); \
	A2LANEACC(Y11, Y8, Y13, Y10, acc, Y12)

#define A2Q41BLK4(off, xoff, doff) \
	A2XBLK1(xoff, doff); \
	A2Q41ROW(SI, off, Y0, X4); \
	A2Q41ROW(R10, off, Y1, X5); \
	A2Q41ROW(R11, off, Y2, X6); \
	A2Q41ROW(R12, off, Y3, X7)

#define A2Q51BLK4(off, xoff, doff) \
	A2XBLK1(xoff, doff); \
	A2Q51ROW(SI, off, Y0, X4); \
	A2Q51ROW(R10, off, Y1, X5); \
	A2Q51ROW(R11, off, Y2, X6); \
	A2Q51ROW(R12, off, Y3, X7)

// A2ROWS loads the row pointers R10..R12 from SI and R8 (wstride).
#define A2ROWS \
	LEAQ (SI)(R8*1), R10; \
	LEAQ (SI)(R8*2), R11; \
	LEAQ (R11)(R8*1), R12

// A2ZERO4 zeroes Y0..Y3.
#define A2ZERO4 \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3

// A2SUMMOUT leaves hsum8(acc) + summs (lane 1 of summ) in X8 (clobbers
// X9).
#define A2SUMMOUT(acc, xacc, summ) \
	HSUM8X(acc, xacc, X8, X9); \
	VMOVSHDUP summ, X9; \
	VADDSS    X9, X8, X8

// A2STORES stores hsum8 of Y0..Y3 plus the summs X4..X7 at BX + i*R9
// (clobbers BX, X8, X9).
#define A2STORES \
	A2SUMMOUT(Y0, X0, X4); \
	VMOVSS X8, (BX); \
	A2SUMMOUT(Y1, X1, X5); \
	VMOVSS X8, (BX)(R9*1); \
	A2SUMMOUT(Y2, X2, X6); \
	VMOVSS X8, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	A2SUMMOUT(Y3, X3, X7); \
	VMOVSS X8, (BX)(R9*1)

// func q4_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·q4_1Dot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xs+32(FP), R13
	MOVQ nb+40(FP), CX
	A2ROWS
	A2ZERO4
	VPXOR X4, X4, X4
	VPXOR X5, X5, X5
	VPXOR X6, X6, X6
	VPXOR X7, X7, X7
	VMOVDQU a2ones16<>(SB), Y13
	VMOVDQU a2nibshift<>(SB), Y14
	VMOVDQU a2b0f<>(SB), Y15
	CMPQ CX, $2
	JLT  q41one
q41loop:
	A2Q41BLK4(0, 0, 0)
	A2Q41BLK4(20, 32, 4)
	ADDQ $40, SI
	ADDQ $40, R10
	ADDQ $40, R11
	ADDQ $40, R12
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, R13
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q41loop
q41one:
	TESTQ CX, CX
	JEQ   q41done
	A2Q41BLK4(0, 0, 0)
q41done:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	A2STORES
	VZEROUPPER
	RET

// func q5_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·q5_1Dot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xs+32(FP), R13
	MOVQ nb+40(FP), CX
	A2ROWS
	A2ZERO4
	VPXOR X4, X4, X4
	VPXOR X5, X5, X5
	VPXOR X6, X6, X6
	VPXOR X7, X7, X7
	VMOVDQU a2ones16<>(SB), Y13
	VMOVDQU a2bitsel<>(SB), Y14
	VMOVDQU a2b10<>(SB), Y15
	CMPQ CX, $2
	JLT  q51one
q51loop:
	A2Q51BLK4(0, 0, 0)
	A2Q51BLK4(24, 32, 4)
	ADDQ $48, SI
	ADDQ $48, R10
	ADDQ $48, R11
	ADDQ $48, R12
	ADDQ $64, DI
	ADDQ $8, DX
	ADDQ $8, R13
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q51loop
q51one:
	TESTQ CX, CX
	JEQ   q51done
	A2Q51BLK4(0, 0, 0)
q51done:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	A2STORES
	VZEROUPPER
	RET

// ---- Q5_0, 4 rows x 1 token ----
//
// Y0..Y3 = the rows' accumulators, Y4 = the block's activations, Y5 = d_x,
// Y6 = the int16 pair sums 16*(x_2i + x_2i+1), Y7 = d, Y8 = weights, Y9 =
// high bits, then products; constants Y10 = int16 ones, Y11 = a2bitsel,
// Y12 = 0x10 bytes, Y13 = 0x0f bytes, Y14 = a2nibshift, Y15 = a2qhshuf.

// A2XBLKC loads the Q8_0 activation block at xoff(DI) into Y4, its scale
// doff(DX) into Y5 and its offsets into Y6.
#define A2XBLKC(xoff, doff) \
	VMOVDQU      xoff(DI), Y4; \
	VBROADCASTSS doff(DX), Y5; \
	VPMADDUBSW   Y4, Y12, Y6

// A2Q50ROW accumulates the Q5_0 block at off(row) (22 bytes: fp16 d, qh
// uint32, 16 qs) into acc. (VCVTPH2PS converts the block's first 4 fp16
// words; lane 0 is d_w.)
#define A2Q50ROW(row, off, acc) \
	VCVTPH2PS    off(row), X7; \
	VMULPS       X5, X7, X7; \
	VBROADCASTSS X7, Y7; \
	A2NIB(off+6(row), Y8, Y14, Y13); \
	A2QH(off+2(row), Y8, Y9, Y15, Y11, Y12); \
	A2LANEACCC(Y8, Y4, Y6, Y10, Y7, acc, Y9)

#define A2Q50BLK4(off, xoff, doff) \
	A2XBLKC(xoff, doff); \
	A2Q50ROW(SI, off, Y0); \
	A2Q50ROW(R10, off, Y1); \
	A2Q50ROW(R11, off, Y2); \
	A2Q50ROW(R12, off, Y3)

// A2STORE stores hsum8 of Y0..Y3 at BX + i*R9 (clobbers BX, X8, X9).
#define A2STORE \
	HSUM8X(Y0, X0, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y1, X1, X8, X9); \
	VMOVSS X8, (BX)(R9*1); \
	HSUM8X(Y2, X2, X8, X9); \
	VMOVSS X8, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	HSUM8X(Y3, X3, X8, X9); \
	VMOVSS X8, (BX)(R9*1)

// func q5_0Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·q5_0Dot4x1AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	A2ROWS
	A2ZERO4
	VMOVDQU a2ones16<>(SB), Y10
	VMOVDQU a2bitsel<>(SB), Y11
	VMOVDQU a2b10<>(SB), Y12
	VMOVDQU a2b0f<>(SB), Y13
	VMOVDQU a2nibshift<>(SB), Y14
	VMOVDQU a2qhshuf<>(SB), Y15
	CMPQ CX, $2
	JLT  q50one
q50loop:
	A2Q50BLK4(0, 0, 0)
	A2Q50BLK4(22, 32, 4)
	ADDQ $44, SI
	ADDQ $44, R10
	ADDQ $44, R11
	ADDQ $44, R12
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q50loop
q50one:
	TESTQ CX, CX
	JEQ   q50done
	A2Q50BLK4(0, 0, 0)
q50done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	A2STORE
	VZEROUPPER
	RET

// ---- IQ4_NL, 4 rows x 1 token ----
//
// Y0..Y3 = the rows' int32 lanes, Y4 = the block's activations, Y5 = their
// absolute values, X6 = the accumulator (lane i = row i), X7 = d_x, Y8,
// Y9 = scratch; constants Y10 = the levels, Y11 = a2nibshift, Y12 = 0x0f
// bytes, Y13 = int16 ones.

// A2IQ4XBLK loads the Q8_0 activation block at xoff(DI) into Y4, their
// absolute values into Y5 and the scale doff(DX) into X7.
#define A2IQ4XBLK(xoff, doff) \
	VMOVDQU      xoff(DI), Y4; \
	VPABSB       Y4, Y5; \
	VBROADCASTSS doff(DX), X7

// A2IQ4W leaves in w the signed levels of the IQ4_NL block at off(row)
// (18 bytes: fp16 d, 16 qs). Needs the levels in tab, a2nibshift in
// shift and 0x0f bytes in mask.
#define A2IQ4W(row, off, w, tab, shift, mask) \
	A2NIB(off+2(row), w, shift, mask); \
	VPSHUFB w, tab, w

// A2IQ4LANES leaves in dst the 8 int32 lanes of the signed weight bytes w
// by the activations x, ax = |x| (int16 ones in ones).
#define A2IQ4LANES(w, x, ax, ones, dst) \
	VPSIGNB    x, w, dst; \
	VPMADDUBSW dst, ax, dst; \
	VPMADDWD   ones, dst, dst

// A2IQ4SUM4 reduces the lanes Y0..Y3 to their 4 whole-block sums, in that
// order, as float32 in X0 (exact: the integer sums are). Clobbers Y1, Y2.
#define A2IQ4SUM4 \
	VPHADDD      Y1, Y0, Y0; \
	VPHADDD      Y3, Y2, Y2; \
	VPHADDD      Y2, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD       X1, X0, X0; \
	VCVTDQ2PS    X0, X0

// A2IQ4BLK4 accumulates one IQ4_NL block of the 4 rows into X6, lane i =
// row i: acc = fma(float(sum), d_w*d_x, acc) with each row's whole-block
// sum and d_w*d_x in float32 first, as dotIQ4NL. Clobbers Y0..Y5, Y7..Y9.
#define A2IQ4BLK4(off, xoff, doff) \
	A2IQ4XBLK(xoff, doff); \
	A2IQ4W(SI, off, Y8, Y10, Y11, Y12); \
	A2IQ4LANES(Y8, Y4, Y5, Y13, Y0); \
	A2IQ4W(R10, off, Y9, Y10, Y11, Y12); \
	A2IQ4LANES(Y9, Y4, Y5, Y13, Y1); \
	A2IQ4W(R11, off, Y8, Y10, Y11, Y12); \
	A2IQ4LANES(Y8, Y4, Y5, Y13, Y2); \
	A2IQ4W(R12, off, Y9, Y10, Y11, Y12); \
	A2IQ4LANES(Y9, Y4, Y5, Y13, Y3); \
	A2IQ4SUM4; \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X8; \
	VPINSRW      $1, off(R10), X8, X8; \
	VPINSRW      $2, off(R11), X8, X8; \
	VPINSRW      $3, off(R12), X8, X8; \
	VCVTPH2PS    X8, X8; \
	VMULPS       X7, X8, X8; \
	VFMADD231PS  X0, X8, X6

// A2STORE4 stores the 4 lanes of X6 at BX + i*R9 (clobbers BX).
#define A2STORE4 \
	VMOVSS     X6, (BX); \
	VEXTRACTPS $1, X6, (BX)(R9*1); \
	VEXTRACTPS $2, X6, (BX)(R9*2); \
	LEAQ       (BX)(R9*2), BX; \
	VEXTRACTPS $3, X6, (BX)(R9*1)

// func iq4NLDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·iq4NLDot4x1AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	A2ROWS
	VXORPS X6, X6, X6
	VBROADCASTI128 a2iq4nl<>(SB), Y10
	VMOVDQU a2nibshift<>(SB), Y11
	VMOVDQU a2b0f<>(SB), Y12
	VMOVDQU a2ones16<>(SB), Y13
	CMPQ CX, $2
	JLT  iq4one
iq4loop:
	A2IQ4BLK4(0, 0, 0)
	A2IQ4BLK4(18, 32, 4)
	ADDQ $36, SI
	ADDQ $36, R10
	ADDQ $36, R11
	ADDQ $36, R12
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  iq4loop
iq4one:
	TESTQ CX, CX
	JEQ   iq4done
	A2IQ4BLK4(0, 0, 0)
iq4done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	A2STORE4
	VZEROUPPER
	RET

// ---- Q5_0, 2 rows x 2 tokens ----
//
// Y0, Y1 = rows 0, 1 of token A, Y2, Y3 = of token B; Y4, Y5, Y6 = token
// A's activations, d_x and offsets (as A2XBLKC), Y7, Y8, Y9 = token B's;
// Y10 = int16 ones, Y11 = d_w as float32 (lane 0), Y12 = weights, Y13..Y15 =
// scratch; the other constants are memory operands. Each row's block is
// unpacked once for both tokens, and every lane operation of each (row,
// token) is the 4x1 kernel's.

// A2XBLKC2 is A2XBLKC for both tokens' activation blocks at xoff and doff.
// Clobbers Y13.
#define A2XBLKC2(xoff, doff) \
	VMOVDQU      a2b10<>(SB), Y13; \
	VMOVDQU      xoff(DI), Y4; \
	VBROADCASTSS doff(DX), Y5; \
	VPMADDUBSW   Y4, Y13, Y6; \
	VMOVDQU      xoff(BX), Y7; \
	VBROADCASTSS doff(R11), Y8; \
	VPMADDUBSW   Y7, Y13, Y9

// A2Q50ROW2 is A2Q50ROW for both tokens.
#define A2Q50ROW2(row, off, accA, accB) \
	VCVTPH2PS    off(row), X11; \
	A2NIB(off+6(row), Y12, a2nibshift<>(SB), a2b0f<>(SB)); \
	A2QH(off+2(row), Y12, Y13, a2qhshuf<>(SB), a2bitsel<>(SB), a2b10<>(SB)); \
	VMULPS       X5, X11, X14; \
	VBROADCASTSS X14, Y14; \
	A2LANEACCC(Y12, Y4, Y6, Y10, Y14, accA, Y13); \
	VMULPS       X8, X11, X15; \
	VBROADCASTSS X15, Y15; \
	A2LANEACCC(Y12, Y7, Y9, Y10, Y15, accB, Y14)

#define A2Q50BLK22(off, xoff, doff) \
	A2XBLKC2(xoff, doff); \
	A2Q50ROW2(SI, off, Y0, Y2); \
	A2Q50ROW2(R10, off, Y1, Y3)

// A2STORE22 stores hsum8 of Y0..Y3 at BX + r*R9 + t*R8, row r and token t
// (Y0, Y1: token 0; clobbers BX, X8, X9).
#define A2STORE22 \
	HSUM8X(Y0, X0, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y1, X1, X8, X9); \
	VMOVSS X8, (BX)(R9*1); \
	ADDQ   R8, BX; \
	HSUM8X(Y2, X2, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y3, X3, X8, X9); \
	VMOVSS X8, (BX)(R9*1)

// func q5_0Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
TEXT ·q5_0Dot2x2AVX2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xqb+32(FP), BX
	MOVQ xdb+40(FP), R11
	MOVQ nb+48(FP), CX
	A2ZERO4
	VMOVDQU a2ones16<>(SB), Y10
	CMPQ CX, $2
	JLT  q50x22one
q50x22loop:
	A2Q50BLK22(0, 0, 0)
	A2Q50BLK22(22, 32, 4)
	ADDQ $44, SI
	ADDQ $44, R10
	ADDQ $64, DI
	ADDQ $64, BX
	ADDQ $8, DX
	ADDQ $8, R11
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q50x22loop
q50x22one:
	TESTQ CX, CX
	JEQ   q50x22done
	A2Q50BLK22(0, 0, 0)
q50x22done:
	MOVQ out+56(FP), BX
	MOVQ ostride+64(FP), R9
	MOVQ otok+72(FP), R8
	A2STORE22
	VZEROUPPER
	RET

// ---- IQ4_NL, 2 rows x 2 tokens ----
//
// Y0, Y1 = the int32 lanes of rows 0, 1 against token A, Y2, Y3 = against
// token B; Y4, Y5 = token A's activations and their absolute values, Y6,
// Y7 = token B's; X8 = the accumulator, lanes (row 0, A), (row 1, A), (row
// 0, B), (row 1, B); Y9 = the levels, Y10 = a2nibshift, Y11 = 0x0f bytes,
// Y12 = int16 ones, Y13..Y15 = scratch.

// A2IQ4BLK22 accumulates one IQ4_NL block of the 2 rows against the 2
// tokens into X8, each lane as A2IQ4BLK4's. Clobbers Y0..Y7, Y13..Y15.
#define A2IQ4BLK22(off, xoff, doff) \
	VMOVDQU      xoff(DI), Y4; \
	VPABSB       Y4, Y5; \
	VMOVDQU      xoff(BX), Y6; \
	VPABSB       Y6, Y7; \
	A2IQ4W(SI, off, Y13, Y9, Y10, Y11); \
	A2IQ4LANES(Y13, Y4, Y5, Y12, Y0); \
	A2IQ4LANES(Y13, Y6, Y7, Y12, Y2); \
	A2IQ4W(R10, off, Y14, Y9, Y10, Y11); \
	A2IQ4LANES(Y14, Y4, Y5, Y12, Y1); \
	A2IQ4LANES(Y14, Y6, Y7, Y12, Y3); \
	A2IQ4SUM4; \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X13; \
	VPINSRW      $1, off(R10), X13, X13; \
	VPBROADCASTD X13, X13; \
	VCVTPH2PS    X13, X13; \
	VMOVSS       doff(DX), X14; \
	VINSERTPS    $0x10, doff(R11), X14, X14; \
	VUNPCKLPS    X14, X14, X14; \
	VMULPS       X14, X13, X13; \
	VFMADD231PS  X0, X13, X8

// A2STORE22X stores the lanes of X8 at BX + r*R9 + t*R8, row r and token
// t (A2IQ4BLK22's lanes; clobbers BX).
#define A2STORE22X \
	VMOVSS     X8, (BX); \
	VEXTRACTPS $1, X8, (BX)(R9*1); \
	ADDQ       R8, BX; \
	VEXTRACTPS $2, X8, (BX); \
	VEXTRACTPS $3, X8, (BX)(R9*1)

// func iq4NLDot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
TEXT ·iq4NLDot2x2AVX2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xqb+32(FP), BX
	MOVQ xdb+40(FP), R11
	MOVQ nb+48(FP), CX
	VXORPS X8, X8, X8
	VBROADCASTI128 a2iq4nl<>(SB), Y9
	VMOVDQU a2nibshift<>(SB), Y10
	VMOVDQU a2b0f<>(SB), Y11
	VMOVDQU a2ones16<>(SB), Y12
	CMPQ CX, $2
	JLT  iq4x22one
iq4x22loop:
	A2IQ4BLK22(0, 0, 0)
	A2IQ4BLK22(18, 32, 4)
	ADDQ $36, SI
	ADDQ $36, R10
	ADDQ $64, DI
	ADDQ $64, BX
	ADDQ $8, DX
	ADDQ $8, R11
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  iq4x22loop
iq4x22one:
	TESTQ CX, CX
	JEQ   iq4x22done
	A2IQ4BLK22(0, 0, 0)
iq4x22done:
	MOVQ out+56(FP), BX
	MOVQ ostride+64(FP), R9
	MOVQ otok+72(FP), R8
	A2STORE22X
	VZEROUPPER
	RET

// ---- Q4_1 and Q5_1, 2 rows x 2 tokens ----
//
// Y0, Y1 = rows 0, 1 of token A, Y2, Y3 = of token B; Y4, Y5 = the summs
// of rows 0, 1 (lane 1: token A, lane 5: token B); Y6, Y7 = tokens A's
// and B's activations; Y8 = d_x, s_x interleaved, token A in the low 128
// bits and B in the high; Y9 = int16 ones; Y10 = d_w, m_w, then d
// products; Y11, Y12 = d for A and B; Y13 = weights; Y14, Y15 = products.
// The other constants are memory operands. Each row's block is unpacked
// once for both tokens, and every lane operation of each (row, token) is
// the 4x1 kernel's.

// A2XBLK12 loads both tokens' Q8_1 activation blocks at xoff (quants),
// doff (scales and sums) into Y6, Y7 and Y8. Clobbers Y10, Y11.
#define A2XBLK12(xoff, doff) \
	VMOVDQU      xoff(DI), Y6; \
	VMOVDQU      xoff(BX), Y7; \
	VBROADCASTSS doff(DX), X8; \
	VBROADCASTSS doff(R13), X10; \
	VUNPCKLPS    X10, X8, X8; \
	VBROADCASTSS doff(R11), X10; \
	VBROADCASTSS doff(R12), X11; \
	VUNPCKLPS    X11, X10, X10; \
	VINSERTF128  $1, X10, Y8, Y8

// A2DM2 is A2DM for both tokens: d in Y11 (token A) and Y12 (token B),
// the summs in lanes 1 and 5 of summ. Clobbers Y10.
#define A2DM2(row, off, summ) \
	VCVTPH2PS    off(row), X10; \
	VBROADCASTSD X10, Y10; \
	VFMADD231PS  Y8, Y10, summ; \
	VMULPS       Y8, Y10, Y10; \
	VBROADCASTSS X10, Y11; \
	VEXTRACTF128 $1, Y10, X10; \
	VBROADCASTSS X10, Y12

// A2Q41ROW2 is A2Q41ROW for both tokens.
#define A2Q41ROW2(row, off, accA, accB, summ) \
	A2DM2(row, off, summ); \
	A2NIB(off+4(row), Y13, a2nibshift<>(SB), a2b0f<>(SB)); \
	A2LANEACC(Y13, Y6, Y9, Y11, accA, Y14); \
	A2LANEACC(Y13, Y7, Y9, Y12, accB, Y15)

// A2Q51ROW2 is A2Q51ROW for both tokens.
#define A2Q51ROW2(row, off, accA, accB, summ) \
	A2DM2(row, off, summ); \
	A2NIB(off+8(row), Y13, a2nibshift<>(SB), a2b0f<>(SB)); \
	A2QH(off+4(row), Y13, Y14, a2qhshuf<>(SB), a2bitsel<>(SB), a2b10<>(SB)); \
	A2LANEACC(Y13, Y6, Y9, Y11, accA, Y14); \
	A2LANEACC(Y13, Y7, Y9, Y12, accB, Y15)

#define A2Q41BLK22(off, xoff, doff) \
	A2XBLK12(xoff, doff); \
	A2Q41ROW2(SI, off, Y0, Y2, Y4); \
	A2Q41ROW2(R10, off, Y1, Y3, Y5)

#define A2Q51BLK22(off, xoff, doff) \
	A2XBLK12(xoff, doff); \
	A2Q51ROW2(SI, off, Y0, Y2, Y4); \
	A2Q51ROW2(R10, off, Y1, Y3, Y5)

// A2STORES22 stores hsum8 of Y0..Y3 plus the summs at BX + r*R9 + t*R8,
// row r and token t (clobbers BX, X4..X9).
#define A2STORES22 \
	VEXTRACTF128 $1, Y4, X6; \
	VEXTRACTF128 $1, Y5, X7; \
	A2SUMMOUT(Y0, X0, X4); \
	VMOVSS X8, (BX); \
	A2SUMMOUT(Y1, X1, X5); \
	VMOVSS X8, (BX)(R9*1); \
	ADDQ   R8, BX; \
	A2SUMMOUT(Y2, X2, X6); \
	VMOVSS X8, (BX); \
	A2SUMMOUT(Y3, X3, X7); \
	VMOVSS X8, (BX)(R9*1)

// A2ZERO12 zeroes the accumulators and summs and loads the int16 ones.
#define A2ZERO12 \
	A2ZERO4; \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VMOVDQU a2ones16<>(SB), Y9

// func q4_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
TEXT ·q4_1Dot2x2AVX2(SB), NOSPLIT, $0-96
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xsa+32(FP), R13
	MOVQ xqb+40(FP), BX
	MOVQ xdb+48(FP), R11
	MOVQ xsb+56(FP), R12
	MOVQ nb+64(FP), CX
	A2ZERO12
	CMPQ CX, $2
	JLT  q41x22one
q41x22loop:
	A2Q41BLK22(0, 0, 0)
	A2Q41BLK22(20, 32, 4)
	ADDQ $40, SI
	ADDQ $40, R10
	ADDQ $64, DI
	ADDQ $64, BX
	ADDQ $8, DX
	ADDQ $8, R13
	ADDQ $8, R11
	ADDQ $8, R12
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q41x22loop
q41x22one:
	TESTQ CX, CX
	JEQ   q41x22done
	A2Q41BLK22(0, 0, 0)
q41x22done:
	MOVQ out+72(FP), BX
	MOVQ ostride+80(FP), R9
	MOVQ otok+88(FP), R8
	A2STORES22
	VZEROUPPER
	RET

// func q5_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
TEXT ·q5_1Dot2x2AVX2(SB), NOSPLIT, $0-96
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xsa+32(FP), R13
	MOVQ xqb+40(FP), BX
	MOVQ xdb+48(FP), R11
	MOVQ xsb+56(FP), R12
	MOVQ nb+64(FP), CX
	A2ZERO12
	CMPQ CX, $2
	JLT  q51x22one
q51x22loop:
	A2Q51BLK22(0, 0, 0)
	A2Q51BLK22(24, 32, 4)
	ADDQ $48, SI
	ADDQ $48, R10
	ADDQ $64, DI
	ADDQ $64, BX
	ADDQ $8, DX
	ADDQ $8, R13
	ADDQ $8, R11
	ADDQ $8, R12
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q51x22loop
q51x22one:
	TESTQ CX, CX
	JEQ   q51x22done
	A2Q51BLK22(0, 0, 0)
q51x22done:
	MOVQ out+72(FP), BX
	MOVQ ostride+80(FP), R9
	MOVQ otok+88(FP), R8
	A2STORES22
	VZEROUPPER
	RET
