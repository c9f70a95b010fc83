#!/usr/bin/env python3
"""Compare the test models' GGUF layout with what llama.cpp's own converter writes.

For every family (and a few writer variants such as phi3 --longrope) this
writes the random test model with scripts/write_test_model.py (an HF folder
plus the f32 GGUF the project's writer makes), then runs llama.cpp's
convert_hf_to_gguf.py model class (the pinned release's source, cloned by
scripts/fetch_llama_cpp.sh into refs/llama/llama.cpp) on the same HF folder,
outtype f32 (or each of --types), and compares the two files:

  * `<arch>.*` and `general.*` metadata: keys only on one side, values that
    differ (numbers compared as f32);
  * tensors: names only on one side, shapes, ggml types, and the data
    (byte for byte).

The converter runs in a child process with two stand-ins, because its
Python dependencies transformers and sentencepiece are not Debian packages
(python3-torch and python3-numpy are; gguf-py comes from the bundle):

  * a `transformers` module whose AutoConfig/AutoTokenizer raise, so
    ModelBase.load_hparams falls back to reading config.json (its own path);
  * torch 1.13 (Debian bookworm) lacks the float8 and uint16-64 dtypes the
    converter's dtype tables name; they get inert stand-ins; tqdm (the
    writer's progress bar) gets a silent one;
  * set_vocab is replaced by one that copies the tokenizer.* keys of the
    project writer's GGUF. The vocabulary is therefore NOT compared here
    (tests/tokenizer_gguf_pre_test.cpp and the tokenizer goldens cover it);
    everything else -- set_gguf_parameters, modify_tensors,
    generate_extra_tensors, prepare_tensors -- is the converter's own code.

    /usr/bin/python3 scripts/compare_converter_layouts.py [--families phi3,llama] [--types f32,f16,q8_0]
        [--keep DIR] [--json OUT]

Exit status 0 when every family converted; differences are reported, not
fatal (docs/MODEL_FILES.md lists them and how the loader handles each).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LLAMA = ROOT / "refs" / "llama" / "llama.cpp"

# name -> (writer family, extra writer arguments)
CASES = {f: (f, []) for f in [
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "gpt2", "gpt_neox", "falcon",
    "bloom", "mpt", "granite", "mixtral", "olmoe", "qwen2_moe", "qwen3_moe", "deepseek_v3"]}
CASES["phi3_longrope"] = ("phi3", ["--longrope", "32"])
CASES["mistral_sw8"] = ("mistral", ["--sliding-window", "8"])
CASES["gemma2_sw8"] = ("gemma2", ["--sliding-window", "8"])
CASES["gemma3_text_trim"] = ("gemma3_text", ["--trim-embedding"])

# The converter registers MPT under MosaicML's class name (what real MPT
# checkpoints carry); transformers' own MptForCausalLM, which the test
# writer names, is not registered. The converter gets a copy of the folder
# whose config.json names MosaicML's class.
CONVERTER_ARCH = {"mpt": "MPTForCausalLM"}

# Keys that name the producer, not the model.
IGNORED_KEYS = {"general.name", "general.size_label", "general.basename", "general.finetune", "general.version"}


# --------------------------------------------------------------------------
# child: run the converter on one folder
# --------------------------------------------------------------------------

def child_convert(hf: Path, ref_gguf: Path, out: Path) -> None:
    import types

    sys.path.insert(0, str(LLAMA / "gguf-py"))
    sys.path.insert(0, str(LLAMA))
    stub = types.ModuleType("transformers")

    class _Unavailable:
        @staticmethod
        def from_pretrained(*a, **k):
            raise RuntimeError("transformers is not installed (stand-in)")

    stub.AutoConfig = stub.AutoTokenizer = _Unavailable
    sys.modules["transformers"] = stub
    # The writer's progress bar (tqdm is not installed here either).
    bar = types.ModuleType("tqdm")

    class _Bar:
        def __init__(self, *a, **k): pass
        def update(self, *a): pass
        def set_description(self, *a): pass
        def reset(self, *a, **k): pass
        def close(self): pass

    bar.tqdm = _Bar
    sys.modules.setdefault("tqdm", bar)

    import logging

    import torch
    # Debian's torch (1.13) predates these dtypes; the converter names them
    # in its dtype tables only. Distinct stand-ins keep those tables intact.
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "uint16", "uint32", "uint64"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {})())
    import gguf
    from conversion import ModelBase, ModelType, get_model_architecture, get_model_class

    logging.disable(logging.WARNING)
    hparams = ModelBase.load_hparams(hf, False)
    arch = get_model_architecture(hparams, ModelType.TEXT)
    cls = get_model_class(arch, mmproj=False)
    reader = gguf.GGUFReader(str(ref_gguf))

    def set_vocab(self):
        # The project's vocabulary, key for key (see the module docstring).
        for key, field in reader.fields.items():
            if not key.startswith("tokenizer."):
                continue
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            val = field.contents()
            self.gguf_writer.add_key_value(key, val, vtype, sub)

    with torch.inference_mode():
        ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[out.stem.split("-")[-1]]
        m = cls(hf, ftype, out, eager=True)
        m.set_vocab = types.MethodType(set_vocab, m)
        m.write()
    print(json.dumps({"ok": True, "arch": arch, "class": cls.__name__}))


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------

def read_gguf(path: Path) -> tuple[dict, dict]:
    sys.path.insert(0, str(LLAMA / "gguf-py"))
    import gguf

    r = gguf.GGUFReader(str(path))
    kv = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key.startswith("tokenizer."):
            continue
        kv[key] = field.contents()
    tensors = {t.name: (tuple(int(x) for x in reversed(t.shape.tolist())), t.tensor_type.name, bytes(t.data.tobytes()))
               for t in r.tensors}
    return kv, tensors


def same_value(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return np.float32(a) == np.float32(b)
        except (TypeError, ValueError):
            return False
    return a == b


def short(v) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def compare(ours: Path, theirs: Path) -> list[str]:
    kv_o, t_o = read_gguf(ours)
    kv_t, t_t = read_gguf(theirs)
    diffs = []
    for k in sorted(set(kv_o) | set(kv_t)):
        if k in IGNORED_KEYS or (k == "general.alignment" and kv_o.get(k, 32) == 32 and kv_t.get(k, 32) == 32):
            continue  # 32 is GGUF's default alignment, written or not
        if k not in kv_t:
            diffs.append(f"key {k} only in the test writer's file ({short(kv_o[k])})")
        elif k not in kv_o:
            diffs.append(f"key {k} only in the converter's file ({short(kv_t[k])})")
        elif not same_value(kv_o[k], kv_t[k]):
            diffs.append(f"key {k}: writer {short(kv_o[k])}, converter {short(kv_t[k])}")
    for n in sorted(set(t_o) | set(t_t)):
        if n not in t_t:
            diffs.append(f"tensor {n} only in the test writer's file {t_o[n][0]}")
        elif n not in t_o:
            diffs.append(f"tensor {n} only in the converter's file {t_t[n][0]} {t_t[n][1]}")
        else:
            (so, yo, do), (st, yt, dt) = t_o[n], t_t[n]
            if so != st or yo != yt:
                diffs.append(f"tensor {n}: writer {so} {yo}, converter {st} {yt}")
            elif do != dt:
                diffs.append(f"tensor {n}: same shape and type, different data")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(CASES))
    ap.add_argument("--keep", type=Path, help="write the models here instead of a temporary folder")
    ap.add_argument("--json", type=Path, help="also write the differences as JSON")
    ap.add_argument("--types", default="f32", help="comma list of f32, f16, bf16, q8_0 (the converter's outtypes)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    types = [t for t in args.types.split(",") if t]
    if args.child:
        child_convert(*(Path(p) for p in args.child))
        return 0
    if not (LLAMA / "convert_hf_to_gguf.py").is_file():
        print("compare_converter_layouts: refs/llama/llama.cpp missing (run scripts/fetch_llama_cpp.sh)",
              file=sys.stderr)
        return 2
    scratch_ctx = tempfile.TemporaryDirectory() if args.keep is None else None
    scratch = Path(scratch_ctx.name) if scratch_ctx else args.keep
    scratch.mkdir(parents=True, exist_ok=True)
    report, failed = {}, []
    for name in [n for n in args.families.split(",") if n]:
        family, extra = CASES[name]
        d = scratch / name
        subprocess.run([sys.executable, str(HERE / "write_test_model.py"), "--family", family, "--out", str(d),
                        "--gguf", ",".join(types), *extra], check=True, capture_output=True)
        hf = d / "hf"
        if family in CONVERTER_ARCH:
            import shutil
            hf = d / "hf-converter"
            shutil.copytree(d / "hf", hf, dirs_exist_ok=True)
            cfg = json.loads((hf / "config.json").read_text(encoding="utf-8"))
            cfg["architectures"] = [CONVERTER_ARCH[family]]
            (hf / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        for t in types:
            conv = d / f"converter-{t}.gguf"
            ours = d / f"model-{t}.gguf"
            label = name if types == ["f32"] else f"{name}.{t}"
            p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(hf), str(ours),
                                str(conv)], capture_output=True, text=True, timeout=900)
            if p.returncode != 0 or not conv.is_file():
                tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
                failed.append(label)
                report[label] = {"error": tail}
                print(f"{label:14s} CONVERTER FAILED: {tail}")
                continue
            info = json.loads(p.stdout.strip().splitlines()[-1])
            diffs = compare(ours, conv)
            report[label] = {"converter_class": info["class"], "hf_architecture": info["arch"], "differences": diffs}
            print(f"{label:14s} {info['class']:22s} {'same' if not diffs else str(len(diffs)) + ' differences'}")
            for x in diffs:
                print(f"    {x}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
