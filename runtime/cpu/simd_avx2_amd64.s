#include "textflag.h"
#include "lanes_amd64.h"

// AVX2 (with FMA and F16C) kernels of the direct matmul paths at levelAVX2,
// and of their activations' preparation (roundF16AVX2, quantQ8AVX2): YMM
// registers only. Each computes every output element with the same
// operations as its AVX-512 counterpart in simd_amd64.s, so results are the
// same bits at both levels:
//   - float kernels: the 16 float32 lanes of a zmm accumulator are two ymm
//     accumulators (lanes 0-7, lanes 8-15), acc[l] = fma(w[16c+l],
//     x[16c+l], acc[l]) over 16-element chunks c, the last chunk zero-padded
//     (a masked VMASKMOVPS for float32, a zeroed copy for f16/bf16), then
//     HSUM16's order: (lanes 0-7) + (lanes 8-15), then the upper 4 onto the
//     lower 4, then (0+2) + (1+3);
//   - Q8_0/Q4_0 kernels: per 32-element block an exact int32 dot in 8 lanes
//     of 4 products (VPMADDUBSW then VPMADDWD by ones), acc[l] =
//     fma(d_w*d_x, float(lane), acc[l]), then hsum8: bit for bit dotQ8/dotQ4.
//
// The macros all come before the first TEXT: go vet's asmdecl reads a
// macro's FP and SP references as those of the function above it.

// avx2TailMask is 16 int32 of -1 then 16 of 0: the 16 at byte offset
// 4*(16-r) are the mask of the first r lanes of a chunk.
DATA avx2TailMask<>+0(SB)/8, $-1
DATA avx2TailMask<>+8(SB)/8, $-1
DATA avx2TailMask<>+16(SB)/8, $-1
DATA avx2TailMask<>+24(SB)/8, $-1
DATA avx2TailMask<>+32(SB)/8, $-1
DATA avx2TailMask<>+40(SB)/8, $-1
DATA avx2TailMask<>+48(SB)/8, $-1
DATA avx2TailMask<>+56(SB)/8, $-1
DATA avx2TailMask<>+64(SB)/8, $0
DATA avx2TailMask<>+72(SB)/8, $0
DATA avx2TailMask<>+80(SB)/8, $0
DATA avx2TailMask<>+88(SB)/8, $0
DATA avx2TailMask<>+96(SB)/8, $0
DATA avx2TailMask<>+104(SB)/8, $0
DATA avx2TailMask<>+112(SB)/8, $0
DATA avx2TailMask<>+120(SB)/8, $0
GLOBL avx2TailMask<>(SB), RODATA|NOPTR, $128

// avx2Flip is 32 bytes of 0x80: x+128 XOR it is the signed quant x.
DATA avx2Flip<>+0(SB)/8, $0x8080808080808080
DATA avx2Flip<>+8(SB)/8, $0x8080808080808080
DATA avx2Flip<>+16(SB)/8, $0x8080808080808080
DATA avx2Flip<>+24(SB)/8, $0x8080808080808080
GLOBL avx2Flip<>(SB), RODATA|NOPTR, $32

// avx2Ones16 is 16 int16 of 1: VPMADDWD by it adds pairs of int16 into
// int32.
DATA avx2Ones16<>+0(SB)/8, $0x0001000100010001
DATA avx2Ones16<>+8(SB)/8, $0x0001000100010001
DATA avx2Ones16<>+16(SB)/8, $0x0001000100010001
DATA avx2Ones16<>+24(SB)/8, $0x0001000100010001
GLOBL avx2Ones16<>(SB), RODATA|NOPTR, $32

// avx2Ones8 is 32 bytes of 1: VPMADDUBSW by it adds pairs of int8 into
// int16.
DATA avx2Ones8<>+0(SB)/8, $0x0101010101010101
DATA avx2Ones8<>+8(SB)/8, $0x0101010101010101
DATA avx2Ones8<>+16(SB)/8, $0x0101010101010101
DATA avx2Ones8<>+24(SB)/8, $0x0101010101010101
GLOBL avx2Ones8<>(SB), RODATA|NOPTR, $32

// avx2Nib is 32 bytes of 0x0f, the low nibble mask.
DATA avx2Nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avx2Nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avx2Nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA avx2Nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL avx2Nib<>(SB), RODATA|NOPTR, $32

// avx2Perm8 is the VPERMD order that undoes VPACK*'s per-128-bit-lane
// interleave of four registers of 8 int32: dwords 0, 4, 1, 5, 2, 6, 3, 7.
DATA avx2Perm8<>+0(SB)/4, $0
DATA avx2Perm8<>+4(SB)/4, $4
DATA avx2Perm8<>+8(SB)/4, $1
DATA avx2Perm8<>+12(SB)/4, $5
DATA avx2Perm8<>+16(SB)/4, $2
DATA avx2Perm8<>+20(SB)/4, $6
DATA avx2Perm8<>+24(SB)/4, $3
DATA avx2Perm8<>+28(SB)/4, $7
GLOBL avx2Perm8<>(SB), RODATA|NOPTR, $32

