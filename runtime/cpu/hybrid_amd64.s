#include "textflag.h"

// AVX-512 kernels of the hybrid ops (hybrid_fast.go). Lanes run over the
// value dimension j; every lane computes the same sequence of float32
// operations as the Go references in hybrid_fast.go (a rounded multiply,
// then an add; no fused multiply-adds), in the same order, so results are
// bit for bit those of the references. Blocks of 64 lanes keep 4
// independent accumulators; dv must be a multiple of 16 (the callers check).

// func deltaDecayPred(s, k, pred *float32, dk, dv int, decay float32)
// For every key row i < dk of s [dk, dv]: s[i,j] *= decay, then
// pred[j] = sum over i in order of s[i,j]*k[i] (from 0).
TEXT ·deltaDecayPred(SB), NOSPLIT, $0-44
	MOVQ         s+0(FP), SI
	MOVQ         k+8(FP), BX
	MOVQ         pred+16(FP), DI
	MOVQ         dk+24(FP), CX
	MOVQ         dv+32(FP), DX
	VBROADCASTSS decay+40(FP), Z31
	SHLQ         $2, DX            // row stride, bytes
	XORQ         AX, AX            // column offset, bytes
	MOVQ         DX, R9
	ANDQ         $-256, R9         // bytes in blocks of 64 lanes

dp64:
	CMPQ   AX, R9
	JGE    dp16
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	LEAQ   (SI)(AX*1), R10
	MOVQ   BX, R11
	MOVQ   CX, R12
	TESTQ  R12, R12
	JEQ    dp64st

dp64i:
	VBROADCASTSS (R11), Z30
	VMULPS       (R10), Z31, Z4
	VMULPS       64(R10), Z31, Z5
	VMULPS       128(R10), Z31, Z6
	VMULPS       192(R10), Z31, Z7
	VMOVUPS      Z4, (R10)
	VMOVUPS      Z5, 64(R10)
	VMOVUPS      Z6, 128(R10)
	VMOVUPS      Z7, 192(R10)
	VMULPS       Z30, Z4, Z4
	VMULPS       Z30, Z5, Z5
	VMULPS       Z30, Z6, Z6
	VMULPS       Z30, Z7, Z7
	VADDPS       Z4, Z0, Z0
	VADDPS       Z5, Z1, Z1
	VADDPS       Z6, Z2, Z2
	VADDPS       Z7, Z3, Z3
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         R12
	JNZ          dp64i

dp64st:
	VMOVUPS Z0, (DI)(AX*1)
	VMOVUPS Z1, 64(DI)(AX*1)
	VMOVUPS Z2, 128(DI)(AX*1)
	VMOVUPS Z3, 192(DI)(AX*1)
	ADDQ    $256, AX
	JMP     dp64

dp16:
	CMPQ   AX, DX
	JGE    dpdone
	VXORPS Z0, Z0, Z0
	LEAQ   (SI)(AX*1), R10
	MOVQ   BX, R11
	MOVQ   CX, R12
	TESTQ  R12, R12
	JEQ    dp16st

dp16i:
	VBROADCASTSS (R11), Z30
	VMULPS       (R10), Z31, Z4
	VMOVUPS      Z4, (R10)
	VMULPS       Z30, Z4, Z4
	VADDPS       Z4, Z0, Z0
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         R12
	JNZ          dp16i

dp16st:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     dp16

dpdone:
	VZEROUPPER
	RET

// func deltaUpdateOut(s, k, q, d, o *float32, dk, dv int, scale float32)
// For every key row i < dk of s [dk, dv], with qi = q[i]*scale:
// s[i,j] += k[i]*d[j], then o[j] = sum over i in order of s[i,j]*qi
// (from 0).
TEXT ·deltaUpdateOut(SB), NOSPLIT, $0-60
	MOVQ         s+0(FP), SI
	MOVQ         k+8(FP), BX
	MOVQ         q+16(FP), R13
	MOVQ         d+24(FP), R14
	MOVQ         o+32(FP), DI
	MOVQ         dk+40(FP), CX
	MOVQ         dv+48(FP), DX
	VBROADCASTSS scale+56(FP), X31
	SHLQ         $2, DX
	XORQ         AX, AX
	MOVQ         DX, R9
	ANDQ         $-256, R9

