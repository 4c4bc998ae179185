// Shared device helpers of the ninfer kernels: dtype codes, exact
// conversions (bit for bit the Go reference in runtime/tensor and
// runtime/kv), unaligned loads of 2-byte aligned block data, and warp
// reductions. Included once, by ninfer.cu.

#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

// Weight dtype codes: the values of tensor.DType.
#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_Q8_0 4
#define DT_Q4_0 5
#define DT_Q4_1 7
#define DT_Q5_0 8
#define DT_Q5_1 9
#define DT_Q2_K 10
#define DT_Q3_K 11
#define DT_Q4_K 12
#define DT_Q5_K 13
#define DT_Q6_K 14
#define DT_IQ4_NL 15
#define DT_IQ4_XS 16

// KV page format codes (cuda/geometry.go kvFormatCode).
#define KV_F32 0
#define KV_F16 1
#define KV_BF16 2
#define KV_INT8 3
#define KV_FP8 4

#define FULL_MASK 0xffffffffu

// f16_to_f32 converts binary16 bits to float exactly (tensor.F16ToF32 for
// every non-NaN input).
__device__ __forceinline__ float f16_to_f32(uint32_t h) {
    return __half2float(__ushort_as_half((unsigned short)h));
}

// bf16_to_f32 converts bfloat16 bits to float exactly.
__device__ __forceinline__ float bf16_to_f32(uint32_t h) {
    return __uint_as_float(h << 16);
}

// f32_to_f16_bits is tensor.F32ToF16, bit for bit (NaN included): round to
// nearest even, overflow to +-Inf, underflow to +-0.
__device__ __forceinline__ uint32_t f32_to_f16_bits(float f) {
    const uint32_t b = __float_as_uint(f);
    const uint32_t sign = (b >> 16) & 0x8000u;
    const int exp = (int)((b >> 23) & 0xff);
    const uint32_t mant = b & 0x7fffffu;
    if (exp == 0xff) {
        if (mant != 0) {
            return sign | 0x7e00u | (mant >> 13);
        }
        return sign | 0x7c00u;
    }
    const int e = exp - 127;
    if (e > 15) {
        return sign | 0x7c00u;
    }
    if (e >= -14) {
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13);
        const uint32_t rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
            h++;
        }
        return sign | h;
    }
    if (e < -25 || exp == 0) {
        return sign;
    }
    const uint32_t m = mant | 0x800000u;
    const uint32_t shift = (uint32_t)(-e - 1); // 14..24
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) {
        h++;
    }
    return sign | h;
}

// f32_to_bf16_bits is tensor.F32ToBF16, bit for bit: round to nearest even,
// NaN kept quiet with its sign.
__device__ __forceinline__ uint32_t f32_to_bf16_bits(float f) {
    const uint32_t b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return ((b >> 16) | 0x40u) & 0xffffu;
    }
    return ((b + 0x7fffu + ((b >> 16) & 1u)) >> 16) & 0xffffu;
}

// round_f16 and round_bf16 round a float to the nearest f16 / bf16 value,
// as the CPU backend rounds activations to a weight's dot type.
__device__ __forceinline__ float round_f16(float v) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ float round_bf16(float v) { return bf16_to_f32(f32_to_bf16_bits(v)); }

// e4m3_from_f32 is kv.E4M3FromF32, bit for bit: OCP E4M3FN, round to
// nearest even, saturating to +-448, NaN to 0x7F/0xFF.
__device__ __forceinline__ uint32_t e4m3_from_f32(float x) {
    const uint32_t bits = __float_as_uint(x);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const uint32_t a = bits & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7fu;
    }
    if (a >= 0x43e00000u) {
        return sign | 0x7eu;
    }
    if (a < 0x3c800000u) {
        // a * 2^9 is exact; round it to an integer count of 2^-9 units.
        const float m = rintf(__fmul_rn(__uint_as_float(a), 512.0f));
        return sign | (uint32_t)m;
    }
    const int exp = (int)(a >> 23) - 127; // -6..8
    const uint32_t mant = a & 0x7fffffu;
    uint32_t code = ((uint32_t)(exp + 7) << 3) | (mant >> 20);
    const uint32_t rem = mant & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (code & 1u))) {
        code++;
    }
    return sign | code;
}

