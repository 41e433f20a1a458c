// The `fast` numerics' decode attention (one query per head, docs/DESIGN.md "Numerics"):
// split-KV flash decoding over the f16 KV cache, so its time grows with the context only
// through the bytes it reads.
//
// Two kernels: `attention_split`, a block per query head (described below), and
// `attention_group` for long contexts of grouped-query models (2 to ATTF_GROUP_MAX query
// heads per KV head): a block per KV head and chunk, the group's queries together, so the
// cache is read once per group, not once per query head (`attention_group_block`). Each
// has its own registers: the grouped one's G accumulators per thread would halve the
// one-head kernel's occupancy. The engine picks by the context (`CudaEngine::grouped_at`).
// Head sizes 64 and 128 take the grouped path on tensor cores instead
// (attention_group_mma.cu), which ends with this file's `attg_combine`.
//
// Grid (n_heads, splits): block (h, s) takes query head h against chunk s of the positions
// 0..=pos (chunks of max(ATTF_MIN_CHUNK, ceil(positions / splits)); blocks past the last chunk
// leave at once, so the grid can be sized for the whole context when a graph is captured):
// the K.q scores into shared memory (two threads per position, so a chunk's K rows load in one
// round trip), the chunk's maximum and sum of exponentials, and the exponential-weighted sum
// of its V rows (16-byte loads, many positions per pass); these go to `part` as (acc[hd], max,
// sum), or, when one chunk covers the context, straight to the output. The last block of a
// head to finish (a ticket counter per head, reset by that block, so a CUDA graph can replay
// the step) combines the splits into the output.
// RoPE runs here too (the query, and the step's own K in the block that needs it, which also
// writes this step's K and V rows to the cache), so decode needs no rope_store launch.
// With `akind` >= 0 the block that writes a head's output also quantizes it for the output
// projection (`act_quant_warp`: the float kinds and Q8_0/Q8_1, whose 32-value groups lie
// within a head when head_dim is a multiple of 32), so decode needs no act_quant launch
// between attention and attn_out.
// Sums are reordered freely (f32 throughout, q pre-scaled); `exact` keeps attention.cu.
// Short contexts (`ordered_upto` positions or fewer, at most ATTF_ORDERED_MAX) take
// attention.cu's CPU-order arithmetic instead, in this same launch (RoPE and the cache write
// as above): the engine asks for it where every decode product is in the CPU's order too, so
// that a short decode gives the CPU's bits (src/engine/cuda/kernel_table.rs `cpu_order_fast`).
// Its serial order costs decode speed (measured: docs/measurements/kernels.md).

#define ATTF_THREADS 256
// 128 positions: at 1024 positions of context a 7b head gets 9 blocks instead of 5, and a
// block's V pass is one round of loads per thread (`unroll 8` below).
#define ATTF_MIN_CHUNK 128
#define ATTF_MAX_SPLITS 256
// Most query heads per KV head the grouped path takes (more: one block per query head), and
// most chunks it splits a context into (the combine's weights fit the scratch `red`).
#define ATTF_GROUP_MAX 8
#define ATTF_GROUP_SPLITS 128
// Longest context the CPU-order path takes: one chunk, so one block per head has it all.
// CBTOP_KERNEL_DEFINES=ATTF_ORDERED_MAX=0 turns the path off for A/B runs.
#ifndef ATTF_ORDERED_MAX
#define ATTF_ORDERED_MAX 128
#endif
#if ATTF_ORDERED_MAX > ATTF_MIN_CHUNK || 2 * ATTF_ORDERED_MAX > ATTF_THREADS * 8
#error "ATTF_ORDERED_MAX must fit one chunk and the scratch `red`"
#endif

__device__ __forceinline__ float lo_h(u32 v) { return h2f((u16)v); }
__device__ __forceinline__ float hi_h(u32 v) { return h2f((u16)(v >> 16)); }

// The block's static shared memory, declared once in the kernel: each instantiation of the
// block's template declaring its own would triple it.
struct AttfShared {
    float red[ATTF_THREADS * 8];
    float wtop[ATTF_THREADS / 32];
    float cur[2][128];
    // The step's own K and V rows as f16 bits (the CPU-order path).
    u16 curh[2][128];
    // The grouped path: RoPE's cos/sin pairs at the position, each head's chunk maximum and
    // sum of exponentials.
    float2 cs[64];
    float gm[ATTF_GROUP_MAX];
    float gl[ATTF_GROUP_MAX];
    int last;
};

// `AttfShared` for the one-head kernel on heads of 256 (`attention_split_wide`): the step's
// own K and V rows twice as long; nothing of the grouped path.
struct AttfSharedWide {
    float red[ATTF_THREADS * 8];
    float wtop[ATTF_THREADS / 32];
    float cur[2][256];
    u16 curh[2][256];
    int last;
};

// Head h's output (written by this block, all of whose threads call this) quantized as `kind`
// into the activation buffers (act_quant.cu), a warp per 32 values; nothing when kind < 0.
__device__ __forceinline__ void attf_quant_head(const float* __restrict__ out, int h, int hd,
                                                int kind, float* __restrict__ xf,
                                                i8* __restrict__ aq, float* __restrict__ ad,
                                                float* __restrict__ ax) {
    if (kind < 0) return;
    __syncthreads();
    int d = threadIdx.x;
    if (d < ((hd + 31) & ~31)) {
        bool ok = d < hd;
        u64 i = (u64)h * hd + d;
        act_quant_warp(ok ? out[i] : 0.0f, ok, i, kind, xf, aq, ad, ax);
    }
}

