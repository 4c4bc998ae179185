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

// func vecMatAcc(y, a, x *float32, m, n int)
// y[j] += a[i]*x[i*n+j] for i < m in order, for every j < n (n a multiple
// of 16).
TEXT ·vecMatAcc(SB), NOSPLIT, $0-40
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), BX
	MOVQ x+16(FP), SI
	MOVQ m+24(FP), CX
	MOVQ n+32(FP), DX
	SHLQ $2, DX
	XORQ AX, AX
	MOVQ DX, R9
	ANDQ $-256, R9

vm64:
	CMPQ    AX, R9
	JGE     vm16
	VMOVUPS (DI)(AX*1), Z0
	VMOVUPS 64(DI)(AX*1), Z1
	VMOVUPS 128(DI)(AX*1), Z2
	VMOVUPS 192(DI)(AX*1), Z3
	LEAQ    (SI)(AX*1), R10
	MOVQ    BX, R11
	MOVQ    CX, R12
	TESTQ   R12, R12
	JEQ     vm64st

vm64i:
	VBROADCASTSS (R11), Z30
	VMULPS       (R10), Z30, Z4
	VMULPS       64(R10), Z30, Z5
	VMULPS       128(R10), Z30, Z6
	VMULPS       192(R10), Z30, Z7
	VADDPS       Z4, Z0, Z0
	VADDPS       Z5, Z1, Z1
	VADDPS       Z6, Z2, Z2
	VADDPS       Z7, Z3, Z3
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         R12
	JNZ          vm64i

vm64st:
	VMOVUPS Z0, (DI)(AX*1)
	VMOVUPS Z1, 64(DI)(AX*1)
	VMOVUPS Z2, 128(DI)(AX*1)
	VMOVUPS Z3, 192(DI)(AX*1)
	ADDQ    $256, AX
	JMP     vm64

vm16:
	CMPQ    AX, DX
	JGE     vmdone
	VMOVUPS (DI)(AX*1), Z0
	LEAQ    (SI)(AX*1), R10
	MOVQ    BX, R11
	MOVQ    CX, R12
	TESTQ   R12, R12
	JEQ     vm16st

vm16i:
	VBROADCASTSS (R11), Z30
	VMULPS       (R10), Z30, Z4
	VADDPS       Z4, Z0, Z0
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         R12
	JNZ          vm16i

vm16st:
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	JMP     vm16

vmdone:
	VZEROUPPER
	RET
