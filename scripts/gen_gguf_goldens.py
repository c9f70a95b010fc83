#!/usr/bin/python3
"""Writes goldens/gguf/ from llama.cpp itself.

Needs scripts/fetch_llama_cpp.sh first (llama.cpp's prebuilt libggml-base.so
and its source, from the node-llama-cpp npm package, under refs/llama/).
CI only reads the goldens this writes:

  quant.json        every block type: input rows, the blocks llama.cpp's
                    ggml_quantize_chunk made of them (plus random blocks), and
                    the floats its to_float gives back, as exact f32 bits
  tiny_llama.gguf   a small GGUF v3 file: metadata of every value type, a
                    tensor of every readable type, q/k rows permuted by
                    llama.cpp's own LlamaModel.permute
  tiny_llama.json   what llama.cpp's gguf reader lists for that file, and the
                    FNV-1a hash of each tensor's floats under its HF name
  nested_v2.gguf    a GGUF v2 file with arrays of arrays (llama.cpp's reader
  nested_v2.json    refuses those; the expected values come from this writer)
  names.json        GGUF <-> HF tensor names per arch, from gguf-py's
                    TensorNameMap
"""
import ast
import base64
import ctypes
import glob
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFS = os.path.join(ROOT, "refs", "llama")
OUT = os.path.join(ROOT, "goldens", "gguf")
LLAMA_SRC = os.path.join(REFS, "llama.cpp")

# ggml type ids and our names for them.
TYPES = {
    "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7,
    "q2_k": 10, "q3_k": 11, "q4_k": 12, "q5_k": 13, "q6_k": 14,
    "iq4_nl": 20, "iq4_xs": 23, "mxfp4": 39,
}
INT_TYPES = {"i8": (24, np.int8), "i16": (25, np.int16), "i32": (26, np.int32)}
# Byte offsets of each block's f16 scale fields: random blocks get sane
# scales there (random bits would be NaN/Inf now and then).
SCALE_FIELDS = {
    "q8_0": [0], "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2],
    "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208],
    "iq4_nl": [0], "iq4_xs": [0], "mxfp4": [],
}


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def fnv1a64(data: bytes) -> str:
    h = 0xcbf29ce484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


# --- llama.cpp through ctypes ------------------------------------------------

class TypeTraits(ctypes.Structure):
    # ggml.h's struct ggml_type_traits in the release node-llama-cpp 3.21.1 ships
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


def load_ggml():
    libs = glob.glob(os.path.join(REFS, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64",
                                  "libggml-base.so"))
    if not libs:
        sys.exit("gen_gguf_goldens.py: run scripts/fetch_llama_cpp.sh first (no libggml-base.so under refs/llama)")
    lib = ctypes.CDLL(libs[0])
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, GgufInitParams]
    lib.gguf_free.argtypes = [ctypes.c_void_p]
    for fn, res in [("gguf_get_version", ctypes.c_uint32), ("gguf_get_alignment", ctypes.c_size_t),
                    ("gguf_get_data_offset", ctypes.c_size_t), ("gguf_get_n_kv", ctypes.c_int64),
                    ("gguf_get_n_tensors", ctypes.c_int64)]:
        getattr(lib, fn).restype = res
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    for fn, res in [("gguf_get_key", ctypes.c_char_p), ("gguf_get_kv_type", ctypes.c_int),
                    ("gguf_get_arr_type", ctypes.c_int), ("gguf_get_arr_n", ctypes.c_size_t),
                    ("gguf_get_tensor_name", ctypes.c_char_p), ("gguf_get_tensor_offset", ctypes.c_size_t),
                    ("gguf_get_tensor_type", ctypes.c_int), ("gguf_get_tensor_size", ctypes.c_size_t),
                    ("gguf_get_tensor_ne", ctypes.POINTER(ctypes.c_int64))]:
        getattr(lib, fn).restype = res
        getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_int64]
    return lib


LIB = None