// e4m3_to_f32 is kv.E4M3ToF32 (exact; both NaN codes give a NaN).
__device__ __forceinline__ float e4m3_to_f32(uint32_t b) {
    const uint32_t sign = (b & 0x80u) << 24;
    const uint32_t exp = (b >> 3) & 0xfu;
    const uint32_t mant = b & 7u;
    if (exp == 0xfu && mant == 7u) {
        return __uint_as_float(sign | 0x7fc00000u);
    }
    if (exp == 0) {
        return __uint_as_float(sign | __float_as_uint((float)mant * 0.001953125f)); // m * 2^-9
    }
    return __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));
}

// ld_u16 loads 2 bytes from a 2-byte aligned address.
__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) {
    return *(const uint16_t*)p;
}

// ld_u32_a2 loads the 4 bytes at p (2-byte aligned) as a little-endian
// word, reading only bytes inside [p-2, p+4) with aligned loads.
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
    const uintptr_t u = (uintptr_t)p;
    const bool sh = (u & 2) != 0;
    const uint32_t w0 = *(const uint32_t*)(u & ~(uintptr_t)3);
    const uint32_t w1 = sh ? ld_u16(p + 2) : 0u;
    return __byte_perm(w0, w1, sh ? 0x5432 : 0x3210);
}

// ld_u64_a2 loads the 8 bytes at p (2-byte aligned) as two little-endian
// words, reading only bytes inside [p-2, p+8) with aligned loads.
__device__ __forceinline__ void ld_u64_a2(const uint8_t* p, uint32_t& a, uint32_t& b) {
    const uintptr_t u = (uintptr_t)p;
    const bool sh = (u & 2) != 0;
    const uint32_t* w = (const uint32_t*)(u & ~(uintptr_t)3);
    const uint32_t w0 = w[0];
    const uint32_t w1 = w[1];
    const uint32_t w2 = sh ? ld_u16(p + 6) : 0u;
    const uint32_t sel = sh ? 0x5432 : 0x3210;
    a = __byte_perm(w0, w1, sel);
    b = __byte_perm(w1, w2, sel);
}

// ld_f32_any loads a little-endian float at any byte address.
__device__ __forceinline__ float ld_f32_any(const uint8_t* p) {
    return __uint_as_float((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

// st_u32_any stores a little-endian word at any byte address.
__device__ __forceinline__ void st_u32_any(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

// q5_bits spreads 4 consecutive high bits (bits 0..3 of h) to bit 4 of
// each of 4 bytes.
__device__ __forceinline__ uint32_t q5_bits(uint32_t h) {
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// q5_signed turns 4 bytes of 5-bit values 0..31 (the nibbles n and the
// spread high bits hb) into 4 signed bytes (value - 16): adding 0x70 to
// 0..31 cannot carry, and flipping bit 7 maps 0x70..0x8f to -16..15.
__device__ __forceinline__ int q5_signed(uint32_t n, uint32_t hb) {
    return (int)(((n | hb) + 0x70707070u) ^ 0x80808080u);
}

// iq4nl_levels maps 4 bytes of nibbles 0..15 to the IQ4_NL levels
// (tensor.IQ4NLLevel): two 8-entry __byte_perm lookups into the level
// table's words, merged by each nibble's bit 3.
__device__ __forceinline__ int iq4nl_levels(uint32_t n) {
    const uint32_t lo3 = n & 0x07070707u;
    const uint32_t sel = (lo3 & 0x7u) | ((lo3 >> 4) & 0x70u) | ((lo3 >> 8) & 0x700u) | ((lo3 >> 12) & 0x7000u);
    const uint32_t a = __byte_perm(0xbfad9881u, 0xf6eaddcfu, sel); // levels 0..7
    const uint32_t b = __byte_perm(0x26190d01u, 0x71594535u, sel); // levels 8..15
    const uint32_t m = ((n >> 3) & 0x01010101u) * 0xffu;
    return (int)((a & ~m) | (b & m));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(FULL_MASK, v, o);
    }
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(FULL_MASK, v, o);
    }
    return v;
}

// warp_sum_squares returns to every lane of a warp the sum of xs[0..n)
// squared, each square rounded to float and the sum taken in double (the
// CPU's rms_norm and l2_norm sums).
__device__ __forceinline__ double warp_sum_squares(const float* xs, int n, int lane) {
    double sum = 0.0;
    for (int e = lane; e < n; e += 32) {
        const float v = xs[e];
        sum += (double)__fmul_rn(v, v);
    }
    return warp_sum_d(sum);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    }
    return v;
}
