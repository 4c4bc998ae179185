#include "textflag.h"
#include "lanes_amd64.h"

// AVX2 kernels (with FMA, F16C and BMI2) for Q2_K, Q3_K and IQ4_XS weights
// against Q8_K activations, bit for bit the references dotQ2K, dotQ3K and
// dotIQ4XS, as the AVX-512 kernels of kquant2_amd64.s are. A
// super-block's weights are unpacked one 32-element chunk per 256-bit
// register, multiplied with the signed activations by VPMADDUBSW (int16
// pair sums, exact: no pair can saturate) and weighted by the sub-block
// scales, as words picked by VPSHUFB, with VPMADDWD; each int32 lane then
// holds the 4 products of the chunk at 4l..4l+3, and adding the chunks'
// lanes gives exactly kLanes. The float work is the reference's, as
// kquant2_amd64.s describes it.

// kq2const: 32-byte constants. +0: 0x03 bytes; +32: 0x000f words; +64:
// 0x04 bytes; +96: 0x20 bytes; +128: 0x0f bytes.
DATA kq2const<>+0(SB)/8, $0x0303030303030303
DATA kq2const<>+8(SB)/8, $0x0303030303030303
DATA kq2const<>+16(SB)/8, $0x0303030303030303
DATA kq2const<>+24(SB)/8, $0x0303030303030303
DATA kq2const<>+32(SB)/8, $0x000f000f000f000f
DATA kq2const<>+40(SB)/8, $0x000f000f000f000f
DATA kq2const<>+48(SB)/8, $0x000f000f000f000f
DATA kq2const<>+56(SB)/8, $0x000f000f000f000f
DATA kq2const<>+64(SB)/8, $0x0404040404040404
DATA kq2const<>+72(SB)/8, $0x0404040404040404
DATA kq2const<>+80(SB)/8, $0x0404040404040404
DATA kq2const<>+88(SB)/8, $0x0404040404040404
DATA kq2const<>+96(SB)/8, $0x2020202020202020
DATA kq2const<>+104(SB)/8, $0x2020202020202020
DATA kq2const<>+112(SB)/8, $0x2020202020202020
DATA kq2const<>+120(SB)/8, $0x2020202020202020
DATA kq2const<>+128(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kq2const<>+136(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kq2const<>+144(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kq2const<>+152(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kq2const<>(SB), RODATA|NOPTR, $160

// kq2scshuf: VPSHUFB controls for the scales of chunk j (0..3) of a half
// of 128 elements (one scale per 16 elements: Q2_K, Q3_K), from a register
// holding the half's 8 scales as words in both 128-bit lanes: the low lane
// takes word 2j (elements 0..15 of the chunk), the high lane word 2j+1.
DATA kq2scshuf<>+0(SB)/8, $0x0100010001000100
DATA kq2scshuf<>+8(SB)/8, $0x0100010001000100
DATA kq2scshuf<>+16(SB)/8, $0x0302030203020302
DATA kq2scshuf<>+24(SB)/8, $0x0302030203020302
DATA kq2scshuf<>+32(SB)/8, $0x0504050405040504
DATA kq2scshuf<>+40(SB)/8, $0x0504050405040504
DATA kq2scshuf<>+48(SB)/8, $0x0706070607060706
DATA kq2scshuf<>+56(SB)/8, $0x0706070607060706
DATA kq2scshuf<>+64(SB)/8, $0x0908090809080908
DATA kq2scshuf<>+72(SB)/8, $0x0908090809080908
DATA kq2scshuf<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kq2scshuf<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kq2scshuf<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kq2scshuf<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kq2scshuf<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kq2scshuf<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kq2scshuf<>(SB), RODATA|NOPTR, $128

// Q2KCH adds into acc the scaled products of chunk j of a Q2_K half with
// the activations at xmem: w holds the chunk's 2-bit quants as bytes,
// ctrl is chunk j's kq2scshuf control and sc the half's scales (words, in
// both lanes). Clobbers w, Y11.
#define Q2KCH(w, sc, ctrl, xmem, acc) \
	VPMADDUBSW xmem, w, w; \
	VPSHUFB    ctrl, sc, Y11; \
	VPMADDWD   Y11, w, w; \
	VPADDD     w, acc, acc

// Q2KROWX accumulates the Q2_K super-block at (row) against the
// activations at (DI) and sums at (R13): 8 int32 lanes of the scaled
// products of elements 0..127 into qa and of 128..255 into qb, and 8 of
// min*bsum into m (lanes 0..3 from elements 0..127). Needs Y13 = 0x03
// bytes, Y14 = 0x000f words; clobbers Y7..Y11.
#define Q2KROWX(row, qa, qb, m) \
	VPMOVZXBW  (row), Y7; \
	VPSRLW     $4, Y7, Y8; \
	VPMADDWD   (R13), Y8, m; \
	VPAND      Y14, Y7, Y7; \
	VPERMQ     $0x44, Y7, Y8; \
	VPERMQ     $0xee, Y7, Y7; \
	VMOVDQU    16(row), Y9; \
	VPAND      Y13, Y9, Y10; \
	VPMADDUBSW (DI), Y10, Y10; \
	VPSHUFB    kq2scshuf<>+0(SB), Y8, Y11; \
	VPMADDWD   Y11, Y10, qa; \
	VPSRLW     $2, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y8, kq2scshuf<>+32(SB), 32(DI), qa); \
	VPSRLW     $4, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y8, kq2scshuf<>+64(SB), 64(DI), qa); \
	VPSRLW     $6, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y8, kq2scshuf<>+96(SB), 96(DI), qa); \
	VMOVDQU    48(row), Y9; \
	VPAND      Y13, Y9, Y10; \
	VPMADDUBSW 128(DI), Y10, Y10; \
	VPSHUFB    kq2scshuf<>+0(SB), Y7, Y11; \
	VPMADDWD   Y11, Y10, qb; \
	VPSRLW     $2, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y7, kq2scshuf<>+32(SB), 160(DI), qb); \
	VPSRLW     $4, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y7, kq2scshuf<>+64(SB), 192(DI), qb); \
	VPSRLW     $6, Y9, Y10; \
	VPAND      Y13, Y10, Y10; \
	Q2KCH(Y10, Y7, kq2scshuf<>+96(SB), 224(DI), qb)

