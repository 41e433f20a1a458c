// The `fast` numerics' decode product (one token): out[r] = W[r] . x for quantized W, shaped
// for memory bandwidth instead of the CPU's float order (docs/DESIGN.md "Numerics"); for the legacy
// types also a kernel of the same shape in the CPU's order (`mvo_one`, below).
//
// One warp per weight row, four rows per block of 128 threads. A row is cut into units (a
// legacy block of 32 weights, or a quarter of a k-quant block: 64 weights); lane i takes
// units i, i + 32, ... and returns each unit's dot product with the quantized activations
// as one float (integer dp4a sums inside, block scales outside), accumulated in registers;
// the warp adds its lanes with shuffles. Weights are read with aligned 32- or 128-bit loads
// whatever a block's alignment (`load_words`, `q8_0_block`): Q5_0, Q8_0, Q3_K and Q6_K blocks
// are only 2-byte aligned, so their fields are assembled from the aligned words around them
// (funnel shifts), never loaded unaligned; all evict-first in L2 (`ldg_once`, common.cuh).
//
// Activations are the same quantized input as the exact products (kernels/act_quant.cu):
// int8 `aq`, scales `ad` (per 32 for Q8_0/Q8_1, per 256 for Q8_K), and `ax` (Q8_1's sums,
// Q8_K's bsums per 16). Units read 16-byte aligned activation vectors.
//
// Each type `F` splits a unit's product: `F::load` brings the unit's weights into registers
// (`F::W`), `F::act` one token's activations for it (`F::A`), `F::dot` takes the two. For
// several tokens (kernels/matvec_few.cu) `F::decode` turns W into levels (`F::D`, the same as
// W where loading already decodes) once, and `F::dot_decoded` takes them for each token.
//
// Matrices are uploaded with 16 bytes of padding after them: `load_words` may read up to 4
// bytes past a field (never before the matrix).

// n 32-bit words holding bytes p[0 .. 4n): word i is p[4i..4i+4], little-endian, from the
// aligned words around them.
template <int N>
__device__ __forceinline__ void load_words(const u8* p, u32* out) {
    const u32* a = (const u32*)((u64)p & ~(u64)3);
    u32 sh = 8u * (u32)((u64)p & 3);
    u32 w[N + 1];
#pragma unroll
    for (int i = 0; i <= N; i++) w[i] = (i < N || sh) ? ldg_once(a + i) : 0u;
#pragma unroll
    for (int i = 0; i < N; i++) out[i] = __funnelshift_r(w[i], w[i + 1], sh);
}

// Sixteen int8 activations as four packed words (16-byte aligned).
__device__ __forceinline__ void load_act16(const i8* a, int* out) {
    int4 v = __ldg((const int4*)a);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
}

// 32 activations of one 32-value block.
__device__ __forceinline__ void load_act32(const i8* a, int* out) {
    load_act16(a, out);
    load_act16(a + 16, out + 4);
}

// ---- Legacy types: a unit is one block. `F::levels` gives its 32 levels as eight lane
// words (word l: weights 4l..4l+3 for l < 4, 16 + 4(l - 4).. after, as signed bytes; x86's
// maddubs/madd lanes, against activation word l), its scale d and its minimum m (Q4_1/Q5_1;
// 0 for the others).

// Bits 4i..4i+3 of a Q5 block's `qh` moved to bit 4 of the four bytes.
__device__ __forceinline__ u32 fifth_bits(u32 qh, int i) { return high_pack(qh, i); }

// A legacy unit's weights (`F::levels`) and one token's activations for it, loaded apart so
// a product of several tokens (kernels/matvec_few.cu) decodes the weights once.
struct LegacyW {
    u32 w[8];
    float d, m;
};
struct LegacyA {
    int a[8];
    float d, x;
};

// The pieces every legacy type shares (`F` gives `levels` and HAS_MIN): a unit is a block,
// activations are Q8_0/Q8_1 (a scale, and Q8_1's sum, per 32 values).
template <typename F>
struct LegacyUnit {
    static const int QK = 32, UNITS = 1, AD_PER = 32, AX_PER = 32;
    typedef LegacyW W;
    typedef LegacyW D;
    typedef LegacyA A;
    __device__ static void load(const u8* b, int, W& w) { F::levels(b, w.w, &w.d, &w.m); }
    __device__ static void act(const i8* aq, const float* ad, const float* ax, int bi, int,
                               A& a) {
        load_act32(aq + 32 * bi, a.a);
        a.d = ad[bi];
        a.x = F::HAS_MIN ? ax[bi] : 0.0f;
    }
    // The block's dot product with its 32 activations, the lanes' integer sums added first
    // (any order: integers), then scaled: the unit `mvf_one` sums freely.
    __device__ static float dot(const W& w, const A& a) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) s = __dp4a((int)w.w[i], a.a[i], s);
        float r = w.d * a.d * (float)s;
        return F::HAS_MIN ? r + w.m * a.x : r;
    }    // Loaded is decoded.
    __device__ static void decode(const W& w, D& d) { d = w; }
    __device__ static float dot_decoded(const D& d, const A& a) { return dot(d, a); }
};

