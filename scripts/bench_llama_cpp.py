#!/usr/bin/env python3
"""The speed reference: prefill and decode throughput of llama.cpp on a GGUF.

    /usr/bin/python3 scripts/bench_llama_cpp.py --model FILE.gguf [--prefill 128]
        [--decode 64] [--threads 2] [--reps 2] [--kv-type f16] [--flash-attn auto]

Loads the GGUF in llama.cpp's prebuilt libllama (node-llama-cpp 3.21.1, via
ctypes: scripts/llamacpp_ctypes.py) on the CPU and measures the way
llama-bench does:
  * prefill: one llama_decode of --prefill random ordinary (non-special)
    token ids, n_batch = n_ubatch = --prefill so it is a single ubatch,
    timed up to llama_synchronize -> tokens/s;
  * decode: --decode single-token llama_decode calls right after it (each
    followed by llama_synchronize; the token ids are random too), timed as a
    whole -> tokens/s;
  * the KV cache is cleared before each repetition; one warm-up repetition
    runs first and is not counted; the numbers are the MEAN over --reps
    (llama-bench reports the mean too); the best repetition is printed as
    prefill_tps_best / decode_tps_best;
  * llama.cpp's defaults otherwise: K/V cache F16, flash attention "auto",
    a ggml threadpool with --threads threads and polling level --poll (50)
    attached as llama-bench does.

With --parallel P: P sequences as llama-batched-bench measures them; the
tokens/s are then aggregate over the P sequences.

Prints one JSON line: {"prefill_tps", "decode_tps", "threads", "model",
"n_prefill", "n_decode", "reference", "kv_cache" (llama.cpp's own account of its
K and V cache: MiB, cells, layers, bytes_per_token), ...}.
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from llamacpp_ctypes import (GGML_TYPE_F16, GGML_TYPE_F32, LLAMA_FLASH_ATTN_TYPE_AUTO,  # noqa: E402
                             LLAMA_FLASH_ATTN_TYPE_DISABLED, LLAMA_FLASH_ATTN_TYPE_ENABLED, LLAMA_TOKEN_ATTR_NORMAL,
                             Llama, describe_build, find_libdir, last_error)

KV_TYPES = {"f16": GGML_TYPE_F16, "f32": GGML_TYPE_F32, "q8_0": 8}
FLASH = {"auto": LLAMA_FLASH_ATTN_TYPE_AUTO, "on": LLAMA_FLASH_ATTN_TYPE_ENABLED, "off": LLAMA_FLASH_ATTN_TYPE_DISABLED}
GGML_MAX_N_THREADS = 512


class ThreadpoolParams(C.Structure):
    _fields_ = [("cpumask", C.c_bool * GGML_MAX_N_THREADS), ("n_threads", C.c_int), ("prio", C.c_int),
                ("poll", C.c_uint32), ("strict_cpu", C.c_bool), ("paused", C.c_bool)]


def attach_threadpool(ll: Llama, libdir: Path, ctx, n_threads: int, poll: int):
    """llama-bench's ggml_threadpool_new + llama_attach_threadpool; None if unavailable."""
    try:
        base = C.CDLL(str(libdir / "libggml-base.so"), mode=C.RTLD_GLOBAL)
        ggml = C.CDLL(str(next(libdir.glob("libggml.*so"))), mode=C.RTLD_GLOBAL)
        ggml.ggml_backend_reg_by_name.argtypes = [C.c_char_p]
        ggml.ggml_backend_reg_by_name.restype = C.c_void_p
        base.ggml_backend_reg_get_proc_address.argtypes = [C.c_void_p, C.c_char_p]
        base.ggml_backend_reg_get_proc_address.restype = C.c_void_p
        base.ggml_threadpool_params_default.argtypes = [C.c_int]
        base.ggml_threadpool_params_default.restype = ThreadpoolParams
        reg = ggml.ggml_backend_reg_by_name(b"CPU")
        new_addr = base.ggml_backend_reg_get_proc_address(reg, b"ggml_threadpool_new")
        if not reg or not new_addr:
            return None
        new = C.CFUNCTYPE(C.c_void_p, C.POINTER(ThreadpoolParams))(new_addr)
        tpp = base.ggml_threadpool_params_default(n_threads)
        tpp.poll = poll
        tp = new(C.byref(tpp))
        if not tp:
            return None
        ll.lib.llama_attach_threadpool.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
        ll.lib.llama_attach_threadpool(ctx, tp, None)
        return tp
    except (OSError, AttributeError, StopIteration):
        return None


