#!/usr/bin/env bash
# cbtop's GPU engine beside llama.cpp's on the same files, in one run on the GPU machine
# (docs/benchmarks.md): builds llama.cpp (CUDA) from the peer source once, makes each synthetic
# shape in each weight mix with `cbtop synth`, then for each model (and SmolLM2 when $SMOLLM2
# names its file) runs
#   llama-bench -ngl 99 -fa 1: prefills of $PROMPTS tokens, and $TOKENS decode steps at each of
#   $DEPTHS positions of context
#   cbtop --headless --timing off: the same decodes and prefills,
# and prints tok/s side by side with the ratio cbtop / llama.cpp, one row per model, mix and work;
# then runs each mix's slowest row again under --timing events and prints its bricks' shares of
# the time and of their rooflines (bench/brick-shares.py; BRICKS=0 skips that).
#
#   CBTOP=path/to/cbtop [SHAPES="qwen2.5-0.5b ..."] [QUANTS="q4_k_m q8_0 ..."]
#       [DEPTHS="0 1024"] [PROMPTS="512 2048"] [SMOLLM2=file.gguf] [NUMERICS="fast exact"]
#       [REUSE_PEER=1] bash bench/gpu-vs-llama.sh
#
# QUANTS takes the mixes `cbtop synth --quant` writes (q4_0 ... q6_k, f16, bf16). REUSE_PEER=1
# keeps llama.cpp's figures already in $REPORTS (two cbtop builds against one measurement of the
# peer). PEER is the folder holding the llama.cpp source tarball and build-llama.sh (default
# ../shared/peer, else shared/peer; what it is and how to make it: docs/benchmarks.md);
# LLAMA_DIR where it builds (default /tmp/llama-cuda; an existing build is reused).
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
MODELS=${MODELS:-/tmp/cbtop-models}
SHAPES=${SHAPES:-"qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b"}
QUANTS=${QUANTS:-q4_k_m}
DEPTHS=${DEPTHS:-"0 1024"}
PROMPTS=${PROMPTS:-"512 2048"}
NUMERICS=${NUMERICS:-fast}
TOKENS=${TOKENS:-128}
REPS=${REPS:-5}
LLAMA_DIR=${LLAMA_DIR:-/tmp/llama-cuda}
OUT=${REPORTS:-/tmp/cbtop-vs-llama}
mkdir -p "$MODELS" "$OUT"

. "$(dirname "$0")/llama-peer.sh"
bench=$(llama_bench cuda "$LLAMA_DIR")
comma() { echo "$*" | tr ' ' ','; }

bench_models

for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    if [ -z "${REUSE_PEER:-}" ] || [ ! -s "$OUT/$name-llama.json" ]; then
        # Prefills at depth 0 and decodes at each depth, as two runs (one would also prefill
        # at every depth).
        "$bench" -m "$file" -ngl 99 -fa 1 -p "$(comma $PROMPTS)" -n 0 -r "$REPS" -o json \
            >"$OUT/$name-llama-pp.json" 2>"$OUT/$name-llama.log"
        "$bench" -m "$file" -ngl 99 -fa 1 -p 0 -n "$TOKENS" -d "$(comma $DEPTHS)" -r "$REPS" \
            -o json >"$OUT/$name-llama-tg.json" 2>>"$OUT/$name-llama.log"
        python3 -c 'import json, sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:]), [])))' \
            "$OUT/$name-llama-pp.json" "$OUT/$name-llama-tg.json" >"$OUT/$name-llama.json"
    fi
    for num in $NUMERICS; do
        run() { "$CBTOP" --headless --json --device cuda --timing off --numerics "$num" \
            --model-path "$file" "$@"; }
        # Decode from each depth (depth 0: a one-token prompt).
        for d in $DEPTHS; do
            p=$((d > 0 ? d : 1))
            run --warmup 8 --prefill "$p" --tokens "$TOKENS" --ctx $((p + TOKENS + 80)) \
                >"$OUT/$name-$num-d$d.json"
        done
        # Prefills (time to first token).
        for p in $PROMPTS; do
            run --prefill "$p" --tokens 8 --warmup 2 --ctx $((p + 64)) >"$OUT/$name-$num-p$p.json"
        done
    done