struct FQ4_0 : LegacyUnit<FQ4_0> {
    static const int BYTES = 18;
    static const bool HAS_MIN = false;
    __device__ static void levels(const u8* b, u32* w, float* d, float* m) {
        u32 q[4];
        load_words<4>(b + 2, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = __vsub4(q[i] & 0x0F0F0F0Fu, 0x08080808u);
            w[4 + i] = __vsub4((q[i] >> 4) & 0x0F0F0F0Fu, 0x08080808u);
        }
        *d = f16_at2(b);
        *m = 0.0f;
    }
};

struct FQ4_1 : LegacyUnit<FQ4_1> {
    static const int BYTES = 20;
    static const bool HAS_MIN = true;
    __device__ static void levels(const u8* b, u32* w, float* d, float* m) {
        u32 q[4], dm;
        load_words<1>(b, &dm);
        load_words<4>(b + 4, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = q[i] & 0x0F0F0F0Fu;
            w[4 + i] = (q[i] >> 4) & 0x0F0F0F0Fu;
        }
        *d = h2f((u16)dm);
        *m = h2f((u16)(dm >> 16));
    }
};

struct FQ5_0 : LegacyUnit<FQ5_0> {
    static const int BYTES = 22;
    static const bool HAS_MIN = false;
    __device__ static void levels(const u8* b, u32* w, float* d, float* m) {
        u32 q[4], qh;
        load_words<1>(b + 2, &qh);
        load_words<4>(b + 6, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = __vsub4((q[i] & 0x0F0F0F0Fu) | fifth_bits(qh, i), 0x10101010u);
            w[4 + i] = __vsub4(((q[i] >> 4) & 0x0F0F0F0Fu) | fifth_bits(qh, 4 + i), 0x10101010u);
        }
        *d = f16_at2(b);
        *m = 0.0f;
    }
};

struct FQ5_1 : LegacyUnit<FQ5_1> {
    static const int BYTES = 24;
    static const bool HAS_MIN = true;
    __device__ static void levels(const u8* b, u32* w, float* d, float* m) {
        u32 q[4], dh[2];
        load_words<2>(b, dh);
        load_words<4>(b + 8, q);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = (q[i] & 0x0F0F0F0Fu) | fifth_bits(dh[1], i);
            w[4 + i] = ((q[i] >> 4) & 0x0F0F0F0Fu) | fifth_bits(dh[1], 4 + i);
        }
        *d = h2f((u16)dh[0]);
        *m = h2f((u16)(dh[0] >> 16));
    }
};

// A Q8_0 block (34 bytes at an even address) from the three aligned 16-byte words holding
// it: a warp's 32 blocks span 1088 bytes, and each of `load_words`' nine 4-byte loads touched
// every L1 line of the span where these three loads touch them three times in all. The block
// starts at byte o (even) of the words: its scale is half o / 2 of the twelve 32-bit words,
// and its values start at word (o + 2) / 4, 2-byte aligned or not, which selects (not a
// run-time register index) move to word 0 before the funnel shifts.
__device__ __forceinline__ void q8_0_block(const u8* b, u32* w, float* d) {
    const uint4* a = (const uint4*)((u64)b & ~(u64)15);
    const u32 o = (u32)((u64)b & 15), s = (o + 2) >> 2, sh = 8u * ((o + 2) & 3);
    u32 x[13];
#pragma unroll
    for (int i = 0; i < 3; i++) {
        uint4 v = ldg_once(a + i);
        x[4 * i] = v.x, x[4 * i + 1] = v.y, x[4 * i + 2] = v.z, x[4 * i + 3] = v.w;
    }
    x[12] = 0u;
    u32 sw = (o & 8) ? ((o & 4) ? x[3] : x[2]) : ((o & 4) ? x[1] : x[0]);
    *d = h2f((u16)((o & 2) ? sw >> 16 : sw));
#pragma unroll
    for (int k = 0; k < 12; k++) x[k] = (s & 1) ? x[k + 1] : x[k];
#pragma unroll
    for (int k = 0; k < 11; k++) x[k] = (s & 2) ? x[k + 2] : x[k];
#pragma unroll
    for (int k = 0; k < 9; k++) x[k] = (s & 4) ? x[k + 4] : x[k];
#pragma unroll
    for (int k = 0; k < 8; k++) w[k] = __funnelshift_r(x[k], x[k + 1], sh);
}

