// Shared by every kernel file (prepended before compiling): fixed-width types without system
// headers (NVRTC has none), GGML's type ids, the per-launch timestamps, f16 conversion through
// PTX, warp reductions, the quantized matrix-vector(-batch) product in the CPU's float order,
// the float-weight product, and the embedding-row gather every tensor type instantiates.
//
// Compiled with --fmad=false: a multiply and an add are only fused where the CPU fuses them
// (explicit fmaf), so every f32 operation rounds where the CPU's does.
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

// GGML tensor type ids as GGUF stores them (src/quant/types.rs `GgmlType::id`): what the host
// passes where a kernel switches on a weight matrix's type.
#define GGML_TYPE_F32 0
#define GGML_TYPE_F16 1
#define GGML_TYPE_Q4_0 2
#define GGML_TYPE_Q4_1 3
#define GGML_TYPE_Q5_0 6
#define GGML_TYPE_Q5_1 7
#define GGML_TYPE_Q8_0 8
#define GGML_TYPE_Q2_K 10
#define GGML_TYPE_Q3_K 11
#define GGML_TYPE_Q4_K 12
#define GGML_TYPE_Q5_K 13
#define GGML_TYPE_Q6_K 14
#define GGML_TYPE_BF16 30

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

// The same from an address known to be 2-byte aligned (two 16-bit loads), or 4-byte aligned
// (one load). Block types whose size is even (odd) keep every field at the alignment its
// offset has within the block: GGUF tensors, and cbtop's uploads, start 32-byte aligned.
__device__ __forceinline__ u32 u32_at2(const u8* p) {
    const u16* h = (const u16*)p;
    return (u32)h[0] | ((u32)h[1] << 16);
}

__device__ __forceinline__ u32 u32_at4(const u8* p) { return *(const u32*)p; }

__device__ __forceinline__ float f16_at2(const u8* p) { return h2f(*(const u16*)p); }

// ---- Per-launch GPU timestamps (src/engine/cuda/clock.rs) --------------------------------
// Every kernel takes `STAMP_PARAMS` last and opens its body with `STAMP_GUARD;`, which first waits
// for the kernel before it (`pdl_wait`, below). With `stamps` null (timing off) the guard stamps
// nothing. Otherwise `stamps` is the launch's slot (the host passes its address, so a kernel does
// no address arithmetic before it stamps), two values: block 0's thread 0 folds the %globaltimer
// once that wait is over into the first with an atomic max (the hardware starts block 0 first), and
// thread 0 of every block folds the time it leaves into the second with an atomic max: the kernel's
// first start and last end on the GPU's own nanosecond clock, while the step replays as one CUDA
// graph. The end is thread 0's exit, not the block's last thread's: waiting for the whole block (a
// barrier and a shared counter in every block) made a decode step 4% slower than this. The buffer
// is never cleared: %globaltimer only grows, so an end left by an earlier step is always below this
// step's (and below its start, which is how a kernel that failed to stamp shows). The guard's
// destructor runs on every way out of the kernel, early returns included. The fast products
// (matvec_fast.cu) and the kernels that end in `act_quant_chunk` (RMSNorm, SwiGLU, act_quant)
// open with `STAMP_START` instead and call its `end()` from thread 0 right after its last store,
// which spares them the destructor's exit path (all of a block's threads reconverging before
// thread 0 stamps). All ends go to one word per kernel: spreading the atomics over several
// words, cheaper in bench/cuda/stamp_cost.cu, made the engine's stamped step slower.
// What each part of a stamp costs, and the variants measured and not kept:
// docs/measurements/kernels.md.
#define STAMP_PARAMS u64 *__restrict__ stamps
#define STAMP_GUARD KernelStamp stamp_guard_(stamps)
#define STAMP_START KernelStart stamp_start_(stamps)

