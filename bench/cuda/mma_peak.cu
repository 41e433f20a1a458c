// The tensor-core peak that cbtop's prompt products can reach (issue 12's "share of the
// measured peak"): mma.sync.m16n8k16 with f16 operands and f32 accumulators, the instruction
// kernels/gemm_f16.cu and kernels/attention_prefill.cu issue, run back to back from
// registers (no memory traffic) in 8 independent accumulator chains per warp, on every SM.
// Prints the best of 5 runs in TFLOP/s (2 flops per multiply-add; 4096 per mma).
//
//   nvcc -O3 -arch=sm_90 -o /tmp/mma_peak bench/cuda/mma_peak.cu && /tmp/mma_peak
#include <cstdio>
#include <cuda_runtime.h>

#define CHAINS 8

__global__ void mma_peak(float* out, int iters) {
    unsigned a[4], b[2];
    for (int i = 0; i < 4; i++) a[i] = 0x3c003c00u ^ (threadIdx.x * 7 + i);  // f16 pairs near 1
    for (int i = 0; i < 2; i++) b[i] = 0x3c003c00u ^ (threadIdx.x * 3 + i);
    float c[CHAINS][4] = {};
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int k = 0; k < CHAINS; k++)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                "{%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    float s = 0.0f;
    for (int k = 0; k < CHAINS; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int threads = 256, blocks = sms * 4, iters = 4096;
    float* out;
    cudaMalloc(&out, sizeof(float) * blocks * threads);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    mma_peak<<<blocks, threads>>>(out, 16);
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(a);
        mma_peak<<<blocks, threads>>>(out, iters);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (ms < best) best = ms;
    }
    double mmas = (double)blocks * (threads / 32) * iters * CHAINS;
    printf("mma.sync m16n8k16 f16->f32: %.1f TFLOP/s (%d SMs, best of 5: %.3f ms)\n",
           mmas * 4096.0 / (best * 1e-3) / 1e12, sms, best);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
    return 0;
}
