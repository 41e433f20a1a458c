#!/usr/bin/env bash
# Regenerates the synthesized conformance fixtures (tests/fixtures/conformance/synth.tsv and
# ref/synth-*.jsonl) end to end: each tiny shape of tests/fixtures/conformance/shapes/ is
# synthesized with `cbtop synth` in each mix (deterministic: same shape, mix and seed give the
# same bytes, so only the sha256 is committed, not the model), then evaluated by llama.cpp's
# CPU build on its plain path (no repacked weights, flash attention on as its CPU default
# picks, 2 threads): the prompt in one batch with logits at every position, then 8 greedy
# tokens one decode call each (bench/llama/llama-logits.cpp, `gen=8`).
#
# Then the tokenizer fixture (ref/tokenizer-synth.jsonl): the synthesized qwen3 (byte-level
# BPE, qwen2 pre-tokenizer), gemma3, Phi-3 and Mistral (SentencePiece with byte fallback)
# vocabularies
# at their real sizes (shapes/vocab-*.toml), and the ids llama.cpp's tokenizer gives a set of
# texts with BOS as the vocabulary asks and special tokens parsed (bench/llama/llama-tokens.cpp).
#
#   scripts/arch-fixtures.sh [LLAMA_DIR]
# LLAMA_DIR: a llama.cpp source tree with its CPU build in build/ (default
# /tmp/llama-cpu/llama.cpp, unpacked from ../shared/peer/llama.cpp-src.tar.xz);
# CBTOP: the cbtop binary (default: cargo build, target/debug/cbtop).
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_DIR=${1:-/tmp/llama-cpu/llama.cpp}
SEED=38
PROMPT="1 5 9 200 300 17 42 499 3 256"
# 72 ids: a prompt of 64 tokens or more takes llama.cpp's tiled f32 attention (the CPU
# engine's too), which the short prompt never reaches.
LONG_PROMPT=$(python3 -c "print(' '.join(str((i * 37 + 11) % 512) for i in range(72)))")
STEPS=8
# name prefix, shape file stem, then the mixes it is made in
CASES=(
  "synth tiny-qwen3 f32 f16 q8_0 q4_k_m q6_k"
  "synth tiny-gemma3 f32 f16 q8_0 q4_k_m q6_k"
  "synth tiny-phi3 f32 f16 q8_0 q4_k_m q6_k"
  "synth tiny-mistral f32 q4_k_m"
  "synth tiny-llama-linear f32"
  "synth-long tiny-qwen3 f32"
  "synth-long tiny-phi3 f32"
)

if [ -z "${CBTOP:-}" ]; then
  cargo build --quiet
  CBTOP=target/debug/cbtop
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 -I "$LLAMA_DIR/include" -I "$LLAMA_DIR/ggml/include" \
  bench/llama/llama-logits.cpp -L "$LLAMA_DIR/build/bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$LLAMA_DIR/build/bin" -o "$work/llama-logits"
g++ -O2 -std=c++17 -I "$LLAMA_DIR/include" -I "$LLAMA_DIR/ggml/include" \
  bench/llama/llama-tokens.cpp -L "$LLAMA_DIR/build/bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$LLAMA_DIR/build/bin" -o "$work/llama-tokens"

fixtures=tests/fixtures/conformance
tsv=$fixtures/synth.tsv
{
  echo "# name	shape	mix	seed	sha256 (scripts/arch-fixtures.sh writes this file)"
  for case in "${CASES[@]}"; do
    read -r prefix shape mixes <<<"$case"
    prompt=$PROMPT
    [ "$prefix" = synth-long ] && prompt=$LONG_PROMPT
    for mix in $mixes; do
      upper=$(echo "$mix" | tr a-z A-Z)
      name="$prefix-${shape#tiny-}-$upper"
      model="$work/$name.gguf"
      "$CBTOP" synth --shape "$fixtures/shapes/$shape.toml" --quant "$mix" --seed "$SEED" \
        -o "$model" >/dev/null 2>&1
      echo "$prompt" | LLAMA_FA=1 LLAMA_NO_REPACK=1 LLAMA_THREADS=2 \
        "$work/llama-logits" "$model" 0 "gen=$STEPS" >"$work/$name.bin" 2>"$work/$name.log"
      python3 - "$work/$name.bin" "$fixtures/ref/$name.jsonl" "$prompt" "$STEPS" <<'EOF'
import json, struct, sys
import array

raw = open(sys.argv[1], "rb").read()
prompt = [int(t) for t in sys.argv[3].split()]
steps = int(sys.argv[4])
(n,) = struct.unpack_from("<i", raw, 0)
values = array.array("f")
values.frombytes(raw[4:])
vocab = len(values) // n
assert n == len(prompt) + steps and vocab * n == len(values), (n, len(values))
rows = [values[i * vocab:(i + 1) * vocab] for i in range(n)]
fmt = lambda row: [float("%.7g" % v) for v in row]

def first_max(row):
    best = 0
    for i, v in enumerate(row):
        if v > row[best]:
            best = i
    return best

record = {"prompt": None, "prompt_ids": prompt,
          "prompt_logits": [fmt(r) for r in rows[:len(prompt)]], "steps": []}
generated = []
for s in range(steps):
    logits = rows[len(prompt) - 1 + s]
    token = first_max(logits)
    top = sorted(range(vocab), key=lambda i: (-logits[i], i))[:5]
    record["steps"].append({"top": [[i, float("%.7g" % logits[i])] for i in top],
                            "logits": fmt(logits), "token": token})
    generated.append(token)
record["generated_ids"] = generated
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(record, separators=(",", ":")) + "\n")
EOF
      sum=$(sha256sum "$model" | cut -d' ' -f1)
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$shape" "$mix" "$SEED" "$sum"
      echo "$name: $(python3 -c "import sys; print(open(sys.argv[1]).read().count('token'))" "$fixtures/ref/$name.jsonl") steps" >&2
    done
  done
} >"$tsv"
echo "wrote $tsv and $(grep -vc '^#' "$tsv") references in $fixtures/ref/" >&2

# The tokenizer fixture.
tok=$fixtures/ref/tokenizer-synth.jsonl
: >"$tok"
for shape in vocab-qwen3 vocab-gemma3 vocab-phi3 vocab-mistral; do
  model="$work/$shape.gguf"
  "$CBTOP" synth --shape "$fixtures/shapes/$shape.toml" --quant q8_0 --seed "$SEED" \
    -o "$model" >/dev/null 2>&1
  python3 - "$work/llama-tokens" "$model" "$shape" >>"$tok" <<'EOF'
import json, subprocess, sys

tool, model, shape = sys.argv[1:4]
texts = [
    "Hello world",
    " Hello  world ",
    "hello\nworld\n\n",
    "tabs\tand  spaces   end",
    "   ",
    "don't stop, we're here!",
    "numbers 12345 and 3.14159",
    "Γειά σου Κόσμε",
    "日本語のテキスト",
    "emoji 🦀 and ünïcödé",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|user|>\nhello<|end|>\n<|assistant|>",
    "<s> inside </s> text",
]
hexed = "".join(t.encode().hex() + "\n" for t in texts)
out = subprocess.run([tool, model], input=hexed, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True, check=True)
for text, line in zip(texts, out.stdout.splitlines(), strict=True):
    ids = [int(x) for x in line.split()]
    print(json.dumps({"shape": shape, "prompt": text, "prompt_ids": ids}, ensure_ascii=False))
EOF
done
echo "wrote $tok" >&2