__device__ __forceinline__ u64 globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Programmatic dependent launch (Hopper and later; src/engine/cuda/pdl_launch.rs): a kernel
// launched with it may start while the kernel before it in the stream is still running, and
// `pdl_wait` holds it until that kernel has finished and its writes are visible. Every kernel
// waits before it reads or writes anything (in `STAMP_GUARD`), then lets the next kernel of the
// stream be launched, so the next launch's setup and block scheduling overlap this kernel's
// run instead of idling the GPU between the two. Without the launch attribute, or before
// sm_90, both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Loads of weights a one-token product reads once a token: evict-first in L2 (sm_80 and
// later), so the weight stream does not push the KV cache rows, the attention's partial sums
// and the kernels' code out of L2 between layers. L1 caches them as `__ldg` does.
__device__ __forceinline__ u64 l2_evict_first() {
    u64 p = 0;
#if __CUDA_ARCH__ >= 800
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
    return p;
}
__device__ __forceinline__ u32 ldg_once(const u32* a) {
#if __CUDA_ARCH__ >= 800
    u32 v;
    asm("ld.global.nc.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(a), "l"(l2_evict_first()));
    return v;
#else
    return __ldg(a);
#endif
}
__device__ __forceinline__ uint4 ldg_once(const uint4* a) {
#if __CUDA_ARCH__ >= 800
    uint4 v;
    asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(a), "l"(l2_evict_first()));
    return v;
#else
    return __ldg(a);
#endif
}

// Bring `bytes` from `p` into L2 ahead of use: a kernel may do this for its constant inputs
// (weights) before `pdl_wait`, while the kernel before it still runs. Each of `n` cooperating
// threads (index `t`) takes every n-th 128-byte line.
__device__ __forceinline__ void prefetch_l2(const void* p, u64 bytes, int t, int n) {
    for (u64 o = (u64)t * 128; o < bytes; o += (u64)n * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char*)p + o));
}

// Whether this is block 0's thread 0, the thread that stamps a kernel's start. Every launch has
// one-dimensional blocks (src/engine/cuda/pdl_launch.rs asserts it in test builds), so thread 0 is
// the one with threadIdx.x 0, and the test starts from threadIdx.x and blockIdx.x, which the
// kernels read anyway. blockIdx.y/z are read in PTX: ptxas then reads them into uniform
// registers (S2UR, once per warp) in stamped and unstamped steps alike, where in plain C++ it
// read blockIdx.z with a vector S2R in every warp, a slower `--timing off`. What a stamped step
// loses is mostly latency the stamping threads add before their stores, not the atomics.
__device__ __forceinline__ bool block0_thread0() {
    if ((threadIdx.x | blockIdx.x) != 0) return false;
    u32 yz;
    asm volatile(
        "{\n\t.reg .u32 y, z;\n\tmov.u32 y, %%ctaid.y;\n\tmov.u32 z, %%ctaid.z;\n\t"
        "or.b32 %0, y, z;\n\t}"
        : "=r"(yz));
    return yz == 0;
}

// The start half of a kernel's stamp: waits for the kernel ahead (`pdl_wait`), lets the next
// one launch, and has block 0's thread 0 fold the start into its word. Kernels whose thread 0
// has one clear last store call `end()` there themselves (`STAMP_START` with `stamp_start_`);
// the others take `STAMP_GUARD`, which calls it in its destructor, on every way out of the
// kernel.
__device__ __forceinline__ void stamp_end(u64* stamps);

struct KernelStart {
    u64* stamps;
    __device__ __forceinline__ KernelStart(u64* s) : stamps(s) {
        // Which thread stamps is settled before the wait, not after it: after it, block 0's
        // first warp read its block indices and branched between the kernel's release and the
        // clock, on the step's critical path.
        bool lead = s && block0_thread0();
        pdl_wait();
        pdl_launch_dependents();
        if (lead) {
            // An atomic max, not a store: the slot only ever grows (the clock does), and the
            // stamped step was shorter with it than with a plain store.
            atomicMax(s, globaltimer());
        }
    }
    // The block's end (thread 0 calls it): its exit time folded into the slot's end.
    __device__ __forceinline__ void end() const {
        stamp_end(stamps);
    }
};

// Thread 0 of a block folds the time it is done into its kernel's end (`stamps[1]`); kernels
// reach it through `KernelStart::end`. The caller is thread 0.
__device__ __forceinline__ void stamp_end(u64* stamps) {
    if (stamps) atomicMax(stamps + 1, globaltimer());
}

