// Integer tensor-core products on quantized weights (fast numerics, 2 to 256 tokens: decode
// steps of several sequences, short prompts) for Q4_K, Q6_K and Q8_0, against the activations
// as act_quant.cu quantizes them for these types (int8 values with Q8_K's per-256 scale and
// per-16 sums, or Q8_0's per-32 scale). The weights' 4/6/8-bit values go into mma.sync's int8
// operand with a mask and a shift, where gemm_q.cu expands them to f16 first; each
// sub-block's integer product is scaled by its integer scale (IMAD) and each step's sum
// turned into a float once, the order llama.cpp's CPU dot products of these types keep.
//
// A block is four warps of 16 weight rows each (64 rows) and BT tokens. For each k step of
// 256 values the block stages its 64 rows' quantized bytes and the BT tokens' int8 values and
// scales into shared memory with cp.async, ST - 1 steps ahead (a decode step's few tokens are
// bound by reading the weights, which needs many bytes in flight; no registers hold them), and
// each warp builds the mma's A operand from its rows' bytes there. The output C[m][n] = sum_k A[m][k] W[n][k] is laid out as gemm_q.cu's: M token rows of stride
// ldc, split-K pieces in part[z] for gemm_reduce.

#define QM_WARPS 4
#define QM_ROWS 16
#define QM_KS 256

// c = a b for one m16n8k32 int8 tile (a: 4 registers of four int8, b: 2; c: 4 int32).
__device__ __forceinline__ void mma_s8_16832(int* c, const u32* a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%10,%10,%10};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// c = a b for one m16n8k16 int8 tile (a: 2 registers, b: 1).
__device__ __forceinline__ void mma_s8_16816(int* c, u32 a0, u32 a1, u32 b) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%7,%7,%7,%7};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a0), "r"(a1), "r"(b), "r"(0));
}

// Four bytes of shared memory from an address that is only 2-aligned (Q6_K and Q8_0 blocks):
// two aligned words and a funnel shift.
__device__ __forceinline__ u32 qm_ld32(const u8* p) {
    const u32* w = (const u32*)((u64)p & ~3ull);
    return __funnelshift_r(w[0], w[1], (int)((u64)p & 3) * 8);
}

template <typename V, int NJ>
__device__ __forceinline__ void qm_zero(V (&a)[NJ][4]) {
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) a[j][e] = 0;
}

// A k32 product (|c| < 2^22) as a float without I2F, a quarter-rate conversion: c added to the
// bits of 1.5 * 2^23 is that float plus c, exactly, and the subtraction leaves c.
__device__ __forceinline__ float qm_i2f(int c) { return __int_as_float(c + 0x4B400000) - 12582912.0f; }

__device__ __forceinline__ int qm_byte(u32 w, int i) { return (int)((w >> (8 * i)) & 0xffu); }
__device__ __forceinline__ int qm_sbyte(u32 w, int i) { return (int)(i8)((w >> (8 * i)) & 0xffu); }

