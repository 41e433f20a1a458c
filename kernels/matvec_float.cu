// Plain float weights: F32, F16 and BF16 rows: the product in the CPU's order (matvec_impl in
// common.cuh for any batch, mvo_float below for one token at the memory's pace) and the
// embedding gather. The fast numerics' one-token product is kernels/matvec_fast_float.cu.

struct DeqF32 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        return __int_as_float((int)u32_at(row + 4 * j));
    }
};

struct DeqF16 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) { return f16_at(row + 2 * j); }
};

struct DeqBF16 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* p = row + 2 * j;
        return __int_as_float((int)(((u32)p[0] << 16) | ((u32)p[1] << 24)));
    }
};

// One token's float product in the CPU's order (the lanes of matvec_impl: lane l = i % 8 adds
// w[i] * x[i] unfused in index order, the lanes folded from 0.0 up), shaped for bandwidth: a
// row goes to eight threads, which load it in 128-byte tiles of 16 bytes each (the next
// MVO_F_UNROLL tiles in flight while these are summed), and a shared-memory pass gives lane l
// its own weights of each tile. Four rows per one-warp block. Rows must be a whole number of
// 16-byte chunks (the host checks). MVO_F_UNROLL may be set through CBTOP_KERNEL_DEFINES.
#ifndef MVO_F_UNROLL
#define MVO_F_UNROLL 8
#endif

template <typename D, int EB>
__device__ __forceinline__ void mvo_float_impl(const u8* __restrict__ w, u64 row_bytes, int rows,
                                               int cols, const float* __restrict__ x,
                                               const float* bias, int accumulate, float* out) {
    constexpr int TE = 128 / EB;  // weights per tile
    __shared__ uint4 tiles[4][MVO_F_UNROLL][8];
    const int g = threadIdx.x >> 3, l = threadIdx.x & 7;
    const int r = blockIdx.x * 4 + g;
    // Every thread runs every tile (the warp syncs inside); a row past the end reads the last.
    const u8* row = w + (u64)min(r, rows - 1) * row_bytes;
    const int chunks = (int)(row_bytes / 16), ntiles = (cols + TE - 1) / TE;
    // The next tiles' loads are issued before this set's arithmetic, so they overlap it.
    auto load = [&](uint4* v, int t0) {
#pragma unroll
        for (int u = 0; u < MVO_F_UNROLL; u++) {
            const int c = (t0 + u) * 8 + l;
            v[u] = c < chunks ? __ldg((const uint4*)(row + 16 * (u64)c)) : make_uint4(0, 0, 0, 0);
        }
    };
    uint4 cur[MVO_F_UNROLL], next[MVO_F_UNROLL];
    load(cur, 0);
    float acc = 0.0f;
    for (int t0 = 0; t0 < ntiles; t0 += MVO_F_UNROLL) {
        load(next, t0 + MVO_F_UNROLL);
        __syncwarp();
#pragma unroll
        for (int u = 0; u < MVO_F_UNROLL; u++) tiles[g][u][l] = cur[u];
        __syncwarp();
#pragma unroll
        for (int u = 0; u < MVO_F_UNROLL; u++) {
            const u8* tile = (const u8*)tiles[g][u];
            const int base = (t0 + u) * TE;
#pragma unroll
            for (int s = 0; s < TE / 8; s++) {
                const int j = s * 8 + l, i = base + j;
                if (i < cols) acc = __fadd_rn(acc, __fmul_rn(D::get(tile, j), x[i]));
            }
        }
#pragma unroll
        for (int u = 0; u < MVO_F_UNROLL; u++) cur[u] = next[u];
    }
    float lane[8];
#pragma unroll
    for (int k = 0; k < 8; k++) lane[k] = __shfl_sync(0xffffffffu, acc, (g << 3) | k);
    if (l == 0 && r < rows) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; k++) s = __fadd_rn(s, lane[k]);
        store_out(s, bias, accumulate, rows, r, 0, out);
    }
}

#define CBTOP_FLOAT_MVO(name, D, EB)                                                         \
    extern "C" __global__ void mvo_##name(const u8* w, u64 row_bytes, int rows, int cols,    \
                                          const float* x, int n, const float* bias, int acc, \
                                          float* out, STAMP_PARAMS) {                        \
        STAMP_GUARD;                                                                         \
        mvo_float_impl<D, EB>(w, row_bytes, rows, cols, x, bias, acc, out);                  \
    }

CBTOP_FLOAT_MVO(f32, DeqF32, 4)
CBTOP_FLOAT_MVO(f16, DeqF16, 2)
CBTOP_FLOAT_MVO(bf16, DeqBF16, 2)
CBTOP_FLOAT_MATVEC(f32, DeqF32)
CBTOP_FLOAT_MATVEC(f16, DeqF16)
CBTOP_FLOAT_MATVEC(bf16, DeqBF16)
CBTOP_EMBED(f32, DeqF32)
CBTOP_EMBED(f16, DeqF16)
CBTOP_EMBED(bf16, DeqBF16)