// TAILMASK2 loads the lane masks of the last partial chunk, of CX - AX
// elements (1 to 15), into ylo (lanes 0-7) and yhi (lanes 8-15). Clobbers
// the general registers t1 and t2.
#define TAILMASK2(t1, t2, ylo, yhi) \
	MOVQ    AX, t1; \
	SUBQ    CX, t1; \
	LEAQ    avx2TailMask<>+64(SB), t2; \
	VMOVDQU (t2)(t1*4), ylo; \
	VMOVDQU 32(t2)(t1*4), yhi

// HSUM16Y reduces the 16 lanes lo (0-7), hi (8-15) into the low lane of xt0
// in HSUM16's order (clobbers yt0, yt1).
#define HSUM16Y(lo, hi, yt0, xt0, yt1, xt1) \
	VADDPS       hi, lo, yt0; \
	VEXTRACTF128 $1, yt0, xt1; \
	VADDPS       xt1, xt0, xt0; \
	VMOVHLPS     xt0, xt0, xt1; \
	VADDPS       xt1, xt0, xt0; \
	VMOVSHDUP    xt0, xt1; \
	VADDSS       xt1, xt0, xt0

// STORE4Y reduces the accumulators Y8/Y9, Y10/Y11, Y12/Y13, Y14/Y15 (rows
// 0..3) and stores them at (BX), (BX)(R9), (BX)(2*R9), (BX)(3*R9)
// (clobbers BX, Y0, Y1).
#define STORE4Y \
	HSUM16Y(Y8, Y9, Y0, X0, Y1, X1); \
	VMOVSS X0, (BX); \
	HSUM16Y(Y10, Y11, Y0, X0, Y1, X1); \
	VMOVSS X0, (BX)(R9*1); \
	HSUM16Y(Y12, Y13, Y0, X0, Y1, X1); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	HSUM16Y(Y14, Y15, Y0, X0, Y1, X1); \
	VMOVSS X0, (BX)(R9*1)

// FSETUP loads the arguments of the 4x1 float kernels (SI, R10, R11, R12 =
// rows 0..3, DI = x, CX = k, R9 = k rounded down to 16), zeroes the
// accumulators Y8..Y15 and AX.
#define FSETUP \
	MOVQ   w+0(FP), SI; \
	MOVQ   wstride+8(FP), R8; \
	MOVQ   x+16(FP), DI; \
	MOVQ   k+24(FP), CX; \
	LEAQ   (SI)(R8*1), R10; \
	LEAQ   (SI)(R8*2), R11; \
	LEAQ   (R11)(R8*1), R12; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	VXORPS Y12, Y12, Y12; \
	VXORPS Y13, Y13, Y13; \
	VXORPS Y14, Y14, Y14; \
	VXORPS Y15, Y15, Y15; \
	XORQ   AX, AX; \
	MOVQ   CX, R9; \
	ANDQ   $-16, R9

// FMA16 accumulates one chunk of weights (lo, hi, float32) against the
// activations in Y0/Y1 into a0/a1.
#define FMA16(lo, hi, a0, a1) \
	VFMADD231PS lo, Y0, a0; \
	VFMADD231PS hi, Y1, a1

// XTAIL loads the last partial chunk of the activations, zero-padded, into
// Y0/Y1 (clobbers DX, R13, Y2, Y3).
#define XTAIL \
	TAILMASK2(DX, R13, Y2, Y3); \
	VMASKMOVPS (DI)(AX*4), Y2, Y0; \
	VMASKMOVPS 32(DI)(AX*4), Y3, Y1

// HALFTAIL copies the last partial chunk (elements AX..CX-1) of the four
// 16-bit rows SI, R10, R11, R12 into the frame, 32 bytes per row at 0(SP),
// 32(SP), 64(SP), 96(SP), zero-padded to 16 elements: the chunk the
// AVX-512 kernels load with a zeroing mask, without reading past the rows.
// Clobbers DX, R13, R14, Y2.
#define HALFTAIL(lbl) \
	VPXOR   Y2, Y2, Y2; \
	VMOVDQU Y2, 0(SP); \
	VMOVDQU Y2, 32(SP); \
	VMOVDQU Y2, 64(SP); \
	VMOVDQU Y2, 96(SP); \
	MOVQ    AX, R13; \
	XORQ    R14, R14; \
lbl: \
	MOVWLZX (SI)(R13*2), DX; \
	MOVW    DX, 0(SP)(R14*2); \
	MOVWLZX (R10)(R13*2), DX; \
	MOVW    DX, 32(SP)(R14*2); \
	MOVWLZX (R11)(R13*2), DX; \
	MOVW    DX, 64(SP)(R14*2); \
	MOVWLZX (R12)(R13*2), DX; \
	MOVW    DX, 96(SP)(R14*2); \
	INCQ    R13; \
	INCQ    R14; \
	CMPQ    R13, CX; \
	JLT     lbl

// F16Y loads the 16 f16 values at m, m+16 as float32 into lo, hi.
#define F16Y(m, m16, lo, hi) \
	VCVTPH2PS m, lo; \
	VCVTPH2PS m16, hi