// x - 32 in each byte of x (every byte below 64): with the top bit set no borrow crosses a
// byte, and flipping it back gives the two's complement difference.
__device__ __forceinline__ u32 qm_sub32(u32 x) {
    return ((x | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
}

// The types. Each names its shared-memory layout (LDA: bytes of a token's staged values, so
// the B loads of a warp hit distinct banks; SCF: floats of a token's staged scales; CH: the
// 16-byte pieces a row's k step is staged in, from the 16-byte boundary at or below its first
// byte; WLD: bytes between staged rows), how its scales are staged, what a thread reads of its
// two staged rows (g and g + 8 of the warp's 16) for a k step, and the step's products into
// the float sums f[j][e] (n8 tile j; e: row g token
// 2t, row g token 2t + 1, row g + 8 token 2t, row g + 8 token 2t + 1).

// Q4_K (144-byte blocks: d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles):
// one k32 mma per 32-value sub-block, thread t holding values 8t..8t+7 (the low or high
// nibbles of qs bytes 8t..8t+7 of the sub-block pair's 32), the same 8 bytes of each token.
struct QmQ4K {
    static const int BB = 144, LDA = 288, SCF = 20, CH = 9, WLD = 160;  // bsums 0..15, d at 16
    static const bool BSUMS = true;
    struct Raw {
        uint4 h[2];
        uint2 q[2][4];
    };
    static __device__ __forceinline__ void load(Raw& r, const u8* w0, const u8* w1, int t) {
        r.h[0] = *(const uint4*)w0;
        r.h[1] = *(const uint4*)w1;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            r.q[0][j] = *(const uint2*)(w0 + 16 + 32 * j + 8 * t);
            r.q[1][j] = *(const uint2*)(w1 + 16 + 32 * j + 8 * t);
        }
    }
    template <int NJ>
    static __device__ __forceinline__ void step(const Raw& r, const u8* act, const float* sc,
                                                float (&f)[NJ][4], int g, int t) {
        u32 scw[2][2], mw[2][2];
        float d[2], dm[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            u32 s0 = r.h[h].y, s1 = r.h[h].z, s2 = r.h[h].w;
            scw[h][0] = s0 & 0x3f3f3f3fu;
            mw[h][0] = s1 & 0x3f3f3f3fu;
            scw[h][1] = (s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u);
            mw[h][1] = ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u);
            d[h] = h2f((u16)(r.h[h].x & 0xffffu));
            dm[h] = h2f((u16)(r.h[h].x >> 16));
        }
        int is[NJ][4];
        qm_zero(is);
#pragma unroll
        for (int p = 0; p < 4; p++)
#pragma unroll
            for (int hi = 0; hi < 2; hi++) {
                const int sb = 2 * p + hi;
                u32 a[4];
                a[0] = (hi ? r.q[0][p].x >> 4 : r.q[0][p].x) & 0x0f0f0f0fu;
                a[1] = (hi ? r.q[1][p].x >> 4 : r.q[1][p].x) & 0x0f0f0f0fu;
                a[2] = (hi ? r.q[0][p].y >> 4 : r.q[0][p].y) & 0x0f0f0f0fu;
                a[3] = (hi ? r.q[1][p].y >> 4 : r.q[1][p].y) & 0x0f0f0f0fu;
                int s_lo = qm_byte(scw[0][sb >> 2], sb & 3), s_hi = qm_byte(scw[1][sb >> 2], sb & 3);
#pragma unroll
                for (int j = 0; j < NJ; j++) {
                    uint2 b = *(const uint2*)(act + (j * 8 + g) * LDA + 32 * sb + 8 * t);
                    int c[4];
                    mma_s8_16832(c, a, b.x, b.y);
                    is[j][0] += s_lo * c[0];
                    is[j][1] += s_lo * c[1];
                    is[j][2] += s_hi * c[2];
                    is[j][3] += s_hi * c[3];
                }
            }
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float* st = sc + (j * 8 + 2 * t + e) * SCF;
                float m0 = 0.0f, m1 = 0.0f;
#pragma unroll
                for (int sb = 0; sb < 8; sb++) {
                    float b32 = st[2 * sb] + st[2 * sb + 1];
                    m0 += (float)qm_byte(mw[0][sb >> 2], sb & 3) * b32;
                    m1 += (float)qm_byte(mw[1][sb >> 2], sb & 3) * b32;
                }
                float d8 = st[16];
                f[j][e] += d8 * (d[0] * (float)is[j][e] - dm[0] * m0);
                f[j][2 + e] += d8 * (d[1] * (float)is[j][2 + e] - dm[1] * m1);
            }
    }
};

