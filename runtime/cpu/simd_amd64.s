#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 (F, BW, VL, VNNI) kernels for the fast matmul paths. Every kernel
// computes each output element with one fixed sequence of operations, the same
// in every tile shape, so results do not depend on how rows and tokens are
// tiled or split across workers:
//   - float kernels: 16 float32 lanes, acc[l] = fma(w[16c+l], x[16c+l], acc[l])
//     over 16-element chunks c, the last chunk zero-padded by a masked load,
//     then the HSUM16 order below;
//   - Q8_0 kernels: per 32-element block an exact int32 dot in 8 lanes of 4
//     products, acc[l] = fma(d_w*d_x, float(lane), acc[l]), then hsum8: bit
//     for bit the reference dotQ8.

// func cpuid(eax, ecx uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eax+0(FP), AX
	MOVL ecx+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET

// HSUM16 reduces Z register zsrc into the low lane of X0 (clobbers X0, X1, Y0, Y1):
// lanes l+8 onto l, then l+4 onto l, then (0+2)+(1+3).
#define HSUM16(zsrc, ysrc) \
	VEXTRACTF32X8 $1, zsrc, Y1; \
	VADDPS        Y1, ysrc, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVHLPS      X0, X0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVSHDUP     X0, X1; \
	VADDSS        X1, X0, X0

// STORE4S reduces the accumulators a0..a3 (HSUM16) and stores them at
// (BX), (BX)(R9), (BX)(2*R9), (BX)(3*R9): the outputs of 4 rows whose
// stride in bytes is R9 (clobbers BX).
#define STORE4S(a0, y0, a1, y1, a2, y2, a3, y3) \
	HSUM16(a0, y0); \
	VMOVSS X0, (BX); \
	HSUM16(a1, y1); \
	VMOVSS X0, (BX)(R9*1); \
	HSUM16(a2, y2); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	HSUM16(a3, y3); \
	VMOVSS X0, (BX)(R9*1)

