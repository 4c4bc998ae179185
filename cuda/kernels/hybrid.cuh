// The stateless ops of hybrid models (runtime/tensor/hybrid.go) and the
// row-broadcast ops: columns, concat, unary (sigmoid, SiLU, softplus), mul,
// add_row, mul_row and l2_norm. Each follows the CPU reference's rounding
// (runtime/cpu/hybrid.go, hybrid_fast.go, addrow.go): exp and log in double
// rounded to float where the CPU takes float32(math.Exp(float64(x))), float
// arithmetic step by step elsewhere, sums of squares in double.

#pragma once

#include "common.cuh"

// Unary function codes: the values of tensor.UnaryFn.
#define UN_SIGMOID 1
#define UN_SILU 2
#define UN_SOFTPLUS 3

// GRID_STRIDE walks i over [0, n) in a grid-stride loop.
#define GRID_STRIDE(i, n)                                                                                               \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// columns(out, x, n, d, group, offset, width): out [T, d/group*width] (n
// elements) takes, from each group of `group` columns of x [T, d], the
// `width` columns starting at offset (a head's query half, one head's
// slice). Grid-stride.
extern "C" __global__ void columns(float* out, const float* x, long long n, int d, int group, int offset, int width) {
    const int ow = d / group * width;
    GRID_STRIDE(i, n) {
        const long long r = i / ow;
        const int c = (int)(i % ow);
        out[i] = x[r * d + (long long)(c / width) * group + offset + c % width];
    }
}

// concat(out, x, y, n, a, c): out [T, a+c] (n elements), each row x's row
// [a] followed by y's [c]. Grid-stride.
extern "C" __global__ void concat(float* out, const float* x, const float* y, long long n, int a, int c) {
    const int w = a + c;
    GRID_STRIDE(i, n) {
        const long long r = i / w;
        const int j = (int)(i % w);
        out[i] = j < a ? x[r * a + j] : y[r * c + (j - a)];
    }
}

// unary_apply is tensor.UnaryFn fn of v as the CPU computes it: sigmoid =
// 1 / (1 + e) with e = float(exp(-v)); SiLU = v / (1 + exp(-v)) in double,
// rounded once (the swiglu kernel's SiLU); softplus = v above 20 (ggml's
// threshold), else float(log(1 + float(exp(v)))).
__device__ __forceinline__ float unary_apply(int fn, float v) {
    switch (fn) {
    case UN_SIGMOID:
        return __fdiv_rn(1.0f, __fadd_rn(1.0f, (float)exp(-(double)v)));
    case UN_SILU: {
        const double d = (double)v;
        return (float)(d / (1.0 + exp(-d)));
    }
    default: // UN_SOFTPLUS
        if (v > 20.0f) {
            return v;
        }
        return (float)log((double)__fadd_rn(1.0f, (float)exp((double)v)));
    }
}

// unary(out, x, n, fn): out = fn(x), n elements, fn a UN_* code.
// Grid-stride.
extern "C" __global__ void unary(float* out, const float* x, long long n, int fn) {
    GRID_STRIDE(i, n) { out[i] = unary_apply(fn, x[i]); }
}

// mul(out, x, y, n, d): out = x * y element-wise (d = 0), or each row of d
// elements of x times its row's scalar y[i/d] (y [T, 1]). Grid-stride.
extern "C" __global__ void mul(float* out, const float* x, const float* y, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fmul_rn(x[i], d == 0 ? y[i] : y[i / d]); }
}

// add_row(out, x, w, n, d) and mul_row(out, x, w, n, d): out = x + w / x *
// w with w [d] repeated over every row of d elements (qwen2's biases, a
// per-channel scale). Grid-stride.
extern "C" __global__ void add_row(float* out, const float* x, const float* w, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fadd_rn(x[i], w[i % d]); }
}

extern "C" __global__ void mul_row(float* out, const float* x, const float* w, long long n, int d) {
    GRID_STRIDE(i, n) { out[i] = __fmul_rn(x[i], w[i % d]); }
}

// l2_norm(out, x, ngroups, group, eps): each contiguous group of `group`
// elements divided by max(its L2 norm, eps), as ggml_l2_norm: the squares
// rounded to float and summed in double, the norm rounded to float, then
// x * (1 / max(norm, eps)). One warp per group; grid: ceil(ngroups / warps
// per block).
extern "C" __global__ void l2_norm(float* out, const float* x, long long ngroups, int group, float eps) {
    const long long gi = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (gi >= ngroups) {
        return;
    }
    const float* xs = x + gi * group;
    float* os = out + gi * group;
    const double sum = warp_sum_squares(xs, group, lane);
    const float scale = __fdiv_rn(1.0f, fmaxf((float)sqrt(sum), eps));
    for (int e = lane; e < group; e += 32) {
        os[e] = __fmul_rn(xs[e], scale);
    }
}

