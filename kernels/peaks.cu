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
