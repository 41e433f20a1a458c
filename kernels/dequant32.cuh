// Per-type dequantization of 32 consecutive weights (one scale group) to floats, shared by
// the expansion to f16 (kernels/gemm_f16.cu `dequant_f16_*`) and the tensor-core products
// that dequantize quantized weights in shared memory (kernels/gemm_q.cu), so both take the
// same values. Included after the per-type dequantizers (`DeqQ4_K`, ... in matvec_*.cu).

// (float)u - off, exactly, for 0 <= u < 2^23 and a small whole `off`: the float 2^23 + u (u in
// its mantissa) less 2^23 + off. A logic op and an add at full rate, where an int-to-float
// conversion issues at a quarter of it; the values are the conversion's, bit for bit.
__device__ __forceinline__ float int_minus(int u, float off) {
    return __int_as_float(0x4B000000 | u) - (8388608.0f + off);
}

// The 32 bytes at p as 8 little-endian words: whole-word loads where p is 4-byte aligned
// (fields of Q4_K / Q5_K blocks, 144 and 176 bytes), else two 16-bit loads a word (every
// block size is even, so a field keeps its 2-byte alignment): a quarter or half the loads of
// a byte at a time. `qbyte` picks byte e back out.
template <bool ALIGN4>
__device__ __forceinline__ void load32(const u8* p, u32* w) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = ALIGN4 ? u32_at4(p + 4 * i) : u32_at2(p + 4 * i);
}

__device__ __forceinline__ int qbyte(const u32* w, int e) {
    return (int)((w[e >> 2] >> (8 * (e & 3))) & 255);
}

// 32 consecutive values of a row from j0 (a multiple of 32): every type's values come in
// groups of 32 under one scale. The general form asks the type's dequantizer value by value;
// the k-quants that dominate Q4_K_M files decode their group's scale once (the same float
// steps, so the same values).
template <typename D>
struct Deq32 {
    __device__ static void run(const u8* row, int j0, float* v) {
#pragma unroll
        for (int e = 0; e < 32; e++) v[e] = full_value<D>(row, j0 + e);
    }
};

template <>
struct Deq32<DeqQ4_K> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 8) * 144;
        int sb = (j0 & 255) >> 5;
        int sc, m;
        scale_min_k4(sb, b + 4, &sc, &m);
        float d = f16_at(b) * (float)sc, dm = f16_at(b + 2) * (float)m;
        u32 qs[8];
        load32<true>(b + 16 + 32 * (sb >> 1), qs);
        int shift = (sb & 1) * 4;
#pragma unroll
        for (int e = 0; e < 32; e++) v[e] = d * int_minus((qbyte(qs, e) >> shift) & 15, 0.0f) - dm;
    }
};

template <>
struct Deq32<DeqQ6_K> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 8) * 210;
        int w = j0 & 255;
        int h = w >> 7, k = (w & 127) >> 5;
        u32 lo[8], hi[8];
        load32<false>(b + 64 * h + 32 * (k & 1), lo);
        load32<false>(b + 128 + 32 * h, hi);
        int lshift = k < 2 ? 0 : 4;
        float d = f16_at(b + 208);
        float s0 = d * (float)(i8)b[192 + (w >> 4)], s1 = d * (float)(i8)b[192 + (w >> 4) + 1];
#pragma unroll
        for (int e = 0; e < 32; e++) {
            int q = ((qbyte(lo, e) >> lshift) & 15) | (((qbyte(hi, e) >> (2 * k)) & 3) << 4);
            v[e] = (e < 16 ? s0 : s1) * int_minus(q, 32.0f);
        }
    }
};

template <>
struct Deq32<DeqQ8_0> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 5) * 34;
        float d = f16_at(b);
        u32 qs[8];
        load32<false>(b + 2, qs);
#pragma unroll
        for (int e = 0; e < 32; e++) v[e] = d * int_minus(qbyte(qs, e) ^ 0x80, 128.0f);
    }
};


