#!/usr/bin/python3
"""Golden values for bonfire's op tests and the Llama-layer test.

Run from anywhere (paths are relative to this file's repository):

    /usr/bin/python3 scripts/gen_goldens.py

Needs numpy and PyTorch (Debian: python3-numpy, python3-torch; written against
torch 1.13). No network. Deterministic: every op draws its data from its own
numpy Generator seeded with crc32(op name), torch is seeded and single-threaded,
so re-running rewrites byte-identical files.

Writes
  goldens/ops/<op>.json        one file per op of spec/ops-v3.json (format: see
                               tests/ops_golden_test.cpp and docs/OPS.md)
  goldens/layer/llama_layer.json  one Llama decoder layer, prefill + 3 decode steps
  goldens/rng.json             Philox4x64-10 first outputs, to check the C++ RNG

Semantics follow docs/OPS.md. Inputs are f32 values written with the shortest
decimal that reads back as the same f32; expected values are computed in float64
(torch) from those f32 inputs and written the same way. Packed weights are
quantized here in numpy (GGUF block layout) and the expected values are computed
from the DEQUANTIZED weights, so a golden tests the packed read, not the
quantization error.

RoPE frequencies follow Hugging Face transformers' src/transformers/modeling_rope_utils.py,
v5 line (__version__ "5.0.1.dev0"), read as mirrored in
github.com/zucchini-nlp/transformers @ 26892c16b782513fdf938920653228ef63a19d7d
(_compute_default/linear/dynamic_ntk/yarn/longrope/llama3_parameters and
dynamic_rope_update), cross-checked against huggingface/transformers @ ef46806
(4.4x) for default/linear/dynamic/llama3. Where HF reads config.max_position_embeddings
the op reads scaling["max_position_embeddings"]. inv_freq and the angles are
computed in float32 exactly as transformers does; cos/sin and the rotation in float64.
"""

import base64
import json
import math
import os
import zlib

import numpy as np
import torch

torch.manual_seed(0)
np.random.seed(0)
torch.set_num_threads(1)
torch.set_default_dtype(torch.float32)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = json.load(open(os.path.join(ROOT, "spec", "ops-v3.json")))
OPS = {o["op"]: o for o in MANIFEST["ops"]}
F32 = np.float32
F64 = torch.float64

# ---------------------------------------------------------------- formatting


def num(v):
    """An f32 as JSON: shortest decimal that reads back as the same f32."""
    v = F32(v)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    x = float(str(v))
    assert F32(x) == v or (v == 0 and x == 0), (v, x)
    return x


def tj(arr):
    """Tensor to wire JSON."""
    if isinstance(arr, torch.Tensor):
        arr = arr.detach().cpu().numpy()
    a = np.asarray(arr, dtype=np.float64).astype(F32)
    shape = list(a.shape) if a.ndim > 0 else [1]
    return {"shape": shape, "data": [num(v) for v in a.ravel()]}


def npf(t):
    return t.detach().cpu().numpy()


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def rn(R, shape, scale=1.0, dec=3):
    """Random f32 with few decimals (compact JSON)."""
    return np.round(R.standard_normal(shape) * scale, dec).astype(F32)


def t64(a):
    return torch.tensor(np.asarray(a, dtype=F32), dtype=torch.float32).to(F64)


# ---------------------------------------------------------------- packing (GGUF layouts)


class Packed:
    def __init__(self, dtype, shape, raw, deq):
        self.dtype, self.shape, self.raw, self.deq = dtype, list(shape), raw, deq.astype(F32)

    def json(self):
        return {"dtype": self.dtype, "shape": self.shape, "b64": base64.b64encode(self.raw).decode()}


def pack(a, dtype):
    a = np.asarray(a, dtype=F32)
    if dtype == "f16":
        h = a.astype("<f2")
        return Packed(dtype, a.shape, h.tobytes(), h.astype(F32))
    if dtype == "bf16":
        u = a.view(np.uint32).astype(np.uint64)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even, as ggml
        deq = (r.astype(np.uint32) << 16).view(F32)
        return Packed(dtype, a.shape, r.tobytes(), deq)
    assert a.shape[-1] % 32 == 0, "q8_0/q4_0 rows must be a multiple of 32"
    blocks = a.reshape(-1, 32)
    nb = blocks.shape[0]
    if dtype == "q8_0":
        amax = np.abs(blocks).max(axis=1)
        d = (amax / F32(127)).astype(F32)
        with np.errstate(divide="ignore"):
            idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
        x0 = (blocks * idv[:, None]).astype(F32)
        q = (np.sign(x0.astype(np.float64)) * np.floor(np.abs(x0.astype(np.float64)) + 0.5)).astype(np.int8)  # roundf
        d16 = d.astype("<f2")
        out = np.zeros((nb, 34), np.uint8)
        out[:, 0:2] = d16.view(np.uint8).reshape(nb, 2)
        out[:, 2:] = q.view(np.uint8)
        deq = d16.astype(F32)[:, None] * q.astype(F32)
        return Packed(dtype, a.shape, out.tobytes(), deq.reshape(a.shape))
    if dtype == "q4_0":
        idx = np.argmax(np.abs(blocks), axis=1)  # first index of the largest |v|, as ggml's strict '<' scan
        mx = blocks[np.arange(nb), idx]
        d = (mx / F32(-8)).astype(F32)
        with np.errstate(divide="ignore"):
            idv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
        x0 = (blocks * idv[:, None]).astype(F32)
        xi = np.trunc((x0 + F32(8.5)).astype(F32)).astype(np.int64)  # (int8_t) cast truncates toward zero
        xi = np.minimum(15, xi)
        assert xi.min() >= 0
        qs = (xi[:, :16] | (xi[:, 16:] << 4)).astype(np.uint8)
        d16 = d.astype("<f2")
        out = np.zeros((nb, 18), np.uint8)
        out[:, 0:2] = d16.view(np.uint8).reshape(nb, 2)
        out[:, 2:] = qs
        deq = d16.astype(F32)[:, None] * (xi - 8).astype(F32)
        return Packed(dtype, a.shape, out.tobytes(), deq.reshape(a.shape))
    raise ValueError(dtype)


# ---------------------------------------------------------------- graph / case helpers

FEATURE_PARAMS = {
    "attention": {"alibi": "attention.alibi", "alibiMax": "attention.alibi", "alibiSlopes": "attention.alibi",
                  "scale": "attention.scale", "softcap": "attention.softcap", "window": "attention.window"},
    "layernorm": {"eps": "layernorm.eps"},
    "rmsnorm": {"groupSize": "rmsnorm.groupSize", "weightOffset": "rmsnorm.weightOffset"},
    "rope": {"interleaved": "rope.interleaved", "rotaryDim": "rope.rotaryDim", "scaling": "rope.scaling",
             "invFreq": "rope.scaling", "attentionFactor": "rope.scaling"},
}


def node(id_, op, ins, **params):
    return {"id": id_, "op": op, "in": list(ins), "params": params}


def features(nodes):
    fs = set()
    for n in nodes:
        for p in n["params"]:
            f = FEATURE_PARAMS.get(n["op"], {}).get(p)
            if f:
                fs.add(f)
        if n["op"] == "attention" and len(n["in"]) == 4:
            fs.add("attention.bias")
        if n["op"] == "sample" and len(n["in"]) == 2:
            fs.add("sample.penalty")
    return sorted(fs)


def validate(nodes):
    for n in nodes:
        spec = OPS[n["op"]]
        assert spec["minInputs"] <= len(n["in"]) <= spec["maxInputs"], (n["id"], len(n["in"]))
        for p in n["params"]:
            assert p in spec["params"], (n["op"], p)
        for p, d in spec["params"].items():
            if not d["type"].endswith("?"):
                assert p in n["params"], (n["op"], "missing", p)


def tol(atol, rtol):
    return {"atol": atol, "rtol": rtol}


EXACT = tol(0.0, 0.0)
ELEM = tol(1e-6, 1e-5)
NORM = tol(1e-5, 1e-5)
MATMUL = tol(1e-4, 1e-4)
ATTN = tol(5e-5, 1e-4)
MOE = tol(1e-4, 1e-4)
REDUCE = tol(1e-5, 1e-6)


def mk(name, nodes, inputs, expected, tl, weights=None, packed=None, session=None, expected_session=None,
       bind=None, retain=None):
    validate(nodes)
    g = {"inputs": {k: tj(v) for k, v in inputs.items()}}
    if weights:
        g["weights"] = {k: tj(v) for k, v in weights.items()}
    g["nodes"] = nodes
    g["outputs"] = list(expected.keys())
    if bind is not None:
        g["bind"] = bind
    if session is not None or expected_session is not None or retain is not None:
        g["session"] = "t"
    if retain is not None:
        g["retain"] = retain
    c = {"name": name, "tol": tl, "features": features(nodes), "graph": g}
    if packed:
        c["packed"] = {k: p.json() for k, p in packed.items()}
    if session:
        c["session"] = {k: tj(v) for k, v in session.items()}
    c["expected"] = {k: tj(v) for k, v in expected.items()}
    if expected_session:
        c["expectedSession"] = {k: tj(v) for k, v in expected_session.items()}
    return c


def unary_case(name, op, x, y, tl=ELEM, **params):
    return mk(name, [node("y", op, ["x"], **params)], {"x": x}, {"y": y}, tl)


# ---------------------------------------------------------------- elementwise ops


def gen_binary(op):
    R = rng_for(op)
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
    cases = []

    def c(name, a, b):
        y = f(t64(a), t64(b))
        cases.append(mk(name, [node("y", op, ["a", "b"])], {"a": a, "b": b}, {"y": y}, ELEM))

    c(f"{op}_same_shape", rn(R, (3, 5)), rn(R, (3, 5)))
    c(f"{op}_same_shape_3d", rn(R, (2, 3, 4)), rn(R, (2, 3, 4)))
    c(f"{op}_row_vector", rn(R, (4, 6)), rn(R, (6,)))
    c(f"{op}_row_vector_1xC_3d", rn(R, (2, 3, 5)), rn(R, (1, 5)))
    c(f"{op}_scalar", rn(R, (3, 4)), rn(R, (1,)))
    if op == "add":
        inf, nan = np.inf, np.nan
        a = np.array([[nan, 1.0, inf, -inf], [inf, -inf, 2.0, 0.0]], F32)
        b = np.array([[1.0, nan, 1.0, 1.0], [-inf, -inf, inf, -0.0]], F32)
        c("add_nan_inf", a, b)
    return cases


