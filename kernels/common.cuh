// Shared by every kernel file (prepended before compiling): fixed-width types without system
// headers (NVRTC has none), f16 conversion through PTX, warp reductions, the quantized
// matrix-vector(-batch) product in the CPU's float order, the float-weight product, and the
// embedding-row gather every tensor type instantiates.
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
// open with `STAMP_START` instead and call
// `stamp_end` from thread 0 right after its last store: the destructor's exit path (all of a
// block's threads reconverging before thread 0 stamps) cost a 0.5b decode step ~13 us of its
// ~764 in the products (H100, `--timing events`, 1309-1310 -> 1329-1333 tok/s) and ~3.5 us in
// the others (1333.4-1333.9 -> 1339.0-1340.4).
//
// What the end stamps cost, measured with the variants below (H100, synthetic q4_k_m 0.5b,
// pipelined decode, us per stamped token): all of them ~42 (default 762 vs END_NONE 720); about
// half is the exit code's presence (END_NEVER 756-758 of 776-784 against END_NONE 733-738, one
// run each) and half the write; an atomic of a constant costs as much as one of the clock
// (END_CONST); by kernel family (stamps skipped for that family only): the fast products 26,
// RMSNorm 5, attention 5, SwiGLU 2.5, the rest ~3.
// One word per kernel stays although bench/cuda/stamp_cost.cu (a graph with the 0.5b's grids,
// apart from the engine) measures every block's atomic on one word at ~30 us a step and the
// same atomics spread over 4 or 16 words in distinct 128-byte lines (block index mod n) at 6.5
// and 4.4: in the engine the spread made the 0.5b's stamped step ~10 us slower, not faster
// (H100, 512 steps at depth 0-1024 with unprofiled steps interleaved, three rounds each:
// 1293.5-1294.5 tok/s on one word, 1277.0-1278.8 on 16, 1277.5-1278.6 on 4).
// Measured again with the copy back kept short (stop 29: lanes 1-3 in regions of their own
// before the slots, only a decode step's worth, the slot argument carrying the regions' stride):
// four lanes by block index mod 4 against one word, A/B through CBTOP_KERNEL_DEFINES on one
// build, bench/gpu-timing.sh depth 0, two repetitions: ev/off% 3.82-3.91 against 3.77-3.78
// (synthetic SmolLM2-shape q4_0), 3.83-4.00 against 3.25-3.45 (0.5b), 3.75-3.80 against
// 3.00-3.17 (1.5b), and `--timing off` itself slower with the lane code in every kernel
// (0.5b 1401 against 1436 tok/s, 1.5b 751 against 769).
//
// Measuring variants for A/B runs on the GPU machine, off (0) by default, turned on at run
// time without a rebuild through CBTOP_KERNEL_DEFINES (src/engine/cuda/module.rs); the
// defaults are what ships:
// - CBTOP_STAMP_END_LAST=1: only thread 0 of the block with the highest index (the last in
//   x, y and z) stores its exit time, a plain store instead of every block's atomic max. It
//   measures what the per-block atomics cost; the end it records is the last-scheduled
//   block's, which need not be the last to finish, so it can under-state the kernel's end.
//   Not a way to ship: with it a stamped step fails to resolve (H100, SmolLM2 and the 0.5b,
//   bench/gpu-timing.sh): in rope+attention the highest-index block can exit before block 0
//   has read its start (an end 224 ns and 32 ns before the start in two runs).
// - CBTOP_STAMP_START_EARLY=1: block 0's thread 0 stamps the start before `pdl_wait`, not
//   after: the start then includes the time a block spends beside the previous kernel
//   waiting for it (so consecutive kernels' intervals overlap).
// - CBTOP_STAMP_END_NONE=1: no block stamps its exit; block 0 writes its start as the end too
//   (every kernel then times as zero): what the end stamps cost, all told.
// - CBTOP_STAMP_START_CONST=1: block 0 stores a constant 1 as the start instead of reading
//   %globaltimer (the times are then meaningless): what reading the clock in block 0 costs.
#ifndef CBTOP_STAMP_END_LAST
#define CBTOP_STAMP_END_LAST 0
#endif
#ifndef CBTOP_STAMP_END_NONE
#define CBTOP_STAMP_END_NONE 0
#endif
#ifndef CBTOP_STAMP_START_CONST
#define CBTOP_STAMP_START_CONST 0
#endif
// - CBTOP_STAMP_END_CONST=1: as END_NONE, and every block's thread 0 still does its atomic max,
//   of a constant 1 (no clock read): what the exit atomics cost without the clock.
#ifndef CBTOP_STAMP_END_CONST
#define CBTOP_STAMP_END_CONST 0
#endif
// - CBTOP_STAMP_END_NEVER=1: as END_NONE, with the exit stamp's code kept behind a test that
//   never holds: what the code's presence costs, apart from the write.
#ifndef CBTOP_STAMP_END_NEVER
#define CBTOP_STAMP_END_NEVER 0
#endif
// - CBTOP_STAMP_START_LATE=1: block 0's thread 0 reads the start after the wait as usual but
//   stores it with its end (`KernelStart::end`): one write at the block's exit, not two.
// - CBTOP_STAMP_NOTHING=1: no stamp is read or written, stamped or not: against the default
//   under `--timing off`, what the stamp code's mere presence costs (a stamped step then fails
//   on its unwritten slots).
//
// Where a stamped 0.5b step's time goes (H100, synthetic q4_k_m, 512 profiled steps each
// followed by an unprofiled one at depth 0-1040; per-step GPU time from CUDA events recorded
// behind each replayed graph, median, and the stamps left unread where a variant leaves them
// unwritten: a measuring build, not in the tree; stamped minus unstamped in the same run, so
// both graphs use the same compiled code; two runs each): the default 29-31 us; END_CONST
// (an atomic of a constant) 31; every block storing its end to a word of its own instead of
// the atomic 31-34; END_NONE 19; START_CONST with END_NONE 14.5; NOTHING 0. So the
// per-block end write costs ~11 us whatever it is, the clock read ~4.5 and block 0's one
// start store ~14.5. The stamp code's presence costs the unstamped step too: NOTHING's
// unstamped step is 15 us shorter than the default's (738-740 against 751-755). START_LATE:
// 25-26 us stamped minus unstamped, but its held start costs every thread two registers and
// its unstamped step is 22 us longer (773 against 751), so it stays off.
#ifndef CBTOP_STAMP_START_LATE
#define CBTOP_STAMP_START_LATE 0
#endif
// A START_LATE with block 0's start held in a shared word (thread 0's alone) instead of a
// register of every thread was measured too and dropped: stamped tok/s fell further than the
// unstamped (H100, bench/gpu-timing.sh, 2 rounds, events/off overhead against the default's in
// the same session: SmolLM2 5.28/4.18 against 4.17/3.72 at depth 0/1024, 0.5b 3.93/3.29
// against 3.04/2.87, 1.5b 3.77/3.31 against 2.95/2.70).
#ifndef CBTOP_STAMP_NOTHING
#define CBTOP_STAMP_NOTHING 0
#endif
// Measured and not kept (stop 31; H100, bench/gpu-timing.sh depth 0, three rounds, two
// repetitions, A/B through CBTOP_KERNEL_DEFINES on one build; events and off tok/s on the
// synthetic SmolLM2-shape q4_0 and the 0.5b; the variants left the tree):
// - the end's clock read before a non-accumulating product's last store (the atomic after
//   it): events 1297.0/1297.6 against 1301.8/1302.1, off 1342-1343 against 1349;
// - only blocks below 1024 stamping their exit (what the output projection's 12288 same-word
//   atomics cost): events 1298.5-1298.9, no faster (and its end then under-stated);
// - block 0's start read after the wait but folded in with its end (no wait on the clock
//   before the work) in the small kernels only (RMSNorm, SwiGLU, act_quant, RoPE+attention,
//   argmax, embedding): events 1302.0/1308.0 against 1316.6/1314.4, off 1352/1359 against
//   1362/1363;
// - the split attention's idle blocks (past the context's last chunk) leaving before the
//   wait, unstamped: events 1307.6/1313.3 against 1315.5/1315.0, off level.
// The stamped graph's copy of its ~4 KB of stamps to the host costs at most ~0.2%: copying
// only the token (stamps unread) gave events 1323.4-1329.0 against 1323.0-1324.7.
#ifndef CBTOP_STAMP_START_EARLY
#define CBTOP_STAMP_START_EARLY 0
#endif
#define STAMP_PARAMS u64 *__restrict__ stamps
#define STAMP_GUARD KernelStamp stamp_guard_(stamps)
#define STAMP_START KernelStart stamp_start_(stamps)

