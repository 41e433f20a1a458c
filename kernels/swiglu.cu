// SwiGLU (gate = silu(gate) * up) with ggml's vector expf, as src/quant/simd_order.rs. (The
// residual and bias adds happen in the matrix products' epilogue, kernels/common.cuh.)

// ggml's AVX-512 `ggml_v_expf` polynomial, operation for operation (fused where it fuses).
__device__ float ggml_expf(float x) {
    const float r = __int_as_float(0x4b400000);
    float z = fmaf(x, __int_as_float(0x3fb8aa3b), r);
    float n = __fsub_rn(z, r);
    float b = fmaf(-n, __int_as_float(0x35bfbe8e), fmaf(-n, __int_as_float(0x3f317200), x));
    float u = __fmul_rn(b, b);
    float j = fmaf(fmaf(fmaf(__int_as_float(0x3c072010), b, __int_as_float(0x3d2b9f17)), u,
                        fmaf(__int_as_float(0x3e2aaf33), b, __int_as_float(0x3efffedb))),
                   u, fmaf(__int_as_float(0x3f7ffff6), b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    // _mm512_scalef_ps(j, n): j * 2^n rounded once.
    return __double2float_rn(ldexp((double)j, (int)n));
}

// SwiGLU, then the result quantized for the down projection (act_quant.cu), in one launch.
// 256 values per 256-thread block.
// A launch of its own: fusing it into the gate/up product (a fence and a ticket ending every
// block) or into the down projection (every block recomputing it) measured slower than the
// launch saved (docs/measurements/kernels.md).
extern "C" __global__ void silu_mul_quant(float* __restrict__ gate, const float* __restrict__ up,
                                          int n, int kind, float* __restrict__ xf,
                                          i8* __restrict__ q, float* __restrict__ d,
                                          float* __restrict__ xx, STAMP_PARAMS) {
    STAMP_START;
    u64 i = (u64)blockIdx.x * 256 + threadIdx.x;
    bool ok = i < (u64)n;
    float v = 0.0f;
    if (ok) {
        float g = gate[i];
        float silu = __fdiv_rn(g, __fadd_rn(1.0f, ggml_expf(__fsub_rn(0.0f, g))));
        v = __fmul_rn(silu, up[i]);
        gate[i] = v;
    }
    act_quant_chunk(v, ok, i, kind, xf, q, d, xx, stamp_start_);
}