def gen_scale():
    R = rng_for("scale")
    cases = []
    for name, x, fct in [("scale_basic", rn(R, (3, 5)), 2.5), ("scale_negative_3d", rn(R, (2, 2, 3)), -0.125),
                         ("scale_zero", rn(R, (4,)), 0.0)]:
        cases.append(unary_case(name, "scale", x, t64(x) * fct, factor=fct))
    return cases


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


UNARY = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": lambda x: x * torch.sigmoid(x),
    "tanh": torch.tanh,
    "gelu": gelu_tanh,
    "gelu_exact": gelu_erf,
    "gelu_quick": lambda x: x * torch.sigmoid(1.702 * x),
}


def gen_unary(op):
    R = rng_for(op)
    f = UNARY[op]
    cases = []
    x = rn(R, (4, 8), 2.0)
    cases.append(unary_case(f"{op}_basic", op, x, f(t64(x))))
    ramp = np.array([-30.0, -12.0, -6.0, -3.0, -1.0, -0.5, -0.001, 0.0, 0.001, 0.5, 1.0, 3.0, 6.0, 12.0, 30.0,
                     80.0], F32)
    cases.append(unary_case(f"{op}_range", op, ramp, f(t64(ramp))))
    x3 = rn(R, (2, 3, 4))
    cases.append(unary_case(f"{op}_3d", op, x3, f(t64(x3))))
    if op == "relu":
        a = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, -1.5], F32)
        y = torch.relu(torch.tensor(a)).to(F64)  # NaN stays NaN, as IEEE / torch
        cases.append(unary_case("relu_nan_inf", "relu", a, y))
    return cases


def gen_softcap():
    R = rng_for("softcap")
    cases = []
    x = rn(R, (3, 6), 10.0)
    cases.append(unary_case("softcap_30", "softcap", x, 30.0 * torch.tanh(t64(x) / 30.0), cap=30.0))
    x = np.array([-1000.0, -50.0, -5.0, -1.0, 0.0, 0.5, 5.0, 50.0, 1000.0], F32)
    cases.append(unary_case("softcap_5_large", "softcap", x, 5.0 * torch.tanh(t64(x) / 5.0), cap=5.0))
    return cases


def gen_gated(op):
    R = rng_for(op)
    act = (lambda g: g * torch.sigmoid(g)) if op == "swiglu" else gelu_tanh
    cases = []
    for name, shape in [(f"{op}_2d", (3, 8)), (f"{op}_3d", (2, 2, 5))]:
        g, u = rn(R, shape, 2.0), rn(R, shape)
        cases.append(mk(name, [node("y", op, ["gate", "up"])], {"gate": g, "up": u},
                        {"y": act(t64(g)) * t64(u)}, ELEM))
    return cases


def gen_softmax():
    R = rng_for("softmax")
    cases = []

    def c(name, x):
        cases.append(unary_case(name, "softmax", x, torch.softmax(t64(x), dim=-1), tl=tol(1e-6, 1e-5)))

    c("softmax_basic", rn(R, (3, 7), 2.0))
    c("softmax_large_logits", np.array([[1000.0, 999.0, 998.0, -1000.0, 0.0],
                                         [-1000.0, -1001.0, -999.0, -1000.0, -1000.5],
                                         [1e4, 1e4, -1e4, 0.0, 1e4]], F32))
    c("softmax_3d", rn(R, (2, 3, 4)))
    c("softmax_neg_inf_entries", np.array([[1.0, -np.inf, 2.0, -np.inf], [-np.inf, -np.inf, 0.5, 0.25]], F32))
    c("softmax_vector", rn(R, (9,)))
    return cases


# ---------------------------------------------------------------- norms


def layernorm_ref(x, g, b, eps):
    x = t64(x)
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * t64(g) + t64(b)


def gen_layernorm():
    R = rng_for("layernorm")
    cases = []
    x, g, b = rn(R, (4, 16), 2.0) + F32(0.5), rn(R, (16,), 0.2) + F32(1), rn(R, (16,), 0.2)
    cases.append(mk("layernorm_default_eps", [node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x, "gamma": g, "beta": b}, {"y": layernorm_ref(x, g, b, 1e-5)}, NORM))
    x = rn(R, (3, 16), 1e-3, dec=7)  # tiny variance so eps matters
    cases.append(mk("layernorm_eps_1e-12", [node("y", "layernorm", ["x", "gamma", "beta"], eps=1e-12)],
                    {"x": x, "gamma": g, "beta": b}, {"y": layernorm_ref(x, g, b, 1e-12)}, NORM))
    x3, g8, b8 = rn(R, (2, 3, 8)), rn(R, (8,), 0.2) + F32(1), rn(R, (8,), 0.2)
    cases.append(mk("layernorm_3d", [node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x3, "gamma": g8, "beta": b8}, {"y": layernorm_ref(x3, g8, b8, 1e-5)}, NORM))
    x = rn(R, (3, 8))
    cases.append(mk("layernorm_zeros_beta",
                    [node("beta", "zeros", [], shape=[8]), node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x, "gamma": g8}, {"y": layernorm_ref(x, g8, np.zeros(8, F32), 1e-5)}, NORM))
    return cases