// kq2deint moves the words [d0, dm0, d1, dm1, d2, dm2, d3, dm3] to
// [d0, d1, d2, d3, dm0, dm1, dm2, dm3] (VPSHUFB).
DATA kq2deint<>+0(SB)/8, $0x0d0c090805040100
DATA kq2deint<>+8(SB)/8, $0x0f0e0b0a07060302
GLOBL kq2deint<>(SB), RODATA|NOPTR, $16

// func q2KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ2K(row i, x), bit for bit, for the 4 Q2_K rows
// w + i*wstride (strides in bytes), x being nb Q8_K blocks: quants xq (256
// per block), scales xd (float32) and sums xb (16 int16 per block). The
// float work is q2KDot4x1's: per super-block Y0 = [q of half 0 of rows
// 0..3, m of half 0 of rows 0..3] and Y1 the same for half 1, two
// VFMADD231PS (half 0, then half 1) with [d(r)*d_x, dmin(r)*d_x] into
// Y15 = [acc(r), accm(r)]; the outputs are acc - accm.
TEXT ·q2KDot4x1AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU kq2const<>+0(SB), Y13
	VMOVDQU kq2const<>+32(SB), Y14
	VXORPS  Y15, Y15, Y15
	TESTQ   CX, CX
	JEQ     q2kdone
q2kloop:
	// Rows 0 and 1: Y6 = [qa0, qa1, qb0, qb1] in each 128-bit lane (the
	// low lane's from lanes 0..3, the high lane's from 4..7), Y12 = the
	// mins' pair sums [m0, m1].
	Q2KROWX(SI, Y0, Y1, Y2)
	Q2KROWX(R10, Y3, Y4, Y5)
	VPHADDD Y3, Y0, Y0
	VPHADDD Y4, Y1, Y1
	VPHADDD Y1, Y0, Y6
	VPHADDD Y5, Y2, Y12
	// Rows 2 and 3 likewise into Y7; Y12 becomes [m0, m1, m2, m3] with
	// half 0's in the low lane and half 1's in the high one.
	Q2KROWX(R11, Y0, Y1, Y2)
	Q2KROWX(R12, Y3, Y4, Y5)
	VPHADDD Y3, Y0, Y0
	VPHADDD Y4, Y1, Y1
	VPHADDD Y1, Y0, Y7
	VPHADDD Y5, Y2, Y2
	VPHADDD Y2, Y12, Y12
	VEXTRACTI128 $1, Y6, X0
	VPADDD       X0, X6, X6
	VEXTRACTI128 $1, Y7, X1
	VPADDD       X1, X7, X7
	VPUNPCKLQDQ  X7, X6, X0
	VPUNPCKHQDQ  X7, X6, X1
	VINSERTI128  $1, X12, Y0, Y0
	VINSERTI128  $0, X1, Y12, Y1
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VMOVD        80(SI), X3
	VPINSRD      $1, 80(R10), X3, X3
	VPINSRD      $2, 80(R11), X3, X3
	VPINSRD      $3, 80(R12), X3, X3
	VPSHUFB      kq2deint<>(SB), X3, X3
	VCVTPH2PS    X3, Y3
	VBROADCASTSS (DX), Y2
	VMULPS       Y2, Y3, Y3
	VFMADD231PS  Y0, Y3, Y15
	VFMADD231PS  Y1, Y3, Y15
	ADDQ $84, SI
	ADDQ $84, R10
	ADDQ $84, R11
	ADDQ $84, R12
	ADDQ $256, DI
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q2kloop
q2kdone:
	MOVQ out+48(FP), BX
	MOVQ ostride+56(FP), R9
	VEXTRACTF128 $1, Y15, X0
	VSUBPS       X0, X15, X0
	VMOVSS       X0, (BX)
	VEXTRACTPS   $1, X0, (BX)(R9*1)
	LEAQ         (BX)(R9*2), BX
	VEXTRACTPS   $2, X0, (BX)
	VEXTRACTPS   $3, X0, (BX)(R9*1)
	VZEROUPPER
	RET