__device__ __forceinline__ u64 globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Programmatic dependent launch (Hopper and later; src/engine/cuda/launcher.rs): a kernel
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

// Bring `bytes` from `p` into L2 ahead of use: a kernel may do this for its constant inputs
// (weights) before `pdl_wait`, while the kernel before it still runs. Each of `n` cooperating
// threads (index `t`) takes every n-th 128-byte line.
__device__ __forceinline__ void prefetch_l2(const void* p, u64 bytes, int t, int n) {
    for (u64 o = (u64)t * 128; o < bytes; o += (u64)n * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char*)p + o));
}

// Whether this is block 0's thread 0, the thread that stamps a kernel's start. Every launch has
// one-dimensional blocks (src/engine/cuda/launcher.rs asserts it in test builds), so thread 0 is
// the one with threadIdx.x 0, and the test starts from threadIdx.x and blockIdx.x, which the
// kernels read anyway. The test it replaces ORed all six indices: under `--timing events` every
// warp of every block then read threadIdx.y/z and blockIdx.z (vector S2R) before its work. Here
// ptxas reads blockIdx.y/z into uniform registers (S2UR, once per warp) in stamped and unstamped
// steps alike; written in plain C++ (below), it read blockIdx.z with a vector S2R. Measured on the
// H100 (bench/gpu-timing.sh, three rounds, this stop against stop 29's table): events/off 1.5b
// 2.82/3.16% -> 2.35/2.42% (depth 0/1024), 3b 2.65/2.77% -> 2.15/2.15%, SmolLM2 and the 0.5b within
// their rounds' spread, `--timing off` unchanged. Measured and not kept (A/B on one build through
// CBTOP_KERNEL_DEFINES, synthetic SmolLM2-shape q4_0 and 0.5b, depth 0, two repetitions): the y/z
// test in plain C++, which ptxas read with vector S2R in every warp, stamped or not: events/off
// 2.0% and 1.6% but `--timing off` ~0.8% slower; every stamp as predicated PTX with no branch
// (every warp reading the clock): events/off 0.2-0.5% but `--timing off` 4-5% slower. So what a
// stamped step loses is mostly latency that the stamping threads add before their stores, not the
// atomics themselves.
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
#if CBTOP_STAMP_START_LATE
    u64 t0;
