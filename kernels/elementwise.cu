// Element-wise steps of a layer: residual add, bias add (one bias row over a batch), and
// SwiGLU (gate = silu(gate) * up).

extern "C" __global__ void add_in_place(float* __restrict__ x, const float* __restrict__ y,
                                        int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

extern "C" __global__ void add_bias(float* __restrict__ x, const float* __restrict__ b,
                                    int cols, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b[i % cols];
}

extern "C" __global__ void silu_mul(float* __restrict__ gate, const float* __restrict__ up,
                                    int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