// Q6_K (210-byte blocks, 2-aligned: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
// scales, d): one k16 mma per 16-value scale group, thread t holding values 4t..4t+3 of it.
struct QmQ6K {
    static const int BB = 210, LDA = 272, SCF = 4, CH = 14, WLD = 240;  // d at 0
    static const bool BSUMS = false;
    struct Raw {
        u32 ql[2][8];
        u32 qh[2][4];
        u32 s[2][4];
        u32 d;  // row g's d low, row g + 8's high
    };
    static __device__ __forceinline__ void load(Raw& r, const u8* w0, const u8* w1, int t) {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int l = 0; l < 2; l++) {
                const int o = 64 * h + 16 * l + 4 * t;
                r.ql[0][4 * h + 2 * l] = qm_ld32(w0 + o);
                r.ql[0][4 * h + 2 * l + 1] = qm_ld32(w0 + o + 32);
                r.ql[1][4 * h + 2 * l] = qm_ld32(w1 + o);
                r.ql[1][4 * h + 2 * l + 1] = qm_ld32(w1 + o + 32);
                r.qh[0][2 * h + l] = qm_ld32(w0 + 128 + 32 * h + 16 * l + 4 * t);
                r.qh[1][2 * h + l] = qm_ld32(w1 + 128 + 32 * h + 16 * l + 4 * t);
            }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            r.s[0][i] = qm_ld32(w0 + 192 + 4 * i);
            r.s[1][i] = qm_ld32(w1 + 192 + 4 * i);
        }
        r.d = (u32)*(const u16*)(w0 + 208) | ((u32)*(const u16*)(w1 + 208) << 16);
    }
    template <int NJ>
    static __device__ __forceinline__ void step(const Raw& r, const u8* act, const float* sc,
                                                float (&f)[NJ][4], int g, int t) {
        int is[NJ][4];
        qm_zero(is);
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int l = 0; l < 2; l++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    u32 v[2];
#pragma unroll
                    for (int w = 0; w < 2; w++) {
                        u32 lo = r.ql[w][4 * h + 2 * l + (q & 1)];
                        lo = (q >= 2 ? lo >> 4 : lo) & 0x0f0f0f0fu;
                        u32 hb = ((r.qh[w][2 * h + l] >> (2 * q)) & 0x03030303u) << 4;
                        v[w] = qm_sub32(lo | hb);
                    }
                    const int si = 8 * h + 2 * q + l;
                    int s_lo = qm_sbyte(r.s[0][si >> 2], si & 3);
                    int s_hi = qm_sbyte(r.s[1][si >> 2], si & 3);
                    const int k = 128 * h + 32 * q + 16 * l + 4 * t;
#pragma unroll
                    for (int j = 0; j < NJ; j++) {
                        u32 b = *(const u32*)(act + (j * 8 + g) * LDA + k);
                        int c[4];
                        mma_s8_16816(c, v[0], v[1], b);
                        is[j][0] += s_lo * c[0];
                        is[j][1] += s_lo * c[1];
                        is[j][2] += s_hi * c[2];
                        is[j][3] += s_hi * c[3];
                    }
                }
        float d0 = h2f((u16)(r.d & 0xffffu)), d1 = h2f((u16)(r.d >> 16));
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float d8 = sc[(j * 8 + 2 * t + e) * SCF];
                f[j][e] += d8 * d0 * (float)is[j][e];
                f[j][2 + e] += d8 * d1 * (float)is[j][2 + e];
            }
    }
};

