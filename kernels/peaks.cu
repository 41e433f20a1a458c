// The roofline's compute peak on the GPU: 8 independent f32 FMA chains per thread, so the
// measured rate is the FMA pipes' and not one chain's latency. 2 flops per FMA.

extern "C" __global__ void fma_probe(float* out, int iters) {
    float a = 1.0f - threadIdx.x * 1e-7f, b = 1e-7f;
    float c0 = a, c1 = a * 0.5f, c2 = a * 0.25f, c3 = a * 0.125f;
    float c4 = b, c5 = b * 2.0f, c6 = b * 3.0f, c7 = b * 4.0f;
    for (int i = 0; i < iters; i++) {
        c0 = fmaf(c0, a, b);
        c1 = fmaf(c1, a, b);
        c2 = fmaf(c2, a, b);
        c3 = fmaf(c3, a, b);
        c4 = fmaf(c4, a, b);
        c5 = fmaf(c5, a, b);
        c6 = fmaf(c6, a, b);
        c7 = fmaf(c7, a, b);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7;
}

// The prompt products' compute peak (fast numerics: kernels/gemm_f16.cu and
// kernels/attention_prefill.cu run on tensor cores): the instruction they issue,
// mma.sync.m16n8k16 with f16 operands and f32 accumulators, back to back from registers in 8
// independent accumulator chains per warp. 4096 flops per mma (2 per multiply-add). The f32
// FMA peak above is 10x lower on an H100 and would overstate how close those products are to
// the hardware.
#define MMA_PROBE_CHAINS 8
extern "C" __global__ void mma_probe(float* out, int iters) {
#if __CUDA_ARCH__ >= 800
    u32 a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = 0x3c003c00u ^ (threadIdx.x * 7 + i);  // f16 pairs near 1
    for (int i = 0; i < 2; i++) b[i] = 0x3c003c00u ^ (threadIdx.x * 3 + i);
    float c[MMA_PROBE_CHAINS][4] = {};
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int k = 0; k < MMA_PROBE_CHAINS; k++)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.0f;
    for (int k = 0; k < MMA_PROBE_CHAINS; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
#endif
}
