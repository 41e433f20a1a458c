// The `fast` numerics' decode attention (one query per head, DESIGN.md "Numerics"):
// split-KV flash decoding over the f16 KV cache, so its time grows with the context only
// through the bytes it reads.
//
// Grid (n_heads, splits): block (h, s) takes query head h against chunk s of the positions
// 0..=pos (chunks of max(ATTF_MIN_CHUNK, ceil(positions / splits)); blocks past the last chunk
// leave at once, so the grid can be sized for the whole context when a graph is captured): the K.q scores into shared memory (a warp per position, in
// batches of ATTF_U positions so their loads overlap), the chunk's maximum and sum of
// exponentials, and the exponential-weighted sum of its V rows; these go to `part` as
// (acc[hd], max, sum) (or, when one chunk covers the context, straight to the output). The
// last block of a head to finish (a ticket counter per head, reset by that block, so a CUDA
// graph can replay the step) combines the splits into the output.
// Sums are reordered freely (f32 throughout, q pre-scaled); `exact` keeps attention.cu.

#define ATTF_THREADS 128
#define ATTF_U 8
#define ATTF_MIN_CHUNK 32
#define ATTF_MAX_SPLITS 256

extern "C" __global__ void attention_split(const float* __restrict__ q,
                                           const u16* __restrict__ kc,
                                           const u16* __restrict__ vc, int n_heads,
                                           int n_kv_heads, int hd, const int* __restrict__ pos,
                                           int splits, float scale, float* __restrict__ part,
                                           int* __restrict__ tickets, float* __restrict__ out,
                                           STAMP_PARAMS) {
    STAMP_GUARD;
    extern __shared__ float sm[];
    __shared__ float red[2 * ATTF_THREADS];
    __shared__ float wtop[ATTF_THREADS / 32];
    __shared__ int last;
    float* qs = sm;
    float* sc = sm + hd;
    int h = blockIdx.x, sp = blockIdx.y;
    int n_ctx = pos[0] + 1;
    int chunk = max(ATTF_MIN_CHUNK, (n_ctx + splits - 1) / splits);
    int active = (n_ctx + chunk - 1) / chunk;
    if (sp >= active) return;
    int j0 = sp * chunk, j1 = min(n_ctx, j0 + chunk);
    int g = h / (n_heads / n_kv_heads);
    int kv_dim = n_kv_heads * hd, pairs = hd >> 1;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[(u64)h * hd + d] * scale;
    __syncthreads();

    // Scores: a warp per position, lanes over dimension pairs.
    const u16* kbase = kc + g * hd;
    for (int jb = j0 + warp * ATTF_U; jb < j1; jb += nw * ATTF_U) {
        float s[ATTF_U];
#pragma unroll
        for (int u = 0; u < ATTF_U; u++) {
            s[u] = 0.0f;
            int j = jb + u;
            if (j < j1) {
                const u32* kr = (const u32*)(kbase + (u64)j * kv_dim);
                for (int p = lane; p < pairs; p += 32) {
                    u32 kk = __ldg(kr + p);
                    s[u] += h2f((u16)kk) * qs[2 * p] + h2f((u16)(kk >> 16)) * qs[2 * p + 1];
                }
            }
        }
#pragma unroll
        for (int u = 0; u < ATTF_U; u++) {
            float v = warp_sum(s[u]);
            if (lane == 0 && jb + u < j1) sc[jb + u - j0] = v;
        }
    }
    __syncthreads();

    // The chunk's maximum, then its weights exp(s - max) and their sum.
    float m = -INFINITY;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) m = fmaxf(m, sc[j]);
    m = warp_max(m);
    if (lane == 0) wtop[warp] = m;
    __syncthreads();
    m = wtop[0];
    for (int w = 1; w < nw; w++) m = fmaxf(m, wtop[w]);
    float l = 0.0f;
    for (int j = threadIdx.x; j < j1 - j0; j += blockDim.x) {
        float e = __expf(sc[j] - m);
        sc[j] = e;
        l += e;
    }
    l = warp_sum(l);
    __syncthreads();
    if (lane == 0) wtop[warp] = l;
    __syncthreads();
    l = 0.0f;
    for (int w = 0; w < nw; w++) l += wtop[w];

    // V: thread (group gi, pair d2) sums positions j0 + gi, + groups, ...
    int groups = blockDim.x / pairs;
    int gi = threadIdx.x / pairs, d2 = threadIdx.x % pairs;
    float a0 = 0.0f, a1 = 0.0f;
    if (gi < groups) {
        const u32* vbase = (const u32*)(vc + g * hd) + d2;
        int j = j0 + gi;
        for (; j + (ATTF_U - 1) * groups < j1; j += ATTF_U * groups) {
            u32 vv[ATTF_U];
#pragma unroll
            for (int u = 0; u < ATTF_U; u++)
                vv[u] = __ldg(vbase + (u64)(j + u * groups) * (kv_dim >> 1));
#pragma unroll
            for (int u = 0; u < ATTF_U; u++) {
                float p = sc[j + u * groups - j0];
                a0 += p * h2f((u16)vv[u]);
                a1 += p * h2f((u16)(vv[u] >> 16));
            }
        }
        for (; j < j1; j += groups) {
            u32 v = __ldg(vbase + (u64)j * (kv_dim >> 1));
            float p = sc[j - j0];
            a0 += p * h2f((u16)v);
            a1 += p * h2f((u16)(v >> 16));
        }
        red[2 * threadIdx.x] = a0;
        red[2 * threadIdx.x + 1] = a1;
    }
    __syncthreads();
    // A context of one chunk needs no combining: this block has the answer.
    float* mine = part + ((u64)h * splits + sp) * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < groups; k++) acc += red[2 * (k * pairs + (d >> 1)) + (d & 1)];
        if (active == 1) out[(u64)h * hd + d] = acc / l;
        else mine[d] = acc;
    }
    if (active == 1) return;
    if (threadIdx.x == 0) {
        mine[hd] = m;
        mine[hd + 1] = l;
    }

    // The last split of this head to finish combines them all.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(tickets + h, 1) == active - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Each split's weight exp(max_s - max) / total, in parallel; then every output dimension
    // sums the splits with independent loads.
    __shared__ float wm[ATTF_MAX_SPLITS], wl[ATTF_MAX_SPLITS];
    const float* all = part + (u64)h * splits * (hd + 2);
    for (int s = threadIdx.x; s < active; s += blockDim.x) {
        wm[s] = __ldcg(all + (u64)s * (hd + 2) + hd);
        wl[s] = __ldcg(all + (u64)s * (hd + 2) + hd + 1);
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int s = 0; s < active; s++) mx = fmaxf(mx, wm[s]);
    float total = 0.0f;
    for (int s = 0; s < active; s++) total += wl[s] * __expf(wm[s] - mx);
    __syncthreads();
    for (int s = threadIdx.x; s < active; s += blockDim.x) wm[s] = __expf(wm[s] - mx) / total;
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
#pragma unroll 8
        for (int s = 0; s < active; s++) acc += __ldcg(all + (u64)s * (hd + 2) + d) * wm[s];
        out[(u64)h * hd + d] = acc;
    }
    if (threadIdx.x == 0) tickets[h] = 0;
}
