// Stand-in for the toolkit's cuda_fp16.h (and the bfloat16 basics of
// cuda_bf16.h) for the CUDA kernel emulator: the half types as their bit
// patterns, converted with the host compiler's IEEE binary16 (_Float16,
// correctly rounded to nearest even).

#pragma once

#include <string.h>

#if !defined(__FLT16_MAX__)
#error "cuda_fp16.h (emulator): the host compiler has no _Float16 (need GCC >= 12 or Clang >= 15 on x86-64)"
#endif

struct __half {
    unsigned short x;
};

struct __nv_bfloat16 {
    unsigned short x;
};

inline float __half2float(__half h) {
    _Float16 f;
    memcpy(&f, &h.x, 2);
    return (float)f;
}

inline __half __float2half_rn(float v) {
    const _Float16 f = (_Float16)v;
    __half h;
    memcpy(&h.x, &f, 2);
    return h;
}

inline __half __float2half(float v) { return __float2half_rn(v); }

inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }

inline float __bfloat162float(__nv_bfloat16 h) {
    const unsigned int u = (unsigned int)h.x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// __float2bfloat16_rn rounds to nearest even; NaN stays a quiet NaN.
inline __nv_bfloat16 __float2bfloat16_rn(float v) {
    unsigned int u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40u)};
    }
    return __nv_bfloat16{(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
