// The `fast` numerics' decode attention for long contexts on tensor cores: the grouped path of
// attention_fast.cu (a block per KV head and chunk of positions, the head's G query heads
// together) with its scores and weighted sums as mma.sync m16n8k16 products. The G queries
// are the rows of a 16-row A operand (rows past G are zero), rounded to f16 and scaled by
// scale * log2(e); the chunk is walked in tiles of 16 positions a warp brought into shared
// memory by cp.async, AGM_BUFS buffers deep (the first tiles load while the queries are fetched
// and rotated), each of the W warps (AGM_WARPS; AGM_WIDE_WARPS for heads of 256) taking 16
// positions of a tile: S = Q K^T, an online softmax
// in f32 registers (base-2 exponent), O += P V with P rounded to f16, as the prompt kernel
// (attention_prefill.cu). The warps' maxima, sums and O are merged in shared memory, and the
// chunk's partial sums go to `part` for `attg_combine` (attention_fast.cu), which the last
// block of the group runs. RoPE and the step's K and V rows into the cache happen here, as in
// the other decode kernels.
//
// Uses cp_async16_hint / ldmatrix_x4 / mma_16816 (gemm_f16.cu), ldmatrix_x4_trans / pack_f16x2
// (attention_prefill.cu), attf_chunk / attg_combine / ATTG_PARAMS / ATTG_OPEN
// (attention_fast.cu), all concatenated before this file.

// Warps per block (CBTOP_KERNEL_DEFINES for A/B runs; the host reads the count off the launch
// bounds). Each warp takes 16 positions of a tile.
#ifndef AGM_WARPS
#define AGM_WARPS 8
#endif
#define AGM_THREADS (32 * AGM_WARPS)
// Heads of 256 (gemma3): warps per block of `attention_group_mma_wide`, whose tiles of
// 16 x AGM_WIDE_WARPS positions keep AGM_BUFS buffers of such rows within shared memory.
#ifndef AGM_WIDE_WARPS
#define AGM_WIDE_WARPS 4
#endif
#define AGM_WIDE_THREADS (32 * AGM_WIDE_WARPS)
// Tiles in flight: a chunk of a wave at 4k positions is two whole tiles and a sliver, which
// then loads with the first two instead of after the first is consumed. The host sizes the
// shared memory for this many (launch_params::GROUP_MMA_BUFS).
#ifndef AGM_BUFS
#define AGM_BUFS 3
#endif
#if AGM_BUFS < 2 || AGM_BUFS > 3
#error "AGM_BUFS: 2 or 3 tiles in flight (the waits below)"
#endif
// Chunks are whole warps' worth of positions: a part-full last tile costs its idle warps,
// not a second wave of blocks.
#define AGM_GRAN 16

// Dynamic shared memory: AGM_BUFS buffers of K and V tiles (AGM_BUFS x 2 x AGM_TILE rows of
// HD + 8 halves), then G x HD floats, the G queries; the warps' merge reuses the tiles.

// The largest of the W warps' maxima of row r ([W][16]).
template <int W>
__device__ __forceinline__ float mall_of(const float* wm, int r) {
    float m = -1e30f;
#pragma unroll
    for (int w = 0; w < W; w++) m = fmaxf(m, wm[w * 16 + r]);
    return m;
}

