#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 (F, BW, VL, VNNI) kernels for the 32-element block types Q4_1,
// Q5_0, Q5_1 and IQ4_NL: 4 weight rows and one token per call (and, for
// Q5_0 and IQ4_NL, 2 rows and 2 tokens), bit for bit dotQ4_1, dotQ5_0,
// dotQ5_1 and dotIQ4NL. Per block, the 32 weights are
// unpacked to unsigned bytes in one 256-bit register (element j < 16 the low
// nibble of qs byte j, element j+16 its high nibble), and one VPDPBUSD (u8
// weights by s8 activations, 4 products summed into each int32 lane, no
// saturation) gives lanes32 exactly:
//   - Q4_1, Q5_1: the weights are the unsigned quants themselves;
//   - Q5_0: the weights are q-16; the unsigned q is multiplied and the lanes
//     start from -16 * (sum of the lane's 4 activations);
//   - IQ4_NL: the levels (-127..113) are looked up by VPSHUFB as level+128
//     (unsigned) and the lanes start from -128 * (sum of the 4 activations).
// The float work is then the reference's. Q4_1, Q5_0, Q5_1: d = fp16 d_w
// (VCVTPH2PS) * d_x, acc = fma(d, float(lane), acc) in 8 lanes, block by
// block; for Q4_1 and Q5_1 summs = fma(m_w, s_x, summs) per block; at the
// end hsum8(acc) (+ summs). IQ4_NL (the order of ggml's repacked kernels):
// each row's 8 lanes are reduced to the block's whole integer sum, and
// acc = fma(float(sum), d_w*d_x, acc) in one float lane per row (per row
// and token in the 2x2 kernel), block by block; no hsum.
//
// Registers of the 4x1 kernels: SI, R10, R11, R12 = the 4 rows' current
// block, DI = the token's quants, DX = its block scales, R13 = its block
// sums s (Q8_1); Y4 = the block's activations, Y5 = d_x x8, X6 = s_x x4,
// Y13 = the lanes' starting value (Q5_0, IQ4_NL), Y11 = VPSRLVD counts,
// Y12 = 0x0f bytes, Y14 = 0x10 (Q5) or 0x80 (IQ4_NL) bytes, Y15 = the
// IQ4_NL table; accumulators Y16..Y19, summs in lane 1 of X20..X23
// (IQ4_NL: the rows' lanes in Y0..Y3, the accumulator X6).

// Dword shift counts: 0 for the low 128 bits (low nibbles, elements 0..15),
// 4 for the high 128 bits (high nibbles, elements 16..31), after a
// VBROADCASTI128 of the 16 qs bytes and before masking with 0x0f.
DATA nibshift<>+0(SB)/8, $0
DATA nibshift<>+8(SB)/8, $0
DATA nibshift<>+16(SB)/8, $0x0000000400000004
DATA nibshift<>+24(SB)/8, $0x0000000400000004
GLOBL nibshift<>(SB), RODATA|NOPTR, $32

// The 16 IQ4_NL levels (tensor.IQ4NLLevel) plus 128, as unsigned bytes.
DATA iq4nlu<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA iq4nlu<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL iq4nlu<>(SB), RODATA|NOPTR, $16

// NIB32 loads the 16 qs bytes at addr as the 32 unsigned nibbles of a block
// into ydst. Needs Y11, Y12.
#define NIB32(addr, ydst) \
	VBROADCASTI128 addr, ydst; \
	VPSRLVD        Y11, ydst, ydst; \
	VPAND          Y12, ydst, ydst

// LSETUP loads the row pointers R10..R12 from SI and R8 (wstride), the
// nibble constants Y11, Y12, and zeroes the accumulators Y16..Y19 and
// X20..X23.
#define LSETUP \
	LEAQ (SI)(R8*1), R10; \
	LEAQ (SI)(R8*2), R11; \
	LEAQ (R11)(R8*1), R12; \
	VMOVDQU nibshift<>(SB), Y11; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Y12; \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19; \
	VPXORD X20, X20, X20; \
	VPXORD X21, X21, X21; \
	VPXORD X22, X22, X22; \
	VPXORD X23, X23, X23

// XBLK loads the activation block at xoff(DI) into Y4 and its scale
// doff(DX) into Y5.
#define XBLK(xoff, doff) \
	VMOVDQU      xoff(DI), Y4; \
	VBROADCASTSS doff(DX), Y5

