// Plain float weights: F32, F16 and BF16 rows, read element by element.

struct DeqF32 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        return __int_as_float((int)u32_at(row + 4 * j));
    }
};

struct DeqF16 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) { return f16_at(row + 2 * j); }
};

struct DeqBF16 {
    static const bool HAS_MIN = false;
    __device__ static float min(const u8*, int) { return 0.0f; }
    __device__ static float get(const u8* row, int j) {
        const u8* p = row + 2 * j;
        return __int_as_float((int)(((u32)p[0] << 16) | ((u32)p[1] << 24)));
    }
};

CBTOP_FLOAT_MATVEC(f32, DeqF32)
CBTOP_FLOAT_MATVEC(f16, DeqF16)
CBTOP_FLOAT_MATVEC(bf16, DeqBF16)
CBTOP_EMBED(f32, DeqF32)
CBTOP_EMBED(f16, DeqF16)
CBTOP_EMBED(bf16, DeqBF16)
