// Device harness (bench/cuda/stamp-cost.sh): what per-kernel %globaltimer stamps (issue 10,
// kernels/common.cuh `STAMP_GUARD`) cost a CUDA graph of decode-like kernels chained with
// programmatic dependent launch (PDL), apart from the engine. A "step" is 24 layers of eight
// memory-bound kernels with the synthetic qwen2.5-0.5b's decode grids (a warp per weight row
// in 128-thread blocks) and bytes read, then its output projection, each kernel reading its
// own slice of a weight pool larger than L2. With an argument m the products run m times
// wider blocks (m x 4 rows each, 1/m the blocks). Each stamping variant is its own template
// instantiation, captured twice: with a null stamp pointer (its code present, not run: the
// engine's `--timing off`) and stamped. The table gives the median replay time of each, their
// difference, and a plain step replayed right after a stamped one; last, the engine's
// pipelined host loop (step i+1 launched before step i is waited for, stamps copied to pinned
// memory and read) gives the host-clock interval of stamped and plain steps.
// The spread variants (END_SPREAD, END_SMID) cut the end stamps' cost here (30 -> 4.4 us a
// step at 16 lanes) but not in the engine, where they cost more than one word: see
// docs/measurements/kernels.md.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
typedef unsigned long long u64;
#define CK(x) do { cudaError_t ce_ = (x); if (ce_) { printf("CUDA %s at %d\n", cudaGetErrorString(ce_), __LINE__); exit(1);} } while (0)

enum {
  START = 1,            // block 0's thread 0 stores the clock after the wait (the engine)
  END_ATOM = 2,         // every block's thread 0 folds the clock into the end, atomicMax (the engine)
  END_STORE = 4,        // every block's thread 0 stores the clock in a word of its own
  END_CONST = 32,       // every block's thread 0 does an atomicMax of a constant
  END_EARLY = 64,       // END_ATOM before the block's output store instead of after
  START_EARLY = 256,    // block 0 stores the clock before the wait
  START_CONST = 512,    // block 0 stores a constant
  START_CLK = 2048,     // block 0 reads the clock and stores nothing
  START_HOLD = 1 << 17, // block 0 reads the clock before the wait, stores it at its end
  START_LATE = 1 << 18, // block 0 reads the clock after the wait, stores it at its end
  END_PRECLK = 1 << 19, // every block reads the clock before its output store, atomicMax after
  END_TAIL = 1 << 20,   // only blocks among the last 4224 (132 SMs x 32) stamp the end
  END_SPREAD = 1 << 21, // END_ATOM into one of LANES words (block index mod LANES), each lane
                        // its own run of slots (`LANE` words apart, so distinct 128-byte lines)
  END_SMID = 1 << 22,   // as END_SPREAD, the lane chosen by the SM the block runs on
};
// Words between two lanes' ends of one slot (END_SPREAD, END_SMID: at least the step's kernels,
// a multiple of 16 so that lanes are in distinct 128-byte lines); lane l starts at word
// ENDS + LANE * l, after the starts.
#define LANE 256
#define ENDS 512

__device__ __forceinline__ u64 gt() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// Each variant is its own instantiation (`V`, the enum's bits), so no variant carries another's
// code: the compiler would otherwise share one clock read among them.
template <int V, int LANES = 1>
__global__ void k(const float4* __restrict__ w, int per_block, float* __restrict__ out,
                  u64* __restrict__ st, int slot) {
  const bool b0 = st && blockIdx.x == 0 && threadIdx.x == 0;
  const bool t0 = st && threadIdx.x == 0;
  u64 early = 0;
  if ((V & START_EARLY) && b0) st[2 * slot] = gt();
  if ((V & START_HOLD) && b0) early = gt();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if ((V & START) && b0) st[2 * slot] = gt();
  if ((V & START_CONST) && b0) st[2 * slot] = 1;
  if ((V & START_CLK) && b0) { u64 c = gt(); if (c == 1) out[0] = 0; }
  if ((V & START_LATE) && b0) early = gt();
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
    if ((V & END_EARLY) && t0) atomicMax(st + 2 * slot + 1, gt());
    u64 e = 0;
    if ((V & END_PRECLK) && t0) e = gt();
    out[blockIdx.x] = t;
    if ((V & END_PRECLK) && t0) atomicMax(st + 2 * slot + 1, e);
    if ((V & END_ATOM) && t0) atomicMax(st + 2 * slot + 1, gt());
    if ((V & END_TAIL) && t0 && blockIdx.x + 4224 >= gridDim.x) atomicMax(st + 2 * slot + 1, gt());
    if ((V & END_CONST) && t0) atomicMax(st + 2 * slot + 1, 1ull);
    if ((V & END_SPREAD) && t0) atomicMax(st + ENDS + LANE * (blockIdx.x % LANES) + slot, gt());
    if ((V & END_SMID) && t0) {
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      atomicMax(st + ENDS + LANE * (sm % LANES) + slot, gt());
    }
    if ((V & END_STORE) && t0) st[4096 + (size_t)slot * 8192 + blockIdx.x] = gt();
    if ((V & (START_HOLD | START_LATE)) && b0) st[2 * slot] = early;
  }
}

