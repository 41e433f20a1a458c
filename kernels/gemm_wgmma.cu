// Prompt products on Hopper's warpgroup tensor-core instructions (sm_90a only): the largest
// tiles of gemm_f16.cu's products (same operands, epilogue and split K), their products issued
// as wgmma.mma_async m64nNk16 (f16 inputs, f32 accumulation) reading both operands from shared
// memory, where mma.sync needs every fragment loaded into registers first. Fast numerics only,
// as gemm_f16.cu.
//
// Each stage holds a 128-row tile of A and a BN-row tile of B, 64 halves (128 bytes) a row, in
// the 128-byte swizzle wgmma's descriptors name: 16-byte piece c of row r sits at piece
// c ^ (r % 8), so the eight rows a k16 step reads fall in distinct banks. The tiles start
// 1024-byte aligned (the swizzle repeats every eight rows). Warpgroup w (threads
// 128w..128w+127) computes rows 64w..64w+63 of the tile against all BN columns.
//
// Uses smem_u32 / cp_async16 / cp_async_commit / cp_async_wait (gemm_f16.cu, before this file).

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

#define WG_K 64
// Three stages, products waited for each stage: the 128 x 128 tile runs two blocks a
// multiprocessor, so one block's barrier, loads and wait overlap the other's products (four
// stages with a group kept in flight and one block a multiprocessor ran slower:
// docs/measurements/gpu-engine.md); the 128 x 256 tile's 128 accumulators a thread allow one.
#define WG_STAGES 3

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

template <int BN>
__device__ __forceinline__ void wg_mma(float* d, u64 da, u64 db);

// d += A (64 x 16 at da) B^T (128 x 16 at db): d is this thread's 64 accumulators.
template <>
__device__ __forceinline__ void wg_mma<128>(float* d, u64 da, u64 db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
          "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

// d += A (64 x 16 at da) B^T (256 x 16 at db): d is this thread's 128 accumulators.
template <>
__device__ __forceinline__ void wg_mma<256>(float* d, u64 da, u64 db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n"
        "}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
          "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
          "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
          "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
          "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
          "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
          "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
          "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
          "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
          "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
          "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}

// As gemm_f16_impl (gemm_f16.cu) for a 128 x BN tile: C = (acc ? C : 0) + A B^T + bias, or raw
// partial sums into part[z] under a split K. 256 threads, WG_STAGES * (128 + BN) * 128 + 1024
// bytes of dynamic shared memory (the 1024 to align the tiles).
template <int BN>
__device__ __forceinline__ void gemm_wgmma_impl(const u16* __restrict__ A,
                                                const u16* __restrict__ B, int M, int N, int K,
                                                const float* __restrict__ bias, int acc,
                                                float* __restrict__ C, int ldc,
                                                float* __restrict__ part) {
    constexpr u32 A_BYTES = 128 * WG_K * 2, STAGE_BYTES = (128 + BN) * WG_K * 2;
    extern __shared__ __align__(16) u8 wg_smem_raw[];
    const u32 base = (smem_u32(wg_smem_raw) + 1023) & ~1023u;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int m0 = blockIdx.x * 128, n0 = blockIdx.y * BN;
    const int splits = gridDim.z, z = blockIdx.z;
    const int ktiles_all = K / WG_K;
    const int kt0 = (int)((long long)ktiles_all * z / splits);
    const int ktiles = (int)((long long)ktiles_all * (z + 1) / splits) - kt0;

    // Stage s: A's tile at base + s * STAGE_BYTES, B's right after it.
    auto load = [&](int stage, int kt) {
        const u32 sa = base + (u32)stage * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
        for (int c = tid; c < (128 + BN) * 8; c += 256) {
            int r = c >> 3, q = c & 7;
            int k = kt * WG_K + q * 8;
            if (r < 128) {
                int gm = m0 + r;
                u32 off = (u32)r * 128 + (u32)((q ^ (r & 7)) << 4);
                cp_async16(sa + off, A + (u64)min(gm, M - 1) * K + k, gm < M ? 16 : 0);
            } else {
                r -= 128;
                int gn = n0 + r;
                u32 off = (u32)r * 128 + (u32)((q ^ (r & 7)) << 4);
                cp_async16(sb + off, B + (u64)min(gn, N - 1) * K + k, gn < N ? 16 : 0);
            }
        }
    };

    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;

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
        const u32 a = base + (u32)(kt % WG_STAGES) * STAGE_BYTES + (u32)wg * 64 * 128;
        const u32 b = base + (u32)(kt % WG_STAGES) * STAGE_BYTES + A_BYTES;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WG_K / 16; kk++)
            wg_mma<BN>(d, wg_desc(a + kk * 32), wg_desc(b + kk * 32));
        wg_commit();
        wg_wait<0>();
    }
    cp_async_wait<0>();

    // Accumulator 4j + e: row 16 (warp in the warpgroup) + lane / 4 + 8 (e / 2), column
    // 8j + 2 (lane % 4) + e % 2.
    const int warp = (tid >> 5) & 3, lane = tid & 31;
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
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

#define CBTOP_GEMM_WGMMA(bn, per_sm)                                                         \
    extern "C" __global__ void __launch_bounds__(256, per_sm) gemm_wgmma_128x##bn(           \
        const u16* A, const u16* B, int M, int N, int K, const float* bias, int acc,         \
        float* C, int ldc, float* part, STAMP_PARAMS) {                                      \
        STAMP_GUARD;                                                                         \
        gemm_wgmma_impl<bn>(A, B, M, N, K, bias, acc, C, ldc, part);                         \
    }

CBTOP_GEMM_WGMMA(256, 1)
CBTOP_GEMM_WGMMA(128, 2)

#endif
