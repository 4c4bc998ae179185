// cuda_emu.h: the CUDA built-ins the ninfer kernels use, for compiling the
// unmodified kernel sources (cuda/kernels/ninfer.cu) with a host C++
// compiler, so that every kernel runs on the CPU under AddressSanitizer and
// UndefinedBehaviorSanitizer. It is force-included (-include) before the
// kernels; include/cuda_fp16.h stands in for the toolkit header.
//
// The execution model (runtime.cc): a launch runs its blocks one after the
// other; a block's threads are cooperative fibers on one host thread, each
// with its own stack, switched only inside __syncthreads, __syncwarp and the
// warp intrinsics. So a barrier waits for every thread of the block, a
// shuffle for every lane its mask names, and the emulator reports (and
// aborts) on a barrier that some thread of the block can no longer reach, a
// warp intrinsic whose mask names an exited or absent lane or whose lanes
// disagree on the mask, and on a block that deadlocks. __shared__ variables
// are per host thread, so all the fibers of a block share them; dynamic
// shared memory is filled with 0xff (NaN) before each block and the bytes
// past the launch's dynamic size are poisoned for AddressSanitizer.
//
// What it cannot see, and a GPU run must still check:
//   - timing and performance: occupancy, coalescing, bank conflicts,
//     register spills, and launch or capture overheads;
//   - the memory model: threads run one at a time and switch only at the
//     synchronising intrinsics, so a data race between threads of a block
//     (a shared-memory read before the barrier that orders it, or two warps
//     writing one word) gives a deterministic result here and may not on a
//     GPU; races between blocks, which run sequentially, are invisible;
//   - warp divergence beyond what is emulated: lanes of a warp run one after
//     the other between intrinsics (independent thread scheduling as on
//     Volta and later), so code that relies on lock-step execution without
//     __syncwarp is not caught;
//   - overflows inside static __shared__ arrays (they have no redzones) and
//     reads of static shared memory that no thread wrote;
//   - the compiler and the driver: nvcc's code generation (it contracts a*b+c
//     into fused multiply-adds where the source does not forbid it; here
//     -ffp-contract=off), the PTX JIT, the exact error bounds of the
//     device's expf / sinf / division, parameter passing by the driver,
//     __launch_bounds__ and the shared-memory limits (the Go test checks
//     those against cuda/ninfer.ptx), streams, graphs and device memory.
//
// Only what the kernels use is emulated; anything else fails to compile,
// and intrinsics with behaviour not modelled abort at run time.

#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

// --- declaration specifiers ------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// A block-scope thread_local is static, so every fiber of the block (all on
// one host thread) shares it; `extern __shared__ T name[]` names the dynamic
// shared memory, defined per host thread in runtime.cc.
#define __shared__ thread_local
#define __restrict__ __restrict

// --- vector types --------------------------------------------------------------

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(16))) int4 {
    int x, y, z, w;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned int x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
    unsigned int x, y;
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};

// --- the emulator's interface to the kernels ------------------------------

namespace emu {

// thread is one emulated CUDA thread (its fiber state lives in runtime.cc).
struct thread {
    uint3 idx;        // threadIdx
    int linear;       // x + y*bdx + z*bdx*bdy
    int lane, warp;   // linear % 32, linear / 32
    unsigned warpOps; // warp intrinsics this thread has executed
};

extern thread_local thread* cur;   // the running thread
extern thread_local uint3 blockIdx_;
extern thread_local dim3 blockDim_;
extern thread_local dim3 gridDim_;

// fail reports a CUDA programming error the emulator detected (with the
// block and thread) and aborts the process.
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// syncthreads is __syncthreads.
void syncthreads();

// warp_exchange deposits this lane's 8 bytes for its next warp intrinsic
// with mask, waits until every lane the mask names has reached the same
// intrinsic, and returns the 32 deposits (valid until this lane's next warp
// intrinsic). what names the intrinsic in error reports.
const uint64_t* warp_exchange(unsigned mask, uint64_t mine, const char* what);

} // namespace emu

#define threadIdx (::emu::cur->idx)
#define blockIdx (::emu::blockIdx_)
#define blockDim (::emu::blockDim_)
#define gridDim (::emu::gridDim_)
#define warpSize 32

// --- bit casts and rounding intrinsics -------------------------------------

inline float __uint_as_float(unsigned int u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
}
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned int)i); }

// The _rn arithmetic intrinsics are never contracted into fused
// multiply-adds on the GPU; the emulator compiles with -ffp-contract=off, so
// plain operators round each step the same way.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }

// __float2int_rn rounds to nearest even; as cvt.rni.s32.f32 it saturates
// out-of-range values and maps NaN to 0.
inline int __float2int_rn(float f) {
    if (f != f) {
        return 0;
    }
    if (f >= 2147483648.0f) {
        return 2147483647;
    }
    if (f <= -2147483648.0f) {
        return (-2147483647 - 1);
    }
    return (int)nearbyintf(f);
}

