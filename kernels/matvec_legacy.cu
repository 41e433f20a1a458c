// The 32-weight legacy blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (layouts in src/quant/legacy.rs).
// Weight i of a block: the low nibble of qs[i] for i < 16, the high nibble of qs[i - 16] after;
// Q5 adds bit i of the little-endian u32 qh as the fifth bit.

__device__ __forceinline__ int nib(const u8* qs, int i) {
    return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
}

struct DeqQ4_0 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 5) * 18;
        return (float)(nib(b + 2, j & 31) - 8) * f16_at(b);
    }
};

// Q4_1/Q5_1: `get` is d * q; the block minimum comes from `min` (see HAS_MIN in common.cuh).
struct DeqQ4_1 {
    static const bool HAS_MIN = true;
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 5) * 20;
        return (float)nib(b + 4, j & 31) * f16_at(b);
    }
    __device__ static float min(const u8* row, int j) { return f16_at(row + (j >> 5) * 20 + 2); }
};

struct DeqQ5_0 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 5) * 22;
        int i = j & 31;
        int q = nib(b + 6, i) | (((u32_at(b + 2) >> i) & 1) << 4);
        return (float)(q - 16) * f16_at(b);
    }
};

struct DeqQ5_1 {
    static const bool HAS_MIN = true;
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 5) * 24;
        int i = j & 31;
        int q = nib(b + 8, i) | (((u32_at(b + 4) >> i) & 1) << 4);
        return (float)q * f16_at(b);
    }
    __device__ static float min(const u8* row, int j) { return f16_at(row + (j >> 5) * 24 + 2); }
};

struct DeqQ8_0 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* b = row + (j >> 5) * 34;
        return (float)(i8)b[2 + (j & 31)] * f16_at(b);
    }
};

CBTOP_TYPE_KERNELS(q4_0, DeqQ4_0)
CBTOP_TYPE_KERNELS(q4_1, DeqQ4_1)
CBTOP_TYPE_KERNELS(q5_0, DeqQ5_0)
CBTOP_TYPE_KERNELS(q5_1, DeqQ5_1)
CBTOP_TYPE_KERNELS(q8_0, DeqQ8_0)
