// Q6_K: 210-byte blocks of 256 weights: 128 bytes of low nibbles, 64 bytes of 2-bit highs,
// 16 int8 scales, f16 d; value d * scale * (q - 32), as src/quant/kquants.rs.

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

CBTOP_TYPE_KERNELS(q6_k, DeqQ6_K)
