// Causal attention over the paged KV cache, with an online softmax.
//
// attn_<format>_<NI>(out, q, kc, vc, pos, rowTab, tables, heads, kvHeads,
//                    hd, scale, blockTokens, kvDim, rowBytes, chunks, hpb)
//
// out, q: [rows, heads*hd] f32. Row t attends positions 0..pos[t] of its
// sequence, whose KV block ids are tables[rowTab[t] + j/blockTokens];
// position j lives in slot block*blockTokens + j%blockTokens of the layer's
// page areas kc and vc (slot s at byte s*rowBytes). Query head h reads KV
// head h / (heads/kvHeads), values [kvh*hd, (kvh+1)*hd) of each row.
//
// For each query head: s_j = (q . k_j) * scale, with the dot product one
// sequential fused multiply-add chain over the head's dimensions (as the CPU
// backend); out = sum_j softmax(s)_j v_j. Memory is O(1) in the context
// length: the softmax is computed online (running max and sum).
//
// Work split: a block handles one row, one KV head and hpb (<= G) of the
// query heads sharing it (chunk c of `chunks`), so K and V are read once
// for those heads. Grid: rows*kvHeads*chunks blocks, blockIdx.x =
// (t*kvHeads + kvh)*chunks + c. Each warp of the block takes every nw-th
// tile of 32 positions with its own running max / sum / output; the warps
// are merged at the end through shared memory.
//   scores: lane i of a warp owns position j0+i and computes its dot
//     products against all hpb query vectors (staged in shared memory);
//   values: lane i owns dimensions i, i+32, ... (NI = ceil(hd/32) of them)
//     and walks the tile's positions in order.
// Dynamic shared memory: attnSharedBytes in cuda/geometry.go:
//   Q [G][NI*32] + max(P [nw][G][32], O [nw][G][NI*32] + M [nw][G] + L [nw][G]) floats.

#pragma once

#include "common.cuh"
#include "kv.cuh"

template <int FMT, int NI, int G>
__device__ __forceinline__ void attention(float* out, const float* q, const uint8_t* kc, const uint8_t* vc,
                                          const int* pos, const int* rowTab, const int* tables, int heads, int kvHeads,
                                          int hd, float scale, int bt, int kvDim, long long rowBytes, int chunks,
                                          int hpb) {
    extern __shared__ __align__(16) float smem[];
    const int HDP = NI * 32;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5;

    int b = blockIdx.x;
    const int chunk = b % chunks;
    b /= chunks;
    const int kvh = b % kvHeads;
    const int t = b / kvHeads;
    const int group = heads / kvHeads;
    const int hc0 = chunk * hpb;                  // first head of the chunk within the group
    const int gr = min(hpb, group - hc0);          // heads of this block (1..G)
    const int h0 = kvh * group + hc0;              // first query head
    const int n = pos[t] + 1;                      // positions to attend
    const int qd = heads * hd;
    const int c0 = kvh * hd;                       // first value of the head in a KV row
    const long long vals = (long long)kvDim * KVFmt<FMT>::vbytes;
    if (n <= 0) { // not a real row (padding): zeros, and no table read
        for (int i = threadIdx.x; i < gr * hd; i += blockDim.x) {
            out[(long long)t * qd + (long long)(h0 + i / hd) * hd + i % hd] = 0.0f;
        }
        return;
    }
    const int* table = tables + rowTab[t];

    float* Qs = smem;                 // [G][HDP]
    float* Ps = smem + G * HDP;       // [nw][G][32]
    float* Os = Ps;                   // after the loop: [nw][G][HDP]
    float* Ms = Os + nw * G * HDP;    // [nw][G]
    float* Ls = Ms + nw * G;          // [nw][G]

    for (int i = threadIdx.x; i < G * HDP; i += blockDim.x) {
        const int g = i / HDP, d = i % HDP;
        Qs[i] = (g < gr && d < hd) ? q[(long long)t * qd + (long long)(h0 + g) * hd + d] : 0.0f;
    }
    __syncthreads();

    const int vb = KVFmt<FMT>::vbytes;
    const bool vec = (hd % 4) == 0 && (rowBytes % (4 * vb)) == 0 &&
                     ((((uintptr_t)kc) | ((uintptr_t)vc)) % (uintptr_t)(4 * vb)) == 0;
    const bool sa = (vals % 4) == 0 && (rowBytes % 4) == 0 && ((((uintptr_t)kc) | ((uintptr_t)vc)) % 4) == 0;

    float m[G], l[G], o[G][NI];
#pragma unroll
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NI; i++) {
            o[g][i] = 0.0f;
        }
    }

    for (int j0 = warp * 32; j0 < n; j0 += nw * 32) {
        const int j = j0 + lane;
        const bool valid = j < n;
        int slot = 0;
        float s[G];
#pragma unroll
        for (int g = 0; g < G; g++) {
            s[g] = 0.0f;
        }
        if (valid) {
            slot = table[j / bt] * bt + j % bt;
            const uint8_t* krow = kc + (long long)slot * rowBytes;
            if (vec) {
                for (int d = 0; d < hd; d += 4) {
                    float k4[4];
                    kv_load4<FMT>(krow, c0 + d, vals, sa, k4);
#pragma unroll
                    for (int g = 0; g < G; g++) {
                        if (g < gr) {
                            const float4 q4 = *(const float4*)&Qs[g * HDP + d];
                            float a = s[g];
                            a = fmaf(q4.x, k4[0], a);
                            a = fmaf(q4.y, k4[1], a);
                            a = fmaf(q4.z, k4[2], a);
                            a = fmaf(q4.w, k4[3], a);
                            s[g] = a;
                        }
                    }
                }
            } else {
                for (int d = 0; d < hd; d++) {
                    const float kv = kv_load1<FMT>(krow, c0 + d, vals, sa);
#pragma unroll
                    for (int g = 0; g < G; g++) {
                        if (g < gr) {
                            s[g] = fmaf(Qs[g * HDP + d], kv, s[g]);
                        }
                    }
                }
            }
        }
        float* P = Ps + warp * G * 32;
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (g < gr) {
                const float sc = valid ? s[g] * scale : -INFINITY;
                const float mn = fmaxf(m[g], warp_max(sc));
                const float corr = expf(m[g] - mn); // 0 on the first tile
                const float p = valid ? expf(sc - mn) : 0.0f;
                l[g] = l[g] * corr + p;             // per-lane partial sum
#pragma unroll
                for (int i = 0; i < NI; i++) {
                    o[g][i] *= corr;
                }
                m[g] = mn;
                P[g * 32 + lane] = p;
            }
        }
        __syncwarp();
        const int cnt = min(32, n - j0);