def kv_cache_size(log: str) -> dict | None:
    """llama.cpp's own account of its KV cache, from the context's log line
    "llama_kv_cache: size = 38.25 MiB (4352 cells, 4 layers, 1/1 seqs), K (f32): 38.25 MiB, V (f32): 0.00 MiB":
    the sizes are printed in MiB with two decimals, so bytes_per_token is
    exact to within 0.005 MiB / cells."""
    m = re.search(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers.*?K \((\w+)\):\s*([\d.]+) MiB, "
                  r"V \((\w+)\):\s*([\d.]+) MiB", log)
    if not m:
        return None
    mib, cells, layers = float(m.group(1)), int(m.group(2)), int(m.group(3))
    return {"mib": mib, "cells": cells, "layers": layers, "k_type": m.group(4), "k_mib": float(m.group(5)),
            "v_type": m.group(6), "v_mib": float(m.group(7)), "bytes_per_token": round(mib * 2**20 / cells, 1),
            "bytes_per_token_layer": round(mib * 2**20 / cells / layers, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16", help="K and V cache type (llama.cpp: f16)")
    ap.add_argument("--flash-attn", choices=sorted(FLASH), default="auto", help="llama.cpp's default: auto")
    ap.add_argument("--poll", type=int, default=50,
                    help="threadpool polling level 0..100 (llama-bench: 50; 0 suffers less on a busy machine)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parallel", type=int, default=1,
                    help="sequences decoded together, as llama-batched-bench does: each gets --prefill tokens "
                         "(all in one batch), then --decode steps of one token per sequence in one batch")
    args = ap.parse_args(argv)

    libdir = find_libdir()
    if libdir is None:
        print("bench_llama_cpp: llama.cpp libraries not found (run scripts/fetch_llama_cpp.sh)", file=sys.stderr)
        return 2
    ll = Llama(libdir)
    lib = ll.lib
    backend = [Path(l.split()[-1]).name for l in "".join(ll.log).splitlines() if "loaded CPU backend" in l]
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    t0 = time.perf_counter()
    model = lib.llama_model_load_from_file(str(args.model).encode(), mp)
    if not model:
        print(f"bench_llama_cpp: load failed: {last_error(ll.log)}", file=sys.stderr)
        return 1
    load_s = time.perf_counter() - t0
    vocab = lib.llama_model_get_vocab(model)
    n_vocab = lib.llama_vocab_n_tokens(vocab)
    ordinary = np.array([t for t in range(n_vocab) if lib.llama_vocab_get_attr(vocab, t) & LLAMA_TOKEN_ATTR_NORMAL
                         and not lib.llama_vocab_is_control(vocab, t) and not lib.llama_vocab_is_eog(vocab, t)],
                        dtype=np.int32)
    rng = np.random.default_rng(args.seed)

    cp = lib.llama_context_default_params()
    P = max(args.parallel, 1)
    n_ctx = (args.prefill + args.decode) * P
    cp.n_ctx = n_ctx
    cp.n_batch = cp.n_ubatch = max(args.prefill * P, P)
    cp.n_seq_max = P
    cp.n_threads = cp.n_threads_batch = args.threads
    cp.type_k = cp.type_v = KV_TYPES[args.kv_type]
    cp.flash_attn_type = FLASH[args.flash_attn]
    cp.no_perf = True
    log_start = len(ll.log)
    ctx = lib.llama_init_from_model(model, cp)
    if not ctx:
        print(f"bench_llama_cpp: context failed: {last_error(ll.log)}", file=sys.stderr)
        return 1
    ctx_log = "".join(ll.log[log_start:]).lower()
    fa = args.flash_attn
    if "flash attention enabled" in ctx_log:
        fa += " -> enabled"
    elif "flash attention disabled" in ctx_log or "flash_attn            = disabled" in ctx_log:
        fa += " -> disabled"
    kv_cache = kv_cache_size("".join(ll.log[log_start:]))
    tp = attach_threadpool(ll, libdir, ctx, args.threads, args.poll)
    mem = lib.llama_get_memory(ctx)

    def one_rep() -> tuple[float, float]:
        lib.llama_memory_clear(mem, False)
        prompt = rng.choice(ordinary, size=args.prefill).astype(np.int32)
        gen = rng.choice(ordinary, size=args.decode).astype(np.int32)
        arr = (C.c_int32 * args.prefill)(*prompt.tolist())
        t0 = time.perf_counter_ns()
        rc = lib.llama_decode(ctx, lib.llama_batch_get_one(arr, args.prefill))
        lib.llama_synchronize(ctx)
        t1 = time.perf_counter_ns()
        if rc != 0:
            raise RuntimeError(f"llama_decode(prefill) returned {rc}: {last_error(ll.log)}")
        one = (C.c_int32 * 1)()
        t2 = time.perf_counter_ns()
        for tok in gen.tolist():
            one[0] = tok
            rc = lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1))
            lib.llama_synchronize(ctx)
            if rc != 0:
                raise RuntimeError(f"llama_decode(decode) returned {rc}: {last_error(ll.log)}")
        t3 = time.perf_counter_ns()
        return args.prefill / ((t1 - t0) * 1e-9), args.decode / ((t3 - t2) * 1e-9)

    def batched_rep() -> tuple[float, float]:
        """llama-batched-bench's way: P prompts in one batch, then P tokens per decode call."""
        lib.llama_memory_clear(mem, False)
        batch = lib.llama_batch_init(max(args.prefill * P, P), 0, 1)
        try:
            def fill(tokens, positions, seqs, logits):
                batch.n_tokens = len(tokens)
                for i, (t, p, q, l) in enumerate(zip(tokens, positions, seqs, logits)):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = int(t), int(p), 1
                    batch.seq_id[i][0] = int(q)
                    batch.logits[i] = 1 if l else 0
            n = args.prefill
            fill(rng.choice(ordinary, size=n * P), [i % n for i in range(n * P)], [i // n for i in range(n * P)],
                 [i % n == n - 1 for i in range(n * P)])
            t0 = time.perf_counter_ns()
            rc = lib.llama_decode(ctx, batch)
            lib.llama_synchronize(ctx)
            t1 = time.perf_counter_ns()
            if rc != 0:
                raise RuntimeError(f"llama_decode(batched prefill) returned {rc}: {last_error(ll.log)}")
            t2 = time.perf_counter_ns()
            for step in range(args.decode):
                fill(rng.choice(ordinary, size=P), [n + step] * P, range(P), [True] * P)
                rc = lib.llama_decode(ctx, batch)
                lib.llama_synchronize(ctx)
                if rc != 0:
                    raise RuntimeError(f"llama_decode(batched decode) returned {rc}: {last_error(ll.log)}")
            t3 = time.perf_counter_ns()
            return n * P / ((t1 - t0) * 1e-9), args.decode * P / ((t3 - t2) * 1e-9)
        finally:
            lib.llama_batch_free(batch)

    if P > 1:
        one_rep = batched_rep  # noqa: F811 (the same counting below, P sequences at a time)
    one_rep()                                      # warm-up, not counted
    runs = [one_rep() for _ in range(max(args.reps, 1))]
    pre, dec = [r[0] for r in runs], [r[1] for r in runs]
    out = {
        "prefill_tps": round(statistics.mean(pre), 3), "decode_tps": round(statistics.mean(dec), 3),
        "threads": args.threads, "model": str(args.model), "n_prefill": args.prefill, "n_decode": args.decode,
        "parallel": P,
        "stat": f"mean of {len(runs)} reps after 1 warm-up", "prefill_tps_best": round(max(pre), 3),
        "decode_tps_best": round(max(dec), 3), "prefill_tps_reps": [round(x, 3) for x in pre],
        "decode_tps_reps": [round(x, 3) for x in dec], "kv_type": args.kv_type, "flash_attn": fa,
        "n_ctx": n_ctx, "n_ubatch": cp.n_ubatch, "threadpool": f"attached (poll {args.poll})" if tp else "ggml default",
        "model_desc": ll.model_desc(model), "model_size_bytes": int(lib.llama_model_size(model)),
        "model_params": int(lib.llama_model_n_params(model)), "load_s": round(load_s, 3), "kv_cache": kv_cache,
        "reference": f"llama.cpp via node-llama-cpp 3.21.1 libllama (ctypes), {describe_build(libdir)}; "
                     f"CPU backend {backend[-1] if backend else '?'}",
    }
    print(json.dumps(out))
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
