// KV cache pages: encoding rows on write (kv_write_<format>) and decoding
// values in attention. A stored row of n = kvDim values is n values of the
// format's value size (little-endian) followed by ceil(n/group) float32
// scales, exactly runtime/kv/codec.go; row s of a page area starts at byte
// s*rowBytes.

#pragma once

#include "common.cuh"

template <int FMT>
struct KVFmt;

// group is the values per scale; 1 (unused) for the formats without scales.
template <>
struct KVFmt<KV_F32> {
    static const int vbytes = 4, group = 1;
};
template <>
struct KVFmt<KV_F16> {
    static const int vbytes = 2, group = 1;
};
template <>
struct KVFmt<KV_BF16> {
    static const int vbytes = 2, group = 1;
};
template <>
struct KVFmt<KV_INT8> {
    static const int vbytes = 1, group = 64;
};
template <>
struct KVFmt<KV_FP8> {
    static const int vbytes = 1, group = 256;
};

// kv_scale returns the scale of group g of a row whose values take vals
// bytes; sa says the scales are 4-byte aligned.
__device__ __forceinline__ float kv_scale(const uint8_t* row, long long vals, int g, bool sa) {
    const uint8_t* p = row + vals + 4LL * g;
    return sa ? *(const float*)p : ld_f32_any(p);
}

// kv_load1 decodes value e of a stored row: its stored number times its
// group's scale (float arithmetic), as kv.Codec.Decode.
template <int FMT>
__device__ __forceinline__ float kv_load1(const uint8_t* row, int e, long long vals, bool sa) {
    if (FMT == KV_F32) {
        return *(const float*)(row + 4LL * e);
    } else if (FMT == KV_F16) {
        return f16_to_f32(ld_u16(row + 2LL * e));
    } else if (FMT == KV_BF16) {
        return bf16_to_f32(ld_u16(row + 2LL * e));
    } else if (FMT == KV_INT8) {
        return (float)(int8_t)row[e] * kv_scale(row, vals, e / 64, sa);
    } else {
        return e4m3_to_f32(row[e]) * kv_scale(row, vals, e / 256, sa);
    }
}

// kv_load4 decodes values e..e+3 of a stored row with one aligned load:
// e % 4 == 0 and the row start 4*vbytes aligned (the four share a group).
template <int FMT>
__device__ __forceinline__ void kv_load4(const uint8_t* row, int e, long long vals, bool sa, float (&v)[4]) {
    if (FMT == KV_F32) {
        const float4 a = *(const float4*)(row + 4LL * e);
        v[0] = a.x;
        v[1] = a.y;
        v[2] = a.z;
        v[3] = a.w;
    } else if (FMT == KV_F16 || FMT == KV_BF16) {
        const uint2 a = *(const uint2*)(row + 2LL * e);
        if (FMT == KV_F16) {
            v[0] = f16_to_f32(a.x & 0xffffu);
            v[1] = f16_to_f32(a.x >> 16);
            v[2] = f16_to_f32(a.y & 0xffffu);
            v[3] = f16_to_f32(a.y >> 16);
        } else {
            v[0] = bf16_to_f32(a.x & 0xffffu);
            v[1] = bf16_to_f32(a.x >> 16);
            v[2] = bf16_to_f32(a.y & 0xffffu);
            v[3] = bf16_to_f32(a.y >> 16);
        }
    } else {
        const uint32_t a = *(const uint32_t*)(row + e);
        const float d = kv_scale(row, vals, e / KVFmt<FMT>::group, sa);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t b = (a >> (8 * i)) & 0xffu;
            v[i] = (FMT == KV_INT8 ? (float)(int8_t)b : e4m3_to_f32(b)) * d;
        }
    }
}