// Values i0 .. i0 + count of `out` (written by this block, all of whose threads call this)
// quantized as `kind` like `attf_quant_head`; i0 a multiple of 32 where the kind groups 32.
__device__ __forceinline__ void attf_quant_range(const float* __restrict__ out, u64 i0,
                                                 int count, int kind, float* __restrict__ xf,
                                                 i8* __restrict__ aq, float* __restrict__ ad,
                                                 float* __restrict__ ax) {
    if (kind < 0) return;
    __syncthreads();
    // Whole warps every round (blockDim.x and the padded count are multiples of 32).
    int padded = (count + 31) & ~31;
    for (int t = threadIdx.x; t < padded; t += blockDim.x) {
        bool ok = t < count;
        act_quant_warp(ok ? out[i0 + t] : 0.0f, ok, i0 + t, kind, xf, aq, ad, ax);
    }
}

// The block's work for head dimension HD (0: `hd` at run time), its static shared memory an
// `AttfShared` (heads up to 128) or an `AttfSharedWide` (256).
template <int HD, typename SH = AttfShared>
__device__ __forceinline__ void attention_split_block(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    u16* __restrict__ kc, u16* __restrict__ vc, int n_heads, int n_kv_heads, int hd_rt,
    int pos0, float rc, float rs, int n_rot, int neox, int splits, float scale,
    int ordered_upto, float* __restrict__ part, int* __restrict__ tickets,
    float* __restrict__ out, int akind, float* __restrict__ axf, i8* __restrict__ aq,
    float* __restrict__ ad, float* __restrict__ ax, SH& sh) {
    const int hd = HD ? HD : hd_rt;
    extern __shared__ float sm[];
    float* red = sh.red;
    float* wtop = sh.wtop;
    auto cur = sh.cur;
    int& last = sh.last;
    float* qs = sm;
    float* sc = sm + hd;
    int h = blockIdx.x, sp = blockIdx.y;
    int n_ctx = pos0 + 1;
    int chunk = max(ATTF_MIN_CHUNK, (n_ctx + splits - 1) / splits);
    int active = (n_ctx + chunk - 1) / chunk;
    if (sp >= active) return;
    int j0 = sp * chunk, len = min(n_ctx, j0 + chunk) - j0;
    // One chunk (ordered_upto <= ATTF_MIN_CHUNK): this block is the head's only one.
    bool ordered = n_ctx <= ordered_upto;
    int g = h / (n_heads / n_kv_heads);
    int kv_dim = n_kv_heads * hd;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    // This step's query rotated here (and, in the chunk holding this step's position, its K
    // rotated and V, rounded to f16 as the cache holds them; the group's first head writes
    // them to the cache), so no separate RoPE launch runs before.
    bool mine_pos = j0 + len == n_ctx;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        qs[d] = q[(u64)h * hd + d];
        if (mine_pos) {
            cur[0][d] = k[(u64)g * hd + d];
            cur[1][d] = h2f(f2h(v[(u64)g * hd + d]));
        }
    }
    __syncthreads();
    if (threadIdx.x < n_rot / 2) {
        rope_pair(qs, threadIdx.x, n_rot, rc, rs, neox);
        if (mine_pos) rope_pair(cur[0], threadIdx.x, n_rot, rc, rs, neox);
    }
    __syncthreads();
    bool writer = mine_pos && h % (n_heads / n_kv_heads) == 0;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        // The CPU-order path rounds the query to f16 and scales the scores instead.
        qs[d] = ordered ? h2f(f2h(qs[d])) : qs[d] * scale;
        if (mine_pos) {
            u16 kh = f2h(cur[0][d]), vh = f2h(cur[1][d]);
            cur[0][d] = h2f(kh);
            if (ordered) {
                sh.curh[0][d] = kh;
                sh.curh[1][d] = vh;
            }
            if (writer) {
                kc[(u64)pos0 * kv_dim + g * hd + d] = kh;
                vc[(u64)pos0 * kv_dim + g * hd + d] = vh;
            }
        }
    }
    __syncthreads();
    if (ordered) {
        // The V rows into shared memory after the query (the host sizes it:
        // `split_shared_bytes`), so the per-dimension recurrence does not wait on a global
        // load every few positions; then the CPU's arithmetic.
        u16* vs = (u16*)(qs + hd);
        const int per = hd / 8;
        for (int i = threadIdx.x; i < (n_ctx - 1) * per; i += blockDim.x) {
            int j = i / per, c = i % per;
            *((uint4*)(vs + j * hd) + c) = __ldg((const uint4*)(vc + g * hd + (u64)j * kv_dim) + c);
        }
        for (int d = threadIdx.x; d < hd; d += blockDim.x) vs[(n_ctx - 1) * hd + d] = sh.curh[1][d];
        __syncthreads();
        attention_cpu_order<4>(qs, kc + g * hd, vs, kv_dim, hd, hd, sh.curh[0], n_ctx, scale, 0,
                               red, red + ATTF_ORDERED_MAX, out + (u64)h * hd);
        attf_quant_head(out, h, hd, akind, axf, aq, ad, ax);
        return;
    }

    // Scores: two threads per position, each taking half of its K row in 16-byte loads with
    // eight independent sums (the module compiles with --fmad=false, so the fused
    // multiply-adds are spelled out); q read as broadcasts. The pair's halves meet through a
    // shuffle; every thread runs the same number of rounds, so the shuffle sees whole warps.
    const u16* kb = kc + g * hd + (u64)j0 * kv_dim;
    const int n8 = hd / 8, half = threadIdx.x & 1;
    const int c0 = half ? n8 / 2 : 0, c1 = half ? n8 : n8 / 2;
    float m = -INFINITY;
    for (int base = 0; base < len; base += blockDim.x / 2) {
        int j = base + (threadIdx.x >> 1);
        float p8[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (j < len && j0 + j == pos0) {
            for (int c = c0; c < c1; c++)
#pragma unroll
                for (int e = 0; e < 8; e++) p8[e] = fmaf(cur[0][8 * c + e], qs[8 * c + e], p8[e]);
        } else if (j < len) {
            const uint4* kr = (const uint4*)(kb + (u64)j * kv_dim);
#pragma unroll 8
            for (int c = c0; c < c1; c++) {
                uint4 kv = __ldg(kr + c);
                const float* qq = qs + 8 * c;
                p8[0] = fmaf(lo_h(kv.x), qq[0], p8[0]);
                p8[1] = fmaf(hi_h(kv.x), qq[1], p8[1]);
                p8[2] = fmaf(lo_h(kv.y), qq[2], p8[2]);
                p8[3] = fmaf(hi_h(kv.y), qq[3], p8[3]);
                p8[4] = fmaf(lo_h(kv.z), qq[4], p8[4]);
                p8[5] = fmaf(hi_h(kv.z), qq[5], p8[5]);
                p8[6] = fmaf(lo_h(kv.w), qq[6], p8[6]);
                p8[7] = fmaf(hi_h(kv.w), qq[7], p8[7]);
            }
        }
        float s = ((p8[0] + p8[1]) + (p8[2] + p8[3])) + ((p8[4] + p8[5]) + (p8[6] + p8[7]));
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        if (j < len) {
            if (!half) sc[j] = s;
            m = fmaxf(m, s);
        }
    }
    // The chunk's maximum, then its weights exp(s - max) and their sum.
    m = warp_max(m);
    if (lane == 0) wtop[warp] = m;
    __syncthreads();
    m = wtop[0];
    for (int w = 1; w < nw; w++) m = fmaxf(m, wtop[w]);
    float l = 0.0f;
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
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

    // V: thread (group gi, column c) sums 8 dimensions (one 16-byte load per row) over
    // positions gi, gi + groups, ...
    int per_row = hd / 8, groups = blockDim.x / per_row;
    int gi = threadIdx.x / per_row, c = threadIdx.x % per_row;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (gi < groups) {
        const uint4* vb = (const uint4*)(vc + g * hd + (u64)j0 * kv_dim) + c;
        // The step's own row (the chunk's last) comes from shared memory.
        int stop = mine_pos ? len - 1 : len;
#pragma unroll 8
        for (int j = gi; j < stop; j += groups) {
            uint4 vv = __ldg(vb + (u64)j * (kv_dim / 8));
            float p = sc[j];
            acc[0] = fmaf(p, lo_h(vv.x), acc[0]);
            acc[1] = fmaf(p, hi_h(vv.x), acc[1]);
            acc[2] = fmaf(p, lo_h(vv.y), acc[2]);
            acc[3] = fmaf(p, hi_h(vv.y), acc[3]);
            acc[4] = fmaf(p, lo_h(vv.z), acc[4]);
            acc[5] = fmaf(p, hi_h(vv.z), acc[5]);
            acc[6] = fmaf(p, lo_h(vv.w), acc[6]);
            acc[7] = fmaf(p, hi_h(vv.w), acc[7]);
        }
        if (mine_pos && (len - 1) % groups == gi) {
            float p = sc[len - 1];
#pragma unroll
            for (int e = 0; e < 8; e++) acc[e] += p * cur[1][8 * c + e];
        }
#pragma unroll
        for (int k = 0; k < 8; k++) red[gi * hd + 8 * c + k] = acc[k];
    }
    __syncthreads();
    // A context of one chunk needs no combining: this block has the answer.
    float* mine = part + ((u64)h * splits + sp) * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int k = 0; k < groups; k++) a += red[k * hd + d];
        if (active == 1) out[(u64)h * hd + d] = a / l;
        else mine[d] = a;
    }
    if (active == 1) {
        attf_quant_head(out, h, hd, akind, axf, aq, ad, ax);
        return;
    }
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
    float* wm = red;
    float* wl = red + ATTF_MAX_SPLITS;
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
        float a = 0.0f;