du64:
	CMPQ    AX, R9
	JGE     du16
	VXORPS  Z0, Z0, Z0
	VXORPS  Z1, Z1, Z1
	VXORPS  Z2, Z2, Z2
	VXORPS  Z3, Z3, Z3
	VMOVUPS (R14)(AX*1), Z8
	VMOVUPS 64(R14)(AX*1), Z9
	VMOVUPS 128(R14)(AX*1), Z10
	VMOVUPS 192(R14)(AX*1), Z11
	LEAQ    (SI)(AX*1), R10
	MOVQ    BX, R11
	MOVQ    R13, R15
	MOVQ    CX, R12
	TESTQ   R12, R12
	JEQ     du64st

du64i:
	VBROADCASTSS (R11), Z30
	VMOVSS       (R15), X29
	VMULSS       X31, X29, X29
	VBROADCASTSS X29, Z29
	VMULPS       Z30, Z8, Z4
	VMULPS       Z30, Z9, Z5
	VMULPS       Z30, Z10, Z6
	VMULPS       Z30, Z11, Z7
	VADDPS       (R10), Z4, Z4
	VADDPS       64(R10), Z5, Z5
	VADDPS       128(R10), Z6, Z6
	VADDPS       192(R10), Z7, Z7
	VMOVUPS      Z4, (R10)
	VMOVUPS      Z5, 64(R10)
	VMOVUPS      Z6, 128(R10)
	VMOVUPS      Z7, 192(R10)
	VMULPS       Z29, Z4, Z4
	VMULPS       Z29, Z5, Z5
	VMULPS       Z29, Z6, Z6
	VMULPS       Z29, Z7, Z7
	VADDPS       Z4, Z0, Z0
	VADDPS       Z5, Z1, Z1
	VADDPS       Z6, Z2, Z2
	VADDPS       Z7, Z3, Z3
	ADDQ         DX, R10
	ADDQ         $4, R11
	ADDQ         $4, R15
	DECQ         R12
	JNZ          du64i

du64st:
	VMOVUPS Z0, (DI)(AX*1)
	VMOVUPS Z1, 64(DI)(AX*1)
	VMOVUPS Z2, 128(DI)(AX*1)
	VMOVUPS Z3, 192(DI)(AX*1)
	ADDQ    $256, AX
	JMP     du64

du16:
	CMPQ    AX, DX
	JGE     dudone
	VXORPS  Z0, Z0, Z0
	VMOVUPS (R14)(AX*1), Z8
	LEAQ    (SI)(AX*1), R10
	MOVQ    BX, R11
	MOVQ    R13, R15
	MOVQ    CX, R12
	TESTQ   R12, R12
	JEQ     du16st

du16i:
	VBROADCASTSS (R11), Z30
	VMOVSS       (R15), X29
	VMULSS       X31, X29, X29
	VBROADCASTSS X29, Z29
	VMULPS       Z30, Z8, Z4
	VADDPS       (R10), Z4, Z4
	VMOVUPS      Z4, (R10)
	VMULPS       Z29, Z4, Z4
	VADDPS       Z4, Z0, Z0
	ADDQ         DX, R10
	ADDQ         $4, R11
	ADDQ         $4, R15
	DECQ         R12
	JNZ          du16i

du16st:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     du16

dudone:
	VZEROUPPER
	RET

// func gemmF32(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32)
// C[i,j] = fma(A[i,p], B[p,j], c) for p = 0..k-1 in order, from c =
// beta*C[i,j] (rounded), for i < m, j < n (n a multiple of 16; strides in
// floats). Tiles of 4 rows x 64
// columns keep 16 accumulators; 1-row and 16-column tiles take the rest.
// Every element is one fused chain in p order, so the tiling does not
// change its bits (gemmF32Go).
TEXT ·gemmF32(SB), NOSPLIT, $0-76
	MOVQ c+0(FP), DI
	MOVQ b+16(FP), BX
	MOVQ n+40(FP), DX
	MOVQ lda+48(FP), R9
	MOVQ ldb+56(FP), R10
	MOVQ ldc+64(FP), R11
	VBROADCASTSS beta+72(FP), Z24
	SHLQ $2, DX
	SHLQ $2, R9
	SHLQ $2, R10
	SHLQ $2, R11
	XORQ AX, AX

