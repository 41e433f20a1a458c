#!/usr/bin/env bash
# cbtop's GPU engine beside llama.cpp's on the same files, in one run on the GPU machine
# (docs/benchmarks.md): builds llama.cpp (CUDA) from the peer source once, makes the
# four synthetic Qwen2.5 shapes with `cbtop synth`, then for each model (and SmolLM2 when
# $SMOLLM2 names its file) runs
#   llama-bench -ngl 99 -fa 1 -p 512,2048 -n 128 -d 0,1024 -r 5
#   cbtop --headless --timing off: decode 128 tokens from depth ~0 and from depth 1024, and
#   512- and 2048-token prefills,
# and prints tok/s side by side with the ratio cbtop / llama.cpp per row.
#
#   CBTOP=path/to/cbtop [SMOLLM2=file.gguf] [NUMERICS="fast exact"] [REUSE_PEER=1] \
#       bash bench/gpu-vs-llama.sh
#
# PEER is the folder holding the llama.cpp source tarball and build-llama.sh (default
# ../shared/peer, else shared/peer; what it is and how to make it: docs/benchmarks.md);
# LLAMA_DIR where it builds (default /tmp/llama-cuda; an existing build is reused).
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
MODELS=${MODELS:-/tmp/cbtop-models}
SHAPES=${SHAPES:-"qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b"}
NUMERICS=${NUMERICS:-fast}
TOKENS=${TOKENS:-128}
REPS=${REPS:-5}
LLAMA_DIR=${LLAMA_DIR:-/tmp/llama-cuda}
OUT=${REPORTS:-/tmp/cbtop-vs-llama}
mkdir -p "$MODELS" "$OUT"

. "$(dirname "$0")/llama-peer.sh"
bench=$(llama_bench cuda "$LLAMA_DIR")

for s in $SHAPES; do
    [ -f "$MODELS/$s.gguf" ] || "$CBTOP" synth --shape "$s" --quant q4_k_m -o "$MODELS/$s.gguf" >/dev/null &
done
wait

models=()
[ -n "${SMOLLM2:-}" ] && [ -f "$SMOLLM2" ] && models+=("smollm2-135m=$SMOLLM2")
for s in $SHAPES; do models+=("$s=$MODELS/$s.gguf"); done

for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    # REUSE_PEER=1 keeps llama.cpp's figures already in $REPORTS (two cbtop builds against one
    # measurement of the peer, in one call on the GPU machine).
    if [ -z "${REUSE_PEER:-}" ] || [ ! -s "$OUT/$name-llama.json" ]; then
        "$bench" -m "$file" -ngl 99 -fa 1 -p 512,2048 -n "$TOKENS" -d 0,1024 -r "$REPS" -o json \
            >"$OUT/$name-llama.json" 2>"$OUT/$name-llama.log"
    fi
    for num in $NUMERICS; do
        run() { "$CBTOP" --headless --json --device cuda --timing off --numerics "$num" \
            --model-path "$file" "$@"; }
        # Decode from depth ~0 (a one-token prompt) and from depth 1024.
        run --warmup 8 --prefill 1 --tokens "$TOKENS" --ctx $((TOKENS + 80)) >"$OUT/$name-$num-d0.json"
        run --warmup 8 --prefill 1024 --tokens "$TOKENS" --ctx $((1024 + TOKENS + 80)) \
            >"$OUT/$name-$num-d1024.json"
        # Prefills of 512 and 2048 tokens (time to first token).
        for p in 512 2048; do
            run --prefill $p --tokens 8 --warmup 2 --ctx $((p + 64)) >"$OUT/$name-$num-p$p.json"
        done
    done
done

TOKENS=$TOKENS python3 - "$OUT" "$NUMERICS" "${models[@]}" <<'PY'
import json, os, sys
gen = int(os.environ["TOKENS"])
out, numerics, models = sys.argv[1], sys.argv[2].split(), [m.split("=")[0] for m in sys.argv[3:]]
print(f"{'model':<14}{'numerics':<9}{'work':<16}{'llama.cpp':>11}{'cbtop':>11}{'ratio':>9}")
for name in models:
    ll = json.load(open(f"{out}/{name}-llama.json"))
    def peer(n_prompt, n_gen, depth):
        for r in ll:
            if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen and r.get("n_depth", 0) == depth:
                return r["avg_ts"]
        return None
    for num in numerics:
        rows = []
        for d in (0, 1024):
            rep = json.load(open(f"{out}/{name}-{num}-d{d}.json"))
            rows.append((f"decode d{d}", peer(0, gen, d), rep["throughput"]["tokens_per_sec"]))
        ttft = []
        for n in (512, 2048):
            p = json.load(open(f"{out}/{name}-{num}-p{n}.json"))["throughput"]
            rows.append((f"prefill {n}", peer(n, 0, 0), p["prefill_tokens_per_sec"]))
            ttft.append((n, p["ttft_ms"]))
        for work, a, b in rows:
            ratio = f"{b / a:.3f}x" if a and b else "-"
            print(f"{name:<14}{num:<9}{work:<16}{a or 0:>11.1f}{b or 0:>11.1f}{ratio:>9}")
        for n, t in ttft:
            print(f"{'':<14}{num:<9}{f'TTFT {n}':<16}{'':>11}{t or 0:>9.1f}ms")
print("tok/s; llama.cpp: llama-bench -ngl 99 -fa 1 (pp512 and pp2048 at depth 0, tg128 at depth 0 and 1024);"
      " cbtop: --headless --timing off, 128 decode steps after a 1- or 1024-token prompt")
PY
