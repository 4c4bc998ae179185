// Matrix multiplication: out [T, N] = x [T, K] . W[N, K]^T, W in its GGUF
// bytes (row n at n*RowBytes(K)), x f32 (float weights) or quantized to
// Q8_0 blocks by quantize_q8 (Q8_0 and Q4_0 weights).
//
// Every matmul kernel takes the same parameters:
//   (float* out, const float* x, const uint8_t* xq, const uint8_t* w, int T, int K, int N)
// Float kernels read x and ignore xq; quantized kernels read xq and ignore x.
//
// Semantics (the CPU reference, runtime/cpu/kernels.go):
//   Q8_0 / Q4_0: per 32-block an exact integer dot of the weight quants and
//     the activation quants, times (d_w * d_x), accumulated in float.
//   F16 / BF16: activations rounded to f16 / bf16 first, products of exact
//     float values, float accumulation. F32: plain float dot.
// Only the accumulation order differs from the CPU.

#pragma once

#include "common.cuh"

// ---------------------------------------------------------------------------
// quantize_q8: x [n] f32 (n = 32*nblocks) -> dst nblocks blocks of 34 bytes:
// fp16 d = max|x|/127 then 32 int8 q = round-half-even(x * 127/max|x|),
// exactly runtime/cpu quantizeQ8. One warp per block, lane i owns value i.
// Grid: ceil(nblocks / (blockDim/32)) blocks.
extern "C" __global__ void quantize_q8(uint8_t* dst, const float* x, long long nblocks) {
    const long long b = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (b >= nblocks) {
        return;
    }
    const float v = x[b * 32 + lane];
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    uint8_t* blk = dst + b * 34;
    blk[2 + lane] = (uint8_t)(int8_t)__float2int_rn(__fmul_rn(v, id));
    if (lane == 0) {
        *(uint16_t*)blk = (uint16_t)__half_as_ushort(__float2half_rn(d));
    }
}

// ---------------------------------------------------------------------------
// GEMV (1 <= T <= NT <= 8): a group of ks warps (ks = 1, 2 or 4; ks warps
// split K, when N alone gives too few warps to keep the memory busy)
// computes R consecutive output columns for all T tokens, so each weight
// byte is read once. Tokens past T and columns past N are computed on
// clamped (valid) rows and not stored, so the inner loops have no branches.
// Quantized: lane l works on 8 weight bytes per 32-block (Q8_0: quarter l%4
// of block l/4, 8 blocks per warp step; Q4_0: half l%2 of block l/2, 16
// blocks per step); the activation quants it needs are loaded once and
// reused for the R columns. Float: lane l takes 8-element chunks.
// Grid: ceil(N / (R * GEMV_WARPS/ks)) blocks.

#define GEMV_WARPS 4

// gemv_cols returns the first output column of this warp's column group and
// its K slice: ks warps (1, 2 or 4) of a block share a group of R columns,
// warp w taking slice w % ks of the 32-blocks (or 8-element chunks).
template <int R>
__device__ __forceinline__ long long gemv_cols(int ks, int& kpart) {
    const int warp = threadIdx.x >> 5;
    kpart = warp % ks;
    return ((long long)blockIdx.x * (GEMV_WARPS / ks) + warp / ks) * R;
}

// gemv_reduce_store sums each accumulator over the warp and, when ks > 1,
// over the ks warps of the column group (in slice order), and stores the
// sums of the real tokens and columns. Every thread of the block calls it.
template <int NT, int R>
__device__ __forceinline__ void gemv_reduce_store(float (&acc)[R][NT], float* out, int T, int N, long long n0, int ks,
                                                  int kpart) {
    __shared__ float red[GEMV_WARPS][R * NT];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float v = warp_sum(acc[r][t]);
            if (ks == 1) {
                if (lane == ((r * NT + t) & 31) && t < T && n0 + r < N) {
                    out[(long long)t * N + n0 + r] = v;
                }
            } else if (lane == 0) {
                red[warp][r * NT + t] = v;
            }
        }
    }
    if (ks == 1) {
        return;
    }
    __syncthreads();
    if (kpart == 0) {
        for (int i = lane; i < R * NT; i += 32) {
            const int r = i / NT, t = i % NT;
            float v = red[warp][i];
            for (int p = 1; p < ks; p++) {
                v += red[warp + p][i];
            }
            if (t < T && n0 + r < N) {
                out[(long long)t * N + n0 + r] = v;
            }
        }
    }
}