struct FQ8_0 : LegacyUnit<FQ8_0> {
    static const int BYTES = 34;
    static const bool HAS_MIN = false;
    __device__ static void levels(const u8* b, u32* w, float* d, float* m) {
        q8_0_block(b, w, d);
        *m = 0.0f;
    }
};

// ---- K-quants: four units of 64 weights per 256-weight block.

// Byte k (run-time) of word w.
__device__ __forceinline__ int byte_of(u32 w, int k) { return (int)((w >> (8 * k)) & 0xFFu); }

// Sub-block j's scale and min from a Q4_K/Q5_K block's first four words (d/dmin, then the
// 12 scale bytes q[0..12]): j < 4: q[j] & 63, q[j + 4] & 63; else the low or high nibble of
// q[j + 4] with the top two bits of q[j - 4] / q[j].
__device__ __forceinline__ void k4_scale_min(const u32* sw, int j, int* sc, int* m) {
    int jj = j & 3;
    int a = byte_of(sw[1], jj), b = byte_of(sw[2], jj), c = byte_of(sw[3], jj);
    if (j < 4) {
        *sc = a & 63;
        *m = b & 63;
    } else {
        *sc = (c & 15) | ((a >> 6) << 4);
        *m = (c >> 4) | ((b >> 6) << 4);
    }
}

// Q4_K / Q5_K: unit u is sub-blocks 2u (low nibbles of qs[32u..32u+32]) and 2u + 1 (high
// nibbles); value d * sc * q - dmin * m. Q5_K adds bit 2u / 2u + 1 of qh[i] as the fifth bit.
// The weights decode to the two sub-blocks' levels as lane words, their 6-bit scales and mins
// and the block's d and dmin (`K45W`); a token's share (`K45A`) is its 64 activations, their
// four bsums and its scale.
struct K45W {
    u32 lo[8], hi[8];
    int c0, m0, c1, m1;
    float d, dmin;
};
struct K45A {
    int a[16];
    float4 bs;
    float d;
};

template <bool FIVE>
struct K45Unit {
    static const int QK = 256, UNITS = 4, AD_PER = 256, AX_PER = 16;
    typedef K45W W;
    typedef K45W D;
    typedef K45A A;
    __device__ static void load(const u8* b, int u, W& w) {
        const int QS = FIVE ? 48 : 16;
        uint4 v0 = ldg_once((const uint4*)(b + QS + 32 * u));
        uint4 v1 = ldg_once((const uint4*)(b + QS + 32 * u + 16));
        u32 q[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        u32 h[8];
        if (FIVE) {
            uint4 h0 = ldg_once((const uint4*)(b + 16)), h1 = ldg_once((const uint4*)(b + 32));
            h[0] = h0.x, h[1] = h0.y, h[2] = h0.z, h[3] = h0.w;
            h[4] = h1.x, h[5] = h1.y, h[6] = h1.z, h[7] = h1.w;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            w.lo[i] = q[i] & 0x0F0F0F0Fu;
            w.hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
            if (FIVE) {
                w.lo[i] |= ((h[i] >> (2 * u)) & 0x01010101u) << 4;
                w.hi[i] |= ((h[i] >> (2 * u + 1)) & 0x01010101u) << 4;
            }
        }
        // d, dmin and the 12 packed scale bytes, in one 16-byte load (Q4_K and Q5_K blocks of
        // 144 and 176 bytes start 16-byte aligned in rows that do); sub-block j's 6-bit scale
        // and min as ggml's get_scale_min_k4, from the words (a byte array indexed at run time
        // would live in local memory).
        const uint4 hv = ldg_once((const uint4*)b);
        const u32 sw[4] = {hv.x, hv.y, hv.z, hv.w};
        k4_scale_min(sw, 2 * u, &w.c0, &w.m0);
        k4_scale_min(sw, 2 * u + 1, &w.c1, &w.m1);
        w.d = h2f((u16)sw[0]);
        w.dmin = h2f((u16)(sw[0] >> 16));
    }
    __device__ static void act(const i8* aq, const float* ad, const float* ax, int bi, int u,
                               A& a) {
#pragma unroll
        for (int i = 0; i < 4; i++) load_act16(aq + 256 * bi + 64 * u + 16 * i, a.a + 4 * i);
        a.bs = __ldg((const float4*)(ax + 16 * bi + 4 * u));
        a.d = ad[bi];
    }
    __device__ static float dot(const W& w, const A& a) {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            s0 = __dp4a((int)w.lo[i], a.a[i], s0);
            s1 = __dp4a((int)w.hi[i], a.a[8 + i], s1);
        }
        float sumi = (float)(w.c0 * s0 + w.c1 * s1);
        float mins = (float)w.m0 * (a.bs.x + a.bs.y) + (float)w.m1 * (a.bs.z + a.bs.w);
        return a.d * (w.d * sumi - w.dmin * mins);
    }    // Loaded is decoded.
    __device__ static void decode(const W& w, D& d) { d = w; }
    __device__ static float dot_decoded(const D& d, const A& a) { return dot(d, a); }
};

