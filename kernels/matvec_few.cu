// The `fast` numerics' product of a few tokens on quantized weights: out[t][r] = W[r] . x[t]
// for t < n, 2 <= n below the tensor-core threshold (a batch decode step of a few sequences,
// a short prompt). The exact batch kernels (`qmv8_*`, common.cuh) keep the CPU's float order
// and read the weights at a fraction of the memory's bandwidth; here each weight unit is
// decoded once into registers and multiplied with every token's activations, in any order.
//
// The shape of the one-token kernel (matvec_fast.cu `mvf_one`), with two rows per warp: a
// block of four warps takes eight consecutive rows, lane i takes units i, i + 32, ... of its
// warp's two rows, decodes both (`F::load`, `F::decode`), then for each of NT tokens loads the
// token's activations for the unit once (`F::act`) and adds its dot product with each row
// (`F::dot_decoded`) into one of NT x 2 register sums. Two rows share each activation load: the
// activations of NT tokens are NT times a row's bytes in int8, and with one row per warp
// their loads from L1 would outweigh the weights' several times over.
//
// A matrix of few rows (src/engine/cuda/launch_params.rs `few_split`: fewer row blocks than the
// GPU holds at once) gives each row pair 2 or 4 warps of its block instead (`split`, MvfMat's
// shape / 16): warp p of a pair takes units 32 p + i, 32 p + i + 32 split, ..., and the pair's
// first warp adds the others' sums in warp order (shared memory), so the launch has 2 or 4
// times the blocks, each warp a shorter loop.
//
// More than NT tokens go in chunks of NT: block b takes row block b / chunks and chunk
// b % chunks, so a row block's chunks are launched next to each other and run together, and
// the chunks after the first find the weight rows in L2 instead of memory. Token t's
// activations start at aq + t * cols, ad + t * (cols / F::AD_PER), ax + t * (cols / F::AX_PER)
// (act_quant.cu quantizes the n rows as one flat vector of n * cols values).
//
// The sums: NT x 2 per lane, added over the warp in one butterfly that halves the values a
// lane holds at each step (`warp_sum_spread`), so each lane ends with one of them, and the
// lanes holding a value's sum store it.

// Rows per warp (`FEW_ROWS` in src/engine/cuda/launch_params.rs, which sizes the grid).
#define MVQ_ROWS 2

// MVQ_UNIFORM=1: every chunk computes NT tokens, a short last chunk repeating its last token,
// so no branch separates the tokens' loads; the compiler then keeps them all in flight and
// wants more registers than the bounds below allow (it spills; MVQ_MIN_BLOCKS=2 does not).
// Default 0: a token past the chunk is skipped.
#ifndef MVQ_UNIFORM
#define MVQ_UNIFORM 0
#endif

// Steps of a lane's units unrolled (CBTOP_KERNEL_DEFINES for A/B runs): 2 keeps two units of
// each row in flight, for long rows of short matrices whose launch leaves multiprocessors
// idle, at twice the weight registers.
#ifndef MVQ_UNROLL
#define MVQ_UNROLL 1
#endif

// Blocks of 128 threads a multiprocessor holds at least (`__launch_bounds__`): registers
// capped at 128 a thread, at 168 for 7 and 8 tokens (whose k-quant sums spill at 128).
// MVQ_MIN_BLOCKS=k sets it for every chunk size (A/B runs through CBTOP_KERNEL_DEFINES).
#ifdef MVQ_MIN_BLOCKS
#define MVQ_BLOCKS(NT) MVQ_MIN_BLOCKS
#else
#define MVQ_BLOCKS(NT) ((NT) >= 7 ? 3 : 4)
#endif

