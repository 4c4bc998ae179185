// Mixture-of-experts FFN (tensor.Builder.MoE) as four kernels that keep
// the routing on the device, so a step with MoE layers is captured and
// replayed without a host round trip: moe_route picks each row's experts,
// moe_matmul (float experts) or moe_mm_<dtype> (quantized experts, on
// activations quantize_q8 / quantize_q8k wrote) runs the gate, up and down
// matrices of the expert routed to each (row, slot) over that slot's
// input, the swiglu kernel joins gate and up, and moe_combine sums a row's
// expert outputs by their weights, in routing order, as runtime/cpu moeRef.

#pragma once

#include "common.cuh"
#include "elementwise.cuh"
#include "kquant.cuh"
#include "matmul.cuh"

// moe_route(ids, wts, router, T, E, K, normalize): for each row t of
// router [T, E], the softmax (exp in double rounded to float, the sum in
// double, then each times float(1/sum), as runtime/cpu softmaxInPlace
// up to its exp), then the K most probable experts, highest first and ties
// to the lower index, into ids [T, K] (int) and their probabilities into
// wts [T, K], divided by their float sum (in routing order) when normalize.
// One warp per row; grid: ceil(T / warps per block).
#define MOE_MAX_EXPERTS 1024
extern "C" __global__ void moe_route(int* ids, float* wts, const float* router, int T, int E, int K, int normalize) {
    const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (t >= T) {
        return;
    }
    const float* x = router + (long long)t * E;
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) {
        m = fmaxf(m, x[e]);
    }
    m = warp_max(m);
    double sum = 0.0;
    for (int e = lane; e < E; e += 32) {
        sum += (double)(float)exp((double)__fsub_rn(x[e], m));
    }
    sum = warp_sum_d(sum);
    const float inv = (float)(1.0 / sum);
    float chosen = 0.0f; // sum of the chosen probabilities, in routing order (lane 0)
    int taken[32];       // the experts chosen so far (K <= 32)
    for (int k = 0; k < K; k++) {
        float best = -1.0f;
        int bi = E;
        for (int e = lane; e < E; e += 32) {
            bool used = false;
            for (int j = 0; j < k; j++) {
                used = used || taken[j] == e;
            }
            const float p = __fmul_rn((float)exp((double)__fsub_rn(x[e], m)), inv);
            if (!used && (p > best || (p == best && e < bi))) {
                best = p;
                bi = e;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(FULL_MASK, best, o);
            const int oi = __shfl_xor_sync(FULL_MASK, bi, o);
            if (ob > best || (ob == best && oi < bi)) {
                best = ob;
                bi = oi;
            }
        }
        if (bi >= E) { // every candidate NaN: route to expert k rather than read past the experts
            bi = k;
            best = 0.0f;
        }
        taken[k] = bi;
        chosen = __fadd_rn(chosen, best);
        if (lane == 0) {
            ids[(long long)t * K + k] = bi;
            wts[(long long)t * K + k] = best;
        }
    }
    if (normalize && lane == 0) {
        for (int k = 0; k < K; k++) {
            wts[(long long)t * K + k] = __fdiv_rn(wts[(long long)t * K + k], chosen);
        }
    }
}

// moe_matmul(out, x, w, ids, dt, K, N, xdiv, rowBytes): for each slot s
// (a row's k-th routed expert, s = row*topK + k), out [slots, N] = x[s /
// xdiv] . W_e^T with W_e
// rows [e*N, (e+1)*N) of the stacked float weight w (dtype dt: F32, F16 or
// BF16; rows of rowBytes) and e = ids[s]. xdiv is topK when every slot of
// a row reads the row's input (gate, up), 1 when each slot has its own
// (down). The activations are rounded to the weight's dot type as the CPU
// does. One warp per output column; grid: (slots, ceil(N / warps per block)).
extern "C" __global__ void moe_matmul(float* out, const float* x, const uint8_t* w, const int* ids, int dt, int K,
                                      int N, int xdiv, long long rowBytes) {
    const int n = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const long long s = blockIdx.x;
    if (n >= N) {
        return;
    }
    const float* xr = x + (s / xdiv) * K;
    const uint8_t* wr = w + ((long long)ids[s] * N + n) * rowBytes;
    float acc = 0.0f;
    for (int e = lane; e < K; e += 32) {
        const float xv = dt == DT_F16 ? round_f16(xr[e]) : dt == DT_BF16 ? round_bf16(xr[e]) : xr[e];
        acc = fmaf(xv, load_elem(wr, dt, e), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        out[s * N + n] = acc;
    }
}

// moe_combine(out, res, wts, T, K, E): out [T, E], row t = sum over k in
// order of wts[t, k] * res[t*K + k] (res [T*K, E]), each product and sum
// rounded to float. Grid-stride over out.
extern "C" __global__ void moe_combine(float* out, const float* res, const float* wts, long long n, int K, int E) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / E;
        const int j = (int)(i % E);
        float o = 0.0f;
        for (int k = 0; k < K; k++) {
            o = __fadd_rn(o, __fmul_rn(wts[t * K + k], res[(t * K + k) * E + j]));
        }
        out[i] = o;
    }
}

