"""Pieces the AVX2 K-quant group kernels share (q2k_avx2.py, q4k_avx2.py),
as assembly text. Per token t the kernels keep at BX = R11 + base + 192t the
int32 sum q of the 16 rows, then their float32 acc (at 64) and accm (at 128),
rows 8..15 32 bytes after rows 0..7."""

# ZERO clears acc and accm of the DX tokens from R11 + base.
def zero(base):
    return f"""VPXOR Y0, Y0, Y0
LEAQ {base}(R11), BX
MOVQ DX, R12
zero:
VMOVDQU Y0, 64(BX)
VMOVDQU Y0, 96(BX)
VMOVDQU Y0, 128(BX)
VMOVDQU Y0, 160(BX)
ADDQ $192, BX
DECQ R12
JNZ zero"""


def float_step(bs, label):
    """The float step of one token, after its mins' int32 sums in Y0 (rows
    0..7) and Y1 (8..15), with d_w in Y12, Y13 and dmin_w in Y14, Y15:
    accm = fma(float(m), dmin_w*d_x, accm), acc = fma(float(q), d_w*d_x,
    acc); then on to the next token (AX: d_x, bs: its bsums) and loop to
    label."""
    return f"""VBROADCASTSS (AX), Y7
VCVTDQ2PS Y0, Y0
VCVTDQ2PS Y1, Y1
VMULPS Y7, Y14, Y2
VMULPS Y7, Y15, Y3
VMOVUPS 128(BX), Y4
VFMADD231PS Y2, Y0, Y4
VMOVUPS Y4, 128(BX)
VMOVUPS 160(BX), Y5
VFMADD231PS Y3, Y1, Y5
VMOVUPS Y5, 160(BX)
VCVTDQ2PS (BX), Y0
VCVTDQ2PS 32(BX), Y1
VMULPS Y7, Y12, Y2
VMULPS Y7, Y13, Y3
VMOVUPS 64(BX), Y4
VFMADD231PS Y2, Y0, Y4
VMOVUPS Y4, 64(BX)
VMOVUPS 96(BX), Y5
VFMADD231PS Y3, Y1, Y5
VMOVUPS Y5, 96(BX)
ADDQ R14, AX
LEAQ ({bs})(R14*8), {bs}
ADDQ $192, BX
DECQ R12
JNZ {label}"""


def store(base):
    """Stores acc - accm of the DX tokens from R11 + base at out, ostride
    apart, and returns."""
    return f"""MOVQ out+48(FP), AX
MOVQ ostride+56(FP), CX
LEAQ {base}(R11), BX
MOVQ DX, R12
store:
VMOVUPS 64(BX), Y0
VSUBPS 128(BX), Y0, Y0
VMOVUPS Y0, (AX)
VMOVUPS 96(BX), Y1
VSUBPS 160(BX), Y1, Y1
VMOVUPS Y1, 32(AX)
ADDQ CX, AX
ADDQ $192, BX
DECQ R12
JNZ store
done:
VZEROUPPER
RET"""
