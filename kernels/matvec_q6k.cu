// Q6_K: 210-byte blocks of 256 weights: 128 bytes of low nibbles, 64 bytes of 2-bit highs,
// 16 int8 scales, f16 d; value d * scale * (q - 32), as src/quant/kquants/.

struct DeqQ6_K {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 8) * 210;
        int w = j & 255;
        int h = w >> 7, k = (w & 127) >> 5, l = w & 31;
        u8 byte = b[64 * h + l + 32 * (k & 1)];
        int low = k < 2 ? (byte & 15) : (byte >> 4);
        int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
        int q = (low | (high << 4)) - 32;
        return f16_at(b + 208) * (float)(i8)b[192 + (w >> 4)] * (float)q;
    }
};

// Thread p's weights p + 32k: half k / 4, quarter k % 4 of it, scale 2k + p / 16.
struct KQ6_K {
    static const int BYTES = 210;
    static const bool FULL = false;
    __device__ static void elems(const u8* b, int p, int* sc, int* lv) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int h = k >> 2, kk = k & 3;
            u8 byte = b[64 * h + p + 32 * (kk & 1)];
            int low = kk < 2 ? (byte & 15) : (byte >> 4);
            int high = (b[128 + 32 * h + p] >> (2 * kk)) & 3;
            lv[k] = (low | (high << 4)) - 32;
            sc[k] = (i8)b[192 + 2 * k + (p >> 4)];
        }
    }
    __device__ static float d(const u8* b) { return f16_at(b + 208); }
    __device__ static float extra(const u8*, const float*, float, int, int) { return 0.0f; }
};

CBTOP_EMBED(q6_k, DeqQ6_K)
CBTOP_QMV_KERNELS(q6_k, qmv_k, KQ6_K)
