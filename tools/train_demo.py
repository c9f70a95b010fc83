#!/usr/bin/python3
"""Train bonfire's bundled demo model: a small Llama on the King James Bible.

    tools/train_demo.py [--out models/demo] [--minutes 35] [--threads 1]
    tools/train_demo.py --eval-only [--out models/demo]
    tools/train_demo.py --verify-with build/bonfire [--out models/demo]

The corpus is the KJV text of Debian's bible-kjv-text package, read through
the `bible` program of bible-kjv (apt-get install bible-kjv bible-kjv-text).
Everything else is in this file: a byte-level BPE tokenizer trained here (the
GPT-2 pre-tokenizer regex, written out by hand so no `regex`/`tokenizers`
module is needed), a Llama model in plain PyTorch, CPU training with fixed
seeds, and a Hugging Face folder written out by hand (config.json,
model.safetensors in f16, tokenizer.json, tokenizer_config.json with a chat
template, generation_config.json, heldout.txt, eval.json; the folder's
README.md is written by hand).

Split: chapters are numbered 0..1188 in Bible order; chapter i is held out of
training (tokenizer and model) when i % 20 == 10, and heldout.txt is the
held-out chapters with i % 80 == 10.

Evaluation (the protocol `bonfire perplexity --ctx N` implements): tokens =
[BOS] + encode(heldout.txt); consecutive non-overlapping windows of ctx tokens
(the last may be shorter, windows under 2 tokens are dropped); in each window
every token but the first is predicted from the ones before it in that window
(positions restart at 0); perplexity = exp(sum NLL / predicted). It runs in
f32 on the weights as saved (read back from model.safetensors).
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from modelwriter.formats import read_safetensors, write_safetensors  # noqa: E402

SEED = 1234
HOLDOUT_EVERY, HOLDOUT_AT = 20, 10   # chapters left out of training
HELDOUT_EVERY = 80                   # of those, the ones in heldout.txt
EVAL_CTX = 256

SPECIALS = ["<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
BOS, EOS, SYSTEM, USER, ASSISTANT, END = range(len(SPECIALS))

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# Corpus


def load_kjv() -> list[tuple[str, int, list[str]]]:
    """[(book, chapter, [verse text, ...]), ...] in Bible order."""
    exe = shutil.which("bible")
    if not exe:
        sys.exit("train_demo: needs the `bible` program: apt-get install bible-kjv bible-kjv-text")
    raw = subprocess.run([exe, "-l100000", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         env={**os.environ, "COLUMNS": "100000"}).stdout.decode("ascii")
    chapters: list[tuple[str, int, list[str]]] = []
    for line in raw.split("\n"):
        if not line.strip():
            continue
        if line.startswith("  "):
            num, text = line.strip().split(" ", 1)
            verses = chapters[-1][2]
            if int(num) != len(verses) + 1:
                raise SystemExit(f"train_demo: unexpected verse number in {line!r}")
            verses.append(" ".join(text.split()))
        else:
            book, chap = line.rsplit(" ", 1)
            chapters.append((book, int(chap), []))
    n_verses = sum(len(c[2]) for c in chapters)
    if len(chapters) != 1189 or n_verses != 31102:
        raise SystemExit(f"train_demo: read {len(chapters)} chapters, {n_verses} verses; expected 1189, 31102")
    return chapters


def chapter_lines(ch) -> list[str]:
    """A chapter as lines, each ending in "\\n": the heading, then the verses."""
    book, num, verses = ch
    return [f"{book} {num}\n"] + [v + "\n" for v in verses]


def chapters_text(chs) -> str:
    """Chapters, a blank line between them."""
    return "\n".join("".join(chapter_lines(c)) for c in chs)


# ----------------------------------------------------------------------------
# Byte-level BPE


def bytes_to_unicode() -> list[str]:
    """GPT-2's map from bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    out = [""] * 256
    for b, c in zip(bs, cs):
        out[b] = chr(c)
    return out


BYTE_CHARS = bytes_to_unicode()

