// Row-wise and element-wise kernels: get_rows, rms_norm, rope, add,
// swiglu, select_rows. Where the CPU backend defines a rounding
// sequence (runtime/cpu/kernels.go), these follow it: no fused
// multiply-adds where the CPU rounds twice, and double precision where the
// CPU computes in float64 and rounds once.

#pragma once

#include "common.cuh"
#include "kquant.cuh"

// load_elem returns element e of a row of dtype dt (F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, and the K-quants and IQ4_XS of
// kquant.cuh) as float, as tensor.DequantizeRow does.
__device__ __forceinline__ float load_elem(const uint8_t* row, int dt, long long e) {
    float kv;
    if (kquant_elem(row, dt, e, kv)) {
        return kv;
    }
    switch (dt) {
    case DT_F32:
        return *(const float*)(row + 4 * e);
    case DT_F16:
        return f16_to_f32(ld_u16(row + 2 * e));
    case DT_BF16:
        return bf16_to_f32(ld_u16(row + 2 * e));
    case DT_Q8_0: {
        const uint8_t* blk = row + (e / 32) * 34;
        return f16_to_f32(ld_u16(blk)) * (float)(int8_t)blk[2 + e % 32];
    }
    case DT_Q5_0: {
        const uint8_t* blk = row + (e / 32) * 22;
        const int j = (int)(e % 32);
        const uint32_t byte = blk[6 + (j & 15)];
        const uint32_t hi = (blk[2 + j / 8] >> (j % 8)) & 1u; // bit j of the little-endian qh
        const int v = (int)((j < 16 ? (byte & 0xfu) : (byte >> 4)) | (hi << 4)) - 16;
        return (float)v * f16_to_f32(ld_u16(blk));
    }
    case DT_Q4_1:
    case DT_Q5_1: { // float(float(q) * d) + m
        const bool five = dt == DT_Q5_1;
        const uint8_t* blk = row + (e / 32) * (five ? 24 : 20);
        const int j = (int)(e % 32);
        const uint32_t byte = blk[(five ? 8 : 4) + (j & 15)];
        uint32_t v = j < 16 ? (byte & 0xfu) : (byte >> 4);
        if (five) {
            v |= ((blk[4 + j / 8] >> (j % 8)) & 1u) << 4;
        }
        return __fadd_rn(__fmul_rn((float)v, f16_to_f32(ld_u16(blk))), f16_to_f32(ld_u16(blk + 2)));
    }
    case DT_IQ4_NL: {
        const uint8_t* blk = row + (e / 32) * 18;
        const int j = (int)(e % 32);
        const uint32_t byte = blk[2 + (j & 15)];
        const int v = (int)(int8_t)(uint8_t)iq4nl_levels(j < 16 ? (byte & 0xfu) : (byte >> 4));
        return f16_to_f32(ld_u16(blk)) * (float)v;
    }
    default: { // DT_Q4_0
        const uint8_t* blk = row + (e / 32) * 18;
        const int j = (int)(e % 32);
        const uint32_t byte = blk[2 + (j & 15)];
        const int v = (int)(j < 16 ? (byte & 0xfu) : (byte >> 4)) - 8;
        return f16_to_f32(ld_u16(blk)) * (float)v;
    }
    }
}

// get_rows(out, table, ids, dt, cols, rowBytes): out [rows, cols] f32, row
// r = dequantized row ids[r] of table (row i at byte i*rowBytes). A negative
// id gives zeros; ids must be below the table's row count. Grid: rows
// blocks.
extern "C" __global__ void get_rows(float* out, const uint8_t* table, const int* ids, int dt, int cols,
                                    long long rowBytes) {
    const long long r = blockIdx.x;
    const int id = ids[r];
    float* o = out + r * cols;
    if (id < 0) {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            o[c] = 0.0f;
        }
        return;
    }
    const uint8_t* row = table + (long long)id * rowBytes;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        o[c] = load_elem(row, dt, c);
    }
}

