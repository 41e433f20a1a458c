#!/usr/bin/env bash
# Regenerates tests/fixtures/quant-mixes/*.tsv: llama-quantize's per-tensor types for every mix
# `cbtop synth` writes, on the shapes the test checks. Builds llama-quantize (CPU) from the peer
# source (docs/benchmarks.md), writes an f16 synth file of each shape, quantizes it to each mix
# and lists the tensor types (mix, tensor, type per line).
#
#   CBTOP=path/to/cbtop [PEER=dir] [WORK=/tmp/quant-mixes] [OUT=tests/fixtures/quant-mixes] \
#       bash bench/quant-mixes.sh
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
WORK=${WORK:-/tmp/quant-mixes}
OUT=${OUT:-tests/fixtures/quant-mixes}
PEER=${PEER:-../shared/peer}
MIXES="Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K F16 BF16"
SHAPES="smollm2-135m qwen2.5-0.5b llama-3.2-1b tests/fixtures/quant-mixes/tiny-untied.toml"
mkdir -p "$WORK" "$OUT"
if [ ! -x "$WORK/llama.cpp/build/bin/llama-quantize" ]; then
    tar xJf "$PEER/llama.cpp-src.tar.xz" -C "$WORK"
    (cd "$WORK/llama.cpp" &&
        cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF >cfg.log 2>&1 &&
        cmake --build build -j"$(nproc)" --target llama-quantize >build.log 2>&1)
fi
quantize=$WORK/llama.cpp/build/bin/llama-quantize
for s in $SHAPES; do
    n=$(basename "$s" .toml)
    "$CBTOP" synth --shape "$s" --quant f16 -o "$WORK/$n-f16.gguf" >&2
    : >"$OUT/$n.tsv"
    for m in $MIXES; do
        "$quantize" "$WORK/$n-f16.gguf" "$WORK/q.gguf" "$m" "$(nproc)" >"$WORK/q.log" 2>&1
        "$CBTOP" inspect "$WORK/q.gguf" |
            awk -v m="$m" '/^tensor +type/ {t = 1; next} t && NF >= 3 {print m "\t" $1 "\t" $2}' \
                >>"$OUT/$n.tsv"
    done
    echo "$n: $(wc -l <"$OUT/$n.tsv") tensor types" >&2
done
