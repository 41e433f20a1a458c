// Q4_K (144-byte blocks of 256: d, dmin, 12 packed 6-bit scales/mins, 128 bytes of nibbles)
// and Q5_K (176 bytes: the same plus 32 bytes of fifth bits), as src/quant/kquants.rs.

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

CBTOP_TYPE_KERNELS(q4_k, DeqQ4_K)
CBTOP_TYPE_KERNELS(q5_k, DeqQ5_K)
