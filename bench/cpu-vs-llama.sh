#!/usr/bin/env bash
# cbtop's CPU engine beside llama.cpp's CPU backend on the same files and cores, in one run
# (docs/benchmarks.md): builds llama.cpp (CPU) from the peer source once, makes each synthetic
# shape of $SHAPES (default qwen2.5-0.5b) in each weight mix of $QUANTS (default q4_k_m; any mix
# `cbtop synth --quant` writes) with `cbtop synth`, then for SmolLM2 (when $SMOLLM2 names its
# file) and each of those models runs, for each thread count, REPS rounds (default 3) of
#   llama-bench -t T -p 64 -n 64 -r 1
#   cbtop --headless --device cpu --threads T --timing off --tokens 64 --prefill 64
#       --numerics $NUMERICS (default exact, the reference; fast reorders the float sums of a
#       prompt's Q4_0 and Q8_0 products)
# and prints decode and prefill tok/s (each side's mean over the rounds) with the ratio
# cbtop / llama.cpp, and the lowest and highest ratio of one round's pair of runs (how far a
# single round moves the ratio). The two sides alternate round by round, so a slow phase of a
# shared machine falls on both (run one side's rounds after the other's and a drop in the
# machine's memory bandwidth during one side's runs alone moves the ratio by 20% or more). Each
# row also shows the largest share of CPU time the hypervisor stole during one run of its
# rounds, so a row measured while other guests took the cores says so.
#
#   CBTOP=path/to/cbtop SMOLLM2=$(bash scripts/fetch-test-model.sh) THREADS="2" \
#       [SHAPES="qwen2.5-0.5b"] [QUANTS="q4_k_m q8_0 ..."] bash bench/cpu-vs-llama.sh
#
# Then, for each synthetic model whose mix is in $BRICK_QUANTS (default "q4_0 q8_0"; empty
# skips) and each thread count, it prints cbtop's per-brick prefill table of one 64-token
# prompt under --timing events (time per brick, GB/s, TFLOP/s and share of the brick's roof,
# the quantized products' roof being the measured int8 dot peak named in the table's header),
# first for $CBTOP_BEFORE when set (an earlier build, for a before/after), then for $CBTOP.
#
# PEER: the folder with the llama.cpp source tarball and build-llama.sh (default ../shared/peer,
# else shared/peer; what it is and how to make it: docs/benchmarks.md); LLAMA_DIR: where it
# builds (default /tmp/llama-cpu; an existing build is reused; about 12 minutes on 2 cores).
set -euo pipefail
CBTOP=${CBTOP:-target/release/cbtop}
MODELS=${MODELS:-/tmp/cbtop-models}
THREADS=${THREADS:-2}
NUMERICS=${NUMERICS:-exact}
REPS=${REPS:-3}
SHAPES=${SHAPES:-qwen2.5-0.5b}
QUANTS=${QUANTS:-q4_k_m}
LLAMA_DIR=${LLAMA_DIR:-/tmp/llama-cpu}
OUT=${REPORTS:-/tmp/cbtop-cpu-vs-llama}
mkdir -p "$MODELS" "$OUT"

# The machine's stolen and total CPU time so far, in jiffies (/proc/stat's "cpu" line; "0 0"
# where there is none): on a shared virtual machine, the time the hypervisor gave its cores to
# other guests, which slows whichever side runs then.
cpu_jiffies() {
    awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $9 "," t; f = 1 }
         END { if (!f) print "0,0" }' /proc/stat 2>/dev/null || echo "0,0"
}

. "$(dirname "$0")/llama-peer.sh"
bench=$(llama_bench cpu "$LLAMA_DIR")

bench_models

for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    for t in $THREADS; do
        for r in $(seq "$REPS"); do
            s0=$(cpu_jiffies)
            "$bench" -m "$file" -t "$t" -p 64 -n 64 -r 1 -o json \
                >"$OUT/$name-t$t-llama-r$r.json" 2>"$OUT/$name-t$t-llama-r$r.log"
            s1=$(cpu_jiffies)
            "$CBTOP" --headless --json --device cpu --threads "$t" --timing off \
                --numerics "$NUMERICS" \
                --model-path "$file" --tokens 64 --prefill 64 --warmup 4 --ctx 200 \
                >"$OUT/$name-t$t-cbtop-r$r.json"
            echo "$s0 $s1 $(cpu_jiffies)" >"$OUT/$name-t$t-steal-r$r.txt"
        done
    done