def rmsnorm_ref(x, g, eps=1e-6, offset=0.0, group=None):
    x = t64(x)
    shp = x.shape
    if group:
        x = x.reshape(*shp[:-1], shp[-1] // group, group)
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (t64(g) + offset)
    return y.reshape(shp)


def gen_rmsnorm():
    R = rng_for("rmsnorm")
    cases = []
    x, g = rn(R, (4, 16), 2.0), rn(R, (16,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_default_eps", [node("y", "rmsnorm", ["x", "gamma"])], {"x": x, "gamma": g},
                    {"y": rmsnorm_ref(x, g)}, NORM))
    xs = rn(R, (3, 16), 1e-3, dec=7)
    cases.append(mk("rmsnorm_eps_1e-5_small_x", [node("y", "rmsnorm", ["x", "gamma"], eps=1e-5)],
                    {"x": xs, "gamma": g}, {"y": rmsnorm_ref(xs, g, 1e-5)}, NORM))
    go = rn(R, (16,), 0.3)
    cases.append(mk("rmsnorm_weightOffset_1", [node("y", "rmsnorm", ["x", "gamma"], weightOffset=1, eps=1e-6)],
                    {"x": x, "gamma": go}, {"y": rmsnorm_ref(x, go, 1e-6, 1.0)}, NORM))
    xq, gq = rn(R, (3, 4 * 8), 2.0), rn(R, (8,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_groupSize_headDim", [node("y", "rmsnorm", ["x", "gamma"], groupSize=8)],
                    {"x": xq, "gamma": gq}, {"y": rmsnorm_ref(xq, gq, 1e-6, 0.0, 8)}, NORM))
    gq2 = rn(R, (8,), 0.3)
    cases.append(mk("rmsnorm_groupSize_weightOffset_gemma3",
                    [node("y", "rmsnorm", ["x", "gamma"], groupSize=8, weightOffset=1, eps=1e-6)],
                    {"x": xq, "gamma": gq2}, {"y": rmsnorm_ref(xq, gq2, 1e-6, 1.0, 8)}, NORM))
    x3 = rn(R, (2, 3, 8))
    g8 = rn(R, (8,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_3d", [node("y", "rmsnorm", ["x", "gamma"])], {"x": x3, "gamma": g8},
                    {"y": rmsnorm_ref(x3, g8)}, NORM))
    return cases


# ---------------------------------------------------------------- matmul / linear / embedding


def mm_ref(a, b, transB=False, bias=None):
    B = t64(b)
    if transB:
        B = B.T
    y = t64(a) @ B
    if bias is not None:
        y = y + t64(bias)
    return y


def gen_matmul_linear(op):
    R = rng_for(op)
    cases = []
    lin = op == "linear"

    def c(name, a, b, transB=False, packed_dtype=None, as_weight=False):
        params = {"transB": True} if transB else {}
        bias = rn(R, (b.shape[0] if transB else b.shape[1],)) if lin else None
        ins = ["a", "w:B" if (packed_dtype or as_weight) else "b"] + (["bias"] if lin else [])
        inputs = {"a": a}
        if lin:
            inputs["bias"] = bias
        packed, weights = None, None
        if packed_dtype:
            p = pack(b, packed_dtype)
            packed = {"B": p}
            b = p.deq
        elif as_weight:
            weights = {"B": b}
        else:
            inputs["b"] = b
        cases.append(mk(name, [node("y", op, ins, **params)], inputs, {"y": mm_ref(a, b, transB, bias)}, MATMUL,
                        weights=weights, packed=packed))

    c(f"{op}_plain", rn(R, (3, 8)), rn(R, (8, 5)))
    c(f"{op}_transB", rn(R, (3, 8)), rn(R, (5, 8)), transB=True)
    c(f"{op}_3d_activations", rn(R, (2, 3, 8)), rn(R, (8, 4)))
    c(f"{op}_3d_activations_transB", rn(R, (2, 3, 8)), rn(R, (4, 8)), transB=True)
    c(f"{op}_inline_weight_transB", rn(R, (2, 8)), rn(R, (6, 8)), transB=True, as_weight=True)
    for dt in ["f16", "bf16", "q8_0", "q4_0"]:
        c(f"{op}_packed_{dt}_transB", rn(R, (3, 64)), rn(R, (5, 64)), transB=True, packed_dtype=dt)
    c(f"{op}_packed_q4_0_transB_3d", rn(R, (2, 3, 64)), rn(R, (4, 64)), transB=True, packed_dtype="q4_0")
    c(f"{op}_packed_q8_0_notransB", rn(R, (3, 16)), rn(R, (16, 32)), packed_dtype="q8_0")
    if not lin:
        c("matmul_packed_f16_notransB", rn(R, (2, 8)), rn(R, (8, 6)), packed_dtype="f16")
    return cases


def emb_ref(ids, table):
    V, C = table.shape
    out = np.zeros((len(ids), C), F32)
    for i, v in enumerate(ids):
        if np.isnan(v):
            continue
        r = int(np.rint(v))
        if 0 <= r < V:
            out[i] = table[r]
    return out


def gen_embedding():
    R = rng_for("embedding")
    cases = []
    table = rn(R, (10, 8))
    ids = np.array([3, 0, 9, -1, 10, 3], F32)
    cases.append(mk("embedding_f32_out_of_range", [node("y", "embedding", ["ids", "table"])],
                    {"ids": ids, "table": table}, {"y": emb_ref(ids, table)}, EXACT))
    ids2 = np.array([np.nan, 2, 1000000, -5], F32)
    cases.append(mk("embedding_f32_nan_and_far_ids", [node("y", "embedding", ["ids", "table"])],
                    {"ids": ids2, "table": table}, {"y": emb_ref(ids2, table)}, EXACT))
    cases.append(mk("embedding_f32_weight", [node("y", "embedding", ["ids", "w:table"])],
                    {"ids": ids}, {"y": emb_ref(ids, table)}, EXACT, weights={"table": table}))
    for dt in ["f16", "bf16", "q8_0", "q4_0"]:
        tbl = rn(R, (12, 64))
        p = pack(tbl, dt)
        ids = np.array([0, 11, 5, -1, 12, 7, 5], F32)
        cases.append(mk(f"embedding_packed_{dt}", [node("y", "embedding", ["ids", "w:table"])], {"ids": ids},
                        {"y": emb_ref(ids, p.deq)}, EXACT, packed={"table": p}))
    return cases


# ---------------------------------------------------------------- shape ops


def gen_slice():
    R = rng_for("slice")
    cases = []
    a = rn(R, (6, 4))
    cases.append(mk("slice_axis0", [node("y", "slice", ["a"], start=1, length=3)], {"a": a}, {"y": a[1:4]}, EXACT))
    cases.append(mk("slice_axis0_explicit", [node("y", "slice", ["a"], start=5, length=1, axis=0)], {"a": a},
                    {"y": a[5:6]}, EXACT))
    b = rn(R, (3, 8))
    cases.append(mk("slice_axis_minus1", [node("y", "slice", ["a"], start=2, length=4, axis=-1)], {"a": b},
                    {"y": b[:, 2:6]}, EXACT))
    c3 = rn(R, (2, 3, 8))
    cases.append(mk("slice_3d_axis_last_explicit", [node("y", "slice", ["a"], start=3, length=5, axis=2)],
                    {"a": c3}, {"y": c3[:, :, 3:8]}, EXACT))
    cases.append(mk("slice_3d_axis0", [node("y", "slice", ["a"], start=1, length=1)], {"a": c3}, {"y": c3[1:2]},
                    EXACT))
    w = rn(R, (8, 64))
    p = pack(w, "q8_0")
    cases.append(mk("slice_packed_q8_0_axis0", [node("y", "slice", ["w:W"], start=2, length=3)], {},
                    {"y": p.deq[2:5]}, EXACT, packed={"W": p}))
    w = rn(R, (8, 64))
    p = pack(w, "q4_0")
    x = rn(R, (2, 64))
    cases.append(mk("slice_packed_q4_0_axis0_then_matmul",
                    [node("ws", "slice", ["w:W"], start=4, length=3), node("y", "matmul", ["x", "ws"], transB=True)],
                    {"x": x}, {"y": mm_ref(x, p.deq[4:7], True)}, MATMUL, packed={"W": p}))
    w = rn(R, (4, 64))
    p = pack(w, "q8_0")
    cases.append(mk("slice_packed_q8_0_axis_last", [node("y", "slice", ["w:W"], start=28, length=10, axis=-1)], {},
                    {"y": p.deq[:, 28:38]}, EXACT, packed={"W": p}))
    w = rn(R, (5, 6))
    p = pack(w, "f16")
    cases.append(mk("slice_packed_f16_axis0", [node("y", "slice", ["w:W"], start=1, length=2)], {},
                    {"y": p.deq[1:3]}, EXACT, packed={"W": p}))
    return cases


def gen_concat():
    R = rng_for("concat")
    cases = []

    def c(name, a, b, axis=None):
        params = {} if axis is None else {"axis": axis}
        ax = 0 if axis is None else axis
        cases.append(mk(name, [node("y", "concat", ["a", "b"], **params)], {"a": a, "b": b},
                        {"y": np.concatenate([a, b], axis=ax)}, EXACT))

    c("concat_axis0_default", rn(R, (2, 4)), rn(R, (3, 4)))
    c("concat_axis0_explicit_3d", rn(R, (1, 3, 4)), rn(R, (2, 3, 4)), 0)
    c("concat_axis_minus1", rn(R, (3, 2)), rn(R, (3, 5)), -1)
    c("concat_axis_minus1_3d", rn(R, (2, 3, 4)), rn(R, (2, 3, 1)), -1)
    c("concat_axis_last_explicit", rn(R, (2, 3)), rn(R, (2, 2)), 1)
    return cases


def gen_reshape():
    R = rng_for("reshape")
    cases = []
    a = rn(R, (2, 6))
    cases.append(mk("reshape_2d", [node("y", "reshape", ["a"], shape=[3, 4])], {"a": a}, {"y": a.reshape(3, 4)},
                    EXACT))
    b = rn(R, (2, 3, 4))
    cases.append(mk("reshape_minus1", [node("y", "reshape", ["a"], shape=[-1, 4])], {"a": b},
                    {"y": b.reshape(-1, 4)}, EXACT))
    c = rn(R, (12,))
    cases.append(mk("reshape_minus1_middle", [node("y", "reshape", ["a"], shape=[2, -1, 3])], {"a": c},
                    {"y": c.reshape(2, -1, 3)}, EXACT))
    cases.append(mk("reshape_to_vector", [node("y", "reshape", ["a"], shape=[24])], {"a": b},
                    {"y": b.reshape(24)}, EXACT))
    return cases


def gen_transpose():
    R = rng_for("transpose")
    cases = []
    for name, shape in [("transpose_3x5", (3, 5)), ("transpose_1x4", (1, 4)), ("transpose_7x2", (7, 2))]:
        a = rn(R, shape)
        cases.append(mk(name, [node("y", "transpose", ["a"])], {"a": a}, {"y": a.T}, EXACT))
    return cases


def gen_zeros():
    cases = []
    for name, shape in [("zeros_2d", [3, 4]), ("zeros_1d", [5]), ("zeros_3d", [2, 1, 3])]:
        cases.append(mk(name, [node("y", "zeros", [], shape=shape)], {}, {"y": np.zeros(shape, F32)}, EXACT))
    return cases


def gen_causal_mask():
    R = rng_for("causal_mask")
    cases = []
    for name, shape in [("causal_mask_4x4", (4, 4)), ("causal_mask_batch_2x3x3", (2, 3, 3)),
                        ("causal_mask_1x1", (1, 1))]:
        a = rn(R, shape)
        n = shape[-1]
        y = a.copy()
        y[..., np.triu(np.ones((n, n), bool), 1)] = -np.inf
        cases.append(mk(name, [node("y", "causal_mask", ["a"])], {"a": a}, {"y": y}, EXACT))
    return cases


def gen_reduce(op):
    R = rng_for(op)
    cases = []
    if op in ("reduce_sum", "reduce_mean"):
        f = (lambda x: x.sum()) if op == "reduce_sum" else (lambda x: x.mean())
        for name, shape in [(f"{op}_2d", (3, 4)), (f"{op}_3d", (2, 3, 5)), (f"{op}_vector", (7,))]:
            x = rn(R, shape)
            cases.append(unary_case(name, op, x, np.array([f(x.astype(np.float64))]), tl=REDUCE))
        big = np.array([1e8, 1.0, -1e8, 1.0, 0.5], F32)
        cases.append(unary_case(f"{op}_cancellation_double_accumulate", op, big,
                                np.array([f(big.astype(np.float64))]), tl=REDUCE))
        return cases
    # reduce_max / argmax: per row of the last axis
    is_arg = op == "argmax"

    def c(name, x):
        if is_arg:
            y = np.argmax(x, axis=-1).astype(F32)  # numpy returns the first maximal index
        else:
            y = np.max(x, axis=-1)
        y = np.asarray(y).reshape(x.shape[:-1]) if x.ndim > 1 else np.array([y]).reshape(1)
        cases.append(unary_case(name, op, x, y, tl=EXACT))

    c(f"{op}_2d", rn(R, (3, 6)))
    c(f"{op}_3d", rn(R, (2, 2, 5)))
    c(f"{op}_vector", rn(R, (7,)))
    c(f"{op}_ties", np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -2.0, -1.0, -3.0]], F32))
    c(f"{op}_with_inf", np.array([[-np.inf, -np.inf, -5.0], [1.0, np.inf, np.inf]], F32))
    return cases


# ---------------------------------------------------------------- cache_write / conv


def gen_cache_write():
    R = rng_for("cache_write")
    cases = []
    kv = rn(R, (8, 4))
    v = rn(R, (3, 4))
    new = kv.copy()
    new[2:5] = v
    cases.append(mk("cache_write_session_in_place", [node("c", "cache_write", ["s:kv", "v"], offset=2)], {"v": v},
                    {"c": new}, EXACT, session={"kv": kv}, expected_session={"kv": new}))
    v2 = rn(R, (3, 4))
    new2 = kv.copy()
    new2[5:8] = v2
    cases.append(mk("cache_write_session_bind_expr", [node("c", "cache_write", ["s:kv", "v"], offset="pos + 1")],
                    {"v": v2}, {"c": new2}, EXACT, session={"kv": kv}, expected_session={"kv": new2},
                    bind={"pos": 4}))
    cache = rn(R, (6, 3))
    v3 = rn(R, (1, 3))
    new3 = cache.copy()
    new3[5:6] = v3
    cases.append(mk("cache_write_plain_input_last_row", [node("c", "cache_write", ["cache", "v"], offset=5)],
                    {"cache": cache, "v": v3}, {"c": new3}, EXACT))
    v4 = rn(R, (2, 2))
    new4 = np.zeros((4, 2), F32)
    new4[0:2] = v4
    cases.append(mk("cache_write_zeros_then_retain",
                    [node("z", "zeros", [], shape=[4, 2]), node("c", "cache_write", ["z", "v"], offset="pos")],
                    {"v": v4}, {"c": new4}, EXACT, bind={"pos": 0}, retain={"kc": "c"},
                    expected_session={"kc": new4}))
    return cases