#endif
    __device__ __forceinline__ KernelStart(u64* s) : stamps(s) {
#if CBTOP_STAMP_START_LATE
        pdl_wait();
        pdl_launch_dependents();
        if (s && block0_thread0()) t0 = globaltimer();
#elif CBTOP_STAMP_NOTHING
        pdl_wait();
        pdl_launch_dependents();
#elif CBTOP_STAMP_START_EARLY
        if (s && block0_thread0())
            s[0] = globaltimer();
        pdl_wait();
        pdl_launch_dependents();
#else
        // Which thread stamps is settled before the wait, not after it: after it, block 0's
        // first warp read its block indices and branched between the kernel's release and the
        // clock, on the step's critical path. Measured on the H100 (bench/gpu-timing.sh, depth
        // 0, three rounds, two repetitions, A/B on one build): synthetic SmolLM2-shape q4_0
        // events 1310-1311 -> 1339-1341 tok/s, `--timing off` 1357 -> 1367-1368, ev/off
        // 3.43-3.49% -> 1.87-2.09%, gaps 148 -> 131 us a token; 0.5b events 1399-1405 ->
        // 1421, off 1435-1442 -> 1444-1445, ev/off 2.50-2.59% -> 1.59-1.65%, gaps 120 -> 103.
        // Measured in the same runs and not kept: the stamps' atomics with an L2 evict_last
        // policy (so the stamp buffer's lines, touched once every other step, would not be
        // pushed out by the weights) and block 0's thread 0 prefetching its slot into L2
        // before the wait: events 1331-1332 (SmolLM2) and 1399-1400 (0.5b), ev/off 2.56-2.67%
        // and 2.64-2.70%; the prefetch alone: ev/off 3.59-3.67% and 2.86-3.02%.
        bool lead = s && block0_thread0();
        pdl_wait();
        pdl_launch_dependents();
        if (lead) {
#if CBTOP_STAMP_START_CONST
            s[0] = 1;
#elif CBTOP_STAMP_END_NONE || CBTOP_STAMP_END_CONST || CBTOP_STAMP_END_NEVER
            u64 t = globaltimer();
            s[0] = t;
            s[1] = t;
#else
            // An atomic max, not a store: the slot only ever grows (the clock does), and this
            // made the 0.5b's stamped step ~4 us shorter than a plain store (GPU-timed as in
            // the table above: stamped minus unstamped 27.2-28.0 us against 31.1-31.3; storing
            // before `pdl_launch_dependents` instead gave 28.7-29.2 but a slower unstamped step).
            atomicMax(s, globaltimer());
#endif
        }
#endif
    }
    // The block's end (thread 0 calls it): its exit time folded into the slot's end, and under
    // START_LATE block 0's start written now.
    __device__ __forceinline__ void end() const {
#if CBTOP_STAMP_START_LATE
        if (stamps && block0_thread0()) stamps[0] = t0;
#endif
        stamp_end(stamps);
    }
};

// Thread 0 of a block folds the time it is done into its kernel's end (`stamps[1]`); kernels
// reach it through `KernelStart::end`. The caller is thread 0.
__device__ __forceinline__ void stamp_end(u64* stamps) {
#if CBTOP_STAMP_END_NONE || CBTOP_STAMP_NOTHING
#elif CBTOP_STAMP_END_NEVER
    if (stamps == (u64*)8) atomicMax(stamps + 1, globaltimer());
#elif CBTOP_STAMP_END_CONST
    if (stamps) atomicMax(stamps + 1, 1ull);
#elif CBTOP_STAMP_END_LAST
    if (stamps && blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 &&
        blockIdx.z == gridDim.z - 1)
        stamps[1] = globaltimer();
#else
    if (stamps) atomicMax(stamps + 1, globaltimer());
#endif
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
                                            const u32* tokens, float* out, STAMP_PARAMS) {   \
        STAMP_GUARD;                                                                         \
        embed_impl<D>(w, row_bytes, cols, tokens, out);                                      \
    }