struct FQ4_K : K45Unit<false> {
    static const int BYTES = 144;
};

struct FQ5_K : K45Unit<true> {
    static const int BYTES = 176;
};

// Q6_K, Q3_K and Q2_K share a layout of 2-bit (or 4-bit) planes: weight 128h + 32k + l
// (half h, quarter k, l < 32) sits in byte l of half h's planes, scale (8h + 2k + l / 16).
// Unit u = (h = u / 2, s = u % 2) takes l in 16s..16s + 16 of all four quarters: four groups
// of 16 weights, group k against activations 128h + 32k + 16s.
__device__ __forceinline__ void plane_acts(const i8* aq, int bi, int h, int s, int a[4][4]) {
#pragma unroll
    for (int k = 0; k < 4; k++) load_act16(aq + 256 * bi + 128 * h + 32 * k + 16 * s, a[k]);
}

__device__ __forceinline__ int dot16(const u32* q, const int* a) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) s = __dp4a((int)q[i], a[i], s);
    return s;
}

// A plane unit's weights as loaded (`PlaneRaw`): the words its levels come from (`r`: Q6_K's
// low and high planes, Q3_K's quants and high-bit mask, Q2_K's quants; `h`, the half), the
// four groups' scales (Q2_K: the low nibble, and the min in `mn`), the block's d (and Q2_K's
// dmin). `F::group` decodes group k's 16 levels as signed lane bytes: the one-token product
// decodes each group as it multiplies it (as few words live as the raw planes), the
// few-token product all four once (`PlaneLevels`) for all its tokens. A token's share
// (`PlaneA`): the four groups' activations, their bsums (Q2_K) and its scale.
struct PlaneRaw {
    u32 r[12];
    int h;
    int sc[4], mn[4];
    float d, dmin;
};
struct PlaneLevels {
    u32 q[4][4];
    int sc[4], mn[4];
    float d, dmin;
};
struct PlaneA {
    int a[4][4];
    float x[4];
    float d;
};

// The activation side, the decode and the dot products the plane types share (`F` gives
// `load` and `group`); `MINS`: Q2_K's min term, against the groups' bsums.
template <typename F, bool MINS>
struct PlaneUnit {
    static const int QK = 256, UNITS = 4, AD_PER = 256, AX_PER = 16;
    typedef PlaneRaw W;
    typedef PlaneLevels D;
    typedef PlaneA A;
    __device__ static void act(const i8* aq, const float* ad, const float* ax, int bi, int u,
                               A& a) {
        int h = u >> 1, s = u & 1;
        plane_acts(aq, bi, h, s, a.a);
        if (MINS) {
#pragma unroll
            for (int k = 0; k < 4; k++) a.x[k] = ax[16 * bi + 8 * h + 2 * k + s];
        }
        a.d = ad[bi];
    }
    // The groups' integer sums scaled and added, then the block's scales: from the levels of
    // `group(k, q)`.
    template <typename G>
    __device__ static float finish(const G& group, const int* sc, const int* mn, float d,
                                   float dmin, const A& a) {
        int total = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            u32 q[4];
            group(k, q);
            total += sc[k] * dot16(q, a.a[k]);
        }
        if (!MINS) return d * a.d * (float)total;
        float mins = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; k++) mins += (float)mn[k] * a.x[k];
        return a.d * (d * (float)total - dmin * mins);
    }
    __device__ static float dot(const W& w, const A& a) {
        return finish([&](int k, u32* q) { F::group(w, k, q); }, w.sc, w.mn, w.d, w.dmin, a);
    }
    __device__ static void decode(const W& w, D& l) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            F::group(w, k, l.q[k]);
            l.sc[k] = w.sc[k];
            l.mn[k] = w.mn[k];
        }
        l.d = w.d;
        l.dmin = w.dmin;
    }
    __device__ static float dot_decoded(const D& l, const A& a) {
        return finish(
            [&](int k, u32* q) {
#pragma unroll
                for (int i = 0; i < 4; i++) q[i] = l.q[k][i];
            },
            l.sc, l.mn, l.d, l.dmin, a);
    }
};

