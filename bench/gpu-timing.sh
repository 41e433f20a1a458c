#!/usr/bin/env bash
# Per-brick timing overhead on the GPU (issue 10), in one run on the GPU machine: for each model
# and context depth, one headless run with per-brick timing (kernel timestamps; an unprofiled
# step interleaved after every profiled one gives the overhead from the same run) and one run
# with `--timing off`. Prints both tok/s, the overhead, and how the token time splits into
# bricks + gaps + other.
#
#   CBTOP=path/to/cbtop SMOLLM2=path/to/smollm2.gguf bash bench/gpu-timing.sh
#
# Synthetic Qwen2.5 files are made with `cbtop synth` into $MODELS (default /tmp/cbtop-models).
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
MODELS=${MODELS:-/tmp/cbtop-models}
SHAPES=${SHAPES:-"qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b"}
DEPTHS=${DEPTHS:-"0 1024"}
TOKENS=${TOKENS:-128}
OUT=${REPORTS:-/tmp/cbtop-reports}
mkdir -p "$MODELS" "$OUT"

for s in $SHAPES; do
    [ -f "$MODELS/$s.gguf" ] || "$CBTOP" synth --shape "$s" --quant q4_k_m -o "$MODELS/$s.gguf" &
done
wait

models=()
[ -n "${SMOLLM2:-}" ] && [ -f "$SMOLLM2" ] && models+=("smollm2-135m=$SMOLLM2")
for s in $SHAPES; do models+=("$s=$MODELS/$s.gguf"); done

rows=()
for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    for d in $DEPTHS; do
        # Depth d: a prompt of d tokens (at least 1) evaluated first; the context holds the
        # prompt, the warm-up and the measured steps (twice, for the interleaved ones).
        p=$((d > 0 ? d : 1))
        ctx=$((p + 2 * TOKENS + 64))
        common=(--headless --json --device cuda --model-path "$file" --prefill "$p" --ctx "$ctx"
            --warmup 8)
        "$CBTOP" "${common[@]}" --tokens "$TOKENS" --timing events >"$OUT/$name-d$d-events.json"
        # Twice the steps, so the off run covers the same positions as the interleaved run.
        "$CBTOP" "${common[@]}" --tokens $((2 * TOKENS)) --timing off >"$OUT/$name-d$d-off.json"
        "$CBTOP" "${common[@]}" --tokens "$TOKENS" --timing sync >"$OUT/$name-d$d-sync.json"
        rows+=("$name $d")
    done
done

python3 - "$OUT" "${rows[@]}" <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'model':<14}{'depth':>6}{'events':>9}{'interl.':>9}{'ovh%':>7}{'off':>9}{'ev/off%':>9}"
      f"{'bricks':>9}{'gaps':>8}{'other':>8}{'other%':>7}{'sum/tok':>8}  source")
for r in sys.argv[2:]:
    name, d = r.split()
    ev = json.load(open(f"{out}/{name}-d{d}-events.json"))
    off = json.load(open(f"{out}/{name}-d{d}-off.json"))
    t = ev["throughput"]
    bricks = sum(b["mean_us"] for b in ev["bricks"])
    gaps = ev.get("gaps_us") or 0.0
    other = ev["other_us"]
    tok = ev["token_us"]
    ratio = 100.0 * (1 - t["tokens_per_sec"] / off["throughput"]["tokens_per_sec"])
    srcs = sorted({b["source"] for b in ev["bricks"]})
    print(f"{name:<14}{d:>6}{t['tokens_per_sec']:>9.1f}{t['unprofiled_tokens_per_sec'] or 0:>9.1f}"
          f"{t['overhead_percent'] or 0:>7.2f}{off['throughput']['tokens_per_sec']:>9.1f}{ratio:>9.2f}"
          f"{bricks:>9.1f}{gaps:>8.1f}{other:>8.1f}{100*other/tok:>7.2f}{(bricks+gaps+other)/tok:>8.4f}  {','.join(srcs)}")
print("events/interl.: tok/s with per-brick timing / the unprofiled steps interleaved in that run;"
      " off: a separate --timing off run; ev/off%: how much slower events is than off")
PY