template <int HD, int W>
__device__ void attention_group_mma_impl(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    u16* __restrict__ kc, u16* __restrict__ vc, int n_heads, int n_kv_heads, int pos0, float rc,
    float rs, int n_rot, int neox, int splits, float scale, const float* __restrict__ qn,
    const float* __restrict__ kn, float qk_eps, float* __restrict__ part,
    int* __restrict__ tickets, float* __restrict__ out, int akind, float* __restrict__ axf,
    i8* __restrict__ aq, float* __restrict__ ad, float* __restrict__ ax) {
    constexpr int LD = HD + 8;
    constexpr int AGM_TILE = 16 * W;
    extern __shared__ __align__(16) u16 agm_smem[];
    u16* sk = agm_smem;                                          // [AGM_BUFS][AGM_TILE][LD]
    u16* sv = agm_smem + AGM_BUFS * AGM_TILE * LD;               // [AGM_BUFS][AGM_TILE][LD]
    float* qs = (float*)(agm_smem + 2 * AGM_BUFS * AGM_TILE * LD);  // [G][HD]
    __shared__ float cur[2][HD];
    __shared__ int last;
    const int G = n_heads / n_kv_heads;
    const int g = blockIdx.x, sp = blockIdx.y, h0 = g * G;
    const int n_ctx = pos0 + 1;
    const int chunk = attf_chunk(n_ctx, splits, true, AGM_GRAN);
    const int active = (n_ctx + chunk - 1) / chunk;
    if (sp >= active) return;
    const int j0 = sp * chunk, len = min(n_ctx, j0 + chunk) - j0;
    const bool mine_pos = j0 + len == n_ctx;
    const int kv_dim = n_kv_heads * HD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
    const int pairs = n_rot / 2;
    const u16* kb = kc + g * HD;
    const u16* vb = vc + g * HD;

    // Tile t of the chunk into buffer t % AGM_BUFS (one cp.async group). The rows come from
    // earlier steps (this step's own row is taken from `cur` below), so the first tiles load
    // while the queries are fetched and rotated. A step reads each row once: evict-first in L2.
    const u64 once = l2_evict_first();
    const int ntiles = (len + AGM_TILE - 1) / AGM_TILE;
    auto issue = [&](int t) {
        u16* dk = sk + (t % AGM_BUFS) * AGM_TILE * LD;
        u16* dv = sv + (t % AGM_BUFS) * AGM_TILE * LD;
        for (int c = threadIdx.x; c < AGM_TILE * (HD / 8); c += blockDim.x) {
            int r = c / (HD / 8), c8 = c % (HD / 8);
            int j = t * AGM_TILE + r;
            bool ok = j < len;
            u64 off = (u64)(j0 + (ok ? j : 0)) * kv_dim + c8 * 8;
            cp_async16_hint(smem_u32(dk + r * LD + c8 * 8), kb + off, ok ? 16 : 0, once);
            cp_async16_hint(smem_u32(dv + r * LD + c8 * 8), vb + off, ok ? 16 : 0, once);
        }
        cp_async_commit();
    };
    for (int t = 0; t < min(ntiles, AGM_BUFS); t++) issue(t);

    // The queries and (in the chunk holding this step's position) the step's K and V, RoPE
    // on them, and the step's rows into the cache before any tile is read.
    for (int i = threadIdx.x; i < G * HD / 4; i += blockDim.x)
        ((float4*)qs)[i] = __ldg((const float4*)(q + (u64)h0 * HD) + i);
    if (mine_pos)
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            cur[0][d] = k[(u64)g * HD + d];
            cur[1][d] = v[(u64)g * HD + d];
        }
    __syncthreads();
    // qwen3's and gemma3's per-head Q/K norms (`qn` set), kernels/qk_norm.cu's with the sum of
    // squares in f32 (fast numerics): warp w norms query head w, warp G the step's K row (in
    // the chunk that holds it).
    if (qn) {
        for (int hh = warp; hh <= G; hh += W) {
            if (hh == G && !mine_pos) continue;
            float* row = hh < G ? qs + hh * HD : cur[0];
            const float* w = hh < G ? qn : kn;
            float ss = 0.0f;
            for (int d = lane; d < HD; d += 32) ss += row[d] * row[d];
            for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
            const float mean = ss / (float)HD;
            const float sc = __fdiv_rn(1.0f, sqrtf(__fadd_rn(mean, qk_eps)));
            for (int d = lane; d < HD; d += 32) row[d] = __fmul_rn(__fmul_rn(row[d], sc), __ldg(w + d));
        }
        __syncthreads();
    }
    // Thread p < pairs holds pair p's cosine and sine (ATTF_PROLOGUE): it turns that pair of
    // every head.
    if (threadIdx.x < pairs) {
        for (int hh = 0; hh < G; hh++) rope_pair(qs + hh * HD, threadIdx.x, n_rot, rc, rs, neox);
        if (mine_pos) rope_pair(cur[0], threadIdx.x, n_rot, rc, rs, neox);
    }
    __syncthreads();
    if (mine_pos)
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            kc[(u64)pos0 * kv_dim + g * HD + d] = f2h(cur[0][d]);
            vc[(u64)pos0 * kv_dim + g * HD + d] = f2h(cur[1][d]);
        }

    // Q as A fragments: row gr is query head gr (gr < G), row gr + 8 is past every group.
    const float qscale = scale * 1.4426950408889634f;
    u32 qf[HD / 16][4];
