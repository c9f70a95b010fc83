#!/usr/bin/env python3
"""A GGUF quantized by llama.cpp itself: llama_model_quantize from the
prebuilt libllama of node-llama-cpp 3.21.1 (scripts/llamacpp_ctypes.py), as
`llama-quantize IN OUT TYPE` would write it. Used for the formats the
project's writer does not write (the k-quant mixes such as Q4_K_M).

    /usr/bin/python3 scripts/quantize_llama_cpp.py IN.gguf OUT.gguf q4_k_m [--threads 2]

The output is written next to OUT and renamed into place only when
llama.cpp reports success, so a failed run leaves no partial file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from llamacpp_ctypes import Llama, find_libdir, last_error  # noqa: E402

# enum llama_ftype (include/llama.h of the same release)
FTYPES = {"q4_0": 2, "q8_0": 7, "q4_k_s": 14, "q4_k_m": 15, "q5_k_s": 16, "q5_k_m": 17, "q6_k": 18}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("type", choices=sorted(FTYPES))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not a.src.is_file():
        print(f"quantize_llama_cpp: {a.src}: no such file", file=sys.stderr)
        return 2
    libdir = find_libdir()
    if libdir is None:
        print("quantize_llama_cpp: no libllama under refs/llama (run scripts/fetch_llama_cpp.sh)", file=sys.stderr)
        return 2
    ll = Llama(libdir)
    tmp = a.dst.with_name(a.dst.name + ".partial")
    rc = ll.quantize(a.src, tmp, FTYPES[a.type], a.threads)
    if rc != 0:
        tmp.unlink(missing_ok=True)
        print(f"quantize_llama_cpp: llama_model_quantize returned {rc}: {last_error(ll.log)}", file=sys.stderr)
        return 1
    os.replace(tmp, a.dst)
    print(f"quantize_llama_cpp: {a.dst} ({a.type}, {a.dst.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
