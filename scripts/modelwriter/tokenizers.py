"""Tokenizers for the test models.

Two jobs:
  * make a small, complete tokenizer.json + tokenizer_config.json when the caller
    has none: a byte-level BPE in the Llama 3 layout, or a SentencePiece-style
    BPE with byte fallback in the Gemma layout;
  * turn any tokenizer.json of those two kinds into the `tokenizer.ggml.*`
    entries that llama.cpp's converter writes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .formats import KV, GGUFValueType as VT, kv_arr, kv_bool, kv_str, kv_u32

# llama.cpp token types (llama_token_type)
TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6

LLAMA3_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                      r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                     r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_SPLIT_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
DEEPSEEK_V3_SPLIT_REGEXES = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]

# Text the synthetic tokenizers learn their merges from (written for this project).
TRAINING_TEXT = """\
The small model reads a line of text and writes the next word. It is not a clever model:
its weights are random, so every answer is noise, but the shapes, names and numbers around
those weights are the same as in a real checkpoint. A loader that handles this file should
handle the real one too. Tokens, merges, heads, layers and experts all line up the way the
reference tools expect them to. We test the tokenizer with plain words, numbers like 12 and
345, punctuation such as commas, dots and question marks, and a few longer words: attention,
normalization, quantization, embedding, transformer, generation, and inference.
the the the and and and of of to to in in is is it it that that with with for for on on
"""

_SPM_SPACE = "\u2581"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _learn_merges(words: Counter, n_merges: int) -> list[tuple[str, str]]:
    """Plain BPE training: repeatedly merge the most frequent adjacent pair
    (ties broken by the pair itself, so the result is deterministic)."""
    splits = {w: list(w) for w in words}
    merges: list[tuple[str, str]] = []
    for _ in range(n_merges):
        pairs: Counter = Counter()
        for w, count in words.items():
            parts = splits[w]
            for a, b in zip(parts, parts[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        for w in words:
            parts = splits[w]
            i, out = 0, []
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    out.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            splits[w] = out
    return merges


def _added(id_: int, content: str, special: bool = True) -> dict[str, Any]:
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def _tokenizer_config(added: list[dict], extra: dict[str, Any]) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "added_tokens_decoder": {
            str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in added
        },
    }
    cfg.update(extra)
    return cfg


def synthetic_byte_bpe(n_merges: int = 64, tokenizer_class: str = "PreTrainedTokenizerFast") -> tuple[dict, dict]:
    """A byte-level BPE laid out like Llama 3's tokenizer.json: 256 byte tokens,
    learned merges, then special tokens. Returns (tokenizer.json, tokenizer_config.json)."""
    enc = bytes_to_unicode()
    vocab = {enc[b]: b for b in range(256)}
    words: Counter = Counter()
    for piece in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", TRAINING_TEXT):
        words["".join(enc[b] for b in piece.encode("utf-8"))] += 1
    merges = _learn_merges(words, n_merges)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    added = [_added(len(vocab) + i, s) for i, s in enumerate(specials)]
    bos = added[0]["content"]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [added[0]["id"]], "tokens": [bos]}}},
        ]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    cfg = _tokenizer_config(added, {
        "bos_token": specials[0], "eos_token": specials[1], "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072,
        "tokenizer_class": tokenizer_class,
    })
    return tok, cfg


def synthetic_spm_bpe(n_merges: int = 64, style: str = "gemma", chat_tokens: tuple[str, ...] = (),
                      eos_token: str | None = None) -> tuple[dict, dict]:
    """A SentencePiece-style BPE with byte fallback, as HF converts SentencePiece models:
    special pieces, 256 <0xXX> byte tokens, merged pieces in merge order, single
    characters, then added chat tokens.

    style "gemma": <pad> <eos> <bos> <unk>, no leading-space normalizer (Gemma);
    style "llama": <unk> <s> </s> and a "▁" prepended to the text (Llama 2, Mistral, Phi-3)."""
    if style == "gemma":
        specials, bos, eos, unk, pad = ["<pad>", "<eos>", "<bos>", "<unk>"], "<bos>", "<eos>", "<unk>", "<pad>"
        chat_tokens = chat_tokens or ("<start_of_turn>", "<end_of_turn>")
    else:
        specials, bos, eos, unk, pad = ["<unk>", "<s>", "</s>"], "<s>", "</s>", "<unk>", None
    vocab: dict[str, int] = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    text = TRAINING_TEXT.replace("\n", " ").replace(" ", _SPM_SPACE)
    words: Counter = Counter(re.findall(f"{_SPM_SPACE}*[^{_SPM_SPACE}]+", text))
    merges = _learn_merges(words, n_merges)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for ch in sorted(set(text)):
        vocab.setdefault(ch, len(vocab))
    added = [_added(vocab[s], s) for s in specials] + [_added(len(vocab) + i, s) for i, s in enumerate(chat_tokens)]
    eos = eos_token or eos
    bos_id = vocab[bos]
    if style == "gemma":
        normalizer = {"type": "Replace", "pattern": {"String": " "}, "content": _SPM_SPACE}
        decoders = []
    else:
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": _SPM_SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": _SPM_SPACE}]}
        decoders = [{"type": "Strip", "content": " ", "start": 1, "stop": 0}]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": _SPM_SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}] + decoders},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    extra = {"add_bos_token": True, "add_eos_token": False, "bos_token": bos, "eos_token": eos,
             "unk_token": unk, "clean_up_tokenization_spaces": False, "model_max_length": 131072,
             "spaces_between_special_tokens": False,
             "tokenizer_class": "GemmaTokenizer" if style == "gemma" else "LlamaTokenizer"}
    if pad:
        extra["pad_token"] = pad
    if style != "gemma":
        extra["legacy"] = False
    return tok, _tokenizer_config(added, dict(sorted(extra.items())))


# --------------------------------------------------------------------------
# tokenizer.json -> GGUF
# --------------------------------------------------------------------------

@dataclass
class TokenizerInfo:
    tokenizer: dict
    config: dict
    kind: str                                   # "bpe" (byte level) or "spm" (byte-fallback BPE)
    size: int                                   # number of ids the tokenizer defines
    special_ids: dict[str, int] = field(default_factory=dict)


def load_tokenizer(tokenizer: dict, config: dict) -> TokenizerInfo:
    model = tokenizer.get("model", {})
    if model.get("type") != "BPE":
        raise ValueError(f"unsupported tokenizer model {model.get('type')!r} (only BPE tokenizer.json files)")
    kind = "spm" if model.get("byte_fallback") else "bpe"
    ids = list(model["vocab"].values()) + [t["id"] for t in tokenizer.get("added_tokens", [])]
    info = TokenizerInfo(tokenizer, config, kind, max(ids) + 1)
    by_content = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}
    for typ in ("bos", "eos", "unk", "pad"):
        entry = config.get(f"{typ}_token")
        content = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(content, str) and content in by_content:
            info.special_ids[typ] = by_content[content]
    return info


def detect_bpe_pre(tokenizer: dict) -> str:
    """The `tokenizer.ggml.pre` name llama.cpp uses for this pre-tokenizer.
    (convert_hf_to_gguf.py finds it by hashing the ids of a probe string; we
    recognise the regexes of the tokenizers that hash belongs to.)"""
    pre = tokenizer.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    regexes = [s["pattern"].get("Regex") for s in steps if s.get("type") == "Split"]
    if regexes == [LLAMA3_SPLIT_REGEX]:
        return "llama-bpe"
    if regexes == [QWEN2_SPLIT_REGEX]:
        return "qwen2"
    if regexes == DEEPSEEK_V3_SPLIT_REGEXES:
        return "deepseek-v3"
    if not regexes and any(s.get("type") == "ByteLevel" and s.get("use_regex", True) for s in steps):
        return "gpt-2"
    raise ValueError("pre-tokenizer not recognised; pass --pre with the llama.cpp name")


def _looks_special(token: str) -> bool:
    """convert_hf_to_gguf.py's heuristic for added tokens that should be CONTROL."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<\uff5c") and token.endswith("\uff5c>"))
            or (token.startswith("<unused") and token.endswith(">")))


