// Shared macros of the amd64 kernels: the AVX-512 ones (simd_amd64.s,
// attn_amd64.s, kquant_amd64.s, kquant2_amd64.s) and, for the macros that
// use only general-purpose registers and VEX encodings (HSUM8X and the
// scale unpacking), the AVX2 ones (*_avx2_amd64.s).

// TAILMASK(tmp) sets K1 to the low (CX - AX) bits, the lanes of the last
// partial chunk of 16 (clobbers DX and tmp).
#define TAILMASK(tmp) \
	MOVQ  CX, DX; \
	SUBQ  AX, DX; \
	MOVL  $1, tmp; \
	SHLXL DX, tmp, tmp; \
	SUBL  $1, tmp; \
	KMOVW tmp, K1

// HSUM8 reduces Y register ysrc into the low lane of X0 (clobbers X0, X1):
// the order of hsum8 in kernels.go.
#define HSUM8(ysrc, xsrc) \
	VEXTRACTF32X4 $1, ysrc, X1; \
	VADDPS        X1, xsrc, X0; \
	VMOVHLPS      X0, X0, X1; \
	VADDPS        X1, X0, X0; \
	VMOVSHDUP     X0, X1; \
	VADDSS        X1, X0, X0

// KQOUT stores hsum8 of the accumulators Y16..Y19 to BX + i*R9
// (clobbers BX, X0, X1).
#define KQOUT \
	HSUM8(Y16, X16); \
	VMOVSS X0, (BX); \
	HSUM8(Y17, X17); \
	VMOVSS X0, (BX)(R9*1); \
	HSUM8(Y18, X18); \
	VMOVSS X0, (BX)(R9*2); \
	LEAQ (BX)(R9*2), BX; \
	HSUM8(Y19, X19); \
	VMOVSS X0, (BX)(R9*1)

// HSUM8X is HSUM8 in VEX encodings, for the AVX2 kernels (Y0..Y15): it
// reduces ysrc (xsrc its low half) into the low lane of xd in hsum8's
// order (kernels.go). Clobbers xt.
#define HSUM8X(ysrc, xsrc, xd, xt) \
	VEXTRACTF128 $1, ysrc, xt; \
	VADDPS       xt, xsrc, xd; \
	VMOVHLPS     xd, xd, xt; \
	VADDPS       xt, xd, xd; \
	VMOVSHDUP    xd, xt; \
	VADDSS       xt, xd, xd

// K4SCALEMIN unpacks the 8 6-bit scales and 8 mins of the Q4_K/Q5_K
// super-block at (row) (12 packed bytes at 4(row), get_scale_min_k4) into
// R14 (scale i in byte i) and AX (the mins likewise). Clobbers R8, R9,
// R15.
#define K4SCALEMIN(row) \
	MOVL 4(row), AX; \
	MOVL 8(row), R8; \
	MOVL 12(row), R9; \
	MOVL AX, R14; \
	ANDL $0x3f3f3f3f, R14; \
	MOVL R9, R15; \
	ANDL $0x0f0f0f0f, R15; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R15; \
	SHLQ $32, R15; \
	ORQ  R15, R14; \
	MOVL R8, AX; \
	ANDL $0x3f3f3f3f, AX; \
	SHRL $4, R9; \
	ANDL $0x0f0f0f0f, R9; \
	SHRL $6, R8; \
	ANDL $0x03030303, R8; \
	SHLL $4, R8; \
	ORL  R8, R9; \
	SHLQ $32, R9; \
	ORQ  R9, AX

// Q3KSCALEBYTES unpacks the 16 6-bit scales of the Q3_K super-block at
// (row) (12 bytes at 96(row), tensor.Q3KScales) into xdst as unsigned
// bytes, not yet minus 32. Clobbers AX, R8, R9, R14, R15.
#define Q3KSCALEBYTES(row, xdst) \
	MOVL    96(row), AX; \
	MOVL    100(row), R8; \
	MOVL    104(row), R9; \
	MOVL    AX, R14; \
	ANDL    $0x0f0f0f0f, R14; \
	MOVL    R9, R15; \
	SHLL    $4, R15; \
	ANDL    $0x30303030, R15; \
	ORL     R15, R14; \
	VMOVD   R14, xdst; \
	MOVL    R8, R14; \
	ANDL    $0x0f0f0f0f, R14; \
	MOVL    R9, R15; \
	SHLL    $2, R15; \
	ANDL    $0x30303030, R15; \
	ORL     R15, R14; \
	VPINSRD $1, R14, xdst, xdst; \
	SHRL    $4, AX; \
	ANDL    $0x0f0f0f0f, AX; \
	MOVL    R9, R15; \
	ANDL    $0x30303030, R15; \
	ORL     R15, AX; \
	VPINSRD $2, AX, xdst, xdst; \
	SHRL    $4, R8; \
	ANDL    $0x0f0f0f0f, R8; \
	SHRL    $2, R9; \
	ANDL    $0x30303030, R9; \
	ORL     R9, R8; \
	VPINSRD $3, R8, xdst, xdst

// IQ4XSSCALEBYTES unpacks the 8 6-bit scales of the IQ4_XS super-block at
// (row) (low nibbles at 4(row), high bit pairs at 2(row);
// tensor.IQ4XSScale, not yet minus 32) into AX, scale i in byte i.
// Clobbers R8, R14, R15.
#define IQ4XSSCALEBYTES(row) \
	MOVL    4(row), AX; \
	MOVWLZX 2(row), R8; \
	MOVQ    $0x0f0f0f0f0f0f0f0f, R14; \
	PDEPQ   R14, AX, AX; \
	MOVQ    $0x3030303030303030, R15; \
	PDEPQ   R15, R8, R8; \
	ORQ     R8, AX
