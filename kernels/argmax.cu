// Greedy sampling on the GPU: the index of the largest logit (the lowest index on ties, as the
// CPU's argmax), written as a token id so a decode step copies back 8 bytes, not the logits:
// the id and how many logits were NaN or infinite (the report's NaN/Inf assertion, which on
// the CPU counts the returned row).
// Two launches: `argmax_blocks` (ARGMAX_BLOCKS blocks of 1024) leaves each block's best
// (value, index) in `part`, then `argmax_final` (one block) picks among them: a single block
// over a 150k vocabulary took several times longer.

#define ARGMAX_BLOCKS 128

// The better of two candidates: larger value, then lower index.
__device__ __forceinline__ void better(float& best, int& idx, float ov, int oi) {
    if (ov > best || (ov == best && oi < idx)) {
        best = ov;
        idx = oi;
    }
}

// Block-wide best; thread 0 gets it.
__device__ void block_best(float& best, int& idx) {
    __shared__ float bv[32];
    __shared__ int bi[32];
    for (int o = 16; o > 0; o >>= 1)
        better(best, idx, __shfl_xor_sync(0xffffffffu, best, o),
               __shfl_xor_sync(0xffffffffu, idx, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        bv[warp] = best;
        bi[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        best = lane < nw ? bv[lane] : -INFINITY;
        idx = lane < nw ? bi[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1)
            better(best, idx, __shfl_xor_sync(0xffffffffu, best, o),
                   __shfl_xor_sync(0xffffffffu, idx, o));
    }
}

// Block-wide sum of `v`; thread 0 gets it. Every thread of the block must call it.
__device__ int block_count(int v) {
    __shared__ int bc[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) bc[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? bc[lane] : 0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

// The block's pick among `count` candidates laid out as argmax_blocks leaves them (values,
// then indices, then non-finite counts, `stride` apart); thread 0 gets the best and the count.
__device__ void best_of_parts(const float* p, int count, int stride, float& best, int& idx,
                              int& bad) {
    best = -INFINITY;
    idx = 0x7fffffff;
    bad = 0;
    for (int b = threadIdx.x; b < count; b += blockDim.x) {
        better(best, idx, p[b], __float_as_int(p[stride + b]));
        bad += __float_as_int(p[2 * stride + b]);
    }
    block_best(best, idx);
    bad = block_count(bad);
}

// part: 3 x ARGMAX_BLOCKS values (bests, their indices as floats' bits, and each block's count
// of non-finite logits as an int's bits).
extern "C" __global__ void argmax_blocks(const float* __restrict__ logits, int n,
                                         float* __restrict__ part, STAMP_PARAMS) {
    STAMP_GUARD;
    float best = -INFINITY;
    int idx = 0x7fffffff, bad = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = logits[i];
        better(best, idx, v, i);
        bad += (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;  // NaN or +-inf
    }
    block_best(best, idx);
    bad = block_count(bad);
    if (threadIdx.x == 0) {
        part[blockIdx.x] = best;
        part[ARGMAX_BLOCKS + blockIdx.x] = __int_as_float(idx);
        part[2 * ARGMAX_BLOCKS + blockIdx.x] = __int_as_float(bad);
    }
}

// The token id goes to `out[0]` (the next step's input) and to `sampled[0]`, the logits'
// non-finite count to `sampled[1]` (the two values the host copies back). Also moves the
// device's position on by `n` (the step's tokens) when `pos` is given, so a decode step needs
// no separate launch for it.
extern "C" __global__ void argmax_final(const float* __restrict__ part, u32* __restrict__ out,
                                        u32* __restrict__ sampled, int* pos, int n,
                                        STAMP_PARAMS) {
    STAMP_GUARD;
    float best;
    int idx, bad;
    best_of_parts(part, ARGMAX_BLOCKS, ARGMAX_BLOCKS, best, idx, bad);
    if (threadIdx.x == 0) {
        u32 id = idx == 0x7fffffff ? 0u : (u32)idx;
        out[0] = id;
        sampled[0] = id;
        sampled[1] = (u32)bad;
        if (pos) pos[0] += n;
    }
}

// The greedy pick of each row of a batch step's logits (a row a sequence), in the two launches
// of one row's pick: `argmax_row_blocks` (grid ARGMAX_ROW_BLOCKS x rows) leaves each block's
// best of its slice of a row in `part` (3 x ARGMAX_ROW_BLOCKS values a row, as argmax_blocks
// lays them out), then `argmax_rows` (a warp a row) writes the row's id to `out[row]` and its
// count of non-finite logits to `out[rows + row]`. One block a row walked a 150k vocabulary
// serially: ten times one row's pick at two rows.

#define ARGMAX_ROW_BLOCKS 32

extern "C" __global__ void argmax_row_blocks(const float* __restrict__ logits, int n,
                                             float* __restrict__ part, STAMP_PARAMS) {
    STAMP_GUARD;
    const float* row = logits + (u64)blockIdx.y * n;
    float* p = part + (u64)blockIdx.y * 3 * ARGMAX_ROW_BLOCKS;
    float best = -INFINITY;
    int idx = 0x7fffffff, bad = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = row[i];
        better(best, idx, v, i);
        bad += (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;  // NaN or +-inf
    }
    block_best(best, idx);
    bad = block_count(bad);
    if (threadIdx.x == 0) {
        p[blockIdx.x] = best;
        p[ARGMAX_ROW_BLOCKS + blockIdx.x] = __int_as_float(idx);
        p[2 * ARGMAX_ROW_BLOCKS + blockIdx.x] = __int_as_float(bad);
    }
}

extern "C" __global__ void argmax_rows(const float* __restrict__ part, u32* __restrict__ out,
                                       STAMP_PARAMS) {
    STAMP_GUARD;
    float best;
    int idx, bad;
    best_of_parts(part + (u64)blockIdx.x * 3 * ARGMAX_ROW_BLOCKS, ARGMAX_ROW_BLOCKS,
                  ARGMAX_ROW_BLOCKS, best, idx, bad);
    if (threadIdx.x == 0) {
        out[blockIdx.x] = idx == 0x7fffffff ? 0u : (u32)idx;
        out[gridDim.x + blockIdx.x] = (u32)bad;
    }
}