template <int NT, int R>
__device__ __forceinline__ void gemv_q8_0(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N, int ks) {
    const int lane = threadIdx.x & 31;
    int kpart;
    const long long n0 = gemv_cols<R>(ks, kpart);
    const int nb = n0 < N ? K / 32 : 0; // a column group past N computes nothing
    const long long rb = (long long)nb * 34; // bytes of a weight row and of an activation row
    const int qq = lane & 3;
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            acc[r][t] = 0.0f;
        }
    }
#pragma unroll(NT <= 2 ? 4 : 1)
    for (int b = (lane >> 2) + 8 * kpart; b < nb; b += 8 * ks) {
        uint32_t xa[NT], xb[NT];
        float dx[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const uint8_t* xblk = xq + min(t, T - 1) * rb + (long long)b * 34;
            dx[t] = f16_to_f32(ld_u16(xblk));
            ld_u64_a2(xblk + 2 + 8 * qq, xa[t], xb[t]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t* wblk = w + min(n0 + r, (long long)N - 1) * rb + (long long)b * 34;
            const float dw = f16_to_f32(ld_u16(wblk));
            uint32_t wa, wb;
            ld_u64_a2(wblk + 2 + 8 * qq, wa, wb);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const int s = __dp4a((int)wb, (int)xb[t], __dp4a((int)wa, (int)xa[t], 0));
                acc[r][t] = fmaf(dw * dx[t], (float)s, acc[r][t]);
            }
        }
    }
    gemv_reduce_store<NT, R>(acc, out, T, N, n0, ks, kpart);
}

template <int NT, int R>
__device__ __forceinline__ void gemv_q4_0(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N, int ks) {
    const int lane = threadIdx.x & 31;
    int kpart;
    const long long n0 = gemv_cols<R>(ks, kpart);
    const int nb = n0 < N ? K / 32 : 0;
    const long long xrb = (long long)nb * 34;
    const long long wrb = (long long)nb * 18;
    const int hh = lane & 1;
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            acc[r][t] = 0.0f;
        }
    }
#pragma unroll(NT <= 2 ? 4 : 1)
    for (int b = (lane >> 1) + 16 * kpart; b < nb; b += 16 * ks) {
        // Nibble bytes 8hh..8hh+7 hold values 8hh..8hh+7 (low nibbles) and
        // 16+8hh..16+8hh+7 (high nibbles).
        uint32_t xl0[NT], xl1[NT], xh0[NT], xh1[NT];
        float dx[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const uint8_t* xblk = xq + min(t, T - 1) * xrb + (long long)b * 34;
            dx[t] = f16_to_f32(ld_u16(xblk));
            ld_u64_a2(xblk + 2 + 8 * hh, xl0[t], xl1[t]);
            ld_u64_a2(xblk + 18 + 8 * hh, xh0[t], xh1[t]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t* wblk = w + min(n0 + r, (long long)N - 1) * wrb + (long long)b * 18;
            const float dw = f16_to_f32(ld_u16(wblk));
            uint32_t v0, v1;
            ld_u64_a2(wblk + 2 + 8 * hh, v0, v1);
            const int l0 = q4_lo(v0), l1 = q4_lo(v1), h0 = q4_hi(v0), h1 = q4_hi(v1);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                int s = __dp4a(l0, (int)xl0[t], 0);
                s = __dp4a(l1, (int)xl1[t], s);
                s = __dp4a(h0, (int)xh0[t], s);
                s = __dp4a(h1, (int)xh1[t], s);
                acc[r][t] = fmaf(dw * dx[t], (float)s, acc[r][t]);
            }
        }
    }
    gemv_reduce_store<NT, R>(acc, out, T, N, n0, ks, kpart);
}

// load8 converts 8 consecutive weights starting at element e of row w
// (16-byte aligned for F16/BF16, 32-byte for F32) to float.
template <int DT>
__device__ __forceinline__ void wload8(const uint8_t* row, int e, float (&v)[8]) {
    if (DT == DT_F32) {
        const float4 a = *(const float4*)(row + 4LL * e);
        const float4 b = *(const float4*)(row + 4LL * e + 16);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
        const uint4 a = *(const uint4*)(row + 2LL * e);
        const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (DT == DT_F16) {
                v[2 * i] = f16_to_f32(u[i] & 0xffffu);
                v[2 * i + 1] = f16_to_f32(u[i] >> 16);
            } else {
                v[2 * i] = bf16_to_f32(u[i] & 0xffffu);
                v[2 * i + 1] = bf16_to_f32(u[i] >> 16);
            }
        }
    }
}