// ---------------------------------------------------------------------------
// The stateful ops. Each sequence's recurrent state lives in a slot of the
// layer's state area (f32, slot s at s * per floats); row r of the step
// reads slot rd[r] and writes slot wr[r] (exec.Batch.StateRows: the
// sequence's slot, or in a verify step row j reads the snapshot row j-1
// wrote and writes its own), and starts from zeros at position 0. Rows are
// processed in order, so the rows of one sequence see each other's state.
// Every state value is owned by one thread for the whole step (a channel of
// the conv window, a column of a delta-rule matrix), which walks the rows
// one after the other: no barrier, and a slot written by an earlier row is
// read back by the same thread.

#define SHORT_CONV_MAX_K 16

// short_conv(out, x, w, state, rd, wr, pos, rows, C, K): the causal
// depthwise conv of x [rows, C] with taps w [C, K] (tap K-1 on the current
// input): out[r, c] = sum_{j<K-1} win[j, c] * w[c, j] + x[r, c] * w[c, K-1]
// with win [K-1, C] the slot's window of earlier inputs (oldest first),
// which then shifts by one and takes x[r]. The sums are float, in tap
// order, as runtime/cpu shortConvRef. K <= SHORT_CONV_MAX_K. Grid-stride
// over channels.
extern "C" __global__ void short_conv(float* out, const float* x, const float* w, float* state, const int* rd,
                                      const int* wr, const int* pos, int rows, int C, int K) {
    const long long per = (long long)(K - 1) * C;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        const float* taps = w + (long long)c * K;
        float win[SHORT_CONV_MAX_K];
        for (int r = 0; r < rows; r++) {
            const float* src = state + rd[r] * per + c;
            for (int j = 0; j < K - 1; j++) {
                win[j] = pos[r] == 0 ? 0.0f : src[(long long)j * C];
            }
            const float xv = x[(long long)r * C + c];
            float sum = 0.0f;
            for (int j = 0; j < K - 1; j++) {
                sum = __fadd_rn(sum, __fmul_rn(win[j], taps[j]));
            }
            out[(long long)r * C + c] = __fadd_rn(sum, __fmul_rn(xv, taps[K - 1]));
            float* dst = state + wr[r] * per + c;
            for (int j = 0; j + 1 < K - 1; j++) {
                dst[(long long)j * C] = win[j + 1];
            }
            if (K > 1) {
                dst[(long long)(K - 2) * C] = xv;
            }
        }
    }
}

// delta_row advances column j of value head h (key head kh) of the gated
// delta rule's state by row r, the recurrent form, and writes the row's
// output:
//
//   S *= exp(g);  d = beta * (v - S^T k);  S += k d^T;  o = S^T (scale q)
//
// rounded step by step as runtime/cpu deltaRuleRef: column j of S depends
// only on column j, so one thread owns it. per is a slot's floats, head
// the column's offset in a slot (h*DK*DV + j).
__device__ __forceinline__ void delta_row(float* out, const float* q, const float* k, const float* v, const float* g,
                                          const float* beta, float* state, const int* rd, const int* wr,
                                          const int* pos, int r, int h, int kh, int j, int KH, int DK, int VH, int DV,
                                          long long per, long long head, float scale) {
    const long long kd = (long long)KH * DK, vd = (long long)VH * DV;
    const float* src = state + rd[r] * per + head;
    float* s = state + wr[r] * per + head;
    const float* qr = q + r * kd + (long long)kh * DK;
    const float* kr = k + r * kd + (long long)kh * DK;
    const float decay = (float)exp((double)g[(long long)r * VH + h]);
    const float b = beta[(long long)r * VH + h];
    float pred = 0.0f;
    for (int i = 0; i < DK; i++) {
        const float si = pos[r] == 0 ? 0.0f : __fmul_rn(src[(long long)i * DV], decay);
        s[(long long)i * DV] = si;
        pred = __fadd_rn(pred, __fmul_rn(si, kr[i]));
    }
    const float d = __fmul_rn(b, __fsub_rn(v[r * vd + (long long)h * DV + j], pred));
    float o = 0.0f;
    for (int i = 0; i < DK; i++) {
        const float si = __fadd_rn(s[(long long)i * DV], __fmul_rn(kr[i], d));
        s[(long long)i * DV] = si;
        o = __fadd_rn(o, __fmul_rn(si, __fmul_rn(qr[i], scale)));
    }
    out[r * vd + (long long)h * DV + j] = o;
}

