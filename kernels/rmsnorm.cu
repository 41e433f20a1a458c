// RMSNorm of each row: out = x / sqrt(mean(x^2) + eps) * w, as ggml's rms_norm then mul.
// One block per row; the sum of squares accumulates in double like the CPU engine.

extern "C" __global__ void rms_norm(const float* __restrict__ x, const float* __restrict__ w,
                                    int cols, float eps, float* __restrict__ out) {
    __shared__ double part[32];
    const float* xr = x + (u64)blockIdx.x * cols;
    float* o = out + (u64)blockIdx.x * cols;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += (double)(xr[j] * xr[j]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        double t = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
        if (lane == 0) part[0] = t;
    }
    __syncthreads();
    float mean = (float)(part[0] / (double)cols);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) o[j] = (xr[j] * scale) * w[j];
}
