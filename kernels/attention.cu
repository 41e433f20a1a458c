// Causal attention with grouped-query heads over the f16 KV cache (written by rope_store,
// rope.cu), in the CPU's order: one block per (head, query token); scores for every cached
// position go to a global scratch row, the online softmax's factors are walked once in order,
// then each thread accumulates output dimensions over the positions.
//
// Every f32 operation is the CPU engine's (src/engine/cpu/attention.rs), in its order: the
// K.q dot as ggml_vec_dot_f16's AVX-512 lanes (or `dot_lanes` on the tiled path), and exp as
// glibc's expf, operation for operation (`glibc_expf`).

// The first key position a query at position p sees: 0, or on a sliding-window layer
// (`window` > 0 positions) p - window + 1 (llama.cpp's mask hides a key at p1 from a query at
// p0 where p0 - p1 >= window).
__device__ __forceinline__ int window_first(int p, int window) {
    return window > 0 ? max(0, p - window + 1) : 0;
}

// glibc's expf (2.27 and later), as the CPU engine's softmax takes it
// (src/engine/cpu/expf.rs `glibc_expf`, which is checked against the C library): x * 32/ln 2 =
// k + r, 2^(k/32) from a 32-entry table, a cubic in r, all in f64 with the same roundings and
// fused products, then one rounding to f32. Not exp in f64 rounded once: glibc's result is
// off by up to 0.502 ulp before that rounding, and about 7 in 10,000 of its results are the
// other neighbour of the correctly rounded one; each such softmax weight moved an F32
// model's logits (a prompt's tiled path) and every logit of a long gemma3-1b prompt.
// bench/cuda/expf-host-check.py runs this function on the host against the C library.
__constant__ u64 GLIBC_EXPF_TAB[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

__device__ __forceinline__ float glibc_expf(float x) {
    // |x| >= 88, inf or NaN (the top 12 bits less the sign): glibc's special cases.
    const u32 top = (__float_as_uint(x) >> 20) & 0x7ff;
    if (top >= 0x42b) {
        if (x == -INFINITY) return 0.0f;
        if (top >= 0x7f8) return __fadd_rn(x, x);
        if (x > __uint_as_float(0x42b17217u)) return INFINITY;
        if (x < __uint_as_float(0xc2cff1b4u)) return 0.0f;
    }
    const double inv_ln2_n = __longlong_as_double(0x40471547652b82fell);  // 32 / ln 2
    const double shift = __longlong_as_double(0x4338000000000000ll);      // 1.5 * 2^52
    const double c0 = __longlong_as_double(0x3ebc6af84b912394ll);
    const double c1 = __longlong_as_double(0x3f2ebfce50fac4f3ll);
    const double c2 = __longlong_as_double(0x3f962e42ff0c52d6ll);
    const double xd = (double)x;
    double kd = __dadd_rn(__dmul_rn(inv_ln2_n, xd), shift);
    const u64 ki = (u64)__double_as_longlong(kd);
    kd = __dsub_rn(kd, shift);
    const double r = fma(inv_ln2_n, xd, -kd);
    const double s = __longlong_as_double((long long)(GLIBC_EXPF_TAB[ki % 32] + (ki << 47)));
    const double y = fma(fma(c0, r, c1), __dmul_rn(r, r), fma(c2, r, 1.0));
    return __double2float_rn(__dmul_rn(y, s));
}

// ggml_vec_dot_f16 for AVX-512 (src/quant/simd_order.rs `dot_f16`): per 64-element step four
// 16-lane FMA accumulators; per lane (s0 + s2) + (s1 + s3); GCC's 16-lane reduction; then the
// leftover elements added in f64.
// Computed by the 16 threads of a half warp (`l` = threadIdx.x % 16), so a K row is read in
// 32-byte pieces instead of by one thread: thread l takes lane l of each 64-element step;
// the lanes meet through shuffles in the reduction's order (f[i + 8] + f[i], then + 4, then
// (t[0] + t[2]) + (t[1] + t[3])); thread 0 adds the leftover in f64 and has the result. All
// 32 threads of the warp must call it.
__device__ __forceinline__ float dot_f16_ggml(const u16* __restrict__ k,
                                              const float* __restrict__ q, int n, int l) {
    int np = n & ~63;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (int i = 0; i < np; i += 64) {
        s0 = fmaf(h2f(k[i + l]), q[i + l], s0);
        s1 = fmaf(h2f(k[i + 16 + l]), q[i + 16 + l], s1);
        s2 = fmaf(h2f(k[i + 32 + l]), q[i + 32 + l], s2);
        s3 = fmaf(h2f(k[i + 48 + l]), q[i + 48 + l], s3);
    }
    float t = __fadd_rn(__fadd_rn(s0, s2), __fadd_rn(s1, s3));
    t = __fadd_rn(__shfl_down_sync(0xffffffffu, t, 8, 16), t);
    t = __fadd_rn(__shfl_down_sync(0xffffffffu, t, 4, 16), t);
    t = __fadd_rn(t, __shfl_down_sync(0xffffffffu, t, 2, 16));
    t = __fadd_rn(t, __shfl_down_sync(0xffffffffu, t, 1, 16));
    double total = np > 0 ? (double)t : 0.0;
    if (l == 0)
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

// One query's attention in the CPU's order, by the whole block (hd <= blockDim): `qs` the
// query as the CPU takes it (shared memory), the K rows of positions 0..n_ctx at `kg` (the
// head's group in the cache, rows kv_dim apart; the last row from `k_last` when given: a
// step's own row, not in the cache yet) and the V rows at `vg`, `v_stride` apart;
// `sc` and `msv` n_ctx floats of scratch each; hd values out to `o`.
// Scores and the softmax's per-position factors are computed in parallel over positions, then
// each output dimension accumulates; the recurrences load AHEAD positions' inputs at a time.
template <int AHEAD>
__device__ __noinline__ void attention_cpu_order(const float* qs, const u16* __restrict__ kg,
                                    const u16* __restrict__ vg, int kv_dim, int v_stride,
                                    int hd, const u16* k_last, int n_ctx,
                                    float scale, int tiled, float* sc, float* msv, float* o) {
    if (tiled) {
        for (int j = threadIdx.x; j < n_ctx; j += blockDim.x) {
            const u16* kr = (k_last && j == n_ctx - 1) ? k_last : kg + (u64)j * kv_dim;
            sc[j] = __fmul_rn(dot_lanes_f16(kr, qs, hd), scale);
        }
    } else {
        // A half warp per position; every thread runs the same rounds (the dot's shuffles
        // need whole warps), those past the end on a copy of the last row.
        int l = threadIdx.x & 15, halves = blockDim.x >> 4;
#pragma unroll 2
        for (int base = 0; base < n_ctx; base += halves) {
            int j = base + (threadIdx.x >> 4), jj = min(j, n_ctx - 1);
            const u16* kr = (k_last && jj == n_ctx - 1) ? k_last : kg + (u64)jj * kv_dim;
            float s = dot_f16_ggml(kr, qs, hd, l);
            if (l == 0 && j < n_ctx) sc[j] = __fmul_rn(s, scale);
        }
    }
    __syncthreads();
    // The online softmax's rescale (ms) and weight (vs) for position j depend only on the
    // running maximum before j: a new maximum gives ms = exp(max_before - s), vs = 1; else
    // ms = 1, vs = exp(s - max_before) (the same factors on both llama.cpp paths). The running
    // maximum is a block-wide prefix scan, so every position's exp runs in parallel.
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
            msv[j] = new_max ? glibc_expf(before - s) : 1.0f;
            sc[j] = new_max ? 1.0f : glibc_expf(s - before);
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
    // The recurrences below load AHEAD positions' inputs into registers before stepping
    // through them, so the loads overlap instead of each step waiting on its own (16 in the
    // exact kernel; the split kernel's call takes fewer, to keep its registers).
    if (threadIdx.x == blockDim.x - 1) {
        float sum = 0.0f;
        for (int j0 = 0; j0 < n_ctx; j0 += AHEAD) {
            float mm[AHEAD], ss[AHEAD];
#pragma unroll
            for (int k = 0; k < AHEAD; k++)
                if (j0 + k < n_ctx) {
                    mm[k] = msv[j0 + k];
                    ss[k] = sc[j0 + k];
                }
#pragma unroll
            for (int k = 0; k < AHEAD; k++)
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
        const u16* vcol = vg + d;
        for (int j0 = 0; j0 < n_ctx; j0 += AHEAD) {
            float vv[AHEAD], mm[AHEAD], ss[AHEAD];
#pragma unroll
            for (int k = 0; k < AHEAD; k++)
                if (j0 + k < n_ctx) {
                    int j = j0 + k;
                    vv[k] = h2f(vcol[(u64)j * v_stride]);
                    mm[k] = msv[j];
                    ss[k] = sc[j];
                }
#pragma unroll
            for (int k = 0; k < AHEAD; k++) {
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
    if (d < hd) o[d] = __fmul_rn(acc, inv);
}

// q: [n][n_heads * hd]; out the same; scores: [n * n_heads][2 * ctx_cap] scratch. Each query
// token's position and cache as `cached_at` (rope.cu) says: a prompt's tokens over one cache,
// or a batch's one token per sequence, each over its own. `window` > 0 (a sliding-window
// layer): a query at position p sees only the keys at p - window + 1 ..= p, and the kernel
// reads only those (`window_first`), as the CPU skips the keys llama.cpp's mask hides.
// The arithmetic follows llama.cpp's CPU flash-attention kernel, as src/engine/cpu/attention.rs
// does: with fewer than 64 queries (`tiled` = 0) the query is rounded to f16 for the K.q
// products and the weighted sum of V accumulates in f16 through an online softmax; from 64
// queries, f32 query and f32 accumulation (`attention_cpu_order`). Launched with
// max(128, head_dim rounded up to 32) threads (a thread per output dimension).
extern "C" __global__ void attention(const float* __restrict__ q, const u16* __restrict__ kc,
                                     const u16* __restrict__ vc, int n_heads, int n_kv_heads,
                                     int hd, const int* __restrict__ pos,
                                     long long seq_stride, int ctx_cap, float scale,
                                     int window, int tiled, float* __restrict__ scores,
                                     float* __restrict__ out, STAMP_PARAMS) {
    STAMP_GUARD;
    extern __shared__ float qs[];
    u64 seq_off;
    int p = cached_at(pos, seq_stride, blockIdx.y, seq_off);
    int h = blockIdx.x, t = blockIdx.y;
    int g = h / (n_heads / n_kv_heads);
    int kv_dim = n_kv_heads * hd;
    // The first visible key: the cache rows start there, and the context is the window's.
    int first = window_first(p, window);
    kc += seq_off + (u64)first * kv_dim;
    vc += seq_off + (u64)first * kv_dim;
    const float* qrow = q + ((u64)t * n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        qs[d] = tiled ? qrow[d] : h2f(f2h(qrow[d]));
    __syncthreads();
    float* sc = scores + ((u64)t * n_heads + h) * 2 * ctx_cap;
    attention_cpu_order<16>(qs, kc + g * hd, vc + g * hd, kv_dim, kv_dim, hd, nullptr,
                            p + 1 - first, scale, tiled, sc, sc + ctx_cap,
                        out + ((u64)t * n_heads + h) * hd);
}

// After a step of n tokens: the next step's first position.
extern "C" __global__ void advance(int* pos, int n, STAMP_PARAMS) {
    STAMP_GUARD;
    pos[0] += n;
}
