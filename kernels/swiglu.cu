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

#ifndef SWIGLU_MIN_BLOCKS
#define SWIGLU_MIN_BLOCKS 1
#endif

// SwiGLU of one value, as the CPU engine: silu(g) * u with ggml's expf.
__device__ __forceinline__ float swiglu_one(float g, float u) {
    float silu = __fdiv_rn(g, __fadd_rn(1.0f, ggml_expf(__fsub_rn(0.0f, g))));
    return __fmul_rn(silu, u);
}

// SwiGLU, then the result quantized for the down projection (act_quant.cu), in one launch.
// 256 values per 256-thread block.
extern "C" __global__ void silu_mul_quant(float* __restrict__ gate, const float* __restrict__ up,
                                          int n, int kind, float* __restrict__ xf,
                                          i8* __restrict__ q, float* __restrict__ d,
                                          float* __restrict__ xx, STAMP_PARAMS) {
    STAMP_GUARD;
    u64 i = (u64)blockIdx.x * 256 + threadIdx.x;
    bool ok = i < (u64)n;
    float v = 0.0f;
    if (ok) {
        v = swiglu_one(gate[i], up[i]);
        gate[i] = v;
    }
    act_quant_chunk(v, ok, i, kind, xf, q, d, xx);
}

// The `fast` numerics' gate and up products of one token with SwiGLU in their epilogue, the
// result quantized for the down projection, in one launch instead of two (matvec_fast.cu's
// units and row sums, so each value has the bits the two launches give).
// Block b (256 threads): warps 0-3 take gate rows 4b..4b+3, warps 4-7 the same rows of up;
// threads 0-3 write act[r] = silu(gate[r]) * up[r] into `act` (the matrices' `out` are unused). The
// quantizer needs 256 values at once (a Q8_K block, or eight Q8_0/Q8_1 blocks): the last
// block of each 256 rows to finish (a ticket per 256 rows, reset by that block, so a CUDA
// graph can replay the step) quantizes them into the separate buffers `xf`, `q`, `d`, `xx`
// (the input's own buffers are still being read by other blocks).
extern "C" __global__ void __launch_bounds__(256, SWIGLU_MIN_BLOCKS)
    mvf_gate_up_swiglu(MvfMat gate, MvfMat up, int cols, const i8* __restrict__ aq,
                       const float* __restrict__ ad, const float* __restrict__ ax,
                       float* __restrict__ act, int kind,
                       float* __restrict__ xf, i8* __restrict__ q, float* __restrict__ d,
                       float* __restrict__ xx, int* __restrict__ tickets, STAMP_PARAMS) {
    int warp = threadIdx.x >> 5, n_ff = gate.rows;
    int r = 4 * blockIdx.x + (warp & 3);
    MvfMat m = warp < 4 ? gate : up;
    // As many blocks prefetch ahead as mvf_multi's (same warps: 2 * nsm blocks of four).
    mvf_prefetch_row(m, r, sm_count());
    STAMP_GUARD;
    __shared__ float row[8];
    __shared__ int last;
    float s = r < n_ff ? mvf_row_any(m, r, cols, aq, ad, ax) : 0.0f;
    if ((threadIdx.x & 31) == 0) row[warp] = s;
    __syncthreads();
    int i = 4 * blockIdx.x + threadIdx.x;
    if (threadIdx.x < 4 && i < n_ff) act[i] = swiglu_one(row[threadIdx.x], row[4 + threadIdx.x]);
    // This block's values out; the group's last block quantizes its 256.
    int grp = blockIdx.x / 64;
    int blocks = min(64, (int)((n_ff + 3) / 4) - 64 * grp);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(tickets + grp, 1) == blocks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    u64 j = 256 * (u64)grp + threadIdx.x;
    bool ok = j < (u64)n_ff;
    act_quant_chunk(ok ? __ldcg(act + j) : 0.0f, ok, j, kind, xf, q, d, xx);
    if (threadIdx.x == 0) tickets[grp] = 0;
}
