// K-quant and IQ4_XS weights (super-blocks of 256 values): the Q8_K
// activation format, their matmuls and their element loads (get_rows).
//
// Q8_K (ggml's block_q8_K, 292 bytes per 256 values): f32 d at 0, 256 int8
// quants at 4, 16 int16 sums of each 16 quants at 260. quantize_q8k writes
// it exactly as runtime/cpu quantizeQ8K (ggml's quantize_row_q8_K_ref).
//
// Matmul semantics (runtime/cpu quantdot.go): per super-block, exact
// integer dots of the weight quants and the activation quants, each 16 (or
// 32) values weighted by their integer sub-block scale, times d_w * d_x;
// for the types with mins (Q2_K, Q4_K, Q5_K) minus dmin_w * d_x times the
// integer sum of each sub-block's min times its activation sum (bsums).
// Float accumulation, whose order differs from the CPU's.
//
// Every kernel of kquant_kind<DT> takes the parameters of the other matmul
// kernels (MM_PARAMS, matmul.cuh), reading xq as Q8_K blocks.

#pragma once

#include "common.cuh"
#include "matmul.cuh"

#define Q8K_BYTES 292

// ---------------------------------------------------------------------------
// quantize_q8k: x [n] f32 (n = 256*nblocks) -> dst nblocks Q8_K blocks. m is
// the first value of largest magnitude, iscale = -127/m, q = min(127,
// round-half-even(iscale*x)), d = 1/iscale (all zero when m is 0). One warp
// per block, lane l owns values 8l..8l+7 (an even lane also writes the sum
// of group l/2). Grid:
// ceil(nblocks / (blockDim/32)) blocks.
extern "C" __global__ void quantize_q8k(uint8_t* dst, const float* x, long long nblocks) {
    const long long b = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (b >= nblocks) {
        return;
    }
    const float* xs = x + b * 256 + 8 * lane;
    float v[8];
    float amax = 0.0f, m = 0.0f;
    int at = 256; // index of m; 256: none yet
#pragma unroll
    for (int i = 0; i < 8; i++) {
        v[i] = xs[i];
        if (fabsf(v[i]) > amax) {
            amax = fabsf(v[i]);
            m = v[i];
            at = 8 * lane + i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) { // the largest magnitude, the first on ties
        const float oa = __shfl_xor_sync(FULL_MASK, amax, o);
        const float om = __shfl_xor_sync(FULL_MASK, m, o);
        const int oat = __shfl_xor_sync(FULL_MASK, at, o);
        if (oa > amax || (oa == amax && oat < at)) {
            amax = oa;
            m = om;
            at = oat;
        }
    }
    uint8_t* blk = dst + b * Q8K_BYTES;
    int sum = 0;
    uint32_t w[2] = {0u, 0u};
    float d = 0.0f;
    if (amax != 0.0f) {
        const float iscale = __fdiv_rn(-127.0f, m);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int q = min(127, __float2int_rn(__fmul_rn(iscale, v[i])));
            sum += q;
            w[i / 4] |= ((uint32_t)q & 0xffu) << (8 * (i % 4));
        }
        d = __fdiv_rn(1.0f, iscale);
    }
    *(uint32_t*)(blk + 4 + 8 * lane) = w[0];
    *(uint32_t*)(blk + 8 + 8 * lane) = w[1];
    sum += __shfl_xor_sync(FULL_MASK, sum, 1); // lanes 2g, 2g+1 hold group g of 16
    if ((lane & 1) == 0) {
        *(int16_t*)(blk + 260 + lane) = (int16_t)sum;
    }
    if (lane == 0) {
        *(float*)blk = d;
    }
}

// ---------------------------------------------------------------------------
// Weight traits: ktraits<DT>::load gives lane L (0..31) the values 8L..8L+7
// of a super-block as two words of 4 signed bytes, the integer scale of
// their 16-value group L/2 and, for has_min types, its min; d and dmin are
// the block's scales; elem(blk, j) is value j dequantized with the CPU's
// roundings (runtime/tensor quants.go).