done

NUMERICS=$NUMERICS python3 - "$OUT" "$THREADS" "$REPS" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, threads, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
models = [m.split("=")[0] for m in sys.argv[4:]]
cpu = open("/proc/cpuinfo").read()
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("model name")), "?")
flags = set(next((l.split(":", 1)[1].split() for l in cpu.splitlines() if l.startswith("flags")), []))
isa = [f for f in ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16") if f in flags]
print(f"CPU: {model}; ISA: {' '.join(isa) or 'none of AVX2/AVX-512'}")
w = max([len(m) for m in models] + [5]) + 2
print(f"{'model':<{w}}{'threads':>8}{'work':>10}{'llama.cpp':>11}{'cbtop':>9}{'ratio':>8}{'rounds':>12}{'steal':>8}")

def steal(name, t):
    """The largest share of CPU time stolen during one side's run of a round, in percent."""
    shares = []
    for r in range(1, reps + 1):
        try:
            marks = [tuple(map(int, m.split(","))) for m in open(f"{out}/{name}-t{t}-steal-r{r}.txt").read().split()]
        except (OSError, ValueError):
            return None
        for (s0, t0), (s1, t1) in zip(marks, marks[1:]):
            shares.append(100 * (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0)
    return max(shares, default=None)

for name in models:
    for t in threads:
        lls = [json.load(open(f"{out}/{name}-t{t}-llama-r{r}.json")) for r in range(1, reps + 1)]
        def peer(n_prompt, n_gen):
            ts = [r["avg_ts"] for ll in lls for r in ll
                  if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen]
            return ts if len(ts) == reps else None
        runs = [json.load(open(f"{out}/{name}-t{t}-cbtop-r{r}.json"))["throughput"]
                for r in range(1, reps + 1)]
        ours = lambda k: [c[k] for c in runs] if all(c[k] for c in runs) else None
        st = steal(name, t)
        st = "-" if st is None else f"{st:.1f}%"
        for work, a, b in (("decode", peer(0, 64), ours("tokens_per_sec")),
                           ("prefill", peer(64, 0), ours("prefill_tokens_per_sec"))):
            ma, mb = (statistics.mean(a) if a else None), (statistics.mean(b) if b else None)
            ratio = f"{mb / ma:.2f}x" if ma and mb else "-"
            # Each round's ratio of its two adjacent runs: the spread the mean hides.
            per = [y / x for x, y in zip(a, b) if x] if a and b else []
            spread = f"{min(per):.2f}-{max(per):.2f}" if per else "-"
            print(f"{name:<{w}}{t:>8}{work:>10}{ma or 0:>11.1f}{mb or 0:>9.1f}{ratio:>8}{spread:>12}{st:>8}")
print(f"tok/s, each side's mean over {reps} alternating rounds; llama.cpp: llama-bench -t T"
      " -p 64 -n 64 -r 1 (plain build of the peer, docs/benchmarks.md; repacking as it defaults); cbtop:"
      f" --headless --device cpu --timing off --numerics {os.environ['NUMERICS']}, 64 decode"
      " steps after a 64-token prompt; rounds: the lowest and highest ratio of one round's two"
      " runs; steal: the most of the machine's CPU time the hypervisor"
      " gave to other guests during one side's run of a round (/proc/stat; 0 on a machine of"
      " its own)")
PY

BRICK_QUANTS=${BRICK_QUANTS-q4_0 q8_0}
for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    for q in $BRICK_QUANTS; do
        [ "${name%-"$q"}" != "$name" ] || continue
        for t in $THREADS; do
            for build in ${CBTOP_BEFORE:+before} after; do
                bin=$CBTOP
                [ "$build" = before ] && bin=$CBTOP_BEFORE
                echo
                echo "## $name, $t threads, $build ($bin)"
                "$bin" --headless --format md --device cpu --threads "$t" --timing events \
                    --numerics "$NUMERICS" \
                    --model-path "$file" --tokens 8 --prefill 64 --warmup 2 --ctx 200 |
                    sed -n '/^Prefill of/,/^Telemetry/p' | grep -v '^Telemetry'
            done
        done
    done
done
