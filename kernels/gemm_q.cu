// Batched products on tensor cores that read the QUANTIZED weights (fast numerics; batches of
// 16 to 256 tokens: decode steps of 16+ sequences, short prompts): expanding a whole matrix to
// f16 for each product (gemm_f16.cu) writes and reads two bytes per weight a step, where these
// kernels read the quantized bytes once. Each warp owns 16 weight rows (one m16 tile) and BT
// tokens: for each k step of KS values it stages its rows' quantized bytes into shared memory
// (cp.async, one step ahead), dequantizes them there to an f16 tile (kernels/dequant32.cuh
// `Deq32h`: f16 pair arithmetic for Q4_K, Q6_K and Q8_0), and multiplies that tile with the
// f16 activations (`to_f16`) by mma.sync m16n8k16 (f16 in, f32 accumulate). Warps never wait for each other: a block is
// four independent warps, 64 weight rows. Uses gemm_f16.cu's cp.async / mma helpers.
//
// Layouts: A (activations) M x K f16 row-major; W N rows of row_bytes quantized bytes; the
// product C[m][n] = sum_k A[m][k] W[n][k] lands in C (M rows of stride ldc), with the weights
// as the mma's row-major A operand (rows = weight rows) and the activations as its column
// B operand (columns = tokens), so a decode step's few tokens fill n8 tiles, not m16 ones.

#define GQ_WARPS 4
#define GQ_ROWS 16

// 4 bytes global -> shared, asynchronously; `bytes` 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async4(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

// Eight f16 activations at p (16-byte aligned), through the read-only cache: the four warps
// of a block read the same activations.
__device__ __forceinline__ uint4 gq_act(const u16* p) { return __ldg((const uint4*)p); }

// Words of shared memory a row's k step is staged in: SB bytes from an even address (every
// block type is an even number of bytes), so from the word below it at most SB + 2 bytes;
// where a step is whole 16-byte pieces, rounded up to them, so 16-aligned rows stage in
// 16-byte copies (a quarter of the 4-byte ones).
template <int SB>
struct GqStage {
    static const int WORDS = SB % 16 == 0 ? ((SB + 2 + 15) / 16) * 4 : (SB + 2 + 3) / 4;
};

// A warp's sums into C (M token rows of stride ldc) with the epilogue, or with a split raw into
// part[z] (M x N): accumulator j holds weight rows r0 + g and r0 + g + 8, tokens t0 + 8j + 2t
// and + 1 of its 16 x 8 tile (gemm_qmma.cu's kernels store theirs here too).
template <int NJ>
__device__ __forceinline__ void gq_store(const float (&c)[NJ][4], int r0, int t0, int g, int t,
                                         int M, int N, const float* __restrict__ bias, int acc,
                                         float* __restrict__ C, int ldc,
                                         float* __restrict__ part, int splits, int z) {
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int n = r0 + g + 8 * h;
            if (n >= N) continue;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int m = t0 + j * 8 + 2 * t + e;
                if (m >= M) continue;
                float v = c[j][2 * h + e];
                if (splits > 1) {
                    part[((u64)z * M + m) * N + n] = v;
                    continue;
                }
                if (bias) v += bias[n];
                float* o = C + (u64)m * ldc + n;
                *o = acc ? *o + v : v;
            }
        }
}