#pragma unroll
    for (int c = 0; c < HD / 16; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int col = c * 16 + (e >> 1) * 8 + 2 * t4;
            bool ok = !(e & 1) && gr < G;
            float x0 = ok ? qs[gr * HD + col] * qscale : 0.0f;
            float x1 = ok ? qs[gr * HD + col + 1] * qscale : 0.0f;
            qf[c][e] = pack_f16x2(x0, x1);
        }

    float o[HD / 8][4];
#pragma unroll
    for (int d = 0; d < HD / 8; d++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[d][e] = 0.0f;
    float m0 = -1e30f, l0 = 0.0f;  // row gr's running maximum and this thread's share of its sum

    for (int t = 0; t < ntiles; t++) {
        const int t0 = t * AGM_TILE;
        const u16* tk = sk + (t % AGM_BUFS) * AGM_TILE * LD;
        const u16* tv = sv + (t % AGM_BUFS) * AGM_TILE * LD;
        // Tile t's group done; the later ones issued may still be on their way.
        const int pending = min(ntiles - 1 - t, AGM_BUFS - 1);
        if (pending >= 2) cp_async_wait<2>();
        else if (pending == 1) cp_async_wait<1>();
        else cp_async_wait<0>();
        __syncthreads();
        // The tile holding the step's own position (the chunk's last) takes its row from
        // `cur`, not from the cache this block writes.
        if (mine_pos && t0 + AGM_TILE >= len) {
            int r = len - 1 - t0;
            for (int d = threadIdx.x; d < HD; d += blockDim.x) {
                ((u16*)tk)[r * LD + d] = f2h(cur[0][d]);
                ((u16*)tv)[r * LD + d] = f2h(cur[1][d]);
            }
            __syncthreads();
        }
        const int pb = warp * 16;  // this warp's 16 positions of the tile
        if (t0 + pb < len) {
            float s[2][4];
#pragma unroll
            for (int jt = 0; jt < 2; jt++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[jt][e] = 0.0f;
#pragma unroll
            for (int c = 0; c < HD / 16; c++) {
                u32 b[4];
                int row = pb + (lane >> 4) * 8 + (lane & 7);
                ldmatrix_x4(b, smem_u32(tk + row * LD + c * 16 + ((lane >> 3) & 1) * 8));
                mma_16816(s[0], qf[c], b);
                mma_16816(s[1], qf[c], b + 2);
            }
            // Positions past the chunk are masked; rows past G are never read.
            float mx = m0;
#pragma unroll
            for (int jt = 0; jt < 2; jt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int j = t0 + pb + jt * 8 + 2 * t4 + e;
                    if (j >= len) s[jt][e] = -INFINITY;
                    mx = fmaxf(mx, s[jt][e]);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float a0 = exp2f(m0 - mx);
            m0 = mx;
            float sum = 0.0f;
#pragma unroll
            for (int jt = 0; jt < 2; jt++) {
                s[jt][0] = exp2f(s[jt][0] - m0);
                s[jt][1] = exp2f(s[jt][1] - m0);
                s[jt][2] = 0.0f;
                s[jt][3] = 0.0f;
                sum += s[jt][0] + s[jt][1];
            }
            l0 = l0 * a0 + sum;
#pragma unroll
            for (int d = 0; d < HD / 8; d++) {
                o[d][0] *= a0;
                o[d][1] *= a0;
            }
            u32 pa[4] = {pack_f16x2(s[0][0], s[0][1]), pack_f16x2(s[0][2], s[0][3]),
                         pack_f16x2(s[1][0], s[1][1]), pack_f16x2(s[1][2], s[1][3])};
#pragma unroll
            for (int d = 0; d < HD / 8; d += 2) {
                u32 b[4];
                int row = pb + (lane & 7) + ((lane >> 3) & 1) * 8;
                ldmatrix_x4_trans(b, smem_u32(tv + row * LD + (d + (lane >> 4)) * 8));
                mma_16816(o[d], pa, b);
                mma_16816(o[d + 1], pa, b + 2);
            }
        }
        __syncthreads();  // buffer t % AGM_BUFS is consumed: tile t + AGM_BUFS may go there
        if (t + AGM_BUFS < ntiles) issue(t + AGM_BUFS);
    }
    cp_async_wait<0>();
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);

    // Merge the warps (each saw its own positions): maxima and sums per head first, then
    // every warp's O scaled to the common maximum into its own slab of shared memory (the
    // tiles' space), added across the slabs below.
    __syncthreads();
    float* wm = (float*)agm_smem;          // [W][16] maxima
    float* wl = wm + W * 16;       // [W][16] sums
    float* ht = wl + W * 16;       // [16][2] each head's maximum and total weight
    float* wo = ht + 32;                   // [W][G][HD] each warp's O (rows < G)
    if (t4 == 0) {
        wm[warp * 16 + gr] = m0;
        wl[warp * 16 + gr] = l0;
    }
    __syncthreads();
    const float mall = mall_of<W>(wm, gr);
    // Each head's maximum and total weight, for the results below.
    if (threadIdx.x < G) {
        const float mh = mall_of<W>(wm, threadIdx.x);
        float tot = 0.0f;
#pragma unroll
        for (int w = 0; w < W; w++)
            tot += wl[w * 16 + threadIdx.x] * exp2f(wm[w * 16 + threadIdx.x] - mh);
        ht[2 * threadIdx.x] = mh;
        ht[2 * threadIdx.x + 1] = tot;
    }
    const float f = exp2f(m0 - mall);
    if (gr < G)
#pragma unroll
        for (int d = 0; d < HD / 8; d++) {
            float* dst = wo + (warp * G + gr) * HD + d * 8 + 2 * t4;
            dst[0] = o[d][0] * f;
            dst[1] = o[d][1] * f;
        }
    __syncthreads();
    // Row hh's total weight and the chunk's results (natural-log maximum for attg_combine).
    const int stride = HD + 4;
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
        int hh = i / HD, d = i - hh * HD;
        const float mx = ht[2 * hh], tot = ht[2 * hh + 1];
        float* mine = part + ((u64)(h0 + hh) * 2 * splits + sp) * stride;
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < W; w++) sum += wo[(w * G + hh) * HD + d];
        if (active == 1) {
            out[(u64)(h0 + hh) * HD + d] = sum / tot;
        } else {
            mine[d] = sum;
            if (d == 0) {
                mine[HD] = mx * 0.6931471805599453f;
                mine[HD + 1] = tot;
            }
        }
    }
    if (active == 1) {
        attf_quant_range(out, (u64)h0 * HD, G * HD, akind, axf, aq, ad, ax);
        return;
    }
    attg_combine(part, tickets, out, g, G, HD, splits, active, last, akind, axf, aq, ad, ax);
}

