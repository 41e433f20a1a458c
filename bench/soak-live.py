#!/usr/bin/env python3
"""Soak test of the live view: run `cbtop` in a pseudo-terminal for MINUTES minutes
(default 30), sample its resident set size (VmRSS, /proc) every minute, then quit with `q` and
check it exits 0. Prints a table of minute, RSS and change from the first sample after warm-up.

    CBTOP=target/debug/cbtop MINUTES=30 nice -n 19 python3 bench/soak-live.py -- --device cpu --threads 1

Arguments after `--` go to cbtop (default: the embedded default on the CPU, one thread).
One run (2-core machine, dev build, 30 minutes): RSS 157.7 MiB at start, 159.5 MiB after
minute 1, 160.2 MiB from minute 12 to 30 (+0.41% after warm-up), exit 0 after `q`.
"""
import os
import sys
import time

from ptyrun import Live

cbtop = os.environ.get("CBTOP", "target/debug/cbtop")
minutes = int(os.environ.get("MINUTES", "30"))
args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else ["--device", "cpu", "--threads", "1"]

live = Live(cbtop, args)
t0 = time.time()
samples = []
for m in range(minutes + 1):
    if m:
        live.drain(t0 + 60 * m - time.time())
    else:
        live.drain(5)  # the first frame
    if live.exited():
        print(f"cbtop exited early with status {live.status}:\n{live.text()}")
        sys.exit(1)
    kb = live.rss_kb()
    samples.append((m, kb))
    print(f"minute {m:3d}: RSS {kb / 1024:.1f} MiB, {live.read} bytes of frames so far", flush=True)

live.press(b"q")
status = live.wait(20)
print(f"exit status after q: {status}")

base = samples[1][1] if len(samples) > 1 else samples[0][1]
print("\n| minute | RSS MiB | vs minute 1 |")
print("| ---: | ---: | ---: |")
for m, kb in samples:
    print(f"| {m} | {kb / 1024:.1f} | {100.0 * (kb - base) / base:+.2f}% |")
first, last = samples[0][1], samples[-1][1]
print(f"\nfirst {first / 1024:.1f} MiB, minute 1 {base / 1024:.1f} MiB, last {last / 1024:.1f} MiB, "
      f"growth after warm-up {100.0 * (last - base) / base:+.2f}%")
sys.exit(0 if status == 0 else 1)
