"""What the K-quant group kernel generators (tools/kgroupsasm/q*k.py) share:
the output lines, the chunk-pair dot and the hsum8 store of the 8-lane kernels."""
import os, sys

L = []


def e(s=""):
    L.append(s)


def ins(lines):
    """Writes lines of assembly, each indented but labels."""
    for l in lines.strip("\n").split("\n"):
        l = l.strip()
        e(l if l.endswith(":") else "\t" + l)


def write(name):
    """Writes the lines to the path in argv[1], else to runtime/cpu/<name>."""
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "cpu", name)
    open(path, "w").write("\n".join(L) + "\n")


def pair_dot(k, a, b, scale, acc, start_a=None, start_b=None):
    """Adds to Z{acc} the dword dots (DI: the token's broadcast quants) of
    chunks 2k (Z{2k}) and 2k+1 (Z{2k+1}), joined in one dword's int16 halves
    in Z{b} (VPBLENDMW by K1: the odd words) and scaled by the int16 pairs of
    Z{scale}. Each dot starts at zero, or at the instruction start_a/start_b
    writes into Z{a}/Z{b}."""
    ins(f"""{start_a or f"VPXORD Z{a}, Z{a}, Z{a}"}
VPDPBUSD.BCST {32*(2*k)}(DI), Z{2*k}, Z{a}
{start_b or f"VPXORD Z{b}, Z{b}, Z{b}"}
VPDPBUSD.BCST {32*(2*k+1)}(DI), Z{2*k+1}, Z{b}
VPSLLD $16, Z{b}, Z{b}
VPBLENDMW Z{b}, Z{a}, K1, Z{b}
VPDPWSSD Z{scale}, Z{b}, Z{acc}""")


def store_hsum8(token, extra=None):
    """The store loop: for each of R12 tokens (BX: its 8 float lane
    accumulators, token bytes apart) writes hsum8 of the lanes (plus the
    float at extra(BX)) to (AX), CX bytes apart."""
    e("store:")
    ins("""VMOVUPS 0(BX), Z16
VADDPS 256(BX), Z16, Z16
VMOVUPS 64(BX), Z17
VADDPS 320(BX), Z17, Z17
VMOVUPS 128(BX), Z18
VADDPS 384(BX), Z18, Z18
VMOVUPS 192(BX), Z19
VADDPS 448(BX), Z19, Z19
VADDPS Z18, Z16, Z16
VADDPS Z19, Z17, Z17
VADDPS Z17, Z16, Z16""")
    if extra is not None:
        ins(f"VADDPS {extra}(BX), Z16, Z16")
    ins(f"""VMOVUPS Z16, (AX)
ADDQ CX, AX
ADDQ ${token}, BX
DECQ R12
JNZ store""")


def entry(name, blocks, bsums=True, between=""):
    """The TEXT line and entry of a group kernel: the arguments in SI (w),
    CX (nb; also at blocks-8(SP) when blocks), R8 (xq), R9 (xd), R10 (xb,
    when the kernel reads bsums), DX (n), R11 (scratch); then the lines
    between; R13 and R14 the token strides of xq and xd. Returns at once
    when nb or n is 0."""
    e(f"TEXT ·{name}(SB), NOSPLIT, ${8 if blocks else 0}-72")
    ins(f"""MOVQ w+0(FP), SI
MOVQ nb+8(FP), CX
MOVQ xq+16(FP), R8
MOVQ xd+24(FP), R9{chr(10) + "MOVQ xb+32(FP), R10" if bsums else ""}
MOVQ n+40(FP), DX
MOVQ scratch+64(FP), R11
TESTQ CX, CX
JEQ done
TESTQ DX, DX
JEQ done{chr(10) + "MOVQ CX, blocks-8(SP)" if blocks else ""}{chr(10) + between.strip(chr(10)) if between.strip() else ""}
MOVQ CX, R13
SHLQ $8, R13
MOVQ CX, R14
SHLQ $2, R14""")


def lanes_entry(name, bsums=True):
    """entry for an 8-lane kernel, with K1 the odd words."""
    entry(name, True, bsums, """MOVL $0xaaaaaaaa, AX
KMOVD AX, K1""")


def q3k_scales():
    """Writes the 16 sub-block scales (tensor.Q3KScales, -32..31, int32) of
    the 16 rows of the Q3_K group super-block at SI into Z0..Z15, from its
    12 planes of packed scale bytes at 32 + 16k (clobbers Z16..Z31, AX)."""
    ins("""MOVL $15, AX
VPBROADCASTD AX, Z28
MOVL $0x30, AX
VPBROADCASTD AX, Z29
MOVL $32, AX
VPBROADCASTD AX, Z30""")
    for k in range(12):
        ins(f"VPMOVZXBD {32+16*k}(SI), Z{16+k}")
    for j in range(16):
        if j < 8:
            ins(f"VPANDD Z28, Z{16+j}, Z{j}")
        else:
            ins(f"VPSRLD $4, Z{16+j-8}, Z{j}")
        src = 24+j % 4
        sh = 4-2*(j//4)
        if sh > 0:
            ins(f"VPSLLD ${sh}, Z{src}, Z31")
        elif sh < 0:
            ins(f"VPSRLD ${-sh}, Z{src}, Z31")
        else:
            ins(f"VMOVDQA64 Z{src}, Z31")
        ins(f"""VPTERNLOGD $0xf8, Z29, Z31, Z{j}
VPSUBD Z30, Z{j}, Z{j}""")