// k4_scale_min is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block j (0..7) of the 12 packed bytes q.
__device__ __forceinline__ void k4_scale_min(const uint8_t* q, int j, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// q3k_scale is scale j (0..15) of a Q3_K super-block's 12 packed bytes p,
// minus 32.
__device__ __forceinline__ int q3k_scale(const uint8_t* p, int j) {
    const int lo = j < 8 ? (p[j] & 0xf) : (p[j - 8] >> 4);
    const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

// iq4xs_scale is the scale of sub-block ib (0..7) of an IQ4_XS super-block,
// minus 32.
__device__ __forceinline__ int iq4xs_scale(const uint8_t* blk, int ib) {
    const int sh = (int)ld_u16(blk + 2);
    return (((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
}

template <int DT>
struct ktraits;

// Q2_K: scales[16] (low nibble scale, high nibble min) at 0, qs[64] at 16,
// d at 80, dmin at 82.
template <>
struct ktraits<DT_Q2_K> {
    static constexpr int block_bytes = 84;
    static constexpr bool has_min = true;
    __device__ static __forceinline__ float d(const uint8_t* b) { return f16_to_f32(ld_u16(b + 80)); }
    __device__ static __forceinline__ float dmin(const uint8_t* b) { return f16_to_f32(ld_u16(b + 82)); }
    __device__ static __forceinline__ void load(const uint8_t* b, int L, int (&q)[2], int& sc, int& mn) {
        uint32_t a, c;
        ld_u64_a2(b + 16 + 32 * (L / 16) + 8 * (L % 4), a, c);
        const int sh = 2 * ((L / 4) % 4);
        q[0] = (int)((a >> sh) & 0x03030303u);
        q[1] = (int)((c >> sh) & 0x03030303u);
        sc = b[L / 2] & 0xf;
        mn = b[L / 2] >> 4;
    }
    __device__ static __forceinline__ float elem(const uint8_t* b, int j) {
        const int s = b[j / 16];
        const int q = (b[16 + 32 * (j / 128) + j % 32] >> (2 * ((j / 32) % 4))) & 3;
        const float dl = __fmul_rn(d(b), (float)(s & 0xf)), ml = __fmul_rn(dmin(b), (float)(s >> 4));
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
};

// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108; value =
// 2 low bits - (high bit clear ? 4 : 0).
template <>
struct ktraits<DT_Q3_K> {
    static constexpr int block_bytes = 110;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ float d(const uint8_t* b) { return f16_to_f32(ld_u16(b + 108)); }
    __device__ static __forceinline__ float dmin(const uint8_t*) { return 0.0f; }
    __device__ static __forceinline__ void load(const uint8_t* b, int L, int (&q)[2], int& sc, int& mn) {
        uint32_t a, c, ha, hc;
        ld_u64_a2(b + 32 + 32 * (L / 16) + 8 * (L % 4), a, c);
        ld_u64_a2(b + 8 * (L % 4), ha, hc);
        const int sh = 2 * ((L / 4) % 4), hb = L / 4;
        // 3-bit u = low | high << 2 in 0..7; u - 4 as a signed byte.
        const uint32_t u0 = ((a >> sh) & 0x03030303u) | (((ha >> hb) & 0x01010101u) << 2);
        const uint32_t u1 = ((c >> sh) & 0x03030303u) | (((hc >> hb) & 0x01010101u) << 2);
        q[0] = (int)((u0 + 0x7c7c7c7cu) ^ 0x80808080u);
        q[1] = (int)((u1 + 0x7c7c7c7cu) ^ 0x80808080u);
        sc = q3k_scale(b + 96, L / 2);
        mn = 0;
    }
    __device__ static __forceinline__ float elem(const uint8_t* b, int j) {
        int q = (b[32 + 32 * (j / 128) + j % 32] >> (2 * ((j / 32) % 4))) & 3;
        if ((b[j % 32] & (1 << (j / 32))) == 0) {
            q -= 4;
        }
        return __fmul_rn(__fmul_rn(d(b), (float)q3k_scale(b + 96, j / 16)), (float)q);
    }
};

// Q4_K: d at 0, dmin at 2, scales[12] at 4, qs[128] at 16 (value j:
// nibble of byte 32*(j/64) + j%32, low for even j/32). Q5_K adds qh[32] at
// 16 (bit j/32 of byte j%32 is bit 4) and moves qs to 48.
template <bool five>
struct ktraits_k45 {
    static constexpr int block_bytes = five ? 176 : 144;
    static constexpr int qs_off = five ? 48 : 16;
    static constexpr bool has_min = true;
    __device__ static __forceinline__ float d(const uint8_t* b) { return f16_to_f32(ld_u16(b)); }
    __device__ static __forceinline__ float dmin(const uint8_t* b) { return f16_to_f32(ld_u16(b + 2)); }
    __device__ static __forceinline__ void load(const uint8_t* b, int L, int (&q)[2], int& sc, int& mn) {
        uint32_t a, c;
        ld_u64_a2(b + qs_off + 32 * (L / 8) + 8 * (L % 4), a, c);
        const int sh = 4 * ((L / 4) & 1);
        q[0] = (int)((a >> sh) & 0x0f0f0f0fu);
        q[1] = (int)((c >> sh) & 0x0f0f0f0fu);
        if (five) {
            uint32_t ha, hc;
            ld_u64_a2(b + 16 + 8 * (L % 4), ha, hc);
            q[0] |= (int)(((ha >> (L / 4)) & 0x01010101u) << 4);
            q[1] |= (int)(((hc >> (L / 4)) & 0x01010101u) << 4);
        }
        k4_scale_min(b + 4, L / 4, sc, mn);
    }
    __device__ static __forceinline__ float elem(const uint8_t* b, int j) {
        int s, m;
        k4_scale_min(b + 4, j / 32, s, m);
        int q = b[qs_off + 32 * (j / 64) + j % 32];
        q = (j / 32) % 2 == 0 ? (q & 0xf) : (q >> 4);
        if (five) {
            q |= ((b[16 + j % 32] >> (j / 32)) & 1) << 4;
        }
        const float d1 = __fmul_rn(d(b), (float)s), m1 = __fmul_rn(dmin(b), (float)m);
        return __fsub_rn(__fmul_rn(d1, (float)q), m1);
    }
};

template <>
struct ktraits<DT_Q4_K> : ktraits_k45<false> {};
template <>
struct ktraits<DT_Q5_K> : ktraits_k45<true> {};

// Q6_K: ql[128] at 0, qh[64] at 128, scales[16] (int8) at 192, d at 208;
// value j (h = j/128, l = j%32, part = (j%128)/32): nibble of ql[64h + l +
// 32*(part%2)] (high for part >= 2) | 2 bits of qh[32h + l] << 4, minus 32.
template <>
struct ktraits<DT_Q6_K> {
    static constexpr int block_bytes = 210;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ float d(const uint8_t* b) { return f16_to_f32(ld_u16(b + 208)); }
    __device__ static __forceinline__ float dmin(const uint8_t*) { return 0.0f; }
    __device__ static __forceinline__ void load(const uint8_t* b, int L, int (&q)[2], int& sc, int& mn) {
        const int h = L / 16, part = (L % 16) / 4, l = 8 * (L % 4);
        uint32_t a, c, ha, hc;
        ld_u64_a2(b + 64 * h + l + 32 * (part % 2), a, c);
        ld_u64_a2(b + 128 + 32 * h + l, ha, hc);
        const int sh = 4 * (part / 2);
        const uint32_t u0 = ((a >> sh) & 0x0f0f0f0fu) | (((ha >> (2 * part)) & 0x03030303u) << 4);
        const uint32_t u1 = ((c >> sh) & 0x0f0f0f0fu) | (((hc >> (2 * part)) & 0x03030303u) << 4);
        q[0] = (int)((u0 + 0x60606060u) ^ 0x80808080u); // u - 32 as a signed byte
        q[1] = (int)((u1 + 0x60606060u) ^ 0x80808080u);
        sc = (int8_t)b[192 + L / 2];
        mn = 0;
    }
    __device__ static __forceinline__ float elem(const uint8_t* b, int j) {
        const int h = j / 128, l = j % 32, part = (j % 128) / 32;
        int ql = b[64 * h + l + 32 * (part % 2)];
        ql = part >= 2 ? (ql >> 4) : (ql & 0xf);
        const int q = (ql | (((b[128 + 32 * h + l] >> (2 * part)) & 3) << 4)) - 32;
        return __fmul_rn(__fmul_rn(d(b), (float)(int8_t)b[192 + j / 16]), (float)q);
    }
};

// IQ4_XS: d at 0, scales_h (u16) at 2, scales_l[4] at 4, qs[128] at 8
// (sub-block ib of 32: 16 bytes at 8 + 16ib, low nibbles values 0..15,
// high 16..31), each nibble a level of the IQ4_NL table.
template <>
struct ktraits<DT_IQ4_XS> {
    static constexpr int block_bytes = 136;
    static constexpr bool has_min = false;
    __device__ static __forceinline__ float d(const uint8_t* b) { return f16_to_f32(ld_u16(b)); }
    __device__ static __forceinline__ float dmin(const uint8_t*) { return 0.0f; }
    __device__ static __forceinline__ void load(const uint8_t* b, int L, int (&q)[2], int& sc, int& mn) {
        const int ib = L / 4, o = 8 * (L % 4);
        uint32_t a, c;
        ld_u64_a2(b + 8 + 16 * ib + (o & 15), a, c);
        const int sh = o >= 16 ? 4 : 0;
        q[0] = iq4nl_levels((a >> sh) & 0x0f0f0f0fu);
        q[1] = iq4nl_levels((c >> sh) & 0x0f0f0f0fu);
        sc = iq4xs_scale(b, ib);
        mn = 0;
    }
    __device__ static __forceinline__ float elem(const uint8_t* b, int j) {
        const int ib = j / 32, k = j % 32;
        const uint32_t byte = b[8 + 16 * ib + (k & 15)];
        const int v = (int)(int8_t)(uint8_t)iq4nl_levels(k < 16 ? (byte & 0xfu) : (byte >> 4));
        return __fmul_rn(__fmul_rn(d(b), (float)iq4xs_scale(b, ib)), (float)v);
    }
};

// kquant_elem returns value e of a row of K-quant or IQ4_XS dtype dt
// (get_rows); false when dt is none of them.
__device__ __forceinline__ bool kquant_elem(const uint8_t* row, int dt, long long e, float& v) {
    const int j = (int)(e % 256);
    switch (dt) {
#define KQ_ELEM(DT)                                                                   \
    case DT:                                                                          \
        v = ktraits<DT>::elem(row + (e / 256) * ktraits<DT>::block_bytes, j);         \
        return true;
        KQ_ELEM(DT_Q2_K)
        KQ_ELEM(DT_Q3_K)
        KQ_ELEM(DT_Q4_K)
        KQ_ELEM(DT_Q5_K)
        KQ_ELEM(DT_Q6_K)
        KQ_ELEM(DT_IQ4_XS)
#undef KQ_ELEM
    }
    return false;
}

// ---------------------------------------------------------------------------
// gemv_k_acc adds, into acc[r][t], lane L's share of column n0 + r against
// token t (clamped to T - 1, columns to N - 1) over super-blocks b = b0,
// b0 + bstep, ... < nb: the values 8L..8L+7 of each, and for has_min types
// (even lanes) its 16-group's min term.
template <int NT, int R, int DT>
__device__ __forceinline__ void gemv_k_acc(float (&acc)[R][NT], const uint8_t* xq, const uint8_t* w, int T, int N,
                                           long long n0, int nb, int b0, int bstep) {
    typedef ktraits<DT> W;
    const int lane = threadIdx.x & 31;
    const long long xrb = (long long)nb * Q8K_BYTES;
    const long long wrb = (long long)nb * W::block_bytes;
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            acc[r][t] = 0.0f;
        }
    }
#pragma unroll(NT <= 2 ? 2 : 1)
    for (int b = b0; b < nb; b += bstep) {
        uint32_t xv[NT][2];
        float dx[NT];
        int bs[NT];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const uint8_t* xblk = xq + min(t, T - 1) * xrb + (long long)b * Q8K_BYTES;
            dx[t] = *(const float*)xblk;
            xv[t][0] = *(const uint32_t*)(xblk + 4 + 8 * lane);
            xv[t][1] = *(const uint32_t*)(xblk + 8 + 8 * lane);
            bs[t] = W::has_min && (lane & 1) == 0 ? *(const int16_t*)(xblk + 260 + lane) : 0;
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t* wblk = w + min(n0 + r, (long long)N - 1) * wrb + (long long)b * W::block_bytes;
            int q[2], sc, mn;
            W::load(wblk, lane, q, sc, mn);
            const float dw = W::d(wblk);
            const float dm = W::has_min ? W::dmin(wblk) : 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const int dot = __dp4a(q[1], (int)xv[t][1], __dp4a(q[0], (int)xv[t][0], 0));
                acc[r][t] = fmaf(dw * dx[t], (float)(sc * dot), acc[r][t]);
                if (W::has_min) {
                    acc[r][t] = fmaf(-(dm * dx[t]), (float)(mn * bs[t]), acc[r][t]);
                }
            }
        }
    }
}

// gemv_k (1 <= T <= NT): as gemv_q (matmul.cuh), one warp per column group
// of R columns, ks warps splitting the super-blocks. Grid: ceil(N / (R *
// GEMV_WARPS/ks)) blocks of 128 threads.
template <int NT, int R, int DT>
__device__ __forceinline__ void gemv_k(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N, int ks) {
    int kpart;
    const long long n0 = gemv_cols<R>(ks, kpart);
    float acc[R][NT];
    gemv_k_acc<NT, R, DT>(acc, xq, w, T, N, n0, n0 < N ? K / 256 : 0, kpart, ks);
    gemv_reduce_store<NT, R>(acc, out, T, N, n0, ks, kpart);
}

// gemm_k (any T): the GEMM geometry (GEMM_TILE tokens x GEMM_TILE columns
// per block of 256 threads): warp w takes columns n0 + 8w .. n0 + 8w + 7
// and walks the tile's tokens 8 at a time; the weight rows are re-read per
// 8 tokens (from cache). Grid: (ceil(N/64), ceil(T/64)).
template <int DT>
__device__ __forceinline__ void gemm_k(float* out, const uint8_t* xq, const uint8_t* w, int T, int K, int N) {
    const int warp = threadIdx.x >> 5;
    const long long n0 = (long long)blockIdx.x * GEMM_TILE + 8 * warp;
    const int nb = K / 256;
    for (int t0 = blockIdx.y * GEMM_TILE; t0 < min(T, (int)(blockIdx.y + 1) * GEMM_TILE); t0 += 8) {
        float acc[8][8];
        gemv_k_acc<8, 8, DT>(acc, xq + (long long)t0 * nb * Q8K_BYTES, w, T - t0, N, n0, n0 < N ? nb : 0, 0, 1);
        gemv_reduce_store<8, 8>(acc, out + (long long)t0 * N, T - t0, N, n0, 1, 0);
    }
}

template <int DT>
struct mm_kind_k {
    template <int NT, int R>
    __device__ static __forceinline__ void gemv(MM_PARAMS) { gemv_k<NT, R, DT>(out, xq, w, T, K, N, ks); }
    __device__ static __forceinline__ void gemm(MM_PARAMS) { gemm_k<DT>(out, xq, w, T, K, N); }
};

template <>
struct mm_kind<DT_Q2_K> : mm_kind_k<DT_Q2_K> {};
template <>
struct mm_kind<DT_Q3_K> : mm_kind_k<DT_Q3_K> {};
template <>
struct mm_kind<DT_Q4_K> : mm_kind_k<DT_Q4_K> {};
template <>
struct mm_kind<DT_Q5_K> : mm_kind_k<DT_Q5_K> {};
template <>
struct mm_kind<DT_Q6_K> : mm_kind_k<DT_Q6_K> {};
template <>
struct mm_kind<DT_IQ4_XS> : mm_kind_k<DT_IQ4_XS> {};

MM_KERNELS(q2_K, DT_Q2_K)
MM_KERNELS(q3_K, DT_Q3_K)
MM_KERNELS(q4_K, DT_Q4_K)
MM_KERNELS(q5_K, DT_Q5_K)
MM_KERNELS(q6_K, DT_Q6_K)
MM_KERNELS(iq4_xs, DT_IQ4_XS)
