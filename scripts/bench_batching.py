#!/usr/bin/env python3
"""Continuous batching through `bonfire serve`, one run (docs/NETWORK.md):

    python3 scripts/bench_batching.py --model /tmp/benchmodel/model-q8_0.gguf [--streams 8] [--tokens 64]

Starts `bonfire serve --model M` (its in-process worker), then
1. one streamed generation alone: its decode tokens/s (timings.decodeMs),
   once before step 2 and once after; the ratio takes their mean, since this
   machine's speed drifts within a run;
2. `--streams` streamed generations at once (different prompts, half greedy,
   half seeded): their aggregate decode tokens/s, from the first token of the
   last stream to start decoding to the last token of the first to finish
   (the window where all of them decode together), and over the whole run;
   and the scheduler's figures (/api/v3/workers "batching"): calls and rows
   per call in that run, a call's round trip, the worker's own time, and the
   stage's idle time before a call;
3. the same requests one at a time, to check every sequence's tokens equal
   its solo run;
4. for a GGUF, llama.cpp decoding as many sequences in one batch
   (scripts/bench_llama_cpp.py --parallel, llama-batched-bench's way), and
   the ratio of the aggregate decode speeds.
Prints one JSON line with the figures. Speed is reported, never judged.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stream(url, body):
    """Token arrival times and the final event of one streamed generation."""
    req = urllib.request.Request(url + "/api/v3/generate", data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    times, done = [], None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data:"):
                continue
            ev = json.loads(line[5:])
            if ev.get("done"):
                done = ev
            elif "token" in ev:
                times.append(time.monotonic())
            elif "error" in ev:
                raise RuntimeError(ev)
    return times, done


def scheduler_stage(url):
    """The busiest stage's batching figures (/api/v3/workers)."""
    stages = json.load(urllib.request.urlopen(url + "/api/v3/workers", timeout=5))["workers"][0].get("batching", [])
    return max(stages, key=lambda x: x.get("batches", 0)) if stages else {}