def _merge_strings(merges: list) -> list[str]:
    if merges and isinstance(merges[0], list):
        fix = lambda part: "".join(chr(ord(c) + 256) if c == " " else c for c in part)  # noqa: E731
        return [f"{fix(a)} {fix(b)}" for a, b in merges]
    return list(merges)


def _add_special_flags(tokenizer: dict, config: dict) -> list[tuple[str, bool]]:
    """add_bos/add_eos as gguf-py's SpecialVocab derives them: from a
    TemplateProcessing post-processor, then from tokenizer_config.json."""
    flags: dict[str, bool] = {}
    post = tokenizer.get("post_processor") or {}
    for proc in post.get("processors", [post]):
        if proc.get("type") == "TemplateProcessing":
            single = proc.get("single", [])
            if len(single) > 1:
                first = single[0].get("SpecialToken", {}).get("id")
                if first:
                    flags["bos"] = True
                last = single[-1].get("SpecialToken", {}).get("id")
                if last:
                    flags["eos"] = True
    for typ in ("bos", "eos"):
        value = config.get(f"add_{typ}_token")
        if isinstance(value, bool):
            flags[typ] = value
    return list(flags.items())


def gguf_vocab(info: TokenizerInfo, n_vocab: int, hf_config: dict, pre: str | None = None,
               add_space_prefix_key: bool | None = None) -> list[KV]:
    """The tokenizer.ggml.* entries, in the order convert_hf_to_gguf.py writes them."""
    tok, cfg = info.tokenizer, info.config
    id_to_token: dict[int, str] = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {t["id"]: t for t in tok.get("added_tokens", [])}
    for i, t in added.items():
        id_to_token[i] = t["content"]
    if n_vocab < info.size:
        raise ValueError(f"vocab_size {n_vocab} is smaller than the tokenizer ({info.size} ids)")

    tokens: list[str] = []
    types: list[int] = []
    scores: list[float] = []
    unk_content = tok["model"].get("unk_token")
    for i in range(n_vocab):
        text = id_to_token.get(i)
        if text is None:
            tokens.append(f"[PAD{i}]")
            types.append(TT_UNUSED)
            scores.append(-1000.0)
            continue
        if i in added:
            special = added[i].get("special", False) or _looks_special(text)
            if not special:
                text = text.replace(_SPM_SPACE, " ")
            types.append(TT_CONTROL if special else TT_USER_DEFINED)
            scores.append(-1000.0)
        elif info.kind == "spm" and re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", text):
            types.append(TT_BYTE)
            scores.append(0.0)
        elif info.kind == "spm" and text == unk_content:
            types.append(TT_UNKNOWN)
            scores.append(0.0)
        else:
            types.append(TT_NORMAL)
            # SentencePiece ids are ordered by piece score, and HF derived the
            # merge order from those scores, so -id keeps llama.cpp's
            # highest-score-first merging in step with the merge ranks.
            scores.append(-float(i))
        tokens.append(text)

    out: list[KV] = []
    if info.kind == "bpe":
        out.append(kv_str("tokenizer.ggml.model", "gpt2"))
        out.append(kv_str("tokenizer.ggml.pre", pre or detect_bpe_pre(tok)))
        out.append(kv_arr("tokenizer.ggml.tokens", VT.STRING, tokens))
        out.append(kv_arr("tokenizer.ggml.token_type", VT.INT32, types))
        out.append(kv_arr("tokenizer.ggml.merges", VT.STRING, _merge_strings(tok["model"].get("merges", []))))
    else:
        out.append(kv_str("tokenizer.ggml.model", "llama"))
        out.append(kv_str("tokenizer.ggml.pre", pre or "default"))
        out.append(kv_arr("tokenizer.ggml.tokens", VT.STRING, tokens))
        out.append(kv_arr("tokenizer.ggml.scores", VT.FLOAT32, scores))
        out.append(kv_arr("tokenizer.ggml.token_type", VT.INT32, types))

    special = dict(info.special_ids)
    for typ in ("bos", "eos", "unk", "pad"):
        cid = hf_config.get(f"{typ}_token_id")
        if typ not in special and isinstance(cid, int) and cid < n_vocab:
            special[typ] = cid
    key_names = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    for typ in ("bos", "eos", "unk", "pad"):
        if typ in special:
            out.append(kv_u32(f"tokenizer.ggml.{key_names[typ]}", special[typ]))
    for typ, value in _add_special_flags(tok, cfg):
        out.append(kv_bool(f"tokenizer.ggml.add_{typ}_token", value))
    if isinstance(cfg.get("chat_template"), str):
        out.append(kv_str("tokenizer.chat_template", cfg["chat_template"]))
    if add_space_prefix_key is not None:
        out.append(kv_bool("tokenizer.ggml.add_space_prefix", add_space_prefix_key))
    return out


def spm_prepends_space(tokenizer: dict) -> bool:
    """True when the normalizer adds the leading "▁" (Llama 2 style)."""
    norm = tokenizer.get("normalizer") or {}
    steps = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
    return any(s.get("type") == "Prepend" for s in steps)


def read_tokenizer_folder(folder: Path) -> tuple[dict, dict]:
    folder = Path(folder)
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    return tok, cfg
