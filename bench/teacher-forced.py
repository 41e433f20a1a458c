#!/usr/bin/env python3
"""Teacher-forced logits against llama.cpp's CPU (`fast` numerics on the GPU; docs/engine.md).

For each prompt of the SmolLM2 fixture (llama.cpp CPU's greedy run: prompt ids, then per step
the token and the top-5 logits), the prompt and the fixture's tokens are fed in one batch and
the logits at every step's position are read back; at each step the fixture's five top ids are
looked up and |candidate - llama.cpp CPU| is taken. Candidates: cbtop on the GPU (`fast` and
`exact`, `generate --ids --prompt-logits`), cbtop on the CPU, and llama.cpp itself with all
layers on the GPU (bench/llama/llama-logits.cpp, built against the peer's CUDA build), fed in
one batch and one token per decode call. Prints
mean and max |difference| per candidate over all positions of all prompts.

    CBTOP=devbin/cbtop MODEL=/tmp/smollm2.gguf LLAMA_DIR=/tmp/llama-cuda/llama.cpp \
        python3 bench/teacher-forced.py

LLAMA_DIR is a built peer (bench/llama-peer.sh); without it the llama.cpp row is skipped.
LLAMA_NGL=0 keeps llama.cpp on the CPU (a check of this harness: its rows must then match the
fixture to its 4 decimals).
"""
import json
import os
import struct
import subprocess
import sys

cbtop = os.environ.get("CBTOP", "target/release/cbtop")
model = os.environ["MODEL"]
fixture = os.environ.get("FIXTURE", "tests/fixtures/smollm2/generation.jsonl")
llama_dir = os.environ.get("LLAMA_DIR")
here = os.path.dirname(os.path.abspath(__file__))

prompts = [json.loads(line) for line in open(fixture) if line.strip()]
# The fed sequence: the prompt and every fixture token but the last (whose logits nobody needs).
seqs = [p["prompt_ids"] + [s["token"] for s in p["steps"][:-1]] for p in prompts]


def rows_at_steps(p, rows):
    """Step i's logits: the row of the position before the step's token."""
    base = len(p["prompt_ids"]) - 1
    return [rows[base + i] for i in range(len(p["steps"]))]


def cbtop_rows(device, numerics, env=None):
    out = []
    for seq in seqs:
        cmd = [cbtop, "generate", "--model-path", model, "--ids", " ".join(map(str, seq)),
               "--prompt-logits", "--max-tokens", "1", "--greedy", "--json", "--device", device]
        if numerics:
            cmd += ["--numerics", numerics]
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd[:3])} ... failed ({r.returncode}): {r.stderr.strip()}")
        out.append(json.loads(r.stdout)["prompt_logits"])
    return out


def llama_rows(mode):
    src = os.path.join(here, "llama", "llama-logits.cpp")
    exe = "/tmp/llama-logits"
    libdir = None
    for root, _, files in os.walk(os.path.join(llama_dir, "build")):
        if "libllama.so" in files:
            libdir = root
    if libdir is None:
        sys.exit(f"no libllama.so under {llama_dir}/build")
    subprocess.run(["g++", "-O2", "-std=c++17", src, "-o", exe,
                    f"-I{llama_dir}/include", f"-I{llama_dir}/ggml/include", f"-L{libdir}",
                    "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{libdir}"], check=True)
    r = subprocess.run([exe, model, ngl, mode], input="\n".join(" ".join(map(str, s)) for s in seqs).encode(),
                       capture_output=True, text=False)
    if r.returncode != 0:
        sys.exit(f"llama-logits failed: {r.stderr.decode()[-2000:]}")
    data, off, out = r.stdout, 0, []
    # Every row has the vocabulary's width: what the counts leave, over the rows.
    vocab = (len(data) - 4 * len(seqs)) // (4 * sum(len(s) for s in seqs))
    for seq in seqs:
        (n,) = struct.unpack_from("<i", data, off)
        off += 4
        assert n == len(seq), (n, len(seq))
        out.append([struct.unpack_from(f"<{vocab}f", data, off + 4 * vocab * i) for i in range(n)])
        off += 4 * vocab * n
    return out


def diffs(all_rows):
    d = []
    for p, rows in zip(prompts, all_rows):
        for step, row in zip(p["steps"], rows_at_steps(p, rows)):
            for tid, logit in step["top"]:
                d.append(abs(row[tid] - logit))
    return d


# "tensor": every fed sequence (all shorter than 64 tokens) on the tensor-core prompt path.
cands = [("cbtop cuda fast", lambda: cbtop_rows("cuda", "fast")),
         ("cbtop cuda fast tensor", lambda: cbtop_rows("cuda", "fast", {"CBTOP_TENSOR_CORES_FROM": "2"})),
         ("cbtop cuda exact", lambda: cbtop_rows("cuda", "exact")),
         ("cbtop cpu", lambda: cbtop_rows("cpu", None))]
ngl = os.environ.get("LLAMA_NGL", "99")
if llama_dir:
    where = "cuda" if ngl != "0" else "cpu"
    cands.append((f"llama.cpp {where} batch", lambda: llama_rows("batch")))
    cands.append((f"llama.cpp {where} step", lambda: llama_rows("step")))
# CANDIDATES: a comma-separated subset, e.g. "cbtop cpu,llama.cpp cuda step".
only = os.environ.get("CANDIDATES")
if only:
    cands = [c for c in cands if c[0] in only.split(",")]
positions = sum(len(p["steps"]) for p in prompts)
print(f"{len(prompts)} prompts, {positions} positions, 5 logits each, against llama.cpp CPU")
print(f"{'candidate':<24}{'mean |diff|':>12}{'max |diff|':>12}")
for name, get in cands:
    d = diffs(get())
    print(f"{name:<24}{sum(d) / len(d):>12.4f}{max(d):>12.4f}")
