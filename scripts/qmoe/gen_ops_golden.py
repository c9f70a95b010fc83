#!/usr/bin/env python3
"""goldens/ops/qmoe.json: graph-level golden cases for the QMoE graph ops
(the extension op `qmoe` and moe's layout "qmoe"), taken from committed ONNX
Runtime 1.30 cases in goldens/qmoe/cases: the expected outputs are ORT's own
(scripts/qmoe/gen_cases.py wrote them). tests/ops_golden_test.cpp runs them
like every other op golden; together they exercise every param of `qmoe`
and both features. Tolerance 1e-4 + 1e-4 |expected| (docs/QMOE.md).

    /usr/bin/python3 scripts/qmoe/gen_ops_golden.py
"""

import base64
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "goldens" / "qmoe" / "cases"
ROLES = ["input", "router_probs", "fc1_experts_weights", "fc1_scales", "fc2_experts_weights", "fc2_scales"]
NP = {"float32": np.float32, "uint8": np.uint8}
SHORT = {"float32": "f32", "uint8": "u8"}
TOL = {"atol": 1e-4, "rtol": 1e-4}


def load(name):
    d = CASES / name
    c = json.loads((d / "case.json").read_text())
    arrays = {}
    for role in ROLES:
        s = c["inputs"][role]
        arrays[role] = np.fromfile(d / s["file"], dtype=NP[s["dtype"]]).reshape(s["shape"])
    e = c["expected"]["output"]
    want = np.fromfile(d / e["file"], dtype=np.float32).reshape(e["shape"])
    return c["attributes"], arrays, want


def f32_list(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32).ravel()]


def case(name, source, op, params, flatten=False):
    attrs, a, want = load(source)
    x = a["input"]
    if flatten:
        x = x.reshape(-1, x.shape[-1])
    packed = {role: {"dtype": SHORT[str(a[role].dtype)], "shape": list(a[role].shape),
                     "b64": base64.b64encode(np.ascontiguousarray(a[role]).tobytes()).decode()}
              for role in ROLES[2:]}
    graph = {
        "inputs": {"x": {"shape": list(x.shape), "data": f32_list(x)},
                   "logits": {"shape": list(a["router_probs"].shape), "data": f32_list(a["router_probs"])}},
        "nodes": [{"id": "y", "op": op, "in": ["x", "logits"] + ["w:" + r for r in ROLES[2:]],
                   "params": params(attrs)}],
        "outputs": ["y"],
    }
    feature = "ext.qmoe" if op == "qmoe" else "ext.moe.qmoe"
    return {"name": name, "_source": f"goldens/qmoe/cases/{source} (ONNX Runtime 1.30's output)", "tol": TOL,
            "features": [feature], "graph": graph, "packed": packed,
            "expected": {"y": {"shape": list(want.reshape(x.shape).shape), "data": f32_list(want)}}}


def main():
    explicit_defaults = {"quant_type": "int", "use_sparse_mixer": 0, "weights_prepacked": -1}
    cases = [
        # GPT-OSS's activation: alpha, beta, limit; the default-valued attributes given explicitly.
        case("gptoss_blk32", "edge_swiglu_gptoss", "qmoe", lambda at: {**at, **explicit_defaults}),
        case("normalize_1", "edge_normalize_1", "qmoe", lambda at: at),
        case("relu_col_decode", "b4_relu_col_k4_t1_r2", "qmoe", lambda at: at),
        # moe with layout "qmoe": column-wise and block-wise.
        case("moe_layout_col", "edge_block_size_0", "moe",
             lambda at: {"topK": at["k"], "normalize": True, "layout": "qmoe"}),
        case("moe_layout_blk16_decode", "b4_swiglu_blk16_k1_t1_r3", "moe",
             lambda at: {"topK": at["k"], "normalize": True, "layout": "qmoe"}, flatten=True),
    ]
    out = {"op": "qmoe", "_note": __doc__.strip().splitlines()[0], "cases": cases}
    path = ROOT / "goldens" / "ops" / "qmoe.json"
    path.write_text(json.dumps(out) + "\n")
    print(path, path.stat().st_size, "bytes,", len(cases), "cases")


if __name__ == "__main__":
    main()
