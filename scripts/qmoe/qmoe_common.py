"""Shared helpers for the QMoE reference scripts (gen_cases.py, probes.py,
check_cases.py, bench): writing case directories in bonfire's format, building
single-node com.microsoft QMoE models with python3-onnx, running them on ONNX
Runtime through scripts/qmoe/run_ort.mjs, and a numpy model of the rules in
docs/QMOE.md ("Rules found by probing ONNX Runtime 1.30").

Python: Debian's /usr/bin/python3 with python3-numpy and python3-onnx
(scripts/qmoe/setup_ort.sh installs both and onnxruntime-node).
"""

import json
import os
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUN_ORT = os.path.join(HERE, "run_ort.mjs")

# ORT's QMoE contrib-op input list (com.microsoft, since version 1), in order.
# Only the first seven are used here; "fc1_experts_bias" is left empty ("").
ORT_INPUTS = [
    "input", "router_probs",
    "fc1_experts_weights", "fc1_scales", "fc1_experts_bias",
    "fc2_experts_weights", "fc2_scales", "fc2_experts_bias",
    "fc3_experts_weights", "fc3_scales", "fc3_experts_bias",
    "fc1_zero_points", "fc2_zero_points", "fc3_zero_points",
    "router_weights",
]
# The roles of spec/kernels/qmoe.json's "inputs", in the package's order.
ROLES = ["input", "router_probs", "fc1_experts_weights", "fc1_scales",
         "fc2_experts_weights", "fc2_scales"]
# Roles that a real model stores as constant initializers.
WEIGHT_ROLES = ["fc1_experts_weights", "fc1_scales", "fc2_experts_weights", "fc2_scales"]

FLOAT_ATTRS = {"activation_alpha", "activation_beta", "swiglu_limit"}
STRING_ATTRS = {"activation_type", "quant_type"}

NP_DTYPE = {"float32": np.float32, "uint8": np.uint8, "float16": np.float16}


# ---------------------------------------------------------------- packing ----

def pack_weights(q, bits):
    """q: uint8 codes (E, N, K) in [0, 2**bits). Returns the raw packed
    tensor (E, N, K * bits / 8): for 4 bits, column 2j in the low nibble
    and column 2j+1 in the high nibble of byte j."""
    q = np.asarray(q, dtype=np.uint8)
    if bits == 8:
        return q.copy()
    if bits == 4:
        return (q[..., 0::2] & 0x0F) | ((q[..., 1::2] & 0x0F) << 4)
    if bits == 2:
        return (q[..., 0::4] & 3) | ((q[..., 1::4] & 3) << 2) | ((q[..., 2::4] & 3) << 4) | ((q[..., 3::4] & 3) << 6)
    raise ValueError(bits)


def unpack_weights(packed, bits):
    packed = np.asarray(packed, dtype=np.uint8)
    if bits == 8:
        return packed.copy()
    if bits == 4:
        q = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), np.uint8)
        q[..., 0::2] = packed & 0x0F
        q[..., 1::2] = packed >> 4
        return q
    raise ValueError(bits)


def dequant(packed, scales, bits, block):
    """Rule Q: w[e, n, c] = scale * (code - midpoint), midpoint 2**(bits-1);
    scale = scales[e, n] (column-wise, block 0) or scales[e, n, c // block]."""
    q = unpack_weights(packed, bits).astype(np.float64)
    w = q - float(1 << (bits - 1))
    s = np.asarray(scales, dtype=np.float64)
    if block:
        s = np.repeat(s, block, axis=2)[:, :, : w.shape[2]]
        return w * s
    if s.ndim == 3:  # (E, N, 1): one block per row
        s = s[:, :, 0]
    return w * s[:, :, None]


# ---------------------------------------------------------- the rule model ----

