#!/usr/bin/env python3
"""Tiny IR test models with a PyTorch reference (goldens/ir_models/<name>/).

Each model is a hand-written IR document (docs/IR.md) plus seeded random f32
weights; together the three documents use all 31 op kinds. The reference is
an interpreter of docs/IR.md written here from the text of the page, in
float64 torch with plain loops for the scans and recurrences; it never calls
bonfire. It runs the whole sequence from position 0 for every step (so it
keeps no state between steps: the session's state handling is checked
against a recomputation, not against a second copy of itself).

For each model it writes bonfire.ir.json, model.safetensors and
expected.json: {"prompt": 7 ids, "prefill_logits": the last position's
logits after the prompt, "steps": [{"token", "logits"}] for 5 greedy decode
steps (each token is the argmax of the previous logits, at the next
position)}. tests/ir_models_test.cpp runs them through the lowering.

Run with /usr/bin/python3 (numpy and torch):
    /usr/bin/python3 scripts/gen_ir_model_goldens.py
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from modelwriter.formats import write_safetensors  # noqa: E402

OUT = ROOT / "goldens" / "ir_models"
PROMPT_LEN = 7
DECODE_STEPS = 5
D = 32
VOCAB = 64
CTX = 64

torch.set_default_dtype(torch.float64)


def per_layer(*v):
    return {"per_layer": list(v)}


# ---------------------------------------------------------------------------
# The reference: docs/IR.md, op by op
# ---------------------------------------------------------------------------

def _softplus(x):
    return x if x > 20 else math.log1p(math.exp(x))


def _sigmoid(x):
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


# The functions of the expression language (docs/IR.md §10), on floats.
EXPR_FUNCS = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x),
    "tanh": math.tanh, "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "softplus": _softplus,
    "relu": lambda x: max(x, 0.0), "abs": abs, "min": min, "max": max, "pow": math.pow,
}


def compile_expr(text):
    # The documents use the subset of the language that is also Python:
    # + - * / comparisons, `A if C else B`, function calls.
    return compile(text, "<expr>", "eval")


def run_expr(code, env):
    return float(eval(code, {"__builtins__": {}}, {**EXPR_FUNCS, **env}))


def statement(text):
    name, expr = text.split("=", 1)
    return name.strip(), compile_expr(expr.strip())


def gelu(x, approx):
    if approx == "tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def rmsnorm_rows(x, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def rope(x, heads, head_dim, n_rot, pairing, theta, freq_scale, factors, attn_factor, pos0=0):
    T = x.shape[0]
    y = x.reshape(T, heads, head_dim).clone()
    half = n_rot // 2
    j = torch.arange(half, dtype=torch.float64)
    f = torch.tensor(factors, dtype=torch.float64) if factors is not None else torch.ones(half)
    inv = theta ** (-2 * j / n_rot) * freq_scale / f
    ang = (pos0 + torch.arange(T, dtype=torch.float64))[:, None] * inv[None, :]  # [T, half]
    cos = (torch.cos(ang) * attn_factor)[:, None, :]
    sin = (torch.sin(ang) * attn_factor)[:, None, :]
    if pairing == "neox":
        ia, ib = torch.arange(half), torch.arange(half) + half
    else:
        ia, ib = torch.arange(half) * 2, torch.arange(half) * 2 + 1
    a, b = y[:, :, ia].clone(), y[:, :, ib].clone()
    y[:, :, ia] = a * cos - b * sin
    y[:, :, ib] = b * cos + a * sin
    return y.reshape(T, heads * head_dim)


def alibi_slopes(n):
    # BLOOM's build_alibi_tensor slopes.
    p = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(p) - 3)))
    slopes = [base ** k for k in range(1, p + 1)]
    if p != n:
        extra = 2 ** (-(2 ** -(math.log2(2 * p) - 3)))
        slopes += [extra ** k for k in range(1, 2 * min(p, n - p) + 1, 2)]
    return slopes


def attend(q, k, v, scale, causal=True, window=0, softcap=0.0, alibi_slope=None):
    """One head: q [T, dk], k [S, dk], v [S, dv]; positions from 0."""
    T, S = q.shape[0], k.shape[0]
    s = (q @ k.T) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    t_pos = torch.arange(T)[:, None]
    s_pos = torch.arange(S)[None, :]
    if alibi_slope is not None:
        s = s + alibi_slope * (s_pos - t_pos).to(torch.float64)
    ok = torch.ones(T, S, dtype=torch.bool)
    if causal:
        ok &= s_pos <= t_pos
    if window > 0:
        ok &= s_pos > t_pos - window
    s = s.masked_fill(~ok, float("-inf"))
    return torch.softmax(s, -1) @ v


class Reference:
    def __init__(self, doc, weights):
        self.doc = doc
        self.w = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)).to(torch.float64) for k, v in weights.items()}
        self.n_layers = doc["model"]["n_layers"]

    # --- fields -----------------------------------------------------------
    def at(self, node, key, default=None):
        if key not in node:
            return default
        v = node[key]
        if isinstance(v, dict) and "per_layer" in v:
            return v["per_layer"][max(self.layer, 0)]
        return v

    def weight(self, name, expert=None):
        name = name.replace("{i}", str(self.wset))
        if expert is not None:
            name = name.replace("{e}", str(expert))
        return self.w[name]

    # --- the walk -----------------------------------------------------------
    def forward(self, tokens):
        """Logits of every position of `tokens`, run from position 0."""
        self.T = len(tokens)
        self.env = {"tokens": torch.tensor(tokens, dtype=torch.long)}
        self.layer, self.wset = -1, 0
        for node in self.doc["embed"]["nodes"]:
            self.node(node)
        block = self.doc["block"]
        applications = [0] * len(block["nodes"])
        for l in range(self.n_layers):
            self.layer = l
            for i, node in enumerate(block["nodes"]):
                if not self.at(node, "apply", True):
                    continue
                if node.get("tensor_index") == "application":
                    self.wset = applications[i]
                elif "weight_index" in block:
                    self.wset = block["weight_index"]["per_layer"][l]
                else:
                    self.wset = l
                applications[i] += 1
                self.node(node)
        self.layer, self.wset = -1, 0
        for node in self.doc["head"]["nodes"]:
            self.node(node)
        return self.env["logits"]

    def slot(self, name):
        return next(s for s in self.doc["block"]["state"] if s["name"] == name)

    def node(self, n):
        op = n["op"]
        ins = [self.env[name] for name in n["in"]]
        outs = n["out"] if isinstance(n["out"], list) else [n["out"]]
        fn = getattr(self, "op_" + op)
        res = fn(n, ins)
        if not isinstance(res, tuple):
            res = (res,)
        assert len(res) == len(outs), op
        for name, v in zip(outs, res):
            self.env[name] = v

    # --- ops without state ----------------------------------------------------
    def op_embedding(self, n, ins):
        return self.weight(n["weight"])[ins[0]]

    def op_pos_embedding(self, n, ins):
        return self.weight(n["weight"])[0:self.T]

    def op_linear(self, n, ins):
        w = self.weight(n["tied_to"] if "tied_to" in n else n["weight"])
        y = ins[0] @ w.T
        if n.get("bias"):
            y = y + self.weight(n["bias"])
        return y

    def op_scale(self, n, ins):
        y = ins[0] * self.weight(n["weight"])
        if n.get("bias"):
            y = y + self.weight(n["bias"])
        return y

    def op_split(self, n, ins):
        x = ins[0]
        sizes, g = n["sizes"], n.get("groups", 1)
        xg = x.reshape(self.T, g, sum(sizes))
        outs, off = [], 0
        for s in sizes:
            outs.append(xg[:, :, off:off + s].reshape(self.T, g * s))
            off += s
        return tuple(outs)

    def op_rmsnorm(self, n, ins):
        x = ins[0]
        w = self.weight(n["weight"]) + self.at(n, "weight_offset", 0.0)
        g = self.at(n, "group")
        eps = self.at(n, "eps")
        if g:
            return (rmsnorm_rows(x.reshape(self.T, -1, g), eps) * w).reshape(self.T, -1)
        return rmsnorm_rows(x, eps) * w

    def op_layernorm(self, n, ins):
        x = ins[0]
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.at(n, "eps")) * self.weight(n["weight"]) + self.weight(n["bias"])

    def op_gelu(self, n, ins):
        return gelu(ins[0], self.at(n, "approx"))

    def op_silu(self, n, ins):
        return ins[0] * torch.sigmoid(ins[0])

    def op_sigmoid(self, n, ins):
        return torch.sigmoid(ins[0])

    def op_relu(self, n, ins):
        return torch.clamp(ins[0], min=0)

    def op_add(self, n, ins):
        return ins[0] + ins[1]

    def op_mul(self, n, ins):
        return ins[0] * ins[1]

    def op_sub(self, n, ins):
        return ins[0] - ins[1]

    def op_affine(self, n, ins):
        return ins[0] * self.at(n, "scale") + self.at(n, "shift")

    def op_mul_col(self, n, ins):
        assert ins[1].shape[1] == 1
        return ins[0] * ins[1]

    def op_rms_row(self, n, ins):
        return 1 / torch.sqrt((ins[0] ** 2).mean(-1, keepdim=True) + self.at(n, "eps"))

    def op_rope(self, n, ins):
        heads = self.at(n, "heads")
        head_dim = self.at(n, "head_dim")
        n_rot = self.at(n, "n_rot", head_dim) if self.at(n, "rope_heads") == "first" else head_dim
        factors = n.get("freq_factors")
        assert factors is None or isinstance(factors, list)
        out = []
        for j, x in enumerate(ins):
            h = heads if j == 0 else self.at(n, "kv_heads", heads)
            out.append(rope(x, h, head_dim, n_rot, self.at(n, "pairing"), self.at(n, "theta"),
                            self.at(n, "freq_scale", 1.0), factors, self.at(n, "attn_factor", 1.0)))
        return tuple(out)

    def op_list(self, n, ins):
        return list(ins)

    def op_append(self, n, ins):
        return ins[0] + [ins[1]]

    def op_depth_attend(self, n, ins):
        hs = ins[0]
        w = self.weight(n["weight"])
        eps = self.at(n, "eps", 1e-6)
        width = hs[0].shape[1]
        scores = torch.stack([(rmsnorm_rows(h, eps) @ w) / math.sqrt(width) for h in hs], -1)  # [T, n]
        a = torch.softmax(scores, -1)
        return sum(a[:, j:j + 1] * h for j, h in enumerate(hs))

    def op_expr(self, n, ins):
        code = compile_expr(n["expr"])
        x0 = ins[0]
        out = torch.zeros_like(x0)
        for t in range(x0.shape[0]):
            for c in range(x0.shape[1]):
                env = {}
                for j, v in enumerate(ins):
                    val = float(v[t, c] if v.shape[1] > 1 else v[t, 0])
                    env["abcdefgh"[j]] = val
                    env["x%d" % j] = val
                out[t, c] = run_expr(code, env)
        return out

    # --- attention ------------------------------------------------------------
    def op_attention(self, n, ins):
        q, k, v = ins
        H, KV, hd = self.at(n, "heads"), self.at(n, "kv_heads", None), self.at(n, "head_dim")
        KV = KV or H
        assert self.at(n, "sinks", 0) == 0
        slopes = alibi_slopes(H) if n.get("softmax", "standard") == "alibi" else None
        T = q.shape[0]
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        out = []
        for h in range(H):
            g = h // (H // KV)
            out.append(attend(q[:, h], k[:, g], v[:, g], self.at(n, "scale"), self.at(n, "causal", True),
                              self.at(n, "window", 0), self.at(n, "softcap", 0.0),
                              slopes[h] if slopes else None))
        return torch.cat(out, -1)

    def op_mla_attention(self, n, ins):
        H, R = self.at(n, "heads"), self.at(n, "kv_rank")
        N, P, V = self.at(n, "qk_nope"), self.at(n, "qk_rope"), self.at(n, "v_head_dim")
        T = ins[0].shape[0]
        if len(ins) == 4:
            qn, qp, c, pe = ins
            q = torch.cat([qn.reshape(T, H, N), qp.reshape(T, H, P)], -1)
        else:
            q, c, pe = ins
            q = q.reshape(T, H, N + P)
        if n["k_b"] == n["v_b"]:
            kv = self.weight(n["k_b"]).reshape(H, N + V, R)
            wk, wv = kv[:, :N], kv[:, N:]
        else:
            wk = self.weight(n["k_b"]).reshape(H, N, R)
            wv = self.weight(n["v_b"]).reshape(H, V, R)
        out = []
        for h in range(H):
            k = torch.cat([c @ wk[h].T, pe], -1)  # [S, N+P]
            v = c @ wv[h].T  # [S, V]
            out.append(attend(q[:, h], k, v, self.at(n, "scale"), self.at(n, "causal", True),
                              self.at(n, "window", 0)))
        return torch.cat(out, -1)

    # --- mixture of experts ---------------------------------------------------
    def op_moe_ffn(self, n, ins):
        x = ins[0]
        E, K = self.at(n, "n_experts"), self.at(n, "top_k")
        r = x @ self.weight(n["router"]).T
        p = torch.sigmoid(r) if self.at(n, "scoring", "softmax") == "sigmoid" else torch.softmax(r, -1)
        bias = self.weight(n["selection_bias"]) if n.get("selection_bias") else torch.zeros(E)
        ex = n["experts"]
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            sel = p[t] + bias
            if "groups" in n:
                G, top = n["groups"]["n"], n["groups"]["top"]
                gs = sel.reshape(G, E // G)
                gscore = torch.topk(gs, 2, -1).values.sum(-1)
                keep = torch.topk(gscore, top).indices
                mask = torch.full((G, E // G), float("-inf"))
                mask[keep] = 0
                sel = sel + mask.reshape(E)
            chosen = torch.topk(sel, K).indices.tolist()
            wts = p[t, chosen]
            if self.at(n, "gate_norm") == "renorm":
                wts = wts / wts.sum()
            for e, wt in zip(chosen, wts):
                g = x[t] @ self.weight(ex["gate"], e).T
                u = x[t] @ self.weight(ex["up"], e).T
                out[t] += wt * ((g * torch.sigmoid(g) * u) @ self.weight(ex["down"], e).T)
        return out

    # --- scans (§11), token by token -----------------------------------------
    def op_linear_attention(self, n, ins):
        H, hd = self.at(n, "heads"), self.at(n, "head_dim")
        floor = self.at(n, "den_floor")
        phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # elu + 1
        q, k, v = (z.reshape(z.shape[0], H, hd) for z in ins)
        out = torch.zeros(q.shape[0], H, hd)
        for h in range(H):
            S = torch.zeros(hd, hd)
            z = torch.zeros(hd)
            for t in range(q.shape[0]):
                fk, fq = phi(k[t, h]), phi(q[t, h])
                S = S + torch.outer(fk, v[t, h])
                z = z + fk
                out[t, h] = (fq @ S) / max(float(fq @ z), floor)
        return out.reshape(q.shape[0], H * hd)

    def op_ssm_scan(self, n, ins):
        x = ins[0]
        a, b, c, d = (self.weight(n[key]) for key in "abcd")
        h = torch.zeros_like(a)
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            h = a * h + b * x[t][:, None]
            out[t] = (c * h).sum(-1) + d * x[t]
        return out

    def op_conv1d_causal(self, n, ins):
        x = ins[0]
        C, K = self.at(n, "channels"), self.at(n, "kernel")
        w = self.weight(n["weight"]).reshape(C, K)
        z = torch.cat([torch.zeros(K - 1, C), x], 0)  # the state starts at zero
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for kk in range(K):
                out[t] += w[:, kk] * z[t + kk]
        if n.get("bias"):
            out = out + self.weight(n["bias"])
        return out

    def op_selective_scan(self, n, ins):
        x, dt, B, Cm = ins
        A = -torch.exp(self.weight(n["a"]))  # [C, N]
        Dv = self.weight(n["d"]) if n.get("d") else torch.zeros(x.shape[1])
        delta = torch.nn.functional.softplus(dt) if self.at(n, "dt_softplus", True) else dt
        h = torch.zeros_like(A)
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            h = torch.exp(delta[t][:, None] * A) * h + delta[t][:, None] * B[t][None, :] * x[t][:, None]
            out[t] = h @ Cm[t] + Dv * x[t]
        return out

    def op_recurrence(self, n, ins):
        index = list(n["index"].items())
        W = math.prod(s for _, s in index)
        weights = {k: self.weight(v).reshape(-1) for k, v in n.get("weights", {}).items()}
        slot = self.slot(n["state"])
        state = {t["name"]: [0.0] * W for t in slot["tensors"]}
        lets = [statement(s) for s in n.get("let", [])]
        updates = [statement(s) for s in n["update"]]
        inits = [statement(s) for s in n.get("init", [])]
        readout = compile_expr(n["readout"])
        body_init = any(t["init"] == "body" for t in slot["tensors"])
        T = ins[0].shape[0]
        out = torch.zeros(T, W)
        for k in range(W):
            coords, rest = {}, k
            for name, size in reversed(index):
                coords[name] = rest % size
                rest //= size
            wv = {name: float(v[k] if v.numel() > 1 else v[0]) for name, v in weights.items()}
            if body_init:
                env = {**coords, **wv, **{s: state[s][k] for s in state}}
                for name, code in inits:
                    env[name] = run_expr(code, env)
                    if name in state:
                        state[name][k] = env[name]
            for t in range(T):
                env = {**coords, **wv, **{s: state[s][k] for s in state}}
                for name, v in zip(n["inputs"], ins):
                    env[name] = float(v[t, k] if v.shape[1] > 1 else v[t, 0])
                for name, code in lets:
                    env[name] = run_expr(code, env)
                for name, code in updates:
                    env[name] = run_expr(code, env)
                    state[name][k] = env[name]
                out[t, k] = run_expr(readout, env)
        return out

    def op_depth_route(self, n, ins):
        x, y = ins
        p = torch.softmax(x @ self.weight(n["weight"]).T, -1)
        step = self.at(n, "step")
        out = x.clone()
        for t in range(x.shape[0]):
            depth = int(torch.argmax(p[t])) + 1
            if depth >= step:
                g = float(p[t, depth - 1]) if n["gate"] == "score" else 1.0
                out[t] = x[t] + g * (y[t] - x[t])
        return out


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------

class Weights:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.t = {}

    def normal(self, name, shape, std=None):
        fan_in = shape[-1] if len(shape) > 1 else 1
        std = std if std is not None else 1 / math.sqrt(fan_in)
        self.t[name] = (self.rng.standard_normal(shape) * std).astype(np.float32)

    def norm(self, name, n):
        self.t[name] = (1 + 0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def uniform(self, name, shape, lo, hi):
        self.t[name] = self.rng.uniform(lo, hi, shape).astype(np.float32)


def doc_base(name, layers, about):
    return {"ir_version": 1, "family_hint": "synthetic", "_about": about,
            "model": {"vocab": VOCAB, "d": D, "n_layers": layers, "ctx": CTX},
            "inputs": ["tokens"], "outputs": ["logits"],
            "modes": {"prefill": "the prompt", "decode": "one token"}}


def kv_slot(name, heads, kv_heads, head_dim, window=0):
    return {"name": name, "kind": "kv", "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "max_len": CTX, "window": window, "sinks": 0}


def model_dense():
    """Rope variants, attention (GQA, window, softcap), norms, elementwise ops,
    fused per-head QKV split, shared weights, apply and tensor_index, depth."""
    L, H, KV, HD, FF = 3, 4, 2, 8, 48
    doc = doc_base("dense", L, "IR test model A: rope (neox/interleaved per layer, partial, freq_factors, "
                   "attn_factor), GQA attention with a window and a softcap, weights shared by weight_index, "
                   "apply and tensor_index, list/append/depth_attend over the layers.")
    w = Weights(111)
    w.normal("model.embed_tokens.weight", (VOCAB, D), 0.15)
    w.normal("model.embed_positions.weight", (CTX, D), 0.3)
    w.norm("model.pos_scale.weight", D)
    w.normal("model.pos_scale.bias", (D,), 0.1)
    for i in range(2):  # weight sets 0 and 1: layers 0 and 2 share set 0
        p = f"model.layers.{i}."
        w.norm(p + "input_norm.weight", D)
        w.normal(p + "attn.qkv.weight", (2 * (2 * HD + 2 * HD), D))
        w.normal(p + "attn.qkv.bias", (2 * (2 * HD + 2 * HD),), 0.1)
        w.norm(p + "attn.q_norm.weight", HD)
        w.normal(p + "attn.o.weight", (D, H * HD))
        w.norm(p + "ffn_norm.weight", D)
        w.normal(p + "ffn_norm.bias", (D,), 0.1)
        w.normal(p + "mlp.up.weight", (FF, D))
        w.normal(p + "mlp.down.weight", (D, FF))
        w.normal(f"model.extra.{i}.weight", (D, D), 0.5 / math.sqrt(D))
    w.normal("model.depth.weight", (D,), 1.0)
    w.norm("model.norm.weight", D)
    doc["embed"] = {"nodes": [
        {"op": "embedding", "in": ["tokens"], "out": "x", "weight": "model.embed_tokens.weight"},
        {"op": "pos_embedding", "in": [], "out": "p", "weight": "model.embed_positions.weight"},
        {"op": "scale", "in": ["p"], "out": "p", "weight": "model.pos_scale.weight", "bias": "model.pos_scale.bias"},
        {"op": "add", "in": ["x", "p"], "out": "x"},
        {"op": "list", "in": ["x"], "out": "hs"},
    ]}
    doc["block"] = {
        "repeat": L,
        "weight_index": per_layer(0, 1, 0),
        "state": [{**kv_slot("kv", H, KV, HD), "window": per_layer(0, 4, 0)}],
        "nodes": [
            {"op": "rmsnorm", "in": ["x"], "out": "h", "weight": "model.layers.{i}.input_norm.weight",
             "eps": 1e-5, "weight_offset": per_layer(0, 1.0, 0)},
            {"op": "linear", "in": ["h"], "out": "qkv", "weight": "model.layers.{i}.attn.qkv.weight",
             "bias": "model.layers.{i}.attn.qkv.bias"},
            {"op": "split", "in": ["qkv"], "out": ["q", "k", "v"], "sizes": [2 * HD, HD, HD], "groups": KV},
            {"op": "rmsnorm", "in": ["q"], "out": "q", "weight": "model.layers.{i}.attn.q_norm.weight",
             "eps": 1e-6, "group": HD, "apply": per_layer(True, False, True)},
            {"op": "rope", "in": ["q", "k"], "out": ["q", "k"], "heads": H, "kv_heads": KV, "head_dim": HD,
             "theta": per_layer(10000.0, 500.0, 10000.0), "rope_heads": "first", "n_rot": 6,
             "pairing": per_layer("neox", "interleaved", "neox"), "freq_factors": [1.0, 1.5, 4.0],
             "freq_scale": per_layer(1.0, 0.5, 1.0), "attn_factor": per_layer(1.0, 0.8, 1.2)},
            {"op": "attention", "in": ["q", "k", "v"], "out": "a", "state": "kv", "heads": H, "kv_heads": KV,
             "head_dim": HD, "scale": 0.3, "causal": True, "window": per_layer(0, 4, 0), "sinks": 0,
             "softcap": per_layer(0, 0, 2.0), "softmax": "standard"},
            {"op": "linear", "in": ["a"], "out": "o", "weight": "model.layers.{i}.attn.o.weight"},
            {"op": "add", "in": ["x", "o"], "out": "x"},
            {"op": "layernorm", "in": ["x"], "out": "h2", "weight": "model.layers.{i}.ffn_norm.weight",
             "bias": "model.layers.{i}.ffn_norm.bias", "eps": 1e-5},
            {"op": "linear", "in": ["h2"], "out": "up", "weight": "model.layers.{i}.mlp.up.weight", "bias": None},
            {"op": "gelu", "in": ["up"], "out": "g", "approx": per_layer("tanh", "none", "tanh")},
            {"op": "sigmoid", "in": ["up"], "out": "s"},
            {"op": "relu", "in": ["up"], "out": "r"},
            {"op": "silu", "in": ["up"], "out": "sl"},
            {"op": "mul", "in": ["g", "s"], "out": "m"},
            {"op": "sub", "in": ["m", "r"], "out": "m"},
            {"op": "add", "in": ["m", "sl"], "out": "m"},
            {"op": "linear", "in": ["m"], "out": "down", "weight": "model.layers.{i}.mlp.down.weight"},
            {"op": "affine", "in": ["down"], "out": "down", "scale": per_layer(1.0, 0.5, 1.0), "shift": 0.01},
            {"op": "add", "in": ["x", "down"], "out": "x"},
            {"op": "linear", "in": ["x"], "out": "extra", "weight": "model.extra.{i}.weight",
             "tensor_index": "application", "apply": per_layer(False, True, True)},
            {"op": "add", "in": ["x", "extra"], "out": "x", "apply": per_layer(False, True, True)},
            {"op": "rms_row", "in": ["x"], "out": "rr", "eps": 1e-6},
            {"op": "mul_col", "in": ["x", "rr"], "out": "xn"},
            {"op": "expr", "in": ["xn", "rr"], "out": "e",
             "expr": "0.5 * a * b + (a if a > 0 else 0.25 * a) - 0.1 * softplus(a) + min(a, 0.3) * sigmoid(b)"},
            {"op": "add", "in": ["x", "e"], "out": "x"},
            {"op": "sub", "in": ["x", "rr"], "out": "x", "apply": per_layer(True, False, False)},
            {"op": "append", "in": ["hs", "x"], "out": "hs"},
        ]}
    doc["head"] = {"nodes": [
        {"op": "depth_attend", "in": ["hs"], "out": "hd", "weight": "model.depth.weight", "eps": 1e-6},
        {"op": "add", "in": ["hd", "x"], "out": "y"},
        {"op": "rmsnorm", "in": ["y"], "out": "y", "weight": "model.norm.weight", "eps": 1e-6},
        {"op": "linear", "in": ["y"], "out": "logits", "weight": "lm_head.weight",
         "tied_to": "model.embed_tokens.weight"},
    ]}
    return doc, w.t


def model_mla_moe():
    """Multi-head latent attention in both input forms (fused and separate
    k_b/v_b), mixtures of experts (softmax/renorm and raw; sigmoid with a
    selection bias and groups), a shared expert."""
    L, H, R, N, P, V1, V2 = 3, 4, 16, 8, 4, 8, 6
    QA, FF, SFF = 16, 16, 24
    doc = doc_base("mla_moe", L, "IR test model B: mla_attention with [q, c, k_pe] and a fused kv_b, and with "
                   "[q_nope, q_pe, c, k_pe] and separate k_b/v_b (windowed on layer 1); moe_ffn softmax "
                   "(renorm, raw) on layers 0 and 2 by application, sigmoid + selection_bias + groups on layer 1.")
    w = Weights(202)
    w.normal("model.embed_tokens.weight", (VOCAB, D), 1.0)
    for i in range(L):
        p = f"model.layers.{i}."
        w.norm(p + "input_norm.weight", D)
        w.normal(p + "attn.q_a.weight", (QA, D))
        w.norm(p + "attn.q_a_norm.weight", QA)
        w.normal(p + "attn1.q_b.weight", (H * (N + P), QA))
        w.normal(p + "attn2.q_b.weight", (H * (N + P), QA))
        w.normal(p + "attn.kv_a.weight", (R + P, D))
        w.norm(p + "attn.kv_norm.weight", R)
        w.normal(p + "attn1.kv_b.weight", (H * (N + V1), R))
        w.normal(p + "attn2.k_b.weight", (H * N, R))
        w.normal(p + "attn2.v_b.weight", (H * V2, R))
        w.normal(p + "attn1.o.weight", (D, H * V1))
        w.normal(p + "attn2.o.weight", (D, H * V2))
        w.norm(p + "post_norm.weight", D)
        w.normal(p + "shared.gate.weight", (SFF, D))
        w.normal(p + "shared.up.weight", (SFF, D))
        w.normal(p + "shared.down.weight", (D, SFF))
    for i in range(2):  # moe1 runs on layers 0 and 2: weight sets 0 and 1
        p = f"model.moe1.{i}."
        w.normal(p + "router.weight", (4, D))
        for e in range(4):
            w.normal(p + f"experts.{e}.gate.weight", (FF, D))
            w.normal(p + f"experts.{e}.up.weight", (FF, D))
            w.normal(p + f"experts.{e}.down.weight", (D, FF))
    p = "model.layers.1.moe2."
    w.normal(p + "router.weight", (8, D))
    w.normal(p + "bias", (8,), 0.3)
    for e in range(8):
        w.normal(p + f"experts.{e}.gate.weight", (FF, D))
        w.normal(p + f"experts.{e}.up.weight", (FF, D))
        w.normal(p + f"experts.{e}.down.weight", (D, FF))
    w.norm("model.norm.weight", D)
    w.normal("lm_head.weight", (VOCAB, D))
    w.normal("lm_head.bias", (VOCAB,), 0.1)
    latent = {"heads": 1, "kv_heads": 1, "head_dim": R + P}
    doc["embed"] = {"nodes": [
        {"op": "embedding", "in": ["tokens"], "out": "x", "weight": "model.embed_tokens.weight"}]}
    mla_common = {"heads": H, "kv_rank": R, "qk_nope": N, "qk_rope": P, "causal": True, "sinks": 0}
    doc["block"] = {
        "repeat": L,
        "state": [{**kv_slot("lat1", 1, 1, R + P), **latent},
                  {**kv_slot("lat2", 1, 1, R + P), **latent, "window": per_layer(0, 3, 0)}],
        "nodes": [
            {"op": "rmsnorm", "in": ["x"], "out": "h", "weight": "model.layers.{i}.input_norm.weight", "eps": 1e-6},
            {"op": "linear", "in": ["h"], "out": "qa", "weight": "model.layers.{i}.attn.q_a.weight"},
            {"op": "rmsnorm", "in": ["qa"], "out": "qa", "weight": "model.layers.{i}.attn.q_a_norm.weight", "eps": 1e-6},
            {"op": "linear", "in": ["h"], "out": "ckv", "weight": "model.layers.{i}.attn.kv_a.weight"},
            {"op": "split", "in": ["ckv"], "out": ["c", "kpe"], "sizes": [R, P]},
            {"op": "rmsnorm", "in": ["c"], "out": "c", "weight": "model.layers.{i}.attn.kv_norm.weight", "eps": 1e-6},
            {"op": "rope", "in": ["kpe"], "out": ["kpe"], "heads": 1, "head_dim": P, "theta": 10000.0,
             "rope_heads": "all", "pairing": "interleaved"},
            # Form 1: q [T, H*(N+P)] as one input; k_b = v_b (DeepSeek's kv_b_proj).
            {"op": "linear", "in": ["qa"], "out": "q1", "weight": "model.layers.{i}.attn1.q_b.weight"},
            {"op": "rope", "in": ["q1"], "out": ["q1"], "heads": H, "head_dim": N + P, "theta": 10000.0,
             "rope_heads": "first", "n_rot": P, "pairing": "neox"},
            {"op": "mla_attention", "in": ["q1", "c", "kpe"], "out": "a1", "state": "lat1", **mla_common,
             "v_head_dim": V1, "k_b": "model.layers.{i}.attn1.kv_b.weight",
             "v_b": "model.layers.{i}.attn1.kv_b.weight", "scale": 1 / math.sqrt(N + P), "window": 0},
            # Form 2: q_nope and q_pe apart; separate k_b and v_b.
            {"op": "linear", "in": ["qa"], "out": "q2", "weight": "model.layers.{i}.attn2.q_b.weight"},
            {"op": "split", "in": ["q2"], "out": ["qn", "qp"], "sizes": [N, P], "groups": H},
            {"op": "rope", "in": ["qp"], "out": ["qp"], "heads": H, "head_dim": P, "theta": 10000.0,
             "rope_heads": "all", "pairing": "interleaved"},
            {"op": "mla_attention", "in": ["qn", "qp", "c", "kpe"], "out": "a2", "state": "lat2", **mla_common,
             "v_head_dim": V2, "k_b": "model.layers.{i}.attn2.k_b.weight",
             "v_b": "model.layers.{i}.attn2.v_b.weight", "scale": 0.25, "window": per_layer(0, 3, 0)},
            {"op": "linear", "in": ["a1"], "out": "o1", "weight": "model.layers.{i}.attn1.o.weight"},
            {"op": "linear", "in": ["a2"], "out": "o2", "weight": "model.layers.{i}.attn2.o.weight"},
            {"op": "add", "in": ["x", "o1"], "out": "x"},
            {"op": "add", "in": ["x", "o2"], "out": "x"},
            {"op": "rmsnorm", "in": ["x"], "out": "h2", "weight": "model.layers.{i}.post_norm.weight", "eps": 1e-6},
            {"op": "moe_ffn", "in": ["h2"], "out": "m", "router": "model.moe1.{i}.router.weight",
             "experts": {"gate": "model.moe1.{i}.experts.{e}.gate.weight",
                         "up": "model.moe1.{i}.experts.{e}.up.weight",
                         "down": "model.moe1.{i}.experts.{e}.down.weight"},
             "n_experts": 4, "top_k": 2, "gate_norm": per_layer("renorm", "renorm", "raw"), "activation": "silu",
             "scoring": "softmax", "tensor_index": "application", "apply": per_layer(True, False, True)},
            {"op": "moe_ffn", "in": ["h2"], "out": "m", "router": "model.layers.{i}.moe2.router.weight",
             "experts": {"gate": "model.layers.{i}.moe2.experts.{e}.gate.weight",
                         "up": "model.layers.{i}.moe2.experts.{e}.up.weight",
                         "down": "model.layers.{i}.moe2.experts.{e}.down.weight"},
             "n_experts": 8, "top_k": 3, "gate_norm": "renorm", "activation": "silu", "scoring": "sigmoid",
             "selection_bias": "model.layers.{i}.moe2.bias", "groups": {"n": 4, "top": 2},
             "routing": "DeepSeek V3 style", "apply": per_layer(False, True, False)},
            {"op": "affine", "in": ["m"], "out": "m", "scale": 2.5, "shift": 0, "apply": per_layer(False, True, False)},
            {"op": "linear", "in": ["h2"], "out": "sg", "weight": "model.layers.{i}.shared.gate.weight"},
            {"op": "linear", "in": ["h2"], "out": "su", "weight": "model.layers.{i}.shared.up.weight"},
            {"op": "silu", "in": ["sg"], "out": "sg"},
            {"op": "mul", "in": ["sg", "su"], "out": "sg"},
            {"op": "linear", "in": ["sg"], "out": "sd", "weight": "model.layers.{i}.shared.down.weight"},
            {"op": "add", "in": ["x", "m"], "out": "x"},
            {"op": "add", "in": ["x", "sd"], "out": "x"},
        ]}
    # The final norm as rms_row, mul_col and scale: ops with constants of the step's rows, in the head,
    # which a prefill runs on the last row only.
    doc["head"] = {"nodes": [
        {"op": "rms_row", "in": ["x"], "out": "rr", "eps": 1e-6},
        {"op": "mul_col", "in": ["x", "rr"], "out": "y"},
        {"op": "scale", "in": ["y"], "out": "y", "weight": "model.norm.weight"},
        {"op": "linear", "in": ["y"], "out": "logits", "weight": "lm_head.weight", "bias": "lm_head.bias"},
    ]}
    return doc, w.t


def model_scans():
    """ALiBi attention (GQA, window), linear attention, a Mamba-style mixer
    (conv1d_causal, selective_scan), ssm_scan, recurrence, depth_route."""
    L, H, KV, HD = 3, 6, 3, 4
    LH, LHD = 4, 8
    NS, DTR = 4, 8
    doc = doc_base("scans", L, "IR test model C: ALiBi attention, linear_attention, conv1d_causal + "
                   "selective_scan (dt_softplus off on layer 1 after an expr softplus), ssm_scan, a recurrence "
                   "with a body-initialised and a zero slot tensor, depth_route over the layers.")
    w = Weights(303)
    w.normal("model.embed_tokens.weight", (VOCAB, D), 1.0)
    for i in range(L):
        p = f"model.layers.{i}."
        for nm in ("norm1", "norm2", "norm3", "norm4"):
            w.norm(p + nm + ".weight", D)
        w.normal(p + "attn.qkv.weight", (H * HD + 2 * KV * HD, D))
        w.normal(p + "attn.o.weight", (D, H * HD))
        w.normal(p + "la.qkv.weight", (3 * LH * LHD, D))
        w.normal(p + "la.o.weight", (D, LH * LHD), 0.5 / math.sqrt(LH * LHD))
        w.normal(p + "mamba.in_proj.weight", (2 * D, D))
        w.normal(p + "mamba.conv1d.weight", (D, 1, 4), 0.5)
        w.normal(p + "mamba.conv1d.bias", (D,), 0.1)
        w.normal(p + "mamba.x_proj.weight", (DTR + 2 * NS, D))
        w.normal(p + "mamba.dt_proj.weight", (D, DTR))
        w.uniform(p + "mamba.dt_proj.bias", (D,), -2.0, 0.5)
        w.t[p + "mamba.A_log"] = np.log(np.tile(np.arange(1, NS + 1, dtype=np.float32), (D, 1))
                                        * w.rng.uniform(0.5, 1.5, (D, NS)).astype(np.float32)).astype(np.float32)
        w.normal(p + "mamba.D", (D,), 0.5)
        w.normal(p + "mamba.out_proj.weight", (D, D))
        w.uniform(p + "ssm.a", (D, NS), 0.5, 0.95)
        w.normal(p + "ssm.b", (D, NS), 0.5)
        w.normal(p + "ssm.c", (D, NS), 0.5)
        w.normal(p + "ssm.d", (D,), 0.5)
        w.normal(p + "ssm.o.weight", (D, D), 0.5 / math.sqrt(D))
        w.normal(p + "rec.gate.weight", (1, D))
        w.normal(p + "rec.w", (D,), 1.0)
        w.normal(p + "rec.w0", (D,), 0.5)
        w.normal(p + "rec.o.weight", (D, D))
    w.t["model.rec_scale"] = np.array([1.5], dtype=np.float32)
    w.normal("model.router.weight", (3, D), 1.0)
    w.norm("model.norm.weight", D)
    w.normal("lm_head.weight", (VOCAB, D))
    doc["embed"] = {"nodes": [
        {"op": "embedding", "in": ["tokens"], "out": "x", "weight": "model.embed_tokens.weight"}]}
    doc["block"] = {
        "repeat": L,
        "state": [
            {**kv_slot("kv", H, KV, HD), "window": per_layer(0, 0, 5)},
            {"name": "la", "kind": "recurrent", "op": "linear_attention", "dtype": "f32",
             "tensors": [{"name": "S", "shape": [LH * LHD, LHD], "init": 0}, {"name": "z", "shape": [LH, LHD], "init": 0}]},
            {"name": "conv", "kind": "recurrent", "op": "conv1d_causal", "dtype": "f32",
             "tensors": [{"name": "conv", "shape": [3, D], "init": 0}]},
            {"name": "sel", "kind": "recurrent", "op": "selective_scan", "dtype": "f32",
             "tensors": [{"name": "h", "shape": [D, NS], "init": 0}]},
            {"name": "ssm", "kind": "recurrent", "op": "ssm_scan", "dtype": "f32",
             "tensors": [{"name": "h", "shape": [D, NS], "init": 0}]},
            {"name": "rec", "kind": "recurrent", "op": "recurrence", "dtype": "f32",
             "tensors": [{"name": "h", "shape": [D], "init": "body"}, {"name": "n", "shape": [D], "init": 0}]},
        ],
        "nodes": [
            {"op": "affine", "in": ["x"], "out": "x_in", "scale": 1, "shift": 0},
            # ALiBi attention, GQA 6/3, a window on layer 2.
            {"op": "rmsnorm", "in": ["x"], "out": "h", "weight": "model.layers.{i}.norm1.weight", "eps": 1e-6},
            {"op": "linear", "in": ["h"], "out": "qkv", "weight": "model.layers.{i}.attn.qkv.weight"},
            {"op": "split", "in": ["qkv"], "out": ["q", "k", "v"], "sizes": [H * HD, KV * HD, KV * HD]},
            {"op": "attention", "in": ["q", "k", "v"], "out": "a", "state": "kv", "heads": H, "kv_heads": KV,
             "head_dim": HD, "scale": 0.5, "causal": True, "window": per_layer(0, 0, 5), "sinks": 0,
             "softmax": "alibi"},
            {"op": "linear", "in": ["a"], "out": "o", "weight": "model.layers.{i}.attn.o.weight"},
            {"op": "add", "in": ["x", "o"], "out": "x"},
            # Linear attention.
            {"op": "rmsnorm", "in": ["x"], "out": "h", "weight": "model.layers.{i}.norm2.weight", "eps": 1e-6},
            {"op": "linear", "in": ["h"], "out": "lqkv", "weight": "model.layers.{i}.la.qkv.weight"},
            {"op": "split", "in": ["lqkv"], "out": ["lq", "lk", "lv"], "sizes": [LH * LHD] * 3},
            {"op": "linear_attention", "in": ["lq", "lk", "lv"], "out": "la", "state": "la", "heads": LH,
             "head_dim": LHD, "feature_map": "elu_plus_one", "den_floor": 1e-6, "causal": True},
            {"op": "linear", "in": ["la"], "out": "lo", "weight": "model.layers.{i}.la.o.weight"},
            {"op": "add", "in": ["x", "lo"], "out": "x"},
            # A Mamba mixer.
            {"op": "rmsnorm", "in": ["x"], "out": "h", "weight": "model.layers.{i}.norm3.weight", "eps": 1e-6},
            {"op": "linear", "in": ["h"], "out": "xz", "weight": "model.layers.{i}.mamba.in_proj.weight"},
            {"op": "split", "in": ["xz"], "out": ["xi", "z"], "sizes": [D, D]},
            {"op": "conv1d_causal", "in": ["xi"], "out": "xc", "state": "conv",
             "weight": "model.layers.{i}.mamba.conv1d.weight", "bias": "model.layers.{i}.mamba.conv1d.bias",
             "channels": D, "kernel": 4},
            {"op": "silu", "in": ["xc"], "out": "xc"},
            {"op": "linear", "in": ["xc"], "out": "dbc", "weight": "model.layers.{i}.mamba.x_proj.weight"},
            {"op": "split", "in": ["dbc"], "out": ["dtr", "Bm", "Cm"], "sizes": [DTR, NS, NS]},
            {"op": "linear", "in": ["dtr"], "out": "dt", "weight": "model.layers.{i}.mamba.dt_proj.weight",
             "bias": "model.layers.{i}.mamba.dt_proj.bias"},
            {"op": "expr", "in": ["dt"], "out": "dt", "expr": "softplus(a)", "apply": per_layer(False, True, False)},
            {"op": "selective_scan", "in": ["xc", "dt", "Bm", "Cm"], "out": "y", "state": "sel",
             "a": "model.layers.{i}.mamba.A_log", "d": "model.layers.{i}.mamba.D", "channels": D, "d_state": NS,
             "dt_softplus": per_layer(True, False, True)},
            {"op": "silu", "in": ["z"], "out": "z"},
            {"op": "mul", "in": ["y", "z"], "out": "y"},
            {"op": "linear", "in": ["y"], "out": "mo", "weight": "model.layers.{i}.mamba.out_proj.weight"},
            {"op": "add", "in": ["x", "mo"], "out": "x"},
            # A diagonal SSM and a recurrence.
            {"op": "rmsnorm", "in": ["x"], "out": "h3", "weight": "model.layers.{i}.norm4.weight", "eps": 1e-6},
            {"op": "ssm_scan", "in": ["h3"], "out": "ss", "state": "ssm", "n": NS, "a": "model.layers.{i}.ssm.a",
             "b": "model.layers.{i}.ssm.b", "c": "model.layers.{i}.ssm.c", "d": "model.layers.{i}.ssm.d"},
            {"op": "linear", "in": ["ss"], "out": "so", "weight": "model.layers.{i}.ssm.o.weight"},
            {"op": "add", "in": ["x", "so"], "out": "x"},
            {"op": "linear", "in": ["h3"], "out": "gt", "weight": "model.layers.{i}.rec.gate.weight"},
            {"op": "sigmoid", "in": ["gt"], "out": "gt"},
            # The index is written in sorted key order: bonfire reads documents into nlohmann::json,
            # whose objects sort their keys, so {"g": 4, "c": 8} would be lowered as {"c": 8, "g": 4}
            # (docs/IR.md §10 says row-major in the order written).
            {"op": "recurrence", "in": ["h3", "gt"], "out": "rc", "state": "rec", "index": {"c": 8, "g": 4},
             "_index": "written in sorted key order; see scripts/gen_ir_model_goldens.py",
             "inputs": ["u", "gate"],
             "weights": {"w": "model.layers.{i}.rec.w", "w0": "model.layers.{i}.rec.w0", "s": "model.rec_scale"},
             "init": ["h = w0 * (1 + 0.1 * g)"],
             "let": ["decay = sigmoid(w + 0.25 * g - 0.1 * c)", "inp = (1 - decay) * u * gate"],
             "update": ["h = decay * h + inp", "n = n + 1"],
             "readout": "s * h / max(n, 1) + 0.01 * g"},
            {"op": "linear", "in": ["rc"], "out": "ro", "weight": "model.layers.{i}.rec.o.weight"},
            {"op": "add", "in": ["x", "ro"], "out": "x"},
            # Mixture of recursions: a token keeps this layer's update when its depth reaches the step.
            {"op": "depth_route", "in": ["x_in", "x"], "out": "x", "weight": "model.router.weight",
             "route": "token_choice", "n_rec": 3, "gate": "score", "step": per_layer(1, 2, 3)},
        ]}
    doc["head"] = {"nodes": [
        {"op": "rmsnorm", "in": ["x"], "out": "y", "weight": "model.norm.weight", "eps": 1e-6},
        {"op": "linear", "in": ["y"], "out": "logits", "weight": "lm_head.weight"},
    ]}
    return doc, w.t


MODELS = {"dense": model_dense, "mla_moe": model_mla_moe, "scans": model_scans}


def generate(name, build):
    doc, weights = build()
    ref = Reference(doc, weights)
    rng = np.random.default_rng(sum(map(ord, name)))
    prompt = [int(t) for t in rng.integers(0, VOCAB, PROMPT_LEN)]
    tokens = list(prompt)
    with torch.no_grad():
        logits = ref.forward(tokens)[-1]
        prefill = logits
        steps = []
        for _ in range(DECODE_STEPS):
            tok = int(torch.argmax(logits))
            tokens.append(tok)
            logits = ref.forward(tokens)[-1]
            steps.append({"token": tok, "logits": [round(float(v), 7) for v in logits]})
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "bonfire.ir.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_safetensors(d / "model.safetensors", weights, "F32")
    expected = {"prompt": prompt, "prefill_logits": [round(float(v), 7) for v in prefill], "steps": steps,
                "generated_by": "scripts/gen_ir_model_goldens.py (PyTorch float64 reference of docs/IR.md, "
                                "torch " + torch.__version__ + ")"}
    (d / "expected.json").write_text(json.dumps(expected) + "\n")
    ops = sorted({n["op"] for s in ("embed", "block", "head") for n in doc[s]["nodes"]})
    print(f"{name}: {len(ops)} op kinds, prompt {prompt}, greedy {[s['token'] for s in steps]}, "
          f"max |logit| {float(prefill.abs().max()):.3f}")
    return set(ops)


def main():
    names = sys.argv[1:] or list(MODELS)
    ops = set()
    for name in names:
        ops |= generate(name, MODELS[name])
    print(f"{len(ops)} op kinds over {len(names)} models")


if __name__ == "__main__":
    main()