done

TOKENS=$TOKENS DEPTHS=$DEPTHS PROMPTS=$PROMPTS python3 - "$OUT" "$NUMERICS" "${models[@]}" <<'PY'
import json, os, sys
gen = int(os.environ["TOKENS"])
depths = [int(d) for d in os.environ["DEPTHS"].split()]
prompts = [int(p) for p in os.environ["PROMPTS"].split()]
out, numerics, models = sys.argv[1], sys.argv[2].split(), [m.split("=")[0] for m in sys.argv[3:]]
slowest = []
w = max([len(m) for m in models] + [5]) + 2
print(f"{'model':<{w}}{'numerics':<9}{'work':<16}{'llama.cpp':>11}{'cbtop':>11}{'ratio':>9}")
for name in models:
    ll = json.load(open(f"{out}/{name}-llama.json"))
    def peer(n_prompt, n_gen, depth):
        for r in ll:
            if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen and r.get("n_depth", 0) == depth:
                return r["avg_ts"]
        return None
    for num in numerics:
        rows = []
        for d in depths:
            rep = json.load(open(f"{out}/{name}-{num}-d{d}.json"))
            rows.append((f"decode d{d}", peer(0, gen, d), rep["throughput"]["tokens_per_sec"]))
        ttft = []
        for n in prompts:
            p = json.load(open(f"{out}/{name}-{num}-p{n}.json"))["throughput"]
            rows.append((f"prefill {n}", peer(n, 0, 0), p["prefill_tokens_per_sec"]))
            ttft.append((n, p["ttft_ms"]))
        for work, a, b in rows:
            ratio = f"{b / a:.3f}x" if a and b else "-"
            print(f"{name:<{w}}{num:<9}{work:<16}{a or 0:>11.1f}{b or 0:>11.1f}{ratio:>9}")
        for n, t in ttft:
            print(f"{'':<{w}}{num:<9}{f'TTFT {n}':<16}{'':>11}{t or 0:>9.1f}ms")
        # The row furthest under llama.cpp, for the per-brick pass below.
        ratios = [(b / a, work) for work, a, b in rows if a and b]
        if ratios:
            kind, n = min(ratios)[1].split()
            slowest.append(f"{name} {num} {kind} {n.lstrip('d')}")
open(f"{out}/slowest.txt", "w").write("".join(s + "\n" for s in slowest))
print(f"tok/s; llama.cpp: llama-bench -ngl 99 -fa 1 (pp at depth 0; tg{gen} at each depth);"
      f" cbtop: --headless --timing off, {gen} decode steps after a prompt of the depth's length")
PY

# Where the slowest row of each mix spends its time: that work again under --timing events, and
# each brick's share of the step (or prompt), GB/s and share of its roofline (bandwidth or
# compute, whichever bounds it). BRICKS=0 skips it.
if [ "${BRICKS:-1}" = 1 ]; then
    echo
    echo "per brick, the slowest row of each mix (cbtop --timing events)"
    while read -r name num kind n; do
        for entry in "${models[@]}"; do [ "${entry%%=*}" = "$name" ] && file=${entry#*=}; done
        if [ "$kind" = decode ]; then
            p=$((n > 0 ? n : 1))
            args=(--warmup 8 --prefill "$p" --tokens "$TOKENS" --ctx $((p + TOKENS + 80)))
        else
            args=(--prefill "$n" --tokens 8 --warmup 2 --ctx $((n + 64)))
        fi
        "$CBTOP" --headless --json --device cuda --timing events --numerics "$num" \
            --model-path "$file" "${args[@]}" >"$OUT/$name-$num-bricks.json"
        python3 "$(dirname "$0")/brick-shares.py" "$OUT/$name-$num-bricks.json" "$kind" \
            "$name $num $kind $n"
    done <"$OUT/slowest.txt"
fi
