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
        const u8* qs = b + 16 + 32 * (sb >> 1);
        int shift = (sb & 1) * 4;
#pragma unroll
        for (int e = 0; e < 32; e++) v[e] = d * int_minus((qs[e] >> shift) & 15, 0.0f) - dm;
    }
};

template <>
struct Deq32<DeqQ6_K> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 8) * 210;
        int w = j0 & 255;
        int h = w >> 7, k = (w & 127) >> 5;
        const u8* lo = b + 64 * h + 32 * (k & 1);
        const u8* hi = b + 128 + 32 * h;
        int lshift = k < 2 ? 0 : 4;
        float d = f16_at(b + 208);
        float s0 = d * (float)(i8)b[192 + (w >> 4)], s1 = d * (float)(i8)b[192 + (w >> 4) + 1];
#pragma unroll
        for (int e = 0; e < 32; e++) {
            int q = ((lo[e] >> lshift) & 15) | (((hi[e] >> (2 * k)) & 3) << 4);
            v[e] = (e < 16 ? s0 : s1) * int_minus(q, 32.0f);
        }
    }
};

template <>
struct Deq32<DeqQ8_0> {
    __device__ static void run(const u8* row, int j0, float* v) {
        const u8* b = row + (j0 >> 5) * 34;
        float d = f16_at(b);
#pragma unroll
        for (int e = 0; e < 32; e++) v[e] = d * int_minus(b[2 + e] ^ 0x80, 128.0f);
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
        const u8* qs = b + 48 + 32 * (sb >> 1);
        int shift = (sb & 1) * 4;
#pragma unroll
        for (int e = 0; e < 32; e++) {
            int q = ((qs[e] >> shift) & 15) | (((b[16 + e] >> sb) & 1) << 4);
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
