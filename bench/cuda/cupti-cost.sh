#!/usr/bin/env bash
# Build and run bench/cuda/cupti_cost.cu on a machine with nvcc, CUPTI and a Hopper GPU: what
# CUPTI's kernel records cost a graph of PDL-chained kernels, against in-kernel stamps.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/cbtop-cupti-cost}
mkdir -p "$work"
hdr=$(dirname "$(find / -name cupti.h -path '*include*' 2>/dev/null | head -1)")
lib=$(dirname "$(find / -name 'libcupti.so*' 2>/dev/null | head -1)")
echo "cupti.h in $hdr, libcupti in $lib"
for rec in CUpti_ActivityKernel10 CUpti_ActivityKernel9 CUpti_ActivityKernel8; do
  if nvcc -O3 -arch=sm_90 -DKREC=$rec -I"$hdr" -L"$lib" -o "$work/cupti_cost" "$here/cupti_cost.cu" -lcupti 2>"$work/err"; then
    echo "record struct $rec"; break
  fi
done
[ -x "$work/cupti_cost" ] || { cat "$work/err"; exit 1; }
for shape in ${SHAPES:-0.5b smol}; do LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" "$work/cupti_cost" $shape; done