// BF16Y loads the 16 bf16 values at m, m+16 as float32 into lo, hi.
#define BF16Y(m, m16, lo, hi) \
	VPMOVZXWD m, lo; \
	VPSLLD    $16, lo, lo; \
	VPMOVZXWD m16, hi; \
	VPSLLD    $16, hi, hi

// F44PASS computes the 2x2 block of f32Dot4x4AVX2's outputs for the rows
// R10, R11 and the tokens R13, R14 over the k = CX elements (R12 = k
// rounded down to 16), and stores them at BX + tok*ostride + rowoff (tok:
// 0 or 2, the block's first token; rowoff: 0 or 8, its first row's output).
// Accumulators (lanes 0-7, 8-15): Y0/Y1 = (row 0, token 0), Y2/Y3 = (row
// 0, token 1), Y4/Y5 = (row 1, token 0), Y6/Y7 = (row 1, token 1).
// Clobbers AX, BX, DX and every Y register.
#define F44PASS(loop, tail, done, tok, rowoff) \
	VXORPS      Y0, Y0, Y0; \
	VXORPS      Y1, Y1, Y1; \
	VXORPS      Y2, Y2, Y2; \
	VXORPS      Y3, Y3, Y3; \
	VXORPS      Y4, Y4, Y4; \
	VXORPS      Y5, Y5, Y5; \
	VXORPS      Y6, Y6, Y6; \
	VXORPS      Y7, Y7, Y7; \
	XORQ        AX, AX; \
	CMPQ        AX, R12; \
	JGE         tail; \
loop: \
	VMOVUPS     (R13)(AX*4), Y12; \
	VMOVUPS     32(R13)(AX*4), Y13; \
	VMOVUPS     (R14)(AX*4), Y14; \
	VMOVUPS     32(R14)(AX*4), Y15; \
	VMOVUPS     (R10)(AX*4), Y8; \
	VMOVUPS     32(R10)(AX*4), Y9; \
	VFMADD231PS Y8, Y12, Y0; \
	VFMADD231PS Y9, Y13, Y1; \
	VFMADD231PS Y8, Y14, Y2; \
	VFMADD231PS Y9, Y15, Y3; \
	VMOVUPS     (R11)(AX*4), Y10; \
	VMOVUPS     32(R11)(AX*4), Y11; \
	VFMADD231PS Y10, Y12, Y4; \
	VFMADD231PS Y11, Y13, Y5; \
	VFMADD231PS Y10, Y14, Y6; \
	VFMADD231PS Y11, Y15, Y7; \
	ADDQ        $16, AX; \
	CMPQ        AX, R12; \
	JLT         loop; \
tail: \
	CMPQ        AX, CX; \
	JGE         done; \
	TAILMASK2(BX, DX, Y8, Y9); \
	VMASKMOVPS  (R13)(AX*4), Y8, Y12; \
	VMASKMOVPS  32(R13)(AX*4), Y9, Y13; \
	VMASKMOVPS  (R14)(AX*4), Y8, Y14; \
	VMASKMOVPS  32(R14)(AX*4), Y9, Y15; \
	VMASKMOVPS  (R10)(AX*4), Y8, Y10; \
	VMASKMOVPS  32(R10)(AX*4), Y9, Y11; \
	VFMADD231PS Y10, Y12, Y0; \
	VFMADD231PS Y11, Y13, Y1; \
	VFMADD231PS Y10, Y14, Y2; \
	VFMADD231PS Y11, Y15, Y3; \
	VMASKMOVPS  (R11)(AX*4), Y8, Y10; \
	VMASKMOVPS  32(R11)(AX*4), Y9, Y11; \
	VFMADD231PS Y10, Y12, Y4; \
	VFMADD231PS Y11, Y13, Y5; \
	VFMADD231PS Y10, Y14, Y6; \
	VFMADD231PS Y11, Y15, Y7; \
done: \
	MOVQ        out+40(FP), BX; \
	MOVQ        ostride+48(FP), DX; \
	IMUL3Q      $tok, DX, AX; \
	LEAQ        rowoff(BX)(AX*1), BX; \
	HSUM16Y(Y0, Y1, Y8, X8, Y9, X9); \
	VMOVSS      X8, 0(BX); \
	HSUM16Y(Y4, Y5, Y8, X8, Y9, X9); \
	VMOVSS      X8, 4(BX); \
	HSUM16Y(Y2, Y3, Y8, X8, Y9, X9); \
	VMOVSS      X8, (BX)(DX*1); \
	HSUM16Y(Y6, Y7, Y8, X8, Y9, X9); \
	VMOVSS      X8, 4(BX)(DX*1)

// The Q8_0/Q4_0 kernels take activations as unsigned bytes xu = x+128 (x
// the Q8_0 quant, -127..127), and flip them back to signed x per block.
// Without VNNI the lane dots are VPMADDUBSW (u8 by s8 into int16 pair
// sums, saturating) then VPMADDWD by ones (int16 pairs into int32), exact
// when no pair sum leaves int16:
//   - Q8_0 weights w are full int8, so the signs move onto the activations
//     (VPSIGNB: x*sign(w), -127..127) against |w| (0..128): pair sums stay
//     within 2*128*127 = 32512;
//   - Q4_0 weights are nibbles n (0..15, w = n-8): dot(n, x) (pair sums
//     within 2*15*127) minus 8*(the lane's sum of x), once per block for
//     the 4 rows.

