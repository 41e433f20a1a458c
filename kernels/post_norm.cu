// Gemma3's post norms: the attention output (after the output projection) and the FFN output
// (after the down projection) each RMSNormed before its residual add, x += rms_norm(y) * w,
// as llama.cpp's rms_norm, mul and add (the CPU engine's `ops::rms_norm` then
// `add_in_place`). The product writes y without the residual epilogue the other models'
// products add in; this kernel adds it instead.

// Grid (ceil(cols / blockDim), rows), blockDim a multiple of 256 (the engine launches 1024,
// as rms_norm_quant): every block sums its row's squares (rmsnorm.cu `inv_rms`) and norms and
// adds its own blockDim values.
extern "C" __global__ void post_norm_residual(const float* __restrict__ y,
                                              const float* __restrict__ w, int cols, float eps,
                                              float* __restrict__ x, STAMP_PARAMS) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    bool ok = j < cols;
    // The weight is constant: read before waiting on the product ahead.
    float wj = ok ? __ldg(w + j) : 0.0f;
    STAMP_GUARD;
    u64 row = blockIdx.y;
    const float* yr = y + row * cols;
    float scale = inv_rms(yr, cols, eps);
    if (ok) {
        float v = __fmul_rn(__fmul_rn(yr[j], scale), wj);
        x[row * cols + j] = __fadd_rn(x[row * cols + j], v);
    }
}
