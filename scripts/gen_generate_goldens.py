#!/usr/bin/env python3
"""Golden logits and greedy tokens from llama.cpp for the random test models.

For every family and GGUF type it writes the test model with
scripts/write_test_model.py (default arguments; mistral, gemma2 and
gemma3_text also get --sliding-window 8 so the window matters within the run)
into a scratch folder, then runs llama.cpp's prebuilt libllama
(node-llama-cpp 3.21.1, via ctypes, see scripts/llamacpp_ctypes.py) on the
GGUF in a child process (an abort in llama.cpp is reported, not fatal):

  * context: n_ctx 64, n_batch = n_ubatch = 64, 2 threads, K and V cache in
    F32 (llama.cpp's default F16 would round K/V), flash attention off, no
    offload;
  * prompt: 16 ids [(7 + 37*i) % n_vocab for i = 0, 1, ...], skipping ids
    that are not NORMAL/BYTE tokens in tokenizer.ggml.token_type or are one of
    the tokenizer.ggml.*_token_id entries (llama.cpp's own view is checked
    too); no BOS is added, the ids go in as given;
  * one llama_decode of the 16 ids with logits for the last one: those
    logits (the whole vocabulary) are the golden;
  * 32 greedy steps: argmax of the current logits (ties to the lowest id),
    recorded with its margin top1 - top2, then decoded at the next position
    (the last chosen token is not decoded).

Output: goldens/generate/<family>.<type>.json (<variant>.<type>.json for
a VARIANTS entry, e.g. phi3_longrope: family phi3 with --longrope 32) with
family (the writer's --family), type,
writer_args (the extra writer arguments), n_ctx, prompt, logits (9
significant digits), max_abs_logit, greedy, margins, n_swa (the sliding
window llama.cpp applied: llama_model_n_swa, 0 = none), reference,
generated_by. A family llama.cpp refuses (load, context or decode failure,
an abort, or non-finite logits) gets no golden and is listed at the end with
the reason. The writer is run twice per family and the two outputs compared
byte for byte (it must be deterministic).

    /usr/bin/python3 scripts/gen_generate_goldens.py [--families llama,qwen2]
        [--types f32,f16,q8_0] [--keep DIR] [--out goldens/generate]

Needs refs/llama (scripts/fetch_llama_cpp.sh) and numpy.
"""

from __future__ import annotations

import argparse
import ctypes as C
import filecmp
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from llamacpp_ctypes import (GGML_TYPE_F32, LLAMA_FLASH_ATTN_TYPE_DISABLED, LLAMA_TOKEN_ATTR_BYTE,  # noqa: E402
                             LLAMA_TOKEN_ATTR_NORMAL, LLAMA_TOKEN_NULL, Llama, describe_build, find_libdir,
                             last_error)
from modelwriter.formats import GGUFReader  # noqa: E402

FAMILIES = ["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon",
            "bloom", "olmoe", "mixtral", "deepseek_v3", "gemma", "granite", "mpt", "qwen2_moe", "qwen3_moe", "lfm2",
            "olmo2", "starcoder2", "jamba", "cohere", "mamba2"]
TYPES = ["f32", "f16", "q8_0"]
WRITER_ARGS = {"mistral": ["--sliding-window", "8"], "gemma2": ["--sliding-window", "8"],
               "gemma3_text": ["--sliding-window", "8"], "phi3_longrope": ["--longrope", "32", "--std", "0.05"],
               "starcoder2": ["--std", "0.1"], "cohere": ["--std", "0.1"]}
# starcoder2, cohere: weights with std 0.1, or their LayerNorms and tied embeddings pick
# one token for all 32 greedy steps (starcoder2: two distinct ones at 0.1, cohere 12).
# Variants: a golden name -> the writer family it runs with its WRITER_ARGS.
# phi3_longrope: Phi-3 with LongRoPE in the converter's GGUF layout (factor
# tensors, attn_factor, original context 32 < n_ctx 64, so llama.cpp takes
# the long factors; weights with std 0.05 so that positions matter: without
# LongRoPE the logits move by 8% and the greedy tokens part at the second).
VARIANTS = {"phi3_longrope": "phi3"}
FAMILIES.append("phi3_longrope")
N_CTX = 64
N_PROMPT = 16
N_GREEDY = 32
N_THREADS = 2
REFERENCE = "llama.cpp via node-llama-cpp 3.21.1 libllama (ctypes)"

# tokenizer.ggml.token_type values
TT_NORMAL, TT_BYTE = 1, 6


def prompt_ids(gguf: Path) -> list[int]:
    """The 16 prompt ids: (7 + 37*i) % n_vocab, skipping special / unused / control ids."""
    r = GGUFReader(gguf)
    tokens = r.value("tokenizer.ggml.tokens")
    n_vocab = len(tokens)
    types = r.value("tokenizer.ggml.token_type") or [TT_NORMAL] * n_vocab
    special = {int(kv.value) for k, kv in r.kvs.items()
               if k.startswith("tokenizer.ggml.") and k.endswith("_token_id")}
    out: list[int] = []
    i = 0
    while len(out) < N_PROMPT:
        if i > 100 * n_vocab:
            raise RuntimeError(f"{gguf}: not enough ordinary tokens for a prompt")
        t = (7 + 37 * i) % n_vocab
        i += 1
        if t in special or types[t] not in (TT_NORMAL, TT_BYTE):
            continue
        out.append(t)
    return out