#pragma unroll 8
        for (int s = 0; s < active; s++) a += __ldcg(all + (u64)s * (hd + 2) + d) * wm[s];
        out[(u64)h * hd + d] = a;
    }
    if (threadIdx.x == 0) tickets[h] = 0;
    attf_quant_head(out, h, hd, akind, axf, aq, ad, ax);
}

// The grouped kernels' end, after a block wrote its chunk's partial sums for the G query
// heads of KV head g (rows of hd + 4 floats in `part`, 2 x splits chunks a head: the
// exponential-weighted sums, then max and sum of exponentials, in the natural-log domain):
// the last chunk of the group to finish combines them all into the output, a thread per four
// output values. Each thread loads ATTG_BATCH chunks' maxima, sums and values at once and
// folds them into a running maximum, so the combine waits on one round trip to L2 per batch
// rather than one per step of a max / weights / sum sequence.
#ifndef ATTG_BATCH
#define ATTG_BATCH 8
#endif
__device__ __forceinline__ void attg_combine(const float* __restrict__ part,
                                             int* __restrict__ tickets, float* __restrict__ out,
                                             int g, int G, int hd, int splits, int active,
                                             int& last, int akind,
                                             float* __restrict__ axf, i8* __restrict__ aq,
                                             float* __restrict__ ad, float* __restrict__ ax) {
    const int stride = hd + 4, h0 = g * G;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(tickets + g, 1) == active - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int q4 = hd / 4;
    for (int i = threadIdx.x; i < G * q4; i += blockDim.x) {
        int hh = i / q4, d4 = i - hh * q4;
        const float* head = part + (u64)(h0 + hh) * 2 * splits * stride;
        float mx = -INFINITY, total = 0.0f;
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int s0 = 0; s0 < active; s0 += ATTG_BATCH) {
            float m[ATTG_BATCH], l[ATTG_BATCH];
            float4 x[ATTG_BATCH];
#pragma unroll
            for (int j = 0; j < ATTG_BATCH; j++) {
                const bool ok = s0 + j < active;
                const float* row = head + (u64)(ok ? s0 + j : s0) * stride;
                m[j] = ok ? __ldcg(row + hd) : -INFINITY;
                l[j] = __ldcg(row + hd + 1);
                x[j] = __ldcg((const float4*)row + d4);
            }
            float mb = mx;
#pragma unroll
            for (int j = 0; j < ATTG_BATCH; j++) mb = fmaxf(mb, m[j]);
            // The first batch holds chunk 0, whose maximum is finite: mb is finite from here.
            const float f = __expf(mx - mb);
            total *= f;
            a.x *= f;
            a.y *= f;
            a.z *= f;
            a.w *= f;
#pragma unroll
            for (int j = 0; j < ATTG_BATCH; j++) {
                const float e = __expf(m[j] - mb);
                total += l[j] * e;
                a.x += x[j].x * e;
                a.y += x[j].y * e;
                a.z += x[j].z * e;
                a.w += x[j].w * e;
            }
            mx = mb;
        }
        const float r = 1.0f / total;
        *((float4*)(out + (u64)(h0 + hh) * hd) + d4) =
            make_float4(a.x * r, a.y * r, a.z * r, a.w * r);
    }
    if (threadIdx.x == 0) tickets[g] = 0;
    attf_quant_range(out, (u64)h0 * hd, G * hd, akind, axf, aq, ad, ax);
}