// The whole stamp: the start, and the end at thread 0's exit (blocks are one-dimensional).
struct KernelStamp : KernelStart {
    __device__ __forceinline__ KernelStamp(u64* s) : KernelStart(s) {}
    __device__ __forceinline__ ~KernelStamp() {
        if (threadIdx.x == 0) end();
    }
};

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Integer sum over the 16 threads p < 16 of a warp (the others give 0); every thread gets it.
__device__ __forceinline__ int bsum_reduce(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The product's epilogue, as the CPU's separate steps would round it: plus a bias row
// (`bias`, may be null: qwen2's Q/K/V) and/or added into what `out` holds (`accumulate`: a
// residual add fused into the product that feeds it).
__device__ __forceinline__ void store_out(float v, const float* bias, int accumulate, int rows,
                                          int r, int t, float* out) {
    if (bias) v = __fadd_rn(v, bias[r]);
    u64 i = (u64)t * rows + r;
    out[i] = accumulate ? __fadd_rn(out[i], v) : v;
}

// Token rows each thread accumulates at once in the float-weight product.
#define MV_TILE 8

// Float weights (F32/F16/BF16): out[t][r] = W[r] . x[t] for t < n, x already rounded as the
// CPU rounds it for the type, in the CPU's order (src/quant/float.rs `dot_lanes`): lane
// l = i % 8 sums w[i] * x[i] in index order, unfused, and the lanes are added from 0.0 up.
// Eight threads per row (one per lane), 16 rows per block of 128, MV_TILE tokens per grid
// row (gridDim.y). `D::get` dequantizes weight j of a row.
template <typename D>
__device__ void matvec_impl(const u8* __restrict__ w, u64 row_bytes, int rows, int cols,
                            const float* __restrict__ x, int n, const float* bias,
                            int accumulate, float* out) {
    __shared__ float lanes[16][MV_TILE][8];
    int slot = threadIdx.x >> 3, l = threadIdx.x & 7;
    int r = blockIdx.x * 16 + slot;
    int t0 = blockIdx.y * MV_TILE;
    int nt = min(MV_TILE, n - t0);
    float acc[MV_TILE];
#pragma unroll
    for (int t = 0; t < MV_TILE; t++) acc[t] = 0.0f;
    if (r < rows) {
        const u8* row = w + (u64)r * row_bytes;
        const float* xb = x + (u64)t0 * cols;
        for (int i = l; i < cols; i += 8) {
            float v = D::get(row, i);
#pragma unroll
            for (int t = 0; t < MV_TILE; t++)
                if (t < nt) acc[t] = __fadd_rn(acc[t], __fmul_rn(v, xb[(u64)t * cols + i]));
        }
    }
#pragma unroll
    for (int t = 0; t < MV_TILE; t++) lanes[slot][t][l] = acc[t];
    __syncwarp();
    if (l < nt && r < rows) {
        float s = 0.0f;
        for (int k = 0; k < 8; k++) s = __fadd_rn(s, lanes[slot][l][k]);
        store_out(s, bias, accumulate, rows, r, t0 + l, out);
    }
}

// ---- Quantized weights against quantized activations, in the CPU's float order ----------
//
// The CPU engine reproduces llama.cpp's dot products to the bit (src/quant/simd_order.rs):
// per weight block an exact integer sum for each of eight lanes, then f32 arithmetic in a
// fixed order. The GPU does the integer part in parallel however it likes (integers are
// exact) and the f32 part in the same order, so its logits equal the CPU's.
//
// One thread block per weight row and up to T tokens. The row goes by in chunks of blocks:
// phase 1 spreads (block, lane) integer sums over all threads into shared memory; phase 2
// has one thread per (token, lane) fold its lane over the chunk's blocks in order, and one
// thread per token fold the per-block extra term (Q4_1/Q5_1's `m * s`, the k-quants' min
// part). At the end:
//   LEGACY (32-weight blocks, x86 AVX2 order): lane = fma(d_w * d_a, isum, lane) per block,
//     result = hsum_float_8(lanes) + extra;
//   K (256-weight blocks, ggml's generic order): lane = lane + (d_w * d_a) * isum per block,
//     result = extra + lane0 + lane1 + ... + lane7.
// Activations: int8 values `aq` (row-major, `cols` per token), scales `ad` (one per 32 or 256
// values), and `ax`: Q8_1's stored sums s per 32 values, or Q8_K's bsums per 16 values.

#define QMV_THREADS 128
#define QMV_CHUNK 64

template <int T>
struct QmvShared {
    int isum[T][QMV_CHUNK][8];
    float dd[T][QMV_CHUNK];
    float ex[T][QMV_CHUNK];
    float lanes[T][8];
    float extra[T];
};

// ggml's hsum_float_8: high half + low half, then pairs, then the last two.
__device__ __forceinline__ float hsum8(const float* x) {
    float r0 = x[4] + x[0], r1 = x[5] + x[1], r2 = x[6] + x[2], r3 = x[7] + x[3];
    return (r0 + r2) + (r1 + r3);
}

// Phase 2 and the end of a row: the fold described above. `nb` blocks in this chunk.
template <bool LEGACY, int T>
__device__ __forceinline__ void qmv_fold(QmvShared<T>& sh, int nb, int nt, float& acc) {
    int j = threadIdx.x;
    if (j < 8 * T) {
        int t = j >> 3, l = j & 7;
        if (t < nt)
#pragma unroll 8
            for (int b = 0; b < nb; b++) {
                float d = sh.dd[t][b], v = (float)sh.isum[t][b][l];
                acc = LEGACY ? fmaf(d, v, acc) : __fadd_rn(acc, __fmul_rn(d, v));
            }
    } else if (j < 9 * T) {
        int t = j - 8 * T;
        if (t < nt)
#pragma unroll 8
            for (int b = 0; b < nb; b++) acc = __fadd_rn(acc, sh.ex[t][b]);
    }
}

template <bool LEGACY, int T>
__device__ __forceinline__ void qmv_finish(QmvShared<T>& sh, int nt, float acc, int rows, int r,
                                           int t0, const float* bias, int accumulate,
                                           float* out) {
    int j = threadIdx.x;
    if (j < 8 * T) sh.lanes[j >> 3][j & 7] = acc;
    else if (j < 9 * T) sh.extra[j - 8 * T] = acc;
    __syncthreads();
    if (j < nt) {
        float v;
        if (LEGACY) {
            v = __fadd_rn(hsum8(sh.lanes[j]), sh.extra[j]);
        } else {
            v = sh.extra[j];
            for (int l = 0; l < 8; l++) v = __fadd_rn(v, sh.lanes[j][l]);
        }
        store_out(v, bias, accumulate, rows, r, t0 + j, out);
    }
}

// Legacy types (32 weights per block). Q provides BYTES, HAS_MIN, `pack(block, lane)` (the
// lane's four weights as signed bytes, offset removed), `d(block)` and `m(block)`.
template <typename Q, int T>
__device__ void qmv_legacy(const u8* __restrict__ w, u64 row_bytes, int rows, int cols,
                           const i8* __restrict__ aq, const float* __restrict__ ad,
                           const float* __restrict__ ax, int n, const float* bias,
                           int accumulate, float* out) {
    __shared__ QmvShared<T> sh;
    int r = blockIdx.x, t0 = blockIdx.y * T;
    int nt = min(T, n - t0);
    const u8* row = w + (u64)r * row_bytes;
    int nblocks = cols >> 5;
    float acc = 0.0f;
    for (int c0 = 0; c0 < nblocks; c0 += QMV_CHUNK) {
        int nb = min(QMV_CHUNK, nblocks - c0);
        for (int u = threadIdx.x; u < nb * 8; u += blockDim.x) {
            int bl = u >> 3, l = u & 7, bi = c0 + bl;
            const u8* blk = row + (u64)bi * Q::BYTES;
            int wp = Q::pack(blk, l);
            float dw = Q::d(blk), mw = Q::HAS_MIN ? Q::m(blk) : 0.0f;
#pragma unroll
            for (int t = 0; t < T; t++) {
                if (t >= nt) break;
                u64 tok = (u64)(t0 + t);
                int a = *(const int*)(aq + tok * cols + bi * 32 + 4 * l);
                sh.isum[t][bl][l] = __dp4a(wp, a, 0);
                if (l == 0) {
                    sh.dd[t][bl] = __fmul_rn(dw, ad[tok * (cols >> 5) + bi]);
                    sh.ex[t][bl] = Q::HAS_MIN ? __fmul_rn(mw, ax[tok * (cols >> 5) + bi]) : 0.0f;
                }
            }
        }
        __syncthreads();
        qmv_fold<true, T>(sh, nb, nt, acc);
        __syncthreads();
    }
    qmv_finish<true, T>(sh, nt, acc, rows, r, t0, bias, accumulate, out);
}

// K-quants (256 weights per block). A warp takes a block; thread p holds weights p + 32k
// (k < 8), all in lane p % 8. Q provides BYTES, FULL (Q2_K: no lanes, one sum per block),
// `elems(block, p, scale[8], level[8])`, `d(block)` and `extra(block, bsums, d_a, isum)`,
// the block's term added to the running extra, computed by the whole warp (thread `p`) and
// returned to thread 0.
template <typename Q, int T>
__device__ void qmv_k(const u8* __restrict__ w, u64 row_bytes, int rows, int cols,
                      const i8* __restrict__ aq, const float* __restrict__ ad,
                      const float* __restrict__ ax, int n, const float* bias, int accumulate,
                      float* out) {
    __shared__ QmvShared<T> sh;
    int r = blockIdx.x, t0 = blockIdx.y * T;
    int nt = min(T, n - t0);
    const u8* row = w + (u64)r * row_bytes;
    int nblocks = cols >> 8;
    int warp = threadIdx.x >> 5, p = threadIdx.x & 31, nw = blockDim.x >> 5;
    float acc = 0.0f;
    for (int c0 = 0; c0 < nblocks; c0 += QMV_CHUNK) {
        int nb = min(QMV_CHUNK, nblocks - c0);
        for (int bl = warp; bl < nb; bl += nw) {
            int bi = c0 + bl;
            const u8* blk = row + (u64)bi * Q::BYTES;
            int sc[8], lv[8];
            Q::elems(blk, p, sc, lv);
            float dw = Q::d(blk);
#pragma unroll
            for (int t = 0; t < T; t++) {
                if (t >= nt) break;
                u64 tok = (u64)(t0 + t);
                const i8* a = aq + tok * cols + bi * 256 + p;
                int s = 0;
#pragma unroll
                for (int k = 0; k < 8; k++) s += sc[k] * lv[k] * (int)a[32 * k];
                s += __shfl_xor_sync(0xffffffffu, s, 8);
                s += __shfl_xor_sync(0xffffffffu, s, 16);
                if (Q::FULL) {
                    s += __shfl_xor_sync(0xffffffffu, s, 4);
                    s += __shfl_xor_sync(0xffffffffu, s, 2);
                    s += __shfl_xor_sync(0xffffffffu, s, 1);
                }
                float da = ad[tok * (cols >> 8) + bi];
                // Every thread takes part in the extra term (a warp sum over the bsums);
                // thread 0 has the result.
                float ex = Q::extra(blk, ax + tok * (cols >> 4) + bi * 16, da, s, p);
                if (p < 8) sh.isum[t][bl][p] = Q::FULL ? 0 : s;
                if (p == 0) {
                    sh.dd[t][bl] = Q::FULL ? 0.0f : __fmul_rn(dw, da);
                    sh.ex[t][bl] = ex;
                }
            }
        }
        __syncthreads();
        qmv_fold<false, T>(sh, nb, nt, acc);
        __syncthreads();
    }
    qmv_finish<false, T>(sh, nt, acc, rows, r, t0, bias, accumulate, out);
}

// The exported product kernels of one quantized type: qmv1_<name> (one token, decode) and
// qmv8_<name> (up to 8 tokens per grid row, prompt batches).
#define CBTOP_QMV_KERNELS(name, impl, Q)                                                     \
    extern "C" __global__ void qmv1_##name(const u8* w, u64 rb, int rows, int cols,         \
                                           const i8* aq, const float* ad, const float* ax,   \
                                           int n, const float* bias, int acc, float* out,    \
                                           STAMP_PARAMS) {                                   \
        STAMP_GUARD;                                                                         \
        impl<Q, 1>(w, rb, rows, cols, aq, ad, ax, n, bias, acc, out);                        \
    }                                                                                        \
    extern "C" __global__ void qmv8_##name(const u8* w, u64 rb, int rows, int cols,         \
                                           const i8* aq, const float* ad, const float* ax,   \
                                           int n, const float* bias, int acc, float* out,    \
                                           STAMP_PARAMS) {                                   \
        STAMP_GUARD;                                                                         \
        impl<Q, 8>(w, rb, rows, cols, aq, ad, ax, n, bias, acc, out);                        \
    }

