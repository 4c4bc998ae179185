#include "textflag.h"
#include "lanes_amd64.h"

// AVX-512 (F, BW, VL; IQ4_XS also BMI2's PDEP) decode kernels for Q3_K,
// IQ4_XS and Q2_K weights against Q8_K activations: 4 weight rows and one
// token per call, bit for bit dotQ3K, dotIQ4XS and dotQ2K, and for Q2_K
// also one row and four tokens (dotQ2K too). As in
// kquant_amd64.s, a super-block's weights are unpacked two 32-element
// chunks per 512-bit register (chunk 2p in the low 256 bits, 2p+1 in the
// high), multiplied with the signed activations by VPMADDUBSW (pairs of
// products as int16, exact: no pair can saturate) and weighted by the
// sub-block scales, as words picked by VPERMW, with VPMADDWD; each int32
// lane then holds the 4 products of one chunk at 4l..4l+3, and adding the
// chunks' lanes and the two halves gives exactly kLanes. The float work is
// the reference's. Q3_K, IQ4_XS, lane for lane: the super-block's d as the
// float32 product of the activations' d and the fp16 weight scale, one
// fused multiply-add per lane and super-block in super-block order, and
// hsum8 (HSUM8) at the end. Q2_K (the order of ggml's repacked kernels):
// the lanes are reduced to whole integer sums, of the super-block (one
// token) or of each half of 128 elements (four tokens), and go into one
// float lane per row or token for the scaled quants (acc) and one for the
// mins (accm), the result acc - accm.

// Word indices for VPERMW. kq16idx: chunk pair p takes scale 4p+w/8 for
// word w (one scale per 16 elements: Q3_K, Q2_K); kq8idx: scale 2p+w/16
// (one per 32 elements: IQ4_XS).
DATA kq16idx<>+0(SB)/8, $0x0000000000000000
DATA kq16idx<>+8(SB)/8, $0x0000000000000000
DATA kq16idx<>+16(SB)/8, $0x0001000100010001
DATA kq16idx<>+24(SB)/8, $0x0001000100010001
DATA kq16idx<>+32(SB)/8, $0x0002000200020002
DATA kq16idx<>+40(SB)/8, $0x0002000200020002
DATA kq16idx<>+48(SB)/8, $0x0003000300030003
DATA kq16idx<>+56(SB)/8, $0x0003000300030003
DATA kq16idx<>+64(SB)/8, $0x0004000400040004
DATA kq16idx<>+72(SB)/8, $0x0004000400040004
DATA kq16idx<>+80(SB)/8, $0x0005000500050005
DATA kq16idx<>+88(SB)/8, $0x0005000500050005
DATA kq16idx<>+96(SB)/8, $0x0006000600060006
DATA kq16idx<>+104(SB)/8, $0x0006000600060006
DATA kq16idx<>+112(SB)/8, $0x0007000700070007
DATA kq16idx<>+120(SB)/8, $0x0007000700070007
DATA kq16idx<>+128(SB)/8, $0x0008000800080008
DATA kq16idx<>+136(SB)/8, $0x0008000800080008
DATA kq16idx<>+144(SB)/8, $0x0009000900090009
DATA kq16idx<>+152(SB)/8, $0x0009000900090009
DATA kq16idx<>+160(SB)/8, $0x000a000a000a000a
DATA kq16idx<>+168(SB)/8, $0x000a000a000a000a
DATA kq16idx<>+176(SB)/8, $0x000b000b000b000b
DATA kq16idx<>+184(SB)/8, $0x000b000b000b000b
DATA kq16idx<>+192(SB)/8, $0x000c000c000c000c
DATA kq16idx<>+200(SB)/8, $0x000c000c000c000c
DATA kq16idx<>+208(SB)/8, $0x000d000d000d000d
DATA kq16idx<>+216(SB)/8, $0x000d000d000d000d
DATA kq16idx<>+224(SB)/8, $0x000e000e000e000e
DATA kq16idx<>+232(SB)/8, $0x000e000e000e000e
DATA kq16idx<>+240(SB)/8, $0x000f000f000f000f
DATA kq16idx<>+248(SB)/8, $0x000f000f000f000f
GLOBL kq16idx<>(SB), RODATA|NOPTR, $256

DATA kq8idx<>+0(SB)/8, $0x0000000000000000
DATA kq8idx<>+8(SB)/8, $0x0000000000000000
DATA kq8idx<>+16(SB)/8, $0x0000000000000000
DATA kq8idx<>+24(SB)/8, $0x0000000000000000
DATA kq8idx<>+32(SB)/8, $0x0001000100010001
DATA kq8idx<>+40(SB)/8, $0x0001000100010001
DATA kq8idx<>+48(SB)/8, $0x0001000100010001
DATA kq8idx<>+56(SB)/8, $0x0001000100010001
DATA kq8idx<>+64(SB)/8, $0x0002000200020002
DATA kq8idx<>+72(SB)/8, $0x0002000200020002
DATA kq8idx<>+80(SB)/8, $0x0002000200020002
DATA kq8idx<>+88(SB)/8, $0x0002000200020002
DATA kq8idx<>+96(SB)/8, $0x0003000300030003
DATA kq8idx<>+104(SB)/8, $0x0003000300030003
DATA kq8idx<>+112(SB)/8, $0x0003000300030003
DATA kq8idx<>+120(SB)/8, $0x0003000300030003
DATA kq8idx<>+128(SB)/8, $0x0004000400040004
DATA kq8idx<>+136(SB)/8, $0x0004000400040004
DATA kq8idx<>+144(SB)/8, $0x0004000400040004
DATA kq8idx<>+152(SB)/8, $0x0004000400040004
DATA kq8idx<>+160(SB)/8, $0x0005000500050005
DATA kq8idx<>+168(SB)/8, $0x0005000500050005
DATA kq8idx<>+176(SB)/8, $0x0005000500050005
DATA kq8idx<>+184(SB)/8, $0x0005000500050005
DATA kq8idx<>+192(SB)/8, $0x0006000600060006
DATA kq8idx<>+200(SB)/8, $0x0006000600060006
DATA kq8idx<>+208(SB)/8, $0x0006000600060006
DATA kq8idx<>+216(SB)/8, $0x0006000600060006
DATA kq8idx<>+224(SB)/8, $0x0007000700070007
DATA kq8idx<>+232(SB)/8, $0x0007000700070007
DATA kq8idx<>+240(SB)/8, $0x0007000700070007
DATA kq8idx<>+248(SB)/8, $0x0007000700070007
GLOBL kq8idx<>(SB), RODATA|NOPTR, $256