def conv_ref(x, w, state):
    """y[t, c] = sum_k w[c, 0, k] * z[t + k, c], z = [state; x]."""
    z = np.concatenate([state, x], 0).astype(np.float64)
    K = w.shape[2]
    T = x.shape[0]
    y = np.zeros(x.shape, np.float64)
    for t in range(T):
        for k in range(K):
            y[t] += w[:, 0, k].astype(np.float64) * z[t + k]
    return y


def conv_ref_torch(x, w, state):
    """Independent check: torch depthwise conv1d, as HF LFM2 / Mamba run it."""
    z = torch.cat([t64(state), t64(x)], 0).T.unsqueeze(0)  # [1, C, K-1+T]
    y = torch.nn.functional.conv1d(z, t64(w), groups=w.shape[0])  # valid conv
    return y[0].T


def gen_conv1d():
    R = rng_for("conv1d")
    cases = []
    for name, T, C, K in [("conv1d_T5_C6_K3", 5, 6, 3), ("conv1d_decode_T1_K4", 1, 4, 4), ("conv1d_K2", 3, 5, 2)]:
        x, w, st = rn(R, (T, C)), rn(R, (C, 1, K)), rn(R, (K - 1, C))
        y = conv_ref(x, w, st)
        assert np.allclose(y, npf(conv_ref_torch(x, w, st)), atol=1e-12)
        cases.append(mk(name, [node("y", "conv1d", ["x", "w", "state"])], {"x": x, "w": w, "state": st}, {"y": y},
                        tol(1e-5, 1e-5)))
    return cases


def short_conv_ref(x, in_proj, conv, out_proj, state):
    C = x.shape[1]
    K = conv.shape[2]
    p = t64(x) @ t64(in_proj).T
    B, Cg, xx = p[:, :C], p[:, C:2 * C], p[:, 2 * C:]
    Bx = B * xx
    z = torch.cat([t64(state), Bx], 0)
    conv_out = torch.nn.functional.conv1d(z.T.unsqueeze(0), t64(conv), groups=C)[0].T
    y = Cg * conv_out
    out = y @ t64(out_proj).T
    new_state = z[-(K - 1):]
    return out, new_state


def gen_short_conv():
    R = rng_for("short_conv")
    cases = []
    for name, T, C, K in [("short_conv_prefill_T4_K3", 4, 8, 3), ("short_conv_decode_T1_K3", 1, 8, 3),
                          ("short_conv_T2_K4", 2, 6, 4)]:
        x = rn(R, (T, C))
        ip, cw, op_ = rn(R, (3 * C, C), 0.4), rn(R, (C, 1, K), 0.5), rn(R, (C, C), 0.4)
        st = rn(R, (K - 1, C))
        out, ns = short_conv_ref(x, ip, cw, op_, st)
        cases.append(mk(name, [node("y", "short_conv", ["x", "w:in_proj", "w:conv", "w:out_proj", "s:conv_state"])],
                        {"x": x}, {"y": out}, tol(5e-5, 1e-4),
                        weights={"in_proj": ip, "conv": cw, "out_proj": op_},
                        session={"conv_state": st}, expected_session={"conv_state": ns}))
    # state given as a plain input: only the output is checked
    T, C, K = 3, 4, 3
    x = rn(R, (T, C))
    ip, cw, op_, st = rn(R, (3 * C, C), 0.4), rn(R, (C, 1, K), 0.5), rn(R, (C, C), 0.4), rn(R, (K - 1, C))
    out, _ = short_conv_ref(x, ip, cw, op_, st)
    cases.append(mk("short_conv_state_as_input", [node("y", "short_conv", ["x", "in_proj", "conv", "out_proj", "st"])],
                    {"x": x, "in_proj": ip, "conv": cw, "out_proj": op_, "st": st}, {"y": out}, tol(5e-5, 1e-4)))
    return cases


# ---------------------------------------------------------------- rope (transformers' modeling_rope_utils, float32)