gc64:
	LEAQ 256(AX), R12
	CMPQ R12, DX
	JGT  gc16
	MOVQ a+8(FP), SI
	MOVQ m+24(FP), R8
	LEAQ (DI)(AX*1), R12

gr4x64:
	CMPQ    R8, $4
	JLT     gr1x64
	LEAQ    (R12)(R11*2), R15
	VMOVUPS (R12), Z0
	VMOVUPS 64(R12), Z1
	VMOVUPS 128(R12), Z2
	VMOVUPS 192(R12), Z3
	VMOVUPS (R12)(R11*1), Z4
	VMOVUPS 64(R12)(R11*1), Z5
	VMOVUPS 128(R12)(R11*1), Z6
	VMOVUPS 192(R12)(R11*1), Z7
	VMOVUPS (R15), Z8
	VMOVUPS 64(R15), Z9
	VMOVUPS 128(R15), Z10
	VMOVUPS 192(R15), Z11
	VMOVUPS (R15)(R11*1), Z12
	VMOVUPS 64(R15)(R11*1), Z13
	VMOVUPS 128(R15)(R11*1), Z14
	VMOVUPS 192(R15)(R11*1), Z15
	VMULPS  Z24, Z0, Z0
	VMULPS  Z24, Z1, Z1
	VMULPS  Z24, Z2, Z2
	VMULPS  Z24, Z3, Z3
	VMULPS  Z24, Z4, Z4
	VMULPS  Z24, Z5, Z5
	VMULPS  Z24, Z6, Z6
	VMULPS  Z24, Z7, Z7
	VMULPS  Z24, Z8, Z8
	VMULPS  Z24, Z9, Z9
	VMULPS  Z24, Z10, Z10
	VMULPS  Z24, Z11, Z11
	VMULPS  Z24, Z12, Z12
	VMULPS  Z24, Z13, Z13
	VMULPS  Z24, Z14, Z14
	VMULPS  Z24, Z15, Z15
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     gs4x64
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14
	LEAQ    (SI)(R9*2), R15