template <int DT>
__device__ __forceinline__ float wload1(const uint8_t* row, long long e) {
    if (DT == DT_F32) {
        return *(const float*)(row + 4 * e);
    }
    const uint32_t h = *(const uint16_t*)(row + 2 * e);
    return DT == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// xround rounds an activation to the weight's dot type.
template <int DT>
__device__ __forceinline__ float xround(float v) {
    if (DT == DT_F16) {
        return round_f16(v);
    }
    if (DT == DT_BF16) {
        return round_bf16(v);
    }
    return v;
}

// gemv_f: float weights. Lane l handles 8-element chunks l, l+32, ... with
// 16-byte loads when K % 8 == 0 and x and w are 16-byte aligned, single
// elements otherwise.
template <int NT, int R, int DT>
__device__ __forceinline__ void gemv_f(float* out, const float* x, const uint8_t* w, int T, int K, int N, int ks) {
    const int lane = threadIdx.x & 31;
    int kpart;
    const long long n0 = gemv_cols<R>(ks, kpart);
    const int Kc = n0 < N ? K : 0; // a column group past N computes nothing
    const long long rb = (long long)K * (DT == DT_F32 ? 4 : 2);
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            acc[r][t] = 0.0f;
        }
    }
    const bool vec = (K % 8) == 0 && (((uintptr_t)x | (uintptr_t)w) & 15) == 0;
    if (vec) {
#pragma unroll(NT <= 2 ? 2 : 1)
        for (int c = lane + 32 * kpart; c < Kc / 8; c += 32 * ks) {
            float xv[NT][8];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float* xr = x + (long long)min(t, T - 1) * K + 8 * c;
                const float4 a = *(const float4*)xr;
                const float4 b = *(const float4*)(xr + 4);
                xv[t][0] = xround<DT>(a.x); xv[t][1] = xround<DT>(a.y);
                xv[t][2] = xround<DT>(a.z); xv[t][3] = xround<DT>(a.w);
                xv[t][4] = xround<DT>(b.x); xv[t][5] = xround<DT>(b.y);
                xv[t][6] = xround<DT>(b.z); xv[t][7] = xround<DT>(b.w);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wv[8];
                wload8<DT>(w + min(n0 + r, (long long)N - 1) * rb, 8 * c, wv);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    float s = acc[r][t];
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        s = fmaf(xv[t][i], wv[i], s);
                    }
                    acc[r][t] = s;
                }
            }
        }
    } else {
        for (int e = lane + 32 * kpart; e < Kc; e += 32 * ks) {
            float xv[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) {
                xv[t] = xround<DT>(x[(long long)min(t, T - 1) * K + e]);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = wload1<DT>(w + min(n0 + r, (long long)N - 1) * rb, e);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    acc[r][t] = fmaf(xv[t], wv, acc[r][t]);
                }
            }
        }
    }
    gemv_reduce_store<NT, R>(acc, out, T, N, n0, ks, kpart);
}

// ---------------------------------------------------------------------------
// GEMM (any T): 256 threads compute a tile of 64 tokens x 64 output columns;
// thread (ty, tx) = (tid/16, tid%16) owns tokens 4ty..4ty+3 and columns
// 4tx..4tx+3. K is walked in chunks staged in shared memory, transposed
// ([k][column]) so a thread reads its 4 columns / 4 tokens with one 16-byte
// load. Each weight tile is read once per 64 tokens.
// Grid: (ceil(N/64), ceil(T/64)).

#define GEMM_TILE 64
#define GEMM_PAD 68 // row stride (words) of the staged tiles: 16-byte aligned
#define GEMM_QBLK 4 // quant blocks per K chunk (128 values, 32 int words)
#define GEMM_FK 32  // float K chunk