// kq2shift: word shift counts for VPSRLVW that bring the 2-bit quants of a
// chunk pair to bits 0-1 of each byte: chunks 0,1 of a 128-element half
// (0 for the low 16 words, 2 for the high), then chunks 2,3 (4, 6).
DATA kq2shift<>+0(SB)/8, $0x0000000000000000
DATA kq2shift<>+8(SB)/8, $0x0000000000000000
DATA kq2shift<>+16(SB)/8, $0x0000000000000000
DATA kq2shift<>+24(SB)/8, $0x0000000000000000
DATA kq2shift<>+32(SB)/8, $0x0002000200020002
DATA kq2shift<>+40(SB)/8, $0x0002000200020002
DATA kq2shift<>+48(SB)/8, $0x0002000200020002
DATA kq2shift<>+56(SB)/8, $0x0002000200020002
DATA kq2shift<>+64(SB)/8, $0x0004000400040004
DATA kq2shift<>+72(SB)/8, $0x0004000400040004
DATA kq2shift<>+80(SB)/8, $0x0004000400040004
DATA kq2shift<>+88(SB)/8, $0x0004000400040004
DATA kq2shift<>+96(SB)/8, $0x0006000600060006
DATA kq2shift<>+104(SB)/8, $0x0006000600060006
DATA kq2shift<>+112(SB)/8, $0x0006000600060006
DATA kq2shift<>+120(SB)/8, $0x0006000600060006
GLOBL kq2shift<>(SB), RODATA|NOPTR, $128

// kq3hbit: for Q3_K chunk pair p, the hmask bit of chunk 2p in the low 32
// bytes and of chunk 2p+1 in the high 32 (bit c for chunk c).
DATA kq3hbit<>+0(SB)/8, $0x0101010101010101
DATA kq3hbit<>+8(SB)/8, $0x0101010101010101
DATA kq3hbit<>+16(SB)/8, $0x0101010101010101
DATA kq3hbit<>+24(SB)/8, $0x0101010101010101
DATA kq3hbit<>+32(SB)/8, $0x0202020202020202
DATA kq3hbit<>+40(SB)/8, $0x0202020202020202
DATA kq3hbit<>+48(SB)/8, $0x0202020202020202
DATA kq3hbit<>+56(SB)/8, $0x0202020202020202
DATA kq3hbit<>+64(SB)/8, $0x0404040404040404
DATA kq3hbit<>+72(SB)/8, $0x0404040404040404
DATA kq3hbit<>+80(SB)/8, $0x0404040404040404
DATA kq3hbit<>+88(SB)/8, $0x0404040404040404
DATA kq3hbit<>+96(SB)/8, $0x0808080808080808
DATA kq3hbit<>+104(SB)/8, $0x0808080808080808
DATA kq3hbit<>+112(SB)/8, $0x0808080808080808
DATA kq3hbit<>+120(SB)/8, $0x0808080808080808
DATA kq3hbit<>+128(SB)/8, $0x1010101010101010
DATA kq3hbit<>+136(SB)/8, $0x1010101010101010
DATA kq3hbit<>+144(SB)/8, $0x1010101010101010
DATA kq3hbit<>+152(SB)/8, $0x1010101010101010
DATA kq3hbit<>+160(SB)/8, $0x2020202020202020
DATA kq3hbit<>+168(SB)/8, $0x2020202020202020
DATA kq3hbit<>+176(SB)/8, $0x2020202020202020
DATA kq3hbit<>+184(SB)/8, $0x2020202020202020
DATA kq3hbit<>+192(SB)/8, $0x4040404040404040
DATA kq3hbit<>+200(SB)/8, $0x4040404040404040
DATA kq3hbit<>+208(SB)/8, $0x4040404040404040
DATA kq3hbit<>+216(SB)/8, $0x4040404040404040
DATA kq3hbit<>+224(SB)/8, $0x8080808080808080
DATA kq3hbit<>+232(SB)/8, $0x8080808080808080
DATA kq3hbit<>+240(SB)/8, $0x8080808080808080
DATA kq3hbit<>+248(SB)/8, $0x8080808080808080
GLOBL kq3hbit<>(SB), RODATA|NOPTR, $256

// kiq4shift: word shift counts that bring IQ4_XS's high nibbles down in
// 128-bit lanes 1 and 3 (the second 16 elements of each chunk).
DATA kiq4shift<>+0(SB)/8, $0x0000000000000000
DATA kiq4shift<>+8(SB)/8, $0x0000000000000000
DATA kiq4shift<>+16(SB)/8, $0x0004000400040004
DATA kiq4shift<>+24(SB)/8, $0x0004000400040004
DATA kiq4shift<>+32(SB)/8, $0x0000000000000000
DATA kiq4shift<>+40(SB)/8, $0x0000000000000000
DATA kiq4shift<>+48(SB)/8, $0x0004000400040004
DATA kiq4shift<>+56(SB)/8, $0x0004000400040004
GLOBL kiq4shift<>(SB), RODATA|NOPTR, $64