// Positions per chunk for a context of n_ctx split `splits` ways: at least ATTF_MIN_CHUNK.
// On the grouped path `splits` is the chunks one wave of blocks takes, and a chunk is a whole
// number of `gran` positions (the CUDA-core kernel: ATTF_MIN_CHUNK, its passes, so none runs
// part-full; the tensor-core one: a warp's 16): of the chunk sizes that give one wave or
// (where 2 x splits chunks stay within ATTF_GROUP_SPLITS) two, the one with the least work a
// block times waves, the single wave on a tie.
__device__ __forceinline__ int attf_chunk(int n_ctx, int splits, bool grouped,
                                          int gran = ATTF_MIN_CHUNK) {
    if (!grouped) return max(ATTF_MIN_CHUNK, (n_ctx + splits - 1) / splits);
    int best = 0, cost = 0;
    for (int w = 1; w <= (2 * splits <= ATTF_GROUP_SPLITS ? 2 : 1); w++) {
        int c = (n_ctx + w * splits - 1) / (w * splits);
        c = max(ATTF_MIN_CHUNK, (c + gran - 1) / gran * gran);
        int waves = ((n_ctx + c - 1) / c + splits - 1) / splits;
        if (w == 1 || waves * c < cost) {
            best = c;
            cost = waves * c;
        }
    }
    return best;
}

