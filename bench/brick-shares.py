#!/usr/bin/env python3
"""Per-brick table of one cbtop JSON report: for a decode run (`decode`) the step's bricks, for
a prompt (`prefill`) the prompt's, each with its time, share of the whole, achieved GB/s and
share of its roofline (the bandwidth or compute bound the report computed for it).

    python3 bench/brick-shares.py REPORT.json decode|prefill [TITLE]
"""
import json
import sys


def main():
    path, kind = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else path
    rep = json.load(open(path))
    if kind == "prefill":
        bricks, time_key, unit = rep["prefill"]["bricks"], "per_token_us", "us/token"
    else:
        bricks, time_key, unit = rep["bricks"], "mean_us", "us/step"
    print(f"{title}")
    print(f"  {'brick':<26}{unit:>10}{'share %':>9}{'GB/s':>9}{'of roofline %':>15}")
    for b in sorted(bricks, key=lambda b: -b.get("share_percent", 0.0)):
        eff = b.get("efficiency")
        print(f"  {b['id']:<26}{b.get(time_key, 0.0):>10.1f}{b.get('share_percent', 0.0):>9.1f}"
              f"{b.get('gbps', 0.0):>9.0f}{'' if eff is None else f'{100 * eff:.0f}':>15}")


if __name__ == "__main__":
    main()
