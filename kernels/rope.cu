// Rotary position embedding in place, NORM (adjacent pairs) or NEOX (halves) style, at
// positions pos0 + t. The cos/sin come from a table the host fills once for every position
// with the CPU engine's own values (ggml's rope cache: theta multiplied by base^(-2/n_rot)
// step by step in f32, then the C library's cosf/sinf), so the GPU rotates by exactly the
// CPU's angles: `table[pos][i] = (cos, sin)`.
// The first position is read from the device (`pos[0]`), so a captured CUDA graph replays at
// the current position.

// Where token t of a launch is cached. One sequence (`seq_stride` 0): at position rows[0] + t
// of the cache given. A batch of sequences, a token each: token t belongs to sequence
// rows[2t], at position rows[2t + 1], whose cache starts seq_stride values after the previous
// sequence's. Returns the position; `off` is the sequence's cache offset.
__device__ __forceinline__ int cached_at(const int* __restrict__ rows, long long seq_stride,
                                         int t, u64& off) {
    if (seq_stride == 0) {
        off = 0;
        return rows[0] + t;
    }
    off = (u64)rows[2 * t] * (u64)seq_stride;
    return rows[2 * t + 1];
}

// The rotation of one (head, token)'s pair i, in place.
__device__ __forceinline__ void rope_pair(float* head, int i, int n_rot, float c, float s,
                                          int neox) {
    int a = neox ? i : 2 * i;
    int b = neox ? i + n_rot / 2 : 2 * i + 1;
    float x0 = head[a], x1 = head[b];
    // As the CPU (and GCC's contraction of ggml's code): first product fused, second rounded.
    head[a] = fmaf(x0, c, -__fmul_rn(x1, s));
    head[b] = fmaf(x0, s, __fmul_rn(x1, c));
}

// RoPE on Q and K and the KV-cache store (f32 -> f16, as the CPU's cache) in one launch, the
// rotated Q multiplied by `qscale` (1 for models that scale the scores instead):
// grid (n_heads + 2 * n_kv_heads, ceil(n / rows)), blocks of `rows` rows of head_dim threads
// (rounded up to whole warps, at least n_rot / 2), a token a row (a prompt's tokens share a
// block, so a long prompt is not tens of thousands of one-row blocks). Blocks of Q heads rotate;
// blocks of K heads rotate and store the rotated row as f16; blocks past them store V's rows.
// Tokens' positions and caches as `cached_at` says.
extern "C" __global__ void rope_store(float* q, float* k, const float* __restrict__ v,
                                      u16* __restrict__ kc, u16* __restrict__ vc, int n_heads,
                                      int n_kv_heads, int head_dim, int n_rot,
                                      const int* __restrict__ pos, long long seq_stride,
                                      const float* __restrict__ table, int neox, float qscale,
                                      int n, STAMP_PARAMS) {
    STAMP_GUARD;
    // Row width: head_dim threads rounded up to whole warps, as the host sizes it.
    const int width = (max(head_dim, n_rot / 2) + 31) / 32 * 32;
    int h = blockIdx.x, t = blockIdx.y * (blockDim.x / width) + threadIdx.x / width;
    int i = threadIdx.x % width;
    // Rows past the last token skip the work but not the barriers below.
    const bool live = t < n;
    if (!live) t = n - 1;
    int kv_dim = n_kv_heads * head_dim;
    u64 seq_off;
    int p = cached_at(pos, seq_stride, t, seq_off);
    kc += seq_off;
    vc += seq_off;
    u64 cache_row = (u64)p * kv_dim;
    if (h >= n_heads + n_kv_heads) {
        h -= n_heads + n_kv_heads;
        if (live && i < head_dim)
            vc[cache_row + h * head_dim + i] = f2h(v[(u64)t * kv_dim + h * head_dim + i]);
        return;
    }
    bool is_k = h >= n_heads;
    if (is_k) h -= n_heads;
    float* head = is_k ? k + ((u64)t * n_kv_heads + h) * head_dim
                       : q + ((u64)t * n_heads + h) * head_dim;
    if (live && i < n_rot / 2) {
        const float* cs = table + ((u64)p * (n_rot / 2) + i) * 2;
        rope_pair(head, i, n_rot, cs[0], cs[1], neox);
    }
    if (!is_k) {
        // The query scaled after its rotation (`qscale` is the block's, so the barrier is
        // every thread's or none's): gemma3's and phi3's attention scale, on Q as llama.cpp
        // applies it (a product in f32).
        if (qscale != 1.0f) {
            __syncthreads();
            if (live && i < head_dim) head[i] = __fmul_rn(head[i], qscale);
        }
        return;
    }
    __syncthreads();
    if (live && i < head_dim) kc[cache_row + h * head_dim + i] = f2h(head[i]);
}