template <>
struct Deq32<DeqQ4_0> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 5) * 18;
        float d = f16_at(b);
#pragma unroll
        for (int e = 0; e < 16; e++) {
            v[e] = int_minus(b[2 + e] & 15, 8.0f) * d;
            v[e + 16] = int_minus(b[2 + e] >> 4, 8.0f) * d;
        }
    }
};

template <>
struct Deq32<DeqQ5_0> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 5) * 22;
        float d = f16_at(b);
        u32 qh = u32_at(b + 2);
#pragma unroll
        for (int e = 0; e < 16; e++) {
            int lo = (b[6 + e] & 15) | (((qh >> e) & 1) << 4);
            int hi = (b[6 + e] >> 4) | (((qh >> (e + 16)) & 1) << 4);
            v[e] = int_minus(lo, 16.0f) * d;
            v[e + 16] = int_minus(hi, 16.0f) * d;
        }
    }
};

template <>
struct Deq32<DeqQ5_K> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 8) * 176;
        int sb = (j0 & 255) >> 5;
        int sc, m;
        scale_min_k4(sb, b + 4, &sc, &m);
        float d = f16_at(b) * (float)sc, dm = f16_at(b + 2) * (float)m;
        u32 qs[8], qh[8];
        load32<true>(b + 48 + 32 * (sb >> 1), qs);
        load32<true>(b + 16, qh);
        int shift = (sb & 1) * 4;
#pragma unroll
        for (int e = 0; e < 32; e++) {
            int q = ((qbyte(qs, e) >> shift) & 15) | (((qbyte(qh, e) >> sb) & 1) << 4);
            v[e] = d * int_minus(q, 0.0f) - dm;
        }
    }
};

// Q3_K's 6-bit scale `sj` (of 16), as DeqQ3_K unpacks it.
__device__ __forceinline__ int q3k_scale(const u8* s, int sj) {
    int sl = sj < 8 ? (s[sj] & 15) : (s[sj - 8] >> 4);
    int sh = (s[8 + (sj & 3)] >> (2 * (sj >> 2))) & 3;
    return (sl | (sh << 4)) - 32;
}

template <>
struct Deq32<DeqQ3_K> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 8) * 110;
        int w = j0 & 255, sub = w >> 5;
        const u8* lo = b + 32 + 32 * (w >> 7);
        int shift = 2 * (sub & 3);
        float d = f16_at(b + 108);
        float s0 = d * (float)q3k_scale(b + 96, w >> 4);
        float s1 = d * (float)q3k_scale(b + 96, (w >> 4) + 1);
#pragma unroll
        for (int e = 0; e < 32; e++) {
            // low - 4 + 4 * high: the high bit clear subtracts 4.
            int q = ((lo[e] >> shift) & 3) | (((b[e] >> sub) & 1) << 2);
            v[e] = (e < 16 ? s0 : s1) * int_minus(q, 4.0f);
        }
    }
};