// __dp4a is the dot product of the four signed bytes of a and b, plus c
// (wrapping, as the hardware).
inline int __dp4a(int a, int b, int c) {
    unsigned int s = (unsigned int)c;
    for (int i = 0; i < 4; i++) {
        const int x = (int8_t)(uint8_t)((unsigned int)a >> (8 * i));
        const int y = (int8_t)(uint8_t)((unsigned int)b >> (8 * i));
        s += (unsigned int)(x * y);
    }
    return (int)s;
}

// __byte_perm picks byte n of the result from byte (s >> 4n) & 7 of the
// 8 bytes y:x. Selector nibbles with bit 3 set (sign replication in PTX
// prmt) are not emulated.
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const uint64_t v = ((uint64_t)y << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; n++) {
        const unsigned int sel = (s >> (4 * n)) & 0xfu;
        if (sel & 8u) {
            ::emu::fail("__byte_perm: selector 0x%x uses sign replication, which is not emulated", s);
        }
        r |= (unsigned int)((v >> (8 * sel)) & 0xffu) << (8 * n);
    }
    return r;
}

inline int __popc(unsigned int v) { return __builtin_popcount(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned int)v); }
inline int __ffs(int v) { return __builtin_ffs(v); }

// --- min / max overloads of the CUDA math library ---------------------------

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// Fast-math intrinsics: the host's correctly rounded (or libm) functions,
// more accurate than the device's approximations.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(1.0f, fmaxf(0.0f, x)); }

// --- barriers and warp intrinsics ---------------------------------------------

inline void __syncthreads() { ::emu::syncthreads(); }

inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)::emu::warp_exchange(mask, 0, "__syncwarp"); }

namespace emu {

template <class T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}

template <class T>
inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

// shfl returns the value of lane src of this lane's width-lane segment; a
// source lane outside the mask is undefined on the GPU and reported here.
template <class T>
inline T shfl(unsigned mask, T v, int src, const char* what) {
    const uint64_t* all = warp_exchange(mask, to_bits(v), what);
    if (src < 0 || src > 31 || !((mask >> src) & 1u)) {
        fail("%s: lane %d reads lane %d, which is not in mask 0x%08x", what, cur->lane, src, mask);
    }
    return from_bits<T>(all[src]);
}

inline int seg_lane(int width, int lane, int off) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
        fail("warp shuffle: width %d is not a power of two in [1, 32]", width);
    }
    return (lane & ~(width - 1)) | (off & (width - 1));
}

} // namespace emu

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return ::emu::shfl(mask, v, ::emu::seg_lane(width, ::emu::cur->lane, src), "__shfl_sync");
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
    const int lane = ::emu::cur->lane;
    int src = lane ^ laneMask;
    if ((src & ~(width - 1)) != (lane & ~(width - 1))) {
        src = lane; // outside the segment: the lane keeps its own value
    }
    (void)::emu::seg_lane(width, lane, 0);
    return ::emu::shfl(mask, v, src, "__shfl_xor_sync");
}

template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned int delta, int width = 32) {
    const int lane = ::emu::cur->lane;
    const int seg = ::emu::seg_lane(width, lane, 0);
    int src = lane + (int)delta;
    if (src >= seg + width) {
        src = lane;
    }
    return ::emu::shfl(mask, v, src, "__shfl_down_sync");
}

template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned int delta, int width = 32) {
    const int lane = ::emu::cur->lane;
    const int seg = ::emu::seg_lane(width, lane, 0);
    int src = lane - (int)delta;
    if (src < seg) {
        src = lane;
    }
    return ::emu::shfl(mask, v, src, "__shfl_up_sync");
}

inline unsigned int __ballot_sync(unsigned mask, int pred) {
    const uint64_t* all = ::emu::warp_exchange(mask, pred != 0, "__ballot_sync");
    unsigned int r = 0;
    for (int l = 0; l < 32; l++) {
        if (((mask >> l) & 1u) && all[l]) {
            r |= 1u << l;
        }
    }
    return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

// --- atomics -------------------------------------------------------------------
// Fibers switch only inside the synchronising intrinsics and blocks run one
// at a time on one host thread, so a plain read-modify-write is atomic here.

template <class T>
inline T atomicAdd(T* p, T v) {
    const T old = *p;
    *p = old + v;
    return old;
}
template <class T>
inline T atomicMax(T* p, T v) {
    const T old = *p;
    *p = old > v ? old : v;
    return old;
}
template <class T>
inline T atomicMin(T* p, T v) {
    const T old = *p;
    *p = old < v ? old : v;
    return old;
}
template <class T>
inline T atomicExch(T* p, T v) {
    const T old = *p;
    *p = v;
    return old;
}
template <class T>
inline T atomicCAS(T* p, T cmp, T v) {
    const T old = *p;
    if (old == cmp) {
        *p = v;
    }
    return old;
}
inline void __threadfence() {}
inline void __threadfence_block() {}
