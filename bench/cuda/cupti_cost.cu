// Device harness (bench/cuda/cupti-cost.sh): what CUPTI's kernel activity records cost a CUDA
// graph of decode-like kernels chained with programmatic dependent launch (PDL), against the
// engine's in-kernel %globaltimer stamps (kernels/common.cuh), and where CUPTI puts a kernel's
// start and end relative to those stamps (issue 10: a candidate timing method). The step is
// stamp_cost.cu's: 24 layers of the synthetic qwen2.5-0.5b's eight decode kernels and its
// output projection. Prints the median replay time of the plain and stamped graphs without
// CUPTI, then with CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL on, then compares the records of the
// stamped graph's last replay with its stamps.
//
// Measured on the H100 (2026-11-25, CUDA 13.0's CUPTI, `bash bench/cuda/cupti-cost.sh`), median
// replay in us, two rounds each:
//   shape                         plain         stamped       plain+CUPTI   stamped+CUPTI
//   0.5b, 194 kernels (117k blocks) 468.3 469.0   499.8 500.0   476.0 476.3   506.0 504.8
//   smol, 272 kernels (50k blocks)  455.7 454.9   468.1 468.2   461.1 460.6   473.9 473.8
// So CUPTI's kernel records cost a step 6-8 us (1.3-1.7%), the stamps 13-32 us here. But under
// PDL CUPTI's start is the kernel's launch, before `griddepcontrol.wait`: 192 of 193 (270 of
// 271) records begin before the previous kernel's record ends, and the records' durations add
// up to 801 us of a 500 us step (the stamps: 393 us of kernels and 107 us of gaps). Its end
// comes ~0.7-1.0 us after the last block's stamped exit (with the clocks' constant offset
// taken out), after the next kernel has already passed its wait. So CUPTI cannot tell a brick
// from the gap before it, nor time a 1-2 us kernel to within 0.5 us: the engine keeps the
// stamps (issue 10).
#include <cupti.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
typedef unsigned long long u64;
#define CK(x) do { cudaError_t ce_ = (x); if (ce_) { printf("CUDA %s at %d\n", cudaGetErrorString(ce_), __LINE__); exit(1);} } while (0)
#define CU(x) do { CUptiResult cr_ = (x); if (cr_ != CUPTI_SUCCESS) { const char* m_; cuptiGetResultString(cr_, &m_); printf("CUPTI %s at %d\n", m_, __LINE__); exit(1);} } while (0)
#ifndef KREC
#define KREC CUpti_ActivityKernel9
#endif

__device__ __forceinline__ u64 gt() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

template <int STAMP>
__global__ void k(const float4* __restrict__ w, int per_block, float* __restrict__ out,
                  u64* __restrict__ st, int slot) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (STAMP && st && blockIdx.x == 0 && threadIdx.x == 0) atomicMax(st + 2 * slot, gt());
  const float4* p = w + (size_t)blockIdx.x * per_block;
  float s = 0;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) { float4 v = p[i]; s += v.x + v.y + v.z + v.w; }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  __shared__ float red[32];
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) t += red[i];
    out[blockIdx.x] = t;
    if (STAMP && st) atomicMax(st + 2 * slot + 1, gt());
  }
}

struct Shape { int blocks, threads; size_t bytes; };
struct Rec { u64 start, end, corr, node; };
static std::vector<Rec> recs;
static void CUPTIAPI req(uint8_t** buf, size_t* size, size_t* max) {
  *size = 16 << 20;
  *buf = (uint8_t*)aligned_alloc(8, *size);
  *max = 0;
}
static void CUPTIAPI done(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      KREC* kr = (KREC*)r;
      recs.push_back({kr->start, kr->end, kr->correlationId, kr->graphNodeId});
    }
  free(buf);
}