struct Shape { int blocks, threads; size_t bytes; };

int main(int argc, char** argv) {
  // One layer of the 0.5b's decode step as the engine launches it: norm, qkv, attention,
  // attn_out, norm, gate_up, swiglu, down (a warp per row in 128-thread blocks), then lm_head.
  // With an argument m, the products run m times wider blocks (m x 4 rows each).
  int m = argc > 1 ? atoi(argv[1]) : 1;
  std::vector<Shape> layer = {{1, 1024, 3584},       {288 / m, 128 * m, 589824}, {112, 256, 229376},
                              {224 / m, 128 * m, 451584}, {1, 1024, 3584},   {2432 / m, 128 * m, 5992448},
                              {19, 256, 38912},       {224 / m, 128 * m, 3573760}};
  std::vector<Shape> step;
  for (int l = 0; l < 24; l++) step.insert(step.end(), layer.begin(), layer.end());
  step.push_back({1, 1024, 3584});
  step.push_back({37984 / m, 128 * m, 111630336});
  size_t pool = 0;
  for (auto& s : step) pool += (s.bytes + 255) / 256 * 256;
  size_t blocks = 0; for (auto& x : step) blocks += x.blocks;
  printf("%zu kernels, %zu blocks, %.1f MB read per step (block width x%d)\n", step.size(), blocks, pool / 1e6, m);
  float4* w; float* out; u64* st;
  CK(cudaMalloc(&w, pool));
  CK(cudaMemset(w, 1, pool));
  CK(cudaMalloc(&out, 1 << 20));
  size_t stbytes = (4096 + step.size() * 8192) * 8;
  CK(cudaMalloc(&st, stbytes));
  CK(cudaMemset(st, 0, stbytes));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  u64* pin[2]; for (auto& p : pin) CK(cudaMallocHost(&p, stbytes));
  u64* stb[2]; for (auto& b : stb) { CK(cudaMalloc(&b, stbytes)); CK(cudaMemset(b, 0, stbytes)); }
  typedef void (*KF)(const float4*, int, float*, u64*, int);
  auto capture = [&](KF kf, bool stamped, bool nopdl, bool copy, int area = -1, size_t words = 0) {
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
      cfg.attrs = at; cfg.numAttrs = nopdl ? 0 : 1;
      u64* base = area < 0 ? st : stb[area];
      u64* sp = stamped ? base : nullptr;
      CK(cudaLaunchKernelEx(&cfg, kf, (const float4*)((char*)w + off), per, out, sp, (int)i));
      off += (sh.bytes + 255) / 256 * 256;
    }
    if (area >= 0) {
      size_t n = stamped && copy ? (words ? words : 2 * step.size()) * 8 : 8;
      CK(cudaMemcpyAsync(pin[area], stb[area], n, cudaMemcpyDeviceToHost, s));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    return ge;
  };
  cudaEvent_t ev[402];
  for (auto& evt : ev) CK(cudaEventCreate(&evt));
  // Median of per-replay times over `n` replays of the sequence `gs` (cycled), for position `which` of the cycle.
  auto run = [&](std::vector<cudaGraphExec_t> gs, int which) {
    for (int i = 0; i < 20; i++) CK(cudaGraphLaunch(gs[i % gs.size()], s));
    int n = 400;
    CK(cudaEventRecord(ev[0], s));
    for (int i = 0; i < n; i++) { CK(cudaGraphLaunch(gs[i % gs.size()], s)); CK(cudaEventRecord(ev[i + 1], s)); }
    CK(cudaStreamSynchronize(s));
    std::vector<float> t;
    for (int i = 0; i < n; i++) if ((int)(i % gs.size()) == which) { float ms; CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1])); t.push_back(ms * 1000); }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  // The engine's pipelined host loop: step i+1 is launched before step i is waited for; a
  // stamped step's stamps are read and summed on the host. Median interval between step ends
  // (host clock) by kind of step: stamped ones, and plain ones right after a stamped one.
  cudaEvent_t done[2];
  for (auto& d : done) CK(cudaEventCreateWithFlags(&d, cudaEventDisableTiming));
  // `lanes` > 0: the ends are spread over that many lanes (END_SPREAD); the copy brings back the
  // starts and every lane's ends, and the host takes each slot's largest end.
  auto pipeline = [&](KF kf, const char* name, int lanes = 0) {
    cudaGraphExec_t g[2][2];
    size_t words = lanes ? ENDS + LANE * lanes : 0;
    for (int a = 0; a < 2; a++) { g[0][a] = capture(kf, false, false, true, a); g[1][a] = capture(kf, true, false, true, a, words); }
    for (int pass = 0; pass < 2; pass++) {
      int n = 600;
      std::vector<double> t(n);
      auto kind = [&](int i) { return pass == 0 ? 0 : (i % 2 == 0); };
      CK(cudaGraphLaunch(g[kind(0)][0], s)); CK(cudaEventRecord(done[0], s));
      volatile u64 sink = 0;
      for (int i = 0; i < n; i++) {
        int a = i % 2, b = (i + 1) % 2;
        CK(cudaGraphLaunch(g[kind(i + 1)][b], s)); CK(cudaEventRecord(done[b], s));
        CK(cudaEventSynchronize(done[a]));
        t[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
        if (kind(i) && !lanes) { u64 x = 0; for (size_t j = 0; j < 2 * step.size(); j++) x += pin[a][j]; sink = sink + x; }
        if (kind(i) && lanes) {
          u64 x = 0;
          for (size_t j = 0; j < step.size(); j++) {
            u64 e = 0;
            for (int l = 0; l < lanes; l++) e = std::max(e, pin[a][ENDS + LANE * l + j]);
            x += e - pin[a][2 * j];
          }
          sink = sink + x;
        }
      }
      CK(cudaStreamSynchronize(s));
      std::vector<double> st_, pl;
      for (int i = 20; i < n; i++) (kind(i) ? st_ : pl).push_back(t[i] - t[i - 1]);
      auto med = [](std::vector<double> v) { if (v.empty()) return 0.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
      printf("%-36s %-12s stamped %8.1f  plain %8.1f\n", name, pass ? "alternating" : "all plain", med(st_), med(pl));
    }
    for (auto& r : g) for (auto& x : r) CK(cudaGraphExecDestroy(x));
  };
  struct Var { const char* name; KF kf; bool nopdl; } vs[] = {
#define VAR(name, v) {name, k<v>, false}
    VAR("no stamp code", 0),
    VAR("start: clock after the wait", START), VAR("start: clock before the wait", START_EARLY),
    VAR("start: constant after the wait", START_CONST), VAR("start: clock read, not stored", START_CLK),
    VAR("start: clock before wait, stored at end", START_HOLD), VAR("start: clock after wait, stored at end", START_LATE),
    VAR("end: atomicMax clock", END_ATOM), VAR("end: atomicMax constant", END_CONST),
    VAR("end: own word, plain store", END_STORE), VAR("end: atomicMax before output", END_EARLY),
    VAR("end: clock before output, atomic after", END_PRECLK),
    VAR("engine: start + end atomicMax", START | END_ATOM),
    VAR("start + end by the last 4224 blocks", START | END_TAIL),
    {"no PDL: engine", k<START | END_ATOM>, true},
#define SPREAD(name, v, n) {name, k<v, n>, false}
    SPREAD("end: atomicMax over 4 lanes", END_SPREAD, 4), SPREAD("end: atomicMax over 16 lanes", END_SPREAD, 16),
    SPREAD("end: atomicMax over 64 lanes", END_SPREAD, 64), SPREAD("end: atomicMax, 16 lanes by SM", END_SMID, 16),
    SPREAD("start + end over 16 lanes", START | END_SPREAD, 16), SPREAD("start + end over 64 lanes", START | END_SPREAD, 64),
  };
  printf("%-42s %9s %9s %9s %12s\n", "variant", "null ptr", "stamped", "cost", "plain after");
  for (int round = 0; round < 1; round++) {
    for (auto& v : vs) {
      cudaGraphExec_t plain = capture(v.kf, false, v.nopdl, false);
      cudaGraphExec_t g = capture(v.kf, true, v.nopdl, false);
      float base = run({plain}, 0);
      float alone = run({g}, 0);
      float after = run({g, plain}, 1);
      printf("%-42s %9.1f %9.1f %9.1f %12.1f\n", v.name, base, alone, alone - base, after);
      CK(cudaGraphExecDestroy(g)); CK(cudaGraphExecDestroy(plain));
    }
  }
  pipeline(k<START | END_ATOM>, "host loop, engine stamps");
  pipeline(k<START | END_SPREAD, 16>, "host loop, 16 lanes", 16);
  pipeline(k<START | END_SPREAD, 64>, "host loop, 64 lanes", 64);
  return 0;
}