struct FQ6_K : PlaneUnit<FQ6_K, false> {
    static const int BYTES = 210;
    __device__ static void load(const u8* b, int u, W& w) {
        int h = u >> 1, s = u & 1;
        u32 sw[2], dw;
        load_words<4>(b + 64 * h + 16 * s, w.r);
        load_words<4>(b + 64 * h + 32 + 16 * s, w.r + 4);
        load_words<4>(b + 128 + 32 * h + 16 * s, w.r + 8);
        load_words<2>(b + 192 + 8 * h, sw);
        load_words<1>(b + 208, &dw);
        // Scale byte 2k + s of the half's eight: in word k / 2 (known when compiling).
#pragma unroll
        for (int k = 0; k < 4; k++) w.sc[k] = (int)(i8)(u8)byte_of(sw[k >> 1], (2 * k + s) & 3);
        w.d = h2f((u16)dw);
    }
    // Low nibbles of plane A (k = 0, 2: shifted by 0, 4) or B (k = 1, 3), two high bits of H.
    __device__ static void group(const W& w, int k, u32* q) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            u32 low = ((k & 1) ? w.r[4 + i] : w.r[i]) >> (4 * (k >> 1));
            u32 high = ((w.r[8 + i] >> (2 * k)) & 0x03030303u) << 4;
            q[i] = __vsub4((low & 0x0F0F0F0Fu) | high, 0x20202020u);
        }
    }
};

struct FQ3_K : PlaneUnit<FQ3_K, false> {
    static const int BYTES = 110;
    __device__ static void load(const u8* b, int u, W& w) {
        int h = u >> 1, s = u & 1;
        u32 sw[3], dw;
        load_words<4>(b + 32 + 32 * h + 16 * s, w.r);
        load_words<4>(b + 16 * s, w.r + 4);
        load_words<3>(b + 96, sw);
        load_words<1>(b + 108, &dw);
        w.h = h;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            // Scale sj = 8h + 2k + s: a nibble of byte sj % 8 (word k / 2), two bits of byte
            // 8 + sj % 4 (word 2).
            int lb = (2 * k + s) & 3;
            int lo_byte = byte_of(sw[k >> 1], lb);
            int sl = h == 0 ? (lo_byte & 15) : (lo_byte >> 4);
            int sh = (byte_of(sw[2], lb) >> (2 * (2 * h + (k >> 1)))) & 3;
            w.sc[k] = (sl | (sh << 4)) - 32;
        }
        w.d = h2f((u16)dw);
    }
    // Two bits of the quants, the high bit from the mask (bit 4h + k).
    __device__ static void group(const W& w, int k, u32* q) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            u32 low = (w.r[i] >> (2 * k)) & 0x03030303u;
            u32 high = (w.r[4 + i] >> (4 * w.h + k)) & 0x01010101u;
            q[i] = __vsub4(low | (high << 2), 0x04040404u);
        }
    }
};

struct FQ2_K : PlaneUnit<FQ2_K, true> {
    static const int BYTES = 84;
    __device__ static void load(const u8* b, int u, W& w) {
        int h = u >> 1, s = u & 1;
        u32 sw[2], dw;
        load_words<4>(b + 16 + 32 * h + 16 * s, w.r);
        load_words<2>(b + 8 * h, sw);
        load_words<1>(b + 80, &dw);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int sc = byte_of(sw[k >> 1], (2 * k + s) & 3);
            w.sc[k] = sc & 15;
            w.mn[k] = sc >> 4;
        }
        w.d = h2f((u16)dw);
        w.dmin = h2f((u16)(dw >> 16));
    }
    __device__ static void group(const W& w, int k, u32* q) {
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = (w.r[i] >> (2 * k)) & 0x03030303u;
    }
};

