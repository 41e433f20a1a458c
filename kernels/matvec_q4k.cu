// Q4_K (144-byte blocks of 256: d, dmin, 12 packed 6-bit scales/mins, 128 bytes of nibbles)
// and Q5_K (176 bytes: the same plus 32 bytes of fifth bits), as src/quant/kquants/.

// ggml's get_scale_min_k4: sub-block j's 6-bit scale and min.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

struct DeqQ4_K {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 8) * 144;
        int w = j & 255;
        u8 byte = b[16 + 32 * (w >> 6) + (w & 31)];
        int q = ((w >> 5) & 1) ? (byte >> 4) : (byte & 15);
        int sc, m;
        scale_min_k4(w >> 5, b + 4, &sc, &m);
        return f16_at(b) * (float)sc * (float)q - f16_at(b + 2) * (float)m;
    }
};

struct DeqQ5_K {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 8) * 176;
        int w = j & 255;
        u8 byte = b[48 + 32 * (w >> 6) + (w & 31)];
        int q = ((w >> 5) & 1) ? (byte >> 4) : (byte & 15);
        q |= ((b[16 + (w & 31)] >> (w >> 5)) & 1) << 4;
        int sc, m;
        scale_min_k4(w >> 5, b + 4, &sc, &m);
        return f16_at(b) * (float)sc * (float)q - f16_at(b + 2) * (float)m;
    }
};

// The min part of a Q4_K/Q5_K block as the CPU's sumf takes it: -(dmin_w * d_a) * sumi, with
// sumi = sum over the 16 bsums of bsum * min(sub-block); thread p < 16 takes bsum p.
__device__ __forceinline__ float k45_extra(const u8* b, const float* bsums, float da, int p) {
    int part = 0;
    if (p < 16) {
        int sc, m;
        scale_min_k4(p >> 1, b + 4, &sc, &m);
        part = (int)bsums[p] * m;
    }
    int sumi = bsum_reduce(part);
    return -__fmul_rn(__fmul_rn(f16_at(b + 2), da), (float)sumi);
}

// Thread p's weights p + 32k: nibble k & 1 of byte 32 * (k / 2) + p, sub-block k's scale.
// The 12 packed scale bytes at b + 4 (4-byte aligned in 144- and 176-byte blocks), in three
// loads.
__device__ __forceinline__ void k45_scale_bytes(const u8* b, u8* q) {
#pragma unroll
    for (int i = 0; i < 3; i++) {
        u32 v = u32_at4(b + 4 + 4 * i);
#pragma unroll
        for (int k = 0; k < 4; k++) q[4 * i + k] = (u8)(v >> (8 * k));
    }
}

struct KQ4_K {
    static const int BYTES = 144;
    static const bool FULL = false;
    __device__ static void elems(const u8* b, int p, int* sc, int* lv) {
        u8 q[12];
        k45_scale_bytes(b, q);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            u8 byte = b[16 + 32 * (k >> 1) + p];
            lv[k] = (k & 1) ? (byte >> 4) : (byte & 15);
            int m;
            scale_min_k4(k, q, &sc[k], &m);
        }
    }
    __device__ static float d(const u8* b) { return f16_at(b); }
    __device__ static float extra(const u8* b, const float* bsums, float da, int, int p) {
        return k45_extra(b, bsums, da, p);
    }
};

struct KQ5_K {
    static const int BYTES = 176;
    static const bool FULL = false;
    __device__ static void elems(const u8* b, int p, int* sc, int* lv) {
        u8 high = b[16 + p];
        u8 q[12];
        k45_scale_bytes(b, q);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            u8 byte = b[48 + 32 * (k >> 1) + p];
            lv[k] = ((k & 1) ? (byte >> 4) : (byte & 15)) | (((high >> k) & 1) << 4);
            int m;
            scale_min_k4(k, q, &sc[k], &m);
        }
    }
    __device__ static float d(const u8* b) { return f16_at(b); }
    __device__ static float extra(const u8* b, const float* bsums, float da, int, int p) {
        return k45_extra(b, bsums, da, p);
    }
};

CBTOP_EMBED(q4_k, DeqQ4_K)
CBTOP_EMBED(q5_k, DeqQ5_K)
CBTOP_QMV_KERNELS(q4_k, qmv_k, KQ4_K)
CBTOP_QMV_KERNELS(q5_k, qmv_k, KQ5_K)
