#!/usr/bin/env python3
"""Live view against headless: the live view's tok/s, with per-brick timing, next to
the headless `--timing off` figure for the same model, device and context; within 5%?

    CBTOP=devbin/cbtop SECONDS=40 python3 bench/live-vs-headless.py -- --device cuda --model-path /tmp/cbtop-models/qwen2.5-0.5b.gguf --ctx 1024

Arguments after `--` go to both runs (default: none, cbtop's own defaults). Steps:
1. The live view runs in a pseudo-terminal (in a fresh temporary directory) for SECONDS
   seconds (default 40); `e` exports a snapshot there, `q` quits (exit 0 expected). From the
   snapshot: `throughput.tok_s_avg` (the mean over the profiled steps since start, warm-up
   excluded), `throughput.tokens`, `header.timing`, `header.device`, the bricks' `source`.
2. The headless run, `cbtop --headless --json <args> --timing off`, decodes the same positions.
   The live view evaluates its prompt (P tokens, positions 0..P-1), decodes positions P..ctx-1
   until the context is full, then clears it and starts again from the prompt (src/tui/worker.rs;
   the first `--warmup` steps, default 8, are discarded once, at start). So once it has
   restarted, its average covers positions P..ctx-1 evenly. Headless decodes `--warmup` steps
   from position P and then `--tokens` measured ones, and needs prompt + steps + 1 <= ctx
   (src/cli/headless.rs). So it gets the live view's `--ctx` (`ctx_size` in the snapshot),
   `--prefill P`, the same `--warmup` W, and `--tokens ctx - 1 - P - W`: measured positions
   P+W..ctx-2, the live range but for its first W and last position. (If the live view never
   restarted, it covered only P..ctx_used-1, and headless measures up to ctx_used-1.)
   P is the live view's prompt length: its default prompt (src/cli/live.rs DEFAULT_PROMPT,
   differs from headless's) or `--prompt`, cut to ctx/2, counted by a one-step headless run.
3. Both figures, their ratio and whether it is within 5% are printed. Exit 0 when both runs
   worked and the ratio is within 5%, 1 otherwise.
Tested only on the CPU (2-core dev machine, load ~1.6 from other work, SECONDS=8, `--device cpu
--threads 1`, embedded default): live/headless -1.07%, +1.68%, -8.24% in three runs: CPU
figures there are noisy; the GPU figure is the one that matters.
"""
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from ptyrun import Live

# src/cli/live.rs DEFAULT_PROMPT: what the live view decodes from without --prompt.
LIVE_PROMPT = ("The history of computing is a story of machines that learned to do arithmetic "
               "faster. Tell it from the beginning.")

cbtop = os.environ.get("CBTOP", "target/release/cbtop")
if os.sep in cbtop:
    cbtop = os.path.abspath(cbtop)  # the runs happen in `tmp`
seconds = float(os.environ.get("SECONDS", "40"))
args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []
tmp = tempfile.mkdtemp(prefix="cbtop-live-vs-headless-")


def flag(name, default=None):
    """The value of `--name V` or `--name=V` in args."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def without(names):
    """args without the flags in `names` (and their values): headless sets them itself."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in names:
            skip = True
        elif not any(a.startswith(n + "=") for n in names):
            out.append(a)
    return out


def headless(extra):
    cmd = [cbtop, "--headless", "--json", "--ci", *extra]
    print("$ " + shlex.join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if out.returncode != 0:
        sys.exit(f"headless run exited {out.returncode}:\n{out.stderr.strip()}")
    return json.loads(out.stdout)


# 1. The live view.
print(f"$ {shlex.join([cbtop, *args])}   (live, {seconds:g} s, in {tmp})", flush=True)
live = Live(cbtop, args, cwd=tmp)
live.drain(seconds)
if live.exited():
    sys.exit(f"the live view exited early with status {live.status}:\n{live.text()}")
live.press(b"e")
snap, deadline = None, time.time() + 15
while snap is None and time.time() < deadline:
    live.drain(0.3)
    for path in glob.glob(os.path.join(tmp, "cbtop-snapshot-*.json")):
        try:
            with open(path) as f:
                snap = json.load(f)["snapshot"]
            print(f"snapshot: {path}")
        except (OSError, ValueError):
            pass  # not completely written yet
live.press(b"q")
status = live.wait(20)
if status is None:
    live.kill()
print(f"live view exit status after q: {status}")
if snap is None:
    sys.exit(f"no snapshot appeared in {tmp} within 15 s of pressing e:\n{live.text()}")

t = snap["throughput"]
sources = sorted({b["source"] for b in snap["bricks"]})
print(f"live device: {snap['header']['device']}")
print(f"live timing: {snap['header']['timing']}; brick source: {', '.join(sources) or 'no bricks'}")
print(f"live: {t['tokens']} profiled steps, ctx {snap['ctx_used']}/{snap['ctx_size']}, "
      f"{snap['restarts']} restarts, overhead {t['overhead_pct'] or 0:.2f}%")
if not t["tokens"]:
    sys.exit("the live view measured no steps: raise SECONDS")

# 2. Headless, same positions.
ctx = snap["ctx_size"]
warmup = int(flag("--warmup", "8"))
common = without({"--timing", "--ctx", "--warmup", "--tokens", "--prefill"})
prompt = [] if flag("--prompt") else ["--prompt", LIVE_PROMPT]
probe = headless(common + prompt + ["--timing", "off", "--warmup", "0", "--tokens", "1"])
p = min(probe["config"]["prefill"], ctx // 2)
end = ctx - 1 if snap["restarts"] else min(snap["ctx_used"], ctx - 1)
tokens = end - p - warmup
if tokens < 1:
    sys.exit(f"no positions to measure: prompt {p}, warm-up {warmup}, up to position {end}")
print(f"live prompt {p} tokens: headless measures positions {p + warmup}..{end - 1}")
rep = headless(common + prompt + ["--timing", "off", "--ctx", str(ctx), "--prefill", str(p),
                                  "--warmup", str(warmup), "--tokens", str(tokens)])
h = rep["throughput"]["tokens_per_sec"]
hw = rep["hardware"]
print(f"headless device: {hw['backend']} · {(hw.get('gpu') or {}).get('name') or hw['cpu_model']}")

# 3. The comparison.
ratio = t["tok_s_avg"] / h
ok = abs(ratio - 1) <= 0.05
print(f"live tok/s (timing {snap['header']['timing']}): {t['tok_s_avg']:.2f}")
print(f"headless tok/s (timing off, {rep['config']['measured_tokens']} steps): {h:.2f}")
print(f"live / headless: {ratio:.4f} ({100 * (ratio - 1):+.2f}%): "
      + ("within 5%" if ok else "NOT within 5%"))
sys.exit(0 if ok and status == 0 else 1)