// rms_norm(out, x, w, ngroups, group, eps): for each of the ngroups
// contiguous groups of `group` elements, out = (x * scale) * w with scale =
// 1/sqrt(mean(x^2) + eps); the squares are rounded to float and summed in
// double, the mean rounded to float, as the CPU does. One warp per group;
// grid: ceil(ngroups / warps per block).
extern "C" __global__ void rms_norm(float* out, const float* x, const float* w, long long ngroups, int group,
                                    float eps) {
    const long long gi = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (gi >= ngroups) {
        return;
    }
    const float* xs = x + gi * group;
    float* os = out + gi * group;
    const double sum = warp_sum_squares(xs, group, lane);
    const float mean = (float)(sum / (double)group);
    const float scale = 1.0f / sqrtf(__fadd_rn(mean, eps));
    for (int e = lane; e < group; e += 32) {
        os[e] = __fmul_rn(__fmul_rn(xs[e], scale), w[e]);
    }
}

// rope(out, x, pos, factors, cols, hd, dims, neox, thetaScale): out = x
// with the first `dims` elements of every head (hd elements) of row r
// rotated by the angles of position pos[r]: pair i turns by theta_i = pos *
// thetaScale^i, built as a running float product (thetaScale =
// base^(-2/dims), computed by the caller as the CPU does), divided by
// factors[i] when factors is not null (ggml's freq_factors, llama-3 rope
// scaling; dims/2 floats). Norm mode pairs (2i, 2i+1), neox mode (i,
// i+dims/2); dims < hd leaves the rest of the head as it is (partial
// RoPE). out != x. One block per row; dims <= 2*ROPE_MAX_PAIRS.
#define ROPE_MAX_PAIRS 512
extern "C" __global__ void rope(float* out, const float* x, const int* pos, const float* factors, int cols, int hd,
                                int dims, int neox, float thetaScale) {
    __shared__ float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    const long long r = blockIdx.x;
    const int half = dims / 2;
    if (threadIdx.x == 0) {
        float theta = (float)pos[r];
        for (int i = 0; i < half; i++) {
            cs[i] = factors != nullptr ? __fdiv_rn(theta, factors[i]) : theta;
            theta = __fmul_rn(theta, thetaScale);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const double th = (double)cs[i];
        sn[i] = (float)sin(th);
        cs[i] = (float)cos(th);
    }
    __syncthreads();
    const float* xr = x + r * cols;
    float* orow = out + r * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const int e = c % hd;
        const float* head = xr + (c - e);
        if (e >= dims) {
            orow[c] = xr[c];
            continue;
        }
        int i, i0, i1;
        if (neox) {
            i = e < half ? e : e - half;
            i0 = i;
            i1 = i + half;
        } else {
            i = e >> 1;
            i0 = 2 * i;
            i1 = 2 * i + 1;
        }
        const float x0 = head[i0], x1 = head[i1];
        const float c_ = cs[i], s_ = sn[i];
        orow[c] = e == i0 ? __fsub_rn(__fmul_rn(x0, c_), __fmul_rn(x1, s_))
                          : __fadd_rn(__fmul_rn(x0, s_), __fmul_rn(x1, c_));
    }
}

// add(out, x, y, n): out = x + y. Grid-stride.
extern "C" __global__ void add(float* out, const float* x, const float* y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        out[i] = __fadd_rn(x[i], y[i]);
    }
}

// swiglu(out, g, u, n): out = silu(g) * u with silu(g) = g / (1 + e^-g)
// computed in double and rounded once, as the CPU does. Grid-stride.
extern "C" __global__ void swiglu(float* out, const float* g, const float* u, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const double gv = (double)g[i];
        const float s = (float)(gv / (1.0 + exp(-gv)));
        out[i] = __fmul_rn(s, u[i]);
    }
}

// select_rows(out, x, rows, cols): out row j = x row rows[j] (zeros for a
// negative index). One block per output row.
extern "C" __global__ void select_rows(float* out, const float* x, const int* rows, int cols) {
    const long long j = blockIdx.x;
    const int r = rows[j];
    float* o = out + j * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        o[c] = r < 0 ? 0.0f : x[(long long)r * cols + c];
    }
}
