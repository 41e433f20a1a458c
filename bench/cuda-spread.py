#!/usr/bin/env python3
"""llama.cpp's own CUDA-vs-CPU spread on the cases cbtop's GPU tests hold `fast` numerics to.

`fast` may reorder sums; it is held to the spread llama.cpp's CUDA build shows against its own
CPU build on the same file, prompt and steps. This measures that spread, over every logit of
every row the tests compare, in two halves:

  prepare DIR   (the machine with llama.cpp's CPU build): make each case's model with
                `cbtop synth`, its token ids (the CPU engine's greedy steps where the test
                takes them), and llama.cpp's CPU logits (plain path: LLAMA_NO_REPACK=1, flash
                attention on, 2 threads), kept for the rows the test compares.
  measure DIR   (the GPU machine): the same models (sha256 checked), llama.cpp's CUDA logits
                (-ngl 99, flash attention on), and the largest difference per case, as the
                test measures it: max |diff|, or max |diff| / the CPU row's range.

Environment: CBTOP (the cbtop binary), LLAMA_LOGITS (bench/llama/llama-logits.cpp built
against the CPU build for `prepare`, the CUDA build for `measure`), CASES (a regular
expression; only matching case names). Writes DIR/spread.tsv in `measure`.
"""
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests/fixtures/conformance")
CBTOP = os.environ.get("CBTOP", os.path.join(ROOT, "target/release/cbtop"))
MIXES = ["f32", "f16", "q8_0", "q4_k_m", "q6_k"]
# tests/gpu_arch.rs PROMPT
SHORT = [1, 5, 9, 200, 300, 17, 42, 499, 3, 256]