// The lane sums of P values (P a power of two, at most 32) over the warp, a butterfly that
// halves the values each lane holds at each step: lane l ends with the sum of value
// l >> (5 - log2 P), as do the 32 / P lanes next to it. `v` is clobbered. A step of C values
// left (offset 16 C / P) and the next by recursion, so every index is known when compiling
// (a loop the compiler left rolled put the values in local memory).
template <int P, int C>
__device__ __forceinline__ void spread_step(float (&v)[P], int lane) {
    if constexpr (C > 1) {
        const int o = 16 * C / P;
        bool up = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < C / 2; i++) {
            float send = up ? v[i] : v[i + C / 2];
            float keep = up ? v[i + C / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
        spread_step<P, C / 2>(v, lane);
    }
}

template <int P>
__device__ __forceinline__ float warp_sum_spread(float (&v)[P]) {
    spread_step<P, P>(v, threadIdx.x & 31);
    float r = v[0];
#pragma unroll
    for (int o = 16 / P; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    return r;
}

// Split K (`split` warps a row pair, 2 or 4): the warps' sums of a row pair, added in
// warp order by the pair's first warp.
__shared__ float mvq_parts[4][32];

template <typename F, int NT>
__device__ __forceinline__ void mvf_few(const u8* w, u64 rb, int rows, int cols, const i8* aq,
                                        const float* ad, const float* ax, int n,
                                        const float* bias, int accumulate, float* out,
                                        int rowblock, int chunk, int split,
                                        const KernelStart& st) {
    const int V = NT * MVQ_ROWS;
    const int P = V <= 2 ? 2 : V <= 4 ? 4 : V <= 8 ? 8 : V <= 16 ? 16 : 32;
    const int L = P == 2 ? 1 : P == 4 ? 2 : P == 8 ? 3 : P == 16 ? 4 : 5;
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, part = wi % split;
    int r0 = (rowblock * ((int)(blockDim.x >> 5) / split) + wi / split) * MVQ_ROWS;
    // With a split every warp reaches the block's barrier: a pair past the matrix reads its
    // last row and stores nothing.
    if (split == 1 && r0 >= rows) {
        if (threadIdx.x == 0) st.end();
        return;
    }
    int t0 = chunk * NT, nt = min(NT, n - t0);
    // A row past the matrix (its last warp's second row) reads the last row again and
    // stores nothing.
    const u8* row[MVQ_ROWS];
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++) row[i] = w + (u64)min(r0 + i, rows - 1) * rb;
    const int units = (cols / F::QK) * F::UNITS;
    const int ads = cols / F::AD_PER, axs = cols / F::AX_PER;
    const i8* aq0 = aq + (u64)t0 * cols;
    const float* ad0 = ad + (u64)t0 * ads;
    const float* ax0 = ax + (u64)t0 * axs;
    float acc[P];
#pragma unroll
    for (int j = 0; j < P; j++) acc[j] = 0.0f;
#pragma unroll MVQ_UNROLL
    for (int u = part * 32 + lane; u < units; u += 32 * split) {
        int bi = u / F::UNITS, k = u % F::UNITS;
        typename F::D wv[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            typename F::W raw;
            F::load(row[i] + (u64)bi * F::BYTES, k, raw);
            F::decode(raw, wv[i]);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
#if MVQ_UNIFORM
            // A short last chunk's missing tokens repeat its last one (sums never stored): no
            // branch between the tokens, so all their loads can be in flight together.
            u64 tt = (u64)min(t, nt - 1);
#else
            if (t >= nt) continue;
            u64 tt = (u64)t;
#endif
            typename F::A a;
            F::act(aq0 + tt * cols, ad0 + tt * ads, ax0 + tt * axs, bi, k, a);
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++)
                acc[t * MVQ_ROWS + i] += F::dot_decoded(wv[i], a);
        }
    }
    float v = warp_sum_spread<P>(acc);
    if (split > 1) {
        mvq_parts[wi][lane] = v;
        __syncthreads();
        if (part != 0) return;
        for (int p = 1; p < split; p++) v += mvq_parts[wi + p][lane];
    }
    // Value j = t * MVQ_ROWS + i: token t0 + t of row r0 + i; the first lane holding it
    // stores it.
    int j = lane >> (5 - L), t = j / MVQ_ROWS, i = j % MVQ_ROWS;
    if ((lane & ((32 >> L) - 1)) == 0 && j < V && t < nt && r0 + i < rows)
        store_out(v, bias, accumulate, rows, r0 + i, t0 + t, out);
    // Thread 0 stores value 0 (its row and first token always exist): its last store is done.
    if (threadIdx.x == 0) st.end();
}