// gemm_q_stage loads rows [r0, r0+64) x quant blocks [b0, b0+4) of a matrix
// of 34-byte (Q8_0) or 18-byte (Q4_0) blocks into s[k word][row] (as signed
// int8 quads) and sd[block][row] (scales); missing rows / blocks are zero.
template <bool Q4>
__device__ __forceinline__ void gemm_q_stage(int (*s)[GEMM_PAD], float (*sd)[GEMM_TILE], const uint8_t* m,
                                             long long rowBytes, int rows, int r0, int nb, int b0) {
    const int bb = Q4 ? 18 : 34;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int task = threadIdx.x + 256 * i; // 64 rows x 16 quarter-blocks
        const int row = task >> 4;
        const int kb = (task >> 2) & 3;
        const int qq = task & 3;
        const int r = r0 + row;
        const int b = b0 + kb;
        int lo = 0, hi = 0;
        float d = 0.0f;
        if (r < rows && b < nb) {
            const uint8_t* blk = m + (long long)r * rowBytes + (long long)b * bb;
            if (qq == 0) {
                d = f16_to_f32(ld_u16(blk));
            }
            if (Q4) {
                const uint32_t v = ld_u32_a2(blk + 2 + 4 * qq);
                lo = q4_lo(v);
                hi = q4_hi(v);
            } else {
                uint32_t a, c;
                ld_u64_a2(blk + 2 + 8 * qq, a, c);
                lo = (int)a;
                hi = (int)c;
            }
        }
        if (Q4) {
            // word j of a block holds values 4j..4j+3
            s[kb * 8 + qq][row] = lo;
            s[kb * 8 + 4 + qq][row] = hi;
        } else {
            s[kb * 8 + 2 * qq][row] = lo;
            s[kb * 8 + 2 * qq + 1][row] = hi;
        }
        if (qq == 0) {
            sd[kb][row] = d;
        }
    }
}

template <bool Q4>
__device__ __forceinline__ void gemm_q(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N) {
    __shared__ __align__(16) int ws[GEMM_QBLK * 8][GEMM_PAD];
    __shared__ __align__(16) int xs[GEMM_QBLK * 8][GEMM_PAD];
    __shared__ __align__(16) float wd[GEMM_QBLK][GEMM_TILE];
    __shared__ __align__(16) float xd[GEMM_QBLK][GEMM_TILE];
    const int n0 = blockIdx.x * GEMM_TILE;
    const int t0 = blockIdx.y * GEMM_TILE;
    const int tx = threadIdx.x & 15;
    const int ty = threadIdx.x >> 4;
    const int nb = K / 32;
    const long long xrb = (long long)nb * 34;
    const long long wrb = (long long)nb * (Q4 ? 18 : 34);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            acc[i][j] = 0.0f;
        }
    }
    for (int b0 = 0; b0 < nb; b0 += GEMM_QBLK) {
        gemm_q_stage<Q4>(ws, wd, w, wrb, N, n0, nb, b0);
        gemm_q_stage<false>(xs, xd, xq, xrb, T, t0, nb, b0);
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < GEMM_QBLK; kb++) {
            int is[4][4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    is[i][j] = 0;
                }
            }
#pragma unroll
            for (int k = kb * 8; k < kb * 8 + 8; k++) {
                const int4 a = *(const int4*)&xs[k][4 * ty];
                const int4 b = *(const int4*)&ws[k][4 * tx];
                const int av[4] = {a.x, a.y, a.z, a.w};
                const int bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        is[i][j] = __dp4a(av[i], bv[j], is[i][j]);
                    }
                }
            }
            const float4 dxv = *(const float4*)&xd[kb][4 * ty];
            const float4 dwv = *(const float4*)&wd[kb][4 * tx];
            const float dxa[4] = {dxv.x, dxv.y, dxv.z, dxv.w};
            const float dwa[4] = {dwv.x, dwv.y, dwv.z, dwv.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    acc[i][j] = fmaf(dwa[j] * dxa[i], (float)is[i][j], acc[i][j]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = t0 + 4 * ty + i;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = n0 + 4 * tx + j;
            if (t < T && n < N) {
                out[(long long)t * N + n] = acc[i][j];
            }
        }
    }
}