// kv_write_<format>(kc, vc, kx, vx, slots, kvDim, rowBytes): row t of kx
// and vx [rows, kvDim] f32 is encoded into slot slots[t] of kc and vc;
// slots[t] < 0 skips the row. Grid (rows, 2): blockIdx.y 0 writes K, 1
// writes V. The bytes are those kv.Codec.Encode writes (for NaN inputs too).
// Grouped formats: one warp per group; per group d = max|x|/top (top 127 or
// 448), lowered by one ulp when top*d overflows; a group holding NaN or Inf
// stores d = NaN and zeros, a group with d == 0 stores zeros; int8 values are
// round-half-away(x/d) clamped to +-127, fp8 values E4M3(x/d).
template <int FMT>
__device__ __forceinline__ void kv_write(uint8_t* kc, uint8_t* vc, const float* kx, const float* vx, const int* slots,
                                         int kvDim, long long rowBytes) {
    const int t = blockIdx.x;
    const long long slot = slots[t];
    if (slot < 0) {
        return;
    }
    const float* src = (blockIdx.y == 0 ? kx : vx) + (long long)t * kvDim;
    uint8_t* dst = (blockIdx.y == 0 ? kc : vc) + slot * rowBytes;
    if (FMT == KV_F32) {
        for (int e = threadIdx.x; e < kvDim; e += blockDim.x) {
            ((uint32_t*)dst)[e] = __float_as_uint(src[e]);
        }
        return;
    }
    if (FMT == KV_F16 || FMT == KV_BF16) {
        for (int e = threadIdx.x; e < kvDim; e += blockDim.x) {
            const float x = src[e];
            ((uint16_t*)dst)[e] = (uint16_t)(FMT == KV_F16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x));
        }
        return;
    }
    const int G = KVFmt<FMT>::group;
    const float top = FMT == KV_INT8 ? 127.0f : 448.0f;
    const int lane = threadIdx.x & 31;
    const int nw = blockDim.x >> 5;
    const int ngroups = (kvDim + G - 1) / G;
    for (int gi = threadIdx.x >> 5; gi < ngroups; gi += nw) {
        const int lo = gi * G;
        const int hi = min(lo + G, kvDim);
        float amax = 0.0f;
        bool bad = false;
        for (int e = lo + lane; e < hi; e += 32) {
            const float a = fabsf(src[e]);
            if (!(a <= 3.402823466e+38f)) {
                bad = true;
            } else {
                amax = fmaxf(amax, a);
            }
        }
        amax = warp_max(amax);
        bad = __any_sync(FULL_MASK, bad);
        float d = amax / top;
        const bool zero = bad || d == 0.0f;
        if (bad) {
            d = __uint_as_float(0x7fc00000u);
        } else if (!zero && __fmul_rn(d, top) > 3.402823466e+38f) {
            d = __uint_as_float(__float_as_uint(d) - 1u);
        }
        for (int e = lo + lane; e < hi; e += 32) {
            uint32_t b = 0;
            if (!zero) {
                const float v = src[e] / d;
                if (FMT == KV_INT8) {
                    const float q = fminf(127.0f, fmaxf(-127.0f, roundf(v)));
                    b = (uint32_t)(uint8_t)(int8_t)q;
                } else {
                    b = e4m3_from_f32(v);
                }
            }
            dst[e] = (uint8_t)b;
        }
        if (lane == 0) {
            st_u32_any(dst + kvDim + 4LL * gi, __float_as_uint(d));
        }
    }
}

#define KV_WRITE(name, fmt)                                                                                   \
    extern "C" __global__ void kv_write_##name(uint8_t* kc, uint8_t* vc, const float* kx, const float* vx,    \
                                               const int* slots, int kvDim, long long rowBytes) {             \
        kv_write<fmt>(kc, vc, kx, vx, slots, kvDim, rowBytes);                                                \
    }

KV_WRITE(f32, KV_F32)
KV_WRITE(f16, KV_F16)
KV_WRITE(bf16, KV_BF16)
KV_WRITE(int8, KV_INT8)
KV_WRITE(fp8, KV_FP8)