// The grouped path: block (g, sp) takes every query head of KV head g (G of them, at most
// ATTF_GROUP_MAX) against chunk sp of the positions, so each K and V row of the chunk is read
// once for the group rather than once per query head. The same steps as the block above, G
// queries at a time: scores (two threads per position, the half row of K held in registers
// against each query), a warp per head for the chunk's maximum and weights, the V pass with
// G accumulators per thread, then the last block of the group combines the chunks of all G
// heads, a thread per output value. `splits` is the group's own count of chunks.
template <int HD>
__device__ __forceinline__ void attention_group_block(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    u16* __restrict__ kc, u16* __restrict__ vc, int n_heads, int n_kv_heads, int hd_rt,
    int pos0, float rc, float rs, int n_rot, int neox, int g, int sp, int splits, float scale,
    float* __restrict__ part, int* __restrict__ tickets, float* __restrict__ out, int akind,
    float* __restrict__ axf, i8* __restrict__ aq, float* __restrict__ ad,
    float* __restrict__ ax, AttfShared& sh) {
    const int hd = HD ? HD : hd_rt;
    const int G = n_heads / n_kv_heads;
    extern __shared__ float sm[];
    int n_ctx = pos0 + 1;
    int chunk = attf_chunk(n_ctx, splits, true);
    int active = (n_ctx + chunk - 1) / chunk;
    if (sp >= active) return;
    float* qs = sm;           // [G][hd]
    float* sc = sm + G * hd;  // [G][chunk]
    int j0 = sp * chunk, len = min(n_ctx, j0 + chunk) - j0;
    bool mine_pos = j0 + len == n_ctx;
    int kv_dim = n_kv_heads * hd, h0 = g * G;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int pairs = n_rot / 2;

    for (int i = threadIdx.x; i < G * hd; i += blockDim.x) qs[i] = q[(u64)h0 * hd + i];
    if (threadIdx.x < pairs) sh.cs[threadIdx.x] = make_float2(rc, rs);
    if (mine_pos)
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            sh.cur[0][d] = k[(u64)g * hd + d];
            sh.cur[1][d] = h2f(f2h(v[(u64)g * hd + d]));
        }
    __syncthreads();
    // RoPE on the G queries and (in the chunk holding this step's position) the step's K.
    for (int i = threadIdx.x; i < (G + 1) * pairs; i += blockDim.x) {
        int hh = i / pairs, p = i - hh * pairs;
        float2 cs = sh.cs[p];
        if (hh < G) rope_pair(qs + hh * hd, p, n_rot, cs.x, cs.y, neox);
        else if (mine_pos) rope_pair(sh.cur[0], p, n_rot, cs.x, cs.y, neox);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * hd; i += blockDim.x) qs[i] *= scale;
    if (mine_pos)
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            u16 kh = f2h(sh.cur[0][d]);
            sh.cur[0][d] = h2f(kh);
            kc[(u64)pos0 * kv_dim + g * hd + d] = kh;
            vc[(u64)pos0 * kv_dim + g * hd + d] = f2h(sh.cur[1][d]);
        }
    __syncthreads();

    // Scores: the pair's two threads take alternate 16-byte pieces of the row (so at each
    // step they read the queries from different banks), all loaded before any is used, and
    // the queries in 16-byte broadcasts.
    const u16* kb = kc + g * hd + (u64)j0 * kv_dim;
    const int n8 = hd / 8, half = threadIdx.x & 1;
    const int cn = (n8 - half + 1) / 2;
    for (int base = 0; base < len; base += blockDim.x / 2) {
        int j = base + (threadIdx.x >> 1);
        float s[ATTF_GROUP_MAX];
#pragma unroll
        for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) s[hh] = 0.0f;
        if (j < len) {
            uint4 kr[8];
            bool own = j0 + j == pos0;
            const uint4* src = (const uint4*)(kb + (u64)j * kv_dim) + half;
#pragma unroll
            for (int c = 0; c < 8; c++)
                if (c < cn && !own) kr[c] = __ldg(src + 2 * c);
#pragma unroll
            for (int c = 0; c < 8; c++) {
                if (c >= cn) break;
                const int col = 8 * (2 * c + half);
                float kf[8];
                if (own) {
#pragma unroll
                    for (int e = 0; e < 8; e++) kf[e] = sh.cur[0][col + e];
                } else {
                    kf[0] = lo_h(kr[c].x), kf[1] = hi_h(kr[c].x);
                    kf[2] = lo_h(kr[c].y), kf[3] = hi_h(kr[c].y);
                    kf[4] = lo_h(kr[c].z), kf[5] = hi_h(kr[c].z);
                    kf[6] = lo_h(kr[c].w), kf[7] = hi_h(kr[c].w);
                }
#pragma unroll
                for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) {
                    if (hh >= G) break;
                    const float4* qq = (const float4*)(qs + hh * hd + col);
                    float4 qa = qq[0], qb = qq[1];
                    float a0 = fmaf(kf[0], qa.x, __fmul_rn(kf[1], qa.y));
                    float a1 = fmaf(kf[2], qa.z, __fmul_rn(kf[3], qa.w));
                    float a2 = fmaf(kf[4], qb.x, __fmul_rn(kf[5], qb.y));
                    float a3 = fmaf(kf[6], qb.z, __fmul_rn(kf[7], qb.w));
                    s[hh] += (a0 + a1) + (a2 + a3);
                }
            }
        }
#pragma unroll
        for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) {
            if (hh >= G) break;
            float t = s[hh] + __shfl_xor_sync(0xffffffffu, s[hh], 1);
            if (j < len && !half) sc[hh * chunk + j] = t;
        }
    }
    __syncthreads();
    // A warp per head: the chunk's maximum, then its weights exp(s - max) and their sum.
    for (int hh = warp; hh < G; hh += nw) {
        float* row = sc + hh * chunk;
        float m = -INFINITY;
        for (int j = lane; j < len; j += 32) m = fmaxf(m, row[j]);
        m = warp_max(m);
        float l = 0.0f;
        for (int j = lane; j < len; j += 32) {
            float e = __expf(row[j] - m);
            row[j] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) {
            sh.gm[hh] = m;
            sh.gl[hh] = l;
        }
    }
    __syncthreads();

    // V: thread (group gi, column c) sums 8 dimensions of every head over positions gi,
    // gi + groups, ...
    int per_row = hd / 8, groups = blockDim.x / per_row;
    int gi = threadIdx.x / per_row, c = threadIdx.x % per_row;
    float acc[ATTF_GROUP_MAX][8];
#pragma unroll
    for (int hh = 0; hh < ATTF_GROUP_MAX; hh++)
