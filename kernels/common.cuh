// Shared by every kernel file (prepended before compiling): fixed-width types without system
// headers (NVRTC has none), f16 conversion through PTX, warp/block reductions, and the two
// generic kernels every tensor type instantiates: a matrix-vector(-batch) product that
// dequantizes weights on the fly from their GGUF blocks, and an embedding-row gather.
//
// Weight blocks are read byte by byte: Q5_0, Q6_K and friends are not 4-byte aligned, and an
// unaligned 32-bit load faults.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// NVRTC has no <math.h>: infinity from its bits.
#define INFINITY __int_as_float(0x7f800000)

__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// The little-endian f16 at p[0..2].
__device__ __forceinline__ float f16_at(const u8* p) {
    return h2f((u16)p[0] | ((u16)p[1] << 8));
}

__device__ __forceinline__ u32 u32_at(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v, float* shared32) {
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    float t = lane < nw ? shared32[lane] : 0.0f;
    return warp_sum(t);
}

__device__ float block_max(float v, float* shared32) {
    v = warp_max(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    float t = lane < nw ? shared32[lane] : -INFINITY;
    return warp_max(t);
}

// Token rows each warp accumulates at once in the batched product.
#define MV_TILE 8
// Warps (rows) per block in the product.
#define MV_WARPS 4

// out[t][r] = W[r] . x[t] for t < n; W has `rows` rows of `row_bytes` bytes, `cols` weights
// each. One warp per row, MV_TILE tokens per grid row (gridDim.y).
// Types with a block minimum (Q4_1, Q5_1) set HAS_MIN: `get` then leaves the minimum out and
// each block adds `min * xs[block]` once, xs being the activation block's sum as llama.cpp's
// Q8_1 stores it (s = f16(d * sum q)), so the product matches its dot exactly in form.
template <typename D>
__device__ void matvec_impl(const u8* __restrict__ w, u64 row_bytes, int rows, int cols,
                            const float* __restrict__ x, const float* __restrict__ xs, int n,
                            float* __restrict__ out) {
    int r = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    int t0 = blockIdx.y * MV_TILE;
    if (r >= rows) return;
    const u8* row = w + (u64)r * row_bytes;
    float acc[MV_TILE];
#pragma unroll
    for (int t = 0; t < MV_TILE; t++) acc[t] = 0.0f;
    int nt = min(MV_TILE, n - t0);
    const float* xb = x + (u64)t0 * cols;
    for (int j = lane; j < cols; j += 32) {
        float v = D::get(row, j);
#pragma unroll
        for (int t = 0; t < MV_TILE; t++)
            if (t < nt) acc[t] += v * xb[(u64)t * cols + j];
        if (D::HAS_MIN && (j & 31) == 0) {
            float m = D::min(row, j);
            const float* sb = xs + (u64)t0 * (cols / 32) + (j >> 5);
#pragma unroll
            for (int t = 0; t < MV_TILE; t++)
                if (t < nt) acc[t] += m * sb[(u64)t * (cols / 32)];
        }
    }
#pragma unroll
    for (int t = 0; t < MV_TILE; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) out[(u64)(t0 + t) * rows + r] = s;
    }
}

// out[t][j] = W[tokens[t]][j]: the embedding rows of a batch of tokens.
// Gathers need the whole value, minimum included.
template <typename D>
__device__ __forceinline__ float full_value(const u8* row, int j) {
    float v = D::get(row, j);
    if (D::HAS_MIN) v += D::min(row, j);
    return v;
}

template <typename D>
__device__ void embed_impl(const u8* __restrict__ w, u64 row_bytes, int cols,
                           const u32* __restrict__ tokens, float* __restrict__ out) {
    int t = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    out[(u64)t * cols + j] = full_value<D>(w + (u64)tokens[t] * row_bytes, j);
}

// One tensor type's kernels: matvec_<name> and embed_<name>, from its dequantizer struct.
#define CBTOP_TYPE_KERNELS(name, D)                                                          \
    extern "C" __global__ void matvec_##name(const u8* w, u64 row_bytes, int rows, int cols, \
                                             const float* x, const float* xs, int n,         \
                                             float* out) {                                   \
        matvec_impl<D>(w, row_bytes, rows, cols, x, xs, n, out);                             \
    }                                                                                        \
    extern "C" __global__ void embed_##name(const u8* w, u64 row_bytes, int cols,            \
                                            const u32* tokens, float* out) {                 \
        embed_impl<D>(w, row_bytes, cols, tokens, out);                                      \
    }
