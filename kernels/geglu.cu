// GeGLU (gemma3's FFN activation): gate = gelu(gate) * up, as ggml's CPU `ggml_vec_geglu_f32`
// computes it with GGML_GELU_FP16 (the default): a gate at or below -10 gives 0, at or above
// 10 gives gate * up; otherwise the gate rounded to f16 indexes a table of 65536 f16 GELU
// values and the f16 found, widened, multiplies up. The table is the CPU engine's own,
// uploaded by the host (src/engine/cuda/setup.rs), so the GPU's values are the CPU's by
// construction instead of by a tanh that would have to round as the C library's does. Both
// numerics take this kernel: it reads a value and a table entry per element either way.

// GeGLU, then the result quantized for the down projection (act_quant.cu), in one launch.
// 256 values per 256-thread block.
extern "C" __global__ void geglu_quant(float* __restrict__ gate, const float* __restrict__ up,
                                       const u16* __restrict__ table, int n, int kind,
                                       float* __restrict__ xf, i8* __restrict__ q,
                                       float* __restrict__ d, float* __restrict__ xx,
                                       STAMP_PARAMS) {
    STAMP_START;
    u64 i = (u64)blockIdx.x * 256 + threadIdx.x;
    bool ok = i < (u64)n;
    float v = 0.0f;
    if (ok) {
        float g = gate[i];
        if (g <= -10.0f) {
            v = 0.0f;
        } else if (g >= 10.0f) {
            v = __fmul_rn(g, up[i]);
        } else {
            v = __fmul_rn(h2f(__ldg(table + f2h(g))), up[i]);
        }
        gate[i] = v;
    }
    act_quant_chunk(v, ok, i, kind, xf, q, d, xx, stamp_start_);
}