// Q2KTOK adds into acc the scaled products of one chunk of a Q2_K half
// with one token's activations at xmem (Q2KTOKSET sets acc to them).
// Needs Y11 = the chunk's quants as bytes, Y12 = its scale words;
// clobbers Y8.
#define Q2KTOK(xmem, acc) \
	VPMADDUBSW xmem, Y11, Y8; \
	VPMADDWD   Y12, Y8, Y8; \
	VPADDD     Y8, acc, acc

#define Q2KTOKSET(xmem, acc) \
	VPMADDUBSW xmem, Y11, Y8; \
	VPMADDWD   Y12, Y8, acc

// Q2KHALF4 leaves in dst the lanes of one half (128 elements) of a Q2_K
// super-block against tokens 0..3: the low 128-bit lane holds 4 int32
// partial sums (tokens 0..3) of the half's chunks' lanes 0..3, the high
// lane those of lanes 4..7. q is the half's 32 quant bytes, sc its scales
// (words in both lanes), xo the half's offset in the activations. Needs
// Y13 = 0x03 bytes; clobbers Y0..Y3, Y8, Y11, Y12.
#define Q2KHALF4(q, sc, xo0, xo1, xo2, xo3, dst) \
	VPAND      Y13, q, Y11; \
	VPSHUFB    kq2scshuf<>+0(SB), sc, Y12; \
	Q2KTOKSET(xo0(DI), Y0); \
	Q2KTOKSET(xo0(DI)(R10*1), Y1); \
	Q2KTOKSET(xo0(DI)(R10*2), Y2); \
	Q2KTOKSET(xo0(BX), Y3); \
	VPSRLW     $2, q, Y11; \
	VPAND      Y13, Y11, Y11; \
	VPSHUFB    kq2scshuf<>+32(SB), sc, Y12; \
	Q2KTOK(xo1(DI), Y0); \
	Q2KTOK(xo1(DI)(R10*1), Y1); \
	Q2KTOK(xo1(DI)(R10*2), Y2); \
	Q2KTOK(xo1(BX), Y3); \
	VPSRLW     $4, q, Y11; \
	VPAND      Y13, Y11, Y11; \
	VPSHUFB    kq2scshuf<>+64(SB), sc, Y12; \
	Q2KTOK(xo2(DI), Y0); \
	Q2KTOK(xo2(DI)(R10*1), Y1); \
	Q2KTOK(xo2(DI)(R10*2), Y2); \
	Q2KTOK(xo2(BX), Y3); \
	VPSRLW     $6, q, Y11; \
	VPAND      Y13, Y11, Y11; \
	VPSHUFB    kq2scshuf<>+96(SB), sc, Y12; \
	Q2KTOK(xo3(DI), Y0); \
	Q2KTOK(xo3(DI)(R10*1), Y1); \
	Q2KTOK(xo3(DI)(R10*2), Y2); \
	Q2KTOK(xo3(BX), Y3); \
	VPHADDD    Y1, Y0, Y0; \
	VPHADDD    Y3, Y2, Y2; \
	VPHADDD    Y2, Y0, dst

// func q2KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One Q2_K row (w) against four tokens of Q8_K activations, token t's
// quants at xq + t*xqstride, scales at xd + t*xdstride and sums at
// xb + t*xbstride (strides in bytes): out + t*otok = dotQ2K(row, token
// t), bit for bit, each super-block's scales and quants unpacked once for
// the four tokens. The float work is q2KDot1x4's: per super-block Y1 =
// [q of half 0 of tokens 0..3, m of half 0 of tokens 0..3] and Y2 the
// same for half 1, two VFMADD231PS (half 0, then half 1) with
// [d*d_x(t), dmin*d_x(t)] into Y15 = [acc(t), accm(t)]; the outputs are
// acc - accm.
TEXT ·q2KDot1x4AVX2(SB), NOSPLIT, $0-80
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
	VMOVDQU kq2const<>+0(SB), Y13
	VMOVDQU kq2const<>+32(SB), Y14
	VXORPS  Y15, Y15, Y15
	TESTQ   CX, CX
	JEQ     q2k14done
