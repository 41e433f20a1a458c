// Prompt attention on tensor cores (fast numerics; the GPU prefill issue): causal, grouped-query
// flash attention over the f16 KV cache, for a batch of queries whose K and V rows rope_store
// has already written. One block of four warps takes 64 consecutive queries of one head; each
// warp holds 16 queries' rows as mma fragments and walks the cache in tiles of 64 positions
// (K and V tiles brought into shared memory with cp.async): S = Q K^T on mma.sync m16n8k16,
// an online softmax in f32 registers (base-2 exponent, the scale folded into Q), then
// O += P V with P rounded to f16. Positions past a query's own are masked; tiles past the
// block's last query are not read. On a sliding-window layer (`window` > 0) a query at p sees
// the keys from p - window + 1 (attention.cu `window_first`): keys before are masked, and
// tiles before the block's first query's window are not read. The exact path (attention.cu)
// keeps the CPU's order.
//
// A head of 256 would hold 64 registers of Q fragments and 128 of O a thread and spill, so
// its output columns are split over blocks (grid z, DV columns each): every block computes
// the same scores from all HD dimensions, hence the same softmax statistics, and accumulates
// only its own DV columns of P V, reading only those of the V tile.
//
// Uses cp_async16 / ldmatrix_x4 / mma_16816 from gemm_f16.cu (concatenated before this file).

__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Two f32 as an f16 pair: `lo` in the low half (the lower column of an mma fragment).
__device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

#define AP_BQ 64
#define AP_BK 64

