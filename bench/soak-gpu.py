#!/usr/bin/env python3
"""GPU soak of the live view: run `cbtop` in a pseudo-terminal for MINUTES minutes
(default 10) and every minute sample its resident set size (VmRSS, /proc), the GPU memory the
process uses and the device's total memory used (both from nvidia-smi, which reads NVML); then
quit with `q`, check it exits 0, and print a table and the growth from minute 1 (after warm-up)
to the last sample. PASS when the process's GPU memory (or, where nvidia-smi does not list the
process, the device's) grew by less than 1%.

    CBTOP=devbin/cbtop MINUTES=10 python3 bench/soak-gpu.py -- --device cuda --model-path /tmp/cbtop-models/qwen2.5-0.5b.gguf --ctx 1024

Arguments after `--` go to cbtop (default: `--device cuda`). The GPU queried for the device
total is the N of `--device cuda:N` (default 0), as nvidia-smi numbers it. SAMPLE_SECONDS
(default 60) shortens "a minute" for testing. Without nvidia-smi, or where it does not list
the process (a container's PID namespace), those columns read n/a and the reason is printed.
Exit 0 when cbtop exited 0 after `q` and the verdict is PASS, 1 otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
import time

from ptyrun import Live

cbtop = os.environ.get("CBTOP", "target/release/cbtop")
minutes = int(os.environ.get("MINUTES", "10"))
period = float(os.environ.get("SAMPLE_SECONDS", "60"))
args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else ["--device", "cuda"]
dev = re.search(r"cuda:(\d+)", " ".join(args))
gpu_index = dev.group(1) if dev else "0"


def smi(query):
    """nvidia-smi's CSV rows for `query`, or a string saying why there are none."""
    if not shutil.which("nvidia-smi"):
        return "nvidia-smi not found on PATH"
    try:
        out = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "nvidia-smi took over 30 s"
    if out.returncode != 0:
        return f"nvidia-smi exited {out.returncode}: {(out.stderr or out.stdout).strip()}"
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def process_gpu_mib(pid):
    rows = smi(["--query-compute-apps=pid,used_memory"])
    if isinstance(rows, str):
        return None, rows
    for r in rows:
        if r[0] == str(pid) and r[1].isdigit():
            return int(r[1]), None
    listed = ", ".join(r[0] for r in rows) or "none"
    return None, f"pid {pid} not among nvidia-smi's compute apps (listed: {listed})"


def device_gpu_mib():
    rows = smi(["-i", gpu_index, "--query-gpu=memory.used"])
    if isinstance(rows, str):
        return None, rows
    if rows and rows[0][0].isdigit():
        return int(rows[0][0]), None
    return None, f"nvidia-smi gave no memory.used for GPU {gpu_index}: {rows}"


live = Live(cbtop, args)
t0 = time.time()
samples = []  # (minute, RSS KiB, process GPU MiB, device GPU MiB)
reasons = set()
for m in range(minutes + 1):
    live.drain(t0 + period * m - time.time() if m else min(5, period))  # minute 0: first frame
    if live.exited():
        print(f"cbtop exited early with status {live.status}:\n{live.text()}")
        sys.exit(1)
    kb = live.rss_kb()
    proc, why_p = process_gpu_mib(live.pid)
    total, why_d = device_gpu_mib()
    for why in (why_p, why_d):
        if why and why not in reasons:
            reasons.add(why)
            print(f"  n/a: {why}")
    samples.append((m, kb, proc, total))
    fmt = lambda v: "n/a" if v is None else f"{v} MiB"
    print(f"minute {m:3d}: RSS {kb / 1024:.1f} MiB, process GPU {fmt(proc)}, "
          f"device GPU {fmt(total)}, {live.read} bytes of frames so far", flush=True)

live.press(b"q")
status = live.wait(20)
print(f"exit status after q: {status}")
if status is None:
    live.kill()


def cell(v, scale=1):
    return "n/a" if v is None else f"{v / scale:.1f}"


def growth(col):
    """Percent growth of column `col` from minute 1 (minute 0 if that is all) to the last."""
    base, last = samples[min(1, len(samples) - 1)][col], samples[-1][col]
    return None if base is None or last is None or base == 0 else 100.0 * (last - base) / base


print("\n| minute | RSS MiB | process GPU MiB | device GPU MiB |")
print("| ---: | ---: | ---: | ---: |")
for m, kb, proc, total in samples:
    print(f"| {m} | {cell(kb, 1024)} | {cell(proc)} | {cell(total)} |")
names = ["RSS", "process GPU memory", "device GPU memory"]
for col, name in enumerate(names, 1):
    g = growth(col)
    print(f"{name} growth after warm-up (minute 1 to {samples[-1][0]}): "
          + ("n/a" if g is None else f"{g:+.2f}%"))
judged = next((c for c in (2, 3) if growth(c) is not None), None)
if judged is None:
    verdict = "n/a (no GPU memory samples)"
else:
    verdict = "PASS" if growth(judged) < 1.0 else "FAIL"
    verdict += f" ({names[judged - 1]} {growth(judged):+.2f}% against 1%)"
print(f"verdict: {verdict}")
sys.exit(0 if status == 0 and verdict.startswith("PASS") else 1)
