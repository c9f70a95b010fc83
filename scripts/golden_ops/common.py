"""Shared pieces: value formatting, GGUF packing, graph-case builders, tolerances."""

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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
MANIFEST = json.load(open(os.path.join(ROOT, "spec", "ops-v3.json")))
OPS = {o["op"]: o for o in MANIFEST["ops"]}
# Protocol extension ops (docs/PROTOCOL-EXTENSIONS.md), in the manifest's shape; golden_ops/ext_ops.py fills it.
EXT_OPS = {}
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
        if n["op"] in EXT_OPS:
            fs.update(EXT_OPS[n["op"]]["features"])  # an extension op always uses its feature
    return sorted(fs)


def validate(nodes):
    for n in nodes:
        spec = OPS[n["op"]] if n["op"] in OPS else EXT_OPS[n["op"]]
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


def graph_call(nodes, inputs, expected, weights=None, bind=None, retain=None, in_session=False):
    """The graph call of a case (validated), in the key order the goldens use."""
    validate(nodes)
    g = {"inputs": {k: tj(v) for k, v in inputs.items()}}
    if weights:
        g["weights"] = {k: tj(v) for k, v in weights.items()}
    g["nodes"] = nodes
    g["outputs"] = list(expected.keys())
    if bind is not None:
        g["bind"] = bind
    if in_session or retain is not None:
        g["session"] = "t"
    if retain is not None:
        g["retain"] = retain
    return g


def mk(name, nodes, inputs, expected, tl, weights=None, packed=None, session=None, expected_session=None,
       bind=None, retain=None):
    g = graph_call(nodes, inputs, expected, weights, bind, retain,
                   in_session=session is not None or expected_session is not None)
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