// out[t][j] = W[tokens[t]][j] * scale: the embedding rows of a batch of tokens, scaled as
// gemma3's embeddings are (sqrt(n_embd), a ggml_scale after the gather; 1 elsewhere, which
// leaves every value as it is).
// Gathers need the whole value, minimum included.
template <typename D>
__device__ __forceinline__ float full_value(const u8* row, int j) {
    float v = D::get(row, j);
    if (D::HAS_MIN) v += D::min(row, j);
    return v;
}

template <typename D>
__device__ void embed_impl(const u8* __restrict__ w, u64 row_bytes, int cols,
                           const u32* __restrict__ tokens, float scale,
                           float* __restrict__ out) {
    int t = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    out[(u64)t * cols + j] = __fmul_rn(full_value<D>(w + (u64)tokens[t] * row_bytes, j), scale);
}

// A float type's product kernel, matvec_<name>.
#define CBTOP_FLOAT_MATVEC(name, D)                                                          \
    extern "C" __global__ void matvec_##name(const u8* w, u64 row_bytes, int rows, int cols, \
                                             const float* x, int n, const float* bias,       \
                                             int acc, float* out, STAMP_PARAMS) {            \
        STAMP_GUARD;                                                                         \
        matvec_impl<D>(w, row_bytes, rows, cols, x, n, bias, acc, out);                      \
    }

