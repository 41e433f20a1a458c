// The `fast` numerics' one-token product on float weights (F32, F16, BF16) in any order: warps
// over rows (one or two rows per warp, or a row cut among several warps: `shape`), each lane
// 16-byte chunks strided by the warps of the row, fused multiply-adds, shuffle reductions. Rows must be a whole number of 16-byte chunks (the host checks). `mvf_multi`
// (kernels/matvec_fast.cu) runs the same row product for Q, K and V or gate and up in one launch.
//
// The input is read as 16-byte vectors beside each weight chunk, so a lane's chunk costs one
// weight load and one (F16/BF16: two) input loads, not one load per input value.

struct WideF32 {
    __device__ static float2 pair(u32 lo, u32 hi) {
        return make_float2(__int_as_float((int)lo), __int_as_float((int)hi));
    }
    static const bool PACKED = false;
};
struct WideF16 {
    __device__ static float2 pair(u32 w, u32) {
        return make_float2(h2f((u16)w), h2f((u16)(w >> 16)));
    }
    static const bool PACKED = true;
};
struct WideBF16 {
    __device__ static float2 pair(u32 w, u32) {
        return make_float2(__int_as_float((int)(w << 16)), __int_as_float((int)(w & 0xffff0000u)));
    }
    static const bool PACKED = true;
};

// Two weights (a pair of words for F32, one word for the 16-bit types) against two inputs.
template <typename W>
__device__ __forceinline__ float mvf_word(float acc, u32 a, u32 b, float x0, float x1) {
    const float2 w = W::pair(a, b);
    return fmaf(w.y, x1, fmaf(w.x, x0, acc));
}

// Chunks each lane has in flight (CBTOP_KERNEL_DEFINES for A/B runs).
#ifndef MVF_UNROLL
#define MVF_UNROLL 8
#endif

// The float matrices' launch shape, from MvfMat::shape: R rows per warp (a short row's loads
// of two rows in flight together, and its inputs read once for both) and S warps per row (a
// long row of a short matrix cut into S interleaved parts, so the launch has warps enough to
// keep the memory busy), R * S <= 4. Block `block` of m (four warps) takes rows
// 4R/S * block ...; warp w of it rows R * (4/S * block + w / S) ..., part w % S of each.
__device__ __forceinline__ int mvf_rows_per_warp(const MvfMat& m) { return m.shape & 15; }
__device__ __forceinline__ int mvf_split(const MvfMat& m) { return m.shape >> 4; }

// R rows from `r` (rows past m.rows read the last one; their sums are dropped) against x, over
// the chunks part * 32 + lane, stepping 32 * split: each row's warp sum, in every lane. x is
// 16-byte aligned.
template <typename W, int R>
__device__ __forceinline__ void mvf_float_rows(const MvfMat& m, int r, int part, int split,
                                               const float* __restrict__ x, float* acc) {
    const int lane = threadIdx.x & 31;
    const int chunks = (int)(m.row_bytes / 16);
    const u8* row[R];
#pragma unroll
    for (int i = 0; i < R; i++) {
        row[i] = m.w + (u64)min(r + i, m.rows - 1) * m.row_bytes;
        acc[i] = 0.0f;
    }
#pragma unroll MVF_UNROLL
    for (int c = part * 32 + lane; c < chunks; c += 32 * split) {
        uint4 v[R];
#pragma unroll
        for (int i = 0; i < R; i++) v[i] = ldg_once((const uint4*)(row[i] + 16 * (u64)c));
        if (W::PACKED) {
            const float4 a = __ldg((const float4*)(x + 8 * (u64)c));
            const float4 b = __ldg((const float4*)(x + 8 * (u64)c + 4));
#pragma unroll
            for (int i = 0; i < R; i++) {
                acc[i] = mvf_word<W>(acc[i], v[i].x, 0, a.x, a.y);
                acc[i] = mvf_word<W>(acc[i], v[i].y, 0, a.z, a.w);
                acc[i] = mvf_word<W>(acc[i], v[i].z, 0, b.x, b.y);
                acc[i] = mvf_word<W>(acc[i], v[i].w, 0, b.z, b.w);
            }
        } else {
            const float4 a = __ldg((const float4*)(x + 4 * (u64)c));
#pragma unroll
            for (int i = 0; i < R; i++) {
                acc[i] = mvf_word<W>(acc[i], v[i].x, v[i].y, a.x, a.y);
                acc[i] = mvf_word<W>(acc[i], v[i].z, v[i].w, a.z, a.w);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = warp_sum(acc[i]);
}

// Block `block` of float matrix m (`block` counts within m) at its shape: the rows' sums plus
// their bias go to m.out; the parts of a split row are added in part order (the same bits every
// run). Every thread of the block must call it (a split row's parts meet in shared memory).
template <typename W, int R>
__device__ __forceinline__ void mvf_float_block(const MvfMat& m, int block, const float* x,
                                                int accumulate, const KernelStart& st) {
    __shared__ float parts[4][R];
    const int split = mvf_split(m), w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int part = w % split, r = R * ((4 / split) * block + w / split);
    float bias[R];
#pragma unroll
    for (int i = 0; i < R; i++)
        bias[i] = m.bias && lane == 0 && part == 0 && r + i < m.rows ? __ldg(m.bias + r + i) : 0.0f;
    float acc[R];
    mvf_float_rows<W, R>(m, r, part, split, x, acc);
    if (split > 1) {
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < R; i++) parts[w][i] = acc[i];
        }
        __syncthreads();
        if (lane == 0 && part == 0) {
#pragma unroll
            for (int i = 0; i < R; i++) {
                acc[i] = parts[w][i];
                for (int p = 1; p < split; p++) acc[i] = __fadd_rn(acc[i], parts[w + p][i]);
            }
        }
    }
    if (lane == 0 && part == 0) {
#pragma unroll
        for (int i = 0; i < R; i++) {
            if (r + i < m.rows) {
                float v = m.bias ? __fadd_rn(acc[i], bias[i]) : acc[i];
                store_out(v, nullptr, accumulate, m.rows, r + i, 0, m.out);
            }
        }
    }
    if (threadIdx.x == 0) st.end();
}

// A float matrix's block at the matrix's rows per warp (1 or 2).
template <typename W>
__device__ __forceinline__ void mvf_float_one(const MvfMat& m, int block, const float* x,
                                              int accumulate, const KernelStart& st) {
    if (mvf_rows_per_warp(m) == 2) mvf_float_block<W, 2>(m, block, x, accumulate, st);
    else mvf_float_block<W, 1>(m, block, x, accumulate, st);
}

// mvf_<name>: one float matrix, with the exact kernels' arguments except `shape` (MvfMat's) in
// place of `cols` (`n` must be 1). Its rows are prefetched into L2 before the wait on the
// kernel ahead, as the quantized kernels' are.
#define CBTOP_FLOAT_MVF(name, W)                                                             \
    extern "C" __global__ void mvf_##name(const u8* w, u64 row_bytes, int rows, int shape,   \
                                          const float* x, int n, const float* bias, int acc, \
                                          float* out, STAMP_PARAMS) {                        \
        MvfMat m = {w, row_bytes, bias, out, rows, 0, 0, shape};                             \
        mvf_prefetch(m, blockIdx.x);                                                         \
        STAMP_START;                                                                         \
        mvf_float_one<W>(m, blockIdx.x, x, acc, stamp_start_);                               \
    }

CBTOP_FLOAT_MVF(f32, WideF32)
CBTOP_FLOAT_MVF(f16, WideF16)
CBTOP_FLOAT_MVF(bf16, WideBF16)