// Q8_0 (34-byte blocks, 2-aligned: d, 32 int8), eight a k step: one k32 mma per block, thread
// t holding values 8t..8t+7.
struct QmQ8_0 {
    static const int BB = 8 * 34, LDA = 288, SCF = 8, CH = 18, WLD = 304;  // the blocks' d
    static const bool BSUMS = false;
    struct Raw {
        u32 q[2][8][2];
        u32 d[2][4];  // blocks 2i (low) and 2i + 1 (high)
    };
    static __device__ __forceinline__ void load(Raw& r, const u8* w0, const u8* w1, int t) {
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const u8* p = w ? w1 : w0;
#pragma unroll
            for (int b = 0; b < 8; b++) {
                const u8* s = p + 34 * b + 2 + 8 * t;
                const u32* a = (const u32*)((u64)s & ~3ull);
                int sh = (int)((u64)s & 3) * 8;
                u32 x0 = a[0], x1 = a[1], x2 = a[2];
                r.q[w][b][0] = __funnelshift_r(x0, x1, sh);
                r.q[w][b][1] = __funnelshift_r(x1, x2, sh);
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
                r.d[w][i] = (u32)*(const u16*)(p + 68 * i) | ((u32)*(const u16*)(p + 68 * i + 34) << 16);
        }
    }
    // Token by token (n8 tile j): its two tokens' eight block scales in four 16-byte loads,
    // then the eight blocks, each sum made a float by `qm_i2f` and scaled in one fused
    // multiply-add (the module compiles without contraction).
    template <int NJ>
    static __device__ __forceinline__ void step(const Raw& r, const u8* act, const float* sc,
                                                float (&f)[NJ][4], int g, int t) {
        float dw[2][8];
#pragma unroll
        for (int b = 0; b < 8; b++) {
            dw[0][b] = h2f((u16)(r.d[0][b >> 1] >> (16 * (b & 1))));
            dw[1][b] = h2f((u16)(r.d[1][b >> 1] >> (16 * (b & 1))));
        }
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const float4* s0 = (const float4*)(sc + (j * 8 + 2 * t) * SCF);
            const float4* s1 = (const float4*)(sc + (j * 8 + 2 * t + 1) * SCF);
            float4 p0 = s0[0], p1 = s0[1], q0 = s1[0], q1 = s1[1];
            const float e0[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
            const float e1[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
            for (int b = 0; b < 8; b++) {
                u32 a[4] = {r.q[0][b][0], r.q[1][b][0], r.q[0][b][1], r.q[1][b][1]};
                uint2 bb = *(const uint2*)(act + (j * 8 + g) * LDA + 32 * b + 8 * t);
                int c[4];
                mma_s8_16832(c, a, bb.x, bb.y);
                f[j][0] = __fmaf_rn(dw[0][b] * e0[b], qm_i2f(c[0]), f[j][0]);
                f[j][1] = __fmaf_rn(dw[0][b] * e1[b], qm_i2f(c[1]), f[j][1]);
                f[j][2] = __fmaf_rn(dw[1][b] * e0[b], qm_i2f(c[2]), f[j][2]);
                f[j][3] = __fmaf_rn(dw[1][b] * e1[b], qm_i2f(c[3]), f[j][3]);
            }
        }
    }
};

// Q8_K's scales of a k step (d, the 16 bsums) or Q8_0's (the 8 blocks' d), of token `tok`
// into `dst` (SCF floats), zeros past the batch.
template <typename T>
__device__ __forceinline__ void qm_stage_scales(float* dst, const float* ad, const float* ax,
                                                int tok, bool ok, int K, int step, int part) {
    if (T::SCF == 8) {
        // Q8_0: two 16-byte pieces.
        if (part < 2)
            cp_async16(smem_u32(dst + 4 * part), ad + (u64)tok * (K / 32) + step * 8 + 4 * part,
                       ok ? 16 : 0);
    } else {
        if (part == 0) cp_async4(smem_u32(dst + (T::BSUMS ? 16 : 0)), ad + (u64)tok * (K / 256) + step, ok ? 4 : 0);
        if (T::BSUMS && part < 4)
            cp_async16(smem_u32(dst + 4 * part), ax + (u64)tok * (K / 16) + step * 16 + 4 * part,
                       ok ? 16 : 0);
    }
}

// C[m][n] = (acc ? C[m][n] : 0) + sum_k A[m][k] W[n][k] + (bias ? bias[n] : 0) for m < M,
// n < N, K a multiple of 256, W 16-byte aligned. aq: M x K int8 values; ad, ax: their scales
// and sums in the type's activation format. Grid (ceil(M / BT), ceil(N / 64), splits): with
// splits > 1 block z takes its share of the k steps and leaves raw partial sums in part[z]
// (M x N) for gemm_reduce. 128 threads; dynamic shared memory ST stages of BT x (LDA bytes +
// SCF floats) and 64 x WLD bytes (src/engine/cuda/qmma.rs).
template <typename T, int BT, int ST>
__device__ __forceinline__ void qmma_impl(const u8* __restrict__ W, u64 row_bytes,
                                          const i8* __restrict__ aq, const float* __restrict__ ad,
                                          const float* __restrict__ ax, int M, int N, int K,
                                          const float* __restrict__ bias, int acc,
                                          float* __restrict__ C, int ldc,
                                          float* __restrict__ part) {
    constexpr int NJ = BT / 8;
    constexpr int SA = BT * T::LDA, SS = BT * T::SCF * 4, SW = QM_WARPS * QM_ROWS * T::WLD;
    constexpr int STAGE = SA + SS + SW;
    extern __shared__ __align__(16) u8 qm_smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int t0 = blockIdx.x * BT;
    int rb = blockIdx.y * QM_WARPS * QM_ROWS;
    int r0 = rb + warp * QM_ROWS;
    int splits = gridDim.z, z = blockIdx.z;
    int steps_all = K / QM_KS;
    int s0 = (int)((long long)steps_all * z / splits);
    int ns = (int)((long long)steps_all * (z + 1) / splits) - s0;
    // Rows past N repeat the last row (their sums are not written); every warp takes part in
    // the block's barriers.
    auto row_start = [&](int r, int step) {
        return (u64)min(r, N - 1) * row_bytes + (u64)step * T::BB;
    };

    // k step `step` into stage `buf`: the block's rows (each from the 16-byte boundary at or
    // below its first byte), the BT tokens' values and their scales; tokens past M are zeros.
    auto stage = [&](int buf, int step) {
        u8* base = qm_smem + buf * STAGE;
        for (int i = threadIdx.x; i < QM_WARPS * QM_ROWS * T::CH; i += QM_WARPS * 32) {
            int r = i / T::CH, c = i - r * T::CH;
            u64 start = row_start(rb + r, step) & ~15ull;
            cp_async16(smem_u32(base + SA + SS + r * T::WLD + 16 * c), W + start + 16 * c, 16);
        }
        for (int i = threadIdx.x; i < BT * 16; i += QM_WARPS * 32) {
            int m = i >> 4, c = i & 15, tok = t0 + m;
            const i8* src = aq + (u64)min(tok, M - 1) * K + (u64)step * QM_KS + 16 * c;
            cp_async16(smem_u32(base + m * T::LDA + 16 * c), src, tok < M ? 16 : 0);
        }
        float* ds = (float*)(base + SA);
        for (int i = threadIdx.x; i < BT * 4; i += QM_WARPS * 32) {
            int m = i >> 2, tok = t0 + m;
            qm_stage_scales<T>(ds + m * T::SCF, ad, ax, min(tok, M - 1), tok < M, K, step,
                               i & 3);
        }
    };

    float f[NJ][4];
    qm_zero(f);

#pragma unroll
    for (int i = 0; i < ST - 1; i++) {
        if (i < ns) stage(i, s0 + i);
        cp_async_commit();
    }
    for (int s = 0; s < ns; s++) {
        cp_async_wait<ST - 2>();
        __syncthreads();
        // The stage read in the previous step is free: every warp has passed the barrier.
        if (s + ST - 1 < ns) stage((s + ST - 1) % ST, s0 + s + ST - 1);
        cp_async_commit();
        const u8* base = qm_smem + (s % ST) * STAGE;
        const u8* wr = base + SA + SS + (warp * QM_ROWS + g) * T::WLD;
        typename T::Raw raw;
        T::load(raw, wr + (row_start(r0 + g, s0 + s) & 15),
                wr + 8 * T::WLD + (row_start(r0 + g + 8, s0 + s) & 15), t);
        T::template step<NJ>(raw, base, (const float*)(base + SA), f, g, t);
    }
    cp_async_wait<0>();

    gq_store<NJ>(f, r0, t0, g, t, M, N, bias, acc, C, ldc, part, splits, z);
}

// Stages: three (two steps in flight) where a block's stage is small, two for 64 tokens, and
// two for Q8_0's 32 tokens (ST32), whose larger rows would otherwise leave room for only two
// blocks a multiprocessor.
#define CBTOP_QMMA(name, T, BT, ST, MINB)                                                      \
    extern "C" __global__ void __launch_bounds__(QM_WARPS * 32, MINB) qmma_##name##_##BT(       \
        const u8* W, u64 row_bytes, const i8* aq, const float* ad, const float* ax, int M,      \
        int N, int K, const float* bias, int acc, float* C, int ldc, float* part,              \
        STAMP_PARAMS) {                                                                        \
        STAMP_GUARD;                                                                           \
        qmma_impl<T, BT, ST>(W, row_bytes, aq, ad, ax, M, N, K, bias, acc, C, ldc, part);      \
    }

#define CBTOP_QMMA_ALL(name, T, ST32)  \
    CBTOP_QMMA(name, T, 8, 3, 4)       \
    CBTOP_QMMA(name, T, 16, 3, 4)      \
    CBTOP_QMMA(name, T, 32, ST32, 3)   \
    CBTOP_QMMA(name, T, 64, 2, 2)

CBTOP_QMMA_ALL(q4_k, QmQ4K, 3)
CBTOP_QMMA_ALL(q6_k, QmQ6K, 3)
CBTOP_QMMA_ALL(q8_0, QmQ8_0, 2)
