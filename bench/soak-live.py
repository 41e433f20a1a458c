#!/usr/bin/env python3
"""Soak test of the live view (issue 14): run `cbtop` in a pseudo-terminal for MINUTES minutes
(default 30), sample its resident set size (VmRSS, /proc) every minute, then quit with `q` and
check it exits 0. Prints a table of minute, RSS and change from the first sample after warm-up.

    CBTOP=target/debug/cbtop MINUTES=30 nice -n 19 python3 bench/soak-live.py -- --device cpu --threads 1

Arguments after `--` go to cbtop (default: the embedded default on the CPU, one thread).
Issue 14 (2-core machine, dev build, 30 minutes): RSS 157.7 MiB at start, 159.5 MiB after
minute 1, 160.2 MiB from minute 12 to 30 (+0.41% after warm-up), exit 0 after `q`.
"""
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

cbtop = os.environ.get("CBTOP", "target/debug/cbtop")
minutes = int(os.environ.get("MINUTES", "30"))
args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else ["--device", "cpu", "--threads", "1"]

pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"
    os.execv(cbtop, [cbtop] + args)
# A real window size (a fresh pty is 0x0): 120 columns, 40 rows.
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

read = 0


def drain(seconds):
    global read
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                read += len(os.read(fd, 1 << 16))
            except OSError:
                return


def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


t0 = time.time()
samples = []
for m in range(minutes + 1):
    if m:
        drain(t0 + 60 * m - time.time())
    else:
        drain(5)  # the first frame
    kb = rss_kb()
    samples.append((m, kb))
    print(f"minute {m:3d}: RSS {kb / 1024:.1f} MiB, {read} bytes of frames so far", flush=True)

os.write(fd, b"q")
deadline = time.time() + 20
status = None
while time.time() < deadline:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p:
        status = os.waitstatus_to_exitcode(st)
        break
    drain(0.2)
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