int main(int argc, char** argv) {
  int smol = argc > 1 && !strcmp(argv[1], "smol");
  // 0.5b: norm, qkv, attention, attn_out, norm, gate_up, swiglu, down (a warp per row in
  // 128-thread blocks), 24 layers, then norm and lm_head. "smol": a SmolLM2-like 30 layers of
  // nine smaller kernels (an activation quantizer before attn_out).
  std::vector<Shape> layer = {{1, 1024, 3584}, {288, 128, 589824}, {112, 256, 229376},
                              {224, 128, 451584}, {1, 1024, 3584}, {2432, 128, 5992448},
                              {19, 256, 38912}, {224, 128, 3573760}};
  std::vector<Shape> smol_layer = {{1, 1024, 2304}, {192, 128, 221184}, {9, 256, 40000},
                                   {3, 256, 2304}, {144, 128, 165888}, {1, 1024, 2304},
                                   {768, 128, 1769472}, {6, 256, 12288}, {144, 128, 884736}};
  std::vector<Shape> step;
  int layers = smol ? 30 : 24;
  for (int l = 0; l < layers; l++) {
    auto& ly = smol ? smol_layer : layer;
    step.insert(step.end(), ly.begin(), ly.end());
  }
  step.push_back({1, 1024, 3584});
  step.push_back(smol ? Shape{12288, 128, 28311552} : Shape{37984, 128, 111630336});
  size_t pool = 0;
  for (auto& s : step) pool += (s.bytes + 255) / 256 * 256;
  printf("%s: %zu kernels, %.1f MB read per step\n", smol ? "smol" : "0.5b", step.size(), pool / 1e6);
  float4* w; float* out; u64* st;
  CK(cudaMalloc(&w, pool));
  CK(cudaMemset(w, 1, pool));
  CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMalloc(&st, step.size() * 16));
  CK(cudaMemset(st, 0, step.size() * 16));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto capture = [&](bool stamped, bool pdl) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    size_t off = 0;
    for (size_t i = 0; i < step.size(); i++) {
      auto& sh = step[i];
      int per = (int)(sh.bytes / 16 / sh.blocks);
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(sh.blocks); cfg.blockDim = dim3(sh.threads); cfg.stream = s;
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at; cfg.numAttrs = pdl ? 1 : 0;
      const float4* wp = (const float4*)((char*)w + off);
      if (stamped) CK(cudaLaunchKernelEx(&cfg, k<1>, wp, per, out, st, (int)i));
      else CK(cudaLaunchKernelEx(&cfg, k<0>, wp, per, out, (u64*)nullptr, (int)i));
      off += (sh.bytes + 255) / 256 * 256;
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    return ge;
  };
  std::vector<cudaEvent_t> ev(401);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  auto run = [&](cudaGraphExec_t g) {
    for (int i = 0; i < 20; i++) CK(cudaGraphLaunch(g, s));
    int n = 400;
    CK(cudaEventRecord(ev[0], s));
    for (int i = 0; i < n; i++) { CK(cudaGraphLaunch(g, s)); CK(cudaEventRecord(ev[i + 1], s)); }
    CK(cudaStreamSynchronize(s));
    std::vector<float> t;
    for (int i = 0; i < n; i++) { float ms; CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1])); t.push_back(ms * 1000); }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  printf("%-44s %9s\n", "graph", "median us");
  for (int round = 0; round < 2; round++) {
    cudaGraphExec_t plain = capture(false, true), stamped = capture(true, true);
    printf("%-44s %9.1f\n", "plain, no CUPTI", run(plain));
    printf("%-44s %9.1f\n", "stamped, no CUPTI", run(stamped));
    CK(cudaGraphExecDestroy(plain)); CK(cudaGraphExecDestroy(stamped));
  }
  CU(cuptiActivityRegisterCallbacks(req, done));
  CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  cudaGraphExec_t stamped = nullptr;
  for (int round = 0; round < 2; round++) {
    cudaGraphExec_t plain = capture(false, true);
    if (stamped) CK(cudaGraphExecDestroy(stamped));
    stamped = capture(true, true);
    printf("%-44s %9.1f\n", "plain, CUPTI concurrent kernel on", run(plain));
    printf("%-44s %9.1f\n", "stamped, CUPTI concurrent kernel on", run(stamped));
    CK(cudaGraphExecDestroy(plain));
  }
  // The stamped graph once more, alone, then its records against its stamps.
  CU(cuptiActivityFlushAll(1));
  size_t before = recs.size();
  CK(cudaMemset(st, 0, step.size() * 16));
  CK(cudaGraphLaunch(stamped, s));
  CK(cudaStreamSynchronize(s));
  CU(cuptiActivityFlushAll(1));
  std::vector<u64> hs(step.size() * 2);
  CK(cudaMemcpy(hs.data(), st, hs.size() * 8, cudaMemcpyDeviceToHost));
  printf("records: %zu in all, %zu from the last replay (of %zu kernels)\n", recs.size(), recs.size() - before, step.size());
  std::vector<Rec> last(recs.begin() + before, recs.end());
  std::sort(last.begin(), last.end(), [](const Rec& a, const Rec& b) { return a.start < b.start; });
  if (last.size() == step.size()) {
    printf("first record start %llu end %llu; first stamp start %llu end %llu\n", last[0].start, last[0].end, hs[0], hs[1]);
    std::vector<double> ds, de, dur_c, dur_s, gap_c, gap_s;
    int overlap = 0;
    for (size_t i = 0; i < step.size(); i++) {
      ds.push_back((double)(long long)(last[i].start - hs[2 * i]));
      de.push_back((double)(long long)(last[i].end - hs[2 * i + 1]));
      dur_c.push_back((double)(last[i].end - last[i].start));
      dur_s.push_back((double)(hs[2 * i + 1] - hs[2 * i]));
      if (i) {
        gap_c.push_back((double)(long long)(last[i].start - last[i - 1].end));
        gap_s.push_back((double)(long long)(hs[2 * i] - hs[2 * i - 1]));
        if (last[i].start < last[i - 1].end) overlap++;
      }
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    auto sum = [](const std::vector<double>& v) { double t = 0; for (double x : v) t += x; return t; };
    printf("CUPTI start - stamp start: median %.0f ns, min %.0f, max %.0f\n", med(ds), *std::min_element(ds.begin(), ds.end()), *std::max_element(ds.begin(), ds.end()));
    printf("CUPTI end - stamp end:     median %.0f ns, min %.0f, max %.0f\n", med(de), *std::min_element(de.begin(), de.end()), *std::max_element(de.begin(), de.end()));
    printf("kernel time: CUPTI %.1f us, stamps %.1f us; gaps: CUPTI %.1f us, stamps %.1f us; CUPTI intervals overlapping the one before: %d\n",
           sum(dur_c) / 1000, sum(dur_s) / 1000, sum(gap_c) / 1000, sum(gap_s) / 1000, overlap);
    for (size_t i = 0; i < 12; i++)
      printf("  kernel %2zu: CUPTI %8.0f..%8.0f  stamps %8.0f..%8.0f (ns from the first CUPTI start)\n", i,
             (double)(last[i].start - last[0].start), (double)(last[i].end - last[0].start),
             (double)(long long)(hs[2 * i] - last[0].start), (double)(long long)(hs[2 * i + 1] - last[0].start));
  }
  return 0;
}
