#!/usr/bin/env bash
# Batched decode beside llama.cpp's on the same files, in one run (issue 37; docs/benchmarks.md):
# builds llama.cpp from the peer source once (CUDA, or the CPU build with DEVICE=cpu), makes each
# synthetic shape in each mix with `cbtop synth`, then for each model runs
#   llama-batched-bench -npp $PROMPT -ntg $TOKENS -npl $BATCHES (-ngl 99 -fa 1 on the GPU; -t
#   $THREADS on the CPU): S_TG, the generation tokens per second over all sequences;
#   cbtop --headless --batch $BATCHES --prefill $PROMPT --tokens $TOKENS --timing off: each
#   batch size's aggregate tok/s over its measured steps,
# and prints both with the ratio cbtop / llama.cpp, a row per model and batch size. With
# OVERHEAD="8 64" it also runs those batch sizes under --timing events and prints the per-brick
# timing's cost (1 - timed tok/s / untimed tok/s, the two runs back to back).
#
#   CBTOP=path/to/cbtop [DEVICE=cuda|cpu] [THREADS=2] [SHAPES="qwen2.5-0.5b ..."]
#       [QUANTS="q4_k_m ..."] [EXTRA="qwen2.5-7b:q8_0 ..."] [BATCHES="1 2 4 8 16 32 64"]
#       [PROMPT=512] [TOKENS=128] [OVERHEAD="8 64"] bash bench/gpu-batched-vs-llama.sh
#
# EXTRA adds single shape:mix pairs beside the SHAPES x QUANTS matrix. PEER names the folder
# with the llama.cpp source tarball and build-llama.sh (bench/llama-peer.sh); LLAMA_DIR where it
# builds (default /tmp/llama-cuda or /tmp/llama-cpu; an existing build is reused).
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
DEVICE=${DEVICE:-cuda}
THREADS=${THREADS:-2}
MODELS=${MODELS:-/tmp/cbtop-models}
SHAPES=${SHAPES:-"qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b llama-3.1-8b"}
QUANTS=${QUANTS:-q4_k_m}
EXTRA=${EXTRA-qwen2.5-7b:q8_0}
BATCHES=${BATCHES:-"1 2 4 8 16 32 64"}
PROMPT=${PROMPT:-512}
TOKENS=${TOKENS:-128}
OVERHEAD=${OVERHEAD:-}
OUT=${REPORTS:-/tmp/cbtop-batched-vs-llama}
mkdir -p "$MODELS" "$OUT"

. "$(dirname "$0")/llama-peer.sh"
if [ "$DEVICE" = cpu ]; then
    bench=$(llama_bench cpu "${LLAMA_DIR:-/tmp/llama-cpu}")
    peer_args=(-t "$THREADS")
    cbtop_args=(--device cpu --threads "$THREADS")
else
    bench=$(llama_bench cuda "${LLAMA_DIR:-/tmp/llama-cuda}")
    peer_args=(-ngl 99 -fa 1)
    cbtop_args=(--device cuda)
fi
batched=$(dirname "$bench")/llama-batched-bench
[ -x "$batched" ] || { echo "no llama-batched-bench beside $bench" >&2; exit 2; }
comma() { echo "$*" | tr ' ' ','; }
largest=$(echo "$BATCHES" | tr ' ' '\n' | sort -n | tail -1)

bench_models
for pair in $EXTRA; do
    s=${pair%%:*} q=${pair#*:} f=$MODELS/${pair%%:*}-${pair#*:}.gguf
    [ -f "$f" ] || "$CBTOP" synth --shape "$s" --quant "$q" -o "$f" >/dev/null
    models+=("$s-$q=$f")
done

for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    # Every sequence its own prompt and steps in one cache: the largest batch's need.
    "$batched" -m "$file" "${peer_args[@]}" -c $(((PROMPT + TOKENS) * largest + 64)) \
        -npp "$PROMPT" -ntg "$TOKENS" -npl "$(comma $BATCHES)" --output-format jsonl \
        >"$OUT/$name-llama.txt" 2>&1 || { echo "$name: llama-batched-bench failed" >&2; tail -3 "$OUT/$name-llama.txt" >&2; }
    "$CBTOP" --headless --json "${cbtop_args[@]}" --timing off --model-path "$file" \
        --prefill "$PROMPT" --tokens "$TOKENS" --warmup 2 --batch "$(comma $BATCHES)" \
        >"$OUT/$name-cbtop.json"
    for b in $OVERHEAD; do
        for timing in off events; do
            "$CBTOP" --headless --json "${cbtop_args[@]}" --timing "$timing" --model-path "$file" \
                --prefill "$PROMPT" --tokens "$TOKENS" --warmup 2 --batch "$b" \
                >"$OUT/$name-b$b-$timing.json"
        done
    done
done

DEVICE=$DEVICE OVERHEAD=$OVERHEAD python3 - "$OUT" "${models[@]}" <<'PY'
import json, os, sys
out, models = sys.argv[1], [m.split("=")[0] for m in sys.argv[2:]]
w = max([len(m) for m in models] + [5]) + 2
print(f"{'model':<{w}}{'B':>4}{'llama.cpp':>12}{'cbtop':>11}{'ratio':>9}")
for name in models:
    peer = {}
    for line in open(f"{out}/{name}-llama.txt"):
        if line.startswith('{"n_kv_max"'):
            r = json.loads(line)
            peer[r["pl"]] = r["speed_tg"]
    ours = {p["n"]: p["tokens_per_sec"] for p in json.load(open(f"{out}/{name}-cbtop.json"))["batch"]}
    for b in sorted(set(peer) | set(ours)):
        a, c = peer.get(b), ours.get(b)
        ratio = f"{c / a:.3f}x" if a and c else "-"
        print(f"{name:<{w}}{b:>4}{a or 0:>12.1f}{c or 0:>11.1f}{ratio:>9}")
    for b in os.environ["OVERHEAD"].split():
        tok = lambda t: json.load(open(f"{out}/{name}-b{b}-{t}.json"))["batch"][0]["tokens_per_sec"]
        off, ev = tok("off"), tok("events")
        print(f"{name:<{w}}{b:>4}  per-brick timing: {off:.1f} tok/s untimed, {ev:.1f} timed, "
              f"overhead {100 * (1 - ev / off):.1f}%")
dev = os.environ["DEVICE"]
print(f"aggregate generation tok/s; llama.cpp: llama-batched-bench S_TG ({'-ngl 99 -fa 1' if dev != 'cpu' else '-t THREADS'});"
      " cbtop: --headless --timing off --batch, each sequence its own prompt")
PY
