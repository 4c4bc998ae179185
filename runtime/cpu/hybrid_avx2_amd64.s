#include "textflag.h"

// AVX2 + FMA kernels of the hybrid ops: the same results as their AVX-512
// counterparts in hybrid_amd64.s (the Go references in hybrid_fast.go).

// func gemmF32AVX2(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32)
// gemmF32: C[i,j] = fma(A[i,p], B[p,j], c) for p = 0..k-1 in order, from
// c = beta*C[i,j]
// (n a multiple of 16), in tiles of 4 rows x 16 columns (8 accumulators)
// and a 1-row tile.
TEXT ·gemmF32AVX2(SB), NOSPLIT, $0-76
	MOVQ c+0(FP), DI
	MOVQ b+16(FP), BX
	MOVQ n+40(FP), DX
	MOVQ lda+48(FP), R9
	MOVQ ldb+56(FP), R10
	MOVQ ldc+64(FP), R11
	VBROADCASTSS beta+72(FP), Y15
	SHLQ $2, DX
	SHLQ $2, R9
	SHLQ $2, R10
	SHLQ $2, R11
	XORQ AX, AX

hc16:
	CMPQ AX, DX
	JGE  hdone
	MOVQ a+8(FP), SI
	MOVQ m+24(FP), R8
	LEAQ (DI)(AX*1), R12

hr4:
	CMPQ    R8, $4
	JLT     hr1
	LEAQ    (R12)(R11*2), R15
	VMOVUPS (R12), Y0
	VMOVUPS 32(R12), Y1
	VMOVUPS (R12)(R11*1), Y2
	VMOVUPS 32(R12)(R11*1), Y3
	VMOVUPS (R15), Y4
	VMOVUPS 32(R15), Y5
	VMOVUPS (R15)(R11*1), Y6
	VMOVUPS 32(R15)(R11*1), Y7
	VMULPS  Y15, Y0, Y0
	VMULPS  Y15, Y1, Y1
	VMULPS  Y15, Y2, Y2
	VMULPS  Y15, Y3, Y3
	VMULPS  Y15, Y4, Y4
	VMULPS  Y15, Y5, Y5
	VMULPS  Y15, Y6, Y6
	VMULPS  Y15, Y7, Y7
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     hs4
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14
	LEAQ    (SI)(R9*2), R15

hk4:
	VMOVUPS      (R13), Y8
	VMOVUPS      32(R13), Y9
	VBROADCASTSS (R14), Y10
	VBROADCASTSS (R14)(R9*1), Y11
	VBROADCASTSS (R15), Y12
	VBROADCASTSS (R15)(R9*1), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         R10, R13
	ADDQ         $4, R14
	ADDQ         $4, R15
	DECQ         CX
	JNZ          hk4

hs4:
	LEAQ    (R12)(R11*2), R15
	VMOVUPS Y0, (R12)
	VMOVUPS Y1, 32(R12)
	VMOVUPS Y2, (R12)(R11*1)
	VMOVUPS Y3, 32(R12)(R11*1)
	VMOVUPS Y4, (R15)
	VMOVUPS Y5, 32(R15)
	VMOVUPS Y6, (R15)(R11*1)
	VMOVUPS Y7, 32(R15)(R11*1)
	LEAQ    (R15)(R11*2), R12
	LEAQ    (SI)(R9*4), SI
	SUBQ    $4, R8
	JMP     hr4

hr1:
	TESTQ   R8, R8
	JEQ     hn16
	VMOVUPS (R12), Y0
	VMOVUPS 32(R12), Y1
	VMULPS  Y15, Y0, Y0
	VMULPS  Y15, Y1, Y1
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     hs1
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14

hk1:
	VBROADCASTSS (R14), Y10
	VFMADD231PS  (R13), Y10, Y0
	VFMADD231PS  32(R13), Y10, Y1
	ADDQ         R10, R13
	ADDQ         $4, R14
	DECQ         CX
	JNZ          hk1

hs1:
	VMOVUPS Y0, (R12)
	VMOVUPS Y1, 32(R12)
	ADDQ    R11, R12
	ADDQ    R9, SI
	DECQ    R8
	JMP     hr1

hn16:
	ADDQ $64, AX
	JMP  hc16

hdone:
	VZEROUPPER
	RET

// func convRowAVX2(o, win, x, taps *float32, n, c, k int)
// convRow in 8-lane halves, the same bits.
TEXT ·convRowAVX2(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ win+8(FP), SI
	MOVQ x+16(FP), BX
	MOVQ taps+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ c+40(FP), DX
	MOVQ k+48(FP), R9
	SHLQ $2, CX
	SHLQ $2, DX
	DECQ R9
	XORQ AX, AX

dr8:
	CMPQ   AX, CX
	JGE    drdone
	VXORPS Y0, Y0, Y0
	LEAQ   (SI)(AX*1), R10
	LEAQ   (R8)(AX*1), R11
	MOVQ   R9, R12
	TESTQ  R12, R12
	JEQ    drx

drj:
	VMOVUPS (R10), Y1
	VMULPS  (R11), Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    DX, R10
	ADDQ    DX, R11
	DECQ    R12
	JNZ     drj

drx:
	VMOVUPS (BX)(AX*1), Y1
	VMULPS  (R11), Y1, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     dr8

drdone:
	VZEROUPPER
	RET