// QSCALE leaves d_w*d_x in the 8 lanes of ydst for the block at (row)
// (f16 d_w), with d_x in Y5 (clobbers xdst).
#define QSCALE(row, ydst, xdst) \
	VPBROADCASTW (row), xdst; \
	VCVTPH2PS    xdst, ydst; \
	VMULPS       Y5, ydst, ydst

// QACC turns the int16 pair sums in ysum into int32 lanes (VPMADDWD by
// ones, Y14), converts them and accumulates fma(scale, lanes, acc).
#define QACC(ysum, scale, acc) \
	VPMADDWD    Y14, ysum, ysum; \
	VCVTDQ2PS   ysum, ysum; \
	VFMADD231PS ysum, scale, acc

// Q8ROWA accumulates the Q8_0 block at (row) into acc against the signed
// activations in Y4 (clobbers ys, yw, yt, xs).
#define Q8ROWA(row, acc, ys, xs, yw, yt) \
	QSCALE(row, ys, xs); \
	VMOVDQU    2(row), yw; \
	VPSIGNB    yw, Y4, yt; \
	VPABSB     yw, yw; \
	VPMADDUBSW yt, yw, yt; \
	QACC(yt, ys, acc)

// QARGS loads the arguments of the 4x1 quant kernels: SI, R10, R11, R12 =
// rows 0..3, DI = xq, DX = xd, CX = nb; zeroes the accumulators Y0..Y3 and
// sets Y14 = int16 ones, Y15 = 0x80 bytes.
#define QARGS \
	MOVQ    w+0(FP), SI; \
	MOVQ    wstride+8(FP), R8; \
	MOVQ    xq+16(FP), DI; \
	MOVQ    xd+24(FP), DX; \
	MOVQ    nb+32(FP), CX; \
	LEAQ    (SI)(R8*1), R10; \
	LEAQ    (SI)(R8*2), R11; \
	LEAQ    (R11)(R8*1), R12; \
	VXORPS  Y0, Y0, Y0; \
	VXORPS  Y1, Y1, Y1; \
	VXORPS  Y2, Y2, Y2; \
	VXORPS  Y3, Y3, Y3; \
	VMOVDQU avx2Ones16<>(SB), Y14; \
	VMOVDQU avx2Flip<>(SB), Y15

// QSTORE4Y reduces the accumulators Y0..Y3 (hsum8) into the 4 outputs at
// out, stride ostride bytes (clobbers BX, R9, Y0, Y1, Y4).
#define QSTORE4Y \
	MOVQ    out+40(FP), BX; \
	MOVQ    ostride+48(FP), R9; \
	VMOVAPS Y1, Y4; \
	HSUM8X(Y0, X0, X0, X1); \
	VMOVSS  X0, (BX); \
	HSUM8X(Y4, X4, X0, X1); \
	VMOVSS  X0, (BX)(R9*1); \
	HSUM8X(Y2, X2, X0, X1); \
	VMOVSS  X0, (BX)(R9*2); \
	LEAQ    (BX)(R9*2), BX; \
	HSUM8X(Y3, X3, X0, X1); \
	VMOVSS  X0, (BX)(R9*1)

// Q4ROWA accumulates the Q4_0 block at (row) into acc against the signed
// activations in Y4, with 8*(lane sums of x) in Y13 and 0x0f bytes in Y12
// (clobbers ys, yw, yt, xs, xw, xt).
#define Q4ROWA(row, acc, ys, xs, yw, xw, yt, xt) \
	QSCALE(row, ys, xs); \
	VMOVDQU     2(row), xw; \
	VPSRLW      $4, xw, xt; \
	VINSERTI128 $1, xt, yw, yw; \
	VPAND       Y12, yw, yw; \
	VPMADDUBSW  Y4, yw, yw; \
	VPMADDWD    Y14, yw, yw; \
	VPSUBD      Y13, yw, yw; \
	VCVTDQ2PS   yw, yw; \
	VFMADD231PS yw, ys, acc

