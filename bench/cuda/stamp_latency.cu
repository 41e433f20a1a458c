// Device harness (bench/cuda/stamp-latency.sh): what reading %globaltimer costs a thread, and
// what one stamp costs a chain of short one-block kernels launched with programmatic dependent
// launch, by variant (the clock and an atomic max at the block's end or start, an atomic of a
// constant, the 32-bit clock, the clock read early). Each variant is captured as a CUDA graph
// of 244 kernels (SmolLM2's decode step has 244) with a null and a real stamp pointer; the
// table gives the median replay of each and their difference per kernel.
//
// Measured on the H100 (2026-11-25, `bash bench/cuda/stamp-latency.sh`): a %globaltimer read
// issues every 7 cycles and returns in 24 (clock64: 7); at the end of a 128-thread block of 256
// dependent FMAs, the clock and an atomic max cost the chain 24 ns a kernel, and an atomic max
// of a constant just as much (so the clock read is not the cost); a start stamp by block 0
// 16-31 ns, start and end 40-64 ns (1024 threads: 16-24, 40). With 16 FMAs a kernel, where
// the chain is bound by its launches, they cost 0-21 ns. The engine's stamped SmolLM2 step loses ~100 ns a kernel:
// docs/measurements/kernels.md has what else it measured.
#include <cstdio>
#include <vector>
#include <algorithm>
typedef unsigned long long u64;
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)
__device__ __forceinline__ u64 gt() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned gtlo() { unsigned t; asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t)); return t; }
__device__ __forceinline__ u64 ck() { u64 t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }
__global__ void lat(u64* out) {
  u64 s = 0, a, b;
  a = ck(); for (int i = 0; i < 64; i++) { s += gt(); } b = ck(); out[0] = (b - a); out[9] = s;
  a = ck(); for (int i = 0; i < 64; i++) { s += gtlo(); } b = ck(); out[1] = (b - a); out[9] += s;
  a = ck(); for (int i = 0; i < 64; i++) { s += ck(); } b = ck(); out[2] = (b - a); out[9] += s;
  // dependent: each read feeds an address-free add chain
  a = ck(); u64 x = 0; for (int i = 0; i < 64; i++) { x = gt() + (x & 1); } b = ck(); out[3] = (b - a); out[9] += x;
}
enum { END_CLK = 1, END_CONST = 2, START_CLK = 4, END_EARLY = 8, END_LO = 16 };
template <int V>
__global__ void kk(float* buf, int iters, u64* st, int slot) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  bool t0 = st && threadIdx.x == 0 && blockIdx.x == 0;
  if ((V & START_CLK) && t0) atomicMax(st + 2 * slot, gt());
  float v = buf[threadIdx.x];
  u64 early = 0;
  for (int i = 0; i < iters; i++) { v = v * 0.999f + 0.001f; if ((V & END_EARLY) && i == iters - 8 && t0) early = gt(); }
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float r[32];
  if ((threadIdx.x & 31) == 0) r[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0; for (int i = 0; i < (int)(blockDim.x >> 5); i++) t += r[i];
    buf[1024 + slot] = t;
    if ((V & END_CLK) && st) atomicMax(st + 2 * slot + 1, gt());
    if ((V & END_LO) && st) atomicMax((unsigned*)(st + 2 * slot + 1), gtlo());
    if ((V & END_CONST) && st) atomicMax(st + 2 * slot + 1, 1ull);
    if ((V & END_EARLY) && st) atomicMax(st + 2 * slot + 1, early);
  }
}
typedef void (*KF)(float*, int, u64*, int);
int main() {
  u64* d; CK(cudaMalloc(&d, 1 << 20)); CK(cudaMemset(d, 0, 1 << 20));
  for (int r = 0; r < 3; r++) { lat<<<1, 1>>>(d); CK(cudaDeviceSynchronize()); }
  u64 h[10]; CK(cudaMemcpy(h, d, 80, cudaMemcpyDeviceToHost));
  printf("cycles per read (64 reads): globaltimer %.1f, globaltimer_lo %.1f, clock64 %.1f, globaltimer dependent %.1f\n",
         h[0] / 64.0, h[1] / 64.0, h[2] / 64.0, h[3] / 64.0);
  float* buf; CK(cudaMalloc(&buf, 1 << 20)); CK(cudaMemset(buf, 0, 1 << 20));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int N = 244;
  auto capture = [&](KF kf, bool stamped, int threads, int iters) {
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (int i = 0; i < N; i++) {
      cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(1); cfg.blockDim = dim3(threads); cfg.stream = s;
      cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1; cfg.attrs = at; cfg.numAttrs = 1;
      cudaLaunchKernelEx(&cfg, kf, buf, iters, stamped ? d + 64 : (u64*)nullptr, i);
    }
    cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&ge, g, 0);
    return ge;
  };
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto run = [&](cudaGraphExec_t g) {
    std::vector<float> t;
    for (int i = 0; i < 20; i++) cudaGraphLaunch(g, s);
    for (int i = 0; i < 200; i++) { cudaEventRecord(e0, s); cudaGraphLaunch(g, s); cudaEventRecord(e1, s); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms * 1000); }
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
  };
  struct V { const char* n; KF f; } vs[] = {{"none", kk<0>}, {"end clock+atomic", kk<END_CLK>}, {"end atomic of constant", kk<END_CONST>},
    {"end clock_lo+atomic32", kk<END_LO>}, {"start clock+atomic", kk<START_CLK>}, {"start+end clock", kk<START_CLK | END_CLK>},
    {"end clock read 8 iters early", kk<END_EARLY>}};
  for (int threads : {128, 1024}) for (int iters : {16, 256}) {
    printf("-- %d kernels, 1 block of %d threads, %d dependent FMAs each: median graph us, stamped - null\n", N, threads, iters);
    for (auto& v : vs) {
      cudaGraphExec_t a = capture(v.f, false, threads, iters), b = capture(v.f, true, threads, iters);
      float ta = run(a), tb = run(b), ta2 = run(a), tb2 = run(b);
      printf("%-34s null %8.1f %8.1f  stamped %8.1f %8.1f  diff %6.1f us (%.0f ns/kernel)\n", v.n, ta, ta2, tb, tb2,
             (tb + tb2 - ta - ta2) / 2, (tb + tb2 - ta - ta2) / 2 * 1000 / N);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
