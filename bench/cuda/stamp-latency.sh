#!/usr/bin/env bash
# Build and run bench/cuda/stamp_latency.cu on a machine with nvcc and a GPU of sm_90 (Hopper):
# the %globaltimer read's latency and what a stamp costs a PDL chain of one-block kernels.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/cbtop-stamp-latency}
mkdir -p "$work"
nvcc -O3 -arch=sm_90 -o "$work/stamp_latency" "$here/stamp_latency.cu"
"$work/stamp_latency"
