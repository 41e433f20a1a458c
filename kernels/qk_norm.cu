// Per-head RMSNorm of the query and key rows (qwen3, gemma3): each head of Q and of K normed
// on its own with one weight vector of head_dim values shared by the heads, after the
// projections and before RoPE, as llama.cpp's rms_norm then mul on the heads' rows (the CPU
// engine's `ops::rms_norm` per head). The sum of squares goes through rmsnorm.cu's `inv_rms`
// (f64, so its order does not change the f32 mean), so both numerics give the CPU's bits.
// A launch of its own: the split decode attention rotates its query itself, so fusing the
// norm into RoPE would have to go into every attention kernel as well.

// Grid (n_heads + n_kv_heads, n tokens), blockDim head_dim rounded up to a multiple of 32
// (at most 1024): block (h, t) norms query head h of token t in place, or, past the query
// heads, key head h - n_heads.
extern "C" __global__ void qk_norm(float* __restrict__ q, float* __restrict__ k,
                                   const float* __restrict__ qw, const float* __restrict__ kw,
                                   int n_heads, int n_kv_heads, int hd, float eps,
                                   STAMP_PARAMS) {
    STAMP_GUARD;
    int h = blockIdx.x, j = threadIdx.x;
    u64 t = blockIdx.y;
    bool is_k = h >= n_heads;
    float* row = is_k ? k + (t * n_kv_heads + (h - n_heads)) * hd : q + (t * n_heads + h) * hd;
    float wj = j < hd ? (is_k ? kw[j] : qw[j]) : 0.0f;
    // Every thread's reads of the row are over before inv_rms's first barrier, so the row
    // can be written in place after it.
    float scale = inv_rms(row, hd, eps);
    if (j < hd) row[j] = __fmul_rn(__fmul_rn(row[j], scale), wj);
}
