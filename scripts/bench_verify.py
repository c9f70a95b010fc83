#!/usr/bin/env python3
"""What spot checks cost, through `bonfire serve`, one run (docs/NETWORK.md
"Checking workers"):

    python3 scripts/bench_verify.py --model /tmp/benchmodel/model-q8_0.gguf [--streams 4] [--tokens 48] [--rates 0,0.05]

For each verify rate: starts `bonfire serve --model M --verify-rate R` (its
in-process worker) and one more `bonfire worker` holding the same file (a
check needs a second worker), runs --rounds rounds of --streams concurrent
generations (different prompts, half greedy, half seeded), waits for the
checks to finish, and measures the generated tokens per second over the
rounds. Prints one JSON line: tokens/s per rate, the cost against rate 0,
and the verifier's counters. Both workers share this machine's cores, so the
checks' work competes with the generations' (on a network the verifier is
another machine). Speed is reported, never judged.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=60) as r:
        return json.loads(r.read())


def post(url, body):
    req = urllib.request.Request(url + "/api/v3/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def run_rate(args, rate):
    serve = subprocess.Popen([args.bonfire, "serve", "--port", "0", "--model", args.model, "--verify-rate", str(rate)]
                             + (["--threads", str(args.threads)] if args.threads else []),
                             stderr=subprocess.PIPE, text=True)
    worker = None
    try:
        port = None
        for line in serve.stderr:
            m = re.search(r"listening on http://[^\s:]+:(\d+)", line)
            if m:
                port = m.group(1)
                break
        url = f"http://127.0.0.1:{port}"
        worker = subprocess.Popen([args.bonfire, "worker", "--join", url, "--model", args.model, "--id", "w2", "--quiet"]
                                  + (["--threads", str(args.threads)] if args.threads else []))
        while len([w for w in get(url, "/api/v3/workers")["workers"] if w["models"]]) < 2:
            time.sleep(0.5)

        def bodies(r):
            return [{"prompt": f"Story {r}-{i}: once upon a time", "maxTokens": args.tokens, "ignoreEos": True,
                     **({"temperature": 0.8, "seed": 10 * r + i} if i % 2 else {"temperature": 0})}
                    for i in range(args.streams)]

        with ThreadPoolExecutor(args.streams) as pool:
            list(pool.map(lambda b: post(url, b), bodies(99)))  # warm up both workers
            t0 = time.monotonic()
            tokens = 0
            for r in range(args.rounds):
                tokens += sum(len(x["tokens"]) for x in pool.map(lambda b: post(url, b), bodies(r)))
            while get(url, "/api/v3/workers")["verifier"]["waiting"] > 0:
                time.sleep(0.1)
            seconds = time.monotonic() - t0
        return tokens / seconds, get(url, "/api/v3/workers")["verifier"]
    finally:
        for p in (worker, serve):
            if p:
                p.terminate()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--bonfire", default=os.path.join(ROOT, "build", "bonfire"))
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="threads per worker (default: all cores)")
    ap.add_argument("--rates", default="0,0.05")
    args = ap.parse_args()
    out = {"model": args.model, "streams": args.streams, "tokens": args.tokens, "rounds": args.rounds, "rates": {}}
    base = None
    for rate in [float(r) for r in args.rates.split(",")]:
        tps, verifier = run_rate(args, rate)
        base = tps if base is None else base
        out["rates"][str(rate)] = {"tokensPerSecond": round(tps, 2), "cost": round(1 - tps / base, 3),
                                   "verifier": verifier}
        print(f"verify-rate {rate}: {tps:.2f} tokens/s (cost {100 * (1 - tps / base):.1f}%)", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
