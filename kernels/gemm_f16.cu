// Prompt products on tensor cores (fast numerics; the GPU prefill issue): a batch of tokens
// against a weight matrix as one matrix-matrix product instead of a row of dot products per
// token. The weights are expanded to f16 (`dequant_f16_<type>`, from the same per-type
// dequantizers as the embedding gather, 32 values at a time through kernels/dequant32.cuh),
// the activations rounded to f16 (`to_f16`), and `gemm_f16` multiplies them with mma.sync
// m16n8k16 (f16 inputs, f32 accumulation), its operand tiles streamed into shared memory by
// cp.async three stages ahead. f32 accumulation over f16-rounded operands reorders and rounds
// differently from the CPU: this is `fast` only.
//
// Layouts: A (activations) M x K and B (weights) N x K, both row-major with K contiguous, so
// C = A B^T is the "TN" product the mma's row.col operands take directly; C is M x N f32 with
// row stride ldc (a launch may cover a slice of a wider output's columns).

#define GM_K 64
#define GM_STAGES 3
// Shared-memory row in halves: 64 + 8 of padding, so the eight 16-byte rows an ldmatrix
// reads fall in distinct banks (144-byte stride).
#define GM_LD (GM_K + 8)
#define GM_THREADS 256

__device__ __forceinline__ u32 smem_u32(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, asynchronously; `bytes` 0 fills the 16 bytes with zeros.
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

// The same with an L2 cache policy (`l2_evict_first`, common.cuh): rows read once a step.
__device__ __forceinline__ void cp_async16_hint(u32 dst, const void* src, int bytes, u64 pol) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst),
                 "l"(src), "r"(bytes), "l"(pol));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// c += a b for one m16n8k16 tile (a: 4 registers of f16 pairs, b: 2, c: 4 f32).
__device__ __forceinline__ void mma_16816(float* c, const u32* a, const u32* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// C[m][n] = (acc ? C[m][n] : 0) + sum_k A[m][k] B[n][k] + (bias ? bias[n] : 0), for m < M,
// n < N, in BM x BN tiles of C per block. K is a multiple of GM_K and A, B rows start 16-byte
// aligned. Grid (ceil(M / BM), ceil(N / BN)): the blocks sharing a weight tile are neighbours
// in launch order, so the tile comes from DRAM once and from L2 for the other token tiles (with
// N fastest, each weight tile was read from DRAM once per token tile). 256 threads,
// GM_STAGES * (BM + BN) * GM_LD * 2
// bytes of dynamic shared memory. Eight warps, 2 along M by 4 along N, each computing
// (BM / 2) x (BN / 4) of the tile. The smaller tiles give a small product (few tokens, or few
// weight rows) enough blocks to fill the GPU.
template <int BM, int BN>
__device__ __forceinline__ void gemm_f16_impl(const u16* __restrict__ A, const u16* __restrict__ B,
                                              int M, int N, int K, const float* __restrict__ bias,
                                              int acc, float* __restrict__ C, int ldc,
                                              float* __restrict__ part) {
    constexpr int MI = BM / 32, NI = BN / 32;  // m16 and n8 tiles per warp
    extern __shared__ __align__(16) u16 gm_smem[];
    u16* sa = gm_smem;
    u16* sb = gm_smem + GM_STAGES * BM * GM_LD;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    int wm = (warp >> 2) * (BM / 2), wn = (warp & 3) * (BN / 4);
    // Split K (grid z > 1): block z takes its share of the k tiles and leaves a raw partial
    // sum in part[z] (M x N); gemm_reduce adds them in order with the epilogue.
    int splits = gridDim.z, z = blockIdx.z;
    int ktiles_all = K / GM_K;
    int kt0 = (int)((long long)ktiles_all * z / splits);
    int ktiles = (int)((long long)ktiles_all * (z + 1) / splits) - kt0;

    // Each stage: BM (BN) rows x 8 chunks of 16 bytes of A (B).
    auto load = [&](int stage, int kt) {
#pragma unroll
        for (int c = tid; c < (BM + BN) * 8; c += GM_THREADS) {
            int r = c >> 3, q = c & 7;
            int k = kt * GM_K + q * 8;
            if (r < BM) {
                int gm = m0 + r;
                cp_async16(smem_u32(sa + (stage * BM + r) * GM_LD + q * 8),
                           A + (u64)min(gm, M - 1) * K + k, gm < M ? 16 : 0);
            } else {
                r -= BM;
                int gn = n0 + r;
                cp_async16(smem_u32(sb + (stage * BN + r) * GM_LD + q * 8),
                           B + (u64)min(gn, N - 1) * K + k, gn < N ? 16 : 0);
            }
        }
    };

    float c[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < GM_STAGES - 1; s++) {
        if (s < ktiles) load(s, kt0 + s);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<GM_STAGES - 2>();
        __syncthreads();
        // The stage computed in the previous iteration is free again (everyone passed the
        // barrier): fetch the tile GM_STAGES - 1 ahead into it.
        int next = kt + GM_STAGES - 1;
        if (next < ktiles) load(next % GM_STAGES, kt0 + next);
        cp_async_commit();
        const u16* a = sa + (kt % GM_STAGES) * BM * GM_LD;
        const u16* b = sb + (kt % GM_STAGES) * BN * GM_LD;
#pragma unroll
        for (int kk = 0; kk < GM_K; kk += 16) {
            u32 af[MI][4], bf[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++) {
                // Matrices: rows 0-7 / 8-15 at k, then at k + 8 (lanes 8i..8i+7 address i).
                int row = wm + i * 16 + (lane & 15);
                ldmatrix_x4(af[i], smem_u32(a + row * GM_LD + kk + (lane >> 4) * 8));
            }
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                // Two n8 tiles: (j, k), (j, k + 8), (j + 1, k), (j + 1, k + 8).
                u32 r[4];
                int row = wn + (j + (lane >> 4)) * 8 + (lane & 7);
                ldmatrix_x4(r, smem_u32(b + row * GM_LD + kk + ((lane >> 3) & 1) * 8));
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++) mma_16816(c[i][j], af[i], bf[j]);
        }
    }
    cp_async_wait<0>();

    // Accumulator (i, j): rows g and g + 8, columns 2t and 2t + 1 of its 16 x 8 tile.
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int m = m0 + wm + i * 16 + g + h * 8;
                if (m >= M) continue;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int n = n0 + wn + j * 8 + 2 * t + e;
                    if (n >= N) continue;
                    float v = c[i][j][2 * h + e];
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

#define CBTOP_GEMM_F16(bm, bn)                                                               \
    extern "C" __global__ void __launch_bounds__(GM_THREADS, 2) gemm_f16_##bm##x##bn(        \
        const u16* A, const u16* B, int M, int N, int K, const float* bias, int acc,         \
        float* C, int ldc, float* part, STAMP_PARAMS) {                                      \
        STAMP_GUARD;                                                                         \
        gemm_f16_impl<bm, bn>(A, B, M, N, K, bias, acc, C, ldc, part);                       \
    }