#pragma unroll
        for (int e = 0; e < 8; e++) acc[hh][e] = 0.0f;
    if (gi < groups) {
        const uint4* vb = (const uint4*)(vc + g * hd + (u64)j0 * kv_dim) + c;
        int stop = mine_pos ? len - 1 : len;
#pragma unroll 8
        for (int j = gi; j < stop; j += groups) {
            uint4 vv = __ldg(vb + (u64)j * (kv_dim / 8));
            float vf[8] = {lo_h(vv.x), hi_h(vv.x), lo_h(vv.y), hi_h(vv.y),
                           lo_h(vv.z), hi_h(vv.z), lo_h(vv.w), hi_h(vv.w)};
#pragma unroll
            for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) {
                if (hh >= G) break;
                float p = sc[hh * chunk + j];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[hh][e] = fmaf(p, vf[e], acc[hh][e]);
            }
        }
        if (mine_pos && (len - 1) % groups == gi) {
#pragma unroll
            for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) {
                if (hh >= G) break;
                float p = sc[hh * chunk + len - 1];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[hh][e] += p * sh.cur[1][8 * c + e];
            }
        }
    }
    // The groups' sums: within a warp by shuffles (a warp holds 32 / per_row groups), then
    // head by head across the warps in shared memory. `part` rows are hd + 4 floats here
    // (16-byte aligned for the combine's loads): the sums, then max and sum of exponentials.
    // Head sizes whose row is not a power-of-two count of threads skip the shuffles: every
    // group keeps its own slot (groups x hd values fit `red`).
    const int stride = hd + 4;
    bool pow2 = (per_row & (per_row - 1)) == 0 && per_row <= 32;
    if (pow2)
        for (int o = per_row; o < 32; o <<= 1)
#pragma unroll
            for (int hh = 0; hh < ATTF_GROUP_MAX; hh++)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[hh][e] += __shfl_xor_sync(0xffffffffu, acc[hh][e], o);
    int slots = pow2 ? nw : groups, slot = pow2 ? warp : gi;
    bool writes = gi < groups && (!pow2 || lane < per_row);
#pragma unroll
    for (int hh = 0; hh < ATTF_GROUP_MAX; hh++) {
        if (hh >= G) break;
        if (writes)
#pragma unroll
            for (int e = 0; e < 8; e++) sh.red[slot * hd + 8 * c + e] = acc[hh][e];
        __syncthreads();
        int h = h0 + hh;
        float* mine = part + ((u64)h * 2 * splits + sp) * stride;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float a = 0.0f;
            for (int w = 0; w < slots; w++) a += sh.red[w * hd + d];
            if (active == 1) out[(u64)h * hd + d] = a / sh.gl[hh];
            else mine[d] = a;
        }
        if (active > 1 && threadIdx.x == 0) {
            mine[hd] = sh.gm[hh];
            mine[hd + 1] = sh.gl[hh];
        }
        __syncthreads();
    }
    if (active == 1) {
        attf_quant_range(out, (u64)h0 * hd, G * hd, akind, axf, aq, ad, ax);
        return;
    }

    attg_combine(part, tickets, out, g, G, hd, splits, active, sh.last, akind, axf, aq, ad,
                 ax);
}

// Before waiting on the kernel ahead (the QKV product), bring this block's chunk of K and V
// rows into L2: the rows before this step's position were written by earlier steps, so only
// the position (set by the previous step's `advance`) is read. Rows are hd f16 each, one
// 128-byte line of K and one of V per thread per pass. Not inlined: inlined, its values
// stayed live into the block's work and took the kernel from 62 registers to 70 (ptxas).
// ATTF_PREFETCH=0 (CBTOP_KERNEL_DEFINES) turns it off for A/B runs. The prefetch made long-context
// decode faster, and faster than copying the rows into shared memory (cp.async) instead
// (docs/measurements/kernels.md).
#ifndef ATTF_PREFETCH
#define ATTF_PREFETCH 1
#endif
__device__ __noinline__ void attention_split_prefetch(const u16* kc, const u16* vc,
                                                         int n_heads, int n_kv_heads, int hd,
                                                         int pos0, int splits) {
#if ATTF_PREFETCH
    int n_ctx = pos0 + 1;
    int chunk = attf_chunk(n_ctx, splits, false);
    int j0 = blockIdx.y * chunk;
    if (j0 >= n_ctx) return;
    int len = min(n_ctx - 1, j0 + chunk) - j0;  // the step's own row is not in the cache yet
    int g = blockIdx.x / (n_heads / n_kv_heads), kv_dim = n_kv_heads * hd;
    int lines = (hd + 63) / 64;
    u64 off = (u64)j0 * kv_dim + g * hd;
    for (int i = threadIdx.x; i < len * lines; i += blockDim.x) {
        u64 at = off + (u64)(i / lines) * kv_dim + 64 * (i % lines);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + at));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + at));
    }
#endif
}

// The same for a block of the grouped kernel (KV head blockIdx.x, grouped chunk blockIdx.y), its
// first ATTF_GROUP_PREFETCH rows only: a long context's whole chunks (a layer's cache) overflow
// L2, and prefetching them all made decode at 16k-32k positions slower
// (docs/measurements/kernels.md).
#ifndef ATTF_GROUP_PREFETCH
#define ATTF_GROUP_PREFETCH 256
#endif
__device__ __noinline__ void attention_group_prefetch(const u16* kc, const u16* vc,
                                                         int n_kv_heads, int hd, int pos0,
                                                         int splits, int gran) {
#if ATTF_PREFETCH
    int n_ctx = pos0 + 1;
    int chunk = attf_chunk(n_ctx, splits, true, gran);
    int j0 = blockIdx.y * chunk;
    if (j0 >= n_ctx) return;
    int len = min(min(n_ctx - 1, j0 + chunk) - j0, ATTF_GROUP_PREFETCH);
    int kv_dim = n_kv_heads * hd, lines = (hd + 63) / 64;
    u64 off = (u64)j0 * kv_dim + blockIdx.x * hd;
    for (int i = threadIdx.x; i < len * lines; i += blockDim.x) {
        u64 at = off + (u64)(i / lines) * kv_dim + 64 * (i % lines);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(kc + at));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(vc + at));
    }
