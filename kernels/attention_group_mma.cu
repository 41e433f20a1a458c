// The `fast` numerics' decode attention for long contexts on tensor cores: the grouped path of
// attention_fast.cu (a block per KV head and chunk of positions, the head's G query heads
// together) with its scores and weighted sums as mma.sync m16n8k16 products. The G queries
// are the rows of a 16-row A operand (rows past G are zero), rounded to f16 and scaled by
// scale * log2(e); the chunk is walked in tiles of 64 positions brought into shared memory by
// cp.async, each of the four warps taking 16 positions of a tile: S = Q K^T, an online softmax
// in f32 registers (base-2 exponent), O += P V with P rounded to f16, as the prompt kernel
// (attention_prefill.cu). The warps' maxima, sums and O are merged in shared memory, and the
// chunk's partial sums go to `part` for `attg_combine` (attention_fast.cu), which the last
// block of the group runs. RoPE and the step's K and V rows into the cache happen here, as in
// the other decode kernels.
//
// Uses cp_async16 / ldmatrix_x4 / mma_16816 (gemm_f16.cu), ldmatrix_x4_trans / pack_f16x2
// (attention_prefill.cu), attf_chunk / attg_combine / attention_group_prefetch
// (attention_fast.cu), all concatenated before this file.

#define AGM_TILE 64
#define AGM_THREADS 128

