"""Which ggml type each GGUF tensor gets.

f32 / f16 / q8_0 files follow convert_hf_to_gguf.py's rules (prepare_tensors):
1-D tensors, norms, router/position/conv tensors and anything not named
".weight" stay F32; the rest take the output type, and a Q8_0 tensor whose
rows are not a multiple of 32 falls back to F16.

q4_0 files follow llama_model_quantize's rules applied to the f32 file
(src/llama-quant.cpp): only >=2-D ".weight" tensors that are not norms,
routers or conv kernels are quantized; output.weight (or token_embd.weight
when the output is tied to it) gets Q6_K, or Q8_0 when its rows are not a
multiple of 32 or the architecture is falcon; a type that does not fit the
row length falls back (Q6_K -> Q8_0, then F16).
"""

from __future__ import annotations

import re

from .formats import GGML_BLOCK, GGMLType

# tensors convert_hf_to_gguf.py always keeps in F32 (the subset these families produce)
_CONVERT_F32 = (r"blk\.\d+\.ffn_gate_inp\.weight", r"blk\.\d+\.ffn_gate_inp_shexp\.weight",
                r"position_embd\.weight", r"token_types\.weight", r"blk\.\d+\.ssm_conv1d\.weight",
                r"blk\.\d+\.shortconv\.conv\.weight")


def convert_type(name: str, shape: tuple[int, ...], out_type: str) -> int:
    """ggml type of one tensor in an f32/f16/q8_0 file written like convert_hf_to_gguf.py."""
    if len(shape) <= 1 or name.endswith("_norm.weight"):
        return GGMLType.F32
    if any(re.fullmatch(p, name) for p in _CONVERT_F32) or not name.endswith((".weight", ".lora_a", ".lora_b")):
        return GGMLType.F32
    if out_type == "f32":
        return GGMLType.F32
    if out_type == "f16":
        return GGMLType.F16
    if out_type == "bf16":
        return GGMLType.BF16
    if out_type == "q8_0":
        return GGMLType.Q8_0 if shape[-1] % 32 == 0 else GGMLType.F16   # gguf-py's QuantError fallback
    raise ValueError(f"convert_hf_to_gguf.py cannot write {out_type}")


def ggml_n_dims(shape: tuple[int, ...]) -> int:
    """ggml_n_dims: trailing ggml dimensions of size 1 (leading numpy ones) do not count."""
    n = len(shape)
    while n > 1 and shape[len(shape) - n] == 1:
        n -= 1
    return n


def _quantize_allowed(name: str, shape: tuple[int, ...]) -> bool:
    """llama-quant.cpp tensor_allows_quantization (the parts these families reach)."""
    if ggml_n_dims(shape) < 2 or not name.endswith("weight"):
        return False
    blocked = ("_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
               "ssm_conv1d", "shortconv.conv.weight", "attn_rel_b.weight")
    if any(b in name for b in blocked):
        return False
    return name not in ("position_embd.weight", "token_types.weight")


def quantize_types(tensors: list[tuple[str, tuple[int, ...]]], arch: str, target: str) -> dict[str, int]:
    """ggml type of every tensor after llama_model_quantize(f32 file, target)."""
    default = {"q4_0": GGMLType.Q4_0, "q8_0": GGMLType.Q8_0}[target]
    names = {n for n, _ in tensors}
    tied = "output.weight" not in names
    out: dict[str, int] = {}
    for name, shape in tensors:
        if not _quantize_allowed(name, shape):
            out[name] = GGMLType.F32
            continue
        ncols = shape[-1]
        new = default
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            if arch == "falcon" or ncols % GGML_BLOCK[new][0] != 0:
                new = GGMLType.Q8_0
            elif new != GGMLType.Q8_0:
                new = GGMLType.Q6_K
        if ncols % GGML_BLOCK[new][0] != 0:      # tensor_type_fallback
            if new == GGMLType.Q6_K:
                new = GGMLType.Q8_0
            if ncols % GGML_BLOCK[new][0] != 0:
                new = GGMLType.F16
        out[name] = new
    return out