// One unit's dot product with one token's activations (`aq`, `ad`, `ax` that token's):
// the type's weights decoded, then multiplied.
template <typename F>
__device__ __forceinline__ float fast_unit(const u8* b, int u, const i8* aq, const float* ad,
                                           const float* ax, int bi) {
    typename F::W w;
    F::load(b, u, w);
    typename F::A a;
    F::act(aq, ad, ax, bi, u, a);
    return F::dot(w, a);
}

// ---- Several products of one input in one launch (Q, K, V; gate and up) -----------------
// Up to three matrices whose activation format is the same (the engine checks: quantized
// types against `aq`/`ad`/`ax`, or float types of one rounding against `xf`, whole 16-byte
// rows), each with its own output and bias; matrix i takes blocks
// first_block[i]..first_block[i + 1] (four rows per block). `ty`, a GGML type id
// (GGML_TYPE_*, common.cuh), selects the unit.
struct MvfSet {
    MvfMat m[3];
    int count;
    // Legacy matrices in the CPU's order (`mvo_one`, with its dynamic shared memory).
    int ordered;
};

// The matrix block `b` of a set's launch belongs to, chosen field by field (no run-time index
// into the parameter struct).
__device__ __forceinline__ MvfMat mvf_set_mat(const MvfSet& set, int b) {
    int i = (set.count > 2 && b >= set.m[2].first_block) ? 2
          : (set.count > 1 && b >= set.m[1].first_block) ? 1 : 0;
    return i == 2 ? set.m[2] : i == 1 ? set.m[1] : set.m[0];
}

// Four rows of matrix m per block of 128 threads (`block` counts within m): a warp per row,
// `fast_unit` gives one unit's share.
// `bias`: the row's bias read ahead (`mvf_bias`) when PRE_BIAS, else read here.
template <typename F, bool PRE_BIAS = true>
__device__ __forceinline__ void mvf_one(const MvfMat& m, int block, int cols, const i8* aq,
                                        const float* ad, const float* ax, int accumulate,
                                        float bias, const KernelStart& st) {
    int lane = threadIdx.x & 31;
    int r = block * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= m.rows) {
        if (threadIdx.x == 0) st.end();
        return;
    }
    const u8* row = m.w + (u64)r * m.row_bytes;
    int units = (cols / F::QK) * F::UNITS;
    float acc = 0.0f;
#pragma unroll 2
    for (int u = lane; u < units; u += 32) {
        int bi = u / F::UNITS;
        acc += fast_unit<F>(row + (u64)bi * F::BYTES, u % F::UNITS, aq, ad, ax, bi);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        if (m.bias) acc = __fadd_rn(acc, PRE_BIAS ? bias : __ldg(m.bias + r));
        store_out(acc, nullptr, accumulate, m.rows, r, 0, m.out);
        // Thread 0's last store is issued: its end, with no exit path to reconverge on
        // (`STAMP_GUARD`'s destructor made a decode step ~3% slower).
        if (threadIdx.x == 0) st.end();
    }
}

// ---- Legacy types in the CPU's float order --------------------------------------------
// The exact kernels' arithmetic (kernels/common.cuh: per lane l, lane = fma(d_w * d_a, isum,
// lane) block after block; hsum_float_8 of the lanes plus the in-order sum of m_w * s_a) at
// the fast kernels' shape: a warp per row, a block per thread, so one token's legacy products
// give the CPU's bits. The engine takes them where every decode product can keep the CPU's
// order (src/engine/cuda/kernel_table.rs `cpu_order_fast`); elsewhere `mvf_one` sums freely, as
// the serial fold costs time (measured: docs/measurements/kernels.md).
// Lane sums of 32 blocks at a time go through shared memory; lanes 0..7 then fold them in
// block order while the next 32 blocks' loads are in flight.

// One warp's share of the launch's dynamic shared memory (the host gives a `MvoWarp` per warp,
// `MVO_BYTES` in src/engine/cuda/launch_params.rs): the eight lane sums of 32 blocks as
// floats ([lane][block]; rows 36 apart, so a lane's 16-byte reads and the blocks' writes hit
// distinct banks), and each block's d_w * d_a and m_w * s_a.
struct __align__(16) MvoWarp {
    float s[8][36];
    float dd[32];
    float ex[32];
};
extern __shared__ MvoWarp mvo_dyn[];

// A legacy block's operands, loaded ahead of their use.
struct MvoBlock {
    u32 w[8];
    int a[8];
    float d, m, ad, ax;
};