q2k14loop:
	VPMOVZXBW (SI), Y7
	VPSRLW    $4, Y7, Y8
	MOVQ      R13, R9
	VPMADDWD  (R9), Y8, Y0
	ADDQ      R12, R9
	VPMADDWD  (R9), Y8, Y1
	ADDQ      R12, R9
	VPMADDWD  (R9), Y8, Y2
	ADDQ      R12, R9
	VPMADDWD  (R9), Y8, Y3
	VPHADDD   Y1, Y0, Y0
	VPHADDD   Y3, Y2, Y2
	VPHADDD   Y2, Y0, Y5
	VPAND     Y14, Y7, Y7
	VPERMQ    $0x44, Y7, Y9
	VPERMQ    $0xee, Y7, Y7
	VMOVDQU   16(SI), Y10
	Q2KHALF4(Y10, Y9, 0, 32, 64, 96, Y4)
	VMOVDQU   48(SI), Y10
	Q2KHALF4(Y10, Y7, 128, 160, 192, 224, Y6)
	VINSERTI128 $1, X6, Y4, Y0
	VPERM2I128  $0x31, Y6, Y4, Y1
	VPADDD      Y1, Y0, Y0
	VINSERTI128 $1, X5, Y0, Y1
	VPERM2I128  $0x31, Y5, Y0, Y2
	VCVTDQ2PS   Y1, Y1
	VCVTDQ2PS   Y2, Y2
	MOVQ        DX, AX
	VMOVSS      (AX), X3
	VINSERTPS   $0x10, (AX)(R11*1), X3, X3
	VINSERTPS   $0x20, (AX)(R11*2), X3, X3
	LEAQ        (AX)(R11*2), AX
	VINSERTPS   $0x30, (AX)(R11*1), X3, X3
	VINSERTF128 $1, X3, Y3, Y3
	VMOVD       80(SI), X8
	VPUNPCKLWD  X8, X8, X8
	VPUNPCKLDQ  X8, X8, X8
	VCVTPH2PS   X8, Y8
	VMULPS      Y3, Y8, Y8
	VFMADD231PS Y1, Y8, Y15
	VFMADD231PS Y2, Y8, Y15
	ADDQ $84, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $32, R13
	DECQ CX
	JNZ  q2k14loop
q2k14done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	VEXTRACTF128 $1, Y15, X0
	VSUBPS       X0, X15, X0
	VMOVSS       X0, (BX)
	ADDQ         R9, BX
	VEXTRACTPS   $1, X0, (BX)
	ADDQ         R9, BX
	VEXTRACTPS   $2, X0, (BX)
	ADDQ         R9, BX
	VEXTRACTPS   $3, X0, (BX)
	VZEROUPPER
	RET

// Q3KSCX unpacks the 16 signed 6-bit scales of the Q3_K super-block at
// (row) (12 bytes at 96(row), tensor.Q3KScales) into dst as words, by way
// of xtmp. Clobbers AX, R8, R9, R14, R15.
#define Q3KSCX(row, xtmp, dst) \
	Q3KSCALEBYTES(row, xtmp); \
	VPSUBB    kq2const<>+96(SB), xtmp, xtmp; \
	VPMOVSXBW xtmp, dst

// Q3KU leaves in Y13 the unsigned weights w+4 = q2 | hbit<<2 (0..7) of
// chunk c of a Q3_K super-block: Y12 holds the quant bytes of c's half,
// qsh = 2*(c%4) brings c's 2-bit quants down, hop $hsh (a word shift)
// brings hmask bit c (of Y11) to bit 2. Needs Y5 = 0x03 bytes, Y6 = 0x04
// bytes; clobbers Y14.
#define Q3KU(qsh, hop, hsh) \
	VPSRLW $qsh, Y12, Y13; \
	VPAND  Y5, Y13, Y13; \
	hop    $hsh, Y11, Y14; \
	VPAND  Y6, Y14, Y14; \
	VPOR   Y14, Y13, Y13

// Q3KMUL adds into Y8 the scaled lanes of chunk c from Q3KU's weights Y13
// against the activations at xoff(DI): VPMADDUBSW, minus 4 times the
// activations' pair sums (p4, at xoff(SP)), leaves w's int16 pair sums
// exactly; sc is the half's scales (words in both lanes) and ctrl c's
// kq2scshuf control. Clobbers Y13, Y14.
#define Q3KMUL(xoff, sc, ctrl) \
	VPMADDUBSW xoff(DI), Y13, Y13; \
	VPSUBW     xoff(SP), Y13, Y13; \
	VPSHUFB    ctrl, sc, Y14; \
	VPMADDWD   Y14, Y13, Y13; \
	VPADDD     Y13, Y8, Y8

// Q3KROWX accumulates the Q3_K super-block at (row) into acc: the lanes
// of kLanes, converted to float32 and fused-multiply-added with the
// block's d = d_x*d_w. Needs the token's activations at (DI), their p4 at
// (SP), d_x in Y4, Y5 = 0x03 bytes, Y6 = 0x04 bytes. Clobbers AX, R8, R9,
// R14, R15, Y7..Y14.
#define Q3KROWX(row, acc) \
	Q3KSCX(row, X7, Y9); \
	VPERMQ  $0x44, Y9, Y10; \
	VPERMQ  $0xee, Y9, Y9; \
	VMOVDQU (row), Y11; \
	VMOVDQU 32(row), Y12; \
	VPXOR   Y8, Y8, Y8; \
	Q3KU(0, VPSLLW, 2); \
	Q3KMUL(0, Y10, kq2scshuf<>+0(SB)); \
	Q3KU(2, VPSLLW, 1); \
	Q3KMUL(32, Y10, kq2scshuf<>+32(SB)); \
	Q3KU(4, VPSRLW, 0); \
	Q3KMUL(64, Y10, kq2scshuf<>+64(SB)); \
	Q3KU(6, VPSRLW, 1); \
	Q3KMUL(96, Y10, kq2scshuf<>+96(SB)); \
	VMOVDQU 64(row), Y12; \
	Q3KU(0, VPSRLW, 2); \
	Q3KMUL(128, Y9, kq2scshuf<>+0(SB)); \
	Q3KU(2, VPSRLW, 3); \
	Q3KMUL(160, Y9, kq2scshuf<>+32(SB)); \
	Q3KU(4, VPSRLW, 4); \
	Q3KMUL(192, Y9, kq2scshuf<>+64(SB)); \
	Q3KU(6, VPSRLW, 5); \
	Q3KMUL(224, Y9, kq2scshuf<>+96(SB)); \
	VCVTDQ2PS    Y8, Y8; \
	VPBROADCASTW 108(row), X13; \
	VCVTPH2PS    X13, Y13; \
	VMULPS       Y4, Y13, Y13; \
	VFMADD231PS  Y8, Y13, acc

