// Shared macros of the amd64 kernels (simd_amd64.s, attn_amd64.s).

// TAILMASK(tmp) sets K1 to the low (CX - AX) bits, the lanes of the last
// partial chunk of 16 (clobbers DX and tmp).
#define TAILMASK(tmp) \
	MOVQ  CX, DX; \
	SUBQ  AX, DX; \
	MOVL  $1, tmp; \
	SHLXL DX, tmp, tmp; \
	SUBL  $1, tmp; \
	KMOVW tmp, K1