def splitmix(seed):
    s = seed
    while True:
        s = (s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        yield z ^ (z >> 31)


def random_ids(seed, n, vocab):
    g = splitmix(seed)
    return [next(g) % vocab for _ in range(n)]


def greedy(model, ids, steps):
    out = subprocess.run(
        [CBTOP, "generate", "--model-path", model, "--ids", " ".join(map(str, ids)),
         "--greedy", "--max-tokens", str(steps), "--ignore-eos", "--json", "--device", "cpu",
         "--numerics", "exact"],
        check=True, capture_output=True, text=True).stdout
    return [s["token"] for s in json.loads(out)["steps"]]


def cases():
    """(name, synth args, prompt builder, steps source, rows, metric) for every case."""
    out = []
    # gpu_conformance and gpu_arch's first test: the synthesized fixtures, llama.cpp's prompt
    # and greedy tokens, every prompt position and step, max |diff|.
    for line in open(os.path.join(FIX, "synth.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        name, shape, mix, seed, _sha = line.split("\t")
        ref = json.loads(open(os.path.join(FIX, f"ref/{name}.jsonl")).readline())
        prompt = ref["prompt_ids"]
        steps = [s["token"] for s in ref["steps"]]
        out.append(dict(name=name, shape=f"{FIX}/shapes/{shape}.toml", mix=mix, seed=int(seed),
                        prompt=prompt, steps=steps, rows="all", metric="abs"))
    # gpu_arch's second test: every tiny shape in every mix (seed 0), the short prompt and the
    # CPU's 8 greedy steps (max |diff|), then an 80-token prompt and the same steps (of range).
    for f in sorted(os.listdir(f"{FIX}/shapes")):
        if not (f.startswith("tiny-") and f.endswith(".toml")):
            continue
        stem = f[:-5]
        for mix in MIXES:
            base = dict(shape=f"{FIX}/shapes/{f}", mix=mix, seed=0, rows="all")
            out.append(dict(base, name=f"{stem} {mix}", prompt=SHORT, steps="greedy",
                            metric="abs"))
            out.append(dict(base, name=f"{stem} {mix}, 80-token prompt", prompt=("random", 80, 80),
                            steps=f"{stem} {mix}", metric="range"))
    # gpu_synth's phi3-mini fast test: 600 random ids (seed 11), the CPU's greedy steps; the
    # rows after the prompt and after each of the first 7 steps.
    out.append(dict(name="synth phi3-mini q4_k_m, 600-token prompt", shape="phi3-mini",
                    mix="q4_k_m", seed=11, prompt=("random", 11, 600, 32000), steps="greedy",
                    rows=("last", 8), metric="range"))
    return out


def model_path(d, case):
    return os.path.join(d, re.sub(r"[^A-Za-z0-9_.-]+", "_", case["name"]) + ".gguf")


def synth(d, case):
    path = model_path(d, case)
    subprocess.run([CBTOP, "synth", "--shape", case["shape"], "--quant", case["mix"], "--seed",
                    str(case["seed"]), "-o", path], check=True, capture_output=True)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return path, h.hexdigest()


def vocab_of(path):
    out = subprocess.run([CBTOP, "inspect", path], check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        m = re.search(r"tokenizer\.ggml\.tokens\s+.*?(\d+)", line)
        if m:
            return int(m.group(1))
    raise SystemExit(f"{path}: no vocabulary size in `cbtop inspect`")


def llama_logits(model, ids, tail, ngl):
    env = dict(os.environ, LLAMA_FA="1", LLAMA_NO_REPACK="1", LLAMA_THREADS="2")
    raw = subprocess.run([os.environ["LLAMA_LOGITS"], model, str(ngl), f"tail={tail}"],
                         input=(" ".join(map(str, ids)) + "\n").encode(), env=env,
                         check=True, capture_output=True).stdout
    (n,) = struct.unpack_from("<i", raw, 0)
    values = array("f")
    values.frombytes(raw[4:])
    vocab = len(values) // n
    return [values[i * vocab:(i + 1) * vocab] for i in range(n)]


def chosen(rows, which, n_prompt):
    if which == "all":
        return list(range(len(rows)))
    _, k = which
    return list(range(n_prompt - 1, n_prompt - 1 + k))


def prepare(d):
    os.makedirs(d, exist_ok=True)
    pattern = re.compile(os.environ.get("CASES", ""))
    greedy_of = {}
    for case in cases():
        if not pattern.search(case["name"]):
            continue
        path, sha = synth(d, case)
        prompt = case["prompt"]
        if isinstance(prompt, tuple):
            if len(prompt) == 3:
                prompt = random_ids(prompt[1], prompt[2], vocab_of(path))
            else:
                prompt = random_ids(prompt[1], prompt[2], prompt[3])
        steps = case["steps"]
        if steps == "greedy":
            steps = greedy(path, prompt, 8)
            greedy_of[case["name"]] = steps
        elif isinstance(steps, str):
            steps = greedy_of[steps]
        ids = prompt + steps
        rows = llama_logits(path, ids, len(steps), 0)
        keep = chosen(rows, case["rows"], len(prompt))
        meta = dict(case, prompt=prompt, steps=steps, sha256=sha, keep=keep)
        base = model_path(d, case)[:-5]
        json.dump(meta, open(base + ".json", "w"))
        with open(base + ".f32", "wb") as f:
            for i in keep:
                rows[i].tofile(f)
        os.remove(path)
        print(f"{case['name']}: {len(ids)} ids, {len(keep)} rows kept", flush=True)


def measure(d):
    pattern = re.compile(os.environ.get("CASES", ""))
    lines = []
    print(f"{'case':<44}{'metric':>7}{'rows':>6}{'llama CUDA-vs-CPU':>19}")
    for case in cases():
        if not pattern.search(case["name"]):
            continue
        base = model_path(d, case)[:-5]
        if not os.path.exists(base + ".json"):
            continue
        meta = json.load(open(base + ".json"))
        path, sha = synth(d, case)
        if sha != meta["sha256"]:
            raise SystemExit(f"{case['name']}: synthesized sha256 {sha} is not {meta['sha256']}")
        ids = meta["prompt"] + meta["steps"]
        gpu = llama_logits(path, ids, len(meta["steps"]), 99)
        os.remove(path)
        cpu = array("f")
        cpu.frombytes(open(base + ".f32", "rb").read())
        vocab = len(gpu[0])
        worst = 0.0
        for j, i in enumerate(meta["keep"]):
            c = cpu[j * vocab:(j + 1) * vocab]
            e = max(abs(a - b) for a, b in zip(c, gpu[i]))
            if meta["metric"] == "range":
                e /= max(c) - min(c)
            worst = max(worst, e)
        print(f"{case['name']:<44}{meta['metric']:>7}{len(meta['keep']):>6}{worst:>19.6f}",
              flush=True)
        lines.append(f"{case['name']}\t{meta['metric']}\t{worst:.6f}\n")
    with open(os.path.join(d, "spread.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "measure"):
        raise SystemExit(__doc__)
    {"prepare": prepare, "measure": measure}[sys.argv[1]](sys.argv[2])
