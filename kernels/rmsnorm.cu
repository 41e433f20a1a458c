// RMSNorm of each row: out = x / sqrt(mean(x^2) + eps) * w, as ggml's rms_norm then mul.
// The sum of squares accumulates in double like the CPU engine.
// The output is also quantized for the matrix product it feeds (act_quant.cu), saving that
// launch.
// A launch of its own: fast one-token products that norm their input themselves (every block
// repeating the sum of squares) were measured slower than the launch they save
// (docs/measurements/kernels.md).

// 1 / rms of a row of `cols` values, for every thread of the block.
__device__ float inv_rms(const float* __restrict__ xr, int cols, float eps) {
    __shared__ double part[32];
    __shared__ float scale_sh;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += (double)(xr[j] * xr[j]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        double t = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
        if (lane == 0) {
            float mean = (float)(t / (double)cols);
            scale_sh = __fdiv_rn(1.0f, sqrtf(__fadd_rn(mean, eps)));
        }
    }
    __syncthreads();
    return scale_sh;
}

// Grid (ceil(cols / blockDim), rows), blockDim a multiple of 256 (the engine launches 1024):
// every block sums its row's squares (a few loads per thread from L2) and norms and quantizes
// its own blockDim values, so a long row's chunks run on several multiprocessors instead of
// one block's loop. out gets the normed row, and the
// activation buffers the row quantized as `kind` (row-major flat indices, as act_quant).
extern "C" __global__ void rms_norm_quant(const float* __restrict__ x,
                                          const float* __restrict__ w, int cols, float eps,
                                          float* __restrict__ out, int kind,
                                          float* __restrict__ xf, i8* __restrict__ q,
                                          float* __restrict__ d, float* __restrict__ xx,
                                          STAMP_PARAMS) {
    // The norm's weight is constant: read before waiting on the kernel ahead, so its trip to
    // memory overlaps that kernel instead of following the row's reduction.
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    bool ok = j < cols;
    float wj = ok ? __ldg(w + j) : 0.0f;
    STAMP_START;
    u64 row = blockIdx.y;
    const float* xr = x + row * cols;
    float scale = inv_rms(xr, cols, eps);
    float v = ok ? __fmul_rn(__fmul_rn(xr[j], scale), wj) : 0.0f;
    if (ok) out[row * cols + j] = v;
    act_quant_chunk(v, ok, row * cols + j, kind, xf, q, d, xx, stamp_start_);
}