// Q3KP4 stores at off(SP) 4 times the pair sums of the activations at
// off(DI) (int16). Needs Y6 = 0x04 bytes; clobbers Y7.
#define Q3KP4(off) \
	VPMADDUBSW off(DI), Y6, Y7; \
	VMOVDQU    Y7, off(SP)

// func q3KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ3K(row i, x), bit for bit, for the 4 Q3_K rows
// w + i*wstride (strides in bytes), x being nb Q8_K blocks: quants xq (256
// per block) and scales xd (float32). The frame holds the token's p4 of
// the current super-block.
TEXT ·q3KDot4x1AVX2(SB), NOSPLIT, $256-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU kq2const<>+0(SB), Y5
	VMOVDQU kq2const<>+64(SB), Y6
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	TESTQ   CX, CX
	JEQ     q3kdone
q3kloop:
	Q3KP4(0)
	Q3KP4(32)
	Q3KP4(64)
	Q3KP4(96)
	Q3KP4(128)
	Q3KP4(160)
	Q3KP4(192)
	Q3KP4(224)
	VBROADCASTSS (DX), Y4
	Q3KROWX(SI, Y0)
	Q3KROWX(R10, Y1)
	Q3KROWX(R11, Y2)
	Q3KROWX(R12, Y3)
	ADDQ $110, SI
	ADDQ $110, R10
	ADDQ $110, R11
	ADDQ $110, R12
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q3kloop
q3kdone:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	HSUM8X(Y0, X0, X14, X15)
	VMOVSS X14, (BX)
	HSUM8X(Y1, X1, X14, X15)
	VMOVSS X14, (BX)(R9*1)
	HSUM8X(Y2, X2, X14, X15)
	VMOVSS X14, (BX)(R9*2)
	LEAQ   (BX)(R9*2), BX
	HSUM8X(Y3, X3, X14, X15)
	VMOVSS X14, (BX)(R9*1)
	VZEROUPPER
	RET

// Q3KU4 is Q3KU for q3KDot1x4AVX2: w+4 of chunk c into Y11, from the
// half's quant bytes Y9 and the hmask Y8. Needs Y14 = 0x04 bytes;
// clobbers Y13.
#define Q3KU4(qsh, hop, hsh) \
	VPSRLW $qsh, Y9, Y11; \
	VPAND  kq2const<>+0(SB), Y11, Y11; \
	hop    $hsh, Y8, Y13; \
	VPAND  Y14, Y13, Y13; \
	VPOR   Y13, Y11, Y11

// Q3KTOK adds into acc the scaled lanes of one chunk (w+4 in Y11, scale
// words in Y12) against one token's activations at xmem, less 4 times
// their pair sums. Needs Y14 = 0x04 bytes; clobbers Y13, Y15.
#define Q3KTOK(xmem, acc) \
	VPMADDUBSW xmem, Y11, Y13; \
	VPMADDUBSW xmem, Y14, Y15; \
	VPSUBW     Y15, Y13, Y13; \
	VPMADDWD   Y12, Y13, Y13; \
	VPADDD     Y13, acc, acc

// Q3KCH4 adds chunk c's scaled lanes against tokens 0..3 (activations at
// xoff(DI), xoff(DI)(R10*1), xoff(DI)(R10*2), xoff(BX)) into Y4..Y7:
// sc is the half's scales and ctrl c's kq2scshuf control.
#define Q3KCH4(xoff, sc, ctrl) \
	VPSHUFB ctrl, sc, Y12; \
	Q3KTOK(xoff(DI), Y4); \
	Q3KTOK(xoff(DI)(R10*1), Y5); \
	Q3KTOK(xoff(DI)(R10*2), Y6); \
	Q3KTOK(xoff(BX), Y7)

// Q3KFIN adds one token's super-block lanes into acc as Q3KROWX's float
// work, with the token's d_x at dptr. Needs Y8 = the row's d as float32;
// clobbers lanes, Y9.
#define Q3KFIN(lanes, dptr, acc) \
	VCVTDQ2PS    lanes, lanes; \
	VBROADCASTSS dptr, Y9; \
	VMULPS       Y9, Y8, Y9; \
	VFMADD231PS  lanes, Y9, acc