// C[m][n] = (acc ? C[m][n] : 0) + sum_k A[m][k] W[n][k] + (bias ? bias[n] : 0) for m < M,
// n < N. D: the type's dequantizer; KS: values a k step takes (divides K: 256 for the
// k-quants, 64 for the 32-wide types); BV, BB: a quantized block's values and bytes; BT:
// tokens a block takes (16, 32 or 64). Grid (ceil(M / BT), ceil(N / 64), splits): with
// splits > 1 block z takes its share of the k steps and leaves raw partial sums in
// part[z] (M x N) for gemm_reduce. 128 threads; dynamic shared memory, per warp, two stages
// of 16 rows of WORDS words and a 16 x (KS + 32) f16 tile (src/engine/cuda/gemm_q.rs).
template <typename D, int KS, int BV, int BB, int BT>
__device__ __forceinline__ void gemm_q_impl(const u8* __restrict__ W, u64 row_bytes,
                                            const u16* __restrict__ A, int M, int N, int K,
                                            const float* __restrict__ bias, int acc,
                                            float* __restrict__ C, int ldc,
                                            float* __restrict__ part) {
    constexpr int SB = KS / BV * BB;  // bytes of a row's k step
    constexpr int RW = GqStage<SB>::WORDS;
    // f16 tile row in halves: rows 16 banks apart, so the 16-byte fragment loads of a
    // quarter warp (rows g, g + 1 at four k offsets) fall in distinct banks.
    constexpr int LD = KS + 32;
    constexpr int NJ = BT / 8;  // n8 tiles (tokens) of the warp
    constexpr int G = KS / 32;  // groups of 32 values a row's k step holds
    extern __shared__ __align__(16) u32 gq_smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    u32* raw = gq_smem + warp * (2 * GQ_ROWS * RW + GQ_ROWS * LD / 2);
    u16* wt = (u16*)(raw + 2 * GQ_ROWS * RW);
    int t0 = blockIdx.x * BT;
    int r0 = (blockIdx.y * GQ_WARPS + warp) * GQ_ROWS;
    if (r0 >= N) return;  // no block-wide barrier below
    int splits = gridDim.z, z = blockIdx.z;
    int steps_all = K / KS;
    int s0 = (int)((long long)steps_all * z / splits);
    int ns = (int)((long long)steps_all * (z + 1) / splits) - s0;

    // Rows past N repeat the last row (their sums are not written).
    auto row_start = [&](int r, int step) {
        return (u64)min(r0 + r, N - 1) * row_bytes + (u64)step * SB;
    };
    // The warp's 16 rows of k step `step` into stage `buf`, each from the 4-byte word holding
    // its first byte; words wholly past the step's bytes are zero-filled, not read.
    // Rows (and the steps within them) on 16-byte boundaries where the step is whole pieces.
    const bool whole16 = SB % 16 == 0 && ((u64)W & 15) == 0 && (row_bytes & 15) == 0;
    auto stage = [&](int buf, int step) {
        u32* dst = raw + buf * GQ_ROWS * RW;
        if (whole16) {
            constexpr int C = SB / 16;
            for (int i = lane; i < GQ_ROWS * C; i += 32) {
                int r = i / C, c = i - r * C;
                cp_async16(smem_u32(dst + r * RW + 4 * c), W + row_start(r, step) + 16 * c, 16);
            }
            return;
        }
        for (int i = lane; i < GQ_ROWS * RW; i += 32) {
            int r = i / RW, w = i - r * RW;
            u64 start = row_start(r, step);
            int need = (int)(start & 3) + SB;
            cp_async4(smem_u32(dst + i), W + (start & ~3ull) + 4 * w, 4 * w < need ? 4 : 0);
        }
    };
    // Stage `buf` (k step `step`) dequantized into the f16 tile, a group of 32 a lane.
    auto expand = [&](int buf, int step) {
        const u8* src = (const u8*)(raw + buf * GQ_ROWS * RW);
        // One group at a time: its 32 values are live only until stored.
#pragma unroll 1
        for (int q = 0; q < GQ_ROWS * G / 32; q++) {
            int i = lane + 32 * q;
            int r = i / G, j = (i - r * G) * 32;
            int off = (int)(row_start(r, step) & 3);
            u32 h[16];
            Deq32h<D>::run(src + r * RW * 4 + off, j, h);
            uint4* d = (uint4*)(wt + r * LD + j);
#pragma unroll
            for (int c = 0; c < 4; c++) d[c] = make_uint4(h[4 * c], h[4 * c + 1], h[4 * c + 2], h[4 * c + 3]);
        }
    };

    float c[NJ][4];
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) c[j][e] = 0.0f;

    int g = lane >> 2, t = lane & 3;
    if (ns > 0) stage(0, s0);
    cp_async_commit();
    for (int s = 0; s < ns; s++) {
        // The other stage was expanded in the previous step (the warp passed its barrier).
        if (s + 1 < ns) stage((s + 1) & 1, s0 + s + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncwarp();
        expand(s & 1, s0 + s);
        __syncwarp();
        int kb = (s0 + s) * KS;
        // Two k16 mmas per 32 values. The sum over k does not care which k each fragment
        // slot holds as long as A and B agree: lane t takes k 8t..8t+7 of the 32 (its slots
        // 2t, 2t+1, 2t+8, 2t+9 of the first mma hold 8t..8t+3, of the second 8t+4..8t+7), so
        // each operand comes in one 16-byte load instead of four 4-byte ones.
#pragma unroll 2
        for (int kk = 0; kk < KS; kk += 32) {
            uint4 lo = *(const uint4*)(wt + g * LD + kk + 8 * t);
            uint4 hi = *(const uint4*)(wt + (g + 8) * LD + kk + 8 * t);
            u32 a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                // Token g of the n8 tile (tokens past M repeat the last; their sums are not
                // written).
                int m = min(t0 + j * 8 + g, M - 1);
                uint4 b = gq_act(A + (u64)m * K + kb + kk + 8 * t);
                u32 b0[2] = {b.x, b.y}, b1[2] = {b.z, b.w};
                mma_16816(c[j], a0, b0);
                mma_16816(c[j], a1, b1);
            }
        }
        __syncwarp();
    }
    cp_async_wait<0>();

    gq_store<NJ>(c, r0, t0, g, t, M, N, bias, acc, C, ldc, part, splits, z);
}

