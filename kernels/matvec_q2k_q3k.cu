// Q2_K (84-byte blocks: 16 scale/min bytes, 64 bytes of 2-bit levels, d, dmin) and Q3_K
// (110 bytes: 32 bytes of high-bit masks, 64 bytes of 2-bit levels, 12 packed 6-bit scales,
// d), as src/quant/kquants/.

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

// Q2_K has no lanes in the CPU's order: one f32 term per block,
// (d_a * d) * isum - (d_a * dmin) * sum(bsum * min), added to a running sum.
struct KQ2_K {
    static const int BYTES = 84;
    static const bool FULL = true;
    __device__ static void elems(const u8* b, int p, int* sc, int* lv) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            lv[k] = (b[16 + 32 * (k >> 2) + p] >> (2 * (k & 3))) & 3;
            sc[k] = b[2 * k + (p >> 4)] & 15;
        }
    }
    __device__ static float d(const u8* b) { return f16_at(b + 80); }
    __device__ static float extra(const u8* b, const float* bsums, float da, int isum, int p) {
        int summs = bsum_reduce(p < 16 ? (int)bsums[p] * (b[p] >> 4) : 0);
        float dall = __fmul_rn(da, f16_at(b + 80)), dmin = __fmul_rn(da, f16_at(b + 82));
        return __fsub_rn(__fmul_rn(dall, (float)isum), __fmul_rn(dmin, (float)summs));
    }
};

// Thread p's weights p + 32k: 2-bit level k % 4 of byte 32 * (k / 4) + p, the high bit k of
// byte p (set: no -4), the 6-bit scale 2k + p / 16 minus 32.
struct KQ3_K {
    static const int BYTES = 110;
    static const bool FULL = false;
    __device__ static void elems(const u8* b, int p, int* sc, int* lv) {
        const u8* s = b + 96;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int low = (b[32 + 32 * (k >> 2) + p] >> (2 * (k & 3))) & 3;
            int high = (b[p] >> k) & 1;
            lv[k] = low - (high ? 0 : 4);
            int sj = 2 * k + (p >> 4);
            int sl = sj < 8 ? (s[sj] & 15) : (s[sj - 8] >> 4);
            int sh = (s[8 + (sj & 3)] >> (2 * (sj >> 2))) & 3;
            sc[k] = (sl | (sh << 4)) - 32;
        }
    }
    __device__ static float d(const u8* b) { return f16_at(b + 108); }
    __device__ static float extra(const u8*, const float*, float, int, int) { return 0.0f; }
};

CBTOP_EMBED(q2_k, DeqQ2_K)
CBTOP_EMBED(q3_k, DeqQ3_K)
CBTOP_QMV_KERNELS(q2_k, qmv_k, KQ2_K)
CBTOP_QMV_KERNELS(q3_k, qmv_k, KQ3_K)
