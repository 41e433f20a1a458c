#!/usr/bin/env python3
"""Summarise a step trace (`CBTOP_STEP_TRACE=FILE cbtop ...`, src/engine/cuda/step_trace.rs).

    CBTOP_STEP_TRACE=/tmp/t.csv cbtop --headless --device cuda --model-path M --timing events
    python3 bench/step-trace.py /tmp/t.csv [--skip N]

Steps are grouped by whether the step before and the step itself were stamped (0->1: a
stamped step after an unstamped one). Per group, in microseconds: the step's time as the
report counts it (token arrival to token arrival), the host's time launching the step after
it (`launch`), reading its stamps (`stamps`), and outside the engine before the next call
(`outside`: the run loop's own work), and for two stamped steps in a row the GPU's idle time
between the first one's last kernel and the second one's first (`gpu idle`). The longest
steps follow, so one slow step is not mistaken for a slow kind of step. The first N steps
(default 10: the prompt and the warm-up) are left out.
"""
import statistics
import sys


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    args = sys.argv[1:]
    skip = 10
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    rows = []
    with open(args[0]) as f:
        header = f.readline().strip().split(",")
        for line in f:
            rows.append(dict(zip(header, map(int, line.split(",")))))
    rows = rows[skip:]
    groups = {}
    for a, b in zip(rows, rows[1:]):
        g = groups.setdefault((a["stamped"], b["stamped"]), [])
        g.append({
            "step": b["arrived_ns"] - a["arrived_ns"],
            "launch": b["launched_ns"] - b["call_ns"],
            "stamps": b["done_ns"] - b["arrived_ns"],
            "outside": b["call_ns"] - a["done_ns"],
            "gpu idle": b["gpu_first_ns"] - a["gpu_end_ns"] if a["stamped"] and b["stamped"] else None,
            "at": b["call_ns"],
            "kind": f"{a['stamped']}->{b['stamped']}",
        })
    print(f"{args[0]}: {len(rows)} steps after the first {skip}; us")
    cols = ["step", "launch", "stamps", "outside", "gpu idle"]
    print(f"{'prev->cur':<10}{'n':>6}  " + "".join(f"{c + ' p50/mean/p99':>28}" for c in cols))
    for key, g in sorted(groups.items()):
        cells = []
        for c in cols:
            xs = [s[c] / 1e3 for s in g if s[c] is not None]
            cells.append(
                f"{quantile(xs, 0.5):9.1f}{statistics.mean(xs):9.1f}{quantile(xs, 0.99):10.1f}"
                if xs else f"{'-':>28}")
        print(f"{key[0]}->{key[1]:<7}{len(g):>6}  " + "".join(cells))
    every = [s for g in groups.values() for s in g]
    print("longest steps:")
    for s in sorted(every, key=lambda s: -s["step"])[:5]:
        idle = "-" if s["gpu idle"] is None else f"{s['gpu idle'] / 1e3:.1f}"
        print(f"  {s['kind']} at {s['at'] / 1e6:.1f} ms: step {s['step'] / 1e3:.1f}, "
              f"launch {s['launch'] / 1e3:.1f}, outside {s['outside'] / 1e3:.1f}, gpu idle {idle}")


if __name__ == "__main__":
    main()