// XBLK1 is XBLK for Q8_1, adding s_x (doff(R13)) in X6.
#define XBLK1(xoff, doff) \
	XBLK(xoff, doff); \
	VBROADCASTSS doff(R13), X6

// XBLKC is XBLK with Y13 = -c * (sum of each lane's 4 activations), c the
// bytes of Y14. Clobbers Y9.
#define XBLKC(xoff, doff) \
	XBLK(xoff, doff); \
	VPXOR    Y13, Y13, Y13; \
	VPDPBUSD Y4, Y14, Y13; \
	VPXOR    Y9, Y9, Y9; \
	VPSUBD   Y13, Y9, Y13

// DMROW leaves d = d_w*d_x x8 in Y10 and accumulates summ = fma(m_w, s_x,
// summ) in lane 1 of summ, for the block whose fp16 d_w and m_w are at
// off(row) (Q4_1, Q5_1).
#define DMROW(row, off, summ) \
	VPBROADCASTD off(row), X10; \
	VCVTPH2PS    X10, Y10; \
	VFMADD231PS  X6, X10, summ; \
	VMULPS       Y5, Y10, Y10; \
	VMOVSLDUP    Y10, Y10

// DROW leaves d = d_w*d_x x8 in Y10, d_w the fp16 at off(row).
#define DROW(row, off) \
	VPBROADCASTW off(row), X10; \
	VCVTPH2PS    X10, Y10; \
	VMULPS       Y5, Y10, Y10

// LANEACC adds fma(Y10, float(lanes), acc), the lanes being those of the
// unsigned weights Y7 by the activations Y4, started from 0. Clobbers Y8.
#define LANEACC(acc) \
	VPXOR       Y8, Y8, Y8; \
	VPDPBUSD    Y4, Y7, Y8; \
	VCVTDQ2PS   Y8, Y8; \
	VFMADD231PS Y8, Y10, acc

// LANEACCC is LANEACC with the lanes started from Y13.
#define LANEACCC(acc) \
	VMOVDQA     Y13, Y8; \
	VPDPBUSD    Y4, Y7, Y8; \
	VCVTDQ2PS   Y8, Y8; \
	VFMADD231PS Y8, Y10, acc

// Q41ROW accumulates the Q4_1 block at off(row) (20 bytes: fp16 d, fp16 m,
// 16 qs) into acc and summ.
#define Q41ROW(row, off, acc, summ) \
	DMROW(row, off, summ); \
	NIB32(off+4(row), Y7); \
	LANEACC(acc)

// Q51ROW accumulates the Q5_1 block at off(row) (24 bytes: fp16 d, fp16 m,
// qh uint32, 16 qs) into acc and summ: bit j of qh adds 16 to element j.
#define Q51ROW(row, off, acc, summ) \
	DMROW(row, off, summ); \
	NIB32(off+8(row), Y7); \
	KMOVD  off+4(row), K1; \
	VPADDB Y14, Y7, K1, Y7; \
	LANEACC(acc)

// Q50ROW accumulates the Q5_0 block at off(row) (22 bytes: fp16 d, qh
// uint32, 16 qs) into acc: the unsigned q against lanes started from Y13.
#define Q50ROW(row, off, acc) \
	DROW(row, off); \
	NIB32(off+6(row), Y7); \
	KMOVD  off+2(row), K1; \
	VPADDB Y14, Y7, K1, Y7; \
	LANEACCC(acc)

// IQ4LANES leaves in dst the 8 int32 lanes of the IQ4_NL block at
// off(row) (18 bytes: fp16 d, 16 qs) against the activations act: level+128
// against lanes started from start. Needs Y11, Y12, Y15; clobbers Y7.
#define IQ4LANES(row, off, act, start, dst) \
	NIB32(off+2(row), Y7); \
	VPSHUFB   Y7, Y15, Y7; \
	VMOVDQA64 start, dst; \
	VPDPBUSD  act, Y7, dst

// IQ4SUM4 reduces the lanes Y0..Y3 (VEX registers, for VPHADDD) to their
// 4 whole-block sums, in that order, as float32 in X0 (exact: the integer
// sums are). Clobbers Y1, Y2.
#define IQ4SUM4 \
	VPHADDD      Y1, Y0, Y0; \
	VPHADDD      Y3, Y2, Y2; \
	VPHADDD      Y2, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDD       X1, X0, X0; \
	VCVTDQ2PS    X0, X0

#define Q41BLK4(off, xoff, doff) \
	XBLK1(xoff, doff); \
	Q41ROW(SI, off, Y16, X20); \
	Q41ROW(R10, off, Y17, X21); \
	Q41ROW(R11, off, Y18, X22); \
	Q41ROW(R12, off, Y19, X23)