// func q3KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One Q3_K row (w) against four tokens of Q8_K activations (token t's
// quants at xq + t*xqstride, scale at xd + t*xdstride; the sums are not
// used): out + t*otok = dotQ3K(row, token t), bit for bit, each
// super-block's scales, quants and high bits unpacked once for the four
// tokens. The frame holds the super-block's scales as words.
TEXT ·q3KDot1x4AVX2(SB), NOSPLIT, $32-80
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xqstride+16(FP), R10
	MOVQ xd+24(FP), DX
	MOVQ xdstride+32(FP), R11
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	LEAQ (DX)(R11*2), R12
	ADDQ R11, R12
	VMOVDQU kq2const<>+64(SB), Y14
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	TESTQ   CX, CX
	JEQ     q3k14done
q3k14loop:
	Q3KSCX(SI, X10, Y10)
	VMOVDQU Y10, (SP)
	VPERMQ  $0x44, Y10, Y10
	VMOVDQU (SI), Y8
	VMOVDQU 32(SI), Y9
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	Q3KU4(0, VPSLLW, 2)
	Q3KCH4(0, Y10, kq2scshuf<>+0(SB))
	Q3KU4(2, VPSLLW, 1)
	Q3KCH4(32, Y10, kq2scshuf<>+32(SB))
	Q3KU4(4, VPSRLW, 0)
	Q3KCH4(64, Y10, kq2scshuf<>+64(SB))
	Q3KU4(6, VPSRLW, 1)
	Q3KCH4(96, Y10, kq2scshuf<>+96(SB))
	VPERMQ  $0xee, (SP), Y10
	VMOVDQU 64(SI), Y9
	Q3KU4(0, VPSRLW, 2)
	Q3KCH4(128, Y10, kq2scshuf<>+0(SB))
	Q3KU4(2, VPSRLW, 3)
	Q3KCH4(160, Y10, kq2scshuf<>+32(SB))
	Q3KU4(4, VPSRLW, 4)
	Q3KCH4(192, Y10, kq2scshuf<>+64(SB))
	Q3KU4(6, VPSRLW, 5)
	Q3KCH4(224, Y10, kq2scshuf<>+96(SB))
	VPBROADCASTW 108(SI), X8
	VCVTPH2PS    X8, Y8
	Q3KFIN(Y4, (DX), Y0)
	Q3KFIN(Y5, (DX)(R11*1), Y1)
	Q3KFIN(Y6, (DX)(R11*2), Y2)
	Q3KFIN(Y7, (R12), Y3)
	ADDQ $110, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $4, R12
	DECQ CX
	JNZ  q3k14loop
q3k14done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	HSUM8X(Y0, X0, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y1, X1, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y2, X2, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y3, X3, X14, X15)
	VMOVSS X14, (BX)
	VZEROUPPER
	RET

// kiq4scshuf: VPSHUFB controls that spread word ib (0..7) of a register
// holding IQ4_XS's 8 scales as words in both 128-bit lanes to all 16
// words (one scale per 32-element chunk).
DATA kiq4scshuf<>+0(SB)/8, $0x0100010001000100
DATA kiq4scshuf<>+8(SB)/8, $0x0100010001000100
DATA kiq4scshuf<>+16(SB)/8, $0x0100010001000100
DATA kiq4scshuf<>+24(SB)/8, $0x0100010001000100
DATA kiq4scshuf<>+32(SB)/8, $0x0302030203020302
DATA kiq4scshuf<>+40(SB)/8, $0x0302030203020302
DATA kiq4scshuf<>+48(SB)/8, $0x0302030203020302
DATA kiq4scshuf<>+56(SB)/8, $0x0302030203020302
DATA kiq4scshuf<>+64(SB)/8, $0x0504050405040504
DATA kiq4scshuf<>+72(SB)/8, $0x0504050405040504
DATA kiq4scshuf<>+80(SB)/8, $0x0504050405040504
DATA kiq4scshuf<>+88(SB)/8, $0x0504050405040504
DATA kiq4scshuf<>+96(SB)/8, $0x0706070607060706
DATA kiq4scshuf<>+104(SB)/8, $0x0706070607060706
DATA kiq4scshuf<>+112(SB)/8, $0x0706070607060706
DATA kiq4scshuf<>+120(SB)/8, $0x0706070607060706
DATA kiq4scshuf<>+128(SB)/8, $0x0908090809080908
DATA kiq4scshuf<>+136(SB)/8, $0x0908090809080908
DATA kiq4scshuf<>+144(SB)/8, $0x0908090809080908
DATA kiq4scshuf<>+152(SB)/8, $0x0908090809080908
DATA kiq4scshuf<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kiq4scshuf<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kiq4scshuf<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kiq4scshuf<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kiq4scshuf<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kiq4scshuf<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kiq4scshuf<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kiq4scshuf<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kiq4scshuf<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kiq4scshuf<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kiq4scshuf<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kiq4scshuf<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kiq4scshuf<>(SB), RODATA|NOPTR, $256

// kiq4levx: the 16 IQ4_NL levels (tensor.IQ4NLLevel) as signed bytes, in
// both 128-bit lanes, for VPSHUFB.
DATA kiq4levx<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4levx<>+8(SB)/8, $0x7159453526190d01
DATA kiq4levx<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4levx<>+24(SB)/8, $0x7159453526190d01
GLOBL kiq4levx<>(SB), RODATA|NOPTR, $32

