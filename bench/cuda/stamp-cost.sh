#!/usr/bin/env bash
# Build and run bench/cuda/stamp_cost.cu on a machine with nvcc and a GPU of sm_90 (Hopper):
# what each way of stamping kernels with %globaltimer costs a graph of PDL-chained kernels.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/cbtop-stamp-cost}
mkdir -p "$work"
nvcc -O3 -arch=sm_90 -o "$work/stamp_cost" "$here/stamp_cost.cu"
for m in ${WIDTHS:-1 2 4}; do "$work/stamp_cost" $m; done