#define Q51BLK4(off, xoff, doff) \
	XBLK1(xoff, doff); \
	Q51ROW(SI, off, Y16, X20); \
	Q51ROW(R10, off, Y17, X21); \
	Q51ROW(R11, off, Y18, X22); \
	Q51ROW(R12, off, Y19, X23)

#define Q50BLK4(off, xoff, doff) \
	XBLKC(xoff, doff); \
	Q50ROW(SI, off, Y16); \
	Q50ROW(R10, off, Y17); \
	Q50ROW(R11, off, Y18); \
	Q50ROW(R12, off, Y19)

// IQ4BLK4 accumulates one IQ4_NL block of the 4 rows into X6, lane i =
// row i: acc = fma(float(sum), d_w*d_x, acc) with each row's whole-block
// sum and d_w*d_x in float32 first, as dotIQ4NL. Clobbers Y0..Y4, Y7..Y9,
// Y13.
#define IQ4BLK4(off, xoff, doff) \
	XBLKC(xoff, doff); \
	IQ4LANES(SI, off, Y4, Y13, Y0); \
	IQ4LANES(R10, off, Y4, Y13, Y1); \
	IQ4LANES(R11, off, Y4, Y13, Y2); \
	IQ4LANES(R12, off, Y4, Y13, Y3); \
	IQ4SUM4; \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X8; \
	VPINSRW      $1, off(R10), X8, X8; \
	VPINSRW      $2, off(R11), X8, X8; \
	VPINSRW      $3, off(R12), X8, X8; \
	VCVTPH2PS    X8, X8; \
	VMULPS       X5, X8, X8; \
	VFMADD231PS  X0, X8, X6

// LSTORE stores hsum8 of Y16..Y19 at BX + i*R9 (clobbers BX, X0, X1).
#define LSTORE \
	HSUM8(Y16, X16); \
	VMOVSS X0, (BX); \
	HSUM8(Y17, X17); \
	VMOVSS X0, (BX)(R9*1); \
	HSUM8(Y18, X18); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	HSUM8(Y19, X19); \
	VMOVSS X0, (BX)(R9*1)

// SUMMOUT leaves hsum8(acc) + summs (lane 1 of summ) in X0 (clobbers X1).
#define SUMMOUT(acc, xacc, summ) \
	HSUM8(acc, xacc); \
	VMOVSHDUP summ, X1; \
	VADDSS    X1, X0, X0

// LSTORES is LSTORE adding the summs X20..X23.
#define LSTORES \
	SUMMOUT(Y16, X16, X20); \
	VMOVSS X0, (BX); \
	SUMMOUT(Y17, X17, X21); \
	VMOVSS X0, (BX)(R9*1); \
	SUMMOUT(Y18, X18, X22); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	SUMMOUT(Y19, X19, X23); \
	VMOVSS X0, (BX)(R9*1)