# --------------------------------------------------------------------------
# child process: one GGUF through llama.cpp
# --------------------------------------------------------------------------

def run_child(libdir: Path, path: Path, prompt: list[int]) -> dict:
    ll = Llama(libdir)
    lib = ll.lib
    backend = [Path(l.split()[-1]).name for l in "".join(ll.log).splitlines() if "loaded CPU backend" in l]
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = lib.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        return {"ok": False, "error": "load: " + last_error(ll.log)}
    vocab = lib.llama_model_get_vocab(model)
    n_vocab = lib.llama_vocab_n_tokens(vocab)
    res: dict = {"ok": True, "n_vocab": n_vocab, "n_swa": lib.llama_model_n_swa(model), "desc": ll.model_desc(model),
                 "system_info": ll.system_info(), "cpu_backend": backend[-1] if backend else ""}
    special = {lib.llama_vocab_bos(vocab), lib.llama_vocab_eos(vocab), lib.llama_vocab_eot(vocab),
               lib.llama_vocab_pad(vocab), lib.llama_vocab_sep(vocab), lib.llama_vocab_cls(vocab)} - {LLAMA_TOKEN_NULL}
    bad = [t for t in prompt if t in special or lib.llama_vocab_is_control(vocab, t) or lib.llama_vocab_is_eog(vocab, t)
           or not lib.llama_vocab_get_attr(vocab, t) & (LLAMA_TOKEN_ATTR_NORMAL | LLAMA_TOKEN_ATTR_BYTE)]
    if bad:
        return {"ok": False, "error": f"prompt ids {bad} are special for llama.cpp"}

    cp = lib.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = N_CTX, N_CTX, N_CTX
    cp.n_seq_max = 1
    cp.n_threads = cp.n_threads_batch = N_THREADS
    cp.type_k = cp.type_v = GGML_TYPE_F32
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.offload_kqv = False
    cp.op_offload = False
    cp.no_perf = True
    ctx = lib.llama_init_from_model(model, cp)
    if not ctx:
        return {"ok": False, "error": "context: " + last_error(ll.log)}

    def logits() -> np.ndarray:
        return np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).astype(np.float32)

    arr = (C.c_int32 * len(prompt))(*prompt)
    rc = lib.llama_decode(ctx, lib.llama_batch_get_one(arr, len(prompt)))
    if rc != 0:
        return {"ok": False, "error": f"llama_decode(prompt) returned {rc}: " + last_error(ll.log)}
    cur = logits()
    res["logits"] = cur.tolist()
    greedy, margins, finite = [], [], bool(np.isfinite(cur).all())
    for step in range(N_GREEDY):
        tok = int(np.argmax(cur))          # first maximum: ties go to the lowest id
        top2 = np.partition(cur.astype(np.float64), -2)[-2:]
        greedy.append(tok)
        margins.append(float(top2[1] - top2[0]))
        if step == N_GREEDY - 1:
            break
        one = (C.c_int32 * 1)(tok)
        rc = lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1))
        if rc != 0:
            return {"ok": False, "error": f"llama_decode(step {step}) returned {rc}: " + last_error(ll.log)}
        cur = logits()
        finite = finite and bool(np.isfinite(cur).all())
    res.update(greedy=greedy, margins=margins, finite=finite)
    res["warnings"] = [l.strip() for l in "".join(ll.log).splitlines()
                       if "warn" in l.lower() or "currently disabled" in l.lower()][-5:]
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return res


