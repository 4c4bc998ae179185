// The ninfer kernels, compiled from the unmodified cuda/kernels/ninfer.cu
// with cuda_emu.h force-included, and their table for the driver. Every
// extern "C" kernel of ninfer.cu must be listed here; the Go test checks
// the list against the entries of cuda/ninfer.ptx.

#include "../kernels/ninfer.cu"

#include "registry.h"

#define K(name) ::emu::make_entry(#name, name),
#define K_NT(prefix) K(prefix##_1) K(prefix##_2) K(prefix##_4) K(prefix##_8)
#define K_FMT(f) K(kv_write_##f) K_NT(attn_##f)

namespace emu {

const kernel_entry kernels[] = {
    K(quantize_q8) K(quantize_q8k) K(get_rows) K(rms_norm) K(rope) K(add) K(swiglu) K(select_rows) K(argmax_rows)
    K(columns) K(concat) K(unary) K(mul) K(add_row) K(mul_row) K(l2_norm) K(short_conv) K(delta_rule) K(delta_rule_chunked) K(state_widen) K(state_narrow)
    K(moe_route) K(moe_matmul) K(moe_combine)
    K(moe_mm_q8_0) K(moe_mm_q4_0) K(moe_mm_q4_1) K(moe_mm_q5_0) K(moe_mm_q5_1) K(moe_mm_iq4_nl)
    K(moe_mm_q2_K) K(moe_mm_q3_K) K(moe_mm_q4_K) K(moe_mm_q5_K) K(moe_mm_q6_K) K(moe_mm_iq4_xs)
    K_NT(gemv_f32) K_NT(gemv_f16) K_NT(gemv_bf16) K_NT(gemv_q8_0) K_NT(gemv_q4_0) K_NT(gemv_q5_0) K_NT(gemv_iq4_nl) K_NT(gemv_q4_1) K_NT(gemv_q5_1)
    K_NT(gemv_q2_K) K_NT(gemv_q3_K) K_NT(gemv_q4_K) K_NT(gemv_q5_K) K_NT(gemv_q6_K) K_NT(gemv_iq4_xs)
    K(gemm_f32) K(gemm_f16) K(gemm_bf16) K(gemm_q8_0) K(gemm_q4_0) K(gemm_q5_0) K(gemm_iq4_nl) K(gemm_q4_1) K(gemm_q5_1)
    K(gemm_q2_K) K(gemm_q3_K) K(gemm_q4_K) K(gemm_q5_K) K(gemm_q6_K) K(gemm_iq4_xs)
    K_FMT(f32) K_FMT(f16) K_FMT(bf16) K_FMT(int8) K_FMT(fp8)
};

const int kernel_count = sizeof kernels / sizeof kernels[0];

} // namespace emu
