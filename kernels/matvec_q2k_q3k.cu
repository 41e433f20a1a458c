// Q2_K (84-byte blocks: 16 scale/min bytes, 64 bytes of 2-bit levels, d, dmin) and Q3_K
// (110 bytes: 32 bytes of high-bit masks, 64 bytes of 2-bit levels, 12 packed 6-bit scales,
// d), as src/quant/kquants.rs.

struct DeqQ2_K {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 8) * 84;
        int w = j & 255;
        int q = (b[16 + 32 * (w >> 7) + (w & 31)] >> (2 * ((w & 127) >> 5))) & 3;
        u8 sc = b[w >> 4];
        float dl = f16_at(b + 80) * (float)(sc & 15);
        float ml = f16_at(b + 82) * (float)(sc >> 4);
        return dl * (float)q - ml;
    }
};

struct DeqQ3_K {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 8) * 110;
        int w = j & 255;
        int low = (b[32 + 32 * (w >> 7) + (w & 31)] >> (2 * ((w & 127) >> 5))) & 3;
        int high = (b[w & 31] >> (w >> 5)) & 1;
        int q = low - (high ? 0 : 4);
        const u8* s = b + 96;
        int sj = w >> 4;
        int sl = sj < 8 ? (s[sj] & 15) : (s[sj - 8] >> 4);
        int sh = (s[8 + (sj & 3)] >> (2 * (sj >> 2))) & 3;
        int scale = (sl | (sh << 4)) - 32;
        return f16_at(b + 108) * (float)scale * (float)q;
    }
};

CBTOP_TYPE_KERNELS(q2_k, DeqQ2_K)
CBTOP_TYPE_KERNELS(q3_k, DeqQ3_K)