// Q42ARGS loads the arguments of the 4x2 quant kernels: SI, R10, R11, R12 =
// rows 0..3, DI = token a's quants, DI+R13 token b's, DX = token a's
// scales, DX+R14 token b's, CX = nb; zeroes the accumulators Y0..Y7 (row
// i, token a: Y(2i); token b: Y(2i+1)) and sets Y15 = int16 ones.
#define Q42ARGS \
	MOVQ    w+0(FP), SI; \
	MOVQ    wstride+8(FP), R8; \
	MOVQ    xq+16(FP), DI; \
	MOVQ    xd+24(FP), DX; \
	MOVQ    nb+32(FP), CX; \
	LEAQ    (SI)(R8*1), R10; \
	LEAQ    (SI)(R8*2), R11; \
	LEAQ    (R11)(R8*1), R12; \
	MOVQ    CX, R13; \
	SHLQ    $5, R13; \
	MOVQ    CX, R14; \
	SHLQ    $2, R14; \
	VXORPS  Y0, Y0, Y0; \
	VXORPS  Y1, Y1, Y1; \
	VXORPS  Y2, Y2, Y2; \
	VXORPS  Y3, Y3, Y3; \
	VXORPS  Y4, Y4, Y4; \
	VXORPS  Y5, Y5, Y5; \
	VXORPS  Y6, Y6, Y6; \
	VXORPS  Y7, Y7, Y7; \
	VMOVDQU avx2Ones16<>(SB), Y15

// Q42SCALES stores the 8 scale products d_w*d_x of the current block, rows
// 0..3 against token a at 0(SP)..12(SP) and against token b at
// 16(SP)..28(SP) (clobbers AX, BX, R9, X8, X9).
#define Q42SCALES \
	MOVWLZX      (SI), AX; \
	MOVWLZX      (R10), BX; \
	SHLL         $16, BX; \
	ORL          BX, AX; \
	MOVWLZX      (R11), BX; \
	MOVWLZX      (R12), R9; \
	SHLL         $16, R9; \
	ORL          R9, BX; \
	SHLQ         $32, BX; \
	ORQ          BX, AX; \
	VMOVQ        AX, X8; \
	VCVTPH2PS    X8, X8; \
	VBROADCASTSS (DX), X9; \
	VMULPS       X9, X8, X9; \
	VMOVUPS      X9, 0(SP); \
	VBROADCASTSS (DX)(R14*1), X9; \
	VMULPS       X9, X8, X9; \
	VMOVUPS      X9, 16(SP)

// Q42X loads both tokens' quants of the current block, signed, into Y8
// (token a) and Y9 (token b).
#define Q42X \
	VMOVDQU (DI), Y8; \
	VPXOR   avx2Flip<>(SB), Y8, Y8; \
	VMOVDQU (DI)(R13*1), Y9; \
	VPXOR   avx2Flip<>(SB), Y9, Y9

// Q42ACC converts the int32 lanes in ysum and accumulates fma(scale at
// soff(SP), lanes, acc) (clobbers Y14).
#define Q42ACC(ysum, soff, acc) \
	VCVTDQ2PS    ysum, ysum; \
	VBROADCASTSS soff(SP), Y14; \
	VFMADD231PS  ysum, Y14, acc

// Q8ROW42 accumulates the Q8_0 block at (row) against both tokens into
// acca, accb, with the scales at sa(SP), sb(SP) (clobbers Y10..Y14).
#define Q8ROW42(row, sa, sb, acca, accb) \
	VMOVDQU    2(row), Y10; \
	VPABSB     Y10, Y11; \
	VPSIGNB    Y10, Y8, Y12; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDWD   Y15, Y12, Y12; \
	Q42ACC(Y12, sa, acca); \
	VPSIGNB    Y10, Y9, Y13; \
	VPMADDUBSW Y13, Y11, Y13; \
	VPMADDWD   Y15, Y13, Y13; \
	Q42ACC(Y13, sb, accb)

// Q4ROW42 is Q8ROW42 for the Q4_0 block at (row), with 8*(lane sums of x)
// in Y10 (token a) and Y11 (token b) (clobbers Y12..Y14).
#define Q4ROW42(row, sa, sb, acca, accb) \
	VMOVDQU     2(row), X12; \
	VPSRLW      $4, X12, X13; \
	VINSERTI128 $1, X13, Y12, Y12; \
	VPAND       avx2Nib<>(SB), Y12, Y12; \
	VPMADDUBSW  Y8, Y12, Y13; \
	VPMADDWD    Y15, Y13, Y13; \
	VPSUBD      Y10, Y13, Y13; \
	Q42ACC(Y13, sa, acca); \
	VPMADDUBSW  Y9, Y12, Y13; \
	VPMADDWD    Y15, Y13, Y13; \
	VPSUBD      Y11, Y13, Y13; \
	Q42ACC(Y13, sb, accb)

// Q42STORE reduces the accumulators (hsum8) into out + i*ostride +
// t*otok for row i and token t (clobbers BX, R9, R13, X8, X9).
#define Q42STORE \
	MOVQ   out+40(FP), BX; \
	MOVQ   ostride+48(FP), R9; \
	MOVQ   otok+56(FP), R13; \
	HSUM8X(Y0, X0, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y1, X1, X8, X9); \
	VMOVSS X8, (BX)(R13*1); \
	ADDQ   R9, BX; \
	HSUM8X(Y2, X2, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y3, X3, X8, X9); \
	VMOVSS X8, (BX)(R13*1); \
	ADDQ   R9, BX; \
	HSUM8X(Y4, X4, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y5, X5, X8, X9); \
	VMOVSS X8, (BX)(R13*1); \
	ADDQ   R9, BX; \
	HSUM8X(Y6, X6, X8, X9); \
	VMOVSS X8, (BX); \
	HSUM8X(Y7, X7, X8, X9); \
	VMOVSS X8, (BX)(R13*1)