#pragma unroll 2
        for (int jj = 0; jj < cnt; jj++) {
            const int sj = __shfl_sync(FULL_MASK, slot, jj);
            const uint8_t* vrow = vc + (long long)sj * rowBytes;
            float pj[G];
#pragma unroll
            for (int g = 0; g < G; g++) {
                pj[g] = g < gr ? P[g * 32 + jj] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < NI; i++) {
                const int d = lane + 32 * i;
                if (d < hd) {
                    const float v = kv_load1<FMT>(vrow, c0 + d, vals, sa);
#pragma unroll
                    for (int g = 0; g < G; g++) {
                        if (g < gr) {
                            o[g][i] = fmaf(pj[g], v, o[g][i]);
                        }
                    }
                }
            }
        }
        __syncwarp();
    }

    // Merge the warps: O = sum_w o_w e^(m_w - M), L = sum_w l_w e^(m_w - M).
    __syncthreads(); // P is reused as O
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (g < gr) {
            const float lw = warp_sum(l[g]);
            if (lane == 0) {
                Ms[warp * G + g] = m[g];
                Ls[warp * G + g] = lw;
            }
#pragma unroll
            for (int i = 0; i < NI; i++) {
                Os[(warp * G + g) * HDP + lane + 32 * i] = o[g][i];
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < gr * hd; i += blockDim.x) {
        const int g = i / hd, d = i % hd;
        float M = -INFINITY;
        for (int w = 0; w < nw; w++) {
            M = fmaxf(M, Ms[w * G + g]);
        }
        float L = 0.0f, O = 0.0f;
        for (int w = 0; w < nw; w++) {
            const float mw = Ms[w * G + g];
            if (mw != -INFINITY) { // a warp that saw no position
                const float e = expf(mw - M);
                L = fmaf(Ls[w * G + g], e, L);
                O = fmaf(Os[(w * G + g) * HDP + d], e, O);
            }
        }
        out[(long long)t * qd + (long long)(h0 + g) * hd + d] = O / L;
    }
}

// G(NI): query heads per block, so that a lane keeps G*NI <= 16 output
// accumulators. Must match attnHeadsPerBlock in cuda/geometry.go.
#define ATTN(name, fmt, ni, g)                                                                                       \
    extern "C" __global__ void attn_##name##_##ni(                                           \
        float* out, const float* q, const uint8_t* kc, const uint8_t* vc, const int* pos, const int* rowTab,       \
        const int* tables, int heads, int kvHeads, int hd, float scale, int bt, int kvDim, long long rowBytes,     \
        int chunks, int hpb) {                                                                                     \
        attention<fmt, ni, g>(out, q, kc, vc, pos, rowTab, tables, heads, kvHeads, hd, scale, bt, kvDim, rowBytes, \
                              chunks, hpb);                                                                        \
    }

#define ATTN_FMT(name, fmt) \
    ATTN(name, fmt, 1, 8)   \
    ATTN(name, fmt, 2, 8)   \
    ATTN(name, fmt, 4, 4)   \
    ATTN(name, fmt, 8, 2)

ATTN_FMT(f32, KV_F32)
ATTN_FMT(f16, KV_F16)
ATTN_FMT(bf16, KV_BF16)
ATTN_FMT(int8, KV_INT8)
ATTN_FMT(fp8, KV_FP8)
