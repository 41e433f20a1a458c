// Final logit soft-capping (where the metadata sets `final_logit_softcapping`): each logit
// becomes tanh(logit / cap) * cap, as llama.cpp's scale by 1/cap, tanh, scale by cap. tanh is
// computed in f64 and rounded once, as a correctly rounded tanhf would give it. The CPU engine
// takes the C library's tanhf, which glibc 2.36's is not (about 18% of values in [-3, 3] round
// the other way), so under exact numerics the capped logits are the CPU's bits only where the
// host's tanhf is correctly rounded. No synthesized or conformance model sets the cap.

// 256 values per 256-thread block.
extern "C" __global__ void softcap(float* __restrict__ x, int n, float inv_cap, float cap,
                                   STAMP_PARAMS) {
    STAMP_GUARD;
    u64 i = (u64)blockIdx.x * 256 + threadIdx.x;
    if (i >= (u64)n) return;
    float s = __fmul_rn(x[i], inv_cap);
    x[i] = __fmul_rn(__double2float_rn(tanh((double)s)), cap);
}