def rope_params_hf(headDim, base=10000.0, rotaryDim=None, scaling=None, seq_len=None):
    """(inv_freq float32 tensor [R/2], attention_factor) following transformers' _compute_*_parameters."""
    dim = rotaryDim or headDim
    base = float(base)
    exps = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    if not scaling:
        return 1.0 / (base ** exps), 1.0
    typ = scaling.get("rope_type", scaling.get("type", "default"))
    if typ == "default":
        return 1.0 / (base ** exps), 1.0
    if typ == "linear":
        inv = 1.0 / (base ** exps)
        inv /= scaling["factor"]
        return inv, 1.0
    if typ == "dynamic":
        # dynamic_rope_update: seq_len = max(position_ids) + 1 (a tensor); frequencies are recomputed only
        # when it grows past max_position_embeddings, else the init-time (= default) ones are used.
        maxpos = scaling["max_position_embeddings"]
        factor = scaling["factor"]
        if seq_len is None or seq_len <= maxpos:
            return 1.0 / (base ** exps), 1.0
        sl = torch.maximum(torch.tensor(seq_len), torch.tensor(maxpos))
        b = base * ((factor * sl / maxpos) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (b ** exps), 1.0
    if typ == "yarn":
        orig = scaling.get("original_max_position_embeddings", scaling.get("max_position_embeddings"))
        factor = scaling.get("factor")
        if factor is None:
            factor = scaling["max_position_embeddings"] / orig
        attention_factor = scaling.get("attention_factor")
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")

        def get_mscale(scale, m=1):
            if scale <= 1:
                return 1.0
            return 0.1 * m * math.log(scale) + 1.0

        if attention_factor is None:
            if mscale and mscale_all_dim:
                attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
            else:
                attention_factor = get_mscale(factor)
        beta_fast = scaling.get("beta_fast") or 32
        beta_slow = scaling.get("beta_slow") or 1

        def find_correction_dim(num_rotations):
            return (dim * math.log(orig / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

        truncate = scaling.get("truncate", True)
        low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
        inv_extra = 1.0 / pos_freqs
        inv_inter = 1.0 / (factor * pos_freqs)
        extra_factor = 1 - ramp
        inv = inv_inter * (1 - extra_factor) + inv_extra * extra_factor
        return inv, attention_factor
    if typ == "longrope":
        orig = scaling["original_max_position_embeddings"]
        # docs/OPS.md: f = max_position_embeddings / original_max_position_embeddings (or `factor`)
        if "max_position_embeddings" in scaling:
            factor = scaling["max_position_embeddings"] / orig
        else:
            factor = scaling["factor"]
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        if seq_len and seq_len > orig:
            ext = torch.tensor(scaling["long_factor"], dtype=torch.float32)
        else:
            ext = torch.tensor(scaling["short_factor"], dtype=torch.float32)
        inv = 1.0 / (ext * base ** exps)
        return inv, attention_factor
    if typ == "llama3":
        inv = 1.0 / (base ** exps)
        factor = scaling["factor"]
        lff, hff = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wl, high_wl = old / lff, old / hff
        wavelen = 2 * math.pi / inv
        inv_l = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old / wavelen - lff) / (hff - lff)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        is_med = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        return torch.where(is_med, smoothed, inv_l), 1.0
    raise ValueError(typ)


def rope_cos_sin(T, offset, inv, af):
    pos = torch.arange(offset, offset + T, dtype=torch.int64).float()
    ang = pos[:, None] * inv[None, :]  # float32, as transformers' inv_freq @ position_ids
    ang = ang.to(F64)
    return torch.cos(ang) * af, torch.sin(ang) * af


def rope_apply(x, headDim, cos, sin, R, interleaved):
    X = t64(x)
    T = X.shape[0]
    H = X.shape[1] // headDim
    X = X.reshape(T, H, headDim)
    out = X.clone()
    rot = X[:, :, :R]
    c, s = cos[:, None, :], sin[:, None, :]
    if interleaved:
        a, b = rot[:, :, 0::2], rot[:, :, 1::2]
        out[:, :, 0:R:2] = a * c - b * s
        out[:, :, 1:R:2] = b * c + a * s
    else:
        a, b = rot[:, :, :R // 2], rot[:, :, R // 2:]
        out[:, :, :R // 2] = a * c - b * s
        out[:, :, R // 2:R] = b * c + a * s
    return out.reshape(T, H * headDim)


def rope_ref(x, headDim, base=10000.0, offset=0, rotaryDim=None, interleaved=False, scaling=None, invFreq=None,
             attentionFactor=None):
    T = x.shape[0]
    R = rotaryDim or headDim
    inv, af = rope_params_hf(headDim, base, rotaryDim, scaling, seq_len=offset + T)
    if invFreq is not None:
        inv = torch.tensor(invFreq, dtype=torch.float32)
    if attentionFactor is not None:
        af = attentionFactor
    cos, sin = rope_cos_sin(T, offset, inv, af)
    return rope_apply(x, headDim, cos, sin, R, interleaved)


def gen_rope():
    R_ = rng_for("rope")
    cases = []

    def c(name, T, heads, headDim, bind=None, **p):
        x = rn(R_, (T, heads * headDim))
        ref_p = dict(p)
        if bind is not None:
            ref_p["offset"] = bind["pos"]
        y = rope_ref(x, headDim, **ref_p)
        maxpos = ref_p.get("offset", 0) + T
        tl = tol(1e-5 + maxpos * 4e-7, 1e-5)
        cases.append(mk(name, [node("y", "rope", ["x"], headDim=headDim, **p)], {"x": x}, {"y": y}, tl, bind=bind))

    c("rope_default", 4, 2, 8)
    c("rope_base_1e6", 3, 2, 16, base=1000000.0)
    c("rope_offset", 3, 2, 8, offset=7)
    c("rope_offset_large", 2, 2, 16, offset=1000)
    c("rope_offset_bind_expr", 2, 2, 8, offset="pos", bind={"pos": 9})
    c("rope_rotaryDim_partial", 3, 2, 16, rotaryDim=8)
    c("rope_interleaved", 3, 2, 8, interleaved=True)
    c("rope_interleaved_rotaryDim_gptj", 3, 2, 16, rotaryDim=8, interleaved=True, offset=4)
    c("rope_invFreq", 3, 2, 8, offset=2, invFreq=[1.0, 0.3, 0.05, 0.001])
    c("rope_invFreq_rotaryDim", 2, 2, 8, offset=5, rotaryDim=4, invFreq=[0.7, 0.02])
    c("rope_attentionFactor", 3, 2, 8, offset=1, attentionFactor=1.3)
    c("rope_linear", 3, 2, 8, offset=10, scaling={"rope_type": "linear", "factor": 4.0})
    c("rope_linear_type_key", 3, 2, 8, offset=10, scaling={"type": "linear", "factor": 2.0})
    c("rope_dynamic_below_max", 4, 2, 16, offset=3,
      scaling={"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 16})
    c("rope_dynamic_above_max", 4, 2, 16, offset=14,
      scaling={"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 16})
    c("rope_dynamic_above_max_rotaryDim", 2, 2, 16, offset=30, rotaryDim=8,
      scaling={"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 16})
    c("rope_llama3", 3, 2, 64, base=500000.0, offset=50,
      scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192})
    c("rope_yarn_default_betas", 3, 2, 32, offset=5,
      scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
               "max_position_embeddings": 16384})
    c("rope_yarn_custom_betas", 3, 2, 32, offset=20,
      scaling={"rope_type": "yarn", "factor": 4.0, "beta_fast": 16, "beta_slow": 2,
               "original_max_position_embeddings": 4096, "max_position_embeddings": 16384})
    c("rope_yarn_mscale_deepseek", 3, 2, 64, offset=11,
      scaling={"type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.8, "beta_fast": 32,
               "beta_slow": 1, "original_max_position_embeddings": 4096, "max_position_embeddings": 163840})
    c("rope_yarn_attention_factor", 2, 2, 32, offset=3,
      scaling={"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.25,
               "original_max_position_embeddings": 4096, "max_position_embeddings": 16384})
    c("rope_yarn_rotaryDim", 2, 2, 32, offset=8, rotaryDim=16,
      scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
               "max_position_embeddings": 16384})
    c("rope_yarn_attentionFactor_param_overrides", 2, 2, 32, offset=3, attentionFactor=0.9,
      scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
               "max_position_embeddings": 16384})
    lr = {"rope_type": "longrope", "short_factor": [1.0, 1.05, 1.1, 1.2, 1.4, 1.8, 2.5, 3.0],
          "long_factor": [1.0, 1.3, 2.0, 3.5, 6.0, 10.0, 16.0, 24.0],
          "original_max_position_embeddings": 32, "max_position_embeddings": 128}
    c("rope_longrope_short", 4, 2, 16, offset=10, scaling=lr)
    c("rope_longrope_boundary_short", 4, 2, 16, offset=28, scaling=lr)
    c("rope_longrope_long", 3, 2, 16, offset=40, scaling=lr)
    lr2 = {"type": "longrope", "short_factor": lr["short_factor"], "long_factor": lr["long_factor"],
           "original_max_position_embeddings": 32, "factor": 8.0}
    c("rope_longrope_factor_key_long", 1, 2, 16, offset=33, scaling=lr2)
    return cases


# ---------------------------------------------------------------- attention


def bloom_slopes(n):
    cp = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(cp) - 3)))
    slopes = [base ** p for p in range(1, 1 + cp)]
    if cp != n:
        eb = 2 ** (-(2 ** -(math.log2(2 * cp) - 3)))
        rem = min(cp, n - cp)
        slopes += [eb ** p for p in range(1, 1 + 2 * rem, 2)]
    return slopes


def mpt_slopes(n, amax):
    n2 = 2 ** math.ceil(math.log2(n))
    m = torch.arange(1, n2 + 1, dtype=torch.float32) * (amax / n2)
    s = 1.0 / torch.pow(2, m)
    if n2 != n:
        s = torch.cat([s[1::2], s[::2]])[:n]
    return [float(v) for v in s]


def attention_ref(q, k, v, heads, headDim, kvHeads=None, vHeadDim=None, causal=True, posOffset=0, scale=None,
                  softcap=None, window=None, alibi=False, alibiMax=None, alibiSlopes=None, bias=None):
    H, D = heads, headDim
    KV = kvHeads or H
    Dv = vHeadDim or D
    T, S = q.shape[0], k.shape[0]
    Q, K, V = t64(q).reshape(T, H, D), t64(k).reshape(S, KV, D), t64(v).reshape(S, KV, Dv)
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    slopes = None
    if alibiSlopes is not None:
        slopes = list(alibiSlopes)
    elif alibiMax is not None:
        slopes = mpt_slopes(H, alibiMax)
    elif alibi:
        slopes = bloom_slopes(H)
    p = torch.arange(T, dtype=F64)[:, None] + posOffset
    s_ = torch.arange(S, dtype=F64)[None, :]
    if causal:
        vis = s_ <= p
        if window is not None:
            vis = vis & (s_ > p - window)
    else:
        vis = torch.ones(T, S, dtype=torch.bool)
        if window is not None:
            vis = (p - s_).abs() <= window
    out = torch.zeros(T, H, Dv, dtype=F64)
    for h in range(H):
        kh = h // (H // KV)
        sco = sc * (Q[:, h, :] @ K[:, kh, :].T)
        if softcap is not None:
            sco = softcap * torch.tanh(sco / softcap)
        if slopes is not None:
            sco = sco + slopes[h] * (s_ - p)
        if bias is not None:
            b = t64(bias)
            sco = sco + (b if b.dim() == 2 else b[h])
        sco = sco.masked_fill(~vis, -math.inf)
        for t in range(T):
            if vis[t].any():
                w = torch.softmax(sco[t], -1)
                out[t, h] = w @ V[:, kh, :]
    return out.reshape(T, H * Dv)


def gen_attention():
    R = rng_for("attention")
    cases = []

    def c(name, T, S, H, D, KV=None, Dv=None, bias=None, qscale=1.0, tl=ATTN, **p):
        q = rn(R, (T, H * D), qscale)
        k = rn(R, (S, (KV or H) * D))
        v = rn(R, (S, (KV or H) * (Dv or D)))
        params = {"heads": H, "headDim": D}
        if KV is not None:
            params["kvHeads"] = KV
        if Dv is not None:
            params["vHeadDim"] = Dv
        params.update(p)
        y = attention_ref(q, k, v, H, D, KV, Dv, bias=bias, **p)
        ins = ["q", "k", "v"] + (["bias"] if bias is not None else [])
        inputs = {"q": q, "k": k, "v": v}
        if bias is not None:
            inputs["bias"] = bias
        cases.append(mk(name, [node("y", "attention", ins, **params)], inputs, {"y": y}, tl))
        return y

    c("attention_mha_causal", 4, 4, 2, 8)
    c("attention_gqa_h4_kv2", 5, 5, 4, 8, KV=2)
    c("attention_vHeadDim", 3, 3, 2, 8, Dv=4)
    c("attention_mqa_vHeadDim_h4_kv1", 3, 5, 4, 8, KV=1, Dv=6, posOffset=2)
    c("attention_causal_posOffset_cache_rows_hidden", 3, 8, 2, 8, KV=1, posOffset=2)
    c("attention_causal_posOffset_full", 3, 7, 2, 8, posOffset=4)
    c("attention_decode_T1", 1, 6, 4, 8, KV=2, posOffset=5)
    c("attention_noncausal", 3, 5, 2, 8, causal=False)
    c("attention_window_causal", 6, 6, 2, 8, window=3)
    c("attention_window_causal_posOffset", 3, 10, 2, 8, KV=1, window=4, posOffset=5)
    c("attention_window_noncausal", 5, 5, 2, 8, causal=False, window=2)
    c("attention_scale", 4, 4, 2, 8, scale=0.3)
    c("attention_softcap", 4, 4, 2, 8, softcap=5.0, scale=1.0, qscale=3.0)
    c("attention_softcap_only", 3, 4, 2, 8, softcap=2.0, qscale=4.0, posOffset=1)
    c("attention_alibi_bloom_h6", 4, 4, 6, 4, alibi=True)
    c("attention_alibi_bloom_h8_posOffset", 2, 5, 8, 4, alibi=True, posOffset=3)
    c("attention_alibiMax_mpt_h6", 4, 4, 6, 4, alibiMax=8)
    c("attention_alibiSlopes_explicit", 3, 5, 3, 4, alibiSlopes=[0.5, 0.1, 2.0], posOffset=2)
    T, S, H = 3, 5, 2
    b2 = rn(R, (T, S), 0.5)
    b2[0, 1] = b2[2, 0] = b2[2, 3] = F32(-1e9)
    c("attention_bias_TS", T, S, H, 8, bias=b2, causal=False)
    b3 = rn(R, (H, T, S), 0.5)
    b3[0, :, 0] = F32(-1e9)
    b3[1, 1, 2] = F32(-1e9)
    c("attention_bias_HTS_causal", T, S, H, 8, bias=b3, posOffset=2)
    y = c("attention_all_masked_rows_zero", 3, 5, 2, 8, window=1, posOffset=4)
    assert float(y[1:].abs().max()) == 0.0 and float(y[0].abs().max()) > 0
    c("attention_long_S300", 3, 300, 2, 16, KV=1, posOffset=297)
    c("attention_long_S300_window", 2, 300, 2, 16, KV=1, posOffset=298, window=130)
    c("attention_gemma2_style", 4, 9, 4, 8, KV=2, posOffset=5, scale=0.25, softcap=50.0, window=4, qscale=2.0)
    return cases


# ---------------------------------------------------------------- moe


def moe_route(logits, topK, scoring="softmax", normalize=False, scale=1.0, nGroup=None, topKGroup=None,
              groupTopK=1, bias=None, check_margin=True):
    L = t64(logits)
    Tn, E = L.shape
    s = torch.softmax(L, -1) if scoring == "softmax" else torch.sigmoid(L)
    choice = s + t64(bias) if bias is not None else s.clone()
    sel, wts = [], []
    for t in range(Tn):
        ch = choice[t].clone()
        if nGroup and nGroup > 1:
            gsz = E // nGroup
            gscore = [float(torch.sort(ch[g * gsz:(g + 1) * gsz], descending=True)[0][:groupTopK].sum())
                      for g in range(nGroup)]
            gorder = sorted(range(nGroup), key=lambda g: (-gscore[g], g))
            if check_margin:
                assert gscore[gorder[topKGroup - 1]] - gscore[gorder[topKGroup]] > 1e-4, "group near-tie"
            keep = set(gorder[:topKGroup])
            for e in range(E):
                if e // gsz not in keep:
                    ch[e] = -math.inf
        order = sorted(range(E), key=lambda e: (-float(ch[e]), e))
        if check_margin and topK < E and math.isfinite(float(ch[order[topK]])):
            assert float(ch[order[topK - 1]] - ch[order[topK]]) > 1e-4, "expert near-tie"
        chosen = order[:topK]
        w = s[t, chosen]
        if normalize:
            w = w / w.sum()
        w = w * scale
        sel.append(chosen)
        wts.append(w)
    return sel, wts


def moe_ref(x, logits, experts, activation="silu", **route):
    sel, wts = moe_route(logits, **route)
    X = t64(x)
    out = torch.zeros_like(X)
    act = (lambda g: g * torch.sigmoid(g)) if activation == "silu" else gelu_tanh
    for t in range(X.shape[0]):
        for e, w in zip(sel[t], wts[t]):
            g, u, d = experts[e]
            h = act(t64(g) @ X[t]) * (t64(u) @ X[t])
            out[t] += w * (t64(d) @ h)
    return out, sel


def hf_deepseek_v3_route(logits, bias, top_k, n_group, topk_group, norm, rsf):
    """Independent check, written after transformers' DeepseekV3 router (sum of the best 2 per group,
    masked_fill 0.0)."""
    L = t64(logits)
    scores = torch.sigmoid(L)
    sfc = scores + t64(bias)
    E = L.shape[1]
    gs = sfc.view(-1, n_group, E // n_group).topk(2, dim=-1)[0].sum(dim=-1)
    gidx = torch.topk(gs, k=topk_group, dim=-1, sorted=False)[1]
    gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
    smask = gmask.unsqueeze(-1).expand(-1, n_group, E // n_group).reshape(-1, E)
    sfc = sfc.masked_fill(~smask.bool(), 0.0)
    idx = torch.topk(sfc, k=top_k, dim=-1, sorted=False)[1]
    w = scores.gather(1, idx)
    if norm:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * rsf


def gen_moe():
    R = rng_for("moe")
    cases = []
    E, Tn, C, I, K = 8, 5, 16, 16, 2  # small f32 experts (inline JSON); packed cases use C = I = 32

    def experts_f32(C_, I_):
        return [(rn(R, (I_, C_), 0.3, 2), rn(R, (I_, C_), 0.3, 2), rn(R, (C_, I_), 0.3, 2)) for _ in range(E)]

    def c(name, layout="separate", scoring=None, normalize=None, scale=None, nGroup=None, topKGroup=None,
          groupTopK=None, bias=None, activation=None, packed_dtype=None, C_=C, I_=I, topK=K, logit_scale=1.5,
          extra_check=None):
        x = rn(R, (Tn, C_))
        logits = rn(R, (Tn, E), logit_scale)
        ex = experts_f32(C_, I_)
        params = {"topK": topK}
        for k_, v_ in [("scoring", scoring), ("normalize", normalize), ("scale", scale), ("nGroup", nGroup),
                       ("topKGroup", topKGroup), ("groupTopK", groupTopK), ("activation", activation)]:
            if v_ is not None:
                params[k_] = v_
        if bias is not None:
            params["selectionBias"] = True
        if layout != "separate":
            params["layout"] = layout
        ins = ["x", "logits"] + (["bias"] if bias is not None else [])
        weights, packed = {}, {}

        def put(nm, arr):
            if packed_dtype:
                p = pack(arr, packed_dtype)
                packed[nm] = p
                return p.deq
            weights[nm] = arr
            return arr

        deq = []
        if layout == "separate":
            for e, (g, u, d) in enumerate(ex):
                deq.append((put(f"gate_{e}", g), put(f"up_{e}", u), put(f"down_{e}", d)))
                ins += [f"w:gate_{e}", f"w:up_{e}", f"w:down_{e}"]
        elif layout == "fused":
            gu = np.stack([np.concatenate([g, u], 0) for g, u, _ in ex])  # [E, 2I, C]
            dn = np.stack([d for _, _, d in ex])  # [E, C, I]
            gu, dn = put("gate_up", gu), put("down", dn)
            deq = [(gu[e, :I_], gu[e, I_:], dn[e]) for e in range(E)]
            ins += ["w:gate_up", "w:down"]
        else:
            G = put("gate", np.stack([g for g, _, _ in ex]))
            U = put("up", np.stack([u for _, u, _ in ex]))
            Dn = put("down", np.stack([d for _, _, d in ex]))
            deq = [(G[e], U[e], Dn[e]) for e in range(E)]
            ins += ["w:gate", "w:up", "w:down"]
        route = dict(topK=topK, scoring=scoring or "softmax", normalize=bool(normalize), scale=scale or 1.0,
                     nGroup=nGroup, topKGroup=topKGroup, groupTopK=groupTopK or 1, bias=bias)
        y, sel = moe_ref(x, logits, deq, activation=activation or "silu", **route)
        if extra_check:
            extra_check(x, logits, deq, route, y, sel)
        inputs = {"x": x, "logits": logits}
        if bias is not None:
            inputs["bias"] = bias
        cases.append(mk(name, [node("y", "moe", ins, **params)], inputs, {"y": y}, MOE,
                        weights=weights or None, packed=packed or None))

    def mixtral_check(x, logits, deq, route, y, sel):
        rw = torch.softmax(t64(logits), -1)
        w, idx = torch.topk(rw, 2, -1)
        w = w / w.sum(-1, keepdim=True)
        X = t64(x)
        out = torch.zeros_like(X)
        for t in range(X.shape[0]):
            for j in range(2):
                g, u, d = deq[int(idx[t, j])]
                out[t] += w[t, j] * (t64(d) @ (torch.nn.functional.silu(t64(g) @ X[t]) * (t64(u) @ X[t])))
        assert torch.allclose(out, y, atol=1e-12)

    c("moe_separate_softmax_normalize_mixtral", scoring="softmax", normalize=True, activation="silu",
      extra_check=mixtral_check)
    c("moe_separate_defaults_normalize", normalize=True)
    c("moe_separate_softmax_no_normalize_qwen", scoring="softmax", normalize=False)
    c("moe_fused_softmax_normalize", layout="fused", normalize=True)
    c("moe_stacked_softmax_normalize", layout="stacked", normalize=True, scoring="softmax")
    c("moe_stacked_sigmoid_normalize_scale", layout="stacked", scoring="sigmoid", normalize=True, scale=2.5)
    c("moe_stacked_sigmoid_no_normalize", layout="stacked", scoring="sigmoid", normalize=False)

    sb = np.array([0.0, 0.0, 0.9, 0.0, 0.0, 0.0, 0.0, 0.8], F32)

    def bias_changes_choice(x, logits, deq, route, y, sel):
        r2 = dict(route)
        r2["bias"] = None
        sel2, _ = moe_route(logits, check_margin=False, **{k: v for k, v in r2.items()})
        assert sel2 != sel, "selection bias should change the choice"

    c("moe_stacked_sigmoid_selectionBias", layout="stacked", scoring="sigmoid", normalize=True, bias=sb,
      extra_check=bias_changes_choice)

    def groups_matter(x, logits, deq, route, y, sel):
        r2 = dict(route)
        r2["nGroup"] = None
        sel2, _ = moe_route(logits, check_margin=False, **r2)
        assert sel2 != sel, "group limit should change the choice"

    c("moe_group_limited_groupTopK1_default", layout="stacked", scoring="softmax", normalize=False, scale=1.5,
      nGroup=4, topKGroup=1, extra_check=groups_matter, logit_scale=2.0)
    c("moe_group_limited_groupTopK1_explicit_topK3", layout="separate", scoring="sigmoid", normalize=True,
      nGroup=2, topKGroup=1, groupTopK=1, topK=3, extra_check=groups_matter, logit_scale=2.0)

    sb2 = rn(R, (E,), 0.3)

    def deepseek_v3_check(x, logits, deq, route, y, sel):
        groups_matter(x, logits, deq, route, y, sel)
        idx, w = hf_deepseek_v3_route(logits, sb2, 2, 4, 2, True, 2.5)
        _, wts = moe_route(logits, check_margin=False, **route)
        for t in range(len(sel)):
            assert sorted(sel[t]) == sorted(int(i) for i in idx[t]), (sel[t], idx[t])
            mine = dict(zip(sel[t], [float(v) for v in wts[t]]))
            for i, wv in zip(idx[t], w[t]):
                assert abs(mine[int(i)] - float(wv)) < 1e-12

    c("moe_group_limited_groupTopK2_deepseek_v3", layout="stacked", scoring="sigmoid", normalize=True, scale=2.5,
      nGroup=4, topKGroup=2, groupTopK=2, bias=sb2, extra_check=deepseek_v3_check, logit_scale=2.0)
    c("moe_fused_gelu", layout="fused", normalize=True, activation="gelu")
    c("moe_separate_gelu_sigmoid", scoring="sigmoid", normalize=False, activation="gelu")
    c("moe_packed_q8_0_stacked", layout="stacked", normalize=True, packed_dtype="q8_0", C_=32, I_=32)
    c("moe_packed_q4_0_separate", layout="separate", normalize=True, packed_dtype="q4_0", C_=32, I_=32)
    c("moe_packed_f16_fused", layout="fused", normalize=True, packed_dtype="f16", C_=8, I_=8)
    return cases


# ---------------------------------------------------------------- sample


def philox_raw(seed, step, row):
    g = np.random.Philox(key=np.array([seed, 0], dtype=np.uint64),
                         counter=np.array([step, row, 0, 0], dtype=np.uint64))
    return int(g.random_raw())


def philox_u(seed, step, row):
    return (philox_raw(seed, step, row) >> 11) * 2.0 ** -53


def sample_ref(logits, history=None, temperature=0.0, topK=0, topP=1.0, seed=0, step=0, repetitionPenalty=1.0,
               presencePenalty=0.0, penaltyWindow=None, penaltyEnd=None, margin=1e-5):
    L = np.asarray(logits, np.float64)
    V = L.shape[-1]
    rows = L.reshape(-1, V)
    ids = []
    if history is not None:
        h = np.asarray(history, np.float64).reshape(-1)
        Nh = len(h)
        end = Nh if penaltyEnd is None else penaltyEnd
        win = Nh if penaltyWindow is None else penaltyWindow
        seen = set()
        for v in h[max(0, end - win):end]:
            if 0 <= v < V:
                seen.add(int(v))
        ids = sorted(seen)
    out = []
    info = []
    for r, row in enumerate(rows):
        l = row.copy()
        for i in ids:
            l[i] = l[i] / repetitionPenalty if l[i] > 0 else l[i] * repetitionPenalty
            l[i] -= presencePenalty
        if temperature == 0:
            out.append(int(np.argmax(l)))
            continue
        order = sorted(range(V), key=lambda i: (-l[i], i))
        if topK > 0:
            if topK < V:
                assert l[order[topK - 1]] - l[order[topK]] > margin, "topK boundary near-tie"
            order = order[:topK]
        z = np.array([l[i] for i in order]) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        cum = np.cumsum(p)
        n = len(order)
        if topP < 1.0:
            n = int(np.argmax(cum >= topP)) + 1 if (cum >= topP).any() else len(order)
            assert np.min(np.abs(cum - topP)) > margin, "topP boundary too close"
        kept = cum[n - 1]
        u = philox_u(seed, step, r)
        thr = u * kept
        assert np.min(np.abs(cum[:n] - thr)) > margin, "draw too close to a boundary"
        j = int(np.argmax(cum[:n] > thr))
        out.append(order[j])
        info.append((n, u))
    return np.array(out, F32), info


def gen_sample():
    R = rng_for("sample")
    cases = []
    V = 32

    def c(name, logits, history=None, bind=None, ref_over=None, tl=EXACT, **p):
        rp = dict(p)
        if ref_over:
            rp.update(ref_over)
        y, info = sample_ref(logits, history, **rp)
        if logits.ndim == 1:
            y = y.reshape(1)
        ins = ["logits"] + (["history"] if history is not None else [])
        inputs = {"logits": logits}
        if history is not None:
            inputs["history"] = history
        cases.append(mk(name, [node("y", "sample", ins, **p)], inputs, {"y": y}, tl, bind=bind))
        return y, info

    c("sample_greedy_default", rn(R, (V,), 2.0))
    tie = rn(R, (3, V), 1.0)
    tie[0, 5] = tie[0, 17] = F32(9.0)
    tie[1, :] = F32(0.25)
    tie[2, 30] = tie[2, 31] = F32(7.5)
    y, _ = c("sample_greedy_ties_rows", tie, temperature=0, topK=5, topP=0.5, seed=3)
    assert list(y) == [5, 0, 30]
    c("sample_temperature_seed0_step0", rn(R, (1, V), 2.0), temperature=1.0, seed=0, step=0)
    c("sample_temperature_0.7_seed42", rn(R, (V,), 2.0), temperature=0.7, seed=42, step=3)
    c("sample_topK", rn(R, (V,), 2.0), temperature=1.0, topK=5, seed=7, step=11)
    c("sample_topP", rn(R, (V,), 2.0), temperature=0.8, topP=0.9, seed=9, step=1)
    c("sample_topK_topP", rn(R, (V,), 2.0), temperature=1.2, topK=8, topP=0.6, seed=11, step=5)
    y, info = c("sample_rows_3", rn(R, (3, V), 1.0), temperature=1.5, seed=123, step=9)
    c("sample_large_seed", rn(R, (2, V), 1.0), temperature=1.0, seed=2 ** 40 + 3, step=1000000)
    c("sample_flat_logits_ties_sorted_by_index", np.zeros((2, 8), F32), temperature=1.0, seed=5, step=2)
    c("sample_high_temperature", rn(R, (V,), 2.0), temperature=5.0, seed=77, step=0)

    # penalties
    lg = rn(R, (V,), 1.0)
    lg[4], lg[9], lg[2] = F32(5.0), F32(4.8), F32(-2.0)
    hist = np.array([4, 2, 4, -1, 40], F32)
    y, _ = c("sample_penalty_repetition_greedy", lg, hist, temperature=0, repetitionPenalty=1.3)
    assert y[0] == 9 and np.argmax(lg) == 4
    lg2 = rn(R, (2, V), 1.5)
    hist2 = np.array([[1], [7], [3], [7], [-1], [12]], F32)
    c("sample_penalty_presence_history_Nx1", lg2, hist2, temperature=0.9, presencePenalty=2.0, seed=21, step=4)
    lg3 = rn(R, (V,), 1.0)
    lg3[6], lg3[8], lg3[10] = F32(6.0), F32(5.9), F32(5.8)
    hist3 = np.array([6, 8, -1, 10, 31, 99, 6], F32)
    # window = rows [2, 5) = {-1, 10, 31}: ids 10 and 31 penalised, 6 and 8 are outside the window
    y, _ = c("sample_penalty_window_end", lg3, hist3, temperature=0, repetitionPenalty=1.5, presencePenalty=0.5,
             penaltyWindow=3, penaltyEnd=5)
    assert y[0] == 6
    lg4 = rn(R, (V,), 1.0)
    lg4[3], lg4[12] = F32(3.0), F32(2.9)
    hist4 = np.array([3, 12, 3, -1, -1, -1, -1, -1], F32)
    # bind pos = 0 -> end 1: only id 3 counts
    y, _ = c("sample_penalty_end_bind_expr", lg4, hist4, bind={"pos": 0}, ref_over={"penaltyEnd": 1},
             temperature=0, repetitionPenalty=2.0, penaltyEnd="pos + 1")
    assert y[0] == 12
    lg5 = rn(R, (3, V), 1.0)
    hist5 = np.array([0, 5, 5, 17, -3, 2], F32)
    c("sample_penalty_all_sampled", lg5, hist5, temperature=0.8, topK=10, topP=0.95, seed=2 ** 33 + 1, step=7,
      repetitionPenalty=1.1, presencePenalty=0.3, penaltyWindow=4)
    return cases


def gen_rng():
    triples = [(0, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0), (7, 3, 2), (42, 7, 2), (123456789, 1000, 0),
               (2 ** 33 + 1, 7, 2), (2 ** 40 + 3, 0, 0), (2 ** 40 + 3, 1000000, 1), (2 ** 32 - 1, 2 ** 32 + 5, 3)]
    out = []
    for s, st, r in triples:
        raw = philox_raw(s, st, r)
        out.append({"seed": s, "step": st, "row": r, "raw": str(raw), "u": (raw >> 11) * 2.0 ** -53})
    return out


# ---------------------------------------------------------------- Llama layer


def llama_layer_golden():
    R = rng_for("llama_layer")
    C, H, KV, D, I, base, eps, maxLen = 64, 4, 2, 16, 128, 10000.0, 1e-5, 16

    def lin(o, i):
        return rn(R, (o, i), 1.0 / math.sqrt(i))

    W = {
        "input_layernorm": rn(R, (C,), 0.1) + F32(1),
        "q_proj": lin(H * D, C), "k_proj": lin(KV * D, C), "v_proj": lin(KV * D, C), "o_proj": lin(C, H * D),
        "post_attention_layernorm": rn(R, (C,), 0.1) + F32(1),
        "gate_proj": lin(I, C), "up_proj": lin(I, C), "down_proj": lin(C, I),
    }

    def graph(prefill):
        nodes = []
        if prefill:
            nodes += [node("k_zeros", "zeros", [], shape=[maxLen, KV * D]),
                      node("v_zeros", "zeros", [], shape=[maxLen, KV * D])]
            kc, vc = "k_zeros", "v_zeros"
        else:
            kc, vc = "s:k_cache", "s:v_cache"
        nodes += [
            node("h", "rmsnorm", ["x", "w:input_layernorm"], eps=eps),
            node("q", "matmul", ["h", "w:q_proj"], transB=True),
            node("k", "matmul", ["h", "w:k_proj"], transB=True),
            node("v", "matmul", ["h", "w:v_proj"], transB=True),
            node("qr", "rope", ["q"], headDim=D, base=base, offset="pos"),
            node("kr", "rope", ["k"], headDim=D, base=base, offset="pos"),
            node("kc", "cache_write", [kc, "kr"], offset="pos"),
            node("vc", "cache_write", [vc, "v"], offset="pos"),
            node("att", "attention", ["qr", "kc", "vc"], heads=H, headDim=D, kvHeads=KV, posOffset="pos"),
            node("o", "matmul", ["att", "w:o_proj"], transB=True),
            node("h1", "add", ["x", "o"]),
            node("h2", "rmsnorm", ["h1", "w:post_attention_layernorm"], eps=eps),
            node("g", "matmul", ["h2", "w:gate_proj"], transB=True),
            node("u", "matmul", ["h2", "w:up_proj"], transB=True),
            node("act", "swiglu", ["g", "u"]),
            node("d", "matmul", ["act", "w:down_proj"], transB=True),
            node("y", "add", ["h1", "d"]),
        ]
        validate(nodes)
        assert features(nodes) == []
        g = {"inputs": {}, "weights": {k: tj(v) for k, v in W.items()}, "nodes": nodes, "outputs": ["y"],
             "bind": {"pos": 0 if prefill else 5}, "session": "layer"}
        if prefill:
            g["retain"] = {"k_cache": "kc", "v_cache": "vc"}
        return g

    # HF Llama decoder layer, float64 (inv_freq / angles float32 as HF's LlamaRotaryEmbedding)
    def hf_layer(x):
        N = x.shape[0]
        X = t64(x)
        Wt = {k: t64(v) for k, v in W.items()}

        def rms(h, w):
            return h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * w

        h = rms(X, Wt["input_layernorm"])
        q = (h @ Wt["q_proj"].T).view(N, H, D).transpose(0, 1)
        k = (h @ Wt["k_proj"].T).view(N, KV, D).transpose(0, 1)
        v = (h @ Wt["v_proj"].T).view(N, KV, D).transpose(0, 1)
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        freqs = torch.arange(N, dtype=torch.int64).float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), -1).to(F64)
        cos, sin = emb.cos(), emb.sin()

        def rot_half(t):
            return torch.cat((-t[..., D // 2:], t[..., :D // 2]), -1)

        q = q * cos + rot_half(q) * sin
        k = k * cos + rot_half(k) * sin
        k = k.repeat_interleave(H // KV, 0)
        v = v.repeat_interleave(H // KV, 0)
        sc = q @ k.transpose(1, 2) / math.sqrt(D)
        sc = sc.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
        a = torch.softmax(sc, -1) @ v
        a = a.transpose(0, 1).reshape(N, H * D)
        h1 = X + a @ Wt["o_proj"].T
        h2 = rms(h1, Wt["post_attention_layernorm"])
        m = (torch.nn.functional.silu(h2 @ Wt["gate_proj"].T) * (h2 @ Wt["up_proj"].T)) @ Wt["down_proj"].T
        return h1 + m

    # the same step through this script's op references (cache + posOffset), as a cross-check
    def op_chain(x, pos, kcache, vcache):
        h = rmsnorm_ref(x, W["input_layernorm"], eps)
        q = npf(h @ t64(W["q_proj"]).T)
        k = npf(h @ t64(W["k_proj"]).T)
        v = npf(h @ t64(W["v_proj"]).T)
        qr = npf(rope_ref(q, D, base, pos))
        kr = npf(rope_ref(k, D, base, pos))
        kcache[pos:pos + x.shape[0]] = kr
        vcache[pos:pos + x.shape[0]] = v
        # attention_ref takes f32 inputs; compare loosely
        a = attention_ref(qr, kcache, vcache, H, D, KV, posOffset=pos)
        h1 = t64(x) + a @ t64(W["o_proj"]).T
        h2 = rmsnorm_ref(npf(h1), W["post_attention_layernorm"], eps)
        m = (torch.nn.functional.silu(h2 @ t64(W["gate_proj"]).T) * (h2 @ t64(W["up_proj"]).T)) @ t64(
            W["down_proj"]).T
        return h1 + m

    xs = [rn(R, (5, C)), rn(R, (1, C)), rn(R, (1, C)), rn(R, (1, C))]
    steps = []
    pos = 0
    kcache = np.zeros((maxLen, KV * D), np.float64)
    vcache = np.zeros((maxLen, KV * D), np.float64)
    for x in xs:
        allx = np.concatenate(xs, 0)[:pos + x.shape[0]]
        y = hf_layer(allx)[pos:]
        y2 = op_chain(x, pos, kcache, vcache)
        assert torch.allclose(y, y2, atol=1e-5), float((y - y2).abs().max())
        steps.append({"bind": {"pos": pos}, "x": tj(x), "y": tj(y)})
        pos += x.shape[0]
    return {"tol": tol(1e-4, 1e-4), "prefill": graph(True), "decode": graph(False), "steps": steps}


# ---------------------------------------------------------------- self-checks of the quantizers


def self_checks():
    # q8_0 by hand: one block
    blk = np.array([0.5, -1.27, 0.01, 1.0] + [0.0] * 28, F32)
    p = pack(blk[None, :], "q8_0")
    raw = np.frombuffer(p.raw, np.uint8)
    d = np.frombuffer(raw[:2].tobytes(), "<f2")[0]
    q = np.frombuffer(raw[2:].tobytes(), np.int8)
    assert abs(float(d) - 0.01) < 1e-5  # amax 1.27 / 127
    assert list(q[:4]) == [50, -127, 1, 100], list(q[:4])
    assert np.allclose(p.deq[0, :4], np.float32(d) * np.array([50, -127, 1, 100], F32))
    # q4_0 by hand: largest |v| is -1.6 (negative) -> d = 0.2, q = trunc(x/d + 8.5)
    blk = np.array([-1.6, 0.8, 0.1, 1.59] + [0.0] * 12 + [0.4, -0.2] + [0.0] * 14, F32)
    p = pack(blk[None, :], "q4_0")
    raw = np.frombuffer(p.raw, np.uint8)
    d = float(np.frombuffer(raw[:2].tobytes(), "<f2")[0])
    assert abs(d - 0.2) < 1e-4, d
    # element 0: -1.6/0.2 = -8 -> 0; 1: 4 -> 12; 2: 0.5 -> 9 (trunc 9.0); 3: 7.95 -> 15 (min); 16: 2 -> 10; 17: -1 -> 7
    assert raw[2] == (0 | (10 << 4)) and raw[3] == (12 | (7 << 4)), (raw[2], raw[3])
    assert raw[4] & 15 == 9 and raw[5] & 15 == 15
    # bf16 agrees with torch's round-to-nearest-even conversion
    a = rn(rng_for("bf16check"), (1000,), 3.0, dec=7)
    assert np.array_equal(pack(a, "bf16").deq, torch.tensor(a).to(torch.bfloat16).float().numpy())
    # Philox: numpy's generator, first raw output, counter incremented before the first block. A plain
    # Philox4x64-10 (Salmon et al. 2011) on counter [step + 1, row, 0, 0], key [seed, 0], word 0, agrees:
    M = (1 << 64) - 1

    def philox4x64_10(ctr, key):
        c, k = list(ctr), list(key)
        for _ in range(10):
            p0, p1 = 0xD2E7470EE14C6C93 * c[0], 0xCA5A826395121157 * c[2]
            c = [(p1 >> 64) ^ c[1] ^ k[0], p1 & M, (p0 >> 64) ^ c[3] ^ k[1], p0 & M]
            k = [(k[0] + 0x9E3779B97F4A7C15) & M, (k[1] + 0xBB67AE8584CAA73B) & M]
        return c

    for s, st, r in [(0, 0, 0), (5, 9, 2), (2 ** 40 + 3, 2 ** 64 - 1, 1)]:
        ctr = [(st + 1) & M, (r + ((st + 1) >> 64)) & M, 0, 0]
        assert philox4x64_10(ctr, [s, 0])[0] == philox_raw(s, st, r)
    # f16 pack is numpy's round-to-nearest-even
    assert np.frombuffer(pack(np.array([1.0 / 3], F32), "f16").raw, "<f2")[0] == np.float16(1.0 / 3)


# ---------------------------------------------------------------- main


def write_json(path, obj, cases_key=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sep = (",", ":")
    if cases_key:
        head = {k: v for k, v in obj.items() if k != cases_key}
        s = json.dumps(head, separators=sep, allow_nan=False)[:-1]
        body = ",\n".join(json.dumps(c, separators=sep, allow_nan=False) for c in obj[cases_key])
        text = f'{s},"{cases_key}":[\n{body}\n]}}\n'
    else:
        text = json.dumps(obj, separators=sep, allow_nan=False) + "\n"
    json.loads(text)
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def main():
    self_checks()
    gens = {
        "add": lambda: gen_binary("add"), "sub": lambda: gen_binary("sub"), "mul": lambda: gen_binary("mul"),
        "scale": gen_scale, "softcap": gen_softcap, "softmax": gen_softmax,
        "swiglu": lambda: gen_gated("swiglu"), "geglu": lambda: gen_gated("geglu"),
        "layernorm": gen_layernorm, "rmsnorm": gen_rmsnorm,
        "matmul": lambda: gen_matmul_linear("matmul"), "linear": lambda: gen_matmul_linear("linear"),
        "embedding": gen_embedding, "slice": gen_slice, "concat": gen_concat, "reshape": gen_reshape,
        "transpose": gen_transpose, "zeros": gen_zeros, "causal_mask": gen_causal_mask,
        "cache_write": gen_cache_write, "conv1d": gen_conv1d, "short_conv": gen_short_conv,
        "rope": gen_rope, "attention": gen_attention, "moe": gen_moe, "sample": gen_sample,
    }
    for op in UNARY:
        gens[op] = (lambda o: (lambda: gen_unary(o)))(op)
    for op in ("reduce_sum", "reduce_mean", "reduce_max", "argmax"):
        gens[op] = (lambda o: (lambda: gen_reduce(o)))(op)
    assert set(gens) == set(OPS), (set(OPS) - set(gens), set(gens) - set(OPS))
    total = 0
    sizes = {}
    for op in sorted(gens):
        cases = gens[op]()
        names = [c["name"] for c in cases]
        assert len(names) == len(set(names)), op
        for c in cases:
            assert all(n["op"] in OPS for n in c["graph"]["nodes"])
        sizes[op] = write_json(os.path.join(ROOT, "goldens", "ops", f"{op}.json"), {"op": op, "cases": cases},
                               "cases")
        total += sizes[op]
        print(f"{op:12s} {len(cases):3d} cases {sizes[op]:8d} bytes")
    n = write_json(os.path.join(ROOT, "goldens", "layer", "llama_layer.json"), llama_layer_golden())
    print(f"{'llama_layer':12s}           {n:8d} bytes")
    total += n
    n = write_json(os.path.join(ROOT, "goldens", "rng.json"), gen_rng())
    total += n
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
