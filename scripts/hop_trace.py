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

With several generations at once (scripts/bench_batching.py's serve run
with the variable set), the hops above interleave; the script then also
prints the batched calls' figures: each call's time (sched.batch_send to
sched.call_end), the stage's idle time before it (from the previous call's
end), and each generation thread's own time between its answer and its
next step (step.answered to step.submit on one thread: the token's text,
its event to the client, the next step's inputs).
"""
import argparse
import statistics
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=100, help="the last N steps (the decode steps of the last run)")
    args = ap.parse_args()
    events, threads = [], []
    for line in open(args.file):
        parts = line.split()
        if len(parts) == 4 and parts[0] == "HOP":  # HOP <point> <µs> <thread id>
            events.append((parts[1], int(parts[2])))
            threads.append(int(parts[3]))
    batch_figures(events, threads)
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


def batch_figures(events, threads):
    calls, idle, last_end, sent = [], [], None, None
    for name, t in events:
        if name == "sched.batch_send":
            sent = t
            if last_end is not None:
                idle.append(t - last_end)
        elif name == "sched.call_end":
            if sent is not None:
                calls.append(t - sent)
            sent, last_end = None, t
    if not calls:
        return
    own, answered = [], {}
    for (name, t), tid in zip(events, threads):
        if name == "step.answered":
            answered[tid] = t
        elif name == "step.submit" and tid in answered:
            own.append(t - answered.pop(tid))
    print(f"{len(calls)} batched calls: median {statistics.median(calls):.0f} µs each; "
          f"idle before one: median {statistics.median(idle or [0]):.0f} µs")
    if own:
        print(f"a generation's own time from its answer to its next step: median {statistics.median(own):.0f} µs, "
              f"90th percentile {sorted(own)[len(own) * 9 // 10]:.0f} µs (n={len(own)})")
    print()


if __name__ == "__main__":
    main()
