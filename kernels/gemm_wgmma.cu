// Prompt products on Hopper's warpgroup tensor-core instructions (sm_90a only): the 128 x 128
// tile of gemm_f16.cu with the same operands, epilogue and split K, its products issued as
// wgmma.mma_async m64n128k16 (f16 inputs, f32 accumulation) reading both operands from shared
// memory, where mma.sync needs every fragment loaded into registers first. Fast numerics only,
// as gemm_f16.cu.
//
// Each stage holds a 128-row tile of A and of B, 64 halves (128 bytes) a row, in the 128-byte
// swizzle wgmma's descriptors name: 16-byte piece c of row r sits at piece c ^ (r % 8), so the
// eight rows a k16 step reads fall in distinct banks. The tiles start 1024-byte aligned (the
// swizzle repeats every eight rows). Warpgroup w (threads 128w..128w+127) computes rows
// 64w..64w+63 of the tile against all 128 columns.
//
// Uses smem_u32 / cp_async16 / cp_async_commit / cp_async_wait (gemm_f16.cu, before this file).

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define WG_K 64
// Three stages, two blocks a multiprocessor: one block's barrier, loads and wait on its
// products overlap the other's products (four stages with a group kept in flight and one
// block a multiprocessor ran slower: docs/measurements/gpu-engine.md).
#define WG_STAGES 3
#define WG_TILE_BYTES (128 * WG_K * 2)

// The shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle: start
// address, leading byte offset 16 (unused by this layout), 1024 bytes between groups of eight
// rows, swizzle mode 1.
__device__ __forceinline__ u64 wg_desc(u32 addr) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) |
           ((u64)1 << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// d += A (64 x 16 at da) B^T (128 x 16 at db): d is this thread's 64 accumulators.
__device__ __forceinline__ void wg_mma_64x128(float* d, u64 da, u64 db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
          "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
          "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
          "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
          "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

// As gemm_f16_impl<128, 128> (gemm_f16.cu): C = (acc ? C : 0) + A B^T + bias, or raw partial
// sums into part[z] under a split K. 256 threads, WG_STAGES * 2 * WG_TILE_BYTES + 1024 bytes
// of dynamic shared memory (the 1024 to align the tiles).
extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_wgmma_128x128(const u16* __restrict__ A, const u16* __restrict__ B, int M, int N, int K,
                       const float* __restrict__ bias, int acc, float* __restrict__ C, int ldc,
                       float* __restrict__ part, STAMP_PARAMS) {
    STAMP_GUARD;
    extern __shared__ __align__(16) u8 wg_smem_raw[];
    const u32 raw = smem_u32(wg_smem_raw);
    const u32 base = (raw + 1023) & ~1023u;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int m0 = blockIdx.x * 128, n0 = blockIdx.y * 128;
    const int splits = gridDim.z, z = blockIdx.z;
    const int ktiles_all = K / WG_K;
    const int kt0 = (int)((long long)ktiles_all * z / splits);
    const int ktiles = (int)((long long)ktiles_all * (z + 1) / splits) - kt0;
    // Stage s: A's tile at base + 2s tiles, B's right after it.
    auto tile_a = [&](int s) { return base + (u32)(2 * s) * WG_TILE_BYTES; };
    auto tile_b = [&](int s) { return base + (u32)(2 * s + 1) * WG_TILE_BYTES; };

    auto load = [&](int stage, int kt) {
        const u32 sa = tile_a(stage), sb = tile_b(stage);
#pragma unroll
        for (int c = tid; c < 2 * 128 * 8; c += 256) {
            int r = (c >> 3) & 127, q = c & 7;
            u32 off = (u32)r * 128 + (u32)((q ^ (r & 7)) << 4);
            int k = kt * WG_K + q * 8;
            if (c < 128 * 8) {
                int gm = m0 + r;
                cp_async16(sa + off, A + (u64)min(gm, M - 1) * K + k, gm < M ? 16 : 0);
            } else {
                int gn = n0 + r;
                cp_async16(sb + off, B + (u64)min(gn, N - 1) * K + k, gn < N ? 16 : 0);
            }
        }
    };

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < WG_STAGES - 1; s++) {
        if (s < ktiles) load(s, kt0 + s);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; kt++) {
        cp_async_wait<WG_STAGES - 2>();
        // The tiles were written through the generic proxy; wgmma reads through the async one.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        // The stage read in the previous iteration is free (its products finished before this
        // barrier): fetch the tile WG_STAGES - 1 ahead into it.
        int next = kt + WG_STAGES - 1;
        if (next < ktiles) load(next % WG_STAGES, kt0 + next);
        cp_async_commit();
        const int s = kt % WG_STAGES;
        const u32 a = tile_a(s) + (u32)wg * 64 * 128, b = tile_b(s);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WG_K / 16; kk++)
            wg_mma_64x128(d, wg_desc(a + kk * 32), wg_desc(b + kk * 32));
        wg_commit();
        wg_wait<0>();
    }
    cp_async_wait<0>();

    // Accumulator 4j + e: row 16 (warp in the warpgroup) + lane / 4 + 8 (e / 2), column
    // 8j + 2 (lane % 4) + e % 2.
    const int warp = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int m = m0 + wg * 64 + warp * 16 + (lane >> 2) + 8 * (e >> 1);
            int n = n0 + 8 * j + 2 * (lane & 3) + (e & 1);
            if (m >= M || n >= N) continue;
            float v = d[4 * j + e];
            if (splits > 1) {
                part[((u64)z * M + m) * N + n] = v;
                continue;
            }
            if (bias) v += bias[n];
            float* o = C + (u64)m * ldc + n;
            *o = acc ? *o + v : v;
        }
}

#endif
