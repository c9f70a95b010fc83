#!/usr/bin/env python3
"""A PyTorch reference of a Llama/Mistral-architecture HF folder, for what
llama.cpp cannot check: Mistral's sliding_window.

llama.cpp ignores Mistral's sliding window (convert_hf_to_gguf.py writes none
for mistral and the llama loader reads none), so goldens/generate/mistral.*.json
are full attention. This script computes, from the HF folder of the mistral
test model (scripts/write_test_model.py --family mistral --gguf f32,f16,q8_0
--sliding-window 8), the same golden with the window as transformers applies
it: key k is visible from query q when q - window < k <= q.

The forward is plain torch in float64 from config.json and model.safetensors:
RMSNorm (x / sqrt(mean(x^2) + eps) * w), rope with rope_theta (transformers'
rotate_half pairing, rope_scaling must be null), grouped-query attention
scaled by 1/sqrt(head_dim), the SwiGLU MLP down(silu(gate x) * up x), the
final norm and lm_head (or the embedding when tie_word_embeddings). Each step
recomputes the whole sequence from position 0.

It first checks itself: the same forward WITHOUT the window must give
goldens/generate/mistral.f32.json (llama.cpp) within 1e-5 relative (max
|diff| / max |logit|) and the same 32 greedy tokens. Then it writes
goldens/generate/mistral.hf-torch.json with the fields of mistral.f32.json
(prompt, n_ctx and writer_args copied from it; logits of the last prompt
position, 32 greedy tokens by argmax (ties to the lowest id), margins
top1 - top2) and "reference": "PyTorch (scripts/gen_torch_generate_goldens.py)".
tests/generate_golden_test.cpp holds the HF folder to it (the GGUF keeps the
llama.cpp golden).

    /usr/bin/python3 scripts/gen_torch_generate_goldens.py [--family mistral] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from gen_generate_goldens import golden_text  # noqa: E402  (the same file format)
from modelwriter.formats import read_safetensors  # noqa: E402

N_GREEDY = 32
SELF_CHECK_BOUND = 1e-5


class HfLlama:
    """Llama/Mistral forward from an HF folder, float64."""

    def __init__(self, folder: Path):
        self.cfg = json.loads((folder / "config.json").read_text())
        c = self.cfg
        if c.get("model_type") not in ("llama", "mistral"):
            raise SystemExit(f"{folder}: model_type {c.get('model_type')!r} is not llama or mistral")
        if c.get("rope_scaling") not in (None, {}):
            raise SystemExit(f"{folder}: rope_scaling {c['rope_scaling']} is not implemented here")
        if c.get("attention_bias") or c.get("mlp_bias"):
            raise SystemExit(f"{folder}: biases are not implemented here")
        if c.get("hidden_act", "silu") != "silu":
            raise SystemExit(f"{folder}: hidden_act {c['hidden_act']} is not silu")
        tensors, _ = read_safetensors(folder / "model.safetensors")
        self.w = {k: torch.from_numpy(v.astype(np.float64)) for k, v in tensors.items()}
        self.d = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.d // self.heads
        self.layers = c["num_hidden_layers"]
        self.eps = c["rms_norm_eps"]
        self.theta = c.get("rope_theta", 10000.0)
        self.window = c.get("sliding_window") or 0
        if c.get("use_sliding_window") is False:
            self.window = 0
        self.tied = c.get("tie_word_embeddings", False)

    def rmsnorm(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, heads):
        T = x.shape[0]
        hd = self.head_dim
        x = x.reshape(T, heads, hd)
        inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], -1)
        cos, sin = torch.cos(emb)[:, None, :], torch.sin(emb)[:, None, :]
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)  # rotate_half
        return (x * cos + rot * sin).reshape(T, heads * hd)

    def forward(self, tokens: list[int], window: int) -> torch.Tensor:
        """Logits of every position, [T, vocab]."""
        w = self.w
        T = len(tokens)
        H, KV, hd = self.heads, self.kv_heads, self.head_dim
        x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
        q_pos = torch.arange(T)[:, None]
        k_pos = torch.arange(T)[None, :]
        visible = k_pos <= q_pos
        if window > 0:
            visible &= k_pos > q_pos - window
        for l in range(self.layers):
            p = f"model.layers.{l}."
            h = self.rmsnorm(x, w[p + "input_layernorm.weight"])
            q = self.rope(h @ w[p + "self_attn.q_proj.weight"].T, H).reshape(T, H, hd)
            k = self.rope(h @ w[p + "self_attn.k_proj.weight"].T, KV).reshape(T, KV, hd)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
            out = []
            for head in range(H):
                g = head // (H // KV)
                s = (q[:, head] @ k[:, g].T) / math.sqrt(hd)
                s = s.masked_fill(~visible, float("-inf"))
                out.append(torch.softmax(s, -1) @ v[:, g])
            x = x + torch.cat(out, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rmsnorm(x, w[p + "post_attention_layernorm.weight"])
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (gate * torch.sigmoid(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        x = self.rmsnorm(x, w["model.norm.weight"])
        head = w["model.embed_tokens.weight"] if self.tied or "lm_head.weight" not in w else w["lm_head.weight"]
        return x @ head.T

    def generate(self, prompt: list[int], window: int, n: int):
        tokens = list(prompt)
        logits = self.forward(tokens, window)[-1].numpy()
        first = logits
        greedy, margins = [], []
        for _ in range(n):
            top = int(np.argmax(logits))  # ties to the lowest id
            srt = np.sort(logits)
            greedy.append(top)
            margins.append(float(srt[-1] - srt[-2]))
            tokens.append(top)
            if len(greedy) < n:
                logits = self.forward(tokens, window)[-1].numpy()
        return first, greedy, margins


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="mistral")
    ap.add_argument("--keep", type=Path, help="write the test model here instead of a temporary folder")
    ap.add_argument("--out", type=Path, default=ROOT / "goldens" / "generate")
    args = ap.parse_args(argv)

    llama = json.loads((args.out / f"{args.family}.f32.json").read_text())
    scratch = tempfile.TemporaryDirectory() if args.keep is None else None
    model_dir = Path(scratch.name) / args.family if scratch else args.keep
    cmd = [sys.executable, str(HERE / "write_test_model.py"), "--family", args.family, "--out", str(model_dir),
           "--gguf", "f32,f16,q8_0", *llama["writer_args"]]
    subprocess.run(cmd, check=True, capture_output=True)
    model = HfLlama(model_dir / "hf")
    prompt = llama["prompt"]
    assert len(prompt) + N_GREEDY <= llama["n_ctx"]

    # The reference checked against llama.cpp, which applies no window.
    ref = np.array(llama["logits"], dtype=np.float64)
    logits, greedy, _ = model.generate(prompt, 0, N_GREEDY)
    rel = float(np.abs(logits - ref).max() / np.abs(ref).max())
    same = greedy == llama["greedy"]
    print(f"{args.family} without the window vs llama.cpp: relative {rel:.3g} (bound {SELF_CHECK_BOUND:g}), "
          f"greedy tokens {'equal' if same else 'DIFFER'}")
    if rel > SELF_CHECK_BOUND or not same:
        print("the reference disagrees with llama.cpp; no golden written", file=sys.stderr)
        return 1

    window = model.window
    if window <= 0:
        print(f"{args.family}: config.json has no sliding_window; nothing to write", file=sys.stderr)
        return 1
    logits, greedy, margins = model.generate(prompt, window, N_GREEDY)
    changed = next((i for i, (a, b) in enumerate(zip(greedy, llama["greedy"])) if a != b), None)
    fields = {
        "family": args.family, "type": "f32", "model": "hf", "writer_args": llama["writer_args"],
        "n_ctx": llama["n_ctx"], "prompt": prompt, "logits": [float(np.float32(v)) for v in logits],
        "max_abs_logit": float(np.abs(logits).max()), "greedy": greedy, "margins": margins, "n_swa": window,
        "reference": "PyTorch (scripts/gen_torch_generate_goldens.py)",
        "generated_by": "scripts/gen_torch_generate_goldens.py (float64, torch " + torch.__version__ + ")",
    }
    path = args.out / f"{args.family}.hf-torch.json"
    path.write_text(golden_text(fields))
    print(f"wrote {path.relative_to(ROOT)}: sliding window {window}, relative change of the prompt logits "
          f"{float(np.abs(logits - ref).max() / np.abs(ref).max()):.3g} from full attention, greedy differs "
          f"from token {changed}; min margin {min(margins):.3g}")
    if scratch:
        scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