// mvf<NT>_<name>: the fast product of up to NT tokens a chunk of one quantized type, with
// the exact kernels' arguments except `shape` (MvfMat's: MVQ_ROWS + 16 * the warps of a row
// pair) for `cols`, which the row's bytes give; the grid is (row blocks of 4 * MVQ_ROWS /
// split rows) x (chunks of NT of the n tokens) blocks of 128 threads, chunks innermost.
#define CBTOP_MVF_FEW(name, F, NT)                                                           \
    extern "C" __global__ void __launch_bounds__(128, MVQ_BLOCKS(NT))                        \
        mvf##NT##_##name(const u8* w, u64 rb, int rows, int shape, const i8* aq,             \
                         const float* ad, const float* ax, int n, const float* bias, int acc, \
                         float* out, STAMP_PARAMS) {                                          \
        int chunks = (n + NT - 1) / NT, cols = (int)(rb / F::BYTES) * F::QK;                 \
        int rowblock = (int)blockIdx.x / chunks, chunk = (int)blockIdx.x % chunks;           \
        MvfMat m = {w, rb, bias, out, rows, 0, 0, shape};                                    \
        if (chunk == 0) mvf_prefetch(m, rowblock);                                           \
        STAMP_START;                                                                         \
        mvf_few<F, NT>(w, rb, rows, cols, aq, ad, ax, n, bias, acc, out, rowblock, chunk,    \
                       shape >> 4, stamp_start_);                                            \
    }

// Every chunk size of one type: 2 to 8 tokens.
#define CBTOP_MVF_FEW_ALL(name, F)                                                           \
    CBTOP_MVF_FEW(name, F, 2)                                                                \
    CBTOP_MVF_FEW(name, F, 3)                                                                \
    CBTOP_MVF_FEW(name, F, 4)                                                                \
    CBTOP_MVF_FEW(name, F, 5)                                                                \
    CBTOP_MVF_FEW(name, F, 6)                                                                \
    CBTOP_MVF_FEW(name, F, 7)                                                                \
    CBTOP_MVF_FEW(name, F, 8)

CBTOP_MVF_FEW_ALL(q4_0, FQ4_0)
CBTOP_MVF_FEW_ALL(q4_1, FQ4_1)
CBTOP_MVF_FEW_ALL(q5_0, FQ5_0)
CBTOP_MVF_FEW_ALL(q5_1, FQ5_1)
CBTOP_MVF_FEW_ALL(q8_0, FQ8_0)
CBTOP_MVF_FEW_ALL(q2_k, FQ2_K)
CBTOP_MVF_FEW_ALL(q3_k, FQ3_K)
CBTOP_MVF_FEW_ALL(q4_k, FQ4_K)
CBTOP_MVF_FEW_ALL(q5_k, FQ5_K)
CBTOP_MVF_FEW_ALL(q6_k, FQ6_K)

// mvfm<NT>: two or three matrices of one activation format against the same n <= NT tokens
// in one launch (a decode step's Q, K and V for two to four sequences), as mvf_multi does
// for one token: block b takes its matrix's block b - first_block, laid out as the one-matrix
// kernels' grid (`few_launch`). K and V alone fill too few multiprocessors to be worth their
// own launches.
#define MVF_FEW_CASE(T, F, NT)                                                               \
    case T:                                                                                  \
        mvf_few<F, NT>(m.w, m.row_bytes, m.rows, cols, aq, ad, ax, n, m.bias, accumulate,    \
                       m.out, rowblock, chunk, m.shape >> 4, stamp_start_);                  \
        break

#define CBTOP_MVF_FEW_MULTI(NT)                                                              \
    extern "C" __global__ void __launch_bounds__(128, MVQ_BLOCKS(NT))                        \
        mvfm##NT(MvfSet set, int cols, const i8* __restrict__ aq,                            \
                 const float* __restrict__ ad, const float* __restrict__ ax, int n,          \
                 int accumulate, STAMP_PARAMS) {                                             \
        MvfMat m = mvf_set_mat(set, blockIdx.x);                                             \
        int chunks = (n + NT - 1) / NT, rel = (int)blockIdx.x - m.first_block;               \
        int rowblock = rel / chunks, chunk = rel % chunks;                                   \
        if (chunk == 0) mvf_prefetch(m, rowblock);                                           \
        STAMP_START;                                                                         \
        switch (m.ty) {                                                                      \
            MVF_FEW_CASE(GGML_TYPE_Q4_0, FQ4_0, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q4_1, FQ4_1, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q5_0, FQ5_0, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q5_1, FQ5_1, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q8_0, FQ8_0, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q2_K, FQ2_K, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q3_K, FQ3_K, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q4_K, FQ4_K, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q5_K, FQ5_K, NT);                                         \
            MVF_FEW_CASE(GGML_TYPE_Q6_K, FQ6_K, NT);                                         \
        default:                                                                             \
            if (threadIdx.x == 0) stamp_start_.end();                                        \
            break;                                                                           \
        }                                                                                    \
    }

CBTOP_MVF_FEW_MULTI(2)
CBTOP_MVF_FEW_MULTI(3)
CBTOP_MVF_FEW_MULTI(4)