template <typename F>
__device__ __forceinline__ void mvo_load(const u8* row, int bi, const i8* aq, const float* ad,
                                         const float* ax, MvoBlock& k) {
    F::levels(row + (u64)bi * F::BYTES, k.w, &k.d, &k.m);
    load_act32(aq + 32 * bi, k.a);
    k.ad = ad[bi];
    k.ax = F::HAS_MIN ? ax[bi] : 0.0f;
}

template <typename F, bool PRE_BIAS = true>
__device__ __forceinline__ void mvo_one(const MvfMat& m, int block, int cols, const i8* aq,
                                        const float* ad, const float* ax, int accumulate,
                                        float bias, const KernelStart& st) {
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
    int r = block * (blockDim.x >> 5) + wi;
    if (r >= m.rows) {
        if (threadIdx.x == 0) st.end();
        return;
    }
    MvoWarp& sh = mvo_dyn[wi];
    const u8* row = m.w + (u64)r * m.row_bytes;
    int nb = cols / 32;
    MvoBlock k;
    bool have = lane < nb;
    if (have) mvo_load<F>(row, lane, aq, ad, ax, k);
    // Lanes 0..7: their lane's running sum, and (each, the same) the running extra.
    float acc = 0.0f, extra = 0.0f;
    for (int c0 = 0; c0 < nb; c0 += 32) {
        if (have) {
#pragma unroll
            for (int l = 0; l < 8; l++) sh.s[l][lane] = (float)__dp4a((int)k.w[l], k.a[l], 0);
            sh.dd[lane] = __fmul_rn(k.d, k.ad);
            if (F::HAS_MIN) sh.ex[lane] = __fmul_rn(k.m, k.ax);
        }
        __syncwarp();
        have = c0 + 32 + lane < nb;
        if (have) mvo_load<F>(row, c0 + 32 + lane, aq, ad, ax, k);
        int n = min(32, nb - c0);
        if (lane < 8) {
            for (int b = 0; b < n; b += 4) {
                float4 s4 = *(const float4*)&sh.s[lane][b];
                float4 d4 = *(const float4*)&sh.dd[b];
                float sv[4] = {s4.x, s4.y, s4.z, s4.w}, dv[4] = {d4.x, d4.y, d4.z, d4.w};
                float ev[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (F::HAS_MIN) {
                    float4 e4 = *(const float4*)&sh.ex[b];
                    ev[0] = e4.x, ev[1] = e4.y, ev[2] = e4.z, ev[3] = e4.w;
                }
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    if (b + i < n) {
                        acc = fmaf(dv[i], sv[i], acc);
                        if (F::HAS_MIN) extra = __fadd_rn(extra, ev[i]);
                    }
                }
            }
        }
        __syncwarp();
    }
    // hsum_float_8: lane l < 4 adds lane l + 4, then pairs, then the last two.
    float t = __fadd_rn(acc, __shfl_down_sync(0xffffffffu, acc, 4));
    t = __fadd_rn(t, __shfl_down_sync(0xffffffffu, t, 2));
    t = __fadd_rn(t, __shfl_down_sync(0xffffffffu, t, 1));
    if (lane == 0) {
        float v = __fadd_rn(t, extra);
        if (m.bias) v = __fadd_rn(v, PRE_BIAS ? bias : __ldg(m.bias + r));
        store_out(v, nullptr, accumulate, m.rows, r, 0, m.out);
        if (threadIdx.x == 0) st.end();
    }
}

// A legacy matrix of `mvf_multi`: in the CPU's order when the set asks for it.
#define MVF_LEGACY(F)                                                                        \
    if (set.ordered) mvo_one<F>(m, block, cols, aq, ad, ax, accumulate, bias, stamp_start_); \
    else mvf_one<F>(m, block, cols, aq, ad, ax, accumulate, bias, stamp_start_);             \
    break
// A k-quant matrix of `mvf_multi`: always summed freely (`mvo_one` is legacy only).
#define MVF_K(F)                                                                             \
    mvf_one<F>(m, block, cols, aq, ad, ax, accumulate, bias, stamp_start_);                  \
    break
// Lane 0's bias for its warp's row (0 without one). Biases are constant: `mvf_multi` (which
// runs qwen2's biased Q, K and V) reads them before waiting on the kernel ahead, so the load
// overlaps that kernel instead of ending this one's chain after the row's sum. The
// one-matrix kernels (no bias in decode) read it at the end and keep their registers.
__device__ __forceinline__ float mvf_bias(const MvfMat& m, int block) {
    int r = block * (blockDim.x >> 5) + (threadIdx.x >> 5);
    return m.bias && r < m.rows && (threadIdx.x & 31) == 0 ? __ldg(m.bias + r) : 0.0f;
}

