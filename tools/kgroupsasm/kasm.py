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



def zero_tokens(z, base, offsets, token):
    """Zeroes, for each of DX tokens token bytes apart from base(R11) on, the
    vectors at offsets from the token's start, with Z{z} (uses BX, R12)."""
    ins(f"""VPXORD Z{z}, Z{z}, Z{z}
LEAQ {base}(R11), BX
MOVQ DX, R12""")
    e("zero:")
    ins("\n".join(f"VMOVDQU32 Z{z}, {o}(BX)" for o in offsets))
    ins(f"""ADDQ ${token}, BX
DECQ R12
JNZ zero""")


def next_block(group_bytes, counter="blocks-8(SP)", sums=True, store_base=None):
    """Steps to the next super-block: the group (SI) by group_bytes, the
    token's Q8_K quants (R8), scale (R9) and, with sums, sums of 16 (R10),
    and loops to block while counter counts down. With store_base it then
    loads the store loop's registers: out (AX), ostride (CX), the first
    token's accumulators store_base(R11) (BX) and the tokens (R12)."""
    ins(f"""ADDQ ${group_bytes}, SI
ADDQ $256, R8
ADDQ $4, R9""" + ("\nADDQ $32, R10" if sums else "") + f"""
DECQ {counter}
JNZ block""")
    if store_base is not None:
        ins(f"""MOVQ out+48(FP), AX
MOVQ ostride+56(FP), CX
LEAQ {store_base}(R11), BX
MOVQ DX, R12""")

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


def pair_dot_lines(k, x, a, b, scale, acc):
    """pair_dot's instructions as a list, the token's quants at address x
    (such as "(DI)" or "(DI)(R13*1)"): the dword dots of chunks 2k and 2k+1
    into Z{a} and Z{b}, joined in Z{b}'s int16 halves and scaled by Z{scale}
    into Z{acc}."""
    return [f"VPXORD Z{a}, Z{a}, Z{a}", f"VPDPBUSD.BCST {32*(2*k)}{x}, Z{2*k}, Z{a}",
            f"VPXORD Z{b}, Z{b}, Z{b}", f"VPDPBUSD.BCST {32*(2*k+1)}{x}, Z{2*k+1}, Z{b}",
            f"VPSLLD $16, Z{b}, Z{b}", f"VPBLENDMW Z{b}, Z{a}, K1, Z{b}", f"VPDPWSSD Z{scale}, Z{b}, Z{acc}"]


# The addresses of the token u = 0 and of the next one, u = 1, in a
# two-token loop (two_token_lanes): quants (DI, R13 bytes apart), scales
# (AX, R14 bytes apart) and sums of 16 (CX, 8*R14 bytes apart).
TOKEN_X = ["(DI)", "(DI)(R13*1)"]
TOKEN_D = ["(AX)", "(AX)(R14*1)"]
TOKEN_BSUMS = ["(CX)", "(CX)(R14*8)"]


def two_token_lanes(p, token_ops, token, bsums=True):
    """The token loop of lane p of an 8-lane kernel, DX tokens: two at a
    time, token_ops(0) and token_ops(1) (the instruction lists of the token
    at DI, AX, CX, BX and of the next one, token bytes of scratch on)
    interleaved, so that the two tokens' dependency chains overlap, then
    token_ops(0) for an odd last one. It advances DI, AX, BX (and CX with
    bsums) and uses R12."""
    ins(f"""MOVQ DX, R12
SHRQ $1, R12
JEQ one{p}""")
    e(f"lane{p}:")
    ins("\n".join(x for pair in zip(token_ops(0), token_ops(1)) for x in pair))
    ins(f"""LEAQ (DI)(R13*2), DI
LEAQ (AX)(R14*2), AX{chr(10) + "LEAQ (CX)(R14*8), CX" + chr(10) + "LEAQ (CX)(R14*8), CX" if bsums else ""}
ADDQ ${2*token}, BX
DECQ R12
JNZ lane{p}""")
    e(f"one{p}:")
    ins(f"""TESTQ $1, DX
JEQ next{p}""")
    ins("\n".join(token_ops(0)))
    e(f"next{p}:")


def lane_token_ops(p, u, regs, token, d_at, start=()):
    """The instructions of lane p for token u of a two-token loop
    (two_token_lanes) of an 8-lane kernel whose chunks are in Z0..Z7 and
    chunk pairs' scale pairs in Z8..Z11: the integer lane in Z{acc} from
    zero (then the instructions start), the 4 chunk pairs' scaled dots,
    then acc_l = fma(d_x*d_w, float32(lane), acc_l) on the token's lane
    accumulator at BX (plus u tokens of scratch), with d_x*d_w at d_at - 64p
    from it: lane 0 forms it from the token's scale (at AX) and the row
    scales in Z25 and stores it there. regs: acc, a, b (the pair dots'
    registers), dd, fa."""
    acc, a, b, dd, fa = regs
    off = u * token
    ops = [f"VPXORD Z{acc}, Z{acc}, Z{acc}", *start]
    for k in range(4):
        ops += pair_dot_lines(k, TOKEN_X[u], a, b, 8+k, acc)
    ops += [f"VCVTDQ2PS Z{acc}, Z{acc}", f"VMOVUPS {off}(BX), Z{fa}"]
    if p == 0:
        ops += [f"VMULPS.BCST {TOKEN_D[u]}, Z25, Z{dd}", f"VMOVUPS Z{dd}, {off+d_at}(BX)", f"VFMADD231PS Z{dd}, Z{acc}, Z{fa}"]
    else:
        ops += [f"VFMADD231PS {off+d_at-64*p}(BX), Z{acc}, Z{fa}"]
    return ops + [f"VMOVUPS Z{fa}, {off}(BX)"]


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
