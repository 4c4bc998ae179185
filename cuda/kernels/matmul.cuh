// Matrix multiplication: out [T, N] = x [T, K] . W[N, K]^T, W in its GGUF
// bytes (row n at n*RowBytes(K)), x f32 (float weights) or quantized to
// Q8_0 blocks by quantize_q8 (Q8_0, Q4_0, Q5_0 and IQ4_NL weights, whose
// ggml dot type is Q8_0; Q4_1 and Q5_1, whose dot type is Q8_1, also read
// the blocks' sums quantize_q8 writes after them).
//
// Every matmul kernel takes the same parameters:
//   (float* out, const float* x, const uint8_t* xq, const uint8_t* w, int T, int K, int N)
// Float kernels read x and ignore xq; quantized kernels read xq and ignore x.
//
// Semantics (the CPU reference, runtime/cpu/kernels.go):
//   Q8_0 / Q4_0 / Q5_0 / IQ4_NL: per 32-block an exact integer dot of the weight quants and
//     the activation quants, times (d_w * d_x), accumulated in float;
//   Q4_1 / Q5_1: the same with unsigned quants, plus m_w * s_x per block.
//   F16 / BF16: activations rounded to f16 / bf16 first, products of exact
//     float values, float accumulation. F32: plain float dot.
// Only the accumulation order differs from the CPU.
//
// The K-quants and IQ4_XS (super-blocks of 256, Q8_K activations) have
// their own templates and traits in kquant.cuh.
//
// One GEMV and one GEMM template per kind (quantized, float) serve every
// dtype through wtraits<DT>; a new dtype is a traits specialisation, an
// mm_kind entry and an MM_KERNELS line (and matmulDTypes in launch.go).

#pragma once

#include "common.cuh"

// ---------------------------------------------------------------------------
// q8_sums returns where the Q8_1 sums of nblocks Q8_0 blocks at xq start:
// after the blocks, 16-byte aligned (cuda/buffers.go q8Bytes).
__device__ __forceinline__ const float* q8_sums(const uint8_t* xq, long long nblocks) {
    return (const float*)(xq + ((nblocks * 34 + 15) & ~15LL));
}

