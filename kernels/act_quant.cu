// Activation rounding as llama.cpp's CPU does before a dot product (src/quant/act.rs), so the
// GPU's products see the CPU's activation values:
// - float weights: the values rounded to f16 or bf16 (or left f32), into `xf`;
// - Q8_0/Q8_1 (legacy weights): 32-value blocks, d = amax/127 stored as f16,
//   q = round-half-even(x * 127/amax), into int8 `q` and `d`; Q8_1 also stores
//   s = f16(d * sum q) with the unrounded d, into `x`;
// - Q8_K (k-quants): 256-value blocks, iscale = -127/max by signed largest magnitude (the
//   first on ties), q = min(127, round-half-even(iscale * x)), d = 1/iscale in f32, and
//   the sums of each 16 q (bsums) into `x`.
// 256 values per 256-thread block; `total` is a multiple of 32 (of 256 for Q8_K).

#define ACT_F32 0
#define ACT_F16 1
#define ACT_BF16 2
#define ACT_Q8_0 3
#define ACT_Q8_1 4
#define ACT_Q8_K 5
// Not a weight type's format: the value rounded to f16 and stored as f16 bits over `xf` (two
// bytes a value), the tensor-core products' operand (gemm_f16.cu), so a producer feeding one
// spares the product its own conversion.
#define ACT_F16_BITS 6

// The float kinds and Q8_0/Q8_1 (32-value groups, one per warp) of `act_quant_chunk`: no
// barrier, so a kernel whose warps each hold 32 consecutive values of a row can call it from
// those warps alone (all 32 lanes of each; `ok` false past the row, as in act_quant_chunk).
// The fast decode attention quantizes its output with it (attention_fast.cu).
__device__ void act_quant_warp(float v, bool ok, u64 i, int kind, float* __restrict__ xf,
                               i8* __restrict__ q, float* __restrict__ d,
                               float* __restrict__ x) {
    if (!ok) v = 0.0f;
    if (kind == ACT_F16_BITS) {
        if (ok) ((u16*)xf)[i] = f2h(v);
        return;
    }
    if (kind <= ACT_BF16) {
        if (!ok) return;
        if (kind == ACT_F16) {
            v = h2f(f2h(v));
        } else if (kind == ACT_BF16) {
            u32 u = (u32)__float_as_int(v);
            v = __int_as_float((int)((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u));
        }
        xf[i] = v;
        return;
    }
    float amax = warp_max(fabsf(v));
    float dd = __fdiv_rn(amax, 127.0f);
    float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    float r = rintf(__fmul_rn(v, id));
    float qs = warp_sum(r);
    if (ok) {
        q[i] = (i8)(int)fminf(127.0f, fmaxf(-128.0f, r));
        if ((threadIdx.x & 31) == 0) {
            d[i >> 5] = h2f(f2h(dd));
            if (kind == ACT_Q8_1) x[i >> 5] = h2f(f2h(__fmul_rn(dd, qs)));
        }
    }
}

// Quantize 256-value chunks, one per 256 threads of the block (blockDim.x a multiple of 256),
// each thread holding value `v` at flat index `i` (valid when `ok`); every thread of the
// block must call it (it synchronises for Q8_K).
// Shared by act_quant and by the kernels that produce a product's input (RMSNorm, SwiGLU)
// and quantize it on the way out.
// `st`: the calling kernel's stamp start; the block's thread 0 stamps the kernel's end right
// after its last store here (`st.end()`), so the kernel needs no exit path for it.
__device__ void act_quant_chunk(float v, bool ok, u64 i, int kind, float* __restrict__ xf,
                                i8* __restrict__ q, float* __restrict__ d,
                                float* __restrict__ x, const KernelStart& st) {
    bool lead = threadIdx.x == 0; // blocks are one-dimensional
    __shared__ float sv[32];
    __shared__ int si[32];
    if (kind != ACT_Q8_K) {
        act_quant_warp(v, ok, i, kind, xf, q, d, x);
        if (lead) st.end();
        return;
    }
    // This thread's place in its 256-value chunk, and the chunk's first warp.
    int tl = threadIdx.x & 255, w0 = (threadIdx.x >> 8) * 8;
    if (!ok) v = 0.0f;
    // The signed value of largest magnitude, the first one on ties.
    float a = fabsf(v), mx = v;
    int idx = tl;
    for (int o = 16; o > 0; o >>= 1) {
        float oa = __shfl_xor_sync(0xffffffffu, a, o);
        float om = __shfl_xor_sync(0xffffffffu, mx, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (oa > a || (oa == a && oi < idx)) {
            a = oa;
            mx = om;
            idx = oi;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        sv[warp] = mx;
        si[warp] = idx;
    }
    __syncthreads();
    mx = sv[w0];
    idx = si[w0];
    for (int w = w0 + 1; w < w0 + 8; w++)
        if (fabsf(sv[w]) > fabsf(mx) || (fabsf(sv[w]) == fabsf(mx) && si[w] < idx)) {
            mx = sv[w];
            idx = si[w];
        }
    int qi = 0;
    float iscale = 0.0f;
    if (mx != 0.0f) {
        iscale = __fdiv_rn(-127.0f, mx);
        qi = min(127, (int)rintf(__fmul_rn(iscale, v)));
    }
    // bsums: the 16 consecutive values of each half warp.
    int s = qi;
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (ok) {
        q[i] = (i8)qi;
        if ((tl & 15) == 0) x[i >> 4] = (float)s;
        if (tl == 0) d[i >> 8] = mx != 0.0f ? __fdiv_rn(1.0f, iscale) : 0.0f;
    }
    if (lead) st.end();
}

extern "C" __global__ void act_quant(const float* __restrict__ in, int total, int kind,
                                     float* __restrict__ xf, i8* __restrict__ q,
                                     float* __restrict__ d, float* __restrict__ x,
                                     STAMP_PARAMS) {
    STAMP_START;
    u64 i = (u64)blockIdx.x * 256 + threadIdx.x;
    bool ok = i < (u64)total;
    act_quant_chunk(ok ? in[i] : 0.0f, ok, i, kind, xf, q, d, x, stamp_start_);
}
