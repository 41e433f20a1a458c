// The 32-weight legacy blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (layouts in
// src/quant/legacy/layout.rs).
// Weight i of a block: the low nibble of qs[i] for i < 16, the high nibble of qs[i - 16] after;
// Q5 adds bit i of the little-endian u32 qh as the fifth bit.
//
// Two views of each type: `Deq*` dequantizes one weight (the embedding gather), `L*` packs
// lane l's four weights (4l..4l+3, as x86's maddubs/madd lanes) into signed bytes for the
// integer product in common.cuh.

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

// Lane l's four nibbles from their four bytes `v` = qs[4(l%4)..]: the low nibbles for l < 4,
// the high ones after.
__device__ __forceinline__ u32 nib_pack(u32 v, int l) {
    return l < 4 ? (v & 0x0F0F0F0Fu) : ((v >> 4) & 0x0F0F0F0Fu);
}

// Lane l's four fifth bits (bits 4l..4l+3 of qh), each moved to bit 4 of its byte.
__device__ __forceinline__ u32 high_pack(u32 qh, int l) {
    u32 h = (qh >> (4 * l)) & 15u;
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

struct LQ4_0 {
    static const int BYTES = 18;
    static const bool HAS_MIN = false;
    __device__ static int pack(const u8* b, int l) {
        return (int)__vsub4(nib_pack(u32_at2(b + 2 + 4 * (l & 3)), l), 0x08080808u);
    }
    __device__ static float d(const u8* b) { return f16_at2(b); }
    __device__ static float m(const u8*) { return 0.0f; }
};

struct LQ4_1 {
    static const int BYTES = 20;
    static const bool HAS_MIN = true;
    __device__ static int pack(const u8* b, int l) {
        return (int)nib_pack(u32_at4(b + 4 + 4 * (l & 3)), l);
    }
    __device__ static float d(const u8* b) { return f16_at2(b); }
    __device__ static float m(const u8* b) { return f16_at2(b + 2); }
};

struct LQ5_0 {
    static const int BYTES = 22;
    static const bool HAS_MIN = false;
    __device__ static int pack(const u8* b, int l) {
        u32 q = nib_pack(u32_at2(b + 6 + 4 * (l & 3)), l);
        return (int)__vsub4(q | high_pack(u32_at2(b + 2), l), 0x10101010u);
    }
    __device__ static float d(const u8* b) { return f16_at2(b); }
    __device__ static float m(const u8*) { return 0.0f; }
};

struct LQ5_1 {
    static const int BYTES = 24;
    static const bool HAS_MIN = true;
    __device__ static int pack(const u8* b, int l) {
        return (int)(nib_pack(u32_at4(b + 8 + 4 * (l & 3)), l) | high_pack(u32_at4(b + 4), l));
    }
    __device__ static float d(const u8* b) { return f16_at2(b); }
    __device__ static float m(const u8* b) { return f16_at2(b + 2); }
};

struct LQ8_0 {
    static const int BYTES = 34;
    static const bool HAS_MIN = false;
    __device__ static int pack(const u8* b, int l) { return (int)u32_at2(b + 2 + 4 * l); }
    __device__ static float d(const u8* b) { return f16_at2(b); }
    __device__ static float m(const u8*) { return 0.0f; }
};

CBTOP_EMBED(q4_0, DeqQ4_0)
CBTOP_EMBED(q4_1, DeqQ4_1)
CBTOP_EMBED(q5_0, DeqQ5_0)
CBTOP_EMBED(q5_1, DeqQ5_1)
CBTOP_EMBED(q8_0, DeqQ8_0)
CBTOP_QMV_KERNELS(q4_0, qmv_legacy, LQ4_0)
CBTOP_QMV_KERNELS(q4_1, qmv_legacy, LQ4_1)
CBTOP_QMV_KERNELS(q5_0, qmv_legacy, LQ5_0)
CBTOP_QMV_KERNELS(q5_1, qmv_legacy, LQ5_1)
CBTOP_QMV_KERNELS(q8_0, qmv_legacy, LQ8_0)
