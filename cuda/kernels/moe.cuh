// Mixture-of-experts FFN (tensor.Builder.MoE) as four kernels that keep
// the routing on the device, so a step with MoE layers is captured and
// replayed without a host round trip: moe_route picks each row's experts,
// moe_matmul runs the gate, up and down matrices of the expert routed to
// each (row, slot) over that slot's input, the swiglu kernel joins gate and
// up, and moe_combine sums a row's expert outputs by their weights, in
// routing order, as runtime/cpu moeRef.

#pragma once

#include "common.cuh"
#include "elementwise.cuh"

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