#endif
}

// RoPE's cosine and sine of pair threadIdx.x at position pos (rope.cu's table), for the
// threads below n_rot / 2; the others keep rc, rs.
__device__ __forceinline__ void rope_cs_at(const float* __restrict__ table, int pos, int n_rot,
                                           float& rc, float& rs) {
    if (threadIdx.x < n_rot / 2) {
        float2 cs = __ldg((const float2*)table + (u64)pos * (n_rot / 2) + threadIdx.x);
        rc = cs.x;
        rs = cs.y;
    }
}

// One decode token: q, k, v its projections (before RoPE), the cache rows of one layer, the
// RoPE table (rope.cu), the layer's sliding window (0: none; `ATTF_WINDOW`). head_dim a
// multiple of 8 (16-byte rows), at most 128; ATTF_THREADS threads. The position (set by the
// previous step's `advance`, finished before the kernel ahead began) and this thread's RoPE
// cos/sin at it are read before waiting on the kernel ahead.
#define ATTF_PROLOGUE                                                                        \
    int pos0 = __ldg(pos);                                                                   \
    float rc = 0.0f, rs = 0.0f;                                                              \
    rope_cs_at(table, pos0, n_rot, rc, rs);                                                  \
    ATTF_WINDOW
// A batch step's token blockIdx.z, one a sequence (`cached_at`, rope.cu): its position, its
// sequence's cache (kc, vc moved to it) and RoPE's values there; `t` the token.
#define ATTF_ROWS_PROLOGUE                                                                   \
    const int t = blockIdx.z;                                                                \
    u64 seq_off;                                                                             \
    int pos0 = cached_at(rows, seq_stride, t, seq_off);                                      \
    float rc = 0.0f, rs = 0.0f;                                                              \
    rope_cs_at(table, pos0, n_rot, rc, rs);                                                  \
    kc += seq_off;                                                                           \
    vc += seq_off;                                                                           \
    ATTF_WINDOW
// A sliding-window layer (`window` > 0): the cache seen from the window's first key
// (attention.cu `window_first`), so the blocks read, split and combine only the window's
// positions; pos0 becomes the step's place in it (its cache row is still written at its own
// position). RoPE's values were read at the step's real position before.
#define ATTF_WINDOW                                                                          \
    {                                                                                        \
        int first_ = window_first(pos0, window);                                             \
        kc += (u64)first_ * n_kv_heads * hd;                                                 \
        vc += (u64)first_ * n_kv_heads * hd;                                                 \
        pos0 -= first_;                                                                      \
    }

// A block per query head and chunk: grid (n_heads, splits); `part` holds
// n_heads x splits x (head_dim + 2) floats, `tickets` n_heads counters. Two kernels of the
// same parameters: `attention_split_window` for sliding-window layers; `attention_split`
// ignores `window`, as the window's pointer shift cost the one-head kernel 11 registers (64
// to 75, a block fewer per multiprocessor) or, kept at 64, spills (ptxas).
#define ATTF_SPLIT_PARAMS                                                                    \
    const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v,   \
        u16 *__restrict__ kc, u16 *__restrict__ vc, int n_heads, int n_kv_heads, int hd,     \
        const int *__restrict__ pos, const float *__restrict__ table, int n_rot, int neox,   \
        int window, int splits, float scale, int ordered_upto, float *__restrict__ part,     \
        int *__restrict__ tickets, float *__restrict__ out, int akind,                       \
        float *__restrict__ axf, i8 *__restrict__ aq, float *__restrict__ ad,                \
        float *__restrict__ ax, STAMP_PARAMS
template <bool WINDOWED>
__device__ __forceinline__ void attention_split_entry(ATTF_SPLIT_PARAMS) {
    if (!WINDOWED) window = 0;
    ATTF_PROLOGUE
    attention_split_prefetch(kc, vc, n_heads, n_kv_heads, hd, pos0, splits);
    STAMP_GUARD;
    __shared__ AttfShared sh;
    int upto = min(ordered_upto, ATTF_ORDERED_MAX);
#define ATTF_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, hd, pos0, rc, rs, n_rot, neox, splits, \
                  scale, upto, part, tickets, out, akind, axf, aq, ad, ax, sh
    if (hd == 64) attention_split_block<64>(ATTF_ARGS);
    else if (hd == 128) attention_split_block<128>(ATTF_ARGS);
    else attention_split_block<0>(ATTF_ARGS);
#undef ATTF_ARGS
}
#define ATTF_SPLIT_ARGS                                                                      \
    q, k, v, kc, vc, n_heads, n_kv_heads, hd, pos, table, n_rot, neox, window, splits, scale, \
        ordered_upto, part, tickets, out, akind, axf, aq, ad, ax, stamps
extern "C" __global__ void __launch_bounds__(ATTF_THREADS) attention_split(ATTF_SPLIT_PARAMS) {
    attention_split_entry<false>(ATTF_SPLIT_ARGS);
}
extern "C" __global__ void __launch_bounds__(ATTF_THREADS)
    attention_split_window(ATTF_SPLIT_PARAMS) {
    attention_split_entry<true>(ATTF_SPLIT_ARGS);
}

