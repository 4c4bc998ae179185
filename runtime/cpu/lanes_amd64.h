// Shared macros of the amd64 kernels (simd_amd64.s, attn_amd64.s,
// kquant_amd64.s, kquant2_amd64.s).

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