def latency_phase(url, streams, long_tokens, words):
    """Time to first token of short requests and the streams' step time while
    `streams` sequences decode, without and then with one `long_tokens`-token
    prompt arriving (chunked prefill keeps the streams going)."""
    gaps = [[] for _ in range(streams)]
    stop = threading.Event()

    def decode_stream(i):
        body = {"prompt": f"Stream {i}: the long road", "maxTokens": 4000, "ignoreEos": True, "temperature": 0,
                "stream": True}
        req = urllib.request.Request(url + "/api/v3/generate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        last = None
        with urllib.request.urlopen(req, timeout=3600) as r:
            for line in r:
                if stop.is_set():
                    return  # closing the stream cancels the generation
                if line.startswith(b"data:") and b'"token"' in line:
                    now = time.monotonic()
                    if last is not None:
                        gaps[i].append((now, now - last))
                    last = now

    def ttft(body):
        t0 = time.monotonic()
        req = urllib.request.Request(url + "/api/v3/generate", data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            for line in r:
                if line.startswith(b"data:"):
                    return time.monotonic() - t0
        return float("nan")

    def pct(v, q):
        v = sorted(v)
        return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")

    threads = [threading.Thread(target=decode_stream, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    while min(len(g) for g in gaps) < 3:
        time.sleep(0.2)
    t_a = time.monotonic()
    quiet_ttft = [ttft({"prompt": f"Question {k}:", "maxTokens": 1}) for k in range(5)]
    t_b = time.monotonic()
    quiet_gaps = [d for g in gaps for (t, d) in g if t_a <= t <= t_b]
    # The long prompt, then short requests while it is read.
    long_prompt = " ".join(words[k % len(words)] for k in range(long_tokens))
    done = {}
    lt = threading.Thread(target=lambda: done.update(t=ttft({"prompt": long_prompt, "maxTokens": 1})), daemon=True)
    t_c = time.monotonic()
    lt.start()
    time.sleep(1.0)
    busy_ttft = []
    chunks = []
    while lt.is_alive() and len(busy_ttft) < 5:
        busy_ttft.append(ttft({"prompt": f"Question {len(busy_ttft)}:", "maxTokens": 1}))
    while lt.is_alive():  # the prompt's chunk sizes while it is read
        chunks.append(scheduler_stage(url).get("prefillChunk", 0))
        time.sleep(1.0)
    lt.join()
    t_d = time.monotonic()
    busy_gaps = [d for g in gaps for (t, d) in g if t_c <= t <= t_d]
    stop.set()
    return {"quietStepMsP50": 1000 * pct(quiet_gaps, 0.5), "quietStepMsP99": 1000 * pct(quiet_gaps, 0.99),
            "quietTtftMsP50": 1000 * pct(quiet_ttft, 0.5), "quietTtftMsP99": 1000 * pct(quiet_ttft, 0.99),
            "longPromptStepMsP50": 1000 * pct(busy_gaps, 0.5), "longPromptStepMsP99": 1000 * pct(busy_gaps, 0.99),
            "longPromptTtftMsP50": 1000 * pct(busy_ttft, 0.5), "longPromptTtftMsP99": 1000 * pct(busy_ttft, 0.99),
            "longPromptFirstTokenS": done.get("t", float("nan")), "longPromptWords": long_tokens,
            "prefillChunks": sorted(set(chunks))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=18390)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bonfire"))
    ap.add_argument("--no-llama", action="store_true", help="skip the llama.cpp batched reference")
    ap.add_argument("--latency", type=int, default=0, metavar="WORDS",
                    help="instead: time to first token and step time while the streams decode, without and with "
                         "a prompt of WORDS words arriving (e.g. 2000)")
    ap.add_argument("--serve-log", metavar="FILE",
                    help="serve's stderr to FILE (with BONFIRE_HOP_TRACE=1 set: scripts/hop_trace.py FILE)")
    a = ap.parse_args()
    log = open(a.serve_log, "w") if a.serve_log else subprocess.DEVNULL
    serve = subprocess.Popen([a.binary, "serve", "--model", a.model, "--port", str(a.port),
                              "--ctx", str(4096 if a.latency else 1024),
                              "--quiet"], stderr=log)
    url = f"http://127.0.0.1:{a.port}"
    try:
        for _ in range(600):
            try:
                ws = json.load(urllib.request.urlopen(url + "/api/v3/workers", timeout=5))["workers"]
                if ws and ws[0]["models"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        if a.latency:
            words = "the of and a to in is was he for it with as his on be at by had".split()
            out = latency_phase(url, a.streams, a.latency, words)
            print(f"{a.streams} streams decoding: step p50 {out['quietStepMsP50']:.0f} ms, p99 "
                  f"{out['quietStepMsP99']:.0f} ms; a new request's first token p50 {out['quietTtftMsP50']:.0f} ms, "
                  f"p99 {out['quietTtftMsP99']:.0f} ms", file=sys.stderr)
            print(f"while a {a.latency}-word prompt is read: step p50 {out['longPromptStepMsP50']:.0f} ms "
                  f"({out['longPromptStepMsP50'] / out['quietStepMsP50']:.2f}x), p99 "
                  f"{out['longPromptStepMsP99']:.0f} ms; a new request's first token p50 "
                  f"{out['longPromptTtftMsP50']:.0f} ms, p99 {out['longPromptTtftMsP99']:.0f} ms; the long prompt's "
                  f"first token after {out['longPromptFirstTokenS']:.1f} s", file=sys.stderr)
            print(json.dumps(out))
            return 0
        bodies = []
        for i in range(a.streams):
            b = {"prompt": f"Story number {i}: once upon a time there was a", "maxTokens": a.tokens, "ignoreEos": True}
            b.update({"temperature": 0.8, "seed": 100 + i, "topP": 0.9} if i % 2 else {"temperature": 0})
            bodies.append(b)
        stream(url, bodies[0])  # warm-up: graphs registered, pages touched

        def single_stream():
            _, alone = stream(url, bodies[0])
            return (len(alone["tokens"]) - 1) / (alone["timings"]["decodeMs"] / 1000)
        # A stream alone, before and after the streams together: this
        # machine's speed drifts, and the ratio takes their mean.
        single_before = single_stream()
        results = [None] * a.streams
        before = scheduler_stage(url)
        def run(i):
            results[i] = stream(url, bodies[i])
        threads = [threading.Thread(target=run, args=(i,)) for i in range(a.streams)]
        # The scheduler's figures are running averages over its last calls:
        # sampled twice a second while every stream is in the batch, so the
        # ramp at the end does not stand for the run.
        full, sampling = [], threading.Event()
        def sample():
            while not sampling.wait(0.5):
                s = scheduler_stage(url)
                if s.get("lastBatch") == a.streams:
                    full.append(s)
        sampler = threading.Thread(target=sample, daemon=True)
        t0 = time.monotonic()
        for t in threads:
            t.start()
        sampler.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        sampling.set()
        sampler.join()
        # The scheduler's view of the run: rows per batched call, and where a
        # batch's time went (round trip, the worker's own time, idle before it).
        st = scheduler_stage(url)
        calls = st.get("batches", 0) - before.get("batches", 0)
        rows_per_call = (st.get("rows", 0) - before.get("rows", 0)) / max(1, calls)
        single_after = single_stream()
        single = (single_before + single_after) / 2
        start = max(r[0][0] for r in results)  # all decode from here
        end = min(r[0][-1] for r in results)   # until the first finishes
        together = sum(sum(1 for x in r[0] if start < x <= end) for r in results) / (end - start)
        overall = sum(len(r[0]) for r in results) / wall
        same = True
        for i, b in enumerate(bodies):
            _, d = stream(url, b)
            same = same and d["tokens"] == results[i][1]["tokens"]
        out = {"streams": a.streams, "tokens": a.tokens, "singleDecodeTokPerS": single,
               "singleBeforeTokPerS": single_before, "singleAfterTokPerS": single_after,
               "aggregateDecodeTokPerS": together, "ratio": together / single,
               "overallTokPerS": overall, "wallS": wall, "tokensEqualSolo": same,
               "batchedCalls": calls, "rowsPerCall": rows_per_call,
               "batchRoundTripMs": st.get("decodeMs"), "batchWorkerMs": st.get("workerMs"), "batchGapMs": st.get("gapMs")}
        def median(key):
            v = sorted(x.get(key, 0) for x in full)
            return v[len(v) // 2] if v else None
        if full:
            out.update({"fullBatchSamples": len(full), "fullBatchRoundTripMs": median("decodeMs"),
                        "fullBatchWorkerMs": median("workerMs"), "fullBatchGapMs": median("gapMs")})
        print(f"single stream decode {single:.2f} tok/s (before {single_before:.2f}, after {single_after:.2f}); {a.streams} streams decoding together "
              f"{together:.2f} tok/s ({together / single:.2f}x); whole run {overall:.2f} tok/s in {wall:.1f} s; "
              f"tokens equal to solo runs: {same}", file=sys.stderr)
        if st:
            print(f"scheduler: {calls} calls of {rows_per_call:.2f} rows on average; the last ones: round trip "
                  f"{st.get('decodeMs', 0):.1f} ms, the worker's own {st.get('workerMs', 0):.1f} ms, idle before "
                  f"{st.get('gapMs', 0):.2f} ms", file=sys.stderr)
        if full:
            print(f"scheduler while all {a.streams} streams were in the batch ({len(full)} samples, medians): round "
                  f"trip {out['fullBatchRoundTripMs']:.1f} ms, the worker's own {out['fullBatchWorkerMs']:.1f} ms, "
                  f"idle before {out['fullBatchGapMs']:.2f} ms", file=sys.stderr)
        if a.model.endswith(".gguf") and not a.no_llama:
            # llama.cpp decoding the same number of sequences in one batch
            # (llama-batched-bench's way), right after, with serve idle.
            ref = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "bench_llama_cpp.py"),
                                  "--model", a.model, "--parallel", str(a.streams), "--prefill", "16",
                                  "--decode", str(a.tokens), "--reps", "1", "--threads", str(os.cpu_count())],
                                 capture_output=True, text=True)
            try:
                llama = json.loads(ref.stdout.strip().splitlines()[-1])
                out["llamaCppBatchedDecodeTokPerS"] = llama["decode_tps"]
                out["ratioToLlamaCpp"] = together / llama["decode_tps"]
                print(f"llama.cpp, {a.streams} sequences in one batch: {llama['decode_tps']:.2f} tok/s; "
                      f"bonfire / llama.cpp {together / llama['decode_tps']:.2f}x", file=sys.stderr)
            except (IndexError, ValueError, KeyError):
                print("llama.cpp reference failed: " + ref.stderr[-500:], file=sys.stderr)
        print(json.dumps(out))
        return 0 if same else 1
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