// The one-head kernel for heads of 256 (gemma3's), sliding windows included: the same block
// with the step's K and V rows in an `AttfSharedWide`. No CPU-order short contexts (their V
// rows would not fit the shared memory; the host passes ordered_upto 0) and no grouped
// kernel (their K rows live in registers, 128 values at most).
extern "C" __global__ void __launch_bounds__(ATTF_THREADS)
    attention_split_wide(ATTF_SPLIT_PARAMS) {
    ATTF_PROLOGUE
    attention_split_prefetch(kc, vc, n_heads, n_kv_heads, hd, pos0, splits);
    STAMP_GUARD;
    __shared__ AttfSharedWide sh;
    attention_split_block<256, AttfSharedWide>(q, k, v, kc, vc, n_heads, n_kv_heads, hd, pos0,
                                               rc, rs, n_rot, neox, splits, scale, 0, part,
                                               tickets, out, akind, axf, aq, ad, ax, sh);
}
#undef ATTF_SPLIT_ARGS

// A batch step's tokens, one a sequence, each at its own position over its own sequence's
// cache (`cached_at`, rope.cu): grid (n_heads, splits, tokens); token t's projections and
// output at row t of q/k/v/out, its `part` and `tickets` one token's worth (n_heads x splits x
// (head_dim + 2) floats, n_heads counters) after token t - 1's. The output is not quantized.
extern "C" __global__ void __launch_bounds__(ATTF_THREADS)
    attention_split_rows(const float* __restrict__ q, const float* __restrict__ k,
                         const float* __restrict__ v, u16* __restrict__ kc,
                         u16* __restrict__ vc, int n_heads, int n_kv_heads, int hd,
                         const int* __restrict__ rows, long long seq_stride,
                         const float* __restrict__ table, int n_rot, int neox, int window,
                         int splits, float scale, int ordered_upto, float* __restrict__ part,
                         int* __restrict__ tickets, float* __restrict__ out, STAMP_PARAMS) {
    ATTF_ROWS_PROLOGUE
    u64 q_dim = (u64)n_heads * hd, kv_dim = (u64)n_kv_heads * hd;
    q += t * q_dim;
    k += t * kv_dim;
    v += t * kv_dim;
    out += t * q_dim;
    part += (u64)t * n_heads * splits * (hd + 2);
    tickets += (u64)t * n_heads;
    attention_split_prefetch(kc, vc, n_heads, n_kv_heads, hd, pos0, splits);
    STAMP_GUARD;
    __shared__ AttfShared sh;
    int upto = min(ordered_upto, ATTF_ORDERED_MAX);
#define ATTF_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, hd, pos0, rc, rs, n_rot, neox, splits, \
                  scale, upto, part, tickets, out, -1, nullptr, nullptr, nullptr, nullptr, sh
    if (hd == 64) attention_split_block<64>(ATTF_ARGS);
    else if (hd == 128) attention_split_block<128>(ATTF_ARGS);
    else attention_split_block<0>(ATTF_ARGS);
#undef ATTF_ARGS
}

// The grouped kernels' parameters (this file's `attention_group` and attention_group_mma.cu's
// kernel), in the order the host pushes them (src/engine/cuda/attention.rs), and their opening:
// the position and RoPE values, the chunk's K and V rows into L2 (chunks of whole `gran`
// positions, `attf_chunk`), the wait on the kernel ahead.
// `qn`, `kn`, `qk_eps`: per-head Q/K norms before RoPE, which only the tensor-core kernel
// (attention_group_mma.cu) applies; the host passes null to this one.
#define ATTG_PARAMS                                                                          \
    const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v,   \
        u16 *__restrict__ kc, u16 *__restrict__ vc, int n_heads, int n_kv_heads, int hd,     \
        const int *__restrict__ pos, const float *__restrict__ table, int n_rot, int neox,   \
        int window, int splits, float scale, const float *__restrict__ qn,                  \
        const float *__restrict__ kn, float qk_eps, float *__restrict__ part,                \
        int *__restrict__ tickets,                                                           \
        float *__restrict__ out, int akind, float *__restrict__ axf, i8 *__restrict__ aq,    \
        float *__restrict__ ad, float *__restrict__ ax, STAMP_PARAMS
#define ATTG_OPEN(gran)                                                                      \
    ATTF_PROLOGUE                                                                            \
    attention_group_prefetch(kc, vc, n_kv_heads, hd, pos0, splits, gran);                    \
    STAMP_GUARD;

// A block per KV head and chunk, the head's 2 to ATTF_GROUP_MAX query heads together: grid
// (n_kv_heads, 2 x splits) (chunks of whole passes, `attf_chunk`); `part` holds
// n_heads x 2 splits x (head_dim + 4) floats, `tickets` n_kv_heads counters.
extern "C" __global__ void __launch_bounds__(ATTF_THREADS)
    attention_group(ATTG_PARAMS) {
    ATTG_OPEN(ATTF_MIN_CHUNK)
    __shared__ AttfShared sh;
#define ATTG_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, hd, pos0, rc, rs, n_rot, neox, \
                  blockIdx.x, blockIdx.y, splits, scale, part, tickets, out, akind, axf, aq, ad, \
                  ax, sh
    if (hd == 64) attention_group_block<64>(ATTG_ARGS);
    else if (hd == 128) attention_group_block<128>(ATTG_ARGS);
    else attention_group_block<0>(ATTG_ARGS);
#undef ATTG_ARGS
}