// ---------------------------------------------------------------------------
// Quantized experts. moe_mm_<dtype>(out, xq, w, ids, K, N, xdiv, xrows): as
// moe_matmul, slot s's input row s / xdiv read from xq, the xrows rows of
// [xrows, K] activations quantized for the weight's dot type (quantize_q8
// or quantize_q8k), times the N rows of expert ids[s] of the stacked
// quantized weight w, with the arithmetic of the dtype's GEMV (matmul.cuh,
// kquant.cuh). One warp per output column; grid: (slots, ceil(N / warps per
// block)).

// moe_dot_q is lane's share of the dot of activation row xrow (of xrows
// rows of nb Q8_0 blocks and their Q8_1 sums) with the weight row wrow.
template <int DT>
__device__ __forceinline__ float moe_dot_q(const uint8_t* xq, long long xrows, long long xrow, const uint8_t* wrow, int nb) {
    typedef wtraits<DT> W;
    const int lane = threadIdx.x & 31;
    const int part = lane % W::lpb;
    const uint8_t* xr = xq + xrow * nb * 34;
    const float* sums = q8_sums(xq, xrows * nb) + xrow * nb;
    float acc = 0.0f;
    for (int b = lane / W::lpb; b < nb; b += 32 / W::lpb) {
        const uint8_t* xblk = xr + (long long)b * 34;
        const uint8_t* wblk = wrow + (long long)b * W::block_bytes;
        uint32_t xv[W::xw];
        int q[W::ww];
        W::load_x(xblk, part, xv);
        W::load_w(wblk, part, q);
        acc = fmaf(f16_to_f32(ld_u16(wblk)) * f16_to_f32(ld_u16(xblk)), (float)W::dot(q, xv), acc);
        if (W::has_min && part == 0) {
            acc = fmaf(W::load_m(wblk), sums[b], acc);
        }
    }
    return acc;
}

// moe_dot_k is moe_dot_q for Q8_K activations and K-quant or IQ4_XS weights.
template <int DT>
__device__ __forceinline__ float moe_dot_k(const uint8_t* xq, long long, long long xrow, const uint8_t* wrow, int nb) {
    float acc[1][1];
    gemv_k_acc<1, 1, DT>(acc, xq + xrow * nb * Q8K_BYTES, wrow, 1, 1, 0, nb, 0, 1);
    return acc[0][0];
}

#define MOE_Q_KERNEL(name, dt, dot, bsize, bbytes)                                                                    \
    extern "C" __global__ void moe_mm_##name(float* out, const uint8_t* xq, const uint8_t* w, const int* ids, int K,   \
                                             int N, int xdiv, long long xrows) {                                      \
        const int n = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);                                            \
        const long long s = blockIdx.x;                                                                               \
        if (n >= N) {                                                                                                 \
            return;                                                                                                   \
        }                                                                                                             \
        const int nb = K / (bsize);                                                                                   \
        const uint8_t* wr = w + ((long long)ids[s] * N + n) * nb * (long long)(bbytes);                               \
        const float acc = warp_sum(dot<dt>(xq, xrows, s / xdiv, wr, nb));                                             \
        if ((threadIdx.x & 31) == 0) {                                                                                \
            out[s * N + n] = acc;                                                                                     \
        }                                                                                                             \
    }
#define MOE_Q(name, dt) MOE_Q_KERNEL(name, dt, moe_dot_q, 32, wtraits<dt>::block_bytes)
#define MOE_K(name, dt) MOE_Q_KERNEL(name, dt, moe_dot_k, 256, ktraits<dt>::block_bytes)

MOE_Q(q8_0, DT_Q8_0)
MOE_Q(q4_0, DT_Q4_0)
MOE_Q(q4_1, DT_Q4_1)
MOE_Q(q5_0, DT_Q5_0)
MOE_Q(q5_1, DT_Q5_1)
MOE_Q(iq4_nl, DT_IQ4_NL)
MOE_K(q2_K, DT_Q2_K)
MOE_K(q3_K, DT_Q3_K)
MOE_K(q4_K, DT_Q4_K)
MOE_K(q5_K, DT_Q5_K)
MOE_K(q6_K, DT_Q6_K)
MOE_K(iq4_xs, DT_IQ4_XS)