// func f32Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
TEXT ·f32Dot4x1AVX2(SB), NOSPLIT, $0-48
	FSETUP
	CMPQ AX, R9
	JGE  f32a4tail

f32a4loop:
	VMOVUPS     (DI)(AX*4), Y0
	VMOVUPS     32(DI)(AX*4), Y1
	VFMADD231PS (SI)(AX*4), Y0, Y8
	VFMADD231PS 32(SI)(AX*4), Y1, Y9
	VFMADD231PS (R10)(AX*4), Y0, Y10
	VFMADD231PS 32(R10)(AX*4), Y1, Y11
	VFMADD231PS (R11)(AX*4), Y0, Y12
	VFMADD231PS 32(R11)(AX*4), Y1, Y13
	VFMADD231PS (R12)(AX*4), Y0, Y14
	VFMADD231PS 32(R12)(AX*4), Y1, Y15
	ADDQ        $16, AX
	CMPQ        AX, R9
	JLT         f32a4loop

f32a4tail:
	CMPQ AX, CX
	JGE  f32a4done
	XTAIL
	VMASKMOVPS (SI)(AX*4), Y2, Y4
	VMASKMOVPS 32(SI)(AX*4), Y3, Y5
	FMA16(Y4, Y5, Y8, Y9)
	VMASKMOVPS (R10)(AX*4), Y2, Y4
	VMASKMOVPS 32(R10)(AX*4), Y3, Y5
	FMA16(Y4, Y5, Y10, Y11)
	VMASKMOVPS (R11)(AX*4), Y2, Y4
	VMASKMOVPS 32(R11)(AX*4), Y3, Y5
	FMA16(Y4, Y5, Y12, Y13)
	VMASKMOVPS (R12)(AX*4), Y2, Y4
	VMASKMOVPS 32(R12)(AX*4), Y3, Y5
	FMA16(Y4, Y5, Y14, Y15)

f32a4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4Y
	VZEROUPPER
	RET

// func f16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
TEXT ·f16Dot4x1AVX2(SB), NOSPLIT, $128-48
	FSETUP
	CMPQ AX, R9
	JGE  f16a4tail

f16a4loop:
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	F16Y((SI)(AX*2), 16(SI)(AX*2), Y2, Y3)
	F16Y((R10)(AX*2), 16(R10)(AX*2), Y4, Y5)
	FMA16(Y2, Y3, Y8, Y9)
	FMA16(Y4, Y5, Y10, Y11)
	F16Y((R11)(AX*2), 16(R11)(AX*2), Y2, Y3)
	F16Y((R12)(AX*2), 16(R12)(AX*2), Y4, Y5)
	FMA16(Y2, Y3, Y12, Y13)
	FMA16(Y4, Y5, Y14, Y15)
	ADDQ    $16, AX
	CMPQ    AX, R9
	JLT     f16a4loop

f16a4tail:
	CMPQ AX, CX
	JGE  f16a4done
	HALFTAIL(f16a4copy)
	XTAIL
	F16Y(0(SP), 16(SP), Y2, Y3)
	F16Y(32(SP), 48(SP), Y4, Y5)
	FMA16(Y2, Y3, Y8, Y9)
	FMA16(Y4, Y5, Y10, Y11)
	F16Y(64(SP), 80(SP), Y2, Y3)
	F16Y(96(SP), 112(SP), Y4, Y5)
	FMA16(Y2, Y3, Y12, Y13)
	FMA16(Y4, Y5, Y14, Y15)

f16a4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4Y
	VZEROUPPER
	RET

// func bf16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
TEXT ·bf16Dot4x1AVX2(SB), NOSPLIT, $128-48
	FSETUP
	CMPQ AX, R9
	JGE  bf16a4tail

bf16a4loop:
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	BF16Y((SI)(AX*2), 16(SI)(AX*2), Y2, Y3)
	BF16Y((R10)(AX*2), 16(R10)(AX*2), Y4, Y5)
	FMA16(Y2, Y3, Y8, Y9)
	FMA16(Y4, Y5, Y10, Y11)
	BF16Y((R11)(AX*2), 16(R11)(AX*2), Y2, Y3)
	BF16Y((R12)(AX*2), 16(R12)(AX*2), Y4, Y5)
	FMA16(Y2, Y3, Y12, Y13)
	FMA16(Y4, Y5, Y14, Y15)
	ADDQ    $16, AX
	CMPQ    AX, R9
	JLT     bf16a4loop

bf16a4tail:
	CMPQ AX, CX
	JGE  bf16a4done
	HALFTAIL(bf16a4copy)
	XTAIL
	BF16Y(0(SP), 16(SP), Y2, Y3)
	BF16Y(32(SP), 48(SP), Y4, Y5)
	FMA16(Y2, Y3, Y8, Y9)
	FMA16(Y4, Y5, Y10, Y11)
	BF16Y(64(SP), 80(SP), Y2, Y3)
	BF16Y(96(SP), 112(SP), Y4, Y5)
	FMA16(Y2, Y3, Y12, Y13)
	FMA16(Y4, Y5, Y14, Y15)