// Dynamic shared memory: the K and V tiles (2 x 64 rows of HD + 8 halves), then G x
// max(HD, ATTF_GROUP_SPLITS) floats: the G queries, later the combine's weights; the warps'
// merge reuses the tiles.
template <int HD>
__device__ void attention_group_mma_impl(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    u16* __restrict__ kc, u16* __restrict__ vc, int n_heads, int n_kv_heads, int pos0, float rc,
    float rs, int n_rot, int neox, int splits, float scale, float* __restrict__ part,
    int* __restrict__ tickets, float* __restrict__ out, int akind, float* __restrict__ axf,
    i8* __restrict__ aq, float* __restrict__ ad, float* __restrict__ ax) {
    constexpr int LD = HD + 8;
    extern __shared__ __align__(16) u16 agm_smem[];
    u16* sk = agm_smem;
    u16* sv = agm_smem + AGM_TILE * LD;
    float* qs = (float*)(agm_smem + 2 * AGM_TILE * LD);  // [G][HD]
    __shared__ float2 cs[64];
    __shared__ float cur[2][HD];
    __shared__ int last;
    const int G = n_heads / n_kv_heads;
    const int g = blockIdx.x, sp = blockIdx.y, h0 = g * G;
    const int n_ctx = pos0 + 1;
    const int chunk = attf_chunk(n_ctx, splits, true);
    const int active = (n_ctx + chunk - 1) / chunk;
    if (sp >= active) return;
    const int j0 = sp * chunk, len = min(n_ctx, j0 + chunk) - j0;
    const bool mine_pos = j0 + len == n_ctx;
    const int kv_dim = n_kv_heads * HD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
    const int pairs = n_rot / 2;

    // The queries and (in the chunk holding this step's position) the step's K and V, RoPE
    // on them, and the step's rows into the cache before any tile is read.
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) qs[i] = q[(u64)h0 * HD + i];
    if (threadIdx.x < pairs) cs[threadIdx.x] = make_float2(rc, rs);
    if (mine_pos)
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            cur[0][d] = k[(u64)g * HD + d];
            cur[1][d] = v[(u64)g * HD + d];
        }
    __syncthreads();
    for (int i = threadIdx.x; i < (G + 1) * pairs; i += blockDim.x) {
        int hh = i / pairs, p = i - hh * pairs;
        float2 c = cs[p];
        if (hh < G) rope_pair(qs + hh * HD, p, n_rot, c.x, c.y, neox);
        else if (mine_pos) rope_pair(cur[0], p, n_rot, c.x, c.y, neox);
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

    const u16* kb = kc + g * HD;
    const u16* vb = vc + g * HD;
    for (int t0 = 0; t0 < len; t0 += AGM_TILE) {
        __syncthreads();  // the previous tile is consumed (and the step's rows are written)
        for (int c = threadIdx.x; c < AGM_TILE * (HD / 8); c += blockDim.x) {
            int r = c / (HD / 8), c8 = c % (HD / 8);
            int j = t0 + r;
            bool ok = j < len;
            u64 off = (u64)(j0 + (ok ? j : 0)) * kv_dim + c8 * 8;
            cp_async16(smem_u32(sk + r * LD + c8 * 8), kb + off, ok ? 16 : 0);
            cp_async16(smem_u32(sv + r * LD + c8 * 8), vb + off, ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        // The tile holding the step's own position (the chunk's last) takes its rows from
        // `cur`, not from the cache this block has just written.
        if (mine_pos && t0 + AGM_TILE >= len) {
            int r = len - 1 - t0;
            for (int d = threadIdx.x; d < HD; d += blockDim.x) {
                sk[r * LD + d] = f2h(cur[0][d]);
                sv[r * LD + d] = f2h(cur[1][d]);
            }
            __syncthreads();
        }
        const int pb = warp * 16;  // this warp's 16 positions of the tile
        if (t0 + pb >= len) continue;

        float s[2][4];
#pragma unroll
        for (int jt = 0; jt < 2; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[jt][e] = 0.0f;
#pragma unroll
        for (int c = 0; c < HD / 16; c++) {
            u32 b[4];
            int row = pb + (lane >> 4) * 8 + (lane & 7);
            ldmatrix_x4(b, smem_u32(sk + row * LD + c * 16 + ((lane >> 3) & 1) * 8));
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
            ldmatrix_x4_trans(b, smem_u32(sv + row * LD + (d + (lane >> 4)) * 8));
            mma_16816(o[d], pa, b);
            mma_16816(o[d + 1], pa, b + 2);
        }
    }
    cp_async_wait<0>();
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);

    // Merge the four warps (each saw its own positions): maxima and sums per head first, then
    // every warp's O scaled to the common maximum, summed in shared memory (the tiles).
    __syncthreads();
    float* wm = (float*)agm_smem;         // [4][16] maxima
    float* wl = wm + 4 * 16;              // [4][16] sums
    float* wo = wl + 4 * 16;              // [16][HD] the merged O (rows < G)
    if (t4 == 0) {
        wm[warp * 16 + gr] = m0;
        wl[warp * 16 + gr] = l0;
    }
    for (int i = threadIdx.x; i < 16 * HD; i += blockDim.x) wo[i] = 0.0f;
    __syncthreads();
    float mall = -1e30f;
#pragma unroll
    for (int w = 0; w < 4; w++) mall = fmaxf(mall, wm[w * 16 + gr]);
    float f = exp2f(m0 - mall);
    for (int w = 0; w < 4; w++) {
        if (w == warp && gr < G)
#pragma unroll
            for (int d = 0; d < HD / 8; d++) {
                float* dst = wo + gr * HD + d * 8 + 2 * t4;
                dst[0] += o[d][0] * f;
                dst[1] += o[d][1] * f;
            }
        __syncthreads();
    }
    // Row hh's total weight and the chunk's results (natural-log maximum for attg_combine).
    const int stride = HD + 4;
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
        int hh = i / HD, d = i - hh * HD;
        float mx = -1e30f, tot = 0.0f;
#pragma unroll
        for (int w = 0; w < 4; w++) mx = fmaxf(mx, wm[w * 16 + hh]);
#pragma unroll
        for (int w = 0; w < 4; w++) tot += wl[w * 16 + hh] * exp2f(wm[w * 16 + hh] - mx);
        float* mine = part + ((u64)(h0 + hh) * 2 * splits + sp) * stride;
        if (active == 1) {
            out[(u64)(h0 + hh) * HD + d] = wo[hh * HD + d] / tot;
        } else {
            mine[d] = wo[hh * HD + d];
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
    attg_combine(part, tickets, out, g, G, HD, splits, active, qs, last, akind, axf, aq, ad, ax);
}

// One decode token, as `attention_group` (attention_fast.cu) takes it: grid (n_kv_heads,
// 2 x splits), AGM_THREADS threads, `agm_shared_bytes` of dynamic shared memory (host:
// `buffers::group_mma_shared_bytes`); head_dim 64 or 128 (the host checks), 2 to
// ATTF_GROUP_MAX query heads per KV head.
extern "C" __global__ void __launch_bounds__(AGM_THREADS)
    attention_group_mma(const float* __restrict__ q, const float* __restrict__ k,
                        const float* __restrict__ v, u16* __restrict__ kc, u16* __restrict__ vc,
                        int n_heads, int n_kv_heads, int hd, const int* __restrict__ pos,
                        const float* __restrict__ table, int n_rot, int neox, int splits,
                        float scale, float* __restrict__ part, int* __restrict__ tickets,
                        float* __restrict__ out, int akind, float* __restrict__ axf,
                        i8* __restrict__ aq, float* __restrict__ ad, float* __restrict__ ax,
                        STAMP_PARAMS) {
    ATTF_PROLOGUE
    attention_group_prefetch(kc, vc, n_kv_heads, hd, pos0, splits);
    STAMP_GUARD;
#define AGM_ARGS q, k, v, kc, vc, n_heads, n_kv_heads, pos0, rc, rs, n_rot, neox, splits, scale, \
                 part, tickets, out, akind, axf, aq, ad, ax
    if (hd == 128) attention_group_mma_impl<128>(AGM_ARGS);
    else attention_group_mma_impl<64>(AGM_ARGS);
#undef AGM_ARGS
}