// delta_rule(out, q, k, v, g, beta, state, rd, wr, pos, rows, KH, DK, VH,
// DV, scale): the gated delta rule, recurrent form (delta_row), for q, k
// [rows, KH*DK], v [rows, VH*DV], g, beta [rows, VH] into out [rows,
// VH*DV]. Value head h (key head h % KH) keeps S [DK, DV] in its slot
// (h*DK*DV floats in); thread j of head h's blocks owns column j.
// Grid: (VH, ceil(DV / blockDim.x)).
extern "C" __global__ void delta_rule(float* out, const float* q, const float* k, const float* v, const float* g,
                                      const float* beta, float* state, const int* rd, const int* wr, const int* pos,
                                      int rows, int KH, int DK, int VH, int DV, float scale) {
    const int h = blockIdx.x;
    const int j = blockIdx.y * blockDim.x + threadIdx.x;
    if (j >= DV) {
        return;
    }
    const long long per = (long long)VH * DK * DV;
    const long long head = (long long)h * DK * DV + j;
    for (int r = 0; r < rows; r++) {
        delta_row(out, q, k, v, g, beta, state, rd, wr, pos, r, h, h % KH, j, KH, DK, VH, DV, per, head, scale);
    }
}

// The chunked form's chunk and the fewest rows it is used for, as
// runtime/cpu (deltaChunkLen, deltaChunkMin).
#define DELTA_CHUNK 64
#define DELTA_CHUNK_MIN 16
#define DELTA_CHUNK_THREADS 128

// delta_rule_chunked(...): delta_rule's arguments and result, with runs of
// at least DELTA_CHUNK_MIN consecutive rows that keep their state in one
// slot (every row reads and writes it, only the first may be at position
// 0: a prompt's prefill rows) advanced in chunks of DELTA_CHUNK rows by
// the chunked form, as runtime/cpu headChunk. With G_t the cumulative sum
// of g over the chunk up to row t (in double), S0 the state before it,
// q'_t = scale*q_t and u_t the recurrence's delta:
//
//   u_t = beta_t (v_t - exp(G_t) S0^T k_t) - sum_{i<t} beta_t exp(G_t-G_i) (k_t.k_i) u_i
//   o_t = exp(G_t) S0^T q'_t + sum_{i<=t} exp(G_t-G_i) (q'_t.k_i) u_i
//   S   = exp(G_last) S0 + sum_t exp(G_last-G_t) k_t u_t^T
//
// so the state is read twice per row and written once per chunk. The
// chunk's coefficient matrices (the products of k_t with k_i and q'_t with
// k_i, times the decays) are shared: the block computes them together into
// shared memory; thread j keeps column j of u in registers. Other rows
// (decode, verify rows writing snapshots, short runs) take delta_row, so
// they equal delta_rule's bits. Runs are found on the device from rd, wr
// and pos, so a captured step needs no host decision. The chunked form
// reassociates the recurrence: it agrees with it within a tolerance.
// Grid: (VH, ceil(DV / blockDim.x)), blockDim.x <= DELTA_CHUNK_THREADS.
extern "C" __global__ void __launch_bounds__(DELTA_CHUNK_THREADS)
    delta_rule_chunked(float* out, const float* q, const float* k, const float* v, const float* g, const float* beta,
                       float* state, const int* rd, const int* wr, const int* pos, int rows, int KH, int DK, int VH,
                       int DV, float scale) {
    __shared__ float ak[DELTA_CHUNK][DELTA_CHUNK]; // [t][i]: -beta_t exp(G_t-G_i) k_t.k_i, i < t
    __shared__ float aq[DELTA_CHUNK][DELTA_CHUNK]; // [t][i]: exp(G_t-G_i) q'_t.k_i, i <= t
    __shared__ double cum[DELTA_CHUNK];            // G_t
    __shared__ float gt[DELTA_CHUNK], gl[DELTA_CHUNK]; // exp(G_t), exp(G_last-G_t)
    const int h = blockIdx.x, kh = h % KH;
    const int j = blockIdx.y * blockDim.x + threadIdx.x;
    const bool owner = j < DV;
    const long long per = (long long)VH * DK * DV;
    const long long head = (long long)h * DK * DV + j;
    const long long kd = (long long)KH * DK, vd = (long long)VH * DV;
    int r = 0;
    while (r < rows) {
        const int slot = wr[r];
        int run = 1;
        if (rd[r] == slot) {
            while (r + run < rows && rd[r + run] == slot && wr[r + run] == slot && pos[r + run] != 0) {
                run++;
            }
        }
        if (run < DELTA_CHUNK_MIN) {
            for (int t = r; owner && t < r + run; t++) {
                delta_row(out, q, k, v, g, beta, state, rd, wr, pos, t, h, kh, j, KH, DK, VH, DV, per, head, scale);
            }
            r += run;
            continue;
        }
        float* s = state + slot * per + head; // column j of S, stride DV
        if (owner && pos[r] == 0) {
            for (int i = 0; i < DK; i++) {
                s[(long long)i * DV] = 0.0f;
            }
        }
        for (int c0 = r; c0 < r + run; c0 += DELTA_CHUNK) {
            const int n = min(DELTA_CHUNK, r + run - c0);
            if (threadIdx.x == 0) {
                double acc = 0.0;
                for (int t = 0; t < n; t++) {
                    acc += (double)g[(long long)(c0 + t) * VH + h];
                    cum[t] = acc;
                    gt[t] = (float)exp(acc);
                }
                for (int t = 0; t < n; t++) {
                    gl[t] = (float)exp(acc - cum[t]);
                }
            }
            __syncthreads();
            for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
                const int t = e / n, i = e % n;
                if (i > t) {
                    continue;
                }
                const float* kt = k + (long long)(c0 + t) * kd + (long long)kh * DK;
                const float* ki = k + (long long)(c0 + i) * kd + (long long)kh * DK;
                const float* qt = q + (long long)(c0 + t) * kd + (long long)kh * DK;
                float kk = 0.0f, qk = 0.0f;
                for (int d = 0; d < DK; d++) {
                    kk = __fadd_rn(kk, __fmul_rn(kt[d], ki[d]));
                    qk = __fadd_rn(qk, __fmul_rn(__fmul_rn(qt[d], scale), ki[d]));
                }
                const float decay = (float)exp(cum[t] - cum[i]);
                const float b = beta[(long long)(c0 + t) * VH + h];
                ak[t][i] = __fmul_rn(__fmul_rn(-b, decay), kk);
                aq[t][i] = __fmul_rn(decay, qk);
            }
            __syncthreads();
            if (owner) {
                float u[DELTA_CHUNK];
                for (int t = 0; t < n; t++) {
                    const long long row = c0 + t;
                    const float* kt = k + row * kd + (long long)kh * DK;
                    const float* qt = q + row * kd + (long long)kh * DK;
                    float sk = 0.0f, sq = 0.0f; // S0^T k_t, S0^T q'_t
                    for (int i = 0; i < DK; i++) {
                        const float si = s[(long long)i * DV];
                        sk = __fadd_rn(sk, __fmul_rn(kt[i], si));
                        sq = __fadd_rn(sq, __fmul_rn(__fmul_rn(qt[i], scale), si));
                    }
                    const float b = beta[row * VH + h];
                    float ut = __fmul_rn(b, __fsub_rn(v[row * vd + (long long)h * DV + j], __fmul_rn(gt[t], sk)));
                    for (int i = 0; i < t; i++) {
                        ut = __fadd_rn(ut, __fmul_rn(ak[t][i], u[i]));
                    }
                    u[t] = ut;
                    float o = __fmul_rn(gt[t], sq);
                    for (int i = 0; i <= t; i++) {
                        o = __fadd_rn(o, __fmul_rn(aq[t][i], u[i]));
                    }
                    out[row * vd + (long long)h * DV + j] = o;
                }
                const float glast = gt[n - 1];
                for (int i = 0; i < DK; i++) {
                    float si = __fmul_rn(s[(long long)i * DV], glast);
                    for (int t = 0; t < n; t++) {
                        si = __fadd_rn(si, __fmul_rn(__fmul_rn(gl[t], k[(long long)(c0 + t) * kd + (long long)kh * DK + i]), u[t]));
                    }
                    s[(long long)i * DV] = si;
                }
            }
            __syncthreads(); // the next chunk overwrites the coefficients
        }
        r += run;
    }
}

