#!/usr/bin/env python3
"""A tiny Qwen3-MoE model whose experts are stored in ONNX Runtime GenAI's int4
QMoE layout, and its logits from a float64 PyTorch forward over the
DEQUANTIZED experts with ONNX Runtime's routing (docs/QMOE.md).

Writes goldens/qmoe_model/{blk16,col}/ (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json) and goldens/qmoe_model/golden.json;
tests/qmoe_model_test.cpp loads each folder through the normal model path
(LocalModel::open: config.json → IR → moe_ffn → moe layout "qmoe" → the QMoE
package) and compares the logits.

  blk16: 4-bit codes, block-wise scales (block_size 16), scales stored f16
  col:   4-bit codes, column-wise scales (block_size 0), scales stored f32

Per layer: model.layers.{i}.mlp.experts.fc1_experts_weights uint8
[E, 2I, C/2] (FC1 row 2i = gate unit i, row 2i+1 = up unit i: ORT's
swiglu_fusion=1), .fc1_scales [E, 2I] or [E, 2I, C/block], .fc2_experts_weights
uint8 [E, C, I/2], .fc2_scales [E, C] or [E, C, I/block]. Codes are symmetric
around 8: w = scale * (code - 8), scale = max|w| / 7 over the row (or block),
code = clip(round(w / scale), -8, 7) + 8; byte j of a row holds column 2j in
its low nibble and column 2j+1 in its high nibble.

Routing (ORT 1.30, docs/QMOE.md R1-R4): the k largest router logits (ties to
the higher index), softmax over only those k, weight kept when > 1e-8.

    /usr/bin/python3 scripts/qmoe/gen_model_golden.py
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from modelwriter.tokenizers import synthetic_byte_bpe  # noqa: E402

OUT = ROOT / "goldens" / "qmoe_model"
HIDDEN, INTER, EXPERTS, TOPK, LAYERS = 64, 32, 8, 2, 2
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
PROMPT = [257, 40, 118, 3, 201, 77, 12, 150, 99, 5]


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.uint8): "U8"}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        header[name] = {"dtype": kinds[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def quantize(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w [E, N, K] float32 → (packed uint8 [E, N, K/2], scales [E, N] or
    [E, N, K/block], dequantized float32 [E, N, K])."""
    E, N, K = w.shape
    b = K if block == 0 else block
    wb = w.reshape(E, N, K // b, b)
    scale = (np.abs(wb).max(-1) / 7.0).astype(np.float32)
    scale[scale == 0] = 1.0
    code = np.clip(np.rint(wb / scale[..., None]), -8, 7).astype(np.int64) + 8
    code = code.reshape(E, N, K).astype(np.uint8)
    packed = (code[..., 0::2] & 0x0F) | ((code[..., 1::2] & 0x0F) << 4)
    scales = scale[..., 0] if block == 0 else scale
    return packed.astype(np.uint8), scales, code


def dequantize(code: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    E, N, K = code.shape
    s = scales.astype(np.float32)
    s = np.repeat(s[..., None], K, -1) if block == 0 else np.repeat(s, block, -1)
    return (s * (code.astype(np.float32) - 8.0)).astype(np.float32)  # ORT: scale * (float(code) - 8) in float32


def build(name: str, block: int, scale_dtype, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tok, tok_cfg = synthetic_byte_bpe(n_merges=16)
    vocab = max(tok["model"]["vocab"].values()) + 1 + len(tok["added_tokens"])
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "vocab_size": vocab, "hidden_size": HIDDEN, "intermediate_size": 2 * INTER,
        "moe_intermediate_size": INTER, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "num_experts": EXPERTS,
        "num_experts_per_tok": TOPK, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 64,
        "tie_word_embeddings": True, "hidden_act": "silu", "bos_token_id": 256, "eos_token_id": 257,
        "torch_dtype": "float32",
        "quantization_config": {"quant_method": "qmoe", "bits": 4, "block_size": block},
    }
    f32 = lambda *s, std=0.08: (rng.standard_normal(s) * std).astype(np.float32)  # noqa: E731
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": f32(vocab, HIDDEN, std=0.5),
                                "model.norm.weight": (1 + f32(HIDDEN, std=0.1))}
    deq: dict[str, np.ndarray] = {}
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = 1 + f32(HIDDEN, std=0.1)
        t[p + "post_attention_layernorm.weight"] = 1 + f32(HIDDEN, std=0.1)
        t[p + "self_attn.q_proj.weight"] = f32(HEADS * HEAD_DIM, HIDDEN, std=0.15)
        t[p + "self_attn.k_proj.weight"] = f32(KV_HEADS * HEAD_DIM, HIDDEN, std=0.15)
        t[p + "self_attn.v_proj.weight"] = f32(KV_HEADS * HEAD_DIM, HIDDEN, std=0.15)
        t[p + "self_attn.o_proj.weight"] = f32(HIDDEN, HEADS * HEAD_DIM, std=0.15)
        t[p + "self_attn.q_norm.weight"] = 1 + f32(HEAD_DIM, std=0.1)
        t[p + "self_attn.k_norm.weight"] = 1 + f32(HEAD_DIM, std=0.1)
        t[p + "mlp.gate.weight"] = f32(EXPERTS, HIDDEN, std=0.4)
        fc1 = f32(EXPERTS, 2 * INTER, HIDDEN, std=0.2)  # rows 2i gate, 2i+1 up
        fc2 = f32(EXPERTS, HIDDEN, INTER, std=0.2)
        for key, w in (("fc1", fc1), ("fc2", fc2)):
            packed, scales, code = quantize(w, block)
            scales = scales.astype(scale_dtype)
            t[p + f"mlp.experts.{key}_experts_weights"] = packed
            t[p + f"mlp.experts.{key}_scales"] = scales
            deq[p + key] = dequantize(code, scales, block)
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2) + "\n")
    write_safetensors(d / "model.safetensors", t)
    logits = forward(cfg, t, deq, PROMPT)
    return {"config": {"block_size": block, "scales": np.dtype(scale_dtype).name}, "logits": logits.tolist()}