def quantize(type_id, x):
    """llama.cpp's blocks for the rows of x (no importance matrix)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, n = x.shape
    out = np.zeros(rows * LIB.ggml_row_size(type_id, n), dtype=np.uint8)
    size = LIB.ggml_quantize_chunk(type_id, x.ctypes.data, out.ctypes.data, 0, rows, n, None)
    assert size == out.size, (type_id, size, out.size)
    return out


def to_float(type_id, blocks, count):
    traits = LIB.ggml_get_type_traits(type_id).contents
    assert traits.to_float, type_id
    y = np.zeros(count, dtype=np.float32)
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    TO_FLOAT(traits.to_float)(blocks.ctypes.data, y.ctypes.data, count)
    return y


def block_info(type_id):
    t = LIB.ggml_get_type_traits(type_id).contents
    return t.blck_size, t.type_size


# --- quant.json --------------------------------------------------------------

def test_rows(rng, n):
    rows = [
        rng.normal(0, 1, n),
        rng.normal(0, 0.02, n) + (rng.random(n) < 0.02) * rng.normal(0, 3, n),  # outliers
        rng.uniform(-100, 100, n),
        np.concatenate([np.zeros(n // 2), np.full(n - n // 2, 0.75)]),  # zero and constant blocks
        rng.normal(0, 1e-6, n),  # scales in f16's subnormal range
        rng.uniform(0, 1, n),    # one-signed rows exercise the mins
    ]
    return np.stack(rows).astype(np.float32)


def random_blocks(rng, name, type_id, rows, n):
    blck, size = block_info(type_id)
    raw = rng.integers(0, 256, rows * n // blck * size, dtype=np.uint8).reshape(-1, size)
    for off in SCALE_FIELDS.get(name, []):
        scales = rng.normal(0, 0.05, raw.shape[0]).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(-1, 2)
    if name in ("f16", "bf16"):
        vals = rng.normal(0, 2, rows * n).astype(np.float32)
        raw = (vals.astype(np.float16).view(np.uint8) if name == "f16"
               else (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8))
    return raw.reshape(-1)


def write_quant(rng):
    n = 256
    cases = []
    for name, tid in TYPES.items():
        x = test_rows(rng, n)
        blocks = quantize(tid, x)
        floats = to_float(tid, blocks, x.size)
        cases.append({"type": name, "ggml_type": tid, "n": n, "rows": x.shape[0], "source": "ggml_quantize_chunk",
                      "input": b64(x), "blocks": b64(blocks), "floats": b64(floats)})
        rb = random_blocks(rng, name, tid, 2, n)
        cases.append({"type": name, "ggml_type": tid, "n": n, "rows": 2, "source": "random_blocks",
                      "blocks": b64(rb), "floats": b64(to_float(tid, rb, 2 * n))})
    for name, (tid, dt) in INT_TYPES.items():
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, 2 * 64, dtype=np.int64, endpoint=True).astype(dt)
        v[:4] = [info.min, info.max, 0, -1]
        # ggml has no to_float for integers: the value itself is the reference.
        cases.append({"type": name, "ggml_type": tid, "n": 64, "rows": 2, "source": "numpy",
                      "blocks": b64(v), "floats": b64(v.astype(np.float32))})
    return {"cases": cases}


# --- a minimal GGUF writer ----------------------------------------------------

GGUF_TYPES = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "string": 8,
              "array": 9, "u64": 10, "i64": 11, "f64": 12}
PACK = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i", "f32": "<f", "bool": "<?",
        "u64": "<Q", "i64": "<q", "f64": "<d"}


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    """vtype is a scalar type name, or ("array", element vtype)."""
    if isinstance(vtype, tuple):
        et = vtype[1]
        head = struct.pack("<I", GGUF_TYPES["array"] if isinstance(et, tuple) else GGUF_TYPES[et])
        return head + struct.pack("<Q", len(value)) + b"".join(gguf_value(et, v) for v in value)
    if vtype == "string":
        return gguf_string(value)
    return struct.pack(PACK[vtype], value)


def gguf_bytes(version, kvs, tensors, alignment):
    """kvs: [(key, vtype, value)]; tensors: [(name, ggml type, ne list, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += gguf_string(key)
        out += struct.pack("<I", GGUF_TYPES["array"] if isinstance(vtype, tuple) else GGUF_TYPES[vtype])
        out += gguf_value(vtype, value)
    offset = 0
    offsets = []
    for name, tid, ne, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", tid, offset)
        offsets.append(offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    data_start = len(out)
    for (name, tid, ne, data), off in zip(tensors, offsets):
        out += b"\0" * (data_start + off - len(out))
        out += data
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    return bytes(out), data_start


def json_value(vtype, value):
    if vtype == "f32":
        return float(np.float32(value))
    if isinstance(vtype, tuple):
        return [json_value(vtype[1], v) for v in value]
    return value


# --- llama.cpp's own rope permutation -----------------------------------------

def llama_permute():
    """LlamaModel.permute, lifted from llama.cpp's converter source (it only
    uses reshape/swapaxes, which numpy arrays have too)."""
    path = os.path.join(LLAMA_SRC, "conversion", "llama.py")
    if not os.path.exists(path):
        sys.exit("gen_gguf_goldens.py: %s missing; run scripts/fetch_llama_cpp.sh" % path)
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "LlamaModel":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "permute":
                    fn.decorator_list = []
                    fn.args.args[0].annotation = fn.args.args[1].annotation = fn.args.args[2].annotation = None
                    fn.returns = None
                    scope = {}
                    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
                    return scope["permute"]
    sys.exit("gen_gguf_goldens.py: LlamaModel.permute not found in " + path)


# --- tiny_llama.gguf -----------------------------------------------------------

def tiny_llama(rng):
    permute = llama_permute()
    E, H, NH, NKV, HD, FF, V = 256, 2, 2, 1, 32, 32, 16  # embd, -, heads, kv heads, head dim, ffn, vocab
    kvs = [
        ("general.architecture", "string", "llama"),
        ("general.name", "string", "bonfire tiny llama"),
        ("general.alignment", "u32", 64),
        ("llama.block_count", "u32", 2),
        ("llama.context_length", "u32", 128),
        ("llama.embedding_length", "u32", E),
        ("llama.feed_forward_length", "u32", FF),
        ("llama.attention.head_count", "u32", NH),
        ("llama.attention.head_count_kv", "u32", NKV),
        ("llama.attention.key_length", "u32", HD),
        ("llama.attention.layer_norm_rms_eps", "f32", 1e-5),
        ("llama.expert_count", "u32", 4),
        ("llama.expert_used_count", "u32", 2),
        ("test.u8", "u8", 200), ("test.i8", "i8", -100), ("test.u16", "u16", 60000), ("test.i16", "i16", -30000),
        ("test.u32", "u32", 4000000000), ("test.i32", "i32", -2000000000), ("test.f32", "f32", 0.1),
        ("test.bool_true", "bool", True), ("test.bool_false", "bool", False),
        ("test.string", "string", "h\u00e9llo \u2713"), ("test.empty_string", "string", ""),
        ("test.u64", "u64", 2**64 - 1), ("test.i64", "i64", -2**63), ("test.f64", "f64", 1.0 / 3.0),
        ("test.array_u8", ("array", "u8"), [0, 1, 255]),
        ("test.array_i16", ("array", "i16"), [-32768, 0, 32767]),
        ("test.array_f32", ("array", "f32"), [0.5, -1.25, 3.4e38]),
        ("test.array_bool", ("array", "bool"), [True, False, True]),
        ("test.array_string", ("array", "string"), ["a", "", "\u00fc\u00df"]),
        ("test.array_u64", ("array", "u64"), [2**64 - 1, 0]),
        ("test.array_i64", ("array", "i64"), [-2**63, 2**63 - 1]),
        ("test.array_f64", ("array", "f64"), [1e300, -2.5]),
        ("test.array_empty", ("array", "i32"), []),
        ("tokenizer.ggml.model", "string", "llama"),
        ("tokenizer.ggml.tokens", ("array", "string"), ["<unk>", "<s>", "</s>"] + ["t%d" % i for i in range(V - 3)]),
        ("tokenizer.ggml.scores", ("array", "f32"), [float(-i) for i in range(V)]),
        ("tokenizer.ggml.token_type", ("array", "i32"), [2, 3, 3] + [1] * (V - 3)),
    ]
    tensors = []   # (gguf name, type name, row-major shape, file data)
    expect = {}    # hf name -> (dtype, shape, floats)

    def add(name, tname, shape, hf=None, perm_heads=None, values=None):
        x = values if values is not None else rng.normal(0, 0.5, shape).astype(np.float32)
        if tname in INT_TYPES:
            data = x.astype(INT_TYPES[tname][1])
            tensors.append((name, INT_TYPES[tname][0], shape, data.tobytes()))
            expect[hf or name] = (tname, list(shape), data.astype(np.float32).reshape(-1))
            return
        tid = 0 if tname == "f32" else TYPES[tname]
        rows = x.reshape(-1, shape[-1])
        stored = permute(rows if len(shape) > 1 else x, perm_heads, perm_heads) if perm_heads else rows
        stored = np.asarray(stored, dtype=np.float32).reshape(-1, shape[-1])
        if tid == 0:
            data, floats = stored.tobytes(), rows.reshape(-1)
        else:
            data = quantize(tid, stored).tobytes()
            # Row-wise formats: llama.cpp's floats for the HF row order are
            # the blocks of the unpermuted rows.
            floats = to_float(tid, quantize(tid, rows), rows.size)
        tensors.append((name, tid, shape, data))
        if hf is not None and hf.find("{e}") >= 0:
            per = floats.reshape(shape[0], -1)
            for e in range(shape[0]):
                expect[hf.replace("{e}", str(e))] = (tname, list(shape[1:]), per[e])
        else:
            expect[hf or name] = (tname, list(shape), floats)

    L = "model.layers.%d."
    add("token_embd.weight", "q4_k", (V, E), "model.embed_tokens.weight")
    add("output_norm.weight", "f32", (E,), "model.norm.weight")
    add("output.weight", "q6_k", (V, E), "lm_head.weight")
    add("rope_freqs.weight", "f32", (HD // 2,))
    add("blk.0.attn_norm.weight", "f32", (E,), L % 0 + "input_layernorm.weight")
    add("blk.0.attn_q.weight", "q5_k", (NH * HD, E), L % 0 + "self_attn.q_proj.weight", perm_heads=NH)
    add("blk.0.attn_q.bias", "f32", (NH * HD,), L % 0 + "self_attn.q_proj.bias", perm_heads=NH)
    add("blk.0.attn_k.weight", "q4_k", (NKV * HD, E), L % 0 + "self_attn.k_proj.weight", perm_heads=NKV)
    add("blk.0.attn_v.weight", "q3_k", (NKV * HD, E), L % 0 + "self_attn.v_proj.weight")
    add("blk.0.attn_output.weight", "q5_1", (E, NH * HD), L % 0 + "self_attn.o_proj.weight")
    add("blk.0.ffn_norm.weight", "f32", (E,), L % 0 + "post_attention_layernorm.weight")
    add("blk.0.ffn_gate.weight", "q2_k", (FF, E), L % 0 + "mlp.gate_proj.weight")
    add("blk.0.ffn_up.weight", "iq4_xs", (FF, E), L % 0 + "mlp.up_proj.weight")
    add("blk.0.ffn_down.weight", "q5_0", (E, FF), L % 0 + "mlp.down_proj.weight")
    add("blk.1.attn_norm.weight", "bf16", (E,), L % 1 + "input_layernorm.weight")
    add("blk.1.attn_q.weight", "q8_0", (NH * HD, E), L % 1 + "self_attn.q_proj.weight", perm_heads=NH)
    add("blk.1.attn_k.weight", "q5_0", (NKV * HD, E), L % 1 + "self_attn.k_proj.weight", perm_heads=NKV)
    add("blk.1.attn_v.weight", "q4_0", (NKV * HD, E), L % 1 + "self_attn.v_proj.weight")
    add("blk.1.attn_output.weight", "iq4_nl", (E, NH * HD), L % 1 + "self_attn.o_proj.weight")
    add("blk.1.ffn_norm.weight", "f16", (E,), L % 1 + "post_attention_layernorm.weight")
    add("blk.1.ffn_gate_inp.weight", "f32", (4, E), L % 1 + "block_sparse_moe.gate.weight")
    add("blk.1.ffn_gate_exps.weight", "q4_1", (4, FF, E), L % 1 + "block_sparse_moe.experts.{e}.w1.weight")
    add("blk.1.ffn_up_exps.weight", "mxfp4", (4, FF, E), L % 1 + "block_sparse_moe.experts.{e}.w3.weight")
    add("blk.1.ffn_down_exps.weight", "q4_0", (4, E, FF), L % 1 + "block_sparse_moe.experts.{e}.w2.weight")
    add("test.ids_i32", "i32", (2, 8), values=rng.integers(-2**31, 2**31 - 1, (2, 8)))
    add("test.mask_i8", "i8", (3, 4), values=rng.integers(-128, 127, (3, 4)))
    add("test.pos_i16", "i16", (5,), values=rng.integers(-32768, 32767, (5,)))

    ggml_tensors = [(n, tid, list(reversed(shape)), data) for n, tid, shape, data in tensors]
    blob, data_start = gguf_bytes(3, kvs, ggml_tensors, 64)
    path = os.path.join(OUT, "tiny_llama.gguf")
    with open(path, "wb") as f:
        f.write(blob)

    listing = llama_cpp_listing(path)
    assert listing["data_offset"] == data_start, (listing["data_offset"], data_start)
    assert [t["name"] for t in listing["tensors"]] == [t[0] for t in tensors]
    metadata = {k: {"type": vt if isinstance(vt, str) else "array", "value": json_value(vt, v)} for k, vt, v in kvs}
    for k, vt, v in kvs:
        if isinstance(vt, tuple):
            metadata[k]["element_type"] = vt[1]
    weights = {hf: {"dtype": d, "shape": s, "fnv1a64": fnv1a64(np.asarray(f, np.float32).tobytes()),
                    "first": [float(v) for v in f[:4]]}
               for hf, (d, s, f) in expect.items()}
    return {"file": "tiny_llama.gguf", "size": len(blob), "version": 3, "alignment": 64,
            "llama_cpp": listing, "metadata": metadata,
            "tensors": [{"name": n, "ggml_type": tid, "shape": list(shape)} for n, tid, shape, _ in tensors],
            "hf_weights": weights}


def llama_cpp_listing(path):
    ctx = LIB.gguf_init_from_file(path.encode(), GgufInitParams(True, None))
    assert ctx, "llama.cpp refused " + path
    try:
        kvs = []
        for i in range(LIB.gguf_get_n_kv(ctx)):
            kv = {"key": LIB.gguf_get_key(ctx, i).decode(), "type": LIB.gguf_get_kv_type(ctx, i)}
            if kv["type"] == GGUF_TYPES["array"]:
                kv["element_type"] = LIB.gguf_get_arr_type(ctx, i)
                kv["n"] = LIB.gguf_get_arr_n(ctx, i)
            kvs.append(kv)
        tensors = []
        for i in range(LIB.gguf_get_n_tensors(ctx)):
            ne = LIB.gguf_get_tensor_ne(ctx, i)
            tensors.append({"name": LIB.gguf_get_tensor_name(ctx, i).decode(), "type": LIB.gguf_get_tensor_type(ctx, i),
                            "ne": [ne[d] for d in range(4)], "offset": LIB.gguf_get_tensor_offset(ctx, i),
                            "size": LIB.gguf_get_tensor_size(ctx, i)})
        return {"version": LIB.gguf_get_version(ctx), "alignment": LIB.gguf_get_alignment(ctx),
                "data_offset": LIB.gguf_get_data_offset(ctx), "kv": kvs, "tensors": tensors}
    finally:
        LIB.gguf_free(ctx)


def nested_v2(rng):
    kvs = [
        ("general.architecture", "string", "test"),
        ("test.nested", ("array", ("array", "i32")), [[1, 2], [], [3]]),
        ("test.nested_strings", ("array", ("array", "string")), [["x", "yz"], ["\u00e9"]]),
        ("test.deep", ("array", ("array", ("array", "u8"))), [[[1], [2, 3]], []]),
    ]
    x = rng.normal(0, 1, (2, 32)).astype(np.float32)
    blob, data_start = gguf_bytes(2, kvs, [("w", 0, [32, 2], x.tobytes())], 32)
    with open(os.path.join(OUT, "nested_v2.gguf"), "wb") as f:
        f.write(blob)
    return {"file": "nested_v2.gguf", "version": 2, "data_offset": data_start,
            "metadata": {k: json_value(vt, v) for k, vt, v in kvs}, "w": b64(x)}


# --- names.json ---------------------------------------------------------------

# transformers' names for each arch; "{L}" is the layer, "{e}" the expert.
DECODER = ["model.embed_tokens", "model.norm", "lm_head", "model.layers.{L}.input_layernorm",
           "model.layers.{L}.self_attn.q_proj", "model.layers.{L}.self_attn.k_proj",
           "model.layers.{L}.self_attn.v_proj", "model.layers.{L}.self_attn.o_proj",
           "model.layers.{L}.post_attention_layernorm", "model.layers.{L}.mlp.gate_proj",
           "model.layers.{L}.mlp.up_proj", "model.layers.{L}.mlp.down_proj"]
QK_NORM = ["model.layers.{L}.self_attn.q_norm", "model.layers.{L}.self_attn.k_norm"]
EXPERTS = ["model.layers.{L}.mlp.gate", "model.layers.{L}.mlp.experts.{e}.gate_proj",
           "model.layers.{L}.mlp.experts.{e}.up_proj", "model.layers.{L}.mlp.experts.{e}.down_proj"]
ATTN = ["model.layers.{L}.self_attn.%s_proj" % p for p in "qkvo"]
GEMMA2 = ["model.embed_tokens", "model.norm", "model.layers.{L}.input_layernorm", *ATTN,
          "model.layers.{L}.post_attention_layernorm", "model.layers.{L}.pre_feedforward_layernorm",
          "model.layers.{L}.post_feedforward_layernorm", "model.layers.{L}.mlp.gate_proj",
          "model.layers.{L}.mlp.up_proj", "model.layers.{L}.mlp.down_proj"]
NEOX_MLP = ["mlp.dense_h_to_4h", "mlp.dense_4h_to_h"]
ARCHS = {
    "llama": DECODER + ["model.layers.{L}.block_sparse_moe.gate"] +
             ["model.layers.{L}.block_sparse_moe.experts.{e}.%s" % w for w in ("w1", "w2", "w3")],
    "granite": DECODER,
    "qwen2": DECODER,
    "qwen3": DECODER + QK_NORM,
    "qwen2moe": DECODER[:9] + EXPERTS + ["model.layers.{L}.mlp.shared_expert_gate"] +
                ["model.layers.{L}.mlp.shared_expert.%s_proj" % p for p in ("gate", "up", "down")],
    "qwen3moe": DECODER[:9] + QK_NORM + EXPERTS,
    "olmoe": DECODER[:9] + QK_NORM + EXPERTS,
    "gemma": DECODER[:2] + DECODER[3:],
    "gemma2": GEMMA2,
    "gemma3": GEMMA2 + QK_NORM + ["lm_head"],
    "phi3": ["model.embed_tokens", "model.norm", "lm_head", "model.layers.{L}.input_layernorm",
             "model.layers.{L}.self_attn.qkv_proj", "model.layers.{L}.self_attn.o_proj",
             "model.layers.{L}.post_attention_layernorm", "model.layers.{L}.mlp.gate_up_proj",
             "model.layers.{L}.mlp.down_proj"],
    "gpt2": ["transformer.wte", "transformer.wpe", "transformer.ln_f", "lm_head"] +
            ["transformer.h.{L}." + s for s in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj")],
    "gptneox": ["gpt_neox.embed_in", "gpt_neox.final_layer_norm", "embed_out"] +
               ["gpt_neox.layers.{L}." + s for s in ("input_layernorm", "attention.query_key_value",
                                                      "attention.dense", "post_attention_layernorm", *NEOX_MLP)],
    "falcon": ["transformer.word_embeddings", "transformer.ln_f", "lm_head"] +
              ["transformer.h.{L}." + s for s in ("input_layernorm", "ln_attn", "self_attention.query_key_value",
                                                   "self_attention.dense", *NEOX_MLP)],
    # bloom checkpoints are saved from BloomModel: no "transformer." prefix.
    "bloom": ["word_embeddings", "word_embeddings_layernorm", "ln_f", "lm_head"] +
             ["h.{L}." + s for s in ("input_layernorm", "self_attention.query_key_value",
                                     "self_attention.dense", "post_attention_layernorm", *NEOX_MLP)],
    "mpt": ["transformer.wte", "transformer.wpe", "transformer.norm_f", "lm_head"] +
           ["transformer.blocks.{L}." + s for s in ("norm_1", "attn.Wqkv", "attn.q_ln", "attn.k_ln", "attn.out_proj",
                                                     "norm_2", "ffn.up_proj", "ffn.down_proj")],
    "deepseek2": DECODER + EXPERTS[:1] + EXPERTS[1:] +
                 ["model.layers.{L}.self_attn." + s for s in ("q_a_proj", "q_a_layernorm", "q_b_proj",
                                                               "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")] +
                 ["model.layers.{L}.mlp.shared_experts.%s_proj" % p for p in ("gate", "up", "down")],
    "lfm2": ["model.embed_tokens", "model.embedding_norm", "lm_head"] +
            ["model.layers.{L}." + s for s in ("operator_norm", "ffn_norm", "self_attn.q_layernorm",
                                                "self_attn.k_layernorm", "self_attn.out_proj", "conv.conv",
                                                "conv.in_proj", "conv.out_proj", "feed_forward.w1",
                                                "feed_forward.w2", "feed_forward.w3", *[
                                                    "self_attn.%s_proj" % p for p in "qkv"])],
}
# Names whose HF form carries its own suffix.
SPECIAL = {"deepseek2": [("model.layers.{L}.mlp.gate.e_score_correction_bias", "blk.{L}.exp_probs_b.bias")]}


def write_names():
    sys.path.insert(0, os.path.join(LLAMA_SRC, "gguf-py"))
    import gguf
    from gguf.tensor_mapping import TensorNameMap
    layer = 3
    out = {}
    for arch_name, hf_names in ARCHS.items():
        arch = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch_name)
        tm = TensorNameMap(arch, layer + 1)
        pairs, covered = [], set()
        for tmpl in hf_names:
            for suffix in (".weight", ".bias"):
                hf = tmpl.replace("{L}", str(layer)) + suffix
                g = tm.get_name(hf.replace(".{e}", ""), try_suffixes=(".weight", ".bias"))
                assert g is not None, (arch_name, hf)
                pairs.append([g, hf])
                covered.add(g.rsplit(".", 1)[0])
        for hf, g in SPECIAL.get(arch_name, []):
            hf, g = hf.replace("{L}", str(layer)), g.replace("{L}", str(layer))
            assert tm.get_name(hf[:-len("_bias")]) + ".bias" == g, (hf, g)
            pairs.append([g, hf])
            covered.add(g.rsplit(".", 1)[0])
        unmapped = sorted({gguf.TENSOR_NAMES[t].format(bid=layer) for t in gguf.MODEL_TENSORS[arch]} - covered)
        out[arch_name] = {"pairs": pairs, "unmapped": [u + ".weight" for u in unmapped]}
    return out


def main():
    global LIB
    LIB = load_ggml()
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240613)
    meta = {"generator": "scripts/gen_gguf_goldens.py",
            "reference": "llama.cpp from node-llama-cpp@3.21.1 (libggml-base.so, gguf-py, conversion/llama.py)"}
    for name, data in [("quant.json", write_quant(rng)), ("tiny_llama.json", tiny_llama(rng)),
                       ("nested_v2.json", nested_v2(rng)), ("names.json", write_names())]:
        data = {**meta, **data}
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(data, f, indent=1, ensure_ascii=True)
            f.write("\n")
    for f in sorted(os.listdir(OUT)):
        print("%-18s %8d bytes" % (f, os.path.getsize(os.path.join(OUT, f))))


if __name__ == "__main__":
    main()