// quantize_q8: x [n] f32 (n = 32*nblocks) -> dst nblocks blocks of 34 bytes:
// fp16 d = max|x|/127 then 32 int8 q = round-half-even(x * 127/max|x|),
// exactly runtime/cpu quantizeQ8; then, after the blocks (q8_sums), each
// block's Q8_1 sum s = fp16(d * sum(q)) (with the unrounded d) as float, as
// runtime/cpu quantizeQ8_1, which Q4_1 and Q5_1 weights read. One warp per
// block, lane i owns value i. Grid: ceil(nblocks / (blockDim/32)) blocks.
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
    const int q = (int)(int8_t)__float2int_rn(__fmul_rn(v, id));
    blk[2 + lane] = (uint8_t)q;
    int sum = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(FULL_MASK, sum, o);
    }
    if (lane == 0) {
        *(uint16_t*)blk = (uint16_t)__half_as_ushort(__float2half_rn(d));
        ((float*)q8_sums(dst, nblocks))[b] = round_f16(__fmul_rn(d, (float)sum));
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

// ---------------------------------------------------------------------------
// Weight traits: everything a matmul kernel knows about a weight dtype, so
// that one GEMV and one GEMM template of each kind serve every dtype.
//
// Quantized weights (blocks of 32 values, an fp16 scale first; the
// activations are read as Q8_0 blocks, xq): in the GEMV, lpb lanes share a
// 32-block, lane part p reading ww words of weight quants (load_w) and the
// xw words of activation quants they pair with (load_x); dot is the exact
// integer dot of the two. In the GEMM staging, stage loads quarter qq of a
// block as two words of 4 signed quants, stored as words slot_lo(qq) and
// slot_hi(qq) of the block's 8 (word j holding values 4j..4j+3).
//
// Float weights (the activations read as f32, x): elem_bytes per element;
// load1 and load8 convert one and 8 consecutive elements (load8 needs
// 16-byte alignment for F16/BF16, 32-byte for F32); xround rounds an
// activation to the weight's dot type as the CPU backend does (F16: to
// f16, BF16: to bf16, F32: unchanged).

template <int DT>
struct wtraits;

template <>
struct wtraits<DT_Q8_0> {
    static constexpr bool has_min = false; // no offset: load_m is never called
    __device__ static __forceinline__ float load_m(const uint8_t*) { return 0.0f; }
    static constexpr int block_bytes = 34;
    static constexpr int lpb = 4; // quarter p: bytes 8p..8p+7 = values 8p..8p+7
    static constexpr int ww = 2;
    static constexpr int xw = 2;
    __device__ static __forceinline__ void load_w(const uint8_t* blk, int p, int (&q)[ww]) {
        uint32_t a, b;
        ld_u64_a2(blk + 2 + 8 * p, a, b);
        q[0] = (int)a;
        q[1] = (int)b;
    }
    __device__ static __forceinline__ void load_x(const uint8_t* xblk, int p, uint32_t (&x)[xw]) {
        ld_u64_a2(xblk + 2 + 8 * p, x[0], x[1]);
    }
    __device__ static __forceinline__ int dot(const int (&q)[ww], const uint32_t (&x)[xw]) {
        return __dp4a(q[1], (int)x[1], __dp4a(q[0], (int)x[0], 0));
    }
    __device__ static __forceinline__ void stage(const uint8_t* blk, int qq, int& lo, int& hi) {
        uint32_t a, c;
        ld_u64_a2(blk + 2 + 8 * qq, a, c);
        lo = (int)a;
        hi = (int)c;
    }
    __device__ static __forceinline__ int slot_lo(int qq) { return 2 * qq; }
    __device__ static __forceinline__ int slot_hi(int qq) { return 2 * qq + 1; }
};

// The 32-blocks of nibbles: an fp16 scale d (and for Q4_1 / Q5_1 an fp16
// offset m), for Q5_0 / Q5_1 4 bytes of high bits qh (bit j of the
// little-endian word is bit 4 of value j), then 16 bytes whose low nibble
// j is value j and high nibble value j+16. U gives the layout (qs_off,
// qh_off: 0 without high bits, has_min) and quad, which maps 4 bytes of
// nibbles n and their 4 high bits (bits 0..3 of h) to 4 signed bytes. A
// lane part p reads nibble bytes 8p..8p+7 (values 8p.. and 16+8p..).
// has_min weights (dot type Q8_1: value = d*q + m) add m * s_x per block,
// s_x the activation block's sum (q8_sums).
template <class U>
struct wtraits_nib {
    static constexpr bool has_min = U::has_min;
    static constexpr int block_bytes = U::block_bytes;
    static constexpr int lpb = 2;
    static constexpr int ww = 4;
    static constexpr int xw = 4;
    __device__ static __forceinline__ float load_m(const uint8_t* blk) { return has_min ? f16_to_f32(ld_u16(blk + 2)) : 0.0f; }
    __device__ static __forceinline__ uint32_t high(const uint8_t* blk) { return U::qh_off ? ld_u32_a2(blk + U::qh_off) : 0u; }
    __device__ static __forceinline__ void load_w(const uint8_t* blk, int p, int (&q)[ww]) {
        uint32_t v0, v1;
        ld_u64_a2(blk + U::qs_off + 8 * p, v0, v1);
        const uint32_t h = high(blk);
        q[0] = U::quad(v0 & 0x0f0f0f0fu, h >> (8 * p));
        q[1] = U::quad(v1 & 0x0f0f0f0fu, h >> (8 * p + 4));
        q[2] = U::quad((v0 >> 4) & 0x0f0f0f0fu, h >> (16 + 8 * p));
        q[3] = U::quad((v1 >> 4) & 0x0f0f0f0fu, h >> (20 + 8 * p));
    }
    __device__ static __forceinline__ void load_x(const uint8_t* xblk, int p, uint32_t (&x)[xw]) {
        ld_u64_a2(xblk + 2 + 8 * p, x[0], x[1]);
        ld_u64_a2(xblk + 18 + 8 * p, x[2], x[3]);
    }
    __device__ static __forceinline__ int dot(const int (&q)[ww], const uint32_t (&x)[xw]) {
        int s = __dp4a(q[0], (int)x[0], 0);
        s = __dp4a(q[1], (int)x[1], s);
        s = __dp4a(q[2], (int)x[2], s);
        return __dp4a(q[3], (int)x[3], s);
    }
    __device__ static __forceinline__ void stage(const uint8_t* blk, int qq, int& lo, int& hi) {
        const uint32_t v = ld_u32_a2(blk + U::qs_off + 4 * qq);
        const uint32_t h = high(blk);
        lo = U::quad(v & 0x0f0f0f0fu, h >> (4 * qq));
        hi = U::quad((v >> 4) & 0x0f0f0f0fu, h >> (16 + 4 * qq));
    }
    __device__ static __forceinline__ int slot_lo(int qq) { return qq; }
    __device__ static __forceinline__ int slot_hi(int qq) { return 4 + qq; }
};

// The layouts: Q4_0 nibble - 8, Q5_0 5-bit value - 16, IQ4_NL a level of
// the table, Q4_1 and Q5_1 unsigned.
struct nib_q4_0 {
    static constexpr int block_bytes = 18, qs_off = 2, qh_off = 0;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ int quad(uint32_t n, uint32_t) { return (int)((n + 0x78787878u) ^ 0x80808080u); }
};
struct nib_q5_0 {
    static constexpr int block_bytes = 22, qs_off = 6, qh_off = 2;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ int quad(uint32_t n, uint32_t h) { return q5_signed(n, q5_bits(h)); }
};
struct nib_iq4_nl {
    static constexpr int block_bytes = 18, qs_off = 2, qh_off = 0;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ int quad(uint32_t n, uint32_t) { return iq4nl_levels(n); }
};
struct nib_q4_1 {
    static constexpr int block_bytes = 20, qs_off = 4, qh_off = 0;
    static constexpr bool has_min = true;
    __device__ static __forceinline__ int quad(uint32_t n, uint32_t) { return (int)n; }
};
struct nib_q5_1 {
    static constexpr int block_bytes = 24, qs_off = 8, qh_off = 4;
    static constexpr bool has_min = true;
    __device__ static __forceinline__ int quad(uint32_t n, uint32_t h) { return (int)(n | q5_bits(h)); }
};

template <>
struct wtraits<DT_Q4_0> : wtraits_nib<nib_q4_0> {};
template <>
struct wtraits<DT_Q5_0> : wtraits_nib<nib_q5_0> {};
template <>
struct wtraits<DT_IQ4_NL> : wtraits_nib<nib_iq4_nl> {};
template <>
struct wtraits<DT_Q4_1> : wtraits_nib<nib_q4_1> {};
template <>
struct wtraits<DT_Q5_1> : wtraits_nib<nib_q5_1> {};

template <>
struct wtraits<DT_F32> {
    static constexpr int elem_bytes = 4;
    __device__ static __forceinline__ float load1(const uint8_t* row, long long e) { return *(const float*)(row + 4 * e); }
    __device__ static __forceinline__ void load8(const uint8_t* row, int e, float (&v)[8]) {
        const float4 a = *(const float4*)(row + 4LL * e);
        const float4 b = *(const float4*)(row + 4LL * e + 16);
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    }
    __device__ static __forceinline__ float xround(float v) { return v; }
};

// wtraits16 are the traits of 16-bit float weights: cvt converts their
// bits, rnd rounds an activation to them.
template <float (*cvt)(uint32_t), float (*rnd)(float)>
struct wtraits16 {
    static constexpr int elem_bytes = 2;
    __device__ static __forceinline__ float load1(const uint8_t* row, long long e) {
        return cvt(*(const uint16_t*)(row + 2 * e));
    }
    __device__ static __forceinline__ void load8(const uint8_t* row, int e, float (&v)[8]) {
        const uint4 a = *(const uint4*)(row + 2LL * e);
        const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = cvt(u[i] & 0xffffu);
            v[2 * i + 1] = cvt(u[i] >> 16);
        }
    }
    __device__ static __forceinline__ float xround(float v) { return rnd(v); }
};