gk4x64:
	VMOVUPS      (R13), Z16
	VMOVUPS      64(R13), Z17
	VMOVUPS      128(R13), Z18
	VMOVUPS      192(R13), Z19
	VBROADCASTSS (R14), Z20
	VBROADCASTSS (R14)(R9*1), Z21
	VBROADCASTSS (R15), Z22
	VBROADCASTSS (R15)(R9*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         R10, R13
	ADDQ         $4, R14
	ADDQ         $4, R15
	DECQ         CX
	JNZ          gk4x64

gs4x64:
	LEAQ    (R12)(R11*2), R15
	VMOVUPS Z0, (R12)
	VMOVUPS Z1, 64(R12)
	VMOVUPS Z2, 128(R12)
	VMOVUPS Z3, 192(R12)
	VMOVUPS Z4, (R12)(R11*1)
	VMOVUPS Z5, 64(R12)(R11*1)
	VMOVUPS Z6, 128(R12)(R11*1)
	VMOVUPS Z7, 192(R12)(R11*1)
	VMOVUPS Z8, (R15)
	VMOVUPS Z9, 64(R15)
	VMOVUPS Z10, 128(R15)
	VMOVUPS Z11, 192(R15)
	VMOVUPS Z12, (R15)(R11*1)
	VMOVUPS Z13, 64(R15)(R11*1)
	VMOVUPS Z14, 128(R15)(R11*1)
	VMOVUPS Z15, 192(R15)(R11*1)
	LEAQ    (R15)(R11*2), R12
	LEAQ    (SI)(R9*4), SI
	SUBQ    $4, R8
	JMP     gr4x64

gr1x64:
	TESTQ   R8, R8
	JEQ     gn64
	VMOVUPS (R12), Z0
	VMOVUPS 64(R12), Z1
	VMOVUPS 128(R12), Z2
	VMOVUPS 192(R12), Z3
	VMULPS  Z24, Z0, Z0
	VMULPS  Z24, Z1, Z1
	VMULPS  Z24, Z2, Z2
	VMULPS  Z24, Z3, Z3
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     gs1x64
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14

gk1x64:
	VBROADCASTSS (R14), Z20
	VFMADD231PS  (R13), Z20, Z0
	VFMADD231PS  64(R13), Z20, Z1
	VFMADD231PS  128(R13), Z20, Z2
	VFMADD231PS  192(R13), Z20, Z3
	ADDQ         R10, R13
	ADDQ         $4, R14
	DECQ         CX
	JNZ          gk1x64

gs1x64:
	VMOVUPS Z0, (R12)
	VMOVUPS Z1, 64(R12)
	VMOVUPS Z2, 128(R12)
	VMOVUPS Z3, 192(R12)
	ADDQ    R11, R12
	ADDQ    R9, SI
	DECQ    R8
	JMP     gr1x64

gn64:
	ADDQ $256, AX
	JMP  gc64

gc16:
	CMPQ AX, DX
	JGE  gdone
	MOVQ a+8(FP), SI
	MOVQ m+24(FP), R8
	LEAQ (DI)(AX*1), R12

gr4x16:
	CMPQ    R8, $4
	JLT     gr1x16
	LEAQ    (R12)(R11*2), R15
	VMOVUPS (R12), Z0
	VMOVUPS (R12)(R11*1), Z1
	VMOVUPS (R15), Z2
	VMOVUPS (R15)(R11*1), Z3
	VMULPS  Z24, Z0, Z0
	VMULPS  Z24, Z1, Z1
	VMULPS  Z24, Z2, Z2
	VMULPS  Z24, Z3, Z3
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     gs4x16
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14
	LEAQ    (SI)(R9*2), R15

gk4x16:
	VMOVUPS      (R13), Z16
	VBROADCASTSS (R14), Z20
	VBROADCASTSS (R14)(R9*1), Z21
	VBROADCASTSS (R15), Z22
	VBROADCASTSS (R15)(R9*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z1
	VFMADD231PS  Z16, Z22, Z2
	VFMADD231PS  Z16, Z23, Z3
	ADDQ         R10, R13
	ADDQ         $4, R14
	ADDQ         $4, R15
	DECQ         CX
	JNZ          gk4x16

gs4x16:
	LEAQ    (R12)(R11*2), R15
	VMOVUPS Z0, (R12)
	VMOVUPS Z1, (R12)(R11*1)
	VMOVUPS Z2, (R15)
	VMOVUPS Z3, (R15)(R11*1)
	LEAQ    (R15)(R11*2), R12
	LEAQ    (SI)(R9*4), SI
	SUBQ    $4, R8
	JMP     gr4x16

gr1x16:
	TESTQ   R8, R8
	JEQ     gn16
	VMOVUPS (R12), Z0
	VMULPS  Z24, Z0, Z0
	MOVQ    k+32(FP), CX
	TESTQ   CX, CX
	JEQ     gs1x16
	LEAQ    (BX)(AX*1), R13
	MOVQ    SI, R14

gk1x16:
	VBROADCASTSS (R14), Z20
	VFMADD231PS  (R13), Z20, Z0
	ADDQ         R10, R13
	ADDQ         $4, R14
	DECQ         CX
	JNZ          gk1x16

gs1x16:
	VMOVUPS Z0, (R12)
	ADDQ    R11, R12
	ADDQ    R9, SI
	DECQ    R8
	JMP     gr1x16

gn16:
	ADDQ $64, AX
	JMP  gc16

gdone:
	VZEROUPPER
	RET

// func convRow(o, win, x, taps *float32, n, c, k int)
// One row of short_conv over n channels (a multiple of 16): o[i] = (sum
// over j < k-1 in order, from 0, of win[j*c+i]*taps[j*c+i]) +
// x[i]*taps[(k-1)*c+i], each product rounded, then added (convRowGo).
TEXT ·convRow(SB), NOSPLIT, $0-56
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

cr16:
	CMPQ   AX, CX
	JGE    crdone
	VXORPS Z0, Z0, Z0
	LEAQ   (SI)(AX*1), R10
	LEAQ   (R8)(AX*1), R11
	MOVQ   R9, R12
	TESTQ  R12, R12
	JEQ    crx

crj:
	VMOVUPS (R10), Z1
	VMULPS  (R11), Z1, Z1
	VADDPS  Z1, Z0, Z0
	ADDQ    DX, R10
	ADDQ    DX, R11
	DECQ    R12
	JNZ     crj

crx:
	VMOVUPS (BX)(AX*1), Z1
	VMULPS  (R11), Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     cr16

crdone:
	VZEROUPPER
	RET