// A type's embedding gather, embed_<name>, from its dequantizer struct.
#define CBTOP_EMBED(name, D)                                                                 \
    extern "C" __global__ void embed_##name(const u8* w, u64 row_bytes, int cols,            \
                                            const u32* tokens, float scale, float* out,      \
                                            STAMP_PARAMS) {                                  \
        STAMP_GUARD;                                                                         \
        embed_impl<D>(w, row_bytes, cols, tokens, scale, out);                               \
    }

// ---- The fast decode products' shared pieces (kernels/matvec_fast.cu for the quantized
// weights, kernels/matvec_fast_float.cu for the float ones).

// One matrix of a fast one-token product: its weights, row stride, bias (or null), output,
// rows, GGML type id and (in `mvf_multi`) its first block of the launch.
struct MvfMat {
    const u8* w;
    u64 row_bytes;
    const float* bias;
    float* out;
    int rows;
    int ty;
    int first_block;
    // Float matrices (kernels/matvec_fast_float.cu): rows per warp + 16 * warps per row (the
    // quantized kernels take 0x11: a warp per row).
    int shape;
};

// Rows of m one block of a fast product takes.
__device__ __forceinline__ int mvf_block_rows(const MvfMat& m) {
    return (int)(blockDim.x >> 5) * (m.shape & 15) / (m.shape >> 4);
}