// kiq4lev: the 16 IQ4_NL levels (tensor.IQ4NLLevel) as bytes, in every
// 128-bit lane, for VPSHUFB.
DATA kiq4lev<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4lev<>+8(SB)/8, $0x7159453526190d01
DATA kiq4lev<>+16(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4lev<>+24(SB)/8, $0x7159453526190d01
DATA kiq4lev<>+32(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4lev<>+40(SB)/8, $0x7159453526190d01
DATA kiq4lev<>+48(SB)/8, $0xf6eaddcfbfad9881
DATA kiq4lev<>+56(SB)/8, $0x7159453526190d01
GLOBL kiq4lev<>(SB), RODATA|NOPTR, $64

// Q3KSC unpacks the 16 signed 6-bit scales of the Q3_K super-block at
// (row) (12 bytes at 96(row), tensor.Q3KScales) into Y25 as words. Needs
// X0 = 0x20 bytes; clobbers AX, R8, R9, R14, R15, X9.
#define Q3KSC(row) \
	Q3KSCALEBYTES(row, X9); \
	VPSUBB    X0, X9, X9; \
	VPMOVSXBW X9, Y25

// Q3KPAIR adds the scaled lanes of one chunk pair of a Q3_K super-block
// into Z1. q holds the pair's 32 quant bytes in both halves, shift its
// kq2shift counts, hbit its kq3hbit bits; Z10 = the hmask in both halves.
// The unsigned weights w+4 = q2 | hbit<<2 (0..7) go through VPMADDUBSW,
// and p4 (4 times the activations' pair sums) is subtracted from the int16
// pair sums, which leaves w's exactly. Needs Y25 = the scales as words,
// Z30 = 0x03 bytes, Z31 = 0x04 bytes; clobbers K1, Z8, Z9.
#define Q3KPAIR(q, shift, hbit, act, p4, idx) \
	VPSRLVW    shift, q, Z8; \
	VPANDQ     Z30, Z8, Z8; \
	VPTESTMB   hbit, Z10, K1; \
	VPADDB     Z31, Z8, K1, Z8; \
	VPMADDUBSW act, Z8, Z8; \
	VPSUBW     p4, Z8, Z8; \
	VPERMW     Z25, idx, Z9; \
	VPMADDWD   Z9, Z8, Z8; \
	VPADDD     Z8, Z1, Z1

// Q3KROW accumulates the Q3_K super-block at (row) into acc. Needs the
// token's activations in Z20..Z23, their p4 in Z4..Z7, y.d in Y24, Z2, Z3
// = kq2shift, Z12..Z15 = kq3hbit, Z26..Z29 = kq16idx, X0, Z30, Z31.
// Clobbers AX, R8, R9, R14, R15, K1, Z1, Z8..Z11, Z25.
#define Q3KROW(row, acc) \
	Q3KSC(row); \
	VBROADCASTI64X4 (row), Z10; \
	VBROADCASTI64X4 32(row), Z11; \
	VPXORD    Z1, Z1, Z1; \
	Q3KPAIR(Z11, Z2, Z12, Z20, Z4, Z26); \
	Q3KPAIR(Z11, Z3, Z13, Z21, Z5, Z27); \
	VBROADCASTI64X4 64(row), Z11; \
	Q3KPAIR(Z11, Z2, Z14, Z22, Z6, Z28); \
	Q3KPAIR(Z11, Z3, Z15, Z23, Z7, Z29); \
	VEXTRACTI64X4 $1, Z1, Y8; \
	VPADDD    Y8, Y1, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VPBROADCASTW 108(row), X9; \
	VCVTPH2PS X9, Y9; \
	VMULPS    Y24, Y9, Y9; \
	VFMADD231PS Y8, Y9, acc

// func q3KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ3K(row i, x), bit for bit, for the 4 Q3_K rows
// w + i*wstride (strides in bytes), x being nb Q8_K blocks: quants xq (256
// per block) and scales xd (float32).
TEXT ·q3KDot4x1(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	VMOVDQU64 kq16idx<>+0(SB), Z26
	VMOVDQU64 kq16idx<>+64(SB), Z27
	VMOVDQU64 kq16idx<>+128(SB), Z28
	VMOVDQU64 kq16idx<>+192(SB), Z29
	VMOVDQU64 kq2shift<>+0(SB), Z2
	VMOVDQU64 kq2shift<>+64(SB), Z3
	VMOVDQU64 kq3hbit<>+0(SB), Z12
	VMOVDQU64 kq3hbit<>+64(SB), Z13
	VMOVDQU64 kq3hbit<>+128(SB), Z14
	VMOVDQU64 kq3hbit<>+192(SB), Z15
	MOVL $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL $0x04040404, AX
	VPBROADCASTD AX, Z31
	MOVL $0x20202020, AX
	VMOVD AX, X0
	VPBROADCASTD X0, X0
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   q3kdone
q3kloop:
	VMOVDQU64 (DI), Z20
	VMOVDQU64 64(DI), Z21
	VMOVDQU64 128(DI), Z22
	VMOVDQU64 192(DI), Z23
	VPMADDUBSW Z20, Z31, Z4
	VPMADDUBSW Z21, Z31, Z5
	VPMADDUBSW Z22, Z31, Z6
	VPMADDUBSW Z23, Z31, Z7
	VBROADCASTSS (DX), Y24
	Q3KROW(SI, Y16)
	Q3KROW(R10, Y17)
	Q3KROW(R11, Y18)
	Q3KROW(R12, Y19)
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
	KQOUT
	VZEROUPPER
	RET

// IQ4CONSTS loads the IQ4_XS kernels' constants: the scale word indices
// (Z26..Z29), the nibble shifts (Z2), the levels (Z31) and 0x0f bytes (Z30).
// Clobbers AX.
#define IQ4CONSTS \
	VMOVDQU64 kq8idx<>+0(SB), Z26; \
	VMOVDQU64 kq8idx<>+64(SB), Z27; \
	VMOVDQU64 kq8idx<>+128(SB), Z28; \
	VMOVDQU64 kq8idx<>+192(SB), Z29; \
	VMOVDQU64 kiq4shift<>+0(SB), Z2; \
	VMOVDQU64 kiq4lev<>+0(SB), Z31; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z30

// IQ4SC unpacks the 8 6-bit scales of the IQ4_XS super-block at (row)
// (low nibbles at 4(row), high bit pairs at 2(row); tensor.IQ4XSScale,
// minus 32) into X25 as words. Needs X0 = 0x20 bytes; clobbers AX, R8,
// R14, R15, X9.
#define IQ4SC(row) \
	IQ4XSSCALEBYTES(row); \
	VMOVQ     AX, X9; \
	VPSUBB    X0, X9, X9; \
	VPMOVSXBW X9, X25

// IQ4PAIR adds the scaled lanes of chunks 2p, 2p+1 of the IQ4_XS
// super-block at (row) (their 32 nibble bytes at off(row)) into Z1. The
// nibbles are spread to 128-bit lanes [lo, hi] of chunk 2p and [lo, hi] of
// chunk 2p+1 and looked up as signed levels; VPMADDUBSW takes their
// magnitudes (at most 127) against the activations negated where the
// level is negative (nact = -act), so the int16 pair sums are exact. Needs
// X25 = the scales as words, Z2 = kiq4shift, Z30 = 0x0f bytes, Z31 =
// kiq4lev; clobbers K1, Z8, Z9.
#define IQ4PAIR(row, off, act, nact, idx) \
	VMOVDQU    off(row), Y8; \
	VSHUFI64X2 $0x50, Z8, Z8, Z8; \
	VPSRLVW    Z2, Z8, Z8; \
	VPANDQ     Z30, Z8, Z8; \
	VPSHUFB    Z8, Z31, Z8; \
	VPMOVB2M   Z8, K1; \
	VPABSB     Z8, Z8; \
	VPBLENDMB  nact, act, K1, Z9; \
	VPMADDUBSW Z9, Z8, Z8; \
	VPERMW     Z25, idx, Z9; \
	VPMADDWD   Z9, Z8, Z8; \
	VPADDD     Z8, Z1, Z1

// IQ4ROW accumulates the IQ4_XS super-block at (row) into acc. Needs the
// token's activations in Z20..Z23, their negations in Z4..Z7, y.d in Y24,
// Z26..Z29 = kq8idx, X0, Z2, Z30, Z31. Clobbers AX, R8, R14, R15, K1, Z1,
// Z8, Z9, Z25.
#define IQ4ROW(row, acc) \
	IQ4SC(row); \
	VPXORD    Z1, Z1, Z1; \
	IQ4PAIR(row, 8, Z20, Z4, Z26); \
	IQ4PAIR(row, 40, Z21, Z5, Z27); \
	IQ4PAIR(row, 72, Z22, Z6, Z28); \
	IQ4PAIR(row, 104, Z23, Z7, Z29); \
	VEXTRACTI64X4 $1, Z1, Y8; \
	VPADDD    Y8, Y1, Y8; \
	VCVTDQ2PS Y8, Y8; \
	VPBROADCASTW (row), X9; \
	VCVTPH2PS X9, Y9; \
	VMULPS    Y24, Y9, Y9; \
	VFMADD231PS Y8, Y9, acc

// func iq4XSDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// q3KDot4x1 for IQ4_XS rows: out + i*ostride = dotIQ4XS(row i, x), bit for
// bit.
TEXT ·iq4XSDot4x1(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ nb+32(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	IQ4CONSTS
	MOVL $0x20202020, AX
	VMOVD AX, X0
	VPBROADCASTD X0, X0
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   iq4done
iq4loop:
	VMOVDQU64 (DI), Z20
	VMOVDQU64 64(DI), Z21
	VMOVDQU64 128(DI), Z22
	VMOVDQU64 192(DI), Z23
	VPXORD Z8, Z8, Z8
	VPSUBB Z20, Z8, Z4
	VPSUBB Z21, Z8, Z5
	VPSUBB Z22, Z8, Z6
	VPSUBB Z23, Z8, Z7
	VBROADCASTSS (DX), Y24
	IQ4ROW(SI, Y16)
	IQ4ROW(R10, Y17)
	IQ4ROW(R11, Y18)
	IQ4ROW(R12, Y19)
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
	KQOUT
	VZEROUPPER
	RET

// Q2KSC unpacks the 16 scale bytes of the Q2_K super-block at (row): the
// mins (high nibbles) as words into mins, the scales (low nibbles) as
// words into Y31.
#define Q2KSC(row, mins) \
	VPMOVZXBW (row), Y31; \
	VPSRLW    $4, Y31, mins; \
	VPSLLW    $12, Y31, Y31; \
	VPSRLW    $12, Y31, Y31

// Q2KW leaves in Z12 the 2-bit quants of one chunk pair of a Q2_K
// super-block, as unsigned bytes, and in Z13 the pair's scales as words
// (one per 16 elements): q holds the pair's 32 quant bytes in both halves,
// shift its kq2shift counts, idx its kq16idx words. Needs Y31 = the scales
// as words (Q2KSC), Z30 = 0x03 bytes.
#define Q2KW(q, shift, idx) \
	VPSRLVW shift, q, Z12; \
	VPANDQ  Z30, Z12, Z12; \
	VPERMW  Z31, idx, Z13

// Q2KMUL adds (op VPDPWSSD) or sets (op VPMADDWD) in acc the scaled
// products of Q2KW's chunk pair with the activations act: 16 int32 lanes of
// 4 products each. Clobbers Z14.
#define Q2KMUL(op, act, acc) \
	VPMADDUBSW act, Z12, Z14; \
	op         Z13, Z14, acc

// Q2KCONST loads the constants of the Q2_K kernels: Z24, Z25 = kq2shift,
// Z26..Z29 = kq16idx, Z30 = 0x03 bytes.
#define Q2KCONST \
	VMOVDQU64 kq16idx<>+0(SB), Z26; \
	VMOVDQU64 kq16idx<>+64(SB), Z27; \
	VMOVDQU64 kq16idx<>+128(SB), Z28; \
	VMOVDQU64 kq16idx<>+192(SB), Z29; \
	VMOVDQU64 kq2shift<>+0(SB), Z24; \
	VMOVDQU64 kq2shift<>+64(SB), Z25; \
	MOVL $0x03030303, AX; \
	VPBROADCASTD AX, Z30

// Q2KROWH accumulates the Q2_K super-block at (row) against the token's
// activations (DI, 256 quants) and sums (R13, 16 words): the scaled
// products of elements 0..127 into qa and of 128..255 into qb (16 int32
// lanes each), and the mins times the sums into m (8 int32 lanes, lanes
// 0..3 from elements 0..127). Needs Q2KCONST's registers; clobbers Z0,
// Y31, Z12..Z14.
#define Q2KROWH(row, qa, qb, m) \
	Q2KSC(row, Y0); \
	VPMADDWD  (R13), Y0, m; \
	VBROADCASTI64X4 16(row), Z0; \
	Q2KW(Z0, Z24, Z26); \
	Q2KMUL(VPMADDWD, (DI), qa); \
	Q2KW(Z0, Z25, Z27); \
	Q2KMUL(VPDPWSSD, 64(DI), qa); \
	VBROADCASTI64X4 48(row), Z0; \
	Q2KW(Z0, Z24, Z28); \
	Q2KMUL(VPMADDWD, 128(DI), qb); \
	Q2KW(Z0, Z25, Z29); \
	Q2KMUL(VPDPWSSD, 192(DI), qb)

// Q2KHALVES reduces the Q2_K sums of 4 units u (rows of one token, or
// tokens of one row) to Y0 = [q of half 0 of u = 0..3, m of half 0 of
// u = 0..3] and Y4 the same for half 1, as float32: Z16..Z19 hold the
// units' 16 lanes of products of elements 0..127, Z20..Z23 those of
// 128..255, Y8..Y11 their 8 lanes of mins times sums (lanes 0..3 from
// half 0). Clobbers Y1..Y3, Y5..Y7, Y12, Y13.
#define Q2KHALVES \
	VEXTRACTI64X4 $1, Z16, Y0; \
	VPADDD    Y0, Y16, Y0; \
	VEXTRACTI64X4 $1, Z17, Y1; \
	VPADDD    Y1, Y17, Y1; \
	VEXTRACTI64X4 $1, Z18, Y2; \
	VPADDD    Y2, Y18, Y2; \
	VEXTRACTI64X4 $1, Z19, Y3; \
	VPADDD    Y3, Y19, Y3; \
	VEXTRACTI64X4 $1, Z20, Y4; \
	VPADDD    Y4, Y20, Y4; \
	VEXTRACTI64X4 $1, Z21, Y5; \
	VPADDD    Y5, Y21, Y5; \
	VEXTRACTI64X4 $1, Z22, Y6; \
	VPADDD    Y6, Y22, Y6; \
	VEXTRACTI64X4 $1, Z23, Y7; \
	VPADDD    Y7, Y23, Y7; \
	VPHADDD   Y1, Y0, Y0; \
	VPHADDD   Y3, Y2, Y2; \
	VPHADDD   Y2, Y0, Y0; \
	VPHADDD   Y5, Y4, Y4; \
	VPHADDD   Y7, Y6, Y6; \
	VPHADDD   Y6, Y4, Y4; \
	VPHADDD   Y9, Y8, Y8; \
	VPHADDD   Y11, Y10, Y10; \
	VPHADDD   Y10, Y8, Y8; \
	VINSERTI128 $1, X4, Y0, Y12; \
	VPERM2I128  $0x31, Y4, Y0, Y13; \
	VPADDD    Y13, Y12, Y12; \
	VINSERTI128 $1, X8, Y12, Y0; \
	VPERM2I128  $0x31, Y8, Y12, Y4; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y4, Y4

// q2kdeint moves the words [d0, dm0, d1, dm1, d2, dm2, d3, dm3] to
// [d0, d1, d2, d3, dm0, dm1, dm2, dm3] (VPSHUFB).
DATA q2kdeint<>+0(SB)/8, $0x0d0c090805040100
DATA q2kdeint<>+8(SB)/8, $0x0f0e0b0a07060302
GLOBL q2kdeint<>(SB), RODATA|NOPTR, $16

// func q2KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)
// out + i*ostride = dotQ2K(row i, x), bit for bit, for the 4 Q2_K rows
// w + i*wstride (strides in bytes), x being nb Q8_K blocks: quants xq (256
// per block), scales xd (float32) and sums xb (16 int16 per block). The
// float work is q2KDot1x4's with rows in place of tokens: per super-block
// and row the lanes of each half of 128 elements are reduced (VPHADDD) to
// one int32 q and one m; Y0 = [q of half 0 of rows 0..3, m of half 0 of
// rows 0..3] and Y4 the same for half 1, and two VFMADD231PS (half 0, then
// half 1) with [d(r)*d_x, dmin(r)*d_x] go into Y15 = [acc(r), accm(r)];
// the outputs are acc - accm.
TEXT ·q2KDot4x1(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), R8
	MOVQ xq+16(FP), DI
	MOVQ xd+24(FP), DX
	MOVQ xb+32(FP), R13
	MOVQ nb+40(FP), CX
	LEAQ (SI)(R8*1), R10
	LEAQ (SI)(R8*2), R11
	LEAQ (R11)(R8*1), R12
	Q2KCONST
	VXORPS Y15, Y15, Y15
	TESTQ CX, CX
	JEQ   q2kdone
q2kloop:
	Q2KROWH(SI, Z16, Z20, Y8)
	Q2KROWH(R10, Z17, Z21, Y9)
	Q2KROWH(R11, Z18, Z22, Y10)
	Q2KROWH(R12, Z19, Z23, Y11)
	Q2KHALVES
	VMOVD     80(SI), X3
	VPINSRD   $1, 80(R10), X3, X3
	VPINSRD   $2, 80(R11), X3, X3
	VPINSRD   $3, 80(R12), X3, X3
	VPSHUFB   q2kdeint<>(SB), X3, X3
	VCVTPH2PS X3, Y3
	VBROADCASTSS (DX), Y1
	VMULPS    Y1, Y3, Y2
	VFMADD231PS Y0, Y2, Y15
	VFMADD231PS Y4, Y2, Y15
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
	VSUBPS     X0, X15, X0
	VMOVSS     X0, (BX)
	VEXTRACTPS $1, X0, (BX)(R9*1)
	LEAQ       (BX)(R9*2), BX
	VEXTRACTPS $2, X0, (BX)
	VEXTRACTPS $3, X0, (BX)(R9*1)
	VZEROUPPER
	RET

// func q2KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One Q2_K row (w) against four tokens of Q8_K activations, token t's
// quants at xq + t*xqstride, scales at xd + t*xdstride and sums at
// xb + t*xbstride (strides in bytes): out + t*otok = dotQ2K(row, token
// t), bit for bit, each super-block's scales and quants unpacked once for
// the four tokens. Per token and half of 128 elements the lanes are
// reduced (VPHADDD) to one int32 q and one m; Y0 = [q of half 0 of tokens
// 0..3, m of half 0 of tokens 0..3] and Y4 the same for half 1, and two
// VFMADD231PS (half 0, then half 1) with [d*d_x(t), dmin*d_x(t)] go into
// Y15 = [acc(t), accm(t)]; the outputs are acc - accm.
TEXT ·q2KDot1x4(SB), NOSPLIT, $0-80
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
	Q2KCONST
	VXORPS Y15, Y15, Y15
	TESTQ CX, CX
	JEQ   q2k14done
q2k14loop:
	Q2KSC(SI, Y0)
	MOVQ      R13, R9
	VPMADDWD  (R9), Y0, Y8
	ADDQ      R12, R9
	VPMADDWD  (R9), Y0, Y9
	ADDQ      R12, R9
	VPMADDWD  (R9), Y0, Y10
	ADDQ      R12, R9
	VPMADDWD  (R9), Y0, Y11
	VBROADCASTI64X4 16(SI), Z0
	Q2KW(Z0, Z24, Z26)
	Q2KMUL(VPMADDWD, (DI), Z16)
	Q2KMUL(VPMADDWD, (DI)(R10*1), Z17)
	Q2KMUL(VPMADDWD, (DI)(R10*2), Z18)
	Q2KMUL(VPMADDWD, (BX), Z19)
	Q2KW(Z0, Z25, Z27)
	Q2KMUL(VPDPWSSD, 64(DI), Z16)
	Q2KMUL(VPDPWSSD, 64(DI)(R10*1), Z17)
	Q2KMUL(VPDPWSSD, 64(DI)(R10*2), Z18)
	Q2KMUL(VPDPWSSD, 64(BX), Z19)
	VBROADCASTI64X4 48(SI), Z0
	Q2KW(Z0, Z24, Z28)
	Q2KMUL(VPMADDWD, 128(DI), Z20)
	Q2KMUL(VPMADDWD, 128(DI)(R10*1), Z21)
	Q2KMUL(VPMADDWD, 128(DI)(R10*2), Z22)
	Q2KMUL(VPMADDWD, 128(BX), Z23)
	Q2KW(Z0, Z25, Z29)
	Q2KMUL(VPDPWSSD, 192(DI), Z20)
	Q2KMUL(VPDPWSSD, 192(DI)(R10*1), Z21)
	Q2KMUL(VPDPWSSD, 192(DI)(R10*2), Z22)
	Q2KMUL(VPDPWSSD, 192(BX), Z23)
	Q2KHALVES
	MOVQ      DX, AX
	VMOVSS    (AX), X1
	VINSERTPS $0x10, (AX)(R11*1), X1, X1
	VINSERTPS $0x20, (AX)(R11*2), X1, X1
	LEAQ      (AX)(R11*2), AX
	VINSERTPS $0x30, (AX)(R11*1), X1, X1
	VINSERTF128 $1, X1, Y1, Y1
	VMOVD     80(SI), X2
	VPUNPCKLWD X2, X2, X2
	VPUNPCKLDQ X2, X2, X2
	VCVTPH2PS X2, Y2
	VMULPS    Y1, Y2, Y2
	VFMADD231PS Y0, Y2, Y15
	VFMADD231PS Y4, Y2, Y15
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
	VSUBPS     X0, X15, X0
	VMOVSS     X0, (BX)
	ADDQ       R9, BX
	VEXTRACTPS $1, X0, (BX)
	ADDQ       R9, BX
	VEXTRACTPS $2, X0, (BX)
	ADDQ       R9, BX
	VEXTRACTPS $3, X0, (BX)
	VZEROUPPER
	RET

// IQ4TOK4 multiplies one token's activations at act with the unpacked
// level magnitudes Z8 (K1: the negative levels), weighted by the scale
// words Z9, into zacc: the activations are negated where the level is
// negative, as IQ4PAIR does. Needs Z18 = 0; clobbers Z10, Z11.
#define IQ4TOK4(act, zacc) \
	VMOVDQU64  act, Z10; \
	VPSUBB     Z10, Z18, K1, Z10; \
	VPMADDUBSW Z10, Z8, Z11; \
	VPDPWSSD   Z9, Z11, zacc

// IQ4PAIR4 is IQ4PAIR for four tokens: chunks 2p, 2p+1 of the IQ4_XS row
// at SI (nibbles at off(SI)) unpacked once and multiplied with the
// activations of tokens 0..3 at aoff(DI), aoff(DI)(R10*1),
// aoff(DI)(R10*2) and aoff(BX) into Z1, Z3, Z4 and Z5. Needs X25, Z2,
// Z18, Z30, Z31; clobbers K1, Z8..Z11.
#define IQ4PAIR4(off, aoff, idx) \
	VMOVDQU    off(SI), Y8; \
	VSHUFI64X2 $0x50, Z8, Z8, Z8; \
	VPSRLVW    Z2, Z8, Z8; \
	VPANDQ     Z30, Z8, Z8; \
	VPSHUFB    Z8, Z31, Z8; \
	VPMOVB2M   Z8, K1; \
	VPABSB     Z8, Z8; \
	VPERMW     Z25, idx, Z9; \
	IQ4TOK4(aoff(DI), Z1); \
	IQ4TOK4(aoff(DI)(R10*1), Z3); \
	IQ4TOK4(aoff(DI)(R10*2), Z4); \
	IQ4TOK4(aoff(BX), Z5)

// IQ4FIN4 adds one token's super-block lanes zacc into acc as IQ4ROW's
// float work, with the token's y.d at dptr. Needs Y13 = the row's d as
// float32; clobbers Y12, Y14.
#define IQ4FIN4(zacc, yacc, dptr, acc) \
	VEXTRACTI64X4 $1, zacc, Y12; \
	VPADDD    Y12, yacc, Y12; \
	VCVTDQ2PS Y12, Y12; \
	VBROADCASTSS dptr, Y14; \
	VMULPS    Y14, Y13, Y14; \
	VFMADD231PS Y12, Y14, acc

// IQ4FIN0123 is IQ4FIN4 for tokens 0..3 (their scales at DX, DX+R11,
// DX+2*R11 and R12) of the super-block at SI.
#define IQ4FIN0123 \
	VPBROADCASTW (SI), X13; \
	VCVTPH2PS X13, Y13; \
	IQ4FIN4(Z1, Y1, (DX), Y16); \
	IQ4FIN4(Z3, Y3, (DX)(R11*1), Y17); \
	IQ4FIN4(Z4, Y4, (DX)(R11*2), Y19); \
	IQ4FIN4(Z5, Y5, (R12), Y20)

// func iq4XSDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One IQ4_XS row (w) against four tokens of Q8_K activations (token t's
// quants at xq + t*xqstride, scale at xd + t*xdstride; the sums are not
// used): out + t*otok = dotIQ4XS(row, token t), bit for bit
// iq4XSDot4x1's, each super-block's scales and levels unpacked once for
// the four tokens.
TEXT ·iq4XSDot1x4(SB), NOSPLIT, $0-80
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
	IQ4CONSTS
	MOVL $0x20202020, AX
	VMOVD AX, X0
	VPBROADCASTD X0, X0
	VPXORD Z18, Z18, Z18
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y19, Y19, Y19
	VPXORD Y20, Y20, Y20
	TESTQ CX, CX
	JEQ   iq414done
iq414loop:
	IQ4SC(SI)
	VPXORD Z1, Z1, Z1; VPXORD Z3, Z3, Z3; VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5
	IQ4PAIR4(8, 0, Z26)
	IQ4PAIR4(40, 64, Z27)
	IQ4PAIR4(72, 128, Z28)
	IQ4PAIR4(104, 192, Z29)
	IQ4FIN0123
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
	HSUM8(Y16, X16)
	VMOVSS X0, (BX)
	ADDQ R9, BX
	HSUM8(Y17, X17)
	VMOVSS X0, (BX)
	ADDQ R9, BX
	HSUM8(Y19, X19)
	VMOVSS X0, (BX)
	ADDQ R9, BX
	HSUM8(Y20, X20)
	VMOVSS X0, (BX)
	VZEROUPPER
	RET

DATA kiq4b20<>+0(SB)/8, $0x2020202020202020
DATA kiq4b20<>+8(SB)/8, $0x2020202020202020
GLOBL kiq4b20<>(SB), RODATA|NOPTR, $16

// IQ4SC8 is IQ4SC with the 0x20 bytes read from memory (kiq4b20), which
// leaves X0 free for iq4XSDot1x8's accumulators.
#define IQ4SC8(row) \
	IQ4XSSCALEBYTES(row); \
	VMOVQ     AX, X9; \
	VPSUBB    kiq4b20<>(SB), X9, X9; \
	VPMOVSXBW X9, X25

// IQ4PAIR8 is IQ4PAIR4 for eight tokens: tokens 4..7 at aoff(R13),
// aoff(R13)(R10*1), aoff(R13)(R10*2) and aoff(R9) into Z6, Z7, Z21, Z22.
#define IQ4PAIR8(off, aoff, idx) \
	IQ4PAIR4(off, aoff, idx); \
	IQ4TOK4(aoff(R13), Z6); \
	IQ4TOK4(aoff(R13)(R10*1), Z7); \
	IQ4TOK4(aoff(R13)(R10*2), Z21); \
	IQ4TOK4(aoff(R9), Z22)

// func iq4XSDot1x8(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// iq4XSDot1x4 for eight tokens: each super-block's scales and levels
// unpacked once for all eight, the same integer and float work per token
// (out + t*otok = dotIQ4XS(row, token t), bit for bit).
TEXT ·iq4XSDot1x8(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ xq+8(FP), DI
	MOVQ xqstride+16(FP), R10
	MOVQ xd+24(FP), DX
	MOVQ xdstride+32(FP), R11
	MOVQ nb+40(FP), CX
	LEAQ (DI)(R10*2), BX
	ADDQ R10, BX
	LEAQ (DI)(R10*4), R13
	LEAQ (BX)(R10*4), R9
	LEAQ (DX)(R11*2), R12
	ADDQ R11, R12
	IQ4CONSTS
	VPXORD Z18, Z18, Z18
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y19, Y19, Y19
	VPXORD Y20, Y20, Y20
	VPXORD Y23, Y23, Y23
	VPXORD Y24, Y24, Y24
	VPXORD Y15, Y15, Y15
	VPXORD Y0, Y0, Y0
	TESTQ CX, CX
	JEQ   iq418done
iq418loop:
	IQ4SC8(SI)
	VPXORD Z1, Z1, Z1; VPXORD Z3, Z3, Z3; VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	IQ4PAIR8(8, 0, Z26)
	IQ4PAIR8(40, 64, Z27)
	IQ4PAIR8(72, 128, Z28)
	IQ4PAIR8(104, 192, Z29)
	IQ4FIN0123
	IQ4FIN4(Z6, Y6, (R12)(R11*1), Y23)
	IQ4FIN4(Z7, Y7, (R12)(R11*2), Y24)
	LEAQ (R12)(R11*2), AX
	IQ4FIN4(Z21, Y21, (AX)(R11*1), Y15)
	IQ4FIN4(Z22, Y22, (AX)(R11*2), Y0)
	ADDQ $136, SI
	ADDQ $256, DI
	ADDQ $256, BX
	ADDQ $256, R13
	ADDQ $256, R9
	ADDQ $4, DX
	ADDQ $4, R12
	DECQ CX
	JNZ  iq418loop
iq418done:
	MOVQ out+48(FP), BX
	MOVQ otok+56(FP), R9
	LEAQ (BX)(R9*4), R8
	HSUM8(Y0, X0)
	LEAQ (R8)(R9*2), AX
	VMOVSS X0, (AX)(R9*1)
	HSUM8(Y16, X16)
	VMOVSS X0, (BX)
	HSUM8(Y17, X17)
	VMOVSS X0, (BX)(R9*1)
	HSUM8(Y19, X19)
	VMOVSS X0, (BX)(R9*2)
	LEAQ (BX)(R9*2), AX
	HSUM8(Y20, X20)
	VMOVSS X0, (AX)(R9*1)
	HSUM8(Y23, X23)
	VMOVSS X0, (R8)
	HSUM8(Y24, X24)
	VMOVSS X0, (R8)(R9*1)
	HSUM8(Y15, X15)
	VMOVSS X0, (R8)(R9*2)
	VZEROUPPER
	RET

// Q3KTOK4 multiplies one token's activations at act with the unpacked
// weights w+4 in Z8, subtracts 4 times the activations' pair sums (as
// Q3KPAIR's p4) and adds the pairs weighted by the scale words Z9 into
// zacc. Needs Z31 = 0x04 bytes; clobbers Z7, Z20.
#define Q3KTOK4(act, zacc) \
	VPMADDUBSW act, Z8, Z7; \
	VPMADDUBSW act, Z31, Z20; \
	VPSUBW     Z20, Z7, Z7; \
	VPDPWSSD   Z9, Z7, zacc

// Q3KPAIR4 is Q3KPAIR for four tokens: one chunk pair of the Q3_K row at
// SI unpacked once (q, shift, hbit as Q3KPAIR's) and multiplied with the
// activations of tokens 0..3 at aoff(DI), aoff(DI)(R10*1),
// aoff(DI)(R10*2) and aoff(BX) into Z1, Z4, Z5 and Z6. Needs Y25, Z10,
// Z30, Z31; clobbers K1, Z7..Z9, Z20.
#define Q3KPAIR4(q, shift, hbit, aoff, idx) \
	VPSRLVW    shift, q, Z8; \
	VPANDQ     Z30, Z8, Z8; \
	VPTESTMB   hbit, Z10, K1; \
	VPADDB     Z31, Z8, K1, Z8; \
	VPERMW     Z25, idx, Z9; \
	Q3KTOK4(aoff(DI), Z1); \
	Q3KTOK4(aoff(DI)(R10*1), Z4); \
	Q3KTOK4(aoff(DI)(R10*2), Z5); \
	Q3KTOK4(aoff(BX), Z6)

// Q3KFIN4 adds one token's super-block lanes zacc into acc as Q3KROW's
// float work, with the token's y.d at dptr. Needs Y22 = the row's d as
// float32; clobbers Y21, Y23.
#define Q3KFIN4(zacc, yacc, dptr, acc) \
	VEXTRACTI64X4 $1, zacc, Y21; \
	VPADDD    Y21, yacc, Y21; \
	VCVTDQ2PS Y21, Y21; \
	VBROADCASTSS dptr, Y23; \
	VMULPS    Y23, Y22, Y23; \
	VFMADD231PS Y21, Y23, acc

// func q3KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
// One Q3_K row (w) against four tokens of Q8_K activations (token t's
// quants at xq + t*xqstride, scale at xd + t*xdstride; the sums are not
// used): out + t*otok = dotQ3K(row, token t), bit for bit q3KDot4x1's,
// each super-block's scales, quants and high bits unpacked once for the
// four tokens.
TEXT ·q3KDot1x4(SB), NOSPLIT, $0-80
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
	VMOVDQU64 kq16idx<>+0(SB), Z26
	VMOVDQU64 kq16idx<>+64(SB), Z27
	VMOVDQU64 kq16idx<>+128(SB), Z28
	VMOVDQU64 kq16idx<>+192(SB), Z29
	VMOVDQU64 kq2shift<>+0(SB), Z2
	VMOVDQU64 kq2shift<>+64(SB), Z3
	VMOVDQU64 kq3hbit<>+0(SB), Z12
	VMOVDQU64 kq3hbit<>+64(SB), Z13
	VMOVDQU64 kq3hbit<>+128(SB), Z14
	VMOVDQU64 kq3hbit<>+192(SB), Z15
	MOVL $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL $0x04040404, AX
	VPBROADCASTD AX, Z31
	MOVL $0x20202020, AX
	VMOVD AX, X0
	VPBROADCASTD X0, X0
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	TESTQ CX, CX
	JEQ   q3k14done
q3k14loop:
	Q3KSC(SI)
	VBROADCASTI64X4 (SI), Z10
	VBROADCASTI64X4 32(SI), Z11
	VPXORD Z1, Z1, Z1
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	Q3KPAIR4(Z11, Z2, Z12, 0, Z26)
	Q3KPAIR4(Z11, Z3, Z13, 64, Z27)
	VBROADCASTI64X4 64(SI), Z11
	Q3KPAIR4(Z11, Z2, Z14, 128, Z28)
	Q3KPAIR4(Z11, Z3, Z15, 192, Z29)
	VPBROADCASTW 108(SI), X22
	VCVTPH2PS X22, Y22
	Q3KFIN4(Z1, Y1, (DX), Y16)
	Q3KFIN4(Z4, Y4, (DX)(R11*1), Y17)
	Q3KFIN4(Z5, Y5, (DX)(R11*2), Y18)
	Q3KFIN4(Z6, Y6, (R12), Y19)
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
	KQOUT
	VZEROUPPER
	RET
