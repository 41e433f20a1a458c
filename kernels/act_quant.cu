// Activation rounding as llama.cpp's CPU does before a dot product, so the GPU's f32 products
// see the same activation values: f16 or bf16 rounding for float weights, Q8_0/Q8_1 (32-value
// blocks, d = amax/127 stored as f16, q = round-half-even) for the legacy types, Q8_K
// (256-value blocks, iscale = -127/max by signed largest magnitude, d = 1/iscale in f32) for
// the k-quants. The values come back dequantized (q * d), so the product kernels stay f32.
// One block of 256 threads per 256 values; `total` is a multiple of 32 (of 256 for Q8_K).

#define ACT_F16 1
#define ACT_BF16 2
#define ACT_Q8_0 3
#define ACT_Q8_1 4
#define ACT_Q8_K 5

// For Q8_1, sums[i / 32] also gets the block's s = f16(d * sum q) with the unrounded d.
extern "C" __global__ void act_quant(const float* __restrict__ x, int total, int kind,
                                     float* __restrict__ out, float* __restrict__ sums) {
    __shared__ float sv[8];
    __shared__ int si[8];
    int i = blockIdx.x * 256 + threadIdx.x;
    float v = i < total ? x[i] : 0.0f;
    if (kind == ACT_F16) {
        if (i < total) out[i] = h2f(f2h(v));
        return;
    }
    if (kind == ACT_BF16) {
        u32 u = (u32)__float_as_int(v);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        if (i < total) out[i] = __int_as_float((int)u);
        return;
    }
    if (kind == ACT_Q8_K) {
        // The signed value of largest magnitude, the first one on ties.
        float a = fabsf(v);
        int idx = i;
        for (int o = 16; o > 0; o >>= 1) {
            float oa = __shfl_xor_sync(0xffffffffu, a, o);
            int oi = __shfl_xor_sync(0xffffffffu, idx, o);
            if (oa > a || (oa == a && oi < idx)) {
                a = oa;
                idx = oi;
            }
        }
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0) {
            sv[warp] = a;
            si[warp] = idx;
        }
        __syncthreads();
        a = sv[0];
        idx = si[0];
        for (int w = 1; w < 8; w++)
            if (sv[w] > a || (sv[w] == a && si[w] < idx)) {
                a = sv[w];
                idx = si[w];
            }
        if (i >= total) return;
        if (a == 0.0f) {
            out[i] = 0.0f;
            return;
        }
        float mx = x[idx];
        float iscale = -127.0f / mx;
        float q = fminf(127.0f, rintf(iscale * v));
        out[i] = q * (1.0f / iscale);
        return;
    }
    // Q8_0 / Q8_1: 32-value groups, one per warp.
    float amax = warp_max(fabsf(v));
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    float r = rintf(v * id);
    float q = fminf(127.0f, fmaxf(-128.0f, r));
    if (i < total) out[i] = q * h2f(f2h(d));
    if (kind == ACT_Q8_1) {
        float qsum = warp_sum(r);
        if ((threadIdx.x & 31) == 0 && i < total) sums[i >> 5] = h2f(f2h(d * qsum));
    }
}