// ---------------------------------------------------------------------------
// bf16 state (exec.StateLayout.DType "bf16"): the slots are stored as bf16
// and a stateful op runs on an f32 staging area, as runtime/cpu's stage:
// before the op, state_widen copies the slots the step's rows read or write
// (staging entry j holds slot slot[j], j < *count, the step buffer's list)
// into it; the op reads and writes staging entries (the step's rows
// renumbered), so a slot one row writes is read back in f32 by a later row
// of the step; after it, state_narrow rounds the entries the rows wrote
// (written[j] != 0) back into their slots, round to nearest even. per is a
// slot's floats; the count lives in device memory so that a captured step
// reads each step's own. Grid-stride over the staging area's capacity.

extern "C" __global__ void state_widen(float* stage, const unsigned short* store, const int* slot, const int* count,
                                       long long per) {
    GRID_STRIDE(i, (long long)*count * per) {
        stage[i] = bf16_to_f32(store[(long long)slot[i / per] * per + i % per]);
    }
}

extern "C" __global__ void state_narrow(unsigned short* store, const float* stage, const int* slot, const int* written,
                                        const int* count, long long per) {
    GRID_STRIDE(i, (long long)*count * per) {
        if (written[i / per]) {
            store[(long long)slot[i / per] * per + i % per] = (unsigned short)f32_to_bf16_bits(stage[i]);
        }
    }
}
