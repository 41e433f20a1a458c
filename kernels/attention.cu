// Causal attention with grouped-query heads over the f16 KV cache (written by rope_store,
// rope.cu), in the CPU's order: one block per (head, query token); scores for every cached
// position go to a global scratch row, the online softmax's factors are walked once in order,
// then each thread accumulates output dimensions over the positions.
//
// Every f32 operation is the CPU engine's (src/engine/cpu/attention.rs), in its order: the
// K.q dot as ggml_vec_dot_f16's AVX-512 lanes (or `dot_lanes` on the tiled path), and exp as
// the C library's correctly rounded-in-practice expf (computed in f64, rounded once).

#define ATT_AHEAD 16

// expf as glibc gives it: exp in f64 rounded to f32 (they differ only when exp(x) lies within
// ~1e-9 ulp of a rounding boundary).
__device__ __forceinline__ float libm_expf(float x) { return __double2float_rn(exp((double)x)); }

// ggml_vec_dot_f16 for AVX-512 (src/quant/simd_order.rs `dot_f16`): per 64-element step four
// 16-lane FMA accumulators; per lane (s0 + s2) + (s1 + s3); GCC's 16-lane reduction; then the
// leftover elements added in f64.
__device__ float dot_f16_ggml(const u16* __restrict__ k, const float* __restrict__ q, int n) {
    int np = n & ~63;
    float f[16];
    // (Fixed-size arrays are indexed by unrolled loops only, so they stay in registers.)
#pragma unroll
    for (int l = 0; l < 16; l++) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int i = 0; i < np; i += 64) {
            s0 = fmaf(h2f(k[i + l]), q[i + l], s0);
            s1 = fmaf(h2f(k[i + 16 + l]), q[i + 16 + l], s1);
            s2 = fmaf(h2f(k[i + 32 + l]), q[i + 32 + l], s2);
            s3 = fmaf(h2f(k[i + 48 + l]), q[i + 48 + l], s3);
        }
        f[l] = __fadd_rn(__fadd_rn(s0, s2), __fadd_rn(s1, s3));
    }
    double total = 0.0;
    if (np > 0) {
        float t3[8], t6[4];
#pragma unroll
        for (int i = 0; i < 8; i++) t3[i] = __fadd_rn(f[i + 8], f[i]);
#pragma unroll
        for (int i = 0; i < 4; i++) t6[i] = __fadd_rn(t3[i + 4], t3[i]);
        total = (double)__fadd_rn(__fadd_rn(t6[0], t6[2]), __fadd_rn(t6[1], t6[3]));
    }
    for (int i = np; i < n; i++) total += (double)__fmul_rn(h2f(k[i]), q[i]);
    return (float)total;
}

// src/quant/float.rs `dot_lanes`: lane i % 8 sums products in order, unfused; lanes added
// from 0.0 up.
__device__ float dot_lanes_f16(const u16* __restrict__ k, const float* __restrict__ q, int n) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int i0 = 0; i0 < n; i0 += 8)
#pragma unroll
        for (int l = 0; l < 8; l++)
            if (i0 + l < n) acc[l] = __fadd_rn(acc[l], __fmul_rn(h2f(k[i0 + l]), q[i0 + l]));
    float s = 0.0f;
#pragma unroll
    for (int l = 0; l < 8; l++) s = __fadd_rn(s, acc[l]);
    return s;
}

