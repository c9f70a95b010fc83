#!/usr/bin/env python3
"""Where a generation step's round trip goes, from BONFIRE_HOP_TRACE lines.

    BONFIRE_HOP_TRACE=1 build/bonfire bench generate --model M --network \
        --threads 2 --reps 1 2> hops.txt
    /usr/bin/python3 scripts/hop_trace.py hops.txt

Each step is the run of points from one `step.submit` to the next; the
script prints the median time of every hop (point to next point) over the
last --steps steps, and the step's time outside the worker's run
(step.submit to step.answered, less worker.run to worker.answer). Points:
src/core/hop_trace.h and the calls to hop_trace() in src/net/.
"""
import argparse
import statistics
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=100, help="the last N steps (the decode steps of the last run)")
    args = ap.parse_args()
    events = []
    for line in open(args.file):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "HOP":
            events.append((parts[1], int(parts[2])))
    steps, current = [], None
    for name, t in events:
        if name == "step.submit":
            current = [(name, t)]
            steps.append(current)
        elif current is not None:
            current.append((name, t))
    steps = [s for s in steps if s[-1][0] == "step.answered"][-args.steps:]
    if not steps:
        raise SystemExit("no complete steps in " + args.file + " (was BONFIRE_HOP_TRACE set?)")
    hops, outside = defaultdict(list), []
    for s in steps:
        for (a, ta), (b, tb) in zip(s, s[1:]):
            hops[(a, b)].append(tb - ta)
        at = dict(s)
        if "worker.run" in at and "worker.answer" in at:
            outside.append(s[-1][1] - s[0][1] - (at["worker.answer"] - at["worker.run"]))
    print(f"{len(steps)} steps; hops seen in at least a fifth of them, median µs:")
    for (a, b), v in sorted(hops.items(), key=lambda kv: -len(kv[1])):
        if len(v) * 5 >= len(steps):
            print(f"  {a:>18} -> {b:<18} {statistics.median(v):8.0f}   (n={len(v)})")
    if outside:
        print(f"outside the worker's run: median {statistics.median(outside):.0f} µs, mean {statistics.mean(outside):.0f} µs")


if __name__ == "__main__":
    main()