template <>
struct wtraits<DT_F16> : wtraits16<f16_to_f32, round_f16> {};
template <>
struct wtraits<DT_BF16> : wtraits16<bf16_to_f32, round_bf16> {};

// gemv_q: quantized weights.
template <int NT, int R, int DT>
__device__ __forceinline__ void gemv_q(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N, int ks) {
    typedef wtraits<DT> W;
    const int step = 32 / W::lpb; // blocks per warp step
    const int lane = threadIdx.x & 31;
    int kpart;
    const long long n0 = gemv_cols<R>(ks, kpart);
    const int nb = n0 < N ? K / 32 : 0; // a column group past N computes nothing
    const long long xrb = (long long)nb * 34; // bytes of an activation row
    const long long wrb = (long long)nb * W::block_bytes;
    const int part = lane % W::lpb;
    const float* sums = q8_sums(xq, (long long)T * (K / 32)); // Q8_1 sums (has_min)
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            acc[r][t] = 0.0f;
        }
    }
#pragma unroll(NT <= 2 ? 4 : 1)
    for (int b = lane / W::lpb + step * kpart; b < nb; b += step * ks) {
        uint32_t xv[NT][W::xw];
        float dx[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const uint8_t* xblk = xq + min(t, T - 1) * xrb + (long long)b * 34;
            dx[t] = f16_to_f32(ld_u16(xblk));
            W::load_x(xblk, part, xv[t]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t* wblk = w + min(n0 + r, (long long)N - 1) * wrb + (long long)b * W::block_bytes;
            const float dw = f16_to_f32(ld_u16(wblk));
            int q[W::ww];
            W::load_w(wblk, part, q);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                acc[r][t] = fmaf(dw * dx[t], (float)W::dot(q, xv[t]), acc[r][t]);
            }
            if (W::has_min && part == 0) { // the block's offset term, once
                const float mw = W::load_m(wblk);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    acc[r][t] = fmaf(mw, sums[(long long)min(t, T - 1) * (K / 32) + b], acc[r][t]);
                }
            }
        }
    }
    gemv_reduce_store<NT, R>(acc, out, T, N, n0, ks, kpart);
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
    typedef wtraits<DT> W;
    const long long rb = (long long)K * W::elem_bytes;
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
                xv[t][0] = W::xround(a.x); xv[t][1] = W::xround(a.y);
                xv[t][2] = W::xround(a.z); xv[t][3] = W::xround(a.w);
                xv[t][4] = W::xround(b.x); xv[t][5] = W::xround(b.y);
                xv[t][6] = W::xround(b.z); xv[t][7] = W::xround(b.w);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wv[8];
                W::load8(w + min(n0 + r, (long long)N - 1) * rb, 8 * c, wv);
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
                xv[t] = W::xround(x[(long long)min(t, T - 1) * K + e]);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = W::load1(w + min(n0 + r, (long long)N - 1) * rb, e);
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
// of DT blocks (the weights, or with DT_Q8_0 the activations) into s[k
// word][row] (as signed int8 quads) and sd[block][row] (scales); missing
// rows / blocks are zero.
template <int DT>
__device__ __forceinline__ void gemm_q_stage(int (*s)[GEMM_PAD], float (*sd)[GEMM_TILE], const uint8_t* m,
                                             long long rowBytes, int rows, int r0, int nb, int b0) {
    typedef wtraits<DT> W;
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
            const uint8_t* blk = m + (long long)r * rowBytes + (long long)b * W::block_bytes;
            if (qq == 0) {
                d = f16_to_f32(ld_u16(blk));
            }
            W::stage(blk, qq, lo, hi);
        }
        s[kb * 8 + W::slot_lo(qq)][row] = lo;
        s[kb * 8 + W::slot_hi(qq)][row] = hi;
        if (qq == 0) {
            sd[kb][row] = d;
        }
    }
}