// q: [n][n_heads * hd]; out the same; scores: [n * n_heads][2 * ctx_cap] scratch.
// The arithmetic follows llama.cpp's CPU flash-attention kernel, as src/engine/cpu/attention.rs
// does: with fewer than 64 queries (`tiled` = 0) the query is rounded to f16 for the K.q
// products and the weighted sum of V accumulates in f16 through an online softmax; from 64
// queries, f32 query and f32 accumulation. Scores and the softmax's per-position factors are
// computed in parallel over positions, then each output dimension accumulates. Launched with
// 128 threads; head_dim <= 128 (the engine checks).
extern "C" __global__ void attention(const float* __restrict__ q, const u16* __restrict__ kc,
                                     const u16* __restrict__ vc, int n_heads, int n_kv_heads,
                                     int hd, const int* __restrict__ pos, int ctx_cap,
                                     float scale, int tiled, float* __restrict__ scores,
                                     float* __restrict__ out, STAMP_PARAMS) {
    STAMP_GUARD;
    extern __shared__ float qs[];
    int pos0 = pos[0];
    int h = blockIdx.x, t = blockIdx.y;
    int g = h / (n_heads / n_kv_heads);
    int kv_dim = n_kv_heads * hd;
    int n_ctx = pos0 + t + 1;
    const float* qrow = q + ((u64)t * n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        qs[d] = tiled ? qrow[d] : h2f(f2h(qrow[d]));
    __syncthreads();
    float* sc = scores + ((u64)t * n_heads + h) * 2 * ctx_cap;
    for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) {
        const u16* kr = kc + (u64)j * kv_dim + g * hd;
        float s = tiled ? dot_lanes_f16(kr, qs, hd) : dot_f16_ggml(kr, qs, hd);
        sc[j] = __fmul_rn(s, scale);
    }
    __syncthreads();
    // The online softmax's rescale (ms) and weight (vs) for position j depend only on the
    // running maximum before j: a new maximum gives ms = exp(max_before - s), vs = 1; else
    // ms = 1, vs = exp(s - max_before) (the same factors on both llama.cpp paths). The running
    // maximum is a block-wide prefix scan, so every position's exp runs in parallel.
    float* msv = sc + ctx_cap;
    __shared__ float warp_top[32];
    __shared__ float carry;
    __shared__ float total;
    if (threadIdx.x == 0) carry = -INFINITY;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int base = 0; base < n_ctx; base += blockDim.x) {
        int j = base + threadIdx.x;
        float s = j < n_ctx ? sc[j] : -INFINITY;
        float incl = s;
        for (int o = 1; o < 32; o <<= 1) {
            float up = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl = fmaxf(incl, up);
        }
        if (lane == 31) warp_top[warp] = incl;
        __syncthreads();
        float before = carry;
        for (int w = 0; w < warp; w++) before = fmaxf(before, warp_top[w]);
        float lane_before = __shfl_up_sync(0xffffffffu, incl, 1);
        if (lane > 0) before = fmaxf(before, lane_before);
        if (j < n_ctx) {
            bool new_max = s > before;
            msv[j] = new_max ? libm_expf(before - s) : 1.0f;
            sc[j] = new_max ? 1.0f : libm_expf(s - before);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float m = carry;
            for (int w = 0; w < nw; w++) m = fmaxf(m, warp_top[w]);
            carry = m;
        }
        __syncthreads();
    }
    // The normaliser: a recurrence in f32, one thread (the last, idle when hd < blockDim).
    // The recurrences below load ATT_AHEAD positions' inputs into registers before stepping
    // through them, so the loads overlap instead of each step waiting on its own.
    if (threadIdx.x == blockDim.x - 1) {
        float sum = 0.0f;
        for (int j0 = 0; j0 < n_ctx; j0 += ATT_AHEAD) {
            float mm[ATT_AHEAD], ss[ATT_AHEAD];
#pragma unroll
            for (int k = 0; k < ATT_AHEAD; k++)
                if (j0 + k < n_ctx) {
                    mm[k] = msv[j0 + k];
                    ss[k] = sc[j0 + k];
                }
#pragma unroll
            for (int k = 0; k < ATT_AHEAD; k++)
                if (j0 + k < n_ctx)
                    sum = tiled ? __fadd_rn(__fmul_rn(sum, mm[k]), ss[k]) : fmaf(sum, mm[k], ss[k]);
        }
        total = sum;
    }
    // Each output dimension (one per thread: hd <= blockDim): its own recurrence over the
    // positions.
    int d = threadIdx.x;
    float acc = 0.0f;
    if (d < hd) {
        const u16* vcol = vc + g * hd + d;
        for (int j0 = 0; j0 < n_ctx; j0 += ATT_AHEAD) {
            float vv[ATT_AHEAD], mm[ATT_AHEAD], ss[ATT_AHEAD];
#pragma unroll
            for (int k = 0; k < ATT_AHEAD; k++)
                if (j0 + k < n_ctx) {
                    vv[k] = h2f(vcol[(u64)(j0 + k) * kv_dim]);
                    mm[k] = msv[j0 + k];
                    ss[k] = sc[j0 + k];
                }
#pragma unroll
            for (int k = 0; k < ATT_AHEAD; k++) {
                if (j0 + k >= n_ctx) break;
                if (tiled) {
                    acc = __fadd_rn(__fmul_rn(acc, mm[k]), __fmul_rn(vv[k], ss[k]));
                } else {
                    // The CPU rescales (and rounds to f16) only at a new maximum; a rescale
                    // by 1 would leave the f16 value as it is.
                    if (mm[k] != 1.0f) acc = h2f(f2h(__fmul_rn(acc, mm[k])));
                    acc = h2f(f2h(fmaf(vv[k], ss[k], acc)));
                }
            }
        }
    }
    __syncthreads();
    float inv = total == 0.0f ? 0.0f : __fdiv_rn(1.0f, total);
    float* o = out + ((u64)t * n_heads + h) * hd;
    if (d < hd) o[d] = __fmul_rn(acc, inv);
}

// After a step of n tokens: the next step's first position.
extern "C" __global__ void advance(int* pos, int n, STAMP_PARAMS) {
    STAMP_GUARD;
    pos[0] += n;
}