// One decode token, as `attention_group` (attention_fast.cu) takes it (and, with `qn` and `kn`
// set, the per-head Q/K norms before RoPE): grid (n_kv_heads, 2 x splits), AGM_THREADS threads, dynamic shared memory as the host's
// `launch_params::group_mma_shared_bytes` sizes it; head_dim 64 or 128 (the host checks), 2 to
// ATTF_GROUP_MAX query heads per KV head.
extern "C" __global__ void __launch_bounds__(AGM_THREADS) attention_group_mma(ATTG_PARAMS) {
    ATTG_OPEN(AGM_GRAN)
#define AGM_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, pos0, rc, rs, n_rot, neox, splits, scale, \
                 qn, kn, qk_eps, part, tickets, out, akind, axf, aq, ad, ax
    if (hd == 128) attention_group_mma_impl<128, AGM_WARPS>(AGM_ARGS);
    else attention_group_mma_impl<64, AGM_WARPS>(AGM_ARGS);
}

// The same for heads of 256: AGM_WIDE_THREADS threads, shared memory as
// `launch_params::group_mma_shared_bytes` sizes it for them.
extern "C" __global__ void __launch_bounds__(AGM_WIDE_THREADS)
    attention_group_mma_wide(ATTG_PARAMS) {
    ATTG_OPEN(AGM_GRAN)
    attention_group_mma_impl<256, AGM_WIDE_WARPS>(AGM_ARGS);
#undef AGM_ARGS
}