CBTOP_GEMM_F16(128, 128)
CBTOP_GEMM_F16(64, 128)
CBTOP_GEMM_F16(64, 64)

// The split-K sum: C[m][n] = (acc ? C[m][n] : 0) + (part[0] + ... + part[splits - 1])[m][n]
// + bias[n], the partials added in order (the same result every run). One thread per value.
extern "C" __global__ void gemm_reduce(const float* __restrict__ part, int splits, int M, int N,
                                       const float* __restrict__ bias, int acc,
                                       float* __restrict__ C, int ldc, STAMP_PARAMS) {
    STAMP_GUARD;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (u64)M * N) return;
    int m = (int)(i / N), n = (int)(i % N);
    float v = part[i];
    for (int z = 1; z < splits; z++) v += part[(u64)z * M * N + i];
    if (bias) v += bias[n];
    float* o = C + (u64)m * ldc + n;
    *o = acc ? *o + v : v;
}

// out[i] = x[i] rounded to f16, for i < total.
extern "C" __global__ void to_f16(const float* __restrict__ x, int total, u16* __restrict__ out,
                                  STAMP_PARAMS) {
    STAMP_GUARD;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) out[i] = f2h(x[i]);
}

// Rows [r0, r0 + rows) of a weight matrix of `cols` values per row (row_bytes apart) into
// `out` as f16, row-major, rows x cols. Each thread writes one group of 32 values (64 bytes);
// cols is a multiple of 32 (every quantized block is 32 or 256 wide). The groups of all the
// rows are numbered in one sequence, 128 per block, so a narrow row (SmolLM2's 576 values are
// 18 groups) leaves no threads idle. Grid ceil(rows * cols / 32 / 128), 128 threads.
template <typename D>
__device__ void dequant_f16_impl(const u8* __restrict__ w, u64 row_bytes, int r0, int rows,
                                 int cols, u16* __restrict__ out) {
    int per_row = cols >> 5;
    u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (u64)rows * per_row) return;
    int r = (int)(g / per_row);
    int j = (int)(g - (u64)r * per_row) * 32;
    float v[32];
    Deq32<D>::run(w + (u64)(r0 + r) * row_bytes, j, v);
    uint4* dst = (uint4*)(out + (u64)r * cols + j);
#pragma unroll
    for (int c = 0; c < 4; c++) {
        u32 h[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            h[e] = (u32)f2h(v[8 * c + 2 * e]) | ((u32)f2h(v[8 * c + 2 * e + 1]) << 16);
        dst[c] = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

#define CBTOP_DEQUANT_F16(name, D)                                                           \
    extern "C" __global__ void dequant_f16_##name(const u8* w, u64 row_bytes, int r0,       \
                                                  int rows, int cols, u16* out,             \
                                                  STAMP_PARAMS) {                           \
        STAMP_GUARD;                                                                         \
        dequant_f16_impl<D>(w, row_bytes, r0, rows, cols, out);                              \
    }

CBTOP_DEQUANT_F16(f32, DeqF32)
CBTOP_DEQUANT_F16(f16, DeqF16)
CBTOP_DEQUANT_F16(bf16, DeqBF16)
CBTOP_DEQUANT_F16(q4_0, DeqQ4_0)
CBTOP_DEQUANT_F16(q4_1, DeqQ4_1)
CBTOP_DEQUANT_F16(q5_0, DeqQ5_0)
CBTOP_DEQUANT_F16(q5_1, DeqQ5_1)
CBTOP_DEQUANT_F16(q8_0, DeqQ8_0)
CBTOP_DEQUANT_F16(q2_k, DeqQ2_K)
CBTOP_DEQUANT_F16(q3_k, DeqQ3_K)
CBTOP_DEQUANT_F16(q4_k, DeqQ4_K)
CBTOP_DEQUANT_F16(q5_k, DeqQ5_K)
CBTOP_DEQUANT_F16(q6_k, DeqQ6_K)
