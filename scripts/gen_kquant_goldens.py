#!/usr/bin/env python3
"""Goldens for GGUFs that llama.cpp itself quantized to its k-quant mixes
(Q4_K_M, Q5_K_M): the formats most GGUFs on the hub come in, and ones the
project's writer does not write.

For each mix it writes a llama test model whose rows are k-quant sized
(scripts/write_test_model.py --hidden 256 --intermediate 512, f32 GGUF),
quantizes it with llama_model_quantize (scripts/quantize_llama_cpp.py), and
keeps that file as goldens/kquant/llama.<mix>.gguf (CI has no llama.cpp to
make it). The golden logits and greedy tokens are llama.cpp's on the same
weights in f32: llama_model_quantize again, with allow_requantize to ftype
ALL_F32, turns the mix back into f32 with ggml's own dequantization, and that
file runs through llama.cpp exactly as scripts/gen_generate_goldens.py runs
the other test models (same prompt rule, context, KV cache in F32, 32 greedy
steps with margins). So the golden holds the reading of the k-quant blocks
to the f32 bound; llama.cpp on the mix itself quantizes its activations to
q8_K (one scale per 256 values), which moves its logits by 2.5 to 6% of the
largest on these models (printed here as "direct"), too much to test
anything by. Output: goldens/kquant/llama.<mix>.json;
tests/generate_golden_test.cpp holds `bonfire generate` to it.

    /usr/bin/python3 scripts/gen_kquant_goldens.py [--mixes q4_k_m,q5_k_m] [--out goldens/kquant]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from gen_generate_goldens import N_CTX, N_THREADS, REFERENCE, golden_text, prompt_ids, run_gguf  # noqa: E402
from llamacpp_ctypes import Llama, describe_build, find_libdir, last_error  # noqa: E402
from quantize_llama_cpp import FTYPES  # noqa: E402

WRITER_ARGS = ["--hidden", "256", "--intermediate", "512", "--std", "0.2"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixes", default="q4_k_m,q5_k_m")
    ap.add_argument("--out", type=Path, default=ROOT / "goldens/kquant")
    a = ap.parse_args()
    libdir = find_libdir()
    if libdir is None:
        print("gen_kquant_goldens: llama.cpp libraries not found (run scripts/fetch_llama_cpp.sh)", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "llama"
        subprocess.run([sys.executable, str(HERE / "write_test_model.py"), "--family", "llama", "--out", str(d),
                        "--gguf", "f32", *WRITER_ARGS], check=True, capture_output=True)
        ll = Llama(libdir)
        for mix in [m for m in a.mixes.split(",") if m]:
            gguf = a.out / f"llama.{mix}.gguf"
            tmp_out = Path(tmp) / f"llama.{mix}.gguf"
            if ll.quantize(d / "model-f32.gguf", tmp_out, FTYPES[mix], N_THREADS) != 0:
                print(f"{mix}: llama_model_quantize failed: {last_error(ll.log)}", file=sys.stderr)
                return 1
            shutil.copyfile(tmp_out, gguf)
            f32 = Path(tmp) / f"llama.{mix}.f32.gguf"
            if ll.quantize(gguf, f32, 0, N_THREADS, allow_requantize=True) != 0:
                print(f"{mix}: dequantizing to f32 failed: {last_error(ll.log)}", file=sys.stderr)
                return 1
            prompt = prompt_ids(gguf)
            r = run_gguf(libdir, f32, prompt)
            direct = run_gguf(libdir, gguf, prompt)
            if not r.get("ok") or not r["finite"] or not direct.get("ok"):
                print(f"{mix}: llama.cpp refused or gave non-finite logits: {r.get('error')} {direct.get('error')}",
                      file=sys.stderr)
                return 1
            logits = np.array(r["logits"], dtype=np.float64)
            moved = np.abs(np.array(direct["logits"]) - logits).max() / np.abs(logits).max()
            fields = {
                "family": "llama", "type": mix, "writer_args": WRITER_ARGS, "n_ctx": N_CTX, "prompt": prompt,
                "logits": r["logits"], "max_abs_logit": float(np.abs(logits).max()), "greedy": r["greedy"],
                "margins": r["margins"], "n_swa": r["n_swa"], "gguf": f"goldens/kquant/llama.{mix}.gguf",
                "reference": f"{REFERENCE}, {describe_build(libdir)}; CPU backend {r['cpu_backend'] or '?'}; "
                             f"n_threads {N_THREADS}, n_batch = n_ubatch = {N_CTX}, KV cache F32, flash attention off; "
                             f"run on the f32 dequantization (llama_model_quantize, ALL_F32) of the GGUF that "
                             f"llama_model_quantize ({mix}) made from the writer's f32 file",
                "generated_by": "scripts/gen_kquant_goldens.py",
            }
            (a.out / f"llama.{mix}.json").write_text(golden_text(fields), encoding="utf-8")
            print(f"{mix}: {gguf} ({gguf.stat().st_size / 1e6:.2f} MB), min margin {min(r['margins']):.3g}, "
                  f"distinct greedy {len(set(r['greedy']))}; direct on the mix: logits moved by {moved:.3g} "
                  f"of the largest, greedy same {sum(a == b for a, b in zip(direct['greedy'], r['greedy']))}/32")
    return 0


if __name__ == "__main__":
    sys.exit(main())