extern "C" __global__ void mvf_multi(MvfSet set, int cols, const i8* __restrict__ aq,
                                     const float* __restrict__ ad,
                                     const float* __restrict__ ax,
                                     const float* __restrict__ xf, int accumulate,
                                     STAMP_PARAMS) {
    MvfMat m = mvf_set_mat(set, blockIdx.x);
    int block = (int)blockIdx.x - m.first_block;
    mvf_prefetch(m, block);
    float bias = mvf_bias(m, block);
    STAMP_START;
    switch (m.ty) {
    case GGML_TYPE_Q4_0: MVF_LEGACY(FQ4_0);
    case GGML_TYPE_Q4_1: MVF_LEGACY(FQ4_1);
    case GGML_TYPE_Q5_0: MVF_LEGACY(FQ5_0);
    case GGML_TYPE_Q5_1: MVF_LEGACY(FQ5_1);
    case GGML_TYPE_Q8_0: MVF_LEGACY(FQ8_0);
    case GGML_TYPE_Q2_K: MVF_K(FQ2_K);
    case GGML_TYPE_Q3_K: MVF_K(FQ3_K);
    case GGML_TYPE_Q4_K: MVF_K(FQ4_K);
    case GGML_TYPE_Q5_K: MVF_K(FQ5_K);
    case GGML_TYPE_Q6_K: MVF_K(FQ6_K);
    case GGML_TYPE_F32: mvf_float_one<WideF32>(m, block, xf, accumulate, stamp_start_); break;
    case GGML_TYPE_F16: mvf_float_one<WideF16>(m, block, xf, accumulate, stamp_start_); break;
    case GGML_TYPE_BF16: mvf_float_one<WideBF16>(m, block, xf, accumulate, stamp_start_); break;
    default:
        if (threadIdx.x == 0) stamp_start_.end();
        break;
    }
}

// mvf_<name>: the fast decode product of one quantized type, with the exact kernels'
// arguments (`n` must be 1); mvo_<name>: a legacy type's in the CPU's order.
#define CBTOP_MVF_KERNEL(prefix, name, F, ONE)                                               \
    extern "C" __global__ void prefix##_##name(const u8* w, u64 rb, int rows, int cols, \
                                          const i8* aq, const float* ad, const float* ax,    \
                                          int n, const float* bias, int acc, float* out,     \
                                          STAMP_PARAMS) {                                    \
        MvfMat m = {w, rb, bias, out, rows, 0, 0, 0x11};                                      \
        mvf_prefetch(m, blockIdx.x);                                                         \
        STAMP_START;                                                                         \
        ONE<F, false>(m, blockIdx.x, cols, aq, ad, ax, acc, 0.0f, stamp_start_);             \
    }

CBTOP_MVF_KERNEL(mvf, q4_0, FQ4_0, mvf_one)
CBTOP_MVF_KERNEL(mvo, q4_0, FQ4_0, mvo_one)
CBTOP_MVF_KERNEL(mvf, q4_1, FQ4_1, mvf_one)
CBTOP_MVF_KERNEL(mvo, q4_1, FQ4_1, mvo_one)
CBTOP_MVF_KERNEL(mvf, q5_0, FQ5_0, mvf_one)
CBTOP_MVF_KERNEL(mvo, q5_0, FQ5_0, mvo_one)
CBTOP_MVF_KERNEL(mvf, q5_1, FQ5_1, mvf_one)
CBTOP_MVF_KERNEL(mvo, q5_1, FQ5_1, mvo_one)
CBTOP_MVF_KERNEL(mvf, q8_0, FQ8_0, mvf_one)
CBTOP_MVF_KERNEL(mvo, q8_0, FQ8_0, mvo_one)
CBTOP_MVF_KERNEL(mvf, q2_k, FQ2_K, mvf_one)
CBTOP_MVF_KERNEL(mvf, q3_k, FQ3_K, mvf_one)
CBTOP_MVF_KERNEL(mvf, q4_k, FQ4_K, mvf_one)
CBTOP_MVF_KERNEL(mvf, q5_k, FQ5_K, mvf_one)
CBTOP_MVF_KERNEL(mvf, q6_k, FQ6_K, mvf_one)