def run_gguf(libdir: Path, path: Path, prompt: list[int]) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(libdir), str(path), json.dumps(prompt)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "child timed out after 600 s"}
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
        return {"ok": False, "error": f"child exited {p.returncode}: {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------

def g9(x: float) -> str:
    """9 significant digits: enough to give back the float32 exactly."""
    if not math.isfinite(x):
        raise ValueError(f"non-finite value {x}")
    return f"{x:.9g}"


def golden_text(fields: dict) -> str:
    """JSON with one field per line and number lists kept on one line."""
    lines = []
    for k, v in fields.items():
        if k in ("logits", "margins"):
            val = "[" + ", ".join(g9(x) for x in v) + "]"
        elif k == "max_abs_logit":
            val = g9(v)
        else:
            val = json.dumps(v, ensure_ascii=False)
        lines.append(f"  {json.dumps(k)}: {val}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_model(family: str, out: Path, types: list[str], extra: list[str]) -> None:
    cmd = [sys.executable, str(HERE / "write_test_model.py"), "--family", family, "--out", str(out),
           "--gguf", ",".join(types), *extra]
    subprocess.run(cmd, check=True, capture_output=True)


def same_tree(a: Path, b: Path) -> list[str]:
    """Files that differ between two writer outputs (names relative to a)."""
    diff = []
    for f in sorted(p for p in a.rglob("*") if p.is_file()):
        g = b / f.relative_to(a)
        if not g.is_file() or not filecmp.cmp(f, g, shallow=False):
            diff.append(str(f.relative_to(a)))
    diff += [str(g.relative_to(b)) for g in b.rglob("*") if g.is_file() and not (a / g.relative_to(b)).exists()]
    return diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--keep", type=Path, help="write the models here instead of a temporary folder")
    ap.add_argument("--out", type=Path, default=ROOT / "goldens/generate")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        libdir, path, prompt = args.child
        print(json.dumps(run_child(Path(libdir), Path(path), json.loads(prompt))))
        return 0

    libdir = find_libdir()
    if libdir is None:
        print("gen_generate_goldens: llama.cpp libraries not found (run scripts/fetch_llama_cpp.sh)", file=sys.stderr)
        return 2
    families = [f for f in args.families.split(",") if f]
    types = [t for t in args.types.split(",") if t]
    scratch_ctx = tempfile.TemporaryDirectory() if args.keep is None else None
    scratch = Path(scratch_ctx.name) if scratch_ctx else args.keep
    scratch.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    build = describe_build(libdir)

    refused: dict[str, str] = {}
    suspicious: list[str] = []
    written: list[str] = []
    for family in families:
        extra = WRITER_ARGS.get(family, [])
        writer_family = VARIANTS.get(family, family)
        d = scratch / family
        try:
            write_model(writer_family, d, types, extra)
            write_model(writer_family, scratch / f"{family}.again", types, extra)
        except subprocess.CalledProcessError as e:
            refused[family] = f"writer failed: {(e.stderr or b'').decode(errors='replace').strip()[-300:]}"
            print(f"{family:12s} WRITER FAILED")
            continue
        if diff := same_tree(d, scratch / f"{family}.again"):
            refused[family] = f"writer is not deterministic: {diff}"
            print(f"{family:12s} NOT DETERMINISTIC {diff}")
            continue
        prompt = prompt_ids(d / f"model-{types[0]}.gguf")
        ref_logits = ref_greedy = None
        for t in types:
            r = run_gguf(libdir, d / f"model-{t}.gguf", prompt)
            if not r.get("ok"):
                refused.setdefault(family, f"{t}: {r.get('error')}")
                print(f"{family:12s} {t:5s} REFUSED {r.get('error')}")
                continue
            logits = np.array(r["logits"], dtype=np.float64)
            if not r["finite"]:
                suspicious.append(f"{family}.{t}: non-finite logits")
                refused.setdefault(family, f"{t}: non-finite logits")
                print(f"{family:12s} {t:5s} NON-FINITE logits")
                continue
            if len(logits) != r["n_vocab"]:
                refused.setdefault(family, f"{t}: {len(logits)} logits for n_vocab {r['n_vocab']}")
                continue
            max_abs = float(np.abs(logits).max())
            fields = {
                "family": writer_family, "type": t, "writer_args": extra, "n_ctx": N_CTX, "prompt": prompt,
                "logits": r["logits"], "max_abs_logit": max_abs, "greedy": r["greedy"], "margins": r["margins"],
                "n_swa": r["n_swa"],
                "reference": f"{REFERENCE}, {build}; CPU backend {r['cpu_backend'] or '?'}; n_threads {N_THREADS}, "
                             f"n_batch = n_ubatch = {N_CTX}, KV cache F32, flash attention off",
                "generated_by": "scripts/gen_generate_goldens.py",
            }
            path = args.out / f"{family}.{t}.json"
            path.write_text(golden_text(fields), encoding="utf-8")
            written.append(f"{family}.{t}")
            note = ""
            if t == types[0]:
                ref_logits, ref_greedy = logits, r["greedy"]
            elif ref_logits is not None:
                same = sum(a == b for a, b in zip(r["greedy"], ref_greedy))
                note = f" | vs {types[0]}: max |dlogit| {np.abs(logits - ref_logits).max():.3g}, greedy same {same}/32"
            min_margin = min(r["margins"])
            if max_abs < 1e-3:
                suspicious.append(f"{family}.{t}: logits nearly zero (max |logit| {max_abs:.3g})")
            if min_margin < 1e-4:
                suspicious.append(f"{family}.{t}: greedy margin {min_margin:.3g} (near tie)")
            print(f"{family:12s} {t:5s} ok  n_vocab {r['n_vocab']} n_swa {r['n_swa']} max|logit| {max_abs:.4g} "
                  f"min margin {min_margin:.3g} distinct greedy {len(set(r['greedy']))}{note}"
                  + (f" | warn: {r['warnings'][-1][:100]}" if r.get("warnings") else ""))

    print(f"\n{len(written)} goldens written to {args.out}")
    if suspicious:
        print("suspicious:")
        for s in suspicious:
            print(f"  {s}")
    if refused:
        print("refused (no golden or not all types):")
        for f, why in refused.items():
            print(f"  {f}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
