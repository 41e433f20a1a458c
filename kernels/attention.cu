// The KV cache store (f32 -> f16, like the CPU cache) and causal attention with grouped-query
// heads over it. Attention: one block per (head, query token); scores for every cached
// position go to a global scratch row, then a block-wide max, exp and sum, then each thread
// accumulates output dimensions over the positions. f32 throughout.

// k, v: [n][kv_dim] -> cache rows pos0..pos0+n of one layer ([pos][kv_dim], f16 bits).
extern "C" __global__ void kv_store(const float* __restrict__ k, const float* __restrict__ v,
                                    u16* __restrict__ kc, u16* __restrict__ vc, int kv_dim,
                                    int pos0, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * kv_dim) return;
    u64 dst = (u64)pos0 * kv_dim + i;
    kc[dst] = f2h(k[i]);
    vc[dst] = f2h(v[i]);
}

// q: [n][n_heads * hd]; out the same; scores: [n * n_heads][2 * ctx_cap] scratch.
// The arithmetic follows llama.cpp's CPU flash-attention kernel, as src/engine/cpu/attention.rs
// does: with fewer than 64 queries (`tiled` = 0) the query is rounded to f16 for the K.q
// products and the weighted sum of V accumulates in f16 through an online softmax; from 64
// queries, f32 query and f32 accumulation. Scores are computed in parallel over positions,
// the softmax's per-position factors once in order, then each output dimension accumulates.
extern "C" __global__ void attention(const float* __restrict__ q, const u16* __restrict__ kc,
                                     const u16* __restrict__ vc, int n_heads, int n_kv_heads,
                                     int hd, int pos0, int ctx_cap, float scale, int tiled,
                                     float* __restrict__ scores, float* __restrict__ out) {
    extern __shared__ float qs[];
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
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += h2f(kr[d]) * qs[d];
        sc[j] = s * scale;
    }
    __syncthreads();
    // The online softmax's rescale (ms) and weight (vs) per position depend only on the score
    // sequence: one thread walks it in order, then every output dimension reuses them.
    float* msv = sc + ctx_cap;
    __shared__ float total;
    if (threadIdx.x == 0) {
        float mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < n_ctx; j++) {
            float s = sc[j], ms = 1.0f, vs = 1.0f;
            if (tiled) {
                if (s > mx) {
                    ms = expf(mx - s);
                    mx = s;
                }
                vs = expf(s - mx);
                sum = sum * ms + vs;
            } else {
                if (s > mx) {
                    ms = expf(mx - s);
                    mx = s;
                } else {
                    vs = expf(s - mx);
                }
                sum = fmaf(sum, ms, vs);
            }
            msv[j] = ms;
            sc[j] = vs;
        }
        total = sum;
    }
    __syncthreads();
    float inv = total == 0.0f ? 0.0f : 1.0f / total;
    float* o = out + ((u64)t * n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        const u16* vcol = vc + g * hd + d;
        float acc = 0.0f;
        for (int j = 0; j < n_ctx; j++) {
            float v = h2f(vcol[(u64)j * kv_dim]);
            if (tiled) {
                acc = acc * msv[j] + v * sc[j];
            } else {
                // A rescale by 1 leaves an f16 value as it is, so every step can round.
                acc = h2f(f2h(acc * msv[j]));
                acc = h2f(f2h(fmaf(v, sc[j], acc)));
            }
        }
        o[d] = acc * inv;
    }
}