def forward(cfg: dict, t: dict, deq: dict, tokens: list[int]) -> np.ndarray:
    """Logits of every position, float64."""
    w = {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items() if v.dtype != np.uint8}
    eps, H, KV, hd = cfg["rms_norm_eps"], HEADS, KV_HEADS, HEAD_DIM
    T = len(tokens)
    rms = lambda x, g: x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g  # noqa: E731

    def rope(x):  # [T, heads, hd], rotate_half pairing
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], -1)[:, None, :]
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * torch.cos(emb) + rot * torch.sin(emb)

    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    causal = torch.arange(T)[None, :] <= torch.arange(T)[:, None]
    for l in range(LAYERS):
        p = f"model.layers.{l}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = rope(rms((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd), w[p + "self_attn.q_norm.weight"]))
        k = rope(rms((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd), w[p + "self_attn.k_norm.weight"]))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
        outs = []
        for head in range(H):
            g = head // (H // KV)
            s = (q[:, head] @ k[:, g].T) / math.sqrt(hd)
            outs.append(torch.softmax(s.masked_fill(~causal, float("-inf")), -1) @ v[:, g])
        x = x + torch.cat(outs, -1) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        logits = h @ w[p + "mlp.gate.weight"].T
        fc1 = torch.from_numpy(deq[p + "fc1"].astype(np.float64))
        fc2 = torch.from_numpy(deq[p + "fc2"].astype(np.float64))
        y = torch.zeros_like(h)
        for r in range(T):
            z = logits[r]
            # ORT: the k largest by (value, index) descending: ties to the higher index.
            order = sorted(range(EXPERTS), key=lambda e: (float(z[e]), e), reverse=True)[:TOPK]
            sel = torch.stack([z[e] for e in order])
            wts = torch.exp(sel - sel[0])
            wts = wts / wts.sum()
            for e, we in zip(order, wts):
                if not we > 1e-8:
                    continue
                a = fc1[e] @ h[r]
                gate, up = a[0::2], a[1::2]
                y[r] += we * (fc2[e] @ (gate * torch.sigmoid(gate) * up))
        x = x + y
    x = rms(x, w["model.norm.weight"])
    return (x @ w["model.embed_tokens.weight"].T).numpy()


def main() -> int:
    golden = {
        "_note": "scripts/qmoe/gen_model_golden.py: float64 PyTorch forward with the dequantized experts and "
                 "ONNX Runtime's QMoE routing; logits of every prompt position",
        "prompt": PROMPT,
        "models": {"blk16": build("blk16", 16, np.float16, 1), "col": build("col", 0, np.float32, 2)},
    }
    (OUT / "golden.json").write_text(json.dumps(golden) + "\n")
    for name, g in golden["models"].items():
        lg = np.array(g["logits"])
        print(name, "logits", lg.shape, "max |logit|", float(np.abs(lg).max()),
              "folder bytes", sum(f.stat().st_size for f in (OUT / name).iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
