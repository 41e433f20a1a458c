// Rotary position embedding in place, NORM (adjacent pairs) or NEOX (halves) style, at
// positions pos0 + t. theta follows ggml's cache: pos * theta_scale^i built by repeated f32
// multiplication, with theta_scale = base^(-2/n_rot) computed on the host as the CPU does.
// Grid: (n_heads, n_tokens); one thread per rotated pair.

extern "C" __global__ void rope(float* x, int n_heads, int head_dim, int n_rot, int pos0,
                                float theta_scale, int neox) {
    int h = blockIdx.x, t = blockIdx.y, i = threadIdx.x;
    if (i >= n_rot / 2) return;
    float theta = (float)(pos0 + t);
    for (int k = 0; k < i; k++) theta *= theta_scale;
    float c = cosf(theta), s = sinf(theta);
    float* head = x + ((u64)t * n_heads + h) * head_dim;
    int a = neox ? i : 2 * i;
    int b = neox ? i + n_rot / 2 : 2 * i + 1;
    float x0 = head[a], x1 = head[b];
    head[a] = fmaf(x0, c, -(x1 * s));
    head[b] = fmaf(x0, s, x1 * c);
}