template <int DT>
__device__ __forceinline__ void gemm_q(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N) {
    __shared__ __align__(16) int ws[GEMM_QBLK * 8][GEMM_PAD];
    __shared__ __align__(16) int xs[GEMM_QBLK * 8][GEMM_PAD];
    __shared__ __align__(16) float wd[GEMM_QBLK][GEMM_TILE];
    __shared__ __align__(16) float xd[GEMM_QBLK][GEMM_TILE];
    __shared__ float wm[GEMM_QBLK][GEMM_TILE]; // has_min: weight offsets
    __shared__ float xm[GEMM_QBLK][GEMM_TILE]; // has_min: activation sums
    const int n0 = blockIdx.x * GEMM_TILE;
    const int t0 = blockIdx.y * GEMM_TILE;
    const int tx = threadIdx.x & 15;
    const int ty = threadIdx.x >> 4;
    const int nb = K / 32;
    const long long xrb = (long long)nb * 34;
    const long long wrb = (long long)nb * wtraits<DT>::block_bytes;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            acc[i][j] = 0.0f;
        }
    }
    for (int b0 = 0; b0 < nb; b0 += GEMM_QBLK) {
        gemm_q_stage<DT>(ws, wd, w, wrb, N, n0, nb, b0);
        gemm_q_stage<DT_Q8_0>(xs, xd, xq, xrb, T, t0, nb, b0);
        if (wtraits<DT>::has_min) { // 256 threads: 64 rows x 4 blocks
            const int row = threadIdx.x >> 2, kb = threadIdx.x & 3, b = b0 + kb;
            const bool bok = b < nb;
            wm[kb][row] = bok && n0 + row < N ? wtraits<DT>::load_m(w + (long long)(n0 + row) * wrb + (long long)b * wtraits<DT>::block_bytes) : 0.0f;
            xm[kb][row] = bok && t0 + row < T ? q8_sums(xq, (long long)T * nb)[(long long)(t0 + row) * nb + b] : 0.0f;
        }
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
                    if (wtraits<DT>::has_min) {
                        acc[i][j] = fmaf(wm[kb][4 * tx + j], xm[kb][4 * ty + i], acc[i][j]);
                    }
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
    typedef wtraits<DT> W;
    const long long rb = (long long)K * W::elem_bytes;
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
            ws[lk][row] = (n < N && e < K) ? W::load1(w + (long long)n * rb, e) : 0.0f;
            xs[lk][row] = (t < T && e < K) ? W::xround(x[(long long)t * K + e]) : 0.0f;
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
// run 256 threads per block and ignore ks. mm_kind<DT> picks the quantized
// or the float template: quantized kernels read xq, float kernels x.

#define MM_PARAMS float *out, const float *x, const uint8_t *xq, const uint8_t *w, int T, int K, int N, int ks

template <int DT>
struct mm_kind {
    template <int NT, int R>
    __device__ static __forceinline__ void gemv(MM_PARAMS) { gemv_f<NT, R, DT>(out, x, w, T, K, N, ks); }
    __device__ static __forceinline__ void gemm(MM_PARAMS) { gemm_f<DT>(out, x, w, T, K, N); }
};

template <int DT>
struct mm_kind_q {
    template <int NT, int R>
    __device__ static __forceinline__ void gemv(MM_PARAMS) { gemv_q<NT, R, DT>(out, xq, w, T, K, N, ks); }
    __device__ static __forceinline__ void gemm(MM_PARAMS) { gemm_q<DT>(out, xq, w, T, K, N); }
};

template <>
struct mm_kind<DT_Q8_0> : mm_kind_q<DT_Q8_0> {};
template <>
struct mm_kind<DT_Q4_0> : mm_kind_q<DT_Q4_0> {};
template <>
struct mm_kind<DT_Q5_0> : mm_kind_q<DT_Q5_0> {};
template <>
struct mm_kind<DT_IQ4_NL> : mm_kind_q<DT_IQ4_NL> {};
template <>
struct mm_kind<DT_Q4_1> : mm_kind_q<DT_Q4_1> {};
template <>
struct mm_kind<DT_Q5_1> : mm_kind_q<DT_Q5_1> {};

#define MM_ARGS out, x, xq, w, T, K, N, ks

// R (columns per warp) must match gemvColsPerWarp in cuda/geometry.go.
#define MM_KERNELS(name, dt)                                                                                            \
    extern "C" __global__ void __launch_bounds__(128) gemv_##name##_1(MM_PARAMS) { mm_kind<dt>::gemv<1, 1>(MM_ARGS); } \
    extern "C" __global__ void __launch_bounds__(128) gemv_##name##_2(MM_PARAMS) { mm_kind<dt>::gemv<2, 2>(MM_ARGS); } \
    extern "C" __global__ void __launch_bounds__(128) gemv_##name##_4(MM_PARAMS) { mm_kind<dt>::gemv<4, 4>(MM_ARGS); } \
    extern "C" __global__ void __launch_bounds__(128) gemv_##name##_8(MM_PARAMS) { mm_kind<dt>::gemv<8, 2>(MM_ARGS); } \
    extern "C" __global__ void __launch_bounds__(256) gemm_##name(MM_PARAMS) { mm_kind<dt>::gemm(MM_ARGS); }

MM_KERNELS(f32, DT_F32)
MM_KERNELS(f16, DT_F16)
MM_KERNELS(bf16, DT_BF16)
MM_KERNELS(q8_0, DT_Q8_0)
MM_KERNELS(q4_0, DT_Q4_0)
MM_KERNELS(q5_0, DT_Q5_0)
MM_KERNELS(iq4_nl, DT_IQ4_NL)
MM_KERNELS(q4_1, DT_Q4_1)
MM_KERNELS(q5_1, DT_Q5_1)