// IQ4SCX unpacks the 8 6-bit scales of the IQ4_XS super-block at (row)
// (low nibbles at 4(row), high bit pairs at 2(row); tensor.IQ4XSScale,
// minus 32) into ydst as words, in both 128-bit lanes. Clobbers AX, R8,
// R14, R15.
#define IQ4SCX(row, xdst, ydst) \
	IQ4XSSCALEBYTES(row); \
	VMOVQ       AX, xdst; \
	VPSUBB      kq2const<>+96(SB), xdst, xdst; \
	VPMOVSXBW   xdst, xdst; \
	VINSERTI128 $1, xdst, ydst, ydst

// IQ4LEV leaves in Y13 and Y11 the signed levels of chunks 2p and 2p+1 of
// the IQ4_XS row at (row), their 32 nibble bytes at off(row): the 16 low
// nibbles of a chunk are its elements 0..15 (low 128-bit lane), the high
// nibbles 16..31. Needs nib = 0x0f bytes, lev = kiq4levx; clobbers Y12.
#define IQ4LEV(row, off, nib, lev) \
	VMOVDQU    off(row), Y11; \
	VPSRLW     $4, Y11, Y12; \
	VPAND      nib, Y11, Y11; \
	VPAND      nib, Y12, Y12; \
	VPSHUFB    Y11, lev, Y11; \
	VPSHUFB    Y12, lev, Y12; \
	VPERM2I128 $0x20, Y12, Y11, Y13; \
	VPERM2I128 $0x31, Y12, Y11, Y11

// IQ4CHX adds into Y8 the scaled lanes of one chunk with signed levels w
// (destroyed) against the activations at xmem: VPMADDUBSW takes the
// levels' magnitudes (at most 127) against the activations signed by the
// levels (VPSIGNB), so the int16 pair sums are exact. Needs Y10 = the
// scales (IQ4SCX); ctrl is the chunk's kiq4scshuf control. Clobbers Y14.
#define IQ4CHX(w, xmem, ctrl) \
	VMOVDQU    xmem, Y14; \
	VPSIGNB    w, Y14, Y14; \
	VPABSB     w, w; \
	VPMADDUBSW Y14, w, w; \
	VPSHUFB    ctrl, Y10, Y14; \
	VPMADDWD   Y14, w, w; \
	VPADDD     w, Y8, Y8

// IQ4ROWX accumulates the IQ4_XS super-block at (row) into acc: the lanes
// of kLanes, converted to float32 and fused-multiply-added with the
// block's d = d_w*d_x. Needs the token's activations at (DI), d_x in Y4,
// Y5 = 0x0f bytes, Y6 = kiq4levx. Clobbers AX, R8, R14, R15, Y8, Y10..Y14.
#define IQ4ROWX(row, acc) \
	IQ4SCX(row, X10, Y10); \
	VPXOR Y8, Y8, Y8; \
	IQ4LEV(row, 8, Y5, Y6); \
	IQ4CHX(Y13, 0(DI), kiq4scshuf<>+0(SB)); \
	IQ4CHX(Y11, 32(DI), kiq4scshuf<>+32(SB)); \
	IQ4LEV(row, 40, Y5, Y6); \
	IQ4CHX(Y13, 64(DI), kiq4scshuf<>+64(SB)); \
	IQ4CHX(Y11, 96(DI), kiq4scshuf<>+96(SB)); \
	IQ4LEV(row, 72, Y5, Y6); \
	IQ4CHX(Y13, 128(DI), kiq4scshuf<>+128(SB)); \
	IQ4CHX(Y11, 160(DI), kiq4scshuf<>+160(SB)); \
	IQ4LEV(row, 104, Y5, Y6); \
	IQ4CHX(Y13, 192(DI), kiq4scshuf<>+192(SB)); \
	IQ4CHX(Y11, 224(DI), kiq4scshuf<>+224(SB)); \
	VCVTDQ2PS    Y8, Y8; \
	VPBROADCASTW (row), X13; \
	VCVTPH2PS    X13, Y13; \
	VMULPS       Y4, Y13, Y13; \
	VFMADD231PS  Y8, Y13, acc