def route(logits, k):
    """Rules R1-R8: per token, the k largest logits (ties: higher expert index
    first), softmax over those k only (float32, max-subtracted), and a route is
    dropped unless its weight > 1e-8 (NaN weights from inf logits drop too);
    NaN logits as ORT's std::partial_sort (libstdc++) treats them.
    Returns a list per token of (expert, weight) kept, in selection order."""
    logits = np.asarray(logits, dtype=np.float32)
    out = []
    one = np.float32(1.0)
    for row in logits:
        if np.isnan(row[:k]).any():  # rule R8: a NaN among the first k logits is always selected
            out.append([])
            continue
        cand = [j for j in range(len(row)) if not np.isnan(row[j])]  # later NaNs are never selected
        order = sorted(cand, key=lambda j: (float(row[j]), j), reverse=True)[:k]
        vals = [row[j] for j in order]
        m = vals[0]
        with np.errstate(invalid="ignore", over="ignore"):
            e = [np.float32(np.exp(np.float32(v - m))) for v in vals]
            s = np.float32(0.0)
            for x in e:
                s = np.float32(s + x)
            inv = np.float32(0.0) if s == 0 else np.float32(one / s)
            w = [np.float32(x * inv) for x in e]
        out.append([(order[j], float(w[j])) for j in range(k) if w[j] > np.float32(1e-8)])
    return out


def activation(h, attrs):
    """Rules A1-A3. h: (..., fc1_rows) float64."""
    act = attrs.get("activation_type", "relu")
    if act == "relu":
        return np.maximum(h, 0.0)
    if act == "swiglu":
        alpha = float(attrs.get("activation_alpha", 1.0))
        beta = float(attrs.get("activation_beta", 0.0))
        limit = float(attrs.get("swiglu_limit", np.inf))
        g = np.minimum(h[..., 0::2], limit)          # gate: even rows, clamped above only
        lin = np.clip(h[..., 1::2], -limit, limit)    # linear: odd rows, clamped both sides
        return g * (1.0 / (1.0 + np.exp(-alpha * g))) * (lin + beta)
    raise ValueError(act)


def reference(arrays, attrs):
    """The whole op per docs/QMOE.md, in float64 from the float32/uint8 inputs."""
    bits = int(attrs.get("expert_weight_bits", 4))
    block = int(attrs.get("block_size", 0))
    k = int(attrs.get("k", 1))
    x = np.asarray(arrays["input"], dtype=np.float32)
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden).astype(np.float64)
    w1 = dequant(arrays["fc1_experts_weights"], arrays["fc1_scales"], bits, block)
    w2 = dequant(arrays["fc2_experts_weights"], arrays["fc2_scales"], bits, block)
    routes = route(arrays["router_probs"], k)
    out = np.zeros_like(x2)
    for t, rs in enumerate(routes):
        for e, wt in rs:
            h = w1[e] @ x2[t]
            a = activation(h, attrs)
            out[t] += wt * (w2[e] @ a)
    return out.reshape(x.shape)


# ------------------------------------------------------------ case files ----

def write_case(case_dir, attrs, arrays, expected_output=None, error=None):
    """Writes DIR/case.json and the raw input files (and expected_output.bin)."""
    os.makedirs(case_dir, exist_ok=True)
    inputs = {}
    for role in ROLES:
        a = np.ascontiguousarray(arrays[role])
        dtype = "uint8" if a.dtype == np.uint8 else ("float16" if a.dtype == np.float16 else "float32")
        a = a.astype(NP_DTYPE[dtype], copy=False)
        fname = role + ".bin"
        a.astype(a.dtype.newbyteorder("<"), copy=False).tofile(os.path.join(case_dir, fname))
        inputs[role] = {"file": fname, "dtype": dtype, "shape": list(a.shape)}
    case = {"op": "QMoE", "attributes": clean_attrs(attrs), "inputs": inputs}
    if error is not None:
        case["expected"] = {"error": error}
    else:
        shape = list(np.asarray(arrays["input"]).shape)
        case["expected"] = {"output": {"file": "expected_output.bin", "dtype": "float32", "shape": shape}}
        if expected_output is not None:
            np.asarray(expected_output, dtype="<f4").reshape(shape).tofile(
                os.path.join(case_dir, "expected_output.bin"))
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    return case


def clean_attrs(attrs):
    out = {}
    for k in sorted(attrs):
        v = attrs[k]
        if k in FLOAT_ATTRS:
            v = float(v)
        elif k not in STRING_ATTRS:
            v = int(v)
        out[k] = v
    return out


