#!/bin/bash
# Make the gemma3 conformance references (tests/fixtures/conformance/ref/conf-gemma3-*.jsonl and
# their .sha256): synthesize each tiny model with `cbtop synth` (seed 0, the shape in
# tests/fixtures/conformance/shapes/conf-gemma3.toml), record its sha256, and run it through
# llama.cpp's CPU build (bench/llama/llama-greedy.cpp: prompt in one batch, 8 greedy steps one
# token per decode call, weights not repacked). The .gguf files are not kept: tests/
# conformance_gemma3.rs synthesizes them again and checks the sha256.
#
#   scripts/gemma3-fixtures.sh [LLAMA_DIR]   (default /tmp/llama-cpu/llama.cpp: a CPU build of
#                                             ../shared/peer, see shared/peer/build-llama.sh)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
llama=${1:-/tmp/llama-cpu/llama.cpp}
lib="$llama/build/bin"
[ -f "$lib/libllama.so" ] || { echo "no $lib/libllama.so: build llama.cpp's CPU backend first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 "$here/bench/llama/llama-greedy.cpp" -I"$llama/include" -I"$llama/ggml/include" \
    -L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib" -o "$work/llama-greedy"
(cd "$here" && cargo build --quiet --bin cbtop)
cbtop="$here/target/debug/cbtop"
shape="$here/tests/fixtures/conformance/shapes/conf-gemma3.toml"
ref="$here/tests/fixtures/conformance/ref"
ids="1 5 9 200 300 17 42 499 3 256"
for t in F32 F16 Q8_0 Q4_K Q6_K; do
    name="conf-gemma3-$t"
    model="$work/$name.gguf"
    "$cbtop" synth --shape "$shape" --quant "pure-$(echo "$t" | tr A-Z a-z)" --seed 0 -o "$model"
    (cd "$work" && sha256sum "$name.gguf") > "$ref/$name.sha256"
    "$work/llama-greedy" "$model" 8 "$ids" > "$ref/$name.jsonl" 2> "$work/$name.log" \
        || { cat "$work/$name.log" >&2; exit 1; }
    echo "$name: $(cut -c1-16 "$ref/$name.sha256")... $(wc -c < "$ref/$name.jsonl") bytes"
done