// func iq4XSDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q3KDot4x1AVX2 for IQ4_XS rows: out + i*ostride = dotIQ4XS(row i, x), bit
// for bit.
TEXT ·iq4XSDot4x1AVX2(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R9
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LEAQ (SI)(R9*1), R10
	LEAQ (SI)(R9*2), R11
	LEAQ (R11)(R9*1), R12
	VMOVDQU kq2const<>+128(SB), Y5
	VMOVDQU kiq4levx<>+0(SB), Y6
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	TESTQ   CX, CX
	JEQ     iq4done
iq4loop:
	VBROADCASTSS (DX), Y4
	IQ4ROWX(SI, Y0)
	IQ4ROWX(R10, Y1)
	IQ4ROWX(R11, Y2)
	IQ4ROWX(R12, Y3)
	ADDQ $136, SI
	ADDQ $136, R10
	ADDQ $136, R11
	ADDQ $136, R12
	ADDQ $256, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  iq4loop
iq4done:
	MOVQ out+40(FP), BX
	MOVQ ostride+48(FP), R9
	HSUM8X(Y0, X0, X14, X15)
	VMOVSS X14, (BX)
	HSUM8X(Y1, X1, X14, X15)
	VMOVSS X14, (BX)(R9*1)
	HSUM8X(Y2, X2, X14, X15)
	VMOVSS X14, (BX)(R9*2)
	LEAQ   (BX)(R9*2), BX
	HSUM8X(Y3, X3, X14, X15)
	VMOVSS X14, (BX)(R9*1)
	VZEROUPPER
	RET

// IQ4TOK adds into acc the scaled lanes of one chunk (signed levels w,
// their magnitudes in Y12, scale words in Y14) against one token's
// activations at xmem, as IQ4CHX. Clobbers Y15.
#define IQ4TOK(w, xmem, acc) \
	VMOVDQU    xmem, Y15; \
	VPSIGNB    w, Y15, Y15; \
	VPMADDUBSW Y15, Y12, Y15; \
	VPMADDWD   Y14, Y15, Y15; \
	VPADDD     Y15, acc, acc

// IQ4CH4 adds one chunk's scaled lanes (signed levels w) against tokens
// 0..3 (activations at xoff(DI), xoff(DI)(R10*1), xoff(DI)(R10*2),
// xoff(BX)) into Y4..Y7. Needs Y8 = the scales (IQ4SCX); ctrl is the
// chunk's kiq4scshuf control. Clobbers Y12, Y14, Y15.
#define IQ4CH4(w, xoff, ctrl) \
	VPABSB  w, Y12; \
	VPSHUFB ctrl, Y8, Y14; \
	IQ4TOK(w, xoff(DI), Y4); \
	IQ4TOK(w, xoff(DI)(R10*1), Y5); \
	IQ4TOK(w, xoff(DI)(R10*2), Y6); \
	IQ4TOK(w, xoff(BX), Y7)

// IQ4FIN adds one token's super-block lanes into acc as IQ4ROWX's float
// work, with the token's d_x at dptr. Needs Y12 = the row's d as float32;
// clobbers lanes, Y13.
#define IQ4FIN(lanes, dptr, acc) \
	VCVTDQ2PS    lanes, lanes; \
	VBROADCASTSS dptr, Y13; \
	VMULPS       Y13, Y12, Y13; \
	VFMADD231PS  lanes, Y13, acc

// func iq4XSDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One IQ4_XS row (w) against four tokens of Q8_K activations (token t's
// quants at xq + t*xqstride, scale at xd + t*xdstride; the sums are not
// used): out + t*otok = dotIQ4XS(row, token t), bit for bit, each
// super-block's scales and levels unpacked once for the four tokens.
TEXT ·iq4XSDot1x4AVX2(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xqstride+16(FP), R10
	MOVQ xd+24(FP), DX
	MOVQ xdstride+32(FP), R11
	MOVQ nb+56(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	LEAQ (DX)(R11*2), R12
	ADDQ R11, R12
	VMOVDQU kiq4levx<>+0(SB), Y9
	VMOVDQU kq2const<>+128(SB), Y10
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	TESTQ   CX, CX
	JEQ     iq414done
iq414loop:
	IQ4SCX(SI, X8, Y8)
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	IQ4LEV(SI, 8, Y10, Y9)
	IQ4CH4(Y13, 0, kiq4scshuf<>+0(SB))
	IQ4CH4(Y11, 32, kiq4scshuf<>+32(SB))
	IQ4LEV(SI, 40, Y10, Y9)
	IQ4CH4(Y13, 64, kiq4scshuf<>+64(SB))
	IQ4CH4(Y11, 96, kiq4scshuf<>+96(SB))
	IQ4LEV(SI, 72, Y10, Y9)
	IQ4CH4(Y13, 128, kiq4scshuf<>+128(SB))
	IQ4CH4(Y11, 160, kiq4scshuf<>+160(SB))
	IQ4LEV(SI, 104, Y10, Y9)
	IQ4CH4(Y13, 192, kiq4scshuf<>+192(SB))
	IQ4CH4(Y11, 224, kiq4scshuf<>+224(SB))
	VPBROADCASTW (SI), X12
	VCVTPH2PS    X12, Y12
	IQ4FIN(Y4, (DX), Y0)
	IQ4FIN(Y5, (DX)(R11*1), Y1)
	IQ4FIN(Y6, (DX)(R11*2), Y2)
	IQ4FIN(Y7, (R12), Y3)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $4, DX
	ADDQ $4, R12
	DECQ CX
	JNZ  iq414loop
iq414done:
	MOVQ out+64(FP), BX
	MOVQ otok+72(FP), R9
	HSUM8X(Y0, X0, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y1, X1, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y2, X2, X14, X15)
	VMOVSS X14, (BX)
	ADDQ   R9, BX
	HSUM8X(Y3, X3, X14, X15)
	VMOVSS X14, (BX)
	VZEROUPPER
	RET
