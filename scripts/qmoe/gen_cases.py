#!/usr/bin/python3
"""QMoE case directories with ONNX Runtime 1.30's outputs as expected values.

    /usr/bin/python3 scripts/qmoe/gen_cases.py              # the committed set
    /usr/bin/python3 scripts/qmoe/gen_cases.py --full OUTDIR  # the whole grid (960 cases)
    /usr/bin/python3 scripts/qmoe/gen_cases.py --bench OUTDIR # benchmark shapes
    /usr/bin/python3 scripts/qmoe/gen_cases.py --out DIR --only NAME[,NAME]

Needs scripts/qmoe/setup_ort.sh (onnxruntime-node@1.30.0 in refs/ort, Debian's
python3-onnx and python3-numpy). Deterministic: each case draws from a numpy
Generator seeded with crc32(case name), and ORT runs with one intra-op thread,
so re-running rewrites byte-identical files.

A case directory (format of issue 6, read by `bonfire kernel run PACKAGE --case DIR`):
  case.json   {"op": "QMoE", "attributes": {...}, "inputs": {ROLE: {"file", "dtype",
              "shape"}}, "expected": {"output": {"file": "expected_output.bin", ...}}
              or "expected": {"error": ATTRIBUTE}}; roles as in spec/kernels/qmoe.json
  ROLE.bin    raw little-endian input (float32 or uint8)
  expected_output.bin   ORT's output (float32), absent for refusals
  model.onnx  the one-node model (all six roles are graph inputs) that produced it
goldens/qmoe/cases/INDEX.json lists every committed case with its axes, a note and,
for refusals, what ORT itself does with that attribute value.

The grid of issue 6: bits {4, 8} x activation {relu, swiglu, swiglu-limit,
swiglu-ab} x scales {col, blk16, blk32, blk64, blk128} x k {1, 2, 4} x tokens
{1, 7, 64, 512} x rank {2, 3}. The committed set holds every bits x activation x
scales triple once, with k, tokens and rank chosen greedily so that every pair of
values of any two axes appears (checked below), plus edge and refusal cases.

Expected outputs are ORT's own (graph-input weights: ORT's dequantize + fp32
SGEMM path, see docs/QMOE.md); every output case is also checked against the
float64 rule model in qmoe_common.reference() and generation fails when they
differ by more than the tolerance of docs/QMOE.md.
"""

import argparse
import itertools
import json
import math
import os
import shutil
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmoe_common as qc  # noqa: E402

COMMITTED = os.path.join(qc.ROOT, "goldens", "qmoe", "cases")

BITS = [4, 8]
ACTS = ["relu", "swiglu", "swiglu-limit", "swiglu-ab"]
SCALES = ["col", "blk16", "blk32", "blk64", "blk128"]
KS = [1, 2, 4]
TOKENS = [1, 7, 64, 512]
RANKS = [2, 3]
EXPERTS = 8

# Tolerances (docs/QMOE.md "Tolerance"), all of the form |a - b| <= ATOL + RTOL * |b|:
# ATOL/RTOL bound ORT's output against the float64 rule model (checked here, by
# check_cases.py and probes.py); TEST_ATOL/TEST_RTOL, 10x wider, is the one
# recommended for an fp32 implementation against the expected files (INDEX.json).
ATOL = 1e-5
RTOL = 1e-5
TEST_ATOL = 1e-4
TEST_RTOL = 1e-4


def seed_of(name):
    return zlib.crc32(name.encode())


def dims_for(scales):
    """block, hidden, inter, experts for a scales value: small, but every block
    size sees at least two blocks along hidden (FC1's reduction axis) and, up
    to block 64, along inter (FC2's). Block 128 (hidden 256) uses 5 experts to
    keep the committed set small; the others 8."""
    block = 0 if scales == "col" else int(scales[3:])
    hidden = 256 if block == 128 else 128
    inter = 128 if block >= 64 else 64
    experts = 5 if block == 128 else EXPERTS
    return block, hidden, inter, experts


def act_attrs(act):
    if act == "relu":
        return {"activation_type": "relu"}
    a = {"activation_type": "swiglu", "swiglu_fusion": 1}
    if act == "swiglu-limit":
        a["swiglu_limit"] = 1.5
    elif act == "swiglu-ab":
        a["activation_alpha"] = 1.702
        a["activation_beta"] = 1.0
    return a