// func f32Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dot(row i, x) for the 4 float32 rows w + i*wstride, i < 4
// (strides in bytes).
TEXT ·f32Dot4x1(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ k+24(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9
	CMPQ AX, R9
	JGE  f32d4tail
f32d4loop:
	VMOVUPS     (DI)(AX*4), Z4
	VFMADD231PS (SI)(AX*4), Z4, Z16
	VFMADD231PS (R10)(AX*4), Z4, Z17
	VFMADD231PS (R11)(AX*4), Z4, Z18
	VFMADD231PS (R12)(AX*4), Z4, Z19
	ADDQ $16, AX
	CMPQ AX, R9
	JLT  f32d4loop
f32d4tail:
	CMPQ AX, CX
	JGE  f32d4done
	TAILMASK(R14)
	VMOVUPS.Z   (DI)(AX*4), K1, Z4
	VMOVUPS.Z   (SI)(AX*4), K1, Z0
	VFMADD231PS Z0, Z4, Z16
	VMOVUPS.Z   (R10)(AX*4), K1, Z0
	VFMADD231PS Z0, Z4, Z17
	VMOVUPS.Z   (R11)(AX*4), K1, Z0
	VFMADD231PS Z0, Z4, Z18
	VMOVUPS.Z   (R12)(AX*4), K1, Z0
	VFMADD231PS Z0, Z4, Z19
f32d4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4S(Z16, Y16, Z17, Y17, Z18, Y18, Z19, Y19)
	VZEROUPPER
	RET

// F16W loads 16 f16 weights at (base)(AX*2) as float32 into zdst.
#define F16W(base, zdst) VCVTPH2PS (base)(AX*2), zdst
// F16WT is F16W for the masked tail (ytmp is clobbered).
#define F16WT(base, ytmp, zdst) \
	VMOVDQU16.Z (base)(AX*2), K1, ytmp; \
	VCVTPH2PS   ytmp, zdst

// func f16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
// f32Dot4x1 for f16 rows.
TEXT ·f16Dot4x1(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ k+24(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9
	CMPQ AX, R9
	JGE  f16d4tail
f16d4loop:
	VMOVUPS     (DI)(AX*4), Z4
	F16W(SI, Z0)
	F16W(R10, Z1)
	F16W(R11, Z2)
	F16W(R12, Z3)
	VFMADD231PS Z0, Z4, Z16
	VFMADD231PS Z1, Z4, Z17
	VFMADD231PS Z2, Z4, Z18
	VFMADD231PS Z3, Z4, Z19
	ADDQ $16, AX
	CMPQ AX, R9
	JLT  f16d4loop
f16d4tail:
	CMPQ AX, CX
	JGE  f16d4done
	TAILMASK(R14)
	VMOVUPS.Z (DI)(AX*4), K1, Z4
	F16WT(SI, Y5, Z0)
	F16WT(R10, Y5, Z1)
	F16WT(R11, Y5, Z2)
	F16WT(R12, Y5, Z3)
	VFMADD231PS Z0, Z4, Z16
	VFMADD231PS Z1, Z4, Z17
	VFMADD231PS Z2, Z4, Z18
	VFMADD231PS Z3, Z4, Z19
f16d4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4S(Z16, Y16, Z17, Y17, Z18, Y18, Z19, Y19)
	VZEROUPPER
	RET

// BF16W loads 16 bf16 weights at (base)(AX*2) as float32 into zdst.
#define BF16W(base, zdst) \
	VPMOVZXWD (base)(AX*2), zdst; \
	VPSLLD    $16, zdst, zdst
// BF16WT is BF16W for the masked tail (ytmp is clobbered).
#define BF16WT(base, ytmp, zdst) \
	VMOVDQU16.Z (base)(AX*2), K1, ytmp; \
	VPMOVZXWD   ytmp, zdst; \
	VPSLLD      $16, zdst, zdst

// func bf16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
// f32Dot4x1 for bf16 rows.
TEXT ·bf16Dot4x1(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ k+24(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9
	CMPQ AX, R9
	JGE  bf16d4tail
bf16d4loop:
	VMOVUPS     (DI)(AX*4), Z4
	BF16W(SI, Z0)
	BF16W(R10, Z1)
	BF16W(R11, Z2)
	BF16W(R12, Z3)
	VFMADD231PS Z0, Z4, Z16
	VFMADD231PS Z1, Z4, Z17
	VFMADD231PS Z2, Z4, Z18
	VFMADD231PS Z3, Z4, Z19
	ADDQ $16, AX
	CMPQ AX, R9
	JLT  bf16d4loop
bf16d4tail:
	CMPQ AX, CX
	JGE  bf16d4done
	TAILMASK(R14)
	VMOVUPS.Z (DI)(AX*4), K1, Z4
	BF16WT(SI, Y5, Z0)
	BF16WT(R10, Y5, Z1)
	BF16WT(R11, Y5, Z2)
	BF16WT(R12, Y5, Z3)
	VFMADD231PS Z0, Z4, Z16
	VFMADD231PS Z1, Z4, Z17
	VFMADD231PS Z2, Z4, Z18
	VFMADD231PS Z3, Z4, Z19
bf16d4done:
	MOVQ out+32(FP), BX
	MOVQ ostride+40(FP), R9
	STORE4S(Z16, Y16, Z17, Y17, Z18, Y18, Z19, Y19)
	VZEROUPPER
	RET

// FMA4x4 accumulates one 16-lane chunk of 4 rows (Z0..Z3) against the token
// row at (tok)(AX*4) into accumulators a0..a3 (Z4 is clobbered).
#define FMA4(tok, a0, a1, a2, a3) \
	VMOVUPS     (tok)(AX*4), Z4; \
	VFMADD231PS Z0, Z4, a0; \
	VFMADD231PS Z1, Z4, a1; \
	VFMADD231PS Z2, Z4, a2; \
	VFMADD231PS Z3, Z4, a3

#define FMA4T(tok, a0, a1, a2, a3) \
	VMOVUPS.Z   (tok)(AX*4), K1, Z4; \
	VFMADD231PS Z0, Z4, a0; \
	VFMADD231PS Z1, Z4, a1; \
	VFMADD231PS Z2, Z4, a2; \
	VFMADD231PS Z3, Z4, a3

// STORE4 reduces a0..a3 (rows 0..3 of one token) and stores them at
// (dst), 4(dst), 8(dst), 12(dst).
#define STORE4(dst, a0, y0, a1, y1, a2, y2, a3, y3) \
	HSUM16(a0, y0); \
	VMOVSS X0, 0(dst); \
	HSUM16(a1, y1); \
	VMOVSS X0, 4(dst); \
	HSUM16(a2, y2); \
	VMOVSS X0, 8(dst); \
	HSUM16(a3, y3); \
	VMOVSS X0, 12(dst)

// HALVES adds the 8-lane halves of accumulators a and b (HSUM16's first
// step for both): dst = (a lanes 0-7 + 8-15, b lanes 0-7 + 8-15). Clobbers
// Z8, Z9.
#define HALVES(a, b, dst) \
	VSHUFF32X4 $0x44, b, a, Z8; \
	VSHUFF32X4 $0xee, b, a, Z9; \
	VADDPS     Z9, Z8, dst

// QUARTERS adds the 4-lane quarters of the halves in x and y (HSUM16's
// second step): dst's 128-bit lanes are x's first half, x's second, y's
// first, y's second, each reduced to 4 lanes. Clobbers Z8, Z9.
#define QUARTERS(x, y, dst) \
	VSHUFF32X4 $0x88, y, x, Z8; \
	VSHUFF32X4 $0xdd, y, x, Z9; \
	VADDPS     Z9, Z8, dst

// ZERO16ACCS zeroes the 4x4 kernels' accumulators Z16..Z31.
#define ZERO16ACCS \
	VXORPS Z16, Z16, Z16; \
	VXORPS Z17, Z17, Z17; \
	VXORPS Z18, Z18, Z18; \
	VXORPS Z19, Z19, Z19; \
	VXORPS Z20, Z20, Z20; \
	VXORPS Z21, Z21, Z21; \
	VXORPS Z22, Z22, Z22; \
	VXORPS Z23, Z23, Z23; \
	VXORPS Z24, Z24, Z24; \
	VXORPS Z25, Z25, Z25; \
	VXORPS Z26, Z26, Z26; \
	VXORPS Z27, Z27, Z27; \
	VXORPS Z28, Z28, Z28; \
	VXORPS Z29, Z29, Z29; \
	VXORPS Z30, Z30, Z30; \
	VXORPS Z31, Z31, Z31

// REDUCE4X4 reduces the 4x4 kernels' 16 accumulators (Z16 + 4*j + i:
// row i, token j) together in HSUM16's order, each addition with the same
// two operands, on all accumulators at once: halves of 8 lanes (Z0..Z7 =
// rows 0..3, tokens (0, 1) and (2, 3)), quarters of 4 lanes (Z10..Z13 =
// rows 0..3, token j in 128-bit lane j), then (l0+l2, l1+l3) per row and
// token and their sum, so that Z0's 128-bit lane j holds token j's
// outputs of rows 0..3, stored at BX + j*R9. Clobbers Z0..Z15, BX.
#define REDUCE4X4 \
	HALVES(Z16, Z20, Z0); \
	HALVES(Z24, Z28, Z1); \
	HALVES(Z17, Z21, Z2); \
	HALVES(Z25, Z29, Z3); \
	HALVES(Z18, Z22, Z4); \
	HALVES(Z26, Z30, Z5); \
	HALVES(Z19, Z23, Z6); \
	HALVES(Z27, Z31, Z7); \
	QUARTERS(Z0, Z1, Z10); \
	QUARTERS(Z2, Z3, Z11); \
	QUARTERS(Z4, Z5, Z12); \
	QUARTERS(Z6, Z7, Z13); \
	VSHUFPS $0x44, Z11, Z10, Z8; \
	VSHUFPS $0xee, Z11, Z10, Z9; \
	VADDPS  Z9, Z8, Z14; \
	VSHUFPS $0x44, Z13, Z12, Z8; \
	VSHUFPS $0xee, Z13, Z12, Z9; \
	VADDPS  Z9, Z8, Z15; \
	VSHUFPS $0x88, Z15, Z14, Z8; \
	VSHUFPS $0xdd, Z15, Z14, Z9; \
	VADDPS  Z9, Z8, Z0; \
	VMOVUPS       X0, (BX); \
	VEXTRACTF32X4 $1, Z0, X1; \
	VMOVUPS       X1, (BX)(R9*1); \
	VEXTRACTF32X4 $2, Z0, X2; \
	VMOVUPS       X2, (BX)(R9*2); \
	LEAQ          (BX)(R9*2), BX; \
	VEXTRACTF32X4 $3, Z0, X3; \
	VMOVUPS       X3, (BX)(R9*1)

// func f32Dot4x4(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr)
// For the 4 float32 rows w + i*wstride and the 4 float32 tokens x + j*xstride
// (strides in bytes): out + j*ostride + 4*i = dot(row i, token j).
TEXT ·f32Dot4x4(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), R9
	MOVQ k+32(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (DI)(R9*1), R13
	LEAQ (DI)(R9*2), BX
	LEAQ (BX)(R9*1), DX
	ZERO16ACCS
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-16, R9
	CMPQ AX, R9
	JGE  f32g4tail
f32g4loop:
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS (R10)(AX*4), Z1
	VMOVUPS (R11)(AX*4), Z2
	VMOVUPS (R12)(AX*4), Z3
	FMA4(DI, Z16, Z17, Z18, Z19)
	FMA4(R13, Z20, Z21, Z22, Z23)
	FMA4(BX, Z24, Z25, Z26, Z27)
	FMA4(DX, Z28, Z29, Z30, Z31)
	ADDQ $16, AX
	CMPQ AX, R9
	JLT  f32g4loop
f32g4tail:
	CMPQ AX, CX
	JGE  f32g4done
	MOVQ  CX, R9
	SUBQ  AX, R9
	MOVL  $1, R14
	SHLXL R9, R14, R14
	SUBL  $1, R14
	KMOVW R14, K1
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMOVUPS.Z (R10)(AX*4), K1, Z1
	VMOVUPS.Z (R11)(AX*4), K1, Z2
	VMOVUPS.Z (R12)(AX*4), K1, Z3
	FMA4T(DI, Z16, Z17, Z18, Z19)
	FMA4T(R13, Z20, Z21, Z22, Z23)
	FMA4T(BX, Z24, Z25, Z26, Z27)
	FMA4T(DX, Z28, Z29, Z30, Z31)
f32g4done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	REDUCE4X4
	VZEROUPPER
	RET

// The Q8_0 kernels take activations as unsigned bytes xu = x+128 (x the
// Q8_0 quant, so xu = x XOR 0x80). They flip the weights to unsigned and
// correct by the activations' sums, which they share across rows: one
// VPDPBUSD per row, token and block (see Q8ROWY, and the pair kernels for
// batches). Q4_0 weights take the AVX2
// kernels of simd_avx2_amd64.s at both levels (quantDot4x1).

// QSETUP sets up q8Dot4x1 after its arguments are loaded
// (SI = w, R8 = wstride, DI = xu, DX = xd, CX = nb, BX = out): R10, R11,
// R12 = rows 1..3, Z11 = 0x80 bytes, accumulators Y0..Y3 = 0.
#define QSETUP \
	LEAQ (SI)(R8*1), R10; \
	LEAQ (SI)(R8*2), R11; \
	LEAQ (R11)(R8*1), R12; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z11; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// QLOADX2 loads xu and the scales of two activation blocks.
#define QLOADX2 \
	VMOVDQU64      (DI), Z4; \
	VBROADCASTSS   (DX), Y5; \
	VBROADCASTSS   4(DX), Y10; \
	VINSERTF32X8   $1, Y10, Z5, Z5

// QLOADX1 loads xu and the scale of one activation block.
#define QLOADX1 \
	VMOVDQU      (DI), Y4; \
	VBROADCASTSS (DX), Y5

// QSTORE reduces the accumulators Y0..Y3 into the 4 outputs at BX, stride
// R9 bytes (clobbers BX).
#define QSTORE \
	VMOVAPS Y1, Y13; \
	HSUM8(Y0, X0); \
	VMOVSS X0, (BX); \
	HSUM8(Y13, X13); \
	VMOVSS X0, (BX)(R9*1); \
	HSUM8(Y2, X2); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ   (BX)(R9*2), BX; \
	HSUM8(Y3, X3); \
	VMOVSS X0, (BX)(R9*1)

// Q8XBLK sets up the block at xoff(DI)/doff(DX) of q8Dot4x1: Y4 = signed x,
// Y13 = -128 * (sum of x) per lane of 4, and X6 = d_w*d_x (float32) for the
// 4 rows' blocks at off(SI), off(R10), off(R11), off(R12). Needs Y11 = 0x80
// bytes, Y12 = 0x01 bytes; clobbers AX, R9, R14, X5, Y14.
#define Q8XBLK(off, xoff, doff) \
	MOVWLZX      off(SI), AX; \
	MOVWLZX      off(R10), R9; \
	SHLL         $16, R9; \
	ORL          R9, AX; \
	MOVWLZX      off(R11), R9; \
	MOVWLZX      off(R12), R14; \
	SHLL         $16, R14; \
	ORL          R14, R9; \
	SHLQ         $32, R9; \
	ORQ          R9, AX; \
	VMOVQ        AX, X6; \
	VCVTPH2PS    X6, X6; \
	VBROADCASTSS doff(DX), X5; \
	VMULPS       X5, X6, X6; \
	VMOVDQU      xoff(DI), Y4; \
	VPXOR        Y11, Y4, Y4; \
	VPXOR        Y13, Y13, Y13; \
	VPDPBUSD     Y4, Y12, Y13; \
	VPSLLD       $7, Y13, Y13; \
	VPXOR        Y14, Y14, Y14; \
	VPSUBD       Y13, Y14, Y13

// Q8ROWY accumulates the Q8_0 block at off(row) into acc: per lane of 4,
// dot(w+128, x) - 128*sum(x) (one VPDPBUSD, u8 w^0x80 by s8 x) is exactly the
// signed dot of w and x; then acc = fma(d_w*d_x, float(lane), acc), the
// scale taken from lane idx of X6. Clobbers Y7, Y8, Y9.
#define Q8ROWY(row, off, idx, acc) \
	VPERMPS     Y6, idx, Y7; \
	VPXOR       off+2(row), Y11, Y8; \
	VMOVDQA     Y13, Y9; \
	VPDPBUSD    Y4, Y8, Y9; \
	VCVTDQ2PS   Y9, Y9; \
	VFMADD231PS Y9, Y7, acc

#define Q8BLK4(off, xoff, doff) \
	Q8XBLK(off, xoff, doff); \
	Q8ROWY(SI, off, Y20, Y0); \
	Q8ROWY(R10, off, Y21, Y1); \
	Q8ROWY(R11, off, Y22, Y2); \
	Q8ROWY(R12, off, Y23, Y3)

// func q8Dot4x1(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ8(row i, x) for the 4 Q8_0 rows w + i*wstride (strides in bytes), with
// activations xq (nb*32 bytes, x+128) and their block scales xd (nb float32).
TEXT ·q8Dot4x1(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	MOVQ out+40(FP), BX
	QSETUP
	MOVL $0x01010101, AX
	VPBROADCASTD AX, Y12
	VPXORD Y20, Y20, Y20
	MOVL $1, AX
	VPBROADCASTD AX, Y21
	MOVL $2, AX
	VPBROADCASTD AX, Y22
	MOVL $3, AX
	VPBROADCASTD AX, Y23
	CMPQ CX, $2
	JLT  q8d4one
q8d4loop:
	Q8BLK4(0, 0, 0)
	Q8BLK4(34, 32, 4)
	ADDQ $68, SI
	ADDQ $68, R10
	ADDQ $68, R11
	ADDQ $68, R12
	ADDQ $64, DI
	ADDQ $8, DX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q8d4loop
q8d4one:
	TESTQ CX, CX
	JEQ   q8d4done
	Q8BLK4(0, 0, 0)
q8d4done:
	MOVQ ostride+48(FP), R9
	QSTORE
	VZEROUPPER
	RET

// func cvtF16(dst *float32, src unsafe.Pointer, n int)
// dst[i] = f16 src[i] as float32 for i < n rounded down to a multiple of 16.
TEXT ·cvtF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  cvtf16done
cvtf16loop:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  cvtf16loop
cvtf16done:
	VZEROUPPER
	RET

// func cvtBF16(dst *float32, src unsafe.Pointer, n int)
// cvtF16 for bf16 values.
TEXT ·cvtBF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JEQ  cvtbf16done
cvtbf16loop:
	VPMOVZXWD (SI), Z0
	VPSLLD    $16, Z0, Z0
	VMOVUPS   Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  cvtbf16loop
cvtbf16done:
	VZEROUPPER
	RET

// func q8PairToken(xu *byte, xd *float32, nb int, dst *byte)
// Writes one token's nb blocks of Q8_0 activations (quants stored as x+128
// at xu, 32 bytes per block; scales at xd) into the pair kernels' layout:
// block k at dst + k*192 gets the signed quants (32 bytes), at +64 the
// corrections -128*(sum of each lane of 4 quants) as int32, at +128 the
// scale over 8 lanes. dst is the pair's first block plus 32 for the pair's
// second token.
TEXT ·q8PairToken(SB), NOSPLIT, $0-32
	MOVQ xu+0(FP), SI
	MOVQ xd+8(FP), DX
	MOVQ nb+16(FP), CX
	MOVQ dst+24(FP), DI
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y14
	MOVL $0x01010101, AX
	VPBROADCASTD AX, Y13
	VPXOR Y15, Y15, Y15
	TESTQ CX, CX
	JEQ   q8ptdone
q8ptloop:
	VPXOR        (SI), Y14, Y0
	VMOVDQU      Y0, (DI)
	VPXOR        Y1, Y1, Y1
	VPDPBUSD     Y0, Y13, Y1
	VPSLLD       $7, Y1, Y1
	VPSUBD       Y1, Y15, Y2
	VMOVDQU      Y2, 64(DI)
	VBROADCASTSS (DX), Y3
	VMOVUPS      Y3, 128(DI)
	ADDQ $32, SI
	ADDQ $4, DX
	ADDQ $192, DI
	DECQ CX
	JNZ  q8ptloop
q8ptdone:
	VZEROUPPER
	RET

// The pair kernels below take Q8_0 activations two tokens to a 512-bit
// register, laid out by q8PairLayout: for the pair of tokens (a, b) and
// block k, 192 bytes at k*192: the signed quants of a then of b (64), the
// corrections -128*(sum of each lane of 4 quants) of a then b as int32
// (64), and the scales d_a x8 then d_b x8 as float32 (64). Against 4 rows
// of Q8_0 weights flipped to unsigned and broadcast to both halves, one
// VPDPBUSD gives both tokens' 8 lane sums, so each (row, pair, block) is
// one VPDPBUSD, one conversion, one scale product d_w*d_x and one fused
// multiply-add: dotQ8's lane arithmetic for two tokens at once.

// ZPAIR accumulates one block of one pair (quants at xq, corrections at
// xc, scales at xs) against the weights in Z0..Z3 and their row scales in
// Z8, Z10, Z12, Z15 into a0..a3. The pair's quants and corrections are
// loaded once for the 4 rows (Z14, Z13): the memory operands they replace
// had the kernel waiting on loads. Clobbers Z4..Z7, Z9, Z11, Z13, Z14.
#define ZPAIR(xq, xc, xs, a0, a1, a2, a3) \
	VMOVUPS          xs, Z4; \
	VMOVDQU32        xc, Z13; \
	VMOVDQU32        xq, Z14; \
	VMOVDQA32        Z13, Z5; \
	VPDPBUSD         Z14, Z0, Z5; \
	VMOVDQA32        Z13, Z7; \
	VPDPBUSD         Z14, Z1, Z7; \
	VMOVDQA32        Z13, Z9; \
	VPDPBUSD         Z14, Z2, Z9; \
	VMOVDQA32        Z13, Z11; \
	VPDPBUSD         Z14, Z3, Z11; \
	VCVTDQ2PS        Z5, Z5; \
	VCVTDQ2PS        Z7, Z7; \
	VCVTDQ2PS        Z9, Z9; \
	VCVTDQ2PS        Z11, Z11; \
	VMULPS           Z8, Z4, Z6; \
	VFMADD231PS      Z6, Z5, a0; \
	VMULPS           Z10, Z4, Z6; \
	VFMADD231PS      Z6, Z7, a1; \
	VMULPS           Z12, Z4, Z6; \
	VFMADD231PS      Z6, Z9, a2; \
	VMULPS           Z15, Z4, Z6; \
	VFMADD231PS      Z6, Z11, a3

// ZWEIGHTS loads the next block of the 4 rows at SI, R10, R11, R12 into
// Z0..Z3 as unsigned bytes (w XOR 0x80, both halves) and their fp16 scales,
// converted to float32 (exactly, as f16tab), broadcast into Z8, Z10, Z12,
// Z15, and prefetches the same block of the next 4 rows (R8 = wstride): a
// worker's rows are one stream that the hardware prefetchers alone do not
// keep far enough ahead of kernels this slow to consume it.
#define ZWEIGHTS \
	PREFETCHT0      (SI)(R8*4); \
	PREFETCHT0      (R10)(R8*4); \
	PREFETCHT0      (R11)(R8*4); \
	PREFETCHT0      (R12)(R8*4); \
	VBROADCASTI64X4 2(SI), Z0; \
	VPXORD.BCST     q8Flip<>(SB), Z0, Z0; \
	VBROADCASTI64X4 2(R10), Z1; \
	VPXORD.BCST     q8Flip<>(SB), Z1, Z1; \
	VBROADCASTI64X4 2(R11), Z2; \
	VPXORD.BCST     q8Flip<>(SB), Z2, Z2; \
	VBROADCASTI64X4 2(R12), Z3; \
	VPXORD.BCST     q8Flip<>(SB), Z3, Z3; \
	VPBROADCASTW    0(SI), Y8; \
	VCVTPH2PS       Y8, Z8; \
	VPBROADCASTW    0(R10), Y10; \
	VCVTPH2PS       Y10, Z10; \
	VPBROADCASTW    0(R11), Y12; \
	VCVTPH2PS       Y12, Z12; \
	VPBROADCASTW    0(R12), Y15; \
	VCVTPH2PS       Y15, Z15

DATA q8Flip<>+0(SB)/4, $0x80808080
GLOBL q8Flip<>(SB), RODATA|NOPTR, $4

// ZSTORE reduces pair accumulators a0..a3 (rows 0..3) into the outputs of
// its first token at (BX) and its second at (BX)(R9*1), 4 floats each.
// Clobbers X0, X1, Y4, X4.
#define ZSTORE(a0, y0, x0, a1, y1, x1, a2, y2, x2, a3, y3, x3) \
	HSUM8(y0, x0); VMOVSS X0, 0(BX); \
	HSUM8(y1, x1); VMOVSS X0, 4(BX); \
	HSUM8(y2, x2); VMOVSS X0, 8(BX); \
	HSUM8(y3, x3); VMOVSS X0, 12(BX); \
	VEXTRACTF32X8 $1, a0, Y4; HSUM8(Y4, X4); VMOVSS X0, 0(BX)(R9*1); \
	VEXTRACTF32X8 $1, a1, Y4; HSUM8(Y4, X4); VMOVSS X0, 4(BX)(R9*1); \
	VEXTRACTF32X8 $1, a2, Y4; HSUM8(Y4, X4); VMOVSS X0, 8(BX)(R9*1); \
	VEXTRACTF32X8 $1, a3, Y4; HSUM8(Y4, X4); VMOVSS X0, 12(BX)(R9*1)

// ZSETUP loads the pair kernels' arguments (their signature is
// q8Gemm4x8's): SI = w, R8 = wstride, DI = xp, R9 = pstride, CX = nb, and
// R10..R12 = weight rows 1..3.
#define ZSETUP \
	MOVQ w+0(FP), SI; \
	MOVQ wstride+8(FP), R8; \
	MOVQ xp+16(FP), DI; \
	MOVQ pstride+24(FP), R9; \
	MOVQ nb+32(FP), CX; \
	LEAQ (SI)(R8*1), R10; \
	LEAQ (SI)(R8*2), R11; \
	LEAQ (R11)(R8*1), R12

// ZNEXT moves the 4 weight rows and the first pair's activations (DI) on
// to the next block.
#define ZNEXT \
	ADDQ $34, SI; \
	ADDQ $34, R10; \
	ADDQ $34, R11; \
	ADDQ $34, R12; \
	ADDQ $192, DI

// ZOUT loads the outputs' base and token stride: BX = out, R9 = ostride.
#define ZOUT \
	MOVQ out+40(FP), BX; \
	MOVQ ostride+48(FP), R9

// Z48ZERO clears the 4x8 tiles' accumulators Z16..Z31 (pair p, row i in
// Z16 + 4p + i).
#define Z48ZERO \
	VPXORD Z16, Z16, Z16; VPXORD Z17, Z17, Z17; VPXORD Z18, Z18, Z18; VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; VPXORD Z21, Z21, Z21; VPXORD Z22, Z22, Z22; VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; VPXORD Z25, Z25, Z25; VPXORD Z26, Z26, Z26; VPXORD Z27, Z27, Z27; \
	VPXORD Z28, Z28, Z28; VPXORD Z29, Z29, Z29; VPXORD Z30, Z30, Z30; VPXORD Z31, Z31, Z31

// Z48PAIRS accumulates one block of the 4 pairs at DI, DI+R9, DI+2*R9 and
// R13 against the 4 rows' weights (ZWEIGHTS or Q4WEIGHTS).
#define Z48PAIRS \
	ZPAIR((DI), 64(DI), 128(DI), Z16, Z17, Z18, Z19); \
	ZPAIR((DI)(R9*1), 64(DI)(R9*1), 128(DI)(R9*1), Z20, Z21, Z22, Z23); \
	ZPAIR((DI)(R9*2), 64(DI)(R9*2), 128(DI)(R9*2), Z24, Z25, Z26, Z27); \
	ZPAIR((R13), 64(R13), 128(R13), Z28, Z29, Z30, Z31)

// Z48STORE writes the 4x8 tile's outputs (ZOUT, then ZSTORE per pair).
#define Z48STORE \
	ZOUT; \
	ZSTORE(Z16, Y16, X16, Z17, Y17, X17, Z18, Y18, X18, Z19, Y19, X19); \
	LEAQ (BX)(R9*2), BX; \
	ZSTORE(Z20, Y20, X20, Z21, Y21, X21, Z22, Y22, X22, Z23, Y23, X23); \
	LEAQ (BX)(R9*2), BX; \
	ZSTORE(Z24, Y24, X24, Z25, Y25, X25, Z26, Y26, X26, Z27, Y27, X27); \
	LEAQ (BX)(R9*2), BX; \
	ZSTORE(Z28, Y28, X28, Z29, Y29, X29, Z30, Y30, X30, Z31, Y31, X31)

// func q8Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)
// For the 4 Q8_0 rows w + i*wstride and the 8 tokens of 4 pairs laid out by
// q8PairLayout at xp + p*pstride: out + j*ostride + 4*i = dotQ8(row i,
// token j).
TEXT ·q8Gemm4x8(SB), NOSPLIT, $0-56
	ZSETUP
	LEAQ (DI)(R9*2), R13
	ADDQ R9, R13
	Z48ZERO
	TESTQ CX, CX
	JEQ   z48done
z48loop:
	ZWEIGHTS
	Z48PAIRS
	ZNEXT
	ADDQ $192, R13
	DECQ CX
	JNZ  z48loop
z48done:
	Z48STORE
	VZEROUPPER
	RET

// Q4ROW loads the next Q4_0 block of the row at r into zw (both halves)
// as the pair kernels take weights: the 32 values w-8 in element order
// plus 128, as unsigned bytes (nibble + 120), and its scale broadcast into
// zs as float32. The 16 quant bytes go to all four 128-bit lanes; lanes 1
// and 3 are shifted right by 4 (q4PairShift), so that after the mask each
// 256-bit half holds the low nibbles (elements 0..15) then the high ones
// (16..31).
#define Q4ROW(r, zw, ys, zs) \
	VBROADCASTI32X4 2(r), zw; \
	VPSRLVW         q4PairShift<>(SB), zw, zw; \
	VPANDD.BCST     q4Low<>(SB), zw, zw; \
	VPADDB          q4Plus120<>(SB), zw, zw; \
	VPBROADCASTW    0(r), ys; \
	VCVTPH2PS       ys, zs

// Q4WEIGHTS is ZWEIGHTS for Q4_0 rows (at SI, R10, R11, R12; prefetching
// the next 4 rows, R8 = wstride): Z0..Z3 and their scales Z8, Z10, Z12,
// Z15.
#define Q4WEIGHTS \
	PREFETCHT0 (SI)(R8*4); \
	PREFETCHT0 (R10)(R8*4); \
	PREFETCHT0 (R11)(R8*4); \
	PREFETCHT0 (R12)(R8*4); \
	Q4ROW(SI, Z0, Y8, Z8); \
	Q4ROW(R10, Z1, Y10, Z10); \
	Q4ROW(R11, Z2, Y12, Z12); \
	Q4ROW(R12, Z3, Y15, Z15)

DATA q4PairShift<>+0(SB)/8, $0
DATA q4PairShift<>+8(SB)/8, $0
DATA q4PairShift<>+16(SB)/8, $0x0004000400040004
DATA q4PairShift<>+24(SB)/8, $0x0004000400040004
DATA q4PairShift<>+32(SB)/8, $0
DATA q4PairShift<>+40(SB)/8, $0
DATA q4PairShift<>+48(SB)/8, $0x0004000400040004
DATA q4PairShift<>+56(SB)/8, $0x0004000400040004
GLOBL q4PairShift<>(SB), RODATA|NOPTR, $64

DATA q4Low<>+0(SB)/4, $0x0f0f0f0f
GLOBL q4Low<>(SB), RODATA|NOPTR, $4

DATA q4Plus120<>+0(SB)/8, $0x7878787878787878
DATA q4Plus120<>+8(SB)/8, $0x7878787878787878
DATA q4Plus120<>+16(SB)/8, $0x7878787878787878
DATA q4Plus120<>+24(SB)/8, $0x7878787878787878
DATA q4Plus120<>+32(SB)/8, $0x7878787878787878
DATA q4Plus120<>+40(SB)/8, $0x7878787878787878
DATA q4Plus120<>+48(SB)/8, $0x7878787878787878
DATA q4Plus120<>+56(SB)/8, $0x7878787878787878
GLOBL q4Plus120<>(SB), RODATA|NOPTR, $64

// Q4NEXT is ZNEXT for Q4_0 rows (18-byte blocks, scales read from them).
#define Q4NEXT \
	ADDQ $18, SI; \
	ADDQ $18, R10; \
	ADDQ $18, R11; \
	ADDQ $18, R12; \
	ADDQ $192, DI

// func q4Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)
// q8Gemm4x8 for the 4 Q4_0 rows w + i*wstride: out + j*ostride + 4*i =
// dotQ4(row i, token j), the lane arithmetic of dotQ4 (dotQ8's) for 8
// tokens at once.
TEXT ·q4Gemm4x8(SB), NOSPLIT, $0-56
	ZSETUP
	LEAQ (DI)(R9*2), R13
	ADDQ R9, R13
	Z48ZERO
	TESTQ CX, CX
	JEQ   q448done
q448loop:
	Q4WEIGHTS
	Z48PAIRS
	Q4NEXT
	ADDQ $192, R13
	DECQ CX
	JNZ  q448loop
q448done:
	Z48STORE
	VZEROUPPER
	RET

// func q8Gemm4x4(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)
// q8Gemm4x8 for two pairs of tokens: each weight block loaded once for 4
// tokens, where two q8Gemm4x2 calls load it twice.
TEXT ·q8Gemm4x4(SB), NOSPLIT, $0-56
	ZSETUP
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JEQ   z44done
z44loop:
	ZWEIGHTS
	ZPAIR((DI), 64(DI), 128(DI), Z16, Z17, Z18, Z19)
	ZPAIR((DI)(R9*1), 64(DI)(R9*1), 128(DI)(R9*1), Z20, Z21, Z22, Z23)
	ZNEXT
	DECQ CX
	JNZ  z44loop
z44done:
	ZOUT
	ZSTORE(Z16, Y16, X16, Z17, Y17, X17, Z18, Y18, X18, Z19, Y19, X19)
	LEAQ (BX)(R9*2), BX
	ZSTORE(Z20, Y20, X20, Z21, Y21, X21, Z22, Y22, X22, Z23, Y23, X23)
	VZEROUPPER
	RET

// func q8Gemm4x2(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)
// q8Gemm4x8 for one pair of tokens (pstride unused).
TEXT ·q8Gemm4x2(SB), NOSPLIT, $0-56
	ZSETUP
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	TESTQ CX, CX
	JEQ   z42done
z42loop:
	ZWEIGHTS
	ZPAIR((DI), 64(DI), 128(DI), Z16, Z17, Z18, Z19)
	ZNEXT
	DECQ CX
	JNZ  z42loop
z42done:
	ZOUT
	ZSTORE(Z16, Y16, X16, Z17, Y17, X17, Z18, Y18, X18, Z19, Y19, X19)
	VZEROUPPER
	RET

// func ropeNeox16(head, cos, sin *float32, half, n16 int)
// For i < 16*n16: x0 = head[i], x1 = head[i+half];
// head[i] = fma(x0, cos[i], -(x1*sin[i])), head[i+half] = fma(x0, sin[i],
// x1*cos[i]), the operations of ropeRow's NEOX rotation.
TEXT ·ropeNeox16(SB), NOSPLIT, $0-40
	MOVQ head+0(FP), DI
	MOVQ cos+8(FP), SI
	MOVQ sin+16(FP), DX
	MOVQ half+24(FP), AX
	MOVQ n16+32(FP), CX
	LEAQ (DI)(AX*4), BX
	TESTQ CX, CX
	JEQ   ropedone
ropeloop:
	VMOVUPS (DI), Z0
	VMOVUPS (BX), Z1
	VMOVUPS (SI), Z2
	VMOVUPS (DX), Z3
	VMULPS  Z3, Z1, Z4
	VFMSUB231PS Z2, Z0, Z4
	VMULPS  Z2, Z1, Z5
	VFMADD231PS Z3, Z0, Z5
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, (BX)
	ADDQ $64, DI
	ADDQ $64, BX
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  ropeloop
ropedone:
	VZEROUPPER
	RET

// func geluF16V(dst, src *float32, n int, table *float32)
// dst[i] = geluF16(src[i]) for i < n rounded down to a multiple of 16: the
// table entry at src[i]'s fp16 bits (VCVTPS2PH, ties to even, as
// tensor.F32ToF16), 0 where src[i] <= -10, src[i] where src[i] >= 10.
TEXT ·geluF16V(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ table+24(FP), DX
	MOVL $0xc1200000, AX // -10
	VPBROADCASTD AX, Z30
	MOVL $0x41200000, AX // 10
	VPBROADCASTD AX, Z31
	SHRQ $4, CX
	JZ   gelu5done
gelu5loop:
	VMOVUPS    (SI), Z0
	VCVTPS2PH  $0, Z0, Y1
	VPMOVZXWD  Y1, Z1
	KXNORW     K1, K1, K1
	VPGATHERDD (DX)(Z1*4), K1, Z2
	VCMPPS     $2, Z30, Z0, K2  // x <= -10
	VCMPPS     $13, Z31, Z0, K3 // x >= 10
	VXORPS     Z2, Z2, K2, Z2
	VMOVAPS    Z0, K3, Z2
	VMOVUPS    Z2, (DI)
	ADDQ       $64, SI
	ADDQ       $64, DI
	DECQ       CX
	JNZ        gelu5loop
gelu5done:
	VZEROUPPER
	RET

// FMA4P accumulates one 16-lane chunk of 4 rows (Z0..Z3) against the
// token chunk at off(R14) into accumulators a0..a3 (Z4 is clobbered).
#define FMA4P(off, a0, a1, a2, a3) \
	VMOVUPS     off(R14), Z4; \
	VFMADD231PS Z0, Z4, a0; \
	VFMADD231PS Z1, Z4, a1; \
	VFMADD231PS Z2, Z4, a2; \
	VFMADD231PS Z3, Z4, a3

// LOADACCS16 loads the 16 accumulators Z16..Z31 from 16 consecutive zmm
// slots at base; STOREACCS16 stores them there.
#define LOADACCS16(base) \
	VMOVUPS 0(base), Z16; \
	VMOVUPS 64(base), Z17; \
	VMOVUPS 128(base), Z18; \
	VMOVUPS 192(base), Z19; \
	VMOVUPS 256(base), Z20; \
	VMOVUPS 320(base), Z21; \
	VMOVUPS 384(base), Z22; \
	VMOVUPS 448(base), Z23; \
	VMOVUPS 512(base), Z24; \
	VMOVUPS 576(base), Z25; \
	VMOVUPS 640(base), Z26; \
	VMOVUPS 704(base), Z27; \
	VMOVUPS 768(base), Z28; \
	VMOVUPS 832(base), Z29; \
	VMOVUPS 896(base), Z30; \
	VMOVUPS 960(base), Z31

#define STOREACCS16(base) \
	VMOVUPS Z16, 0(base); \
	VMOVUPS Z17, 64(base); \
	VMOVUPS Z18, 128(base); \
	VMOVUPS Z19, 192(base); \
	VMOVUPS Z20, 256(base); \
	VMOVUPS Z21, 320(base); \
	VMOVUPS Z22, 384(base); \
	VMOVUPS Z23, 448(base); \
	VMOVUPS Z24, 512(base); \
	VMOVUPS Z25, 576(base); \
	VMOVUPS Z26, 640(base); \
	VMOVUPS Z27, 704(base); \
	VMOVUPS Z28, 768(base); \
	VMOVUPS Z29, 832(base); \
	VMOVUPS Z30, 896(base); \
	VMOVUPS Z31, 960(base)

// func f32Gemm4x4P(w unsafe.Pointer, x unsafe.Pointer, n16 int, quads int, xquad uintptr, acc unsafe.Pointer, flags int, out unsafe.Pointer, ostride uintptr)
// For 4 rows packed at w as [n16][4 rows][16 lanes] float32 and quads
// token quads packed at x + q*xquad (bytes) as [n16][4 tokens][16 lanes]
// (the last chunk of a row zero-padded), runs n16 chunks of f32Dot4x4's
// fused multiply-adds on the 16 accumulators of each token quad q: they
// start at zero (flags&1) or from acc + q*1024 (bytes, [16 zmm], Z16 +
// 4*j + i for row i, token j), and end reduced, out + (4*q+j)*ostride +
// 4*i = dot(row i, token j) (flags&2), or stored back to acc + q*1024. A
// row split into such calls along k (each continuing the last's
// accumulators) gives f32Dot4x4's bits.
TEXT ·f32Gemm4x4P(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n16+16(FP), CX
	MOVQ quads+24(FP), DX
	MOVQ xquad+32(FP), R11
	MOVQ acc+40(FP), R12
	MOVQ flags+48(FP), R13
	MOVQ out+56(FP), R10
	MOVQ ostride+64(FP), R9
f32p4quad:
	TESTQ $1, R13
	JZ    f32p4load
	ZERO16ACCS
	JMP   f32p4start
f32p4load:
	LOADACCS16(R12)
f32p4start:
	MOVQ SI, R8
	MOVQ DI, R14
	MOVQ CX, AX
f32p4loop:
	VMOVUPS 0(R8), Z0
	VMOVUPS 64(R8), Z1
	VMOVUPS 128(R8), Z2
	VMOVUPS 192(R8), Z3
	FMA4P(0, Z16, Z17, Z18, Z19)
	FMA4P(64, Z20, Z21, Z22, Z23)
	FMA4P(128, Z24, Z25, Z26, Z27)
	FMA4P(192, Z28, Z29, Z30, Z31)
	ADDQ $256, R8
	ADDQ $256, R14
	DECQ AX
	JNZ  f32p4loop
	TESTQ $2, R13
	JZ    f32p4keep
	MOVQ R10, BX
	REDUCE4X4
	JMP  f32p4next
f32p4keep:
	STOREACCS16(R12)
f32p4next:
	LEAQ (R10)(R9*4), R10
	ADDQ R11, DI
	ADDQ $1024, R12
	DECQ DX
	JNZ  f32p4quad
	VZEROUPPER
	RET

// PACKNEXT stores one packed chunk (Z0..Z3: 16 values of rows 0..3) at DI
// and steps pack4x16 to the next: AX += 16 values, DI += 256 bytes, CX
// counts down (flags set for the loop's JNZ).
#define PACKNEXT \
	VMOVUPS Z0, 0(DI); \
	VMOVUPS Z1, 64(DI); \
	VMOVUPS Z2, 128(DI); \
	VMOVUPS Z3, 192(DI); \
	ADDQ $16, AX; \
	ADDQ $256, DI; \
	DECQ CX

// func pack4x16(dst *float32, src unsafe.Pointer, stride uintptr, n16 int, kind int)
// Packs the first n16*16 values of the 4 rows src + i*stride (bytes) as
// [n16][4 rows][16] float32 at dst (f32Gemm4x4P's layout), converting them
// exactly from kind: 0 float32, 1 f16, 2 bf16.
TEXT ·pack4x16(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), R8
	MOVQ n16+24(FP), CX
	MOVQ kind+32(FP), DX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	XORQ AX, AX
	CMPQ DX, $1
	JEQ  pack4f16
	JGT  pack4bf16
pack4f32:
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS (R10)(AX*4), Z1
	VMOVUPS (R11)(AX*4), Z2
	VMOVUPS (R12)(AX*4), Z3
	PACKNEXT
	JNZ  pack4f32
	VZEROUPPER
	RET
pack4f16:
	VCVTPH2PS (SI)(AX*2), Z0
	VCVTPH2PS (R10)(AX*2), Z1
	VCVTPH2PS (R11)(AX*2), Z2
	VCVTPH2PS (R12)(AX*2), Z3
	PACKNEXT
	JNZ  pack4f16
	VZEROUPPER
	RET
pack4bf16:
	VPMOVZXWD (SI)(AX*2), Z0
	VPMOVZXWD (R10)(AX*2), Z1
	VPMOVZXWD (R11)(AX*2), Z2
	VPMOVZXWD (R12)(AX*2), Z3
	VPSLLD    $16, Z0, Z0
	VPSLLD    $16, Z1, Z1
	VPSLLD    $16, Z2, Z2
	VPSLLD    $16, Z3, Z3
	PACKNEXT
	JNZ  pack4bf16
	VZEROUPPER
	RET

// SSQLD squares the 16 values at m into z.
#define SSQLD(m, z) VMOVUPS m, z; VMULPS z, z, z

// SSQROWS squares 16 values of 8 groups into Z0..Z7: groups 0..3 at ra +
// 0..3 strides (DX = stride, R8 = 3 strides), 4..7 at rb.
#define SSQROWS(ra, rb) \
	SSQLD((ra), Z0); \
	SSQLD((ra)(DX*1), Z1); \
	SSQLD((ra)(DX*2), Z2); \
	SSQLD((ra)(R8*1), Z3); \
	SSQLD((rb), Z4); \
	SSQLD((rb)(DX*1), Z5); \
	SSQLD((rb)(DX*2), Z6); \
	SSQLD((rb)(R8*1), Z7)

// SSQLO adds to acc the float64 of the 8 float32 in src (a Y register),
// SSQHI those of the upper half of src (a Z register), via tmp.
#define SSQLO(src, tmp, acc) VCVTPS2PD src, tmp; VADDPD tmp, acc, acc
#define SSQHI(src, ytmp, tmp, acc) VEXTRACTF32X8 $1, src, ytmp; VCVTPS2PD ytmp, tmp; VADDPD tmp, acc, acc

// SSQ8(acc) adds to float64 lane g of acc the squares in Z(g), g < 8 (16
// columns of 8 groups), column by column in order: Z0..Z7 are transposed
// into Z8..Z15 (two columns each: Z8+c holds columns c and c+4, Z12+c
// columns c+8 and c+12, groups 0..7 in the 8 lanes of each half).
#define SSQ8(acc) \
	VUNPCKLPS  Z1, Z0, Z8; \
	VUNPCKHPS  Z1, Z0, Z9; \
	VUNPCKLPS  Z3, Z2, Z10; \
	VUNPCKHPS  Z3, Z2, Z11; \
	VUNPCKLPS  Z5, Z4, Z12; \
	VUNPCKHPS  Z5, Z4, Z13; \
	VUNPCKLPS  Z7, Z6, Z14; \
	VUNPCKHPS  Z7, Z6, Z15; \
	VSHUFPS    $0x44, Z10, Z8, Z0; \
	VSHUFPS    $0xEE, Z10, Z8, Z1; \
	VSHUFPS    $0x44, Z11, Z9, Z2; \
	VSHUFPS    $0xEE, Z11, Z9, Z3; \
	VSHUFPS    $0x44, Z14, Z12, Z4; \
	VSHUFPS    $0xEE, Z14, Z12, Z5; \
	VSHUFPS    $0x44, Z15, Z13, Z6; \
	VSHUFPS    $0xEE, Z15, Z13, Z7; \
	VSHUFF32X4 $0x44, Z4, Z0, Z16; \
	VSHUFF32X4 $0xEE, Z4, Z0, Z17; \
	VSHUFF32X4 $0x44, Z5, Z1, Z18; \
	VSHUFF32X4 $0xEE, Z5, Z1, Z19; \
	VSHUFF32X4 $0x44, Z6, Z2, Z20; \
	VSHUFF32X4 $0xEE, Z6, Z2, Z21; \
	VSHUFF32X4 $0x44, Z7, Z3, Z22; \
	VSHUFF32X4 $0xEE, Z7, Z3, Z23; \
	VSHUFF32X4 $0xD8, Z16, Z16, Z8; \
	VSHUFF32X4 $0xD8, Z17, Z17, Z12; \
	VSHUFF32X4 $0xD8, Z18, Z18, Z9; \
	VSHUFF32X4 $0xD8, Z19, Z19, Z13; \
	VSHUFF32X4 $0xD8, Z20, Z20, Z10; \
	VSHUFF32X4 $0xD8, Z21, Z21, Z14; \
	VSHUFF32X4 $0xD8, Z22, Z22, Z11; \
	VSHUFF32X4 $0xD8, Z23, Z23, Z15; \
	SSQLO(Y8, Z16, acc); \
	SSQLO(Y9, Z17, acc); \
	SSQLO(Y10, Z18, acc); \
	SSQLO(Y11, Z19, acc); \
	SSQHI(Z8, Y20, Z20, acc); \
	SSQHI(Z9, Y21, Z21, acc); \
	SSQHI(Z10, Y22, Z22, acc); \
	SSQHI(Z11, Y23, Z23, acc); \
	SSQLO(Y12, Z16, acc); \
	SSQLO(Y13, Z17, acc); \
	SSQLO(Y14, Z18, acc); \
	SSQLO(Y15, Z19, acc); \
	SSQHI(Z12, Y20, Z20, acc); \
	SSQHI(Z13, Y21, Z21, acc); \
	SSQHI(Z14, Y22, Z22, acc); \
	SSQHI(Z15, Y23, Z23, acc)

// func sumSquaresGroups(x *float32, stride uintptr, n16, groups int, out *float64)
// out[g] = the float64 sum of float64(v*v) over the 16*n16 values v of
// group g at x + g*stride bytes, added in order, for g < groups (8 or 16):
// sumSquares of 8 or 16 groups at once, group g's add chain in float64
// lane g%8 of Z30 (g < 8) or Z31, the squares of each 16 values of 8
// groups transposed in registers (SSQ8).
TEXT ·sumSquaresGroups(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), R9
	MOVQ stride+8(FP), DX
	MOVQ n16+16(FP), CX
	MOVQ groups+24(FP), AX
	MOVQ out+32(FP), BX
	VXORPD Z30, Z30, Z30
	VXORPD Z31, Z31, Z31
	TESTQ  CX, CX
	JEQ    ssgdone
	LEAQ (DX)(DX*2), R8
	LEAQ (R9)(DX*4), R10
	LEAQ (R10)(DX*4), R11
	LEAQ (R11)(DX*4), R12
ssgloop:
	SSQROWS(R9, R10)
	SSQ8(Z30)
	CMPQ AX, $16
	JNE  ssgnext
	SSQROWS(R11, R12)
	SSQ8(Z31)
ssgnext:
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R12
	DECQ CX
	JNZ  ssgloop
ssgdone:
	VMOVUPD Z30, (BX)
	CMPQ    AX, $16
	JNE     ssgret
	VMOVUPD Z31, 64(BX)
ssgret:
	VZEROUPPER
	RET

// func addV(out, x, y *float32, n int)
// out[i] = x[i] + y[i] for i < n, 64 values a loop, the last partial 16
// under a mask.
TEXT ·addV(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), BX
	MOVQ n+24(FP), CX
	XORQ AX, AX
	MOVQ CX, R9
	ANDQ $-64, R9
addv64:
	CMPQ    AX, R9
	JGE     addv16
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS 64(SI)(AX*4), Z1
	VMOVUPS 128(SI)(AX*4), Z2
	VMOVUPS 192(SI)(AX*4), Z3
	VADDPS  (BX)(AX*4), Z0, Z0
	VADDPS  64(BX)(AX*4), Z1, Z1
	VADDPS  128(BX)(AX*4), Z2, Z2
	VADDPS  192(BX)(AX*4), Z3, Z3
	VMOVUPS Z0, (DI)(AX*4)
	VMOVUPS Z1, 64(DI)(AX*4)
	VMOVUPS Z2, 128(DI)(AX*4)
	VMOVUPS Z3, 192(DI)(AX*4)
	ADDQ    $64, AX
	JMP     addv64
addv16:
	MOVQ CX, R9
	ANDQ $-16, R9
addv16loop:
	CMPQ    AX, R9
	JGE     addvtail
	VMOVUPS (SI)(AX*4), Z0
	VADDPS  (BX)(AX*4), Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     addv16loop
addvtail:
	CMPQ AX, CX
	JGE  addvdone
	TAILMASK(R8)
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMOVUPS.Z (BX)(AX*4), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)(AX*4)
addvdone:
	VZEROUPPER
	RET