// Launch bounds: 3 blocks of 128 threads a multiprocessor (the k-quants' shared memory allows
// 3 or 4; 168 registers a thread).
#define CBTOP_GEMM_Q(name, D, KS, BV, BB, BT)                                                \
    extern "C" __global__ void __launch_bounds__(GQ_WARPS * 32, 3) gemm_q_##name##_##BT(    \
        const u8* W, u64 row_bytes, const u16* A, int M, int N, int K, const float* bias,   \
        int acc, float* C, int ldc, float* part, STAMP_PARAMS) {                             \
        STAMP_GUARD;                                                                         \
        gemm_q_impl<D, KS, BV, BB, BT>(W, row_bytes, A, M, N, K, bias, acc, C, ldc, part);  \
    }

#define CBTOP_GEMM_Q_ALL(name, D, KS, BV, BB) \
    CBTOP_GEMM_Q(name, D, KS, BV, BB, 16)     \
    CBTOP_GEMM_Q(name, D, KS, BV, BB, 32)     \
    CBTOP_GEMM_Q(name, D, KS, BV, BB, 64)

CBTOP_GEMM_Q_ALL(q4_0, DeqQ4_0, 64, 32, 18)
CBTOP_GEMM_Q_ALL(q4_1, DeqQ4_1, 64, 32, 20)
CBTOP_GEMM_Q_ALL(q5_0, DeqQ5_0, 64, 32, 22)
CBTOP_GEMM_Q_ALL(q5_1, DeqQ5_1, 64, 32, 24)
CBTOP_GEMM_Q_ALL(q8_0, DeqQ8_0, 64, 32, 34)
CBTOP_GEMM_Q_ALL(q2_k, DeqQ2_K, 256, 256, 84)
CBTOP_GEMM_Q_ALL(q3_k, DeqQ3_K, 256, 256, 110)
CBTOP_GEMM_Q_ALL(q4_k, DeqQ4_K, 256, 256, 144)
CBTOP_GEMM_Q_ALL(q5_k, DeqQ5_K, 256, 256, 176)
CBTOP_GEMM_Q_ALL(q6_k, DeqQ6_K, 256, 256, 210)
