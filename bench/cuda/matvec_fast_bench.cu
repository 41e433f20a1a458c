// Device harness (bench/cuda/matvec-fast.sh): each fast decode product (kernels/matvec_fast.cu)
// against the exact kernel on random blocks (max |diff| relative to max |out|), and with
// `bench` both kernels timed with CUDA events on a 16384x4096 matrix (GB/s of weights read).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "all_kernels.cu"

typedef void (*K)(const u8*, u64, int, int, const i8*, const float*, const float*, int, const float*, int, float*, u64*, int);
struct Ty { const char* name; int qk, bytes; int f16[2]; int nf; K exact, fast; int act; };
#define T(n, qk, by, f0, f1, nf, act) {#n, qk, by, {f0, f1}, nf, qmv1_##n, mvf_##n, act}
static Ty TYPES[] = {
  T(q4_0, 32, 18, 0, 0, 1, 0), T(q4_1, 32, 20, 0, 2, 2, 1), T(q5_0, 32, 22, 0, 0, 1, 0),
  T(q5_1, 32, 24, 0, 2, 2, 1), T(q8_0, 32, 34, 0, 0, 1, 0), T(q2_k, 256, 84, 80, 82, 2, 2),
  T(q3_k, 256, 110, 108, 0, 1, 2), T(q4_k, 256, 144, 0, 2, 2, 2), T(q5_k, 256, 176, 0, 2, 2, 2),
  T(q6_k, 256, 210, 208, 0, 1, 2),
};
static unsigned rs = 12345; static unsigned rnd() { rs = rs * 1664525u + 1013904223u; return rs >> 8; }
static float frand() { return (rnd() & 0xffff) / 65536.0f; }
static unsigned short h(float f) { __half x = __float2half(f); unsigned short u; memcpy(&u, &x, 2); return u; }
#define CK(x) do { cudaError_t e = (x); if (e) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

int main(int argc, char** argv) {
  int bench = argc > 1;
  for (auto& t : TYPES) {
    for (int shape = 0; shape < (bench ? 3 : 2); shape++) {
      int rows = shape == 0 ? 37 : shape == 1 ? 1000 : 16384;
      int cols = shape == 0 ? 256 : shape == 1 ? 1536 : 4096;
      if (bench && shape < 2) continue;
      size_t rb = (size_t)cols / t.qk * t.bytes, wb = rb * rows;
      std::vector<unsigned char> w(wb + 16);
      for (auto& b : w) b = rnd();
      for (size_t blk = 0; blk < wb / t.bytes; blk++)
        for (int f = 0; f < t.nf; f++) { unsigned short v = h((frand() - 0.3f) * 0.02f); memcpy(&w[blk * t.bytes + t.f16[f]], &v, 2); }
      std::vector<signed char> aq(cols); for (auto& a : aq) a = (signed char)((int)(rnd() % 255) - 127);
      int qa = t.act == 2 ? 256 : 32;
      std::vector<float> ad(cols / qa), ax(cols / 16 + cols / 32 + 1);
      for (auto& d : ad) d = 0.001f + 0.01f * frand();
      if (t.act == 2) for (int g = 0; g < cols / 16; g++) { int s = 0; for (int i = 0; i < 16; i++) s += aq[16 * g + i]; ax[g] = s; }
      if (t.act == 1) for (int g = 0; g < cols / 32; g++) { int s = 0; for (int i = 0; i < 32; i++) s += aq[32 * g + i]; ax[g] = ad[g] * s; }
      u8* dw; i8* daq; float *dad, *dax, *o1, *o2;
      CK(cudaMalloc(&dw, wb + 16)); CK(cudaMemcpy(dw, w.data(), wb + 16, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&daq, cols)); CK(cudaMemcpy(daq, aq.data(), cols, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&dad, ad.size() * 4)); CK(cudaMemcpy(dad, ad.data(), ad.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&dax, ax.size() * 4)); CK(cudaMemcpy(dax, ax.data(), ax.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&o1, rows * 4)); CK(cudaMalloc(&o2, rows * 4));
      auto run = [&](K k, float* o, bool fast) {
        if (fast) k<<<(rows + 3) / 4, 128>>>(dw, rb, rows, cols, daq, dad, dax, 1, nullptr, 0, o, nullptr, 0);
        else k<<<rows, 128>>>(dw, rb, rows, cols, daq, dad, dax, 1, nullptr, 0, o, nullptr, 0);
      };
      run(t.exact, o1, false); run(t.fast, o2, true); CK(cudaDeviceSynchronize());
      std::vector<float> r1(rows), r2(rows);
      CK(cudaMemcpy(r1.data(), o1, rows * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(r2.data(), o2, rows * 4, cudaMemcpyDeviceToHost));
      double mx = 0, md = 0; for (int r = 0; r < rows; r++) { mx = fmax(mx, fabs(r1[r])); md = fmax(md, fabs(r1[r] - r2[r])); }
      printf("%-5s %5dx%-5d max|ref| %10.4g max|diff| %10.3g rel %8.2g %s", t.name, rows, cols, mx, md, md / mx, md / mx < 1e-5 ? "ok" : "BAD");
      if (bench) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        for (int f = 0; f < 2; f++) {
          for (int i = 0; i < 3; i++) run(f ? t.fast : t.exact, o1, f);
          cudaEventRecord(e0); for (int i = 0; i < 20; i++) run(f ? t.fast : t.exact, o1, f); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
          float ms; cudaEventElapsedTime(&ms, e0, e1); printf("  %s %7.1f us %7.0f GB/s", f ? "fast" : "exact", ms * 50, wb / (ms / 20 * 1e-3) / 1e9);
        }
      }
      printf("\n");
      cudaFree(dw); cudaFree(daq); cudaFree(dad); cudaFree(dax); cudaFree(o1); cudaFree(o2);
    }
  }
  return 0;
}
