#!/usr/bin/env bash
# Per-brick timing overhead on the GPU (docs/timing.md), in one run on the GPU machine: for each model
# and context depth, ROUNDS rounds (default 3) of one headless run with per-brick timing (kernel
# timestamps; an unprofiled step interleaved after every profiled one gives the overhead from
# the same run) followed by one run with `--timing off`. A single short run of either swings by
# 1-2% on these machines (GPU clocks, the host), so the table gives each mode's median over the
# rounds, the overhead of the medians, and the range of the rounds' own overheads; every
# round's figures are printed below it. Also how the token time splits into bricks + gaps +
# other (from the median events round).
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
ROUNDS=${ROUNDS:-3}
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
        for r in $(seq "$ROUNDS"); do
            "$CBTOP" "${common[@]}" --tokens "$TOKENS" --timing events \
                >"$OUT/$name-d$d-r$r-events.json"
            # Twice the steps, so the off run covers the same positions as the interleaved run.
            "$CBTOP" "${common[@]}" --tokens $((2 * TOKENS)) --timing off \
                >"$OUT/$name-d$d-r$r-off.json"
        done
        "$CBTOP" "${common[@]}" --tokens "$TOKENS" --timing sync >"$OUT/$name-d$d-sync.json"
        rows+=("$name $d")
    done
done

python3 - "$OUT" "$ROUNDS" "${rows[@]}" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
tps = lambda j: j["throughput"]["tokens_per_sec"]
print(f"{'model':<14}{'depth':>6}{'events':>9}{'interl.':>9}{'ovh%':>7}{'off':>9}{'ev/off%':>9}"
      f"{'range%':>15}{'bricks':>9}{'gaps':>8}{'other':>8}{'other%':>7}{'sum/tok':>8}  source")
detail = []
for r in sys.argv[3:]:
    name, d = r.split()
    evs = [json.load(open(f"{out}/{name}-d{d}-r{i}-events.json")) for i in range(1, rounds + 1)]
    offs = [json.load(open(f"{out}/{name}-d{d}-r{i}-off.json")) for i in range(1, rounds + 1)]
    # The median events round (by tok/s) gives the split; the medians give the overhead.
    ev = sorted(evs, key=tps)[(rounds - 1) // 2]
    ev_med = statistics.median(tps(j) for j in evs)
    off_med = statistics.median(tps(j) for j in offs)
    per = [100.0 * (1 - tps(e) / tps(o)) for e, o in zip(evs, offs)]
    t = ev["throughput"]
    bricks = sum(b["mean_us"] for b in ev["bricks"])
    gaps = ev.get("gaps_us") or 0.0
    other = ev["other_us"]
    tok = ev["token_us"]
    ratio = 100.0 * (1 - ev_med / off_med)
    srcs = sorted({b["source"] for b in ev["bricks"]})
    print(f"{name:<14}{d:>6}{ev_med:>9.1f}{t['unprofiled_tokens_per_sec'] or 0:>9.1f}"
          f"{t['overhead_percent'] or 0:>7.2f}{off_med:>9.1f}{ratio:>9.2f}"
          f"  {min(per):>6.2f}..{max(per):<5.2f}"
          f"{bricks:>9.1f}{gaps:>8.1f}{other:>8.1f}{100*other/tok:>7.2f}{(bricks+gaps+other)/tok:>8.4f}  {','.join(srcs)}")
    detail.append(f"{name:<14}{d:>6}  " + "  ".join(
        f"{tps(e):.1f}/{tps(o):.1f}" for e, o in zip(evs, offs)))
print(f"events, off: median tok/s over {rounds} rounds (each an events run, then an off run);"
      " interl./ovh%: the unprofiled steps interleaved in the median events run and their"
      " overhead; ev/off%: how much slower the events median is than the off median; range%:"
      " the rounds' own events/off overheads; bricks..sum/tok: the median events run")
print("rounds, events/off tok/s:")
print("\n".join(detail))
PY