// func q4_1Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ4_1(row i, x) for the 4 Q4_1 rows w + i*wstride
// (strides in bytes), x being nb Q8_1 blocks: quants xq (32 per block),
// scales xd and sums xs (float32 per block).
TEXT ·q4_1Dot4x1(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xs+32(FP), R13
	MOVQ nb+40(FP), CX
	LSETUP
	CMPQ CX, $2
	JLT  q41one
q41loop:
	Q41BLK4(0, 0, 0)
	Q41BLK4(20, 32, 4)
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
	Q41BLK4(0, 0, 0)
q41done:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	LSTORES
	VZEROUPPER
	RET

// func q5_1Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q4_1Dot4x1 for Q5_1 rows: out + i*ostride = dotQ5_1(row i, x).
TEXT ·q5_1Dot4x1(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xs+32(FP), R13
	MOVQ nb+40(FP), CX
	LSETUP
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Y14
	CMPQ CX, $2
	JLT  q51one
q51loop:
	Q51BLK4(0, 0, 0)
	Q51BLK4(24, 32, 4)
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
	Q51BLK4(0, 0, 0)
q51done:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	LSTORES
	VZEROUPPER
	RET

// func q5_0Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ5_0(row i, x) for the 4 Q5_0 rows w + i*wstride
// (strides in bytes), x being nb Q8_0 blocks: quants xq (32 per block) and
// scales xd (float32 per block).
TEXT ·q5_0Dot4x1(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LSETUP
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Y14
	CMPQ CX, $2
	JLT  q50one
q50loop:
	Q50BLK4(0, 0, 0)
	Q50BLK4(22, 32, 4)
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
	Q50BLK4(0, 0, 0)
q50done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	LSTORE
	VZEROUPPER
	RET

// LSTORE4 stores the 4 lanes of X6 at BX + i*R9 (clobbers BX).
#define LSTORE4 \
	VMOVSS     X6, (BX); \
	VEXTRACTPS $1, X6, (BX)(R9*1); \
	VEXTRACTPS $2, X6, (BX)(R9*2); \
	LEAQ       (BX)(R9*2), BX; \
	VEXTRACTPS $3, X6, (BX)(R9*1)

// func iq4NLDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotIQ4NL(row i, x), bit for bit, for the 4 IQ4_NL rows
// w + i*wstride (strides in bytes), x being nb Q8_0 blocks: quants xq (32
// per block) and scales xd (float32 per block). Each row's block sum is
// reduced to one int32, and the 4 rows take the lanes of one 4-lane
// accumulator (X6).
TEXT ·iq4NLDot4x1(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LSETUP
	VXORPS X6, X6, X6
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y14
	VBROADCASTI128 iq4nlu<>(SB), Y15
	CMPQ CX, $2
	JLT  iq4one
iq4loop:
	IQ4BLK4(0, 0, 0)
	IQ4BLK4(18, 32, 4)
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
	IQ4BLK4(0, 0, 0)
iq4done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	LSTORE4
	VZEROUPPER
	RET

// The 2x2 kernels take 2 rows (SI, R10) and 2 tokens: A (quants DI, scales
// DX) in Y4, Y5, Y13 as above and B (quants BX, scales R11) in Y20, Y21,
// Y22; accumulators Y16, Y17 (rows 0, 1 of A) and Y18, Y19 (of B). Each
// row's block is unpacked once for both tokens, and every lane operation
// of each (row, token) is the 4x1 kernel's.

// XBLKC2 is XBLKC for both tokens' activation blocks at xoff and doff.
// Clobbers Y9.
#define XBLKC2(xoff, doff) \
	XBLKC(xoff, doff); \
	VMOVDQU64    xoff(BX), Y20; \
	VBROADCASTSS doff(R11), Y21; \
	VPXORD       Y22, Y22, Y22; \
	VPDPBUSD     Y20, Y14, Y22; \
	VPSUBD       Y22, Y9, Y22

// LANEACC2 adds the lanes of the unsigned weights Y7 (fp16 d_w x8 as
// float32 in Y10) to accA against token A and accB against token B, each
// as LANEACCC. Clobbers Y8, Y9.
#define LANEACC2(accA, accB) \
	VMULPS      Y5, Y10, Y9; \
	VMOVDQA     Y13, Y8; \
	VPDPBUSD    Y4, Y7, Y8; \
	VCVTDQ2PS   Y8, Y8; \
	VFMADD231PS Y8, Y9, accA; \
	VMULPS      Y21, Y10, Y9; \
	VMOVDQA64   Y22, Y8; \
	VPDPBUSD    Y20, Y7, Y8; \
	VCVTDQ2PS   Y8, Y8; \
	VFMADD231PS Y8, Y9, accB

// Q50ROW2 is Q50ROW for both tokens.
#define Q50ROW2(row, off, accA, accB) \
	VPBROADCASTW off(row), X10; \
	VCVTPH2PS    X10, Y10; \
	NIB32(off+6(row), Y7); \
	KMOVD  off+2(row), K1; \
	VPADDB Y14, Y7, K1, Y7; \
	LANEACC2(accA, accB)

#define Q50BLK22(off, xoff, doff) \
	XBLKC2(xoff, doff); \
	Q50ROW2(SI, off, Y16, Y18); \
	Q50ROW2(R10, off, Y17, Y19)

// IQ4BLK22 accumulates one IQ4_NL block of the 2 rows against the 2
// tokens into X6, lanes (row 0, A), (row 1, A), (row 0, B), (row 1, B),
// each lane as IQ4BLK4's. Clobbers Y0..Y4, Y7..Y10, Y13, Y20..Y22.
#define IQ4BLK22(off, xoff, doff) \
	XBLKC2(xoff, doff); \
	NIB32(off+2(SI), Y7); \
	VPSHUFB      Y7, Y15, Y7; \
	VMOVDQA64    Y13, Y0; \
	VPDPBUSD     Y4, Y7, Y0; \
	VMOVDQA64    Y22, Y2; \
	VPDPBUSD     Y20, Y7, Y2; \
	NIB32(off+2(R10), Y7); \
	VPSHUFB      Y7, Y15, Y7; \
	VMOVDQA64    Y13, Y1; \
	VPDPBUSD     Y4, Y7, Y1; \
	VMOVDQA64    Y22, Y3; \
	VPDPBUSD     Y20, Y7, Y3; \
	IQ4SUM4; \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X8; \
	VPINSRW      $1, off(R10), X8, X8; \
	VPBROADCASTD X8, X8; \
	VCVTPH2PS    X8, X8; \
	VMOVSS       doff(DX), X10; \
	VINSERTPS    $0x10, doff(R11), X10, X10; \
	VUNPCKLPS    X10, X10, X10; \
	VMULPS       X10, X8, X8; \
	VFMADD231PS  X0, X8, X6

// LSETUP22 loads the nibble constants Y11, Y12 and zeroes the accumulators
// Y16..Y19.
#define LSETUP22 \
	VMOVDQU nibshift<>(SB), Y11; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Y12; \
	VPXORD Y16, Y16, Y16; \
	VPXORD Y17, Y17, Y17; \
	VPXORD Y18, Y18, Y18; \
	VPXORD Y19, Y19, Y19

// LSTORE22 stores hsum8 of Y16..Y19 at BX + r*R9 + t*R8, row r and token
// t (clobbers BX, X0, X1).
#define LSTORE22 \
	HSUM8(Y16, X16); \
	VMOVSS X0, (BX); \
	HSUM8(Y17, X17); \
	VMOVSS X0, (BX)(R9*1); \
	ADDQ   R8, BX; \
	HSUM8(Y18, X18); \
	VMOVSS X0, (BX); \
	HSUM8(Y19, X19); \
	VMOVSS X0, (BX)(R9*1)

// func q5_0Dot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
// Two Q5_0 rows (w, w + wstride) against two tokens of nb Q8_0 blocks (A:
// quants xqa, scales xda; B: xqb, xdb): out + r*ostride + t*otok =
// dotQ5_0(row r, token t), bit for bit q5_0Dot4x1's.
TEXT ·q5_0Dot2x2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xqb+32(FP), BX
	MOVQ xdb+40(FP), R11
	MOVQ nb+48(FP), CX
	LSETUP22
	MOVL $0x10101010, AX
	VPBROADCASTD AX, Y14
	CMPQ CX, $2
	JLT  q50x22one
q50x22loop:
	Q50BLK22(0, 0, 0)
	Q50BLK22(22, 32, 4)
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
	Q50BLK22(0, 0, 0)
q50x22done:
	MOVQ out+56(FP), BX
	MOVQ ostride+64(FP), R9
	MOVQ otok+72(FP), R8
	LSTORE22
	VZEROUPPER
	RET

// LSTORE22X stores the lanes of X6 at BX + r*R9 + t*R8, row r and token
// t (IQ4BLK22's lanes; clobbers BX).
#define LSTORE22X \
	VMOVSS     X6, (BX); \
	VEXTRACTPS $1, X6, (BX)(R9*1); \
	ADDQ       R8, BX; \
	VEXTRACTPS $2, X6, (BX); \
	VEXTRACTPS $3, X6, (BX)(R9*1)

// func iq4NLDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
// Two IQ4_NL rows (w, w + wstride) against two tokens of nb Q8_0 blocks
// (A: quants xqa, scales xda; B: xqb, xdb): out + r*ostride + t*otok =
// dotIQ4NL(row r, token t), bit for bit, the 4 (row, token) pairs in the
// lanes of one accumulator (X6).
TEXT ·iq4NLDot2x2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R10
	ADDQ SI, R10
	MOVQ xqa+16(FP), DI
	MOVQ xda+24(FP), DX
	MOVQ xqb+32(FP), BX
	MOVQ xdb+40(FP), R11
	MOVQ nb+48(FP), CX
	VMOVDQU nibshift<>(SB), Y11
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y12
	VXORPS X6, X6, X6
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y14
	VBROADCASTI128 iq4nlu<>(SB), Y15
	CMPQ CX, $2
	JLT  iq4x22one
iq4x22loop:
	IQ4BLK22(0, 0, 0)
	IQ4BLK22(18, 32, 4)
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
	IQ4BLK22(0, 0, 0)
iq4x22done:
	MOVQ out+56(FP), BX
	MOVQ ostride+64(FP), R9
	MOVQ otok+72(FP), R8
	LSTORE22X
	VZEROUPPER
	RET