bf16a4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4Y
	VZEROUPPER
	RET

// func f32Dot4x4AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr)
// f32Dot4x4 in four passes of 2 rows by 2 tokens (the 16 zmm accumulators
// of the AVX-512 kernel are 32 ymm, more than there are): each output's
// lanes see the same fused multiply-adds in the same order.
TEXT ·f32Dot4x4AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), R9
	MOVQ k+32(FP), CX
	MOVQ CX, R12
	ANDQ $-16, R12

	// Rows 0, 1.
	MOVQ SI, R10
	LEAQ (SI)(R8*1), R11
	MOVQ DI, R13
	LEAQ (DI)(R9*1), R14
	F44PASS(f44loop0, f44tail0, f44done0, 0, 0)
	LEAQ (DI)(R9*2), R13
	LEAQ (R13)(R9*1), R14
	F44PASS(f44loop1, f44tail1, f44done1, 2, 0)

	// Rows 2, 3.
	LEAQ (SI)(R8*2), R10
	LEAQ (R10)(R8*1), R11
	MOVQ DI, R13
	LEAQ (DI)(R9*1), R14
	F44PASS(f44loop2, f44tail2, f44done2, 0, 8)
	LEAQ (DI)(R9*2), R13
	LEAQ (R13)(R9*1), R14
	F44PASS(f44loop3, f44tail3, f44done3, 2, 8)
	VZEROUPPER
	RET

// func cvtF16AVX2(dst *float32, src unsafe.Pointer, n int)
TEXT ·cvtF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  cvtf16a2done

cvtf16a2loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       cvtf16a2loop

cvtf16a2done:
	VZEROUPPER
	RET

// func cvtBF16AVX2(dst *float32, src unsafe.Pointer, n int)
TEXT ·cvtBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  cvtbf16a2done

cvtbf16a2loop:
	BF16Y((SI), 16(SI), Y0, Y1)
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $32, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     cvtbf16a2loop

cvtbf16a2done:
	VZEROUPPER
	RET

// func q8Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·q8Dot4x1AVX2(SB), NOSPLIT, $0-56
	QARGS
	TESTQ CX, CX
	JEQ   q8a4done

q8a4loop:
	VPXOR        (DI), Y15, Y4
	VBROADCASTSS (DX), Y5
	Q8ROWA(SI, Y0, Y6, X6, Y7, Y8)
	Q8ROWA(R10, Y1, Y9, X9, Y10, Y11)
	Q8ROWA(R11, Y2, Y6, X6, Y7, Y8)
	Q8ROWA(R12, Y3, Y9, X9, Y10, Y11)
	ADDQ         $34, SI
	ADDQ         $34, R10
	ADDQ         $34, R11
	ADDQ         $34, R12
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          q8a4loop

q8a4done:
	QSTORE4Y
	VZEROUPPER
	RET

// func q4Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
TEXT ·q4Dot4x1AVX2(SB), NOSPLIT, $0-56
	QARGS
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x01010101, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11
	TESTQ        CX, CX
	JEQ          q4a4done

q4a4loop:
	VPXOR        (DI), Y15, Y4
	VBROADCASTSS (DX), Y5
	VPMADDUBSW   Y4, Y11, Y13
	VPMADDWD     Y14, Y13, Y13
	VPSLLD       $3, Y13, Y13
	Q4ROWA(SI, Y0, Y6, X6, Y7, X7, Y8, X8)
	Q4ROWA(R10, Y1, Y9, X9, Y10, X10, Y8, X8)
	Q4ROWA(R11, Y2, Y6, X6, Y7, X7, Y8, X8)
	Q4ROWA(R12, Y3, Y9, X9, Y10, X10, Y8, X8)
	ADDQ         $18, SI
	ADDQ         $18, R10
	ADDQ         $18, R11
	ADDQ         $18, R12
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          q4a4loop

q4a4done:
	QSTORE4Y
	VZEROUPPER
	RET

// func q8Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr)
// q8Dot4x1AVX2 for two tokens, each block's weights loaded once for both.
TEXT ·q8Dot4x2AVX2(SB), NOSPLIT, $32-64
	Q42ARGS
	TESTQ CX, CX
	JEQ   q8a42done

q8a42loop:
	Q42SCALES
	Q42X
	Q8ROW42(SI, 0, 16, Y0, Y1)
	Q8ROW42(R10, 4, 20, Y2, Y3)
	Q8ROW42(R11, 8, 24, Y4, Y5)
	Q8ROW42(R12, 12, 28, Y6, Y7)
	ADDQ $34, SI
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q8a42loop

q8a42done:
	Q42STORE
	VZEROUPPER
	RET

// func q4Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr)
// q8Dot4x2AVX2 for Q4_0 rows.
TEXT ·q4Dot4x2AVX2(SB), NOSPLIT, $32-64
	Q42ARGS
	TESTQ CX, CX
	JEQ   q4a42done