// Which blocks prefetch their weight row before waiting on the previous kernel (`mvf_prefetch`):
// 2 (default): only the launch's first 2 * nsm blocks (`blockIdx.x`, launch-wide, not
// `mvf_multi`'s per-matrix index; nsm from `sm_count`), roughly the blocks that can start beside
// the previous kernel; 1: every block; 0: none. 2 measured best or level on the decode shapes: the
// later blocks' prefetches only add L2 traffic (docs/measurements/kernels.md). Other values are
// for A/B runs through CBTOP_KERNEL_DEFINES (src/engine/cuda/module.rs).
#ifndef CBTOP_PREFETCH
#define CBTOP_PREFETCH 2
#endif
#if CBTOP_PREFETCH != 0 && CBTOP_PREFETCH != 1 && CBTOP_PREFETCH != 2
#error "CBTOP_PREFETCH must be 0, 1 or 2"
#endif

// The number of SM identifiers (%nsmid). It bounds %smid, which need not be contiguous, so it
// can exceed the SMs actually present: good enough for a block threshold.
__device__ __forceinline__ u32 sm_count() {
    u32 n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return n;
}

// This block's weight rows into L2 before the kernel waits for its input (`prefetch_l2`): with
// programmatic dependent launch the blocks that fit beside the previous kernel fetch their
// weights while it finishes.
__device__ __forceinline__ void mvf_prefetch(const MvfMat& m, int block) {
#if CBTOP_PREFETCH != 0
#if CBTOP_PREFETCH == 2
    if (blockIdx.x >= 2 * sm_count()) return;
#endif
    const int n = mvf_block_rows(m), r = block * n;
    if (r < m.rows) {
        const u64 bytes = (u64)min(n, m.rows - r) * m.row_bytes;
        prefetch_l2(m.w + (u64)r * m.row_bytes, bytes, threadIdx.x, blockDim.x);
    }
#endif
}