// A batch step's tokens, one a sequence, each at its own position over its own sequence's
// cache (`ATTF_ROWS_PROLOGUE`), as `attention_split_rows` takes them (attention_fast.cu):
// grid (n_kv_heads, 2 x splits, tokens), AGM_ROWS_WARPS warps (a batch has blocks enough
// without the single token's wide ones, and half the shared memory lets two share a
// multiprocessor). Token t's projections and output at row t of q/k/v/out; its `part` n_heads x
// 2 splits x (head_dim + 4) floats and `tickets` n_kv_heads counters after token t - 1's. No
// Q/K norms (a batch step runs them before) and the output is not quantized.
#ifndef AGM_ROWS_WARPS
#define AGM_ROWS_WARPS 4
#endif
#define AGM_ROWS_PARAMS                                                                      \
    const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ v,   \
        u16 *__restrict__ kc, u16 *__restrict__ vc, int n_heads, int n_kv_heads, int hd,     \
        const int *__restrict__ rows, long long seq_stride, const float *__restrict__ table, \
        int n_rot, int neox, int window, int splits, float scale, float *__restrict__ part,  \
        int *__restrict__ tickets, float *__restrict__ out, STAMP_PARAMS
#define AGM_ROWS_OPEN                                                                        \
    ATTF_ROWS_PROLOGUE                                                                       \
    const u64 q_dim = (u64)n_heads * hd, kv_dim = (u64)n_kv_heads * hd;                      \
    q += t * q_dim;                                                                          \
    k += t * kv_dim;                                                                         \
    v += t * kv_dim;                                                                         \
    out += t * q_dim;                                                                        \
    part += (u64)t * n_heads * 2 * splits * (hd + 4);                                        \
    tickets += (u64)t * n_kv_heads;                                                          \
    attention_group_prefetch(kc, vc, n_kv_heads, hd, pos0, splits, AGM_GRAN);                \
    STAMP_GUARD;
#define AGM_ROWS_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, pos0, rc, rs, n_rot, neox, splits, \
                      scale, nullptr, nullptr, 0.0f, part, tickets, out, -1, nullptr, nullptr,  \
                      nullptr, nullptr

extern "C" __global__ void __launch_bounds__(AGM_ROWS_WARPS * 32)
    attention_group_mma_rows(AGM_ROWS_PARAMS) {
    AGM_ROWS_OPEN
    if (hd == 128) attention_group_mma_impl<128, AGM_ROWS_WARPS>(AGM_ROWS_ARGS);
    else attention_group_mma_impl<64, AGM_ROWS_WARPS>(AGM_ROWS_ARGS);
}

// The same for heads of 256, AGM_WIDE_WARPS warps as the one-token wide kernel.
extern "C" __global__ void __launch_bounds__(AGM_WIDE_THREADS)
    attention_group_mma_wide_rows(AGM_ROWS_PARAMS) {
    AGM_ROWS_OPEN
    attention_group_mma_impl<256, AGM_WIDE_WARPS>(AGM_ROWS_ARGS);
}
#undef AGM_ROWS_ARGS
#undef AGM_ROWS_OPEN
#undef AGM_ROWS_PARAMS
