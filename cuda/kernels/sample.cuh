// Device-side sampling: the greedy token of each logits row, so that a
// decode step copies back one id per row instead of the row.

#pragma once

#include "common.cuh"

#define ARGMAX_THREADS 256
#define ARGMAX_NONE 0x7fffffff // no candidate (every value seen was NaN)

// argmax_better reports whether candidate (v, i) beats (bv, bi): a real
// candidate beats none, a larger value wins, and equal values (+0 and -0
// included) go to the lower index. NaN values are never candidates.
__device__ __forceinline__ bool argmax_better(float v, int i, float bv, int bi) {
    return i != ARGMAX_NONE && (bi == ARGMAX_NONE || v > bv || (v == bv && i < bi));
}

// argmax_rows(ids, x, cols): ids[r] = the index of the largest value of row
// r of x [rows, cols] f32, ties to the lower index, exactly as the CPU
// sampler's greedy pick (nodes/sample Argmax: best = 0, then every later
// value that is > the best so far): the first maximum of the values that
// are not NaN, and 0 when the row's first value is NaN. Thread t scans
// columns t, t+256, ...; the candidates are reduced over the warp, then
// over the block's warps. Grid: rows blocks of ARGMAX_THREADS.
extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS) argmax_rows(int* ids, const float* x, int cols) {
    __shared__ float wv[ARGMAX_THREADS / 32];
    __shared__ int wi[ARGMAX_THREADS / 32];
    const float* row = x + (long long)blockIdx.x * cols;
    float bv = 0.0f;
    int bi = ARGMAX_NONE;
    for (int c = threadIdx.x; c < cols; c += ARGMAX_THREADS) {
        const float v = row[c];
        if (v == v && (bi == ARGMAX_NONE || v > bv)) { // increasing c: a tie keeps the first
            bv = v;
            bi = c;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, bv, o);
        const int oi = __shfl_xor_sync(FULL_MASK, bi, o);
        if (argmax_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        wv[warp] = bv;
        wi[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / 32; w++) {
            if (argmax_better(wv[w], wi[w], bv, bi)) {
                bv = wv[w];
                bi = wi[w];
            }
        }
        const float first = row[0];
        ids[blockIdx.x] = (first != first || bi == ARGMAX_NONE) ? 0 : bi;
    }
}