template <int DT>
__device__ __forceinline__ void gemm_f(float* out, const float* x, const uint8_t* w, int T, int K, int N) {
    __shared__ __align__(16) float ws[GEMM_FK][GEMM_PAD];
    __shared__ __align__(16) float xs[GEMM_FK][GEMM_PAD];
    const int n0 = blockIdx.x * GEMM_TILE;
    const int t0 = blockIdx.y * GEMM_TILE;
    const int tx = threadIdx.x & 15;
    const int ty = threadIdx.x >> 4;
    const int lk = threadIdx.x & 31; // staging: k within the chunk
    const int lr = threadIdx.x >> 5; // staging: first row, then every 8th
    const long long rb = (long long)K * (DT == DT_F32 ? 4 : 2);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            acc[i][j] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < K; k0 += GEMM_FK) {
        const int e = k0 + lk;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int row = lr + 8 * i;
            const int n = n0 + row;
            const int t = t0 + row;
            ws[lk][row] = (n < N && e < K) ? wload1<DT>(w + (long long)n * rb, e) : 0.0f;
            xs[lk][row] = (t < T && e < K) ? xround<DT>(x[(long long)t * K + e]) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < GEMM_FK; k++) {
            const float4 a = *(const float4*)&xs[k][4 * ty];
            const float4 b = *(const float4*)&ws[k][4 * tx];
            const float av[4] = {a.x, a.y, a.z, a.w};
            const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = t0 + 4 * ty + i;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = n0 + 4 * tx + j;
            if (t < T && n < N) {
                out[(long long)t * N + n] = acc[i][j];
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Entry points. GEMV kernels are named gemv_<dtype>_<NT> (NT = 1, 2, 4, 8:
// the most tokens they handle) and run 128 threads (GEMV_WARPS warps) per
// block, ks (1, 2 or 4) warps per column group; GEMM kernels gemm_<dtype>
// run 256 threads per block and ignore ks.

#define MM_PARAMS float *out, const float *x, const uint8_t *xq, const uint8_t *w, int T, int K, int N, int ks

#define GEMV_Q8(nt, r) \
    extern "C" __global__ void __launch_bounds__(128) gemv_q8_0_##nt(MM_PARAMS) { gemv_q8_0<nt, r>(out, xq, w, T, K, N, ks); }
#define GEMV_Q4(nt, r) \
    extern "C" __global__ void __launch_bounds__(128) gemv_q4_0_##nt(MM_PARAMS) { gemv_q4_0<nt, r>(out, xq, w, T, K, N, ks); }
#define GEMV_F(name, dt, nt, r) \
    extern "C" __global__ void __launch_bounds__(128) gemv_##name##_##nt(MM_PARAMS) { gemv_f<nt, r, dt>(out, x, w, T, K, N, ks); }

// R (columns per warp) must match gemvColsPerWarp in cuda/geometry.go.
GEMV_Q8(1, 1)
GEMV_Q8(2, 2)
GEMV_Q8(4, 4)
GEMV_Q8(8, 2)
GEMV_Q4(1, 1)
GEMV_Q4(2, 2)
GEMV_Q4(4, 4)
GEMV_Q4(8, 2)
GEMV_F(f32, DT_F32, 1, 1)
GEMV_F(f32, DT_F32, 2, 2)
GEMV_F(f32, DT_F32, 4, 4)
GEMV_F(f32, DT_F32, 8, 2)
GEMV_F(f16, DT_F16, 1, 1)
GEMV_F(f16, DT_F16, 2, 2)
GEMV_F(f16, DT_F16, 4, 4)
GEMV_F(f16, DT_F16, 8, 2)
GEMV_F(bf16, DT_BF16, 1, 1)
GEMV_F(bf16, DT_BF16, 2, 2)
GEMV_F(bf16, DT_BF16, 4, 4)
GEMV_F(bf16, DT_BF16, 8, 2)

extern "C" __global__ void __launch_bounds__(256) gemm_q8_0(MM_PARAMS) { gemm_q<false>(out, xq, w, T, K, N); }
extern "C" __global__ void __launch_bounds__(256) gemm_q4_0(MM_PARAMS) { gemm_q<true>(out, xq, w, T, K, N); }
extern "C" __global__ void __launch_bounds__(256) gemm_f32(MM_PARAMS) { gemm_f<DT_F32>(out, x, w, T, K, N); }
extern "C" __global__ void __launch_bounds__(256) gemm_f16(MM_PARAMS) { gemm_f<DT_F16>(out, x, w, T, K, N); }
extern "C" __global__ void __launch_bounds__(256) gemm_bf16(MM_PARAMS) { gemm_f<DT_BF16>(out, x, w, T, K, N); }