def input_shape(tokens, rank, hidden):
    if rank == 2:
        return (tokens, hidden)
    b = {1: 1, 7: 1, 64: 4, 512: 2}.get(tokens)
    if b is None:
        b = 1
    return (b, tokens // b, hidden)


def random_arrays(rng, bits, swiglu, block, experts, hidden, inter, shape, fc1_gain=1.0, logit_std=2.0):
    """Random codes over the full range, inputs N(0, 1), scales around
    1 / (std(code) * sqrt(K)) (uniform jitter 0.5..1.5 per scale) so that FC1
    outputs have std ~fc1_gain and outputs are O(1)."""
    f = 2 if swiglu else 1
    n = 1 << bits
    std_q = math.sqrt((n * n - 1) / 12.0)
    tokens = int(np.prod(shape[:-1]))
    q1 = rng.integers(0, n, (experts, f * inter, hidden), dtype=np.uint8)
    q2 = rng.integers(0, n, (experts, hidden, inter), dtype=np.uint8)
    s1 = fc1_gain / (std_q * math.sqrt(hidden))
    s2 = 2.0 / (std_q * math.sqrt(inter))
    sh1 = (experts, f * inter) + ((hidden // block,) if block else ())
    sh2 = (experts, hidden) + ((inter // block,) if block else ())
    return {
        "input": rng.standard_normal(shape).astype(np.float32),
        "router_probs": (logit_std * rng.standard_normal((tokens, experts))).astype(np.float32),
        "fc1_experts_weights": qc.pack_weights(q1, bits),
        "fc1_scales": (s1 * rng.uniform(0.5, 1.5, sh1)).astype(np.float32),
        "fc2_experts_weights": qc.pack_weights(q2, bits),
        "fc2_scales": (s2 * rng.uniform(0.5, 1.5, sh2)).astype(np.float32),
    }


def grid_case(bits, act, scales, k, tokens, rank):
    """(name, attrs, arrays builder, axes) for one point of the grid."""
    block, hidden, inter, experts = dims_for(scales)
    name = f"b{bits}_{act}_{scales}_k{k}_t{tokens}_r{rank}"
    attrs = {"k": k, "expert_weight_bits": bits, **act_attrs(act)}
    if block:
        attrs["block_size"] = block
    shape = input_shape(tokens, rank, hidden)

    def build():
        rng = np.random.default_rng(seed_of(name))
        return random_arrays(rng, bits, act != "relu", block, experts, hidden, inter, shape,
                             fc1_gain=2.0 if act == "swiglu-limit" else 1.0)

    axes = {"bits": bits, "activation": act, "scales": scales, "k": k, "tokens": tokens, "rank": rank,
            "hidden": hidden, "inter": inter, "experts": experts}
    return {"name": name, "attrs": attrs, "build": build, "axes": axes, "kind": "output"}


def case_bytes(bits, act, scales, k, tokens, rank):
    block, hidden, inter, experts = dims_for(scales)
    f = 2 if act != "relu" else 1
    w = experts * (f * inter * hidden + hidden * inter) * bits // 8
    s = experts * (f * inter * (hidden // block if block else 1) + hidden * (inter // block if block else 1)) * 4
    return w + s + tokens * hidden * 8 + tokens * experts * 4


# The five 512-token grid points (one per scales value; between them every
# activation, both bit widths, every k and both ranks), picked by hand as the
# cheapest such set: 512 tokens cost 0.5-1 MB of input and output each.
LONG = [(4, "relu", "blk128", 1, 512, 3), (8, "swiglu", "col", 2, 512, 2),
        (4, "swiglu-limit", "blk16", 4, 512, 3), (4, "swiglu-ab", "blk32", 1, 512, 2),
        (4, "swiglu", "blk64", 2, 512, 3)]


def covering_subset():
    """Every bits x activation x scales triple once; the LONG points take
    tokens 512, the others k, tokens < 512 and rank chosen greedily (most new
    pairs, then most new triples, then fewest bytes) so that all pairs of
    values of any two of the six axes appear."""
    axes = [BITS, ACTS, SCALES, KS, TOKENS, RANKS]
    combos2 = list(itertools.combinations(range(6), 2))
    combos3 = list(itertools.combinations(range(6), 3))

    def pairs(p):
        return {(i, p[i], j, p[j]) for i, j in combos2}

    def triples(p):
        return {(i, p[i], j, p[j], m, p[m]) for i, j, m in combos3}

    chosen = list(LONG)
    covered = set().union(*(pairs(p) for p in chosen))
    covered3 = set().union(*(triples(p) for p in chosen))
    fixed = {p[:3] for p in chosen}
    for triple in itertools.product(BITS, ACTS, SCALES):
        if triple in fixed:
            continue
        best = None
        for rest in itertools.product(KS, [t for t in TOKENS if t != 512], RANKS):
            p = triple + rest
            key = (len(pairs(p) - covered), len(triples(p) - covered3), -case_bytes(*p))
            if best is None or key > best[0]:
                best = (key, p)
        chosen.append(best[1])
        covered |= pairs(best[1])
        covered3 |= triples(best[1])
    want = {(i, a, j, b) for i, j in combos2 for a in axes[i] for b in axes[j]}
    missing = want - covered
    if missing:
        raise SystemExit(f"gen_cases: the covering subset misses pairs {sorted(missing)[:5]}...")
    order = {t: n for n, t in enumerate(itertools.product(BITS, ACTS, SCALES))}
    return sorted(chosen, key=lambda p: order[p[:3]])


# ----------------------------------------------------------- edge cases ----

def edge_cases():
    cases = []

    def add(name, attrs, build, note, axes=None):
        cases.append({"name": name, "attrs": attrs, "build": build, "note": note,
                      "axes": axes or {}, "kind": "output"})

    def base(name, bits=4, act="swiglu", block=32, experts=8, hidden=64, inter=32, shape=(16, 64), **kw):
        rng = np.random.default_rng(seed_of(name))
        return rng, random_arrays(rng, bits, act != "relu", block, experts, hidden, inter, shape, **kw)

    def ties_all_equal():
        rng, a = base("edge_tie_all_equal")
        a["router_probs"][:] = 0.0
        a["router_probs"][8:] = 1.5  # a different common value: still all equal per row
        return a
    add("edge_tie_all_equal", {"k": 2, "expert_weight_bits": 4, "block_size": 32, **act_attrs("swiglu")},
        ties_all_equal, "every logit of a row equal: the two highest expert indices (7, 6) win, 0.5 each")

    def ties_quantized():
        rng, a = base("edge_tie_quantized", shape=(64, 64))
        a["router_probs"][:] = rng.integers(-2, 3, a["router_probs"].shape).astype(np.float32)
        return a
    add("edge_tie_quantized", {"k": 4, "expert_weight_bits": 4, "block_size": 32, **act_attrs("swiglu")},
        ties_quantized, "integer logits in [-2, 2]: many ties, inside and at the k boundary")

    def inf_rows():
        rng, a = base("edge_inf_logits", act="relu", block=0, shape=(8, 64))
        r = a["router_probs"]
        inf = np.float32(np.inf)
        r[0, :] = -inf                      # all -inf: zero row
        r[1, 3] = inf                       # one +inf: zero row
        r[2, 1] = inf; r[2, 5] = inf        # two +inf: zero row
        r[3, :] = -inf; r[3, 2] = 0.5       # one finite, k=2: the -inf route has weight 0, dropped
        r[4, :] = -inf; r[4, 6] = inf       # +inf among -inf: zero row
        r[5, 0] = -inf                      # one -inf, not selected: normal row
        r[6, :] = -inf; r[6, 1] = 1.0; r[6, 4] = -1.0  # two finite
        return a
    add("edge_inf_logits", {"k": 2, "expert_weight_bits": 4, "activation_type": "relu"}, inf_rows,
        "rows 0, 1, 2, 4 (all -inf, or any +inf) give zero output; row 3: the finite expert with "
        "weight 1, the -inf one dropped; rows 5-7 normal")

    def nan_rows():
        rng, a = base("edge_nan_logits", act="relu", block=0, shape=(6, 64))
        r = a["router_probs"]
        r[0, 0] = np.nan                    # NaN among the first k=2: zero row
        r[1, 1] = np.nan                    # same
        r[2, 5] = np.nan                    # NaN at index >= k: never selected, normal row
        r[3, 2] = np.nan; r[3, 7] = np.nan  # same
        r[4, :] = np.nan                    # all NaN: zero row
        return a
    add("edge_nan_logits", {"k": 2, "expert_weight_bits": 4, "activation_type": "relu"}, nan_rows,
        "NaN logits as ORT's libstdc++ std::partial_sort treats them: a NaN among logits[0..k-1] makes the "
        "row zero (rows 0, 1, 4); a NaN at index >= k is never selected (rows 2, 3); row 5 normal")

    def tiny_weights():
        rng, a = base("edge_tiny_weight", act="relu", block=0, experts=4, shape=(6, 64))
        r = a["router_probs"]
        r[:] = -40.0
        # second-best weight = 1 / (1 + exp(d)) ~ exp(-d)
        for t, w2 in enumerate([5e-9, 9e-9, 1.2e-8, 2e-8, 1e-7, 1e-6]):
            d = math.log((1 - w2) / w2)
            r[t, 0] = 0.0
            r[t, 1] = -d
        a["fc2_scales"][1] *= 1e6  # expert 1's output is huge, so w2 * y2 is visible
        return a
    add("edge_tiny_weight", {"k": 2, "expert_weight_bits": 4, "activation_type": "relu"}, tiny_weights,
        "second route weights 5e-9, 9e-9 (dropped: weight must be > 1e-8) and 1.2e-8, 2e-8, 1e-7, "
        "1e-6 (kept); expert 1's FC2 scales are x1e6 so its share (~1e-2 .. 1) is visible")

    def norm1():
        return base("edge_normalize_1")[1]
    add("edge_normalize_1", {"k": 2, "expert_weight_bits": 4, "block_size": 32, "normalize_routing_weights": 1,
                             **act_attrs("swiglu")}, norm1,
        "normalize_routing_weights=1 computes exactly what 0 does (softmax over the selected k)")

    def k_all():
        return base("edge_k_equals_experts", bits=8, act="relu", block=16, shape=(5, 64))[1]
    add("edge_k_equals_experts", {"k": 8, "expert_weight_bits": 8, "block_size": 16, "activation_type": "relu"},
        k_all, "k = num_experts: softmax over all logits")

    def block0():
        return base("edge_block_size_0", block=0)[1]
    add("edge_block_size_0", {"k": 2, "expert_weight_bits": 4, "block_size": 0, **act_attrs("swiglu")}, block0,
        "block_size=0 given explicitly: column-wise scales (rank 2)")

    def one_block():
        return base("edge_one_block_per_row", block=128, hidden=128, inter=128, shape=(7, 128))[1]
    add("edge_one_block_per_row", {"k": 2, "expert_weight_bits": 4, "block_size": 128, **act_attrs("swiglu")},
        one_block, "block_size = hidden = inter = 128: scales (E, N, 1), one block per row")

    def gptoss():
        return base("edge_swiglu_gptoss", shape=(9, 64), fc1_gain=4.0)[1]
    add("edge_swiglu_gptoss", {"k": 4, "expert_weight_bits": 4, "block_size": 32, "activation_type": "swiglu",
                               "swiglu_fusion": 1, "activation_alpha": 1.702, "activation_beta": 1.0,
                               "swiglu_limit": 7.0}, gptoss,
        "GPT-OSS activation (alpha 1.702, beta 1, limit 7) with FC1 outputs large enough to clamp")

    def many_experts():
        return base("edge_64_experts_k8", act="swiglu", block=16, experts=64, hidden=64, inter=32,
                    shape=(2, 8, 64))[1]
    add("edge_64_experts_k8", {"k": 8, "expert_weight_bits": 4, "block_size": 16, **act_attrs("swiglu")},
        many_experts, "OLMoE-like routing (64 experts, top 8) at a small size, rank-3 input (2, 8, 64)")

    def limit_small():
        return base("edge_swiglu_limit_small", bits=8, block=0, shape=(7, 64), fc1_gain=3.0)[1]
    add("edge_swiglu_limit_small", {"k": 2, "expert_weight_bits": 8, "activation_type": "swiglu",
                                    "swiglu_fusion": 1, "swiglu_limit": 0.25, "activation_alpha": 0.5,
                                    "activation_beta": -0.75}, limit_small,
        "limit 0.25 (most gates and linears clamped), alpha 0.5, negative beta")
    return cases


# -------------------------------------------------------- refusal cases ----

def refusal_cases():
    """One case per kind of value the package refuses, with "expected":
    {"error": ATTRIBUTE}. Shapes are otherwise valid (hidden 64, inter 32,
    4 experts, 2 tokens) so that the attribute is the only thing wrong."""
    cases = []

    def add(name, attrs, error, note, bits=4, fused=None, block=None, inter=32):
        act = attrs.get("activation_type", "relu")
        if fused is None:
            fused = act == "swiglu"
        if block is None:
            block = attrs.get("block_size", 0)

        def build():
            rng = np.random.default_rng(seed_of(name))
            b = bits if bits in (4, 8, 2) else 4
            blk = block if block and block > 0 and 64 % block == 0 and inter % block == 0 else 0
            return random_arrays(rng, b, fused, blk, 4, 64, inter, (2, 64))
        full = {"k": 1, "expert_weight_bits": 4, "activation_type": "relu"}
        full.update(attrs)
        cases.append({"name": name, "attrs": full, "build": build, "error": error, "note": note,
                      "axes": {}, "kind": "refusal"})

    add("refuse_use_sparse_mixer_1", {"use_sparse_mixer": 1, "k": 2}, "use_sparse_mixer",
        "sparse mixer routing is not implemented")
    add("refuse_weights_prepacked_1", {"weights_prepacked": 1}, "weights_prepacked",
        "provider-prepacked weight layout")
    for qt in ["fp4", "nvfp4", "fp8", "wfp4afp8"]:
        add(f"refuse_quant_type_{qt}", {"quant_type": qt}, "quant_type", f"quant_type '{qt}' (only 'int')")
    add("refuse_relu_swiglu_fusion_1", {"swiglu_fusion": 1}, "swiglu_fusion",
        "relu with swiglu_fusion=1 (FC1 weights have inter rows)", fused=False)
    add("refuse_swiglu_fusion_0", {"activation_type": "swiglu", "swiglu_fusion": 0}, "swiglu_fusion",
        "swiglu without interleaved fusion (FC1 weights have 2*inter rows)", fused=True)
    add("refuse_swiglu_fusion_2", {"activation_type": "swiglu", "swiglu_fusion": 2}, "swiglu_fusion",
        "chunked swiglu fusion", fused=True)
    for act in ["gelu", "silu", "identity"]:
        add(f"refuse_activation_{act}", {"activation_type": act}, "activation_type", f"activation '{act}'")
    add("refuse_expert_weight_bits_2", {"expert_weight_bits": 2, "block_size": 32}, "expert_weight_bits",
        "2-bit weights (shapes packed 4 per byte, block 32)", bits=2)
    add("refuse_expert_weight_bits_3", {"expert_weight_bits": 3}, "expert_weight_bits",
        "3-bit weights (shapes as for 4-bit)", bits=3)
    add("refuse_block_size_8", {"block_size": 8}, "block_size", "block size below 16 (scales (E, rows, K/8))")
    add("refuse_block_size_48", {"block_size": 48}, "block_size",
        "block size not a power of two (shapes column-wise)")
    add("refuse_block_size_negative", {"block_size": -16}, "block_size", "negative block size (shapes column-wise)")
    add("refuse_block_size_not_dividing_inter", {"block_size": 64}, "block_size",
        "block 64 divides hidden 64 but not inter 32 (scales as ORT wants them: ceil(32/64) = 1 block)")
    add("refuse_normalize_routing_weights_2", {"normalize_routing_weights": 2}, "normalize_routing_weights",
        "normalize_routing_weights outside {0, 1}")
    add("refuse_k_0", {"k": 0}, "k", "k = 0")
    add("refuse_k_above_experts", {"k": 5}, "k", "k = 5 > 4 experts")
    return cases


def refusal_arrays(c):
    """Adjust shapes of refusal cases where ORT's own shape rules differ
    (scales for a block that does not divide, 2-bit packing)."""
    a = c["build"]()
    attrs = c["attrs"]
    blk = attrs.get("block_size", 0)
    if blk == 64:  # hidden 64 -> 1 block, inter 32 -> ceil(32/64) = 1 block
        e, n = a["fc1_scales"].shape[:2]
        a["fc1_scales"] = a["fc1_scales"].reshape(e, n, -1)[:, :, :1].copy()
        e, h = a["fc2_scales"].shape[:2]
        a["fc2_scales"] = np.ascontiguousarray(
            np.broadcast_to(a["fc2_scales"].reshape(e, h, -1)[:, :, :1], (e, h, 1)))
    return a


# ---------------------------------------------------------------- bench ----

def bench_cases():
    """Benchmark shapes (see docs/QMOE.md "Benchmark shapes"): Qwen1.5-MoE-A2.7B's
    routed experts (hidden 2048, moe_intermediate 1408, 60 experts, top 4) and
    OLMoE-1B-7B's (hidden 2048, intermediate 1024, 64 experts, top 8), both
    SwiGLU (silu(gate) * up = swiglu alpha 1, beta 0, interleaved), 4-bit
    symmetric with block 32 (ONNX Runtime GenAI's int4 QMoE default), at
    T = 1 (decode) and T = 512 (prefill). Each case also gets model_const.onnx
    (weights as initializers, external data = the .bin files)."""
    out = []
    for model, hidden, inter, experts, k in [("qwen", 2048, 1408, 60, 4), ("olmoe", 2048, 1024, 64, 8)]:
        for tokens in [1, 512]:
            name = f"bench_{model}_t{tokens}"
            attrs = {"k": k, "expert_weight_bits": 4, "block_size": 32, **act_attrs("swiglu")}

            def build(name=name, model=model, hidden=hidden, inter=inter, experts=experts, tokens=tokens):
                # weights from the model's seed (the same for T=1 and T=512), tokens from the case's
                a = random_arrays(np.random.default_rng(seed_of(model)), 4, True, 32, experts, hidden, inter,
                                  (1, hidden))
                rng = np.random.default_rng(seed_of(name))
                a["input"] = rng.standard_normal((tokens, hidden)).astype(np.float32)
                a["router_probs"] = (2.0 * rng.standard_normal((tokens, experts))).astype(np.float32)
                return a
            out.append({"name": name, "attrs": attrs, "build": build, "kind": "bench",
                        "axes": {"bits": 4, "activation": "swiglu", "scales": "blk32", "k": k, "tokens": tokens,
                                 "rank": 2, "hidden": hidden, "inter": inter, "experts": experts}})
    return out


# ---------------------------------------------------------------- driver ----

def write_all(cases, outdir, check=True, const_models=False, verbose=True):
    os.makedirs(outdir, exist_ok=True)
    index = []
    jobs = []
    for c in cases:
        d = os.path.join(outdir, c["name"])
        if os.path.isdir(d):
            shutil.rmtree(d)
        arrays = refusal_arrays(c) if c["kind"] == "refusal" else c["build"]()
        case = qc.write_case(d, c["attrs"], arrays, error=c.get("error"))
        qc.write_models(d, case, const=const_models)
        c["dir"] = d
        jobs.append({"case": d, "model": os.path.join(d, "model.onnx"),
                     "out": os.path.join(d, "expected_output.bin")})
    results = qc.run_ort(jobs, threads=1)
    worst = (0.0, None)
    failures = []
    for c, r in zip(cases, results):
        entry = {"name": c["name"], "kind": "refusal" if c["kind"] == "refusal" else "output"}
        entry.update(c.get("axes", {}))
        if c.get("note"):
            entry["note"] = c["note"]
        d = c["dir"]
        if c["kind"] == "refusal":
            entry["error"] = c["error"]
            if r["ok"]:
                entry["ort"] = "accepts and computes (the package refuses)"
                os.remove(os.path.join(d, "expected_output.bin"))
            else:
                entry["ort"] = "refuses: " + short_error(r["error"])
        else:
            if not r["ok"]:
                failures.append(f"{c['name']}: ORT failed: {r['error']}")
                continue
            if check:
                case, arrays, y = qc.read_case(d)
                ref = qc.reference(arrays, case["attributes"])
                d_abs = np.abs(y.astype(np.float64) - ref)
                bound = ATOL + RTOL * np.abs(ref)
                ratio = float((d_abs / bound).max(initial=0.0))
                entry["max_abs_err_vs_rules"] = float(d_abs.max(initial=0.0))
                if ratio > worst[0]:
                    worst = (ratio, c["name"])
                if ratio > 1.0:
                    failures.append(f"{c['name']}: ORT differs from the rule model by {d_abs.max():.3g} "
                                    f"({ratio:.2f} x tolerance)")
        index.append(entry)
        if verbose:
            print(f"  {c['name']}: " + ("error " + entry["error"] + " / ORT " + entry["ort"]
                                       if c["kind"] == "refusal" else "ok"))
    return index, failures, worst


def short_error(msg):
    """ORT's message without the source path and function signature."""
    msg = msg.replace("\n", " ").strip()
    if "Status Message: " in msg:
        return msg.split("Status Message: ", 1)[1].strip()[:200]
    if " was false." in msg:
        pre, post = msg.split(" was false.", 1)
        cond = pre.rsplit("] ", 1)[-1] if "] " in pre else pre.rsplit(") ", 1)[-1]
        return (post.strip() or cond + " was false")[:200]
    return msg[:200]


def dir_bytes(path):
    total = 0
    for dp, _, fs in os.walk(path):
        for f in fs:
            total += os.path.getsize(os.path.join(dp, f))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=COMMITTED, help="output directory (default goldens/qmoe/cases)")
    ap.add_argument("--full", metavar="OUTDIR", help="write the whole grid of issue 6 into OUTDIR")
    ap.add_argument("--bench", metavar="OUTDIR", help="write the benchmark shapes into OUTDIR")
    ap.add_argument("--only", help="comma-separated case names (with the committed set)")
    ap.add_argument("--no-check", action="store_true", help="skip the rule-model comparison")
    args = ap.parse_args()

    if args.bench:
        cases = bench_cases()
        print(f"gen_cases: {len(cases)} bench cases into {args.bench}")
        index, failures, worst = write_all(cases, args.bench, check=False, const_models=True)
        finish(args.bench, index, failures, worst, write_index=True)
        return
    if args.full:
        cases = [grid_case(*p) for p in itertools.product(BITS, ACTS, SCALES, KS, TOKENS, RANKS)]
        print(f"gen_cases: full grid, {len(cases)} cases into {args.full}")
        index, failures, worst = [], [], (0.0, None)
        for i in range(0, len(cases), 40):  # batches: bounded memory, progress
            ix, fl, w = write_all(cases[i:i + 40], args.full, check=not args.no_check, verbose=False)
            index += ix
            failures += fl
            worst = max(worst, w, key=lambda t: t[0])
            print(f"  {min(i + 40, len(cases))}/{len(cases)}", flush=True)
        finish(args.full, index, failures, worst, write_index=True)
        return

    cases = [grid_case(*p) for p in covering_subset()] + edge_cases() + refusal_cases()
    if args.only:
        names = set(args.only.split(","))
        cases = [c for c in cases if c["name"] in names]
        if not cases:
            sys.exit("gen_cases: no such case")
    elif os.path.abspath(args.out) == os.path.abspath(COMMITTED) and os.path.isdir(args.out):
        for n in os.listdir(args.out):  # the committed set is rewritten whole
            p = os.path.join(args.out, n)
            if os.path.isdir(p):
                shutil.rmtree(p)
    print(f"gen_cases: {len(cases)} cases into {args.out}")
    index, failures, worst = write_all(cases, args.out, check=not args.no_check)
    finish(args.out, index, failures, worst, write_index=not args.only)


def finish(outdir, index, failures, worst, write_index):
    if write_index:
        with open(os.path.join(outdir, "INDEX.json"), "w") as f:
            json.dump({"generator": "scripts/qmoe/gen_cases.py", "reference": "onnxruntime-node 1.30.0 (CPU)",
                       "tolerance": {"atol": TEST_ATOL, "rtol": TEST_RTOL,
                                     "rule": "|out - expected| <= atol + rtol * |expected|, elementwise",
                                     "why": "docs/QMOE.md, Tolerance"},
                       "ort_vs_float64_rules": {"atol": ATOL, "rtol": RTOL},
                       "cases": index}, f, indent=1)
            f.write("\n")
    n_out = sum(1 for e in index if e["kind"] == "output")
    n_ref = sum(1 for e in index if e["kind"] == "refusal")
    print(f"gen_cases: {n_out} output cases, {n_ref} refusal cases, {dir_bytes(outdir) / 1e6:.2f} MB in {outdir}")
    if worst[1]:
        print(f"gen_cases: worst ORT vs rule model: {worst[0]:.3f} x tolerance ({worst[1]})")
    if failures:
        for f in failures:
            print("FAIL", f)
        sys.exit(1)


if __name__ == "__main__":
    main()