// lo and hi rounded to f16 and packed (lo in the low half), in one conversion.
__device__ __forceinline__ u32 f2h2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Packed f16x2 arithmetic, each rounded once.
__device__ __forceinline__ u32 hsub2_u(u32 a, u32 b) {
    u32 r;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
__device__ __forceinline__ u32 hmul2_u(u32 a, u32 b) {
    u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
__device__ __forceinline__ u32 hfma2_u(u32 a, u32 b, u32 c) {
    u32 r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}

// Bytes 0, 1 (lo) or 2, 3 (hi) of x, each below 256, as the f16 pair 1024 + byte: the byte
// in the mantissa of 1024 (0x6400), one permute for two values.
__device__ __forceinline__ u32 bytes_lo_h2(u32 x) { return __byte_perm(x, 0x64646464u, 0x4140); }
__device__ __forceinline__ u32 bytes_hi_h2(u32 x) { return __byte_perm(x, 0x64646464u, 0x4342); }

// 32 consecutive values of a row from j0 as 16 packed f16 pairs (h[i] = values 2i, 2i + 1),
// for the tensor-core products that read quantized weights (kernels/gemm_q.cu). The general
// form rounds `Deq32`'s floats; the types of the common files work on f16 pairs from the
// quantized bytes directly (a permute, a subtract and a multiply or fma for two values, where
// the floats take about seven instructions a value), with the group's scale rounded to f16
// first: within twice the f16 rounding of the float form.
template <typename D>
struct Deq32h {
    __device__ static void run(const u8* row, int j0, u32* h) {
        float v[32];
        Deq32<D>::run(row, j0, v);
#pragma unroll
        for (int i = 0; i < 16; i++) h[i] = f2h2(v[2 * i], v[2 * i + 1]);
    }
};

template <>
struct Deq32h<DeqQ4_K> {
    __device__ static void run(const u8* row, int j0, u32* h) {
        const u8* b = row + (j0 >> 8) * 144;
        int sb = (j0 & 255) >> 5;
        int sc, m;
        scale_min_k4(sb, b + 4, &sc, &m);
        float d = f16_at(b) * (float)sc, dm = f16_at(b + 2) * (float)m;
        const u32 d2 = f2h2(d, d), m2 = f2h2(-dm, -dm);
        u32 qs[8];
        load32<true>(b + 16 + 32 * (sb >> 1), qs);
        int shift = (sb & 1) * 4;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            u32 x = (qs[i] >> shift) & 0x0F0F0F0Fu;
            h[2 * i] = hfma2_u(hsub2_u(bytes_lo_h2(x), 0x64006400u), d2, m2);
            h[2 * i + 1] = hfma2_u(hsub2_u(bytes_hi_h2(x), 0x64006400u), d2, m2);
        }
    }
};

template <>
struct Deq32h<DeqQ6_K> {
    __device__ static void run(const u8* row, int j0, u32* h) {
        const u8* b = row + (j0 >> 8) * 210;
        int w = j0 & 255;
        int hh = w >> 7, k = (w & 127) >> 5;
        u32 lo[8], hi[8];
        load32<false>(b + 64 * hh + 32 * (k & 1), lo);
        load32<false>(b + 128 + 32 * hh, hi);
        int lshift = k < 2 ? 0 : 4;
        float d = f16_at(b + 208);
        float s0 = d * (float)(i8)b[192 + (w >> 4)], s1 = d * (float)(i8)b[192 + (w >> 4) + 1];
        const u32 h0 = f2h2(s0, s0), h1 = f2h2(s1, s1);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            // Values 4i..4i + 3, each 0..63 in its byte; the first 16 take s0.
            u32 q = ((lo[i] >> lshift) & 0x0F0F0F0Fu) | (((hi[i] >> (2 * k)) & 0x03030303u) << 4);
            const u32 s = i < 4 ? h0 : h1;
            // 1024 + 32 (0x6420): q - 32 exactly.
            h[2 * i] = hmul2_u(hsub2_u(bytes_lo_h2(q), 0x64206420u), s);
            h[2 * i + 1] = hmul2_u(hsub2_u(bytes_hi_h2(q), 0x64206420u), s);
        }
    }
};

template <>
struct Deq32h<DeqQ8_0> {
    __device__ static void run(const u8* row, int j0, u32* h) {
        const u8* b = row + (j0 >> 5) * 34;
        float d = f16_at(b);
        const u32 d2 = f2h2(d, d);
        u32 qs[8];
        load32<false>(b + 2, qs);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            // Signed bytes biased to 0..255, then 1024 + 128 (0x6480) off: q exactly; d is an
            // f16 and q * d rounds once, so these are the float form's values bit for bit.
            u32 x = qs[i] ^ 0x80808080u;
            h[2 * i] = hmul2_u(hsub2_u(bytes_lo_h2(x), 0x64806480u), d2);
            h[2 * i + 1] = hmul2_u(hsub2_u(bytes_hi_h2(x), 0x64806480u), d2);
        }
    }
};