// q: [n][n_heads * HD] (rotated), out the same; kc/vc: [position][n_kv_heads * HD] f16, rows
// 0 .. pos0 + n written. Grid (ceil(n / 64), n_heads, HD / DV), 128 threads,
// 64 * (HD + 8 + DV + 8) * 2 bytes of dynamic shared memory.
template <int HD, int DV>
__device__ void attention_prefill_impl(const float* __restrict__ q, const u16* __restrict__ kc,
                                       const u16* __restrict__ vc, int n, int n_heads,
                                       int n_kv_heads, const int* __restrict__ pos, float scale,
                                       int window, float* __restrict__ out) {
    static_assert(HD % 16 == 0 && DV % 16 == 0 && HD % DV == 0, "whole mma tiles");
    // Padded rows: conflict-free ldmatrix (a row stride of 16 or 80 bytes mod 128 puts each of
    // 8 rows in its own 16 bytes of the banks).
    constexpr int LD = HD + 8, LDV = DV + 8;
    extern __shared__ __align__(16) u16 ap_smem[];
    u16* sk = ap_smem;
    u16* sv = ap_smem + AP_BK * LD;
    int h = blockIdx.y, qt0 = blockIdx.x * AP_BQ;
    int dv0 = blockIdx.z * DV;  // this block's first output column within the head
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    int kvh = h / (n_heads / n_kv_heads);
    int kv_dim = n_kv_heads * HD, q_dim = n_heads * HD;
    int pos0 = pos[0];
    int r0 = qt0 + warp * 16 + g, r1 = r0 + 8;  // this thread's two query rows (tokens)
    int p0 = pos0 + r0, p1 = pos0 + r1;         // and their positions

    // Q as A fragments, scaled by scale * log2(e) so the softmax can use exp2.
    const float qs = scale * 1.4426950408889634f;
    u32 qf[HD / 16][4];
#pragma unroll
    for (int c = 0; c < HD / 16; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = (e & 1) ? r1 : r0;
            int col = c * 16 + (e >> 1) * 8 + 2 * t4;
            float x0 = 0.0f, x1 = 0.0f;
            if (row < n) {
                const float* src = q + (u64)row * q_dim + h * HD + col;
                x0 = src[0];
                x1 = src[1];
            }
            qf[c][e] = pack_f16x2(x0 * qs, x1 * qs);
        }

    float o[DV / 8][4];
#pragma unroll
    for (int d = 0; d < DV / 8; d++)
#pragma unroll
        for (int e = 0; e < 4; e++) o[d][e] = 0.0f;
    float m0 = -1e30f, m1 = -1e30f, l0 = 0.0f, l1 = 0.0f;

    int kv_end = pos0 + min(n, qt0 + AP_BQ);  // one past the block's last query position
    // The tile holding the block's first query's first visible key.
    int kv_begin = window > 0 ? max(0, pos0 + qt0 - window + 1) / AP_BK * AP_BK : 0;
    for (int j0 = kv_begin; j0 < kv_end; j0 += AP_BK) {
        __syncthreads();  // the previous tile is consumed
        for (int c = threadIdx.x; c < AP_BK * (HD / 8); c += blockDim.x) {
            int r = c / (HD / 8), c8 = c % (HD / 8);
            int j = j0 + r;
            bool ok = j < kv_end;
            u64 off = (u64)(ok ? j : 0) * kv_dim + kvh * HD + c8 * 8;
            cp_async16(smem_u32(sk + r * LD + c8 * 8), kc + off, ok ? 16 : 0);
            if (c8 < DV / 8)
                cp_async16(smem_u32(sv + r * LDV + c8 * 8), vc + off + dv0, ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        // A warp whose queries all precede this tile has nothing to add from it.
        if (j0 > pos0 + qt0 + warp * 16 + 15) continue;
        // Nor one whose queries' windows all start after it.
        if (window > 0 && j0 + AP_BK - 1 <= pos0 + qt0 + warp * 16 - window) continue;

        float s[AP_BK / 8][4];
#pragma unroll
        for (int jt = 0; jt < AP_BK / 8; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[jt][e] = 0.0f;
#pragma unroll
        for (int c = 0; c < HD / 16; c++)
#pragma unroll
            for (int jt = 0; jt < AP_BK / 8; jt += 2) {
                u32 b[4];
                int row = (jt + (lane >> 4)) * 8 + (lane & 7);
                ldmatrix_x4(b, smem_u32(sk + row * LD + c * 16 + ((lane >> 3) & 1) * 8));
                mma_16816(s[jt], qf[c], b);
                mma_16816(s[jt + 1], qf[c], b + 2);
            }

        // Mask, then the online softmax for rows r0 (elements 0, 1) and r1 (2, 3).
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int jt = 0; jt < AP_BK / 8; jt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int j = j0 + jt * 8 + 2 * t4 + (e & 1);
                int p = (e >> 1) ? p1 : p0;
                if (j > p || (window > 0 && j <= p - window)) s[jt][e] = -INFINITY;
                if (e >> 1)
                    mx1 = fmaxf(mx1, s[jt][e]);
                else
                    mx0 = fmaxf(mx0, s[jt][e]);
            }
        // The four threads of a quad hold one row's 64 columns between them.
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        float a0 = exp2f(m0 - mx0), a1 = exp2f(m1 - mx1);
        m0 = mx0;
        m1 = mx1;
        float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
        for (int jt = 0; jt < AP_BK / 8; jt++) {
            s[jt][0] = exp2f(s[jt][0] - m0);
            s[jt][1] = exp2f(s[jt][1] - m0);
            s[jt][2] = exp2f(s[jt][2] - m1);
            s[jt][3] = exp2f(s[jt][3] - m1);
            sum0 += s[jt][0] + s[jt][1];
            sum1 += s[jt][2] + s[jt][3];
        }
        // Each thread keeps its own columns' share of the normaliser; the quad adds them at
        // the end.
        l0 = l0 * a0 + sum0;
        l1 = l1 * a1 + sum1;
#pragma unroll
        for (int d = 0; d < DV / 8; d++) {
            o[d][0] *= a0;
            o[d][1] *= a0;
            o[d][2] *= a1;
            o[d][3] *= a1;
        }
        // O += P V: P's accumulators are already laid out as A fragments, 16 keys at a time.
#pragma unroll
        for (int kc = 0; kc < AP_BK / 16; kc++) {
            u32 pa[4] = {pack_f16x2(s[2 * kc][0], s[2 * kc][1]),
                         pack_f16x2(s[2 * kc][2], s[2 * kc][3]),
                         pack_f16x2(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                         pack_f16x2(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
            for (int d = 0; d < DV / 8; d += 2) {
                u32 b[4];
                int row = kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                ldmatrix_x4_trans(b, smem_u32(sv + row * LDV + (d + (lane >> 4)) * 8));
                mma_16816(o[d], pa, b);
                mma_16816(o[d + 1], pa, b + 2);
            }
        }
    }
    cp_async_wait<0>();

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int d = 0; d < DV / 8; d++) {
        int col = h * HD + dv0 + d * 8 + 2 * t4;
        if (r0 < n) {
            float* dst = out + (u64)r0 * q_dim + col;
            dst[0] = o[d][0] * inv0;
            dst[1] = o[d][1] * inv0;
        }
        if (r1 < n) {
            float* dst = out + (u64)r1 * q_dim + col;
            dst[0] = o[d][2] * inv1;
            dst[1] = o[d][3] * inv1;
        }
    }
}

// `dv`: output columns a block (the Rust side's `prefill_columns`).
#define CBTOP_ATTENTION_PREFILL(hd, dv)                                                      \
    extern "C" __global__ void __launch_bounds__(128) attention_prefill_##hd(               \
        const float* q, const u16* kc, const u16* vc, int n, int n_heads, int n_kv_heads,    \
        const int* pos, float scale, int window, float* out, STAMP_PARAMS) {                 \
        STAMP_GUARD;                                                                         \
        attention_prefill_impl<hd, dv>(q, kc, vc, n, n_heads, n_kv_heads, pos, scale,       \
                                       window, out);                                         \
    }

CBTOP_ATTENTION_PREFILL(64, 64)
CBTOP_ATTENTION_PREFILL(96, 96)
CBTOP_ATTENTION_PREFILL(128, 128)
CBTOP_ATTENTION_PREFILL(256, 128)