# JavaScript's \s, which bonfire's tokenizer uses for the ByteLevel regex.
_JS_SPACE = set([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF]
                + list(range(0x2000, 0x200B)))


def _cls(ch: str) -> int:
    """0 = \\s, 1 = \\p{L}, 2 = \\p{N}, 3 = anything else."""
    if ord(ch) in _JS_SPACE:
        return 0
    if ch.isascii():
        return 1 if ch.isalpha() else 2 if ch.isdigit() else 3
    cat = unicodedata.category(ch)
    return 1 if cat[0] == "L" else 2 if cat[0] == "N" else 3


_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def pretokenize(text: str) -> list[str]:
    """The pieces of GPT-2's regex, matched leftmost-first as PCRE/JS do:
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    out = []
    n = len(text)
    cls = [_cls(c) for c in text]
    i = 0
    while i < n:
        c = text[i]
        if c == "'":
            hit = None
            for s in _CONTRACTIONS:
                if text.startswith(s, i + 1):
                    hit = s
                    break
            if hit:
                out.append(text[i:i + 1 + len(hit)])
                i += 1 + len(hit)
                continue
        k = cls[i]
        start = i
        if c == " " and i + 1 < n and cls[i + 1] != 0:
            k = cls[i + 1]
            i += 1
        if k != 0:
            j = i + 1
            while j < n and cls[j] == k:
                j += 1
            out.append(text[start:j])
            i = j
            continue
        j = i + 1
        while j < n and cls[j] == 0:
            j += 1
        if j < n and j - i >= 2:
            j -= 1  # \s+(?!\S) leaves the last space for the word after it
        out.append(text[i:j])
        i = j
    return out


class Tokenizer:
    def __init__(self, vocab: list[str], merges: list[tuple[str, str]]):
        self.vocab = vocab                      # id -> token string (byte chars)
        self.ids = {t: i for i, t in enumerate(vocab)}
        self.merges = merges
        self.ranks = {}
        for r, (a, b) in enumerate(merges):
            key = (self.ids[a], self.ids[b])
            if key not in self.ranks:
                self.ranks[key] = (r, self.ids[a + b])
        self.byte_ids = [self.ids[BYTE_CHARS[b]] for b in range(256)]
        self.cache: dict[str, list[int]] = {}

    def encode_word(self, w: str) -> list[int]:
        got = self.cache.get(w)
        if got is not None:
            return got
        syms = [self.byte_ids[b] for b in w.encode("utf-8")]
        ranks = self.ranks
        while len(syms) > 1:
            best = None
            for p in range(len(syms) - 1):
                m = ranks.get((syms[p], syms[p + 1]))
                if m is not None and (best is None or m[0] < best[0]):
                    best = (m[0], p, m[1])
            if best is None:
                break
            _, p, mid = best
            syms[p:p + 2] = [mid]
        self.cache[w] = syms
        return syms

    def encode(self, text: str) -> list[int]:
        """Ids of plain text (special tokens inside it are split out, as HF does)."""
        out: list[int] = []
        i = 0
        while i < len(text):
            j = text.find("<|", i)
            while j >= 0 and not any(text.startswith(s, j) for s in SPECIALS):
                j = text.find("<|", j + 1)
            end = len(text) if j < 0 else j
            for piece in pretokenize(text[i:end]):
                out.extend(self.encode_word(piece))
            if j < 0:
                break
            s = next(s for s in SPECIALS if text.startswith(s, j))
            out.append(self.ids[s])
            i = j + len(s)
        return out

    def decode(self, ids: list[int]) -> str:
        inv = {c: b for b, c in enumerate(BYTE_CHARS)}
        buf = bytearray()
        for t in ids:
            if t < len(SPECIALS):
                buf += SPECIALS[t].encode()
            else:
                buf += bytes(inv[c] for c in self.vocab[t])
        return buf.decode("utf-8", errors="replace")


def train_bpe(text: str, vocab_size: int) -> Tokenizer:
    """Byte-level BPE: word counts, then merges of the most frequent pair with
    incremental pair-count updates (ties: the pair with the smaller ids)."""
    t0 = time.time()
    counts = Counter(pretokenize(text))
    vocab = SPECIALS + [BYTE_CHARS[b] for b in range(256)]
    ids = {t: i for i, t in enumerate(vocab)}
    words = [[ids[BYTE_CHARS[b]] for b in w.encode("utf-8")] for w in counts]
    freqs = list(counts.values())
    pair_count: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for wi, syms in enumerate(words):
        f = freqs[wi]
        for p in zip(syms, syms[1:]):
            pair_count[p] += f
            where.setdefault(p, set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while len(vocab) < vocab_size and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue  # stale entry
        a, b = pair
        s = vocab[a] + vocab[b]
        mid = ids.get(s)
        if mid is None:
            mid = ids[s] = len(vocab)
            vocab.append(s)
        merges.append((vocab[a], vocab[b]))
        changed: set = set()
        for wi in list(where.get(pair, ())):
            syms, f = words[wi], freqs[wi]
            if len(syms) < 2:
                continue
            for p in zip(syms, syms[1:]):
                pair_count[p] -= f
                changed.add(p)
            new = []
            k = 0
            while k < len(syms):
                if k + 1 < len(syms) and syms[k] == a and syms[k + 1] == b:
                    new.append(mid)
                    k += 2
                else:
                    new.append(syms[k])
                    k += 1
            words[wi] = new
            for p in zip(new, new[1:]):
                pair_count[p] += f
                changed.add(p)
                where.setdefault(p, set()).add(wi)
        for p in changed:
            c = pair_count[p]
            if c <= 0:
                pair_count.pop(p, None)
            else:
                heapq.heappush(heap, (-c, p))
    log(f"bpe: {len(counts)} distinct words, {len(merges)} merges, {len(vocab)} tokens, {time.time() - t0:.1f}s")
    return Tokenizer(vocab, merges)


def tokenizer_json(tok: Tokenizer) -> dict:
    n_sp = len(SPECIALS)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": SPECIALS[BOS], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": SPECIALS[BOS], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": SPECIALS[BOS], "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {SPECIALS[BOS]: {"id": SPECIALS[BOS], "ids": [BOS], "tokens": [SPECIALS[BOS]]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tok.vocab) if i >= n_sp},
            "merges": [f"{a} {b}" for a, b in tok.merges],
        },
    }


def load_tokenizer(folder: Path) -> Tokenizer:
    j = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    m = j["model"]
    vocab = [""] * (max(m["vocab"].values()) + 1)
    for t, i in m["vocab"].items():
        vocab[i] = t
    for a in j["added_tokens"]:
        vocab[a["id"]] = a["content"]
    merges = [tuple(x.split(" ", 1)) if isinstance(x, str) else tuple(x) for x in m["merges"]]
    return Tokenizer(vocab, merges)


# ----------------------------------------------------------------------------
# Model (Hugging Face Llama semantics)


class Llama(torch.nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
        self.nh, self.nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = cfg["head_dim"]
        ff, V = cfg["intermediate_size"], cfg["vocab_size"]
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.embed = torch.nn.Embedding(V, d)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            layer = torch.nn.Module()
            layer.ln1 = torch.nn.Parameter(torch.ones(d))
            layer.ln2 = torch.nn.Parameter(torch.ones(d))
            layer.q, layer.k = lin(d, self.nh * self.hd), lin(d, self.nkv * self.hd)
            layer.v, layer.o = lin(d, self.nkv * self.hd), lin(self.nh * self.hd, d)
            layer.gate, layer.up, layer.down = lin(d, ff), lin(d, ff), lin(ff, d)
            self.layers.append(layer)
        self.norm = torch.nn.Parameter(torch.ones(d))
        self.tied = cfg["tie_word_embeddings"]
        if not self.tied:
            self.lm_head = lin(d, V)
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        pos = torch.arange(cfg["max_position_embeddings"], dtype=torch.float32)
        freqs = torch.outer(pos, inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        n = cfg["max_position_embeddings"]
        self.register_buffer("mask", torch.ones(n, n, dtype=torch.bool).triu(1), persistent=False)

    def init_weights(self):
        std = 0.02
        for n, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, std)
                if n.endswith((".o.weight", ".down.weight")):
                    p.data /= math.sqrt(2 * len(self.layers))

    def rms(self, x, w):
        eps = self.cfg["rms_norm_eps"]
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    @staticmethod
    def rot_half(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], dim=-1)

    def forward(self, ids):
        B, T = ids.shape
        x = self.embed(ids)
        cos, sin = self.cos[:T], self.sin[:T]
        rep = self.nh // self.nkv
        for ly in self.layers:
            h = self.rms(x, ly.ln1)
            q = ly.q(h).view(B, T, self.nh, self.hd).transpose(1, 2)
            k = ly.k(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
            v = ly.v(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
            q = q * cos + self.rot_half(q) * sin
            k = k * cos + self.rot_half(k) * sin
            # query heads h*rep .. h*rep+rep-1 share kv head h (HF's repeat_kv)
            q = q.reshape(B, self.nkv, rep * T, self.hd)
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
            s = s.view(B, self.nkv, rep, T, T).masked_fill(self.mask[:T, :T], float("-inf"))
            a = (torch.softmax(s, dim=-1).view(B, self.nkv, rep * T, T) @ v).view(B, self.nh, T, self.hd)
            x = x + ly.o(a.transpose(1, 2).reshape(B, T, self.nh * self.hd))
            h = self.rms(x, ly.ln2)
            x = x + ly.down(F.silu(ly.gate(h)) * ly.up(h))
        x = self.rms(x, self.norm)
        return x @ self.embed.weight.t() if self.tied else self.lm_head(x)

    def hf_tensors(self) -> dict[str, torch.Tensor]:
        t = {"model.embed_tokens.weight": self.embed.weight}
        for i, ly in enumerate(self.layers):
            p = f"model.layers.{i}."
            t[p + "input_layernorm.weight"] = ly.ln1
            t[p + "post_attention_layernorm.weight"] = ly.ln2
            for a, b in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
                t[p + f"self_attn.{b}.weight"] = getattr(ly, a).weight
            for a in ("gate", "up", "down"):
                t[p + f"mlp.{a}_proj.weight"] = getattr(ly, a).weight
        t["model.norm.weight"] = self.norm
        if not self.tied:
            t["lm_head.weight"] = self.lm_head.weight
        return t

    def load_hf(self, tensors: dict[str, torch.Tensor]):
        mine = self.hf_tensors()
        if set(mine) != set(tensors):
            raise SystemExit(f"train_demo: tensor names differ: {sorted(set(mine) ^ set(tensors))[:5]}")
        with torch.no_grad():
            for n, p in mine.items():
                p.copy_(tensors[n].to(torch.float32))


# ----------------------------------------------------------------------------
# safetensors (written and read here: the format is a JSON header + raw bytes)

def save_safetensors(path: Path, tensors: dict[str, torch.Tensor]):
    """f16, through the writer the test models use (scripts/modelwriter)."""
    write_safetensors(path, {n: t.detach().float().numpy() for n, t in tensors.items()}, "F16")


def load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    return {n: torch.from_numpy(a) for n, a in read_safetensors(path)[0].items()}


# ----------------------------------------------------------------------------
# Data


def chat_text(msgs: list[tuple[str, str]], bos: bool = True) -> str:
    """What CHAT_TEMPLATE renders (without the generation prompt)."""
    return (SPECIALS[BOS] if bos else "") + "".join(f"<|{r}|>\n{c}<|end|>\n" for r, c in msgs)


class Batches:
    """Training sequences of seq+1 tokens: 45% windows at random offsets of the
    training text, 40% windows that start at a line (a verse or a chapter
    heading) after BOS, 15% chat conversations walking through a chapter (the
    user says a verse, the assistant answers with the next one to three)."""

    def __init__(self, tok: Tokenizer, chapters, seq: int, seed: int):
        self.tok, self.chapters, self.seq = tok, chapters, seq
        self.rng = np.random.default_rng(seed)
        stream, starts = [], []
        for ci, ch in enumerate(chapters):
            if ci:
                stream += tok.encode("\n")
            for line in chapter_lines(ch):
                starts.append(len(stream))
                stream += tok.encode(line)
        self.stream = np.array(stream, dtype=np.int64)
        self.starts = np.array([s for s in starts if s + seq + 1 <= len(stream)], dtype=np.int64)
        log(f"data: {len(stream)} training tokens, {len(self.starts)} line starts")

    def chat_sample(self) -> list[int]:
        ids = [BOS]
        while len(ids) < self.seq + 1:
            ch = self.chapters[self.rng.integers(len(self.chapters))]
            verses = ch[2]
            if len(verses) < 2:
                continue
            v = int(self.rng.integers(len(verses) - 1))
            msgs = []
            while v < len(verses) - 1 and len(msgs) < 8:
                k = int(self.rng.integers(1, 4))
                msgs.append(("user", verses[v]))
                msgs.append(("assistant", " ".join(verses[v + 1:v + 1 + k])))
                v += 1 + k
            ids += self.tok.encode(chat_text(msgs, bos=False))
        return ids[:self.seq + 1]

    def next(self, batch: int) -> torch.Tensor:
        rows = []
        for _ in range(batch):
            u = self.rng.random()
            if u < 0.45:
                o = int(self.rng.integers(len(self.stream) - self.seq - 1))
                rows.append(self.stream[o:o + self.seq + 1])
            elif u < 0.85:
                o = int(self.starts[self.rng.integers(len(self.starts))])
                rows.append(np.concatenate([[BOS], self.stream[o:o + self.seq]]))
            else:
                rows.append(np.array(self.chat_sample(), dtype=np.int64))
        return torch.from_numpy(np.stack(rows))


# ----------------------------------------------------------------------------
# Evaluation


@torch.no_grad()
def perplexity(model: Llama, tokens: list[int], ctx: int) -> tuple[int, float]:
    windows = [tokens[i:i + ctx] for i in range(0, len(tokens), ctx)]
    windows = [w for w in windows if len(w) >= 2]
    predicted, nll = 0, 0.0
    full = [w for w in windows if len(w) == ctx]
    rest = [w for w in windows if len(w) != ctx]
    for group in [full[i:i + 16] for i in range(0, len(full), 16)] + [[w] for w in rest]:
        x = torch.tensor(group, dtype=torch.int64)
        logits = model(x[:, :-1]).float()
        lp = torch.log_softmax(logits, dim=-1)
        got = lp.gather(-1, x[:, 1:, None])[..., 0]
        nll -= float(got.double().sum())
        predicted += got.numel()
    return predicted, nll


def evaluate(out: Path, extra: dict) -> dict:
    cfg = json.loads((out / "config.json").read_text())
    tok = load_tokenizer(out)
    text = (out / "heldout.txt").read_text(encoding="utf-8")
    tokens = [BOS] + tok.encode(text)
    model = Llama(cfg)
    model.load_hf(load_safetensors(out / "model.safetensors"))
    model.eval()
    t0 = time.time()
    predicted, nll = perplexity(model, tokens, EVAL_CTX)
    res = {"file": "heldout.txt", "ctx": EVAL_CTX, "bos_prepended": True, "tokens": len(tokens),
           "predicted": predicted, "nll_sum": round(nll, 6), "perplexity": round(math.exp(nll / predicted), 6),
           "torch_version": torch.__version__}
    old = out / "eval.json"
    keep = json.loads(old.read_text()) if old.exists() else {}
    for k in ("train_minutes", "train_loss", "train_steps", "train_tokens", "params"):
        if k in extra:
            res[k] = extra[k]
        elif k in keep:
            res[k] = keep[k]
    log(f"eval: {predicted} predicted tokens in {time.time() - t0:.1f}s")
    (out / "eval.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return res


TOKENIZER_CASES = [
    "In the beginning God created the heaven and the earth.",
    "Hello, world! (Yes.) 'tis; he's they'll we'd I'm you're we've -- \"quoted\" [brackets] {braces} <tags> "
    "a<|b |> <| x",
    "'S 'T 'Re 're 'LL ''' ' 's '",
    "In 1611, 3.14159 and 1234567890 verses: 23:1-6; 100,000 and 0.5%; x2 2x A1B2",
    "line1\n\nline2\n   indented\tTab\r\nwindows  double  spaces   \n\n\n end  ",
    "   leading spaces", "\n", " ", "  ", "\n\n\n", "trailing newline\n", " a  b   c    d\t\te\n \n",
    "Caf\u00e9 na\u00efve \u2014 \u201csmart quotes\u201d \u2018x\u2019 \u2026 \u65e5\u672c\u8a9e\u30c6\u30ad\u30b9\u30c8 "
    "\U0001F600 emoji \U0001F468\u200d\U0001F469\u200d\U0001F467, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, "
    "\u05e2\u05d1\u05e8\u05d9\u05ea, \u00bd \u00b2 \u0663 \u216b \u00a0nbsp\u00a0x \u3000ideo \u2028sep \ufeffbom "
    "\u0085nel \u200bzw",
    "<|user|>\nWho was Moses?<|end|>\n<|assistant|>\n",
    "<|bos|>text<|eos|><|system|><|end|><|unknown|>",
    "AND GOD SAID, LET THERE BE LIGHT: and there was light.",
    "Ge1:1 Jn3:16 Ps23 Rev22:21",
    "a\u0301 e\u0308 \u00e9 \u00f1 \u00df \ufb01 \u01c4",
    "tab\tsep\tvalues\n1\t2\t3\n",
    "!!!??? ... ;;; --- ___ *** ### @@@ $$$ %%% ^^^ &&& ~~~ ``` |||",
]


def verify_tokenizer(out: Path, bonfire: str) -> int:
    """Checks that encode() here gives the ids `bonfire tokenize` gives (BOS
    first), and that `bonfire detokenize` and decode() here give the text back,
    on heldout.txt, each of its chapters and TOKENIZER_CASES."""
    import tempfile
    tok = load_tokenizer(out)
    held = (out / "heldout.txt").read_text(encoding="utf-8")
    cases = [held] + held.split("\n\n") + TOKENIZER_CASES

    def run(*a):
        cmd = [bonfire, "--threads", "1", *a, "--model", str(out)]
        return json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)

    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "case.txt"
        for i, text in enumerate(cases):
            f.write_text(text, encoding="utf-8")
            want = [BOS] + tok.encode(text)
            got = run("tokenize", "--file", str(f))
            back = run("detokenize", "--tokens", ",".join(map(str, want[1:]))) if len(want) > 1 else ""
            if got != want or back != text or tok.decode(want[1:]) != text:
                bad += 1
                log(f"verify: case {i} {text[:60]!r}: ids {'match' if got == want else 'differ'}, "
                    f"bonfire decode {'matches' if back == text else 'differs'}")
    log(f"verify: {len(cases)} texts, {bad} mismatches ({len(tok.encode(held))} tokens in heldout.txt)")
    return 1 if bad else 0


# ----------------------------------------------------------------------------
# Files


def write_folder(out: Path, cfg: dict, tok: Tokenizer, model: Llama, heldout: str):
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": BOS, "eos_token_id": [EOS, END], "do_sample": True, "temperature": 0.8, "top_p": 0.95,
        "top_k": 50, "repetition_penalty": 1.1, "max_new_tokens": 256}, indent=2) + "\n")
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(tok), indent=1, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[BOS], "eos_token": SPECIALS[EOS], "pad_token": SPECIALS[EOS],
        "additional_special_tokens": SPECIALS[SYSTEM:],
        "add_bos_token": True, "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": cfg["max_position_embeddings"],
        "chat_template": CHAT_TEMPLATE}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    save_safetensors(out / "model.safetensors", model.hf_tensors())
    (out / "heldout.txt").write_text(heldout, encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "models" / "demo"))
    ap.add_argument("--eval-only", action="store_true", help="only re-run the evaluation of the saved folder")
    ap.add_argument("--verify-with", metavar="BONFIRE",
                    help="only check the saved tokenizer against this bonfire binary (tokenize/detokenize)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--minutes", type=float, default=35.0, help="training wall-clock budget (default 35)")
    ap.add_argument("--steps", type=int, default=0, help="training steps (default: as many as --minutes allows)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=688)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    out = Path(args.out)
    if args.verify_with:
        return verify_tokenizer(out, args.verify_with)
    if args.eval_only:
        evaluate(out, {})
        return 0

    torch.manual_seed(SEED)
    chapters = load_kjv()
    train_ch = [c for i, c in enumerate(chapters) if i % HOLDOUT_EVERY != HOLDOUT_AT]
    held_ch = [c for i, c in enumerate(chapters) if i % HELDOUT_EVERY == HOLDOUT_AT]
    heldout = chapters_text(held_ch)
    log(f"corpus: {len(chapters)} chapters; {len(train_ch)} train, {len(chapters) - len(train_ch)} held out, "
        f"heldout.txt {len(held_ch)} chapters ({len(heldout.encode())} bytes)")

    tok = train_bpe(chapters_text(train_ch), args.vocab)
    # encoding line by line must equal encoding the text at once (Batches relies on it)
    whole = tok.encode(heldout)
    parts = []
    for ci, ch in enumerate(held_ch):
        if ci:
            parts += tok.encode("\n")
        for line in chapter_lines(ch):
            parts += tok.encode(line)
    assert whole == parts, "line-wise encoding differs from whole-text encoding"

    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": args.vocab, "hidden_size": args.hidden, "intermediate_size": args.intermediate,
        "num_hidden_layers": args.layers, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": args.hidden // 8, "hidden_act": "silu", "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
        "tie_word_embeddings": True, "initializer_range": 0.02, "use_cache": True,
        "bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": EOS, "torch_dtype": "float16",
    }
    if len(tok.vocab) > args.vocab:
        raise SystemExit("train_demo: tokenizer larger than --vocab")
    model = Llama(cfg)
    model.init_weights()
    params = sum(p.numel() for p in model.parameters())
    log(f"model: {params} parameters")

    data = Batches(tok, train_ch, args.seq, SEED)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    budget = args.minutes * 60
    warm = 0.03
    t0 = time.time()
    step, tokens_seen, ema = 0, 0, None
    model.train()
    while True:
        elapsed = time.time() - t0
        prog = max(step / args.steps if args.steps else 0.0, elapsed / budget if not args.steps else 0.0)
        if prog >= 1.0:
            break
        lr = args.lr * (prog / warm if prog < warm else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (prog - warm) / (1 - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        x = data.next(args.batch)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x[:, 1:].numel()
        ema = float(loss) if ema is None else 0.98 * ema + 0.02 * float(loss)
        if step % 20 == 0 or step == 1:
            now = time.time()
            log(f"step {step} loss {float(loss):.4f} avg {ema:.4f} lr {lr:.2e} "
                f"{tokens_seen / (now - t0):.0f} tok/s elapsed {(now - t0) / 60:.1f} min progress {prog:.3f}")
    train_minutes = (time.time() - t0) / 60
    log(f"trained {step} steps, {tokens_seen} tokens in {train_minutes:.1f} min; final loss (avg) {ema:.4f}")
    model.eval()
    write_folder(out, cfg, tok, model, heldout)
    evaluate(out, {"train_minutes": round(train_minutes, 2), "train_loss": round(ema, 4), "train_steps": step,
                   "train_tokens": tokens_seen, "params": params})
    return 0


if __name__ == "__main__":
    sys.exit(main())