def read_case(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    arrays = {}
    for role, t in case["inputs"].items():
        a = np.fromfile(os.path.join(case_dir, t["file"]), dtype=np.dtype(NP_DTYPE[t["dtype"]]).newbyteorder("<"))
        arrays[role] = a.reshape(t["shape"])
    exp = None
    out = case.get("expected", {}).get("output")
    if out:
        p = os.path.join(case_dir, out["file"])
        if os.path.exists(p):
            exp = np.fromfile(p, dtype="<f4").reshape(out["shape"])
    return case, arrays, exp


# ----------------------------------------------------------------- models ----

def build_model(case, const_dir=None, opset=17):
    """A one-node com.microsoft QMoE model whose graph inputs are named by
    role. With const_dir, the weight roles become initializers whose data is
    external: the raw .bin files of the case directory (so the model file stays
    tiny and ORT takes its constant-weight (prepack) paths)."""
    from onnx import TensorProto, helper

    tp = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "float16": TensorProto.FLOAT16}
    ins = case["inputs"]
    attrs = {}
    for k, v in case["attributes"].items():
        attrs[k] = float(v) if k in FLOAT_ATTRS else v
    node_inputs = ["input", "router_probs", "fc1_experts_weights", "fc1_scales", "",
                   "fc2_experts_weights", "fc2_scales"]
    node = helper.make_node("QMoE", node_inputs, ["output"], domain="com.microsoft", name="qmoe", **attrs)
    graph_inputs, inits = [], []
    for role in ROLES:
        t = ins[role]
        if const_dir is not None and role in WEIGHT_ROLES:
            init = TensorProto()
            init.name = role
            init.data_type = tp[t["dtype"]]
            init.dims.extend(t["shape"])
            init.data_location = TensorProto.EXTERNAL
            size = os.path.getsize(os.path.join(const_dir, t["file"]))
            for key, val in (("location", t["file"]), ("offset", "0"), ("length", str(size))):
                e = init.external_data.add()
                e.key, e.value = key, val
            inits.append(init)
        else:
            graph_inputs.append(helper.make_tensor_value_info(role, tp[t["dtype"]], t["shape"]))
    out_dtype = tp[ins["input"]["dtype"]]
    graph = helper.make_graph([node], "qmoe", graph_inputs,
                              [helper.make_tensor_value_info("output", out_dtype, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="bonfire-qmoe")
    model.ir_version = 8
    return model.SerializeToString()


def write_models(case_dir, case=None, const=False):
    if case is None:
        with open(os.path.join(case_dir, "case.json")) as f:
            case = json.load(f)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(build_model(case))
    if const:
        with open(os.path.join(case_dir, "model_const.onnx"), "wb") as f:
            f.write(build_model(case, const_dir=case_dir))


# -------------------------------------------------------------------- ORT ----

def run_ort(jobs, threads=1, reps=1):
    """jobs: list of dicts {case, model?, out?}. Returns run_ort.mjs's result
    objects in order."""
    if not jobs:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(jobs, f)
        path = f.name
    try:
        p = subprocess.run(["node", RUN_ORT, "--batch", path, "--threads", str(threads), "--reps", str(reps)],
                           capture_output=True, text=True)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise RuntimeError("run_ort.mjs failed: " + p.stderr.strip())
    res = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if len(res) != len(jobs):
        raise RuntimeError(f"run_ort.mjs returned {len(res)} results for {len(jobs)} jobs: {p.stderr.strip()}")
    return res


def run_arrays(attrs, arrays, const=False, threads=1, keep_dir=None):
    """Builds a temporary case from arrays, runs it on ORT; returns
    (output array or None, error string or None)."""
    d = keep_dir or tempfile.mkdtemp(prefix="qmoe_")
    case = write_case(d, attrs, arrays)
    write_models(d, case, const=const)
    model = os.path.join(d, "model_const.onnx" if const else "model.onnx")
    out = os.path.join(d, "out", "ort_output.bin")
    r = run_ort([{"case": d, "model": model, "out": out}], threads=threads)[0]
    if not r["ok"]:
        return None, r["error"]
    y = np.fromfile(out, dtype="<f4").reshape(r["shape"])
    if keep_dir is None:
        import shutil
        shutil.rmtree(d, ignore_errors=True)
    return y, None


# ------------------------------------------------------------ comparisons ----

def max_err(y, ref):
    """(max |y - ref|, max |y - ref| / (1 + |ref|)) over finite reference values."""
    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    d = np.abs(y - ref)
    return float(d.max(initial=0.0)), float((d / (1.0 + np.abs(ref))).max(initial=0.0))
