#!/usr/bin/env bash
# Build and run bench/cuda/matvec_fast_bench.cu on a machine with nvcc (the GPU machine): the
# kernel sources concatenated as the engine compiles them (common.cuh first), then
# correctness on small shapes and GB/s of the fast and exact decode products.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/cbtop-matvec-bench}
mkdir -p "$work"
: >"$work/all_kernels.cu"
for f in common.cuh act_quant.cu matvec_float.cu matvec_legacy.cu matvec_q2k_q3k.cu matvec_q4k.cu \
    matvec_q6k.cu matvec_fast_float.cu matvec_fast.cu; do
    cat "$here/../../kernels/$f" >>"$work/all_kernels.cu"
    echo >>"$work/all_kernels.cu"
done
# nvcc's headers define INFINITY already.
sed -i 's/^#define INFINITY.*//' "$work/all_kernels.cu"
cp "$here/matvec_fast_bench.cu" "$work/"
nvcc -O3 -arch=sm_90 --fmad=false -I"$work" -include cuda_fp16.h \
    -o "$work/matvec_fast_bench" "$work/matvec_fast_bench.cu"
"$work/matvec_fast_bench"
"$work/matvec_fast_bench" bench