q4a42loop:
	Q42SCALES
	Q42X
	VMOVDQU    avx2Ones8<>(SB), Y12
	VPMADDUBSW Y8, Y12, Y10
	VPMADDWD   Y15, Y10, Y10
	VPSLLD     $3, Y10, Y10
	VPMADDUBSW Y9, Y12, Y11
	VPMADDWD   Y15, Y11, Y11
	VPSLLD     $3, Y11, Y11
	Q4ROW42(SI, 0, 16, Y0, Y1)
	Q4ROW42(R10, 4, 20, Y2, Y3)
	Q4ROW42(R11, 8, 24, Y4, Y5)
	Q4ROW42(R12, 12, 28, Y6, Y7)
	ADDQ $18, SI
	ADDQ $18, R10
	ADDQ $18, R11
	ADDQ $18, R12
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q4a42loop

q4a42done:
	Q42STORE
	VZEROUPPER
	RET

// func roundF16AVX2(dst, src *float32, n int)
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  rf16a2done

rf16a2loop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, X2
	VCVTPS2PH $0, Y1, X3
	VCVTPH2PS X2, Y0
	VCVTPH2PS X3, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       rf16a2loop

rf16a2done:
	VZEROUPPER
	RET

// func quantQ8AVX2(x *float32, nb int, xu *byte, d *float32)
// quantQ8 with AVX2: the same maximum, scale and products, and each quant
// the low byte of its int32 conversion (VPMOVDB's truncation, as an AND
// and unsigned packs), plus 128.
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         xu+16(FP), DI
	MOVQ         d+24(FP), DX
	MOVL         $0x7fffffff, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0xff, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	VMOVDQU      avx2Flip<>(SB), Y14
	VMOVDQU      avx2Perm8<>(SB), Y11
	MOVL         $0x42fe0000, AX
	VMOVD        AX, X15
	TESTQ        CX, CX
	JEQ          qqa2done

qqa2loop:
	VMOVUPS      (SI), Y0
	VMOVUPS      32(SI), Y1
	VMOVUPS      64(SI), Y2
	VMOVUPS      96(SI), Y3
	VANDPS       Y13, Y0, Y4
	VANDPS       Y13, Y1, Y5
	VANDPS       Y13, Y2, Y6
	VANDPS       Y13, Y3, Y7
	VMAXPS       Y6, Y4, Y4
	VMAXPS       Y7, Y5, Y5
	VMAXPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS       X5, X4, X4
	VMOVHLPS     X4, X4, X5
	VMAXPS       X5, X4, X4
	VMOVSHDUP    X4, X5
	VMAXSS       X5, X4, X4
	VDIVSS       X15, X4, X8
	VCVTPS2PH    $0, X8, X9
	VCVTPH2PS    X9, X9
	VMOVSS       X9, (DX)
	VXORPS       X6, X6, X6
	VUCOMISS     X6, X4
	JEQ          qqa2zero
	VDIVSS       X4, X15, X6

qqa2zero:
	VBROADCASTSS X6, Y6
	VMULPS       Y6, Y0, Y0
	VMULPS       Y6, Y1, Y1
	VMULPS       Y6, Y2, Y2
	VMULPS       Y6, Y3, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3
	VPAND        Y12, Y0, Y0
	VPAND        Y12, Y1, Y1
	VPAND        Y12, Y2, Y2
	VPAND        Y12, Y3, Y3
	VPACKUSDW    Y1, Y0, Y0
	VPACKUSDW    Y3, Y2, Y2
	VPACKUSWB    Y2, Y0, Y0
	VPERMD       Y0, Y11, Y0
	VPXOR        Y14, Y0, Y0
	VMOVDQU      Y0, (DI)
	ADDQ         $128, SI
	ADDQ         $32, DI
	ADDQ         $4, DX
	DECQ         CX
	JNZ          qqa2loop

qqa2done:
	VZEROUPPER
	RET

// func geluF16VAVX2(dst, src *float32, n int, table *float32)
// geluF16V with AVX2 (8 lanes a step): the same table entries and limits.
TEXT ·geluF16VAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ table+24(FP), DX
	MOVL $0xc1200000, AX // -10
	MOVQ AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x41200000, AX // 10
	MOVQ AX, X15
	VPBROADCASTD X15, Y15
	SHRQ $3, CX
	JZ   gelu2done
gelu2loop:
	VMOVUPS    (SI), Y0
	VCVTPS2PH  $0, Y0, X1
	VPMOVZXWD  X1, Y1
	VPCMPEQD   Y3, Y3, Y3
	VPXOR      Y2, Y2, Y2
	VPGATHERDD Y3, (DX)(Y1*4), Y2
	VCMPPS     $2, Y14, Y0, Y4  // x <= -10
	VANDNPS    Y2, Y4, Y2
	VCMPPS     $13, Y15, Y0, Y5 // x >= 10
	VBLENDVPS  Y5, Y0, Y2, Y2
	VMOVUPS    Y2, (DI)
	ADDQ       $32, SI
	ADDQ       $32, DI
	DECQ       CX
	JNZ        gelu2loop
gelu2done:
	VZEROUPPER
	RET
