// The stateless ops of hybrid models (runtime/tensor/hybrid.go) and the
// row-broadcast ops: columns, concat, unary (sigmoid, SiLU, softplus), mul,
// add_row, mul_row and l2_norm. Each follows the CPU reference's rounding
// (runtime/cpu/hybrid.go, hybrid_fast.go, addrow.go): exp and log in double
// rounded to float where the CPU takes float32(math.Exp(float64(x))), float
// arithmetic step by step elsewhere, sums of squares in double.

#pragma once

#include "common.cuh"

// Unary function codes: the values of tensor.UnaryFn.
#define UN_SIGMOID 1
#define UN_SILU 2
#define UN_SOFTPLUS 3

// GRID_STRIDE walks i over [0, n) in a grid-stride loop.
#define GRID_STRIDE(i, n)                                                                                               \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// columns(out, x, n, d, group, offset, width): out [T, d/group*width] (n
// elements) takes, from each group of `group` columns of x [T, d], the
// `width` columns starting at offset (a head's query half, one head's
// slice). Grid-stride.
extern "C" __global__ void columns(float* out, const float* x, long long n, int d, int group, int offset, int width) {
    const int ow = d / group * width;
    GRID_STRIDE(i, n) {
        const long long r = i / ow;
        const int c = (int)(i % ow);
        out[i] = x[r * d + (long long)(c / width) * group + offset + c % width];
    }
}

// concat(out, x, y, n, a, c): out [T, a+c] (n elements), each row x's row
// [a] followed by y's [c]. Grid-stride.
extern "C" __global__ void concat(float* out, const float* x, const float* y, long long n, int a, int c) {
    const int w = a + c;
    GRID_STRIDE(i, n) {
        const long long r = i / w;
        const int j = (int)(i % w);
        out[i] = j < a ? x[r * a + j] : y[r * c + (j - a)];
    }
}

// unary_apply is tensor.UnaryFn fn of v as the CPU computes it: sigmoid =
// 1 / (1 + e) with e = float(exp(-v)); SiLU = v / (1 + exp(-v)) in double,
// rounded once (the swiglu kernel's SiLU); softplus = v above 20 (ggml's
// threshold), else float(log(1 + float(exp(v)))).
__device__ __forceinline__ float unary_apply(int fn, float v) {
    switch (fn) {
    case UN_SIGMOID:
        return __fdiv_rn(1.0f, __fadd_rn(1.0f, (float)exp(-(double)v)));
    case UN_SILU: {
        const double d = (double)v;
        return (float)(d / (1.0 + exp(-d)));
    }
    default: // UN_SOFTPLUS
        if (v > 20.0f) {
            return v;
        }
        return (float)log((double)__fadd_rn(1.0f, (float)exp((double)v)));
    }
}

// unary(out, x, n, fn): out = fn(x), n elements, fn a UN_* code.
// Grid-stride.
extern "C" __global__ void unary(float* out, const float* x, long long n, int fn) {
    GRID_STRIDE(i, n) { out[i] = unary_apply(fn, x[i]); }
}

// mul(out, x, y, n, d): out = x * y element-wise (d = 0), or each row of d
// elements of x times its row's scalar y[i/d] (y [T, 1]). Grid-stride.
extern "C" __global__ void mul(float* out, const float* x, const float* y, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fmul_rn(x[i], d == 0 ? y[i] : y[i / d]); }
}

// add_row(out, x, w, n, d) and mul_row(out, x, w, n, d): out = x + w / x *
// w with w [d] repeated over every row of d elements (qwen2's biases, a
// per-channel scale). Grid-stride.
extern "C" __global__ void add_row(float* out, const float* x, const float* w, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fadd_rn(x[i], w[i % d]); }
}

extern "C" __global__ void mul_row(float* out, const float* x, const float* w, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fmul_rn(x[i], w[i % d]); }
}

// l2_norm(out, x, ngroups, group, eps): each contiguous group of `group`
// elements divided by max(its L2 norm, eps), as ggml_l2_norm: the squares
// rounded to float and summed in double, the norm rounded to float, then
// x * (1 / max(norm, eps)). One warp per group; grid: ceil(ngroups / warps
// per block).
extern "C" __global__ void l2_norm(float* out, const float* x, long long ngroups, int group, float eps) {
    const long long gi = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (gi >= ngroups) {
        return;
    }
    const float* xs = x + gi * group;
    float* os = out + gi * group;
    double sum = 0.0;
    for (int e = lane; e < group; e += 32) {
        const float v = xs[e];
        sum += (double)__fmul_rn(v, v);
    }
    sum = warp_sum_d(sum);
    const float scale = __fdiv_rn(1.0f, fmaxf((float)sqrt(sum), eps));
    for (int e = lane; e < group; e += 32) {
        os[e] = __fmul_rn(xs[e], scale);
    }
}
