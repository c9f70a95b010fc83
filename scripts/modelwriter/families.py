"""The model families: what transformers writes (config.json, tensor names and
shapes) and what llama.cpp's convert_hf_to_gguf.py turns that into (GGUF
architecture, `<arch>.*` keys, tensor names and layouts).

Each family is a small class:
  config(d)            -> the config.json dict, as the transformers config class serializes it
  hf_tensors(cfg, w)   -> registers every safetensors tensor with `w.add(...)`
  gguf_params(cfg)     -> the `<arch>.*` keys, in the converter's order
  gguf_tensors(cfg, t) -> [(gguf name, float32 array)] from the HF tensors

Weights are float32 arrays already rounded to the safetensors dtype, so the
f32 GGUF holds exactly the values of the HF folder.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from .formats import KV, GGUFValueType as VT, kv_arr, kv_bool, kv_f32, kv_str, kv_u32, round_to_dtype


@dataclass
class Dims:
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int | None = None      # None: hidden // heads (or the family's own choice)
    intermediate: int | None = None  # None: 2 * hidden
    vocab: int = 320
    experts: int = 4
    experts_used: int = 2
    moe_intermediate: int | None = None  # None: hidden
    max_positions: int = 2048
    bos_id: int = 0
    eos_id: int = 1
    pad_id: int | None = None

    @property
    def ff(self) -> int:
        return self.intermediate or 2 * self.hidden

    @property
    def moe_ff(self) -> int:
        return self.moe_intermediate or self.hidden


class Weights:
    """Deterministic random tensors: each tensor's values depend only on the
    seed and its name, so adding a tensor never changes the others."""

    def __init__(self, seed: int, dtype: str, std: float):
        self.seed, self.dtype, self.std = seed, dtype, std
        self.tensors: dict[str, np.ndarray] = {}

    def add(self, name: str, shape: tuple[int, ...] | list[int], kind: str = "w") -> None:
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode("utf-8"))])
        noise = rng.standard_normal(tuple(shape)).astype(np.float32)
        if kind == "w":                     # weight matrices, biases
            value = noise * self.std
        elif kind == "norm":                # norm scales used as-is: near 1
            value = 1.0 + noise * 0.05
        elif kind == "norm0":               # gemma-style scales applied as (1 + w): near 0
            value = noise * 0.05
        elif kind == "small":               # e.g. router score-correction bias
            value = noise * 0.01
        else:
            raise ValueError(kind)
        self.tensors[name] = round_to_dtype(value.astype(np.float32), self.dtype)


GGUFTensors = list[tuple[str, np.ndarray]]


# --------------------------------------------------------------------------
# helpers shared by the converter-like code
# --------------------------------------------------------------------------

def find(cfg: dict, *keys: str) -> Any:
    """convert_hf_to_gguf.py's find_hparam(..., optional=True): first key present."""
    for k in keys:
        if k in cfg:
            return cfg[k]
    return None


def base_params(arch: str, cfg: dict, *, head_count_kv: Any = None) -> list[KV]:
    """TextModel.set_gguf_parameters: the keys every model gets from its config."""
    a = arch
    out: list[KV] = [kv_u32(f"{a}.block_count", find(cfg, "n_layers", "num_hidden_layers", "n_layer", "num_layers"))]
    if (n := find(cfg, "max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length",
                  "model_max_length")) is not None:
        out.append(kv_u32(f"{a}.context_length", n))
    if (n := find(cfg, "hidden_size", "n_embd", "dim")) is not None:
        out.append(kv_u32(f"{a}.embedding_length", n))
    if (n := find(cfg, "prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner",
                  "hidden_dim")) is not None:
        out.append(kv_u32(f"{a}.feed_forward_length", n))
    if (n := find(cfg, "num_attention_heads", "n_head", "n_heads")) is not None:
        out.append(kv_u32(f"{a}.attention.head_count", n))
    kv = head_count_kv if head_count_kv is not None else find(cfg, "num_key_value_heads", "n_kv_heads")
    if isinstance(kv, list):
        out.append(kv_arr(f"{a}.attention.head_count_kv", VT.INT32, kv))
    elif kv is not None:
        out.append(kv_u32(f"{a}.attention.head_count_kv", kv))
    rope = dict(cfg.get("rope_scaling") or {})
    if "rope_type" not in rope and "type" in rope:
        rope["rope_type"] = rope["type"]
    rope_type = rope.get("rope_type")
    if rope_type == "linear" and rope.get("factor") is not None:
        out += [kv_str(f"{a}.rope.scaling.type", "linear"), kv_f32(f"{a}.rope.scaling.factor", rope["factor"])]
    elif rope_type == "yarn" and rope.get("factor") is not None:
        out += [kv_str(f"{a}.rope.scaling.type", "yarn"), kv_f32(f"{a}.rope.scaling.factor", rope["factor"]),
                kv_u32(f"{a}.rope.scaling.original_context_length", rope["original_max_position_embeddings"])]
        for src, key in (("extrapolation_factor", "yarn_ext_factor"), ("attention_factor", "yarn_attn_factor"),
                         ("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
            if rope.get(src) is not None:
                out.append(kv_f32(f"{a}.rope.scaling.{key}", rope[src]))
    elif rope_type in ("su", "longrope"):
        out.append(kv_str(f"{a}.rope.scaling.type", "longrope"))
    if (theta := find(cfg, "global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta",
                      "rotary_emb_base")) is not None:
        out.append(kv_f32(f"{a}.rope.freq_base", theta))
    if (theta := find(cfg, "local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta",
                      "rope_local_base_freq")) is not None:
        out.append(kv_f32(f"{a}.rope.freq_base_swa", theta))
    if (eps := find(cfg, "rms_norm_eps", "norm_eps")) is not None:
        out.append(kv_f32(f"{a}.attention.layer_norm_rms_epsilon", eps))
    if (eps := find(cfg, "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")) is not None:
        out.append(kv_f32(f"{a}.attention.layer_norm_epsilon", eps))
    if (n := find(cfg, "num_local_experts", "num_experts", "n_routed_experts")) is not None:
        out.append(kv_u32(f"{a}.expert_count", n))
    if (n := find(cfg, "num_experts_per_tok", "num_experts_per_token", "top_k_experts")) is not None:
        out.append(kv_u32(f"{a}.expert_used_count", n))
    if cfg.get("n_group") is not None:
        out.append(kv_u32(f"{a}.expert_group_count", cfg["n_group"]))
    if cfg.get("topk_group") is not None:
        out.append(kv_u32(f"{a}.expert_group_used_count", cfg["topk_group"]))
    if (fn := find(cfg, "score_function", "scoring_func", "score_func")) is not None:
        out.append(kv_u32(f"{a}.expert_gating_func", {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}[fn]))
    if cfg.get("head_dim") is not None:
        out += [kv_u32(f"{a}.attention.key_length", cfg["head_dim"]),
                kv_u32(f"{a}.attention.value_length", cfg["head_dim"])]
    out.append(FILE_TYPE_PLACEHOLDER)
    return out


# general.file_type depends on the output type; the writer fills it in.
FILE_TYPE_PLACEHOLDER = KV("general.file_type", VT.UINT32, -1)


def merge_kvs(kvs: list[KV]) -> list[KV]:
    """Later entries replace earlier ones with the same key, keeping the first position."""
    out: list[KV] = []
    pos: dict[str, int] = {}
    for kv in kvs:
        if kv.key in pos:
            out[pos[kv.key]] = kv
        else:
            pos[kv.key] = len(out)
            out.append(kv)
    return out


def permute_qk(w: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """LlamaModel.permute: HF's rotate-half q/k rows -> llama.cpp's interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    shape = w.shape
    return (w.reshape(n_head, 2, shape[0] // n_head // 2, *shape[1:]).swapaxes(1, 2).reshape(shape))


def rename_layers(tensors: dict[str, np.ndarray], layer_re: str, layer_map: dict[str, str],
                  globals_map: dict[str, str]) -> GGUFTensors:
    """Map HF names to GGUF names. `layer_re` captures the block index and the
    rest of the name; `layer_map` maps that rest to the GGUF suffix."""
    out: GGUFTensors = []
    for name, arr in tensors.items():
        m = re.fullmatch(layer_re, name)
        if m:
            rest = m.group(2)
            if rest not in layer_map:
                raise KeyError(f"no GGUF name for {name}")
            out.append((f"blk.{m.group(1)}.{layer_map[rest]}", arr))
        elif name in globals_map:
            out.append((globals_map[name], arr))
        else:
            raise KeyError(f"no GGUF name for {name}")
    return out


LLAMA_LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.experts.gate_proj.weight": "ffn_gate_exps.weight", "mlp.experts.up_proj.weight": "ffn_up_exps.weight",
    "mlp.experts.down_proj.weight": "ffn_down_exps.weight",
}
LLAMA_GLOBALS = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                 "lm_head.weight": "output.weight"}
MODEL_LAYER_RE = r"model\.layers\.(\d+)\.(.+)"


def stack_experts(tensors: dict[str, np.ndarray], pattern: str, merged: str,
                  projections: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Replace per-expert 2-D tensors with one [n_expert, rows, cols] tensor per
    projection, as the converters' `_experts` handling does. `pattern` and
    `merged` are format strings with {bid}, {xid}, {w}."""
    out: dict[str, np.ndarray] = {}
    done: set[str] = set()
    for name, arr in tensors.items():
        m = re.fullmatch(pattern.format(bid=r"(?P<bid>\d+)", xid=r"(?P<xid>\d+)", w=r"(?P<w>[^.]+)"), name)
        if not m:
            out[name] = arr
            continue
        bid = m.group("bid")
        if bid in done:
            continue
        done.add(bid)
        for w in projections:
            experts = []
            xid = 0
            while (key := pattern.format(bid=bid, xid=xid, w=w).replace("\\", "")) in tensors:
                experts.append(tensors[key])
                xid += 1
            out[merged.format(bid=bid, w=w)] = np.stack(experts, axis=0)
    return out


def llama_like_config(d: Dims, *, model_type: str, arch: str, rope_theta: float, tie: bool,
                      hidden_act: str = "silu", rms_eps: float = 1e-5, extra: dict | None = None) -> dict:
    cfg = {
        "architectures": [arch],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": d.bos_id,
        "eos_token_id": d.eos_id,
        "hidden_act": hidden_act,
        "hidden_size": d.hidden,
        "initializer_range": 0.02,
        "intermediate_size": d.ff,
        "max_position_embeddings": d.max_positions,
        "model_type": model_type,
        "num_attention_heads": d.heads,
        "num_hidden_layers": d.layers,
        "num_key_value_heads": d.kv_heads,
        "rms_norm_eps": rms_eps,
        "rope_scaling": None,
        "rope_theta": rope_theta,
        "tie_word_embeddings": tie,
        "use_cache": True,
        "vocab_size": d.vocab,
    }
    if d.pad_id is not None:
        cfg["pad_token_id"] = d.pad_id
    cfg.update(extra or {})
    return dict(sorted(cfg.items()))


def add_attention(cfg: dict, w: Weights, p: str, *, qkv_bias: bool = False, o_bias: bool = False) -> None:
    """q/k/v/o projections of one layer (prefix `p`), nn.Linear's [out, in]."""
    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    for proj, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
        w.add(p + f"self_attn.{proj}.weight", (rows, H))
        if qkv_bias:
            w.add(p + f"self_attn.{proj}.bias", (rows,))
    w.add(p + "self_attn.o_proj.weight", (H, nh * hd))
    if o_bias:
        w.add(p + "self_attn.o_proj.bias", (H,))


def add_llama_layers(cfg: dict, w: Weights, *, qkv_bias: bool = False, qk_norm: str | None = None,
                     mlp: str = "dense", norm_kind: str = "norm", o_bias: bool = False, input_norm: bool = True,
                     ffn_norm: bool = True) -> None:
    """Register the usual decoder tensors (embeddings, attention, MLP, norms)."""
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    w.add("model.embed_tokens.weight", (V, H))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if input_norm:
            w.add(p + "input_layernorm.weight", (H,), norm_kind)
        add_attention(cfg, w, p, qkv_bias=qkv_bias, o_bias=o_bias)
        if qk_norm == "head":
            w.add(p + "self_attn.q_norm.weight", (hd,), norm_kind)
            w.add(p + "self_attn.k_norm.weight", (hd,), norm_kind)
        elif qk_norm == "full":
            w.add(p + "self_attn.q_norm.weight", (nh * hd,), norm_kind)
            w.add(p + "self_attn.k_norm.weight", (nkv * hd,), norm_kind)
        if ffn_norm:
            w.add(p + "post_attention_layernorm.weight", (H,), norm_kind)
        if mlp == "dense":
            F = cfg["intermediate_size"]
            w.add(p + "mlp.gate_proj.weight", (F, H))
            w.add(p + "mlp.up_proj.weight", (F, H))
            w.add(p + "mlp.down_proj.weight", (H, F))
        elif mlp == "moe":
            E, F = cfg["num_experts"], cfg["moe_intermediate_size"]
            w.add(p + "mlp.gate.weight", (E, H))
            for e in range(E):
                w.add(p + f"mlp.experts.{e}.gate_proj.weight", (F, H))
                w.add(p + f"mlp.experts.{e}.up_proj.weight", (F, H))
                w.add(p + f"mlp.experts.{e}.down_proj.weight", (H, F))
    w.add("model.norm.weight", (H,), norm_kind)
    if not cfg.get("tie_word_embeddings", False):
        w.add("lm_head.weight", (V, H))


# --------------------------------------------------------------------------
# the families
# --------------------------------------------------------------------------

class Family:
    model_type = ""
    gguf_arch = ""
    tokenizer_kind = "bpe"          # synthetic tokenizer: "bpe" (byte level), "spm" (Gemma style), "spm-llama"
    chat_tokens: tuple[str, ...] = ()   # extra added tokens for the synthetic SPM tokenizers
    eos_token: str | None = None
    writes_file_type = True         # some converters never call add_file_type
    permute = False                 # llama.cpp's q/k row permutation
    tokenizer_class = "PreTrainedTokenizerFast"

    def head_dim(self, d: Dims) -> int:
        return d.head_dim or d.hidden // d.heads

    def config(self, d: Dims) -> dict: raise NotImplementedError
    def hf_tensors(self, cfg: dict, w: Weights) -> None: raise NotImplementedError
    def gguf_params(self, cfg: dict) -> list[KV]: raise NotImplementedError
    def gguf_tensors(self, cfg: dict, t: dict[str, np.ndarray]) -> GGUFTensors: raise NotImplementedError

    # extra tokenizer entries the converter adds for this family
    def vocab_extras(self, cfg: dict) -> dict[str, Any]:
        return {}

    def set_sliding_window(self, cfg: dict, n: int) -> dict:
        """config.json with a sliding window of `n` tokens (write_test_model.py --sliding-window).

        Any family whose config has `sliding_window` takes it. Configs with
        `use_sliding_window` (the Qwen families) also get use_sliding_window=true
        and max_window_layers=0, so every layer slides (transformers: layer i
        slides when i >= max_window_layers; Qwen3-MoE slides all layers), and
        their layer_types follow. Gemma 2/3 keep their sliding/full pattern.
        The GGUF key <arch>.attention.sliding_window comes from gguf_params(),
        i.e. only where convert_hf_to_gguf.py writes it (gemma2, gemma3, phi3)."""
        if "sliding_window" not in cfg:
            raise ValueError(f"{self.model_type} has no sliding window")
        cfg = dict(cfg, sliding_window=int(n))
        if "use_sliding_window" in cfg:
            cfg["use_sliding_window"] = True
            cfg["max_window_layers"] = 0
            if "layer_types" in cfg:
                cfg["layer_types"] = ["sliding_attention"] * len(cfg["layer_types"])
        return cfg


class Llama(Family):
    """Llama 3.2 layout: tied embeddings, llama3 rope scaling (-> rope_freqs)."""
    model_type, gguf_arch, permute = "llama", "llama", True
    arch = "LlamaForCausalLM"

    def config(self, d: Dims) -> dict:
        return llama_like_config(d, model_type="llama", arch=self.arch, rope_theta=500000.0, tie=True, extra={
            "head_dim": self.head_dim(d), "mlp_bias": False, "pretraining_tp": 1, "rms_norm_eps": 1e-5,
            "max_position_embeddings": 131072,
            "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        })

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, qkv_bias=cfg.get("attention_bias", False), o_bias=cfg.get("attention_bias", False))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        rope_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        return base_params(a, cfg) + [kv_u32(f"{a}.vocab_size", cfg["vocab_size"]),
                                      kv_u32(f"{a}.rope.dimension_count", rope_dim)]

    def extra_tensors(self, cfg) -> GGUFTensors:
        rope = cfg.get("rope_scaling") or {}
        if rope.get("rope_type", "").lower() != "llama3":
            return []
        base = cfg.get("rope_theta", 10000.0)
        dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
        factor, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
        old_ctx = rope.get("original_max_position_embeddings", 8192)
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        factors = []
        for f in freqs.astype(np.float32):
            wavelen = 2 * math.pi / float(f)
            if wavelen < high_wavelen:
                factors.append(1.0)
            elif wavelen > low_wavelen:
                factors.append(factor)
            else:
                smooth = (old_ctx / wavelen - low) / (high - low)
                factors.append(1 / ((1 - smooth) / factor + smooth))
        return [("rope_freqs.weight", np.array(factors, dtype=np.float32))]

    def convert_layers(self, cfg, t) -> dict[str, np.ndarray]:
        t = dict(t)
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        if self.permute:
            for name in list(t):
                if name.endswith(("q_proj.weight", "q_proj.bias")):
                    t[name] = permute_qk(t[name], nh, nh)
                elif name.endswith(("k_proj.weight", "k_proj.bias")):
                    t[name] = permute_qk(t[name], nh, nkv)
        return t

    def gguf_tensors(self, cfg, t):
        t = self.convert_layers(cfg, t)
        return self.extra_tensors(cfg) + rename_layers(t, MODEL_LAYER_RE, LLAMA_LAYER_MAP, LLAMA_GLOBALS)


class Mistral(Llama):
    """Mistral 7B v0.3 layout; the converter treats it as `llama`."""
    model_type, tokenizer_kind = "mistral", "spm-llama"
    tokenizer_class = "LlamaTokenizer"
    arch = "MistralForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="mistral", arch=self.arch, rope_theta=1000000.0, tie=False, extra={
            "head_dim": self.head_dim(d), "sliding_window": None, "max_position_embeddings": 32768,
        })


class Mixtral(Llama):
    """Mixtral 8x7B layout: block_sparse_moe.experts.{e}.w1/w2/w3 per expert."""
    model_type, tokenizer_kind = "mixtral", "spm-llama"
    tokenizer_class = "LlamaTokenizer"
    arch = "MixtralForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="mixtral", arch=self.arch, rope_theta=1000000.0, tie=False, extra={
            "head_dim": self.head_dim(d), "sliding_window": None, "max_position_embeddings": 32768,
            "num_local_experts": d.experts, "num_experts_per_tok": d.experts_used,
            "output_router_logits": False, "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0,
        })

    def hf_tensors(self, cfg, w):
        H, F, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
        add_llama_layers(cfg, w, mlp="none")
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}.block_sparse_moe."
            w.add(p + "gate.weight", (E, H))
            for e in range(E):
                w.add(p + f"experts.{e}.w1.weight", (F, H))
                w.add(p + f"experts.{e}.w2.weight", (H, F))
                w.add(p + f"experts.{e}.w3.weight", (F, H))

    def gguf_tensors(self, cfg, t):
        t = self.convert_layers(cfg, t)
        t = stack_experts(t, r"model\.layers\.{bid}\.block_sparse_moe\.experts\.{xid}\.{w}\.weight",
                          "model.layers.{bid}.block_sparse_moe.experts.{w}.weight", ("w1", "w2", "w3"))
        layer_map = dict(LLAMA_LAYER_MAP)
        layer_map.update({"block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
                          "block_sparse_moe.experts.w1.weight": "ffn_gate_exps.weight",
                          "block_sparse_moe.experts.w2.weight": "ffn_down_exps.weight",
                          "block_sparse_moe.experts.w3.weight": "ffn_up_exps.weight"})
        return rename_layers(t, MODEL_LAYER_RE, layer_map, LLAMA_GLOBALS)


class Granite(Llama):
    """Granite 3.x: llama with embedding/attention/residual/logit multipliers."""
    model_type, gguf_arch = "granite", "granite"
    arch = "GraniteForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="granite", arch=self.arch, rope_theta=10000.0, tie=True, extra={
            "attention_multiplier": 0.015625, "embedding_multiplier": 12.0, "logits_scaling": 8.0,
            "residual_multiplier": 0.22, "mlp_bias": False, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096,
        })

    def gguf_params(self, cfg):
        a = self.gguf_arch
        cfg = {k: v for k, v in cfg.items() if k != "head_dim"}
        out = super().gguf_params(cfg)
        for key, gkey in (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
                          ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale")):
            if cfg.get(key):
                out.append(kv_f32(f"{a}.{gkey}", cfg[key]))
        return out


class Qwen2(Family):
    model_type, gguf_arch = "qwen2", "qwen2"
    arch = "Qwen2ForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="qwen2", arch=self.arch, rope_theta=1000000.0, tie=True, rms_eps=1e-6,
                                 extra={"max_window_layers": d.layers, "sliding_window": None,
                                        "use_sliding_window": False, "max_position_embeddings": 32768,
                                        "layer_types": ["full_attention"] * d.layers})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, qkv_bias=True)

    def gguf_params(self, cfg):
        return base_params(self.gguf_arch, cfg)

    def gguf_tensors(self, cfg, t):
        return rename_layers(t, MODEL_LAYER_RE, LLAMA_LAYER_MAP, LLAMA_GLOBALS)


class Qwen2Moe(Qwen2):
    model_type, gguf_arch = "qwen2_moe", "qwen2moe"
    arch = "Qwen2MoeForCausalLM"

    def config(self, d):
        cfg = llama_like_config(d, model_type="qwen2_moe", arch=self.arch, rope_theta=1000000.0, tie=False,
                                rms_eps=1e-6, extra={
                                    "decoder_sparse_step": 1, "max_window_layers": d.layers, "mlp_only_layers": [],
                                    "moe_intermediate_size": d.moe_ff, "norm_topk_prob": False,
                                    "num_experts": d.experts, "num_experts_per_tok": d.experts_used,
                                    "output_router_logits": False, "router_aux_loss_coef": 0.001,
                                    "shared_expert_intermediate_size": d.ff, "sliding_window": None,
                                    "use_sliding_window": False, "max_position_embeddings": 8192,
                                    "qkv_bias": True, "layer_types": ["full_attention"] * d.layers})
        return cfg

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, qkv_bias=True, mlp="moe")
        H, F = cfg["hidden_size"], cfg["shared_expert_intermediate_size"]
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}.mlp."
            w.add(p + "shared_expert.gate_proj.weight", (F, H))
            w.add(p + "shared_expert.up_proj.weight", (F, H))
            w.add(p + "shared_expert.down_proj.weight", (H, F))
            w.add(p + "shared_expert_gate.weight", (1, H))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        out = base_params(a, cfg)
        out.append(kv_u32(f"{a}.expert_feed_forward_length", cfg["moe_intermediate_size"]))
        if cfg.get("shared_expert_intermediate_size") is not None:
            out.append(kv_u32(f"{a}.expert_shared_feed_forward_length", cfg["shared_expert_intermediate_size"]))
        return out

    def gguf_tensors(self, cfg, t):
        t = stack_experts(t, r"model\.layers\.{bid}\.mlp\.experts\.{xid}\.{w}\.weight",
                          "model.layers.{bid}.mlp.experts.{w}.weight", ("down_proj", "gate_proj", "up_proj"))
        layer_map = dict(LLAMA_LAYER_MAP)
        layer_map.update({"mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
                          "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
                          "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
                          "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight"})
        return rename_layers(t, MODEL_LAYER_RE, layer_map, LLAMA_GLOBALS)


class Qwen3(Qwen2):
    """Qwen3: explicit head_dim (twice hidden/heads by default), per-head q/k RMSNorm."""
    model_type, gguf_arch = "qwen3", "qwen3"
    arch = "Qwen3ForCausalLM"

    def head_dim(self, d):
        return d.head_dim or 2 * d.hidden // d.heads

    def config(self, d):
        return llama_like_config(d, model_type="qwen3", arch=self.arch, rope_theta=1000000.0, tie=True, rms_eps=1e-6,
                                 extra={"head_dim": self.head_dim(d), "max_window_layers": d.layers,
                                        "sliding_window": None, "use_sliding_window": False,
                                        "max_position_embeddings": 40960,
                                        "layer_types": ["full_attention"] * d.layers})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, qk_norm="head")


class Qwen3Moe(Qwen2Moe):
    model_type, gguf_arch = "qwen3_moe", "qwen3moe"
    arch = "Qwen3MoeForCausalLM"

    def head_dim(self, d):
        return d.head_dim or 2 * d.hidden // d.heads

    def config(self, d):
        return llama_like_config(d, model_type="qwen3_moe", arch=self.arch, rope_theta=1000000.0, tie=False,
                                 rms_eps=1e-6, extra={
                                     "head_dim": self.head_dim(d), "decoder_sparse_step": 1,
                                     "max_window_layers": d.layers, "mlp_only_layers": [],
                                     "moe_intermediate_size": d.moe_ff, "norm_topk_prob": True,
                                     "num_experts": d.experts, "num_experts_per_tok": d.experts_used,
                                     "output_router_logits": False, "router_aux_loss_coef": 0.001,
                                     "sliding_window": None, "use_sliding_window": False,
                                     "max_position_embeddings": 40960})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, qk_norm="head", mlp="moe")


class Olmoe(Qwen2Moe):
    """OLMoE: q/k RMSNorm over the whole projection, 64 experts in the real model."""
    model_type, gguf_arch = "olmoe", "olmoe"
    arch = "OlmoeForCausalLM"

    def config(self, d):
        # OLMoE is multi-head (llama.cpp sizes attn_k_norm by n_embd), so kv heads = heads
        return llama_like_config(d, model_type="olmoe", arch=self.arch, rope_theta=10000.0, tie=False, rms_eps=1e-5,
                                 extra={"num_key_value_heads": d.heads, "clip_qkv": None, "norm_topk_prob": False, "num_experts": d.experts,
                                        "num_experts_per_tok": d.experts_used, "output_router_logits": False,
                                        "router_aux_loss_coef": 0.01, "intermediate_size": d.moe_ff,
                                        "max_position_embeddings": 4096})

    def hf_tensors(self, cfg, w):
        cfg = dict(cfg, moe_intermediate_size=cfg["intermediate_size"])
        add_llama_layers(cfg, w, qk_norm="full", mlp="moe")

    def gguf_params(self, cfg):
        return base_params(self.gguf_arch, cfg) + [kv_f32(f"{self.gguf_arch}.attention.layer_norm_rms_epsilon", 1e-5)]


class Gemma(Family):
    """Gemma 1: RMSNorm scales stored as (w - 1), GeGLU MLP, tied embeddings."""
    model_type, gguf_arch, tokenizer_kind = "gemma", "gemma", "spm"
    arch = "GemmaForCausalLM"
    tokenizer_class = "GemmaTokenizer"

    def config(self, d):
        return llama_like_config(d, model_type="gemma", arch=self.arch, rope_theta=10000.0, tie=True, rms_eps=1e-6,
                                 hidden_act="gelu", extra={"head_dim": self.head_dim(d), "hidden_activation": None,
                                                           "max_position_embeddings": 8192})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, norm_kind="norm0")

    def gguf_params(self, cfg):
        a = self.gguf_arch
        return [kv_u32(f"{a}.context_length", cfg["max_position_embeddings"]),
                kv_u32(f"{a}.embedding_length", cfg["hidden_size"]),
                kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.feed_forward_length", cfg["intermediate_size"]),
                kv_u32(f"{a}.attention.head_count", cfg["num_attention_heads"]),
                kv_u32(f"{a}.attention.head_count_kv", cfg.get("num_key_value_heads", cfg["num_attention_heads"])),
                kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"]),
                kv_u32(f"{a}.attention.key_length", cfg["head_dim"]),
                kv_u32(f"{a}.attention.value_length", cfg["head_dim"]),
                FILE_TYPE_PLACEHOLDER]

    layer_map = LLAMA_LAYER_MAP

    def gguf_tensors(self, cfg, t):
        t = {k: (v + np.float32(1) if k.endswith("norm.weight") else v) for k, v in t.items()}
        return rename_layers(t, MODEL_LAYER_RE, self.layer_map, LLAMA_GLOBALS)

    def vocab_extras(self, cfg):
        return {"add_space_prefix": False}


GEMMA2_LAYER_MAP = dict(LLAMA_LAYER_MAP)
GEMMA2_LAYER_MAP.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                         "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                         "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})


def add_gemma2_norms(cfg: dict, w: Weights) -> None:
    H = cfg["hidden_size"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.add(p + "pre_feedforward_layernorm.weight", (H,), "norm0")
        w.add(p + "post_feedforward_layernorm.weight", (H,), "norm0")


class Gemma2(Gemma):
    """Gemma 2: sandwich norms, logit soft-capping, alternating sliding window."""
    model_type, gguf_arch = "gemma2", "gemma2"
    arch = "Gemma2ForCausalLM"
    layer_map = GEMMA2_LAYER_MAP

    def config(self, d):
        hd = self.head_dim(d)
        return llama_like_config(d, model_type="gemma2", arch=self.arch, rope_theta=10000.0, tie=True, rms_eps=1e-6,
                                 hidden_act="gelu_pytorch_tanh", extra={
                                     "head_dim": hd, "hidden_activation": "gelu_pytorch_tanh",
                                     "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                                     "query_pre_attn_scalar": hd, "sliding_window": 4096,
                                     "cache_implementation": "hybrid", "max_position_embeddings": 8192,
                                     "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                     for i in range(d.layers)]})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, norm_kind="norm0")
        add_gemma2_norms(cfg, w)

    def gguf_params(self, cfg):
        a = self.gguf_arch
        return super().gguf_params(cfg) + [
            kv_f32(f"{a}.attn_logit_softcapping", cfg["attn_logit_softcapping"]),
            kv_f32(f"{a}.final_logit_softcapping", cfg["final_logit_softcapping"]),
            kv_u32(f"{a}.attention.sliding_window", cfg["sliding_window"])]


class Gemma3Text(Gemma2):
    """Gemma 3 text (1B layout): q/k norms, 5 local : 1 global layers with their own rope base."""
    model_type, gguf_arch = "gemma3_text", "gemma3"
    arch = "Gemma3ForCausalLM"

    def head_dim(self, d):
        return d.head_dim or 2 * d.hidden // d.heads

    def config(self, d):
        hd = self.head_dim(d)
        return llama_like_config(d, model_type="gemma3_text", arch=self.arch, rope_theta=1000000.0, tie=True,
                                 rms_eps=1e-6, hidden_act="gelu_pytorch_tanh", extra={
                                     "head_dim": hd, "hidden_activation": "gelu_pytorch_tanh",
                                     "attn_logit_softcapping": None, "final_logit_softcapping": None,
                                     "query_pre_attn_scalar": hd, "sliding_window": 512,
                                     "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0,
                                     "cache_implementation": "hybrid", "max_position_embeddings": 32768,
                                     "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                                     for i in range(d.layers)]})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, norm_kind="norm0", qk_norm="head")
        add_gemma2_norms(cfg, w)

    def gguf_params(self, cfg):
        a = self.gguf_arch
        out = base_params(a, cfg)
        out += [kv_u32(f"{a}.context_length", cfg.get("max_position_embeddings", 131072)),
                kv_u32(f"{a}.attention.head_count", cfg.get("num_attention_heads", 8)),
                kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6)),
                kv_u32(f"{a}.attention.key_length", cfg.get("head_dim", 256)),
                kv_u32(f"{a}.attention.value_length", cfg.get("head_dim", 256)),
                kv_f32(f"{a}.rope.freq_base", cfg.get("rope_theta", 1000000.0))]
        if cfg.get("final_logit_softcapping"):
            out.append(kv_f32(f"{a}.final_logit_softcapping", cfg["final_logit_softcapping"]))
        if cfg.get("sliding_window_pattern") != 1:
            out.append(kv_u32(f"{a}.attention.sliding_window", cfg["sliding_window"]))
        out.append(kv_u32(f"{a}.attention.head_count_kv", cfg.get("num_key_value_heads", 4)))
        return out

    def vocab_extras(self, cfg):
        # convert_hf_to_gguf.py writes add_space_prefix=False only on its
        # tokenizer.model path; we always take that path for SPM vocabularies.
        return {"add_space_prefix": False}


class Phi3(Family):
    """Phi-3 mini: fused qkv_proj and gate_up_proj."""
    model_type, gguf_arch, tokenizer_kind = "phi3", "phi3", "spm-llama"
    arch = "Phi3ForCausalLM"
    tokenizer_class = "LlamaTokenizer"
    # llama.cpp looks these up by text when general.name mentions phi3
    chat_tokens = ("<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>")
    eos_token = "<|endoftext|>"

    def config(self, d):
        return llama_like_config(d, model_type="phi3", arch=self.arch, rope_theta=10000.0, tie=False, rms_eps=1e-5,
                                 extra={"embd_pdrop": 0.0, "resid_pdrop": 0.0, "original_max_position_embeddings": 4096,
                                        "max_position_embeddings": 4096, "partial_rotary_factor": 1.0,
                                        "sliding_window": 2047, "pad_token_id": d.pad_id if d.pad_id is not None
                                        else d.eos_id})

    def hf_tensors(self, cfg, w):
        H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd = H // nh
        w.add("model.embed_tokens.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            w.add(p + "input_layernorm.weight", (H,), "norm")
            w.add(p + "self_attn.qkv_proj.weight", ((nh + 2 * nkv) * hd, H))
            w.add(p + "self_attn.o_proj.weight", (H, H))
            w.add(p + "post_attention_layernorm.weight", (H,), "norm")
            w.add(p + "mlp.gate_up_proj.weight", (2 * F, H))
            w.add(p + "mlp.down_proj.weight", (H, F))
        w.add("model.norm.weight", (H,), "norm")
        w.add("lm_head.weight", (V, H))

    def set_longrope(self, cfg, original_ctx: int) -> dict:
        """config.json of a LongRoPE model (Phi-3-mini-128k's layout) whose
        original context is `original_ctx` (write_test_model.py --longrope N):
        rope_scaling {type: longrope, long_factor, short_factor}, rope_dims/2
        numbers each, deterministic. The long factors stretch the slow
        frequencies a lot, so a context past `original_ctx` changes logits."""
        n = int(cfg.get("partial_rotary_factor", 1.0) * cfg["hidden_size"]) // cfg["num_attention_heads"] // 2
        long_f = [round(1.0 + 15.0 * (j / max(n - 1, 1)) ** 2, 4) for j in range(n)]
        short_f = [round(1.0 + 0.5 * j / max(n - 1, 1), 4) for j in range(n)]
        return dict(cfg, original_max_position_embeddings=int(original_ctx),
                    rope_scaling={"long_factor": long_f, "short_factor": short_f, "type": "longrope"})

    def _longrope(self, cfg):
        """(attn_factor, long, short) as Phi3MiniModel.generate_extra_tensors
        derives them, or None without rope_scaling.long_factor."""
        rs = cfg.get("rope_scaling") or {}
        if not rs.get("long_factor"):
            return None
        orig = cfg["original_max_position_embeddings"]
        scale = cfg["max_position_embeddings"] / orig
        attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
        return attn, rs["long_factor"], rs["short_factor"]

    def gguf_params(self, cfg):
        a = self.gguf_arch
        n_embd, n_head = cfg["hidden_size"], cfg["num_attention_heads"]
        rope_dims = int(cfg.get("partial_rotary_factor", 1.0) * n_embd) // n_head
        # The converter writes no rope.scaling.type for Phi-3: LongRoPE shows
        # only as the factor tensors and this attn_factor key.
        lr = self._longrope(cfg)
        extra = [kv_f32(f"{a}.rope.scaling.attn_factor", lr[0])] if lr else []
        return [kv_u32(f"{a}.context_length", cfg["max_position_embeddings"]),
                kv_u32(f"{a}.rope.scaling.original_context_length", cfg["original_max_position_embeddings"]),
                kv_u32(f"{a}.embedding_length", n_embd),
                kv_u32(f"{a}.feed_forward_length", cfg["intermediate_size"]),
                kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.attention.head_count", n_head),
                kv_u32(f"{a}.attention.head_count_kv", cfg["num_key_value_heads"]),
                kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"]),
                kv_u32(f"{a}.rope.dimension_count", rope_dims),
                kv_f32(f"{a}.rope.freq_base", cfg["rope_theta"]),
                FILE_TYPE_PLACEHOLDER,
                kv_u32(f"{a}.attention.sliding_window", cfg.get("sliding_window") or 0)] + extra

    def gguf_tensors(self, cfg, t):
        layer_map = dict(LLAMA_LAYER_MAP)
        layer_map.update({"self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"})
        out = rename_layers(t, MODEL_LAYER_RE, layer_map, LLAMA_GLOBALS)
        if lr := self._longrope(cfg):
            # generate_extra_tensors runs first: the factors lead the file.
            out = [("rope_factors_long.weight", np.array(lr[1], dtype=np.float32)),
                   ("rope_factors_short.weight", np.array(lr[2], dtype=np.float32))] + out
        return out


class GPT2(Family):
    """GPT-2: Conv1D weights stored [in, out]; learned positions; tied output."""
    model_type, gguf_arch = "gpt2", "gpt2"
    arch = "GPT2LMHeadModel"

    def config(self, d):
        cfg = {
            "activation_function": "gelu_new", "architectures": [self.arch], "attn_pdrop": 0.1,
            "bos_token_id": d.bos_id, "embd_pdrop": 0.1, "eos_token_id": d.eos_id, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": d.hidden,
            "n_head": d.heads, "n_inner": None, "n_layer": d.layers, "n_positions": 1024,
            "reorder_and_upcast_attn": False, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False,
            "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
            "use_cache": True, "vocab_size": d.vocab,
        }
        return cfg

    def hf_tensors(self, cfg, w):
        E, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        w.add("transformer.wte.weight", (V, E))
        w.add("transformer.wpe.weight", (P, E))
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            w.add(p + "ln_1.weight", (E,), "norm")
            w.add(p + "ln_1.bias", (E,))
            w.add(p + "attn.c_attn.weight", (E, 3 * E))     # Conv1D: [in, out]
            w.add(p + "attn.c_attn.bias", (3 * E,))
            w.add(p + "attn.c_proj.weight", (E, E))
            w.add(p + "attn.c_proj.bias", (E,))
            w.add(p + "ln_2.weight", (E,), "norm")
            w.add(p + "ln_2.bias", (E,))
            w.add(p + "mlp.c_fc.weight", (E, 4 * E))
            w.add(p + "mlp.c_fc.bias", (4 * E,))
            w.add(p + "mlp.c_proj.weight", (4 * E, E))
            w.add(p + "mlp.c_proj.bias", (E,))
        w.add("transformer.ln_f.weight", (E,), "norm")
        w.add("transformer.ln_f.bias", (E,))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        return [kv_u32(f"{a}.block_count", cfg["n_layer"]), kv_u32(f"{a}.context_length", cfg["n_ctx"]),
                kv_u32(f"{a}.embedding_length", cfg["n_embd"]), kv_u32(f"{a}.feed_forward_length", 4 * cfg["n_embd"]),
                kv_u32(f"{a}.attention.head_count", cfg["n_head"]),
                kv_f32(f"{a}.attention.layer_norm_epsilon", cfg["layer_norm_epsilon"]), FILE_TYPE_PLACEHOLDER]

    def gguf_tensors(self, cfg, t):
        t = {k: (v.T.copy() if k.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")) else v)
             for k, v in t.items()}
        layer_map = {"ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias",
                     "attn.c_attn.weight": "attn_qkv.weight", "attn.c_attn.bias": "attn_qkv.bias",
                     "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias",
                     "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
                     "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias",
                     "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias"}
        return rename_layers(t, r"transformer\.h\.(\d+)\.(.+)", layer_map, {
            "transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
            "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"})


def _split_interleaved_qkv(w: np.ndarray, n_head: int, n_embd: int) -> np.ndarray:
    """Bloom / GPT-NeoX fuse q, k, v per head ([head][q|k|v][dim]); llama.cpp wants [q; k; v]."""
    if w.ndim == 2:
        r = w.reshape(n_head, 3, n_embd // n_head, n_embd)
        return np.concatenate([r[:, j].reshape(-1, n_embd) for j in range(3)], axis=0)
    r = w.reshape(n_head, 3, n_embd // n_head)
    return np.concatenate([r[:, j].reshape(-1) for j in range(3)], axis=0)


class GPTNeoX(Family):
    """Pythia layout: per-head interleaved query_key_value, partial rotary, parallel residual."""
    model_type, gguf_arch = "gpt_neox", "gptneox"
    arch = "GPTNeoXForCausalLM"
    writes_file_type = False

    def config(self, d):
        return {
            "architectures": [self.arch], "attention_bias": True, "attention_dropout": 0.0,
            "bos_token_id": d.bos_id, "classifier_dropout": 0.1, "eos_token_id": d.eos_id, "hidden_act": "gelu",
            "hidden_dropout": 0.0, "hidden_size": d.hidden, "initializer_range": 0.02,
            "intermediate_size": 4 * d.hidden, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
            "model_type": "gpt_neox", "num_attention_heads": d.heads, "num_hidden_layers": d.layers,
            "partial_rotary_factor": 0.25, "rope_scaling": None, "rope_theta": 10000, "rotary_emb_base": 10000,
            "rotary_pct": 0.25, "tie_word_embeddings": False, "use_cache": True, "use_parallel_residual": True,
            "vocab_size": d.vocab,
        }

    def hf_tensors(self, cfg, w):
        H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        w.add("gpt_neox.embed_in.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"gpt_neox.layers.{i}."
            for ln in ("input_layernorm", "post_attention_layernorm"):
                w.add(p + ln + ".weight", (H,), "norm")
                w.add(p + ln + ".bias", (H,))
            w.add(p + "attention.query_key_value.weight", (3 * H, H))
            w.add(p + "attention.query_key_value.bias", (3 * H,))
            w.add(p + "attention.dense.weight", (H, H))
            w.add(p + "attention.dense.bias", (H,))
            w.add(p + "mlp.dense_h_to_4h.weight", (F, H))
            w.add(p + "mlp.dense_h_to_4h.bias", (F,))
            w.add(p + "mlp.dense_4h_to_h.weight", (H, F))
            w.add(p + "mlp.dense_4h_to_h.bias", (H,))
        w.add("gpt_neox.final_layer_norm.weight", (H,), "norm")
        w.add("gpt_neox.final_layer_norm.bias", (H,))
        w.add("embed_out.weight", (V, H))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        return [kv_u32(f"{a}.context_length", cfg["max_position_embeddings"]), kv_u32(f"{a}.embedding_length", H),
                kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.feed_forward_length", cfg["intermediate_size"]),
                kv_u32(f"{a}.rope.dimension_count", int(cfg["rotary_pct"] * (H // nh))),
                kv_u32(f"{a}.attention.head_count", nh),
                kv_bool(f"{a}.use_parallel_residual", cfg.get("use_parallel_residual", True)),
                kv_f32(f"{a}.attention.layer_norm_epsilon", cfg["layer_norm_eps"])]

    def gguf_tensors(self, cfg, t):
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        t = {k: (_split_interleaved_qkv(v, nh, H) if ".query_key_value." in k else v) for k, v in t.items()}
        layer_map = {}
        for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                       ("attention.query_key_value", "attn_qkv"), ("attention.dense", "attn_output"),
                       ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down")):
            for s in ("weight", "bias"):
                layer_map[f"{hf}.{s}"] = f"{gg}.{s}"
        return rename_layers(t, r"gpt_neox\.layers\.(\d+)\.(.+)", layer_map, {
            "gpt_neox.embed_in.weight": "token_embd.weight", "gpt_neox.final_layer_norm.weight": "output_norm.weight",
            "gpt_neox.final_layer_norm.bias": "output_norm.bias", "embed_out.weight": "output.weight"})


class Falcon(Family):
    """Falcon-40B layout (new_decoder_architecture): grouped fused QKV, ln_attn + ln_mlp, parallel attention."""
    model_type, gguf_arch = "falcon", "falcon"
    arch = "FalconForCausalLM"

    def config(self, d):
        return {
            "activation": "gelu", "alibi": False, "architectures": [self.arch], "attention_dropout": 0.0,
            "bias": False, "bos_token_id": d.bos_id, "eos_token_id": d.eos_id, "ffn_hidden_size": 4 * d.hidden,
            "hidden_dropout": 0.0, "hidden_size": d.hidden, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "max_position_embeddings": 2048, "model_type": "falcon",
            "multi_query": True, "new_decoder_architecture": True, "num_attention_heads": d.heads,
            "num_hidden_layers": d.layers, "num_kv_heads": d.kv_heads, "num_ln_in_parallel_attn": 2,
            "parallel_attn": True, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": True,
            "use_cache": True, "vocab_size": d.vocab,
        }

    def hf_tensors(self, cfg, w):
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        nh, nkv = cfg["num_attention_heads"], cfg["num_kv_heads"]
        hd, F = H // nh, cfg["ffn_hidden_size"]
        w.add("transformer.word_embeddings.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"transformer.h.{i}."
            for ln in ("ln_attn", "ln_mlp"):
                w.add(p + ln + ".weight", (H,), "norm")
                w.add(p + ln + ".bias", (H,))
            w.add(p + "self_attention.query_key_value.weight", ((nh + 2 * nkv) * hd, H))
            w.add(p + "self_attention.dense.weight", (H, H))
            w.add(p + "mlp.dense_h_to_4h.weight", (F, H))
            w.add(p + "mlp.dense_4h_to_h.weight", (H, F))
        w.add("transformer.ln_f.weight", (H,), "norm")
        w.add("transformer.ln_f.bias", (H,))
        if not cfg.get("tie_word_embeddings", True):
            w.add("lm_head.weight", (V, H))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        return [kv_u32(f"{a}.context_length", 2048), kv_str(f"{a}.tensor_data_layout", "jploski"),
                kv_u32(f"{a}.embedding_length", cfg["hidden_size"]),
                kv_u32(f"{a}.feed_forward_length", 4 * cfg["hidden_size"]),
                kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.attention.head_count", cfg["num_attention_heads"]),
                kv_u32(f"{a}.attention.head_count_kv", cfg.get("num_kv_heads") or 1),
                kv_f32(f"{a}.attention.layer_norm_epsilon", cfg["layer_norm_epsilon"]), FILE_TYPE_PLACEHOLDER]

    def gguf_tensors(self, cfg, t):
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        nkv = cfg.get("num_kv_heads") or 1
        hd = H // nh

        def regroup(w):   # [kv group][q heads..., k, v][head_dim] -> [all q][all k][all v]
            g = w.reshape(nkv, nh // nkv + 2, hd, H)
            return np.concatenate([g[:, :-2].reshape(nh * hd, H), g[:, -2].reshape(nkv * hd, H),
                                   g[:, -1].reshape(nkv * hd, H)], axis=0)

        t = {k: (regroup(v) if "query_key_value" in k else v) for k, v in t.items()}
        layer_map = {"ln_attn.weight": "attn_norm_2.weight", "ln_attn.bias": "attn_norm_2.bias",
                     "ln_mlp.weight": "attn_norm.weight", "ln_mlp.bias": "attn_norm.bias",
                     "self_attention.query_key_value.weight": "attn_qkv.weight",
                     "self_attention.dense.weight": "attn_output.weight",
                     "mlp.dense_h_to_4h.weight": "ffn_up.weight", "mlp.dense_4h_to_h.weight": "ffn_down.weight"}
        return rename_layers(t, r"transformer\.h\.(\d+)\.(.+)", layer_map, {
            "transformer.word_embeddings.weight": "token_embd.weight", "transformer.ln_f.weight": "output_norm.weight",
            "transformer.ln_f.bias": "output_norm.bias", "lm_head.weight": "output.weight"})


class Bloom(Family):
    """BLOOM: ALiBi, embedding LayerNorm, per-head interleaved fused QKV with biases."""
    model_type, gguf_arch = "bloom", "bloom"
    arch = "BloomForCausalLM"

    def config(self, d):
        return {
            "apply_residual_connection_post_layernorm": False, "architectures": [self.arch],
            "attention_dropout": 0.0, "bos_token_id": d.bos_id, "eos_token_id": d.eos_id, "hidden_dropout": 0.0,
            "hidden_size": d.hidden, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
            "model_type": "bloom", "n_head": d.heads, "n_layer": d.layers,
            "pad_token_id": d.pad_id if d.pad_id is not None else d.eos_id, "pretraining_tp": 1,
            "slow_but_exact": False, "tie_word_embeddings": True, "use_cache": True, "vocab_size": d.vocab,
        }

    def hf_tensors(self, cfg, w):
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        w.add("transformer.word_embeddings.weight", (V, H))
        w.add("transformer.word_embeddings_layernorm.weight", (H,), "norm")
        w.add("transformer.word_embeddings_layernorm.bias", (H,))
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            for ln in ("input_layernorm", "post_attention_layernorm"):
                w.add(p + ln + ".weight", (H,), "norm")
                w.add(p + ln + ".bias", (H,))
            w.add(p + "self_attention.query_key_value.weight", (3 * H, H))
            w.add(p + "self_attention.query_key_value.bias", (3 * H,))
            w.add(p + "self_attention.dense.weight", (H, H))
            w.add(p + "self_attention.dense.bias", (H,))
            w.add(p + "mlp.dense_h_to_4h.weight", (4 * H, H))
            w.add(p + "mlp.dense_h_to_4h.bias", (4 * H,))
            w.add(p + "mlp.dense_4h_to_h.weight", (H, 4 * H))
            w.add(p + "mlp.dense_4h_to_h.bias", (H,))
        w.add("transformer.ln_f.weight", (H,), "norm")
        w.add("transformer.ln_f.bias", (H,))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        H, nh = cfg["hidden_size"], cfg["n_head"]
        return [kv_u32(f"{a}.context_length", cfg.get("seq_length", H)), kv_u32(f"{a}.embedding_length", H),
                kv_u32(f"{a}.feed_forward_length", 4 * H), kv_u32(f"{a}.block_count", cfg["n_layer"]),
                kv_u32(f"{a}.attention.head_count", nh), kv_u32(f"{a}.attention.head_count_kv", nh),
                kv_f32(f"{a}.attention.layer_norm_epsilon", cfg["layer_norm_epsilon"]), FILE_TYPE_PLACEHOLDER]

    def gguf_tensors(self, cfg, t):
        H, nh = cfg["hidden_size"], cfg["n_head"]
        t = {k: (_split_interleaved_qkv(v, nh, H) if ".query_key_value." in k else v) for k, v in t.items()}
        layer_map = {}
        for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                       ("self_attention.query_key_value", "attn_qkv"), ("self_attention.dense", "attn_output"),
                       ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down")):
            for s in ("weight", "bias"):
                layer_map[f"{hf}.{s}"] = f"{gg}.{s}"
        return rename_layers(t, r"transformer\.h\.(\d+)\.(.+)", layer_map, {
            "transformer.word_embeddings.weight": "token_embd.weight",
            "transformer.word_embeddings_layernorm.weight": "token_embd_norm.weight",
            "transformer.word_embeddings_layernorm.bias": "token_embd_norm.bias",
            "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"})


class Mpt(Family):
    """MPT-7B layout: ALiBi, fused Wqkv ([q; k; v]), bias-free LayerNorms, tied output."""
    model_type, gguf_arch = "mpt", "mpt"
    arch = "MptForCausalLM"
    writes_file_type = False

    def config(self, d):
        return {
            "architectures": [self.arch],
            "attn_config": {"alibi": True, "alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0.0,
                            "attn_type": "multihead_attention", "attn_uses_sequence_id": False, "clip_qkv": None,
                            "prefix_lm": False, "qk_ln": False, "softmax_scale": None},
            "bos_token_id": d.bos_id, "d_model": d.hidden, "emb_pdrop": 0.0, "embedding_fraction": 1.0,
            "eos_token_id": d.eos_id, "expansion_ratio": 4, "init_device": "cpu", "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "learned_pos_emb": True, "logit_scale": None, "max_seq_len": 2048,
            "model_type": "mpt", "n_heads": d.heads, "n_layers": d.layers, "no_bias": True,
            "norm_type": "low_precision_layernorm", "resid_pdrop": 0.0, "tie_word_embeddings": True,
            "use_cache": False, "verbose": 0, "vocab_size": d.vocab,
        }

    def hf_tensors(self, cfg, w):
        H, V, F = cfg["d_model"], cfg["vocab_size"], cfg["expansion_ratio"] * cfg["d_model"]
        w.add("transformer.wte.weight", (V, H))
        for i in range(cfg["n_layers"]):
            p = f"transformer.blocks.{i}."
            w.add(p + "norm_1.weight", (H,), "norm")
            w.add(p + "attn.Wqkv.weight", (3 * H, H))
            w.add(p + "attn.out_proj.weight", (H, H))
            w.add(p + "norm_2.weight", (H,), "norm")
            w.add(p + "ffn.up_proj.weight", (F, H))
            w.add(p + "ffn.down_proj.weight", (H, F))
        w.add("transformer.norm_f.weight", (H,), "norm")

    def gguf_params(self, cfg):
        a = self.gguf_arch
        ac = cfg["attn_config"]
        out = [kv_u32(f"{a}.context_length", cfg["max_seq_len"]), kv_u32(f"{a}.embedding_length", cfg["d_model"]),
               kv_u32(f"{a}.block_count", cfg["n_layers"]), kv_u32(f"{a}.feed_forward_length", 4 * cfg["d_model"]),
               kv_u32(f"{a}.attention.head_count", cfg["n_heads"])]
        if ac.get("kv_n_heads"):
            out.append(kv_u32(f"{a}.attention.head_count_kv", ac["kv_n_heads"]))
        out.append(kv_f32(f"{a}.attention.layer_norm_epsilon", 1e-5))
        if ac["clip_qkv"] is not None:
            out.append(kv_f32(f"{a}.attention.clamp_kqv", ac["clip_qkv"]))
        out.append(kv_f32(f"{a}.attention.max_alibi_bias", ac["alibi_bias_max"] if ac["alibi"] else 0.0))
        return out

    def gguf_tensors(self, cfg, t):
        layer_map = {"norm_1.weight": "attn_norm.weight", "attn.Wqkv.weight": "attn_qkv.weight",
                     "attn.out_proj.weight": "attn_output.weight", "norm_2.weight": "ffn_norm.weight",
                     "ffn.up_proj.weight": "ffn_up.weight", "ffn.down_proj.weight": "ffn_down.weight"}
        return rename_layers(t, r"transformer\.blocks\.(\d+)\.(.+)", layer_map, {
            "transformer.wte.weight": "token_embd.weight", "transformer.norm_f.weight": "output_norm.weight"})


class DeepseekV3(Family):
    """DeepSeek-V3: MLA attention (LoRA-compressed q and kv), one dense leading
    layer, sigmoid-scored grouped routing with a score-correction bias, a shared expert."""
    model_type, gguf_arch = "deepseek_v3", "deepseek2"
    arch = "DeepseekV3ForCausalLM"

    def config(self, d):
        rope_dim = 16
        return {
            "architectures": [self.arch], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": d.bos_id, "eos_token_id": d.eos_id, "first_k_dense_replace": 1,
            "head_dim": rope_dim, "hidden_act": "silu", "hidden_size": d.hidden, "initializer_range": 0.02,
            "intermediate_size": d.ff, "kv_lora_rank": 32, "max_position_embeddings": 163840,
            "model_type": "deepseek_v3", "moe_intermediate_size": d.moe_ff, "n_group": 2,
            "n_routed_experts": d.experts, "n_shared_experts": 1, "norm_topk_prob": True,
            "num_attention_heads": d.heads, "num_experts_per_tok": d.experts_used,
            "num_hidden_layers": d.layers, "num_key_value_heads": d.heads, "num_nextn_predict_layers": 0,
            "pretraining_tp": 1, "q_lora_rank": 32, "qk_head_dim": 32 + rope_dim, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": rope_dim, "rms_norm_eps": 1e-06, "rope_interleave": True,
            "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                             "original_max_position_embeddings": 4096, "rope_type": "yarn", "type": "yarn"},
            "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
            "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "use_cache": True,
            "v_head_dim": 32, "vocab_size": d.vocab,
        }

    def hf_tensors(self, cfg, w):
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        nh, ql, kvl = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
        nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        E, Fm, F = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["intermediate_size"]
        w.add("model.embed_tokens.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            w.add(p + "input_layernorm.weight", (H,), "norm")
            w.add(p + "self_attn.q_a_proj.weight", (ql, H))
            w.add(p + "self_attn.q_a_layernorm.weight", (ql,), "norm")
            w.add(p + "self_attn.q_b_proj.weight", (nh * (nope + rope), ql))
            w.add(p + "self_attn.kv_a_proj_with_mqa.weight", (kvl + rope, H))
            w.add(p + "self_attn.kv_a_layernorm.weight", (kvl,), "norm")
            w.add(p + "self_attn.kv_b_proj.weight", (nh * (nope + vd), kvl))
            w.add(p + "self_attn.o_proj.weight", (H, nh * vd))
            w.add(p + "post_attention_layernorm.weight", (H,), "norm")
            if i < cfg["first_k_dense_replace"]:
                w.add(p + "mlp.gate_proj.weight", (F, H))
                w.add(p + "mlp.up_proj.weight", (F, H))
                w.add(p + "mlp.down_proj.weight", (H, F))
                continue
            w.add(p + "mlp.gate.weight", (E, H))
            w.add(p + "mlp.gate.e_score_correction_bias", (E,), "small")
            for e in range(E):
                w.add(p + f"mlp.experts.{e}.gate_proj.weight", (Fm, H))
                w.add(p + f"mlp.experts.{e}.up_proj.weight", (Fm, H))
                w.add(p + f"mlp.experts.{e}.down_proj.weight", (H, Fm))
            Fs = Fm * cfg["n_shared_experts"]
            w.add(p + "mlp.shared_experts.gate_proj.weight", (Fs, H))
            w.add(p + "mlp.shared_experts.up_proj.weight", (Fs, H))
            w.add(p + "mlp.shared_experts.down_proj.weight", (H, Fs))
        w.add("model.norm.weight", (H,), "norm")
        w.add("lm_head.weight", (V, H))

    def gguf_params(self, cfg):
        a = self.gguf_arch
        c = dict(cfg, num_key_value_heads=1)      # MLA is exported as MQA
        out = base_params(a, c)
        out += [kv_u32(f"{a}.leading_dense_block_count", c.get("first_k_dense_replace", 0)),
                kv_u32(f"{a}.vocab_size", c["vocab_size"])]
        if c.get("q_lora_rank") is not None:
            out.append(kv_u32(f"{a}.attention.q_lora_rank", c["q_lora_rank"]))
        kvl = c.get("kv_lora_rank", 512)
        out += [kv_u32(f"{a}.attention.kv_lora_rank", kvl),
                kv_u32(f"{a}.attention.key_length", kvl + c["qk_rope_head_dim"]),
                kv_u32(f"{a}.attention.value_length", kvl),
                kv_u32(f"{a}.attention.key_length_mla", c["qk_nope_head_dim"] + c["qk_rope_head_dim"]),
                kv_u32(f"{a}.attention.value_length_mla", c["v_head_dim"]),
                kv_u32(f"{a}.expert_feed_forward_length", c["moe_intermediate_size"]),
                kv_u32(f"{a}.expert_count", c["n_routed_experts"]),
                kv_u32(f"{a}.expert_shared_count", c.get("n_shared_experts", 0))]
        if c.get("routed_scaling_factor") is not None:
            out.append(kv_f32(f"{a}.expert_weights_scale", c["routed_scaling_factor"]))
        if c.get("norm_topk_prob"):
            out.append(kv_bool(f"{a}.expert_weights_norm", True))
        out.append(kv_u32(f"{a}.rope.dimension_count", c["qk_rope_head_dim"]))
        mscale_all = (c.get("rope_scaling") or {}).get("mscale_all_dim")
        if mscale_all is not None:
            out.append(kv_f32(f"{a}.rope.scaling.yarn_log_multiplier", 0.1 * mscale_all))
        return out

    def gguf_tensors(self, cfg, t):
        nh = cfg["num_attention_heads"]      # the config's value: the split happens before the MQA rewrite
        nope, vd, kvl = cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
        t = stack_experts(t, r"model\.layers\.{bid}\.mlp\.experts\.{xid}\.{w}\.weight",
                          "model.layers.{bid}.mlp.experts.{w}.weight", ("down_proj", "gate_proj", "up_proj"))
        out: dict[str, np.ndarray] = {}
        for name, arr in t.items():
            if name.endswith("kv_b_proj.weight"):
                kv_b = arr.reshape(nh, nope + vd, kvl)
                out[name.replace("kv_b_proj", "k_b_proj")] = np.ascontiguousarray(kv_b[:, :nope].transpose(0, 2, 1))
                out[name.replace("kv_b_proj", "v_b_proj")] = np.ascontiguousarray(kv_b[:, nope:])
            else:
                out[name] = arr
        layer_map = dict(LLAMA_LAYER_MAP)
        layer_map.update({
            "self_attn.q_a_proj.weight": "attn_q_a.weight", "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
            "self_attn.q_b_proj.weight": "attn_q_b.weight",
            "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
            "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight",
            "self_attn.k_b_proj.weight": "attn_k_b.weight", "self_attn.v_b_proj.weight": "attn_v_b.weight",
            "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
            "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
            "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
            "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight"})
        return rename_layers(out, MODEL_LAYER_RE, layer_map, LLAMA_GLOBALS)


class Lfm2(Family):
    """LFM2: gated short-convolution layers mixed with GQA attention layers."""
    model_type, gguf_arch = "lfm2", "lfm2"
    arch = "Lfm2ForCausalLM"

    def config(self, d):
        layer_types = ["conv" if i % 2 == 0 else "full_attention" for i in range(d.layers)]
        return {
            "architectures": [self.arch], "block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0,
            "block_multiple_of": 32, "bos_token_id": d.bos_id, "conv_L_cache": 3, "conv_bias": False,
            "eos_token_id": d.eos_id, "full_attn_idxs": [i for i, t in enumerate(layer_types) if t != "conv"],
            "hidden_size": d.hidden, "initializer_range": 0.02, "intermediate_size": 3 * d.hidden,
            "layer_types": layer_types, "max_position_embeddings": 128000, "model_type": "lfm2",
            "norm_eps": 1e-05, "num_attention_heads": d.heads, "num_hidden_layers": d.layers,
            "num_key_value_heads": d.kv_heads, "pad_token_id": d.pad_id if d.pad_id is not None else d.eos_id,
            "rope_theta": 1000000.0, "tie_word_embeddings": True, "use_cache": True, "vocab_size": d.vocab,
        }

    @staticmethod
    def ff_dim(cfg: dict) -> int:
        ff = cfg["intermediate_size"]
        if cfg["block_auto_adjust_ff_dim"]:
            ff = int(2 * ff / 3)
            if cfg["block_ffn_dim_multiplier"] is not None:
                ff = int(cfg["block_ffn_dim_multiplier"] * ff)
            m = cfg["block_multiple_of"]
            ff = m * ((ff + m - 1) // m)
        return ff

    def hf_tensors(self, cfg, w):
        H, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["conv_L_cache"]
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        hd, F = H // nh, self.ff_dim(cfg)
        w.add("model.embed_tokens.weight", (V, H))
        for i, kind in enumerate(cfg["layer_types"]):
            p = f"model.layers.{i}."
            w.add(p + "operator_norm.weight", (H,), "norm")
            if kind == "conv":
                w.add(p + "conv.in_proj.weight", (3 * H, H))
                w.add(p + "conv.conv.weight", (H, 1, L))
                w.add(p + "conv.out_proj.weight", (H, H))
            else:
                w.add(p + "self_attn.q_proj.weight", (nh * hd, H))
                w.add(p + "self_attn.k_proj.weight", (nkv * hd, H))
                w.add(p + "self_attn.v_proj.weight", (nkv * hd, H))
                w.add(p + "self_attn.out_proj.weight", (H, nh * hd))
                w.add(p + "self_attn.q_layernorm.weight", (hd,), "norm")
                w.add(p + "self_attn.k_layernorm.weight", (hd,), "norm")
            w.add(p + "ffn_norm.weight", (H,), "norm")
            w.add(p + "feed_forward.w1.weight", (F, H))
            w.add(p + "feed_forward.w3.weight", (F, H))
            w.add(p + "feed_forward.w2.weight", (H, F))
        w.add("model.embedding_norm.weight", (H,), "norm")

    def gguf_params(self, cfg):
        a = self.gguf_arch
        kv = [cfg["num_key_value_heads"] if t != "conv" else 0 for t in cfg["layer_types"]]
        return base_params(a, cfg, head_count_kv=kv) + [
            kv_u32(f"{a}.vocab_size", cfg["vocab_size"]), kv_u32(f"{a}.shortconv.l_cache", cfg["conv_L_cache"]),
            kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg["norm_eps"]),
            kv_u32(f"{a}.feed_forward_length", self.ff_dim(cfg))]

    def gguf_tensors(self, cfg, t):
        t = {k: (v.squeeze(1) if "conv.conv" in k else v) for k, v in t.items()}
        layer_map = {"operator_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
                     "conv.in_proj.weight": "shortconv.in_proj.weight", "conv.conv.weight": "shortconv.conv.weight",
                     "conv.out_proj.weight": "shortconv.out_proj.weight",
                     "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                     "self_attn.v_proj.weight": "attn_v.weight", "self_attn.out_proj.weight": "attn_output.weight",
                     "self_attn.q_layernorm.weight": "attn_q_norm.weight",
                     "self_attn.k_layernorm.weight": "attn_k_norm.weight",
                     "feed_forward.w1.weight": "ffn_gate.weight", "feed_forward.w3.weight": "ffn_up.weight",
                     "feed_forward.w2.weight": "ffn_down.weight"}
        return rename_layers(t, MODEL_LAYER_RE, layer_map, {
            "model.embed_tokens.weight": "token_embd.weight", "model.embedding_norm.weight": "token_embd_norm.weight"})


class Olmo2(Family):
    """OLMo 2 (1B/7B layout): no pre-norms, post-norms on both sublayers, q/k
    RMSNorms over the whole projection; the converter copies tensors as they
    are (no q/k row permutation: llama.cpp rotates OLMo 2 NeoX-style)."""
    model_type, gguf_arch = "olmo2", "olmo2"
    arch = "Olmo2ForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="olmo2", arch=self.arch, rope_theta=500000.0, tie=False, rms_eps=1e-6,
                                 extra={"max_position_embeddings": 4096})

    def hf_tensors(self, cfg, w):
        # OLMo 2's post_attention_layernorm norms the attention output; no pre-norms.
        add_llama_layers(cfg, w, qk_norm="full", input_norm=False)
        for i in range(cfg["num_hidden_layers"]):
            w.add(f"model.layers.{i}.post_feedforward_layernorm.weight", (cfg["hidden_size"],), "norm")

    def gguf_params(self, cfg):
        return base_params(self.gguf_arch, cfg)

    def gguf_tensors(self, cfg, t):
        layer_map = dict(LLAMA_LAYER_MAP)
        layer_map.pop("post_attention_layernorm.weight")
        layer_map.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                          "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
        return rename_layers(t, MODEL_LAYER_RE, layer_map, LLAMA_GLOBALS)


class Starcoder2(Family):
    """StarCoder2 (3B layout): LayerNorms with biases, biased q/k/v/o and a
    c_fc -> GELU(tanh) -> c_proj MLP with biases, tied embeddings; the
    converter copies tensors as they are (NeoX-style rope in llama.cpp)."""
    model_type, gguf_arch = "starcoder2", "starcoder2"
    arch = "Starcoder2ForCausalLM"

    def config(self, d):
        cfg = {
            "architectures": [self.arch], "attention_dropout": 0.1, "bos_token_id": d.bos_id,
            "embedding_dropout": 0.1, "eos_token_id": d.eos_id, "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": d.hidden, "initializer_range": 0.018042, "intermediate_size": d.ff,
            "max_position_embeddings": 16384, "model_type": "starcoder2", "norm_epsilon": 1e-5,
            "num_attention_heads": d.heads, "num_hidden_layers": d.layers, "num_key_value_heads": d.kv_heads,
            "residual_dropout": 0.1, "rope_theta": 999999.4420358813, "sliding_window": 4096,
            "tie_word_embeddings": True, "use_bias": True, "use_cache": True, "vocab_size": d.vocab,
        }
        return dict(sorted(cfg.items()))

    def hf_tensors(self, cfg, w):
        H, V, F = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        w.add("model.embed_tokens.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            for ln in ("input_layernorm", "post_attention_layernorm"):
                w.add(p + ln + ".weight", (H,), "norm")
                w.add(p + ln + ".bias", (H,))
            add_attention(cfg, w, p, qkv_bias=True, o_bias=True)
            w.add(p + "mlp.c_fc.weight", (F, H))
            w.add(p + "mlp.c_fc.bias", (F,))
            w.add(p + "mlp.c_proj.weight", (H, F))
            w.add(p + "mlp.c_proj.bias", (H,))
        w.add("model.norm.weight", (H,), "norm")
        w.add("model.norm.bias", (H,))
        if not cfg["tie_word_embeddings"]:
            w.add("lm_head.weight", (V, H))

    def gguf_params(self, cfg):
        return base_params(self.gguf_arch, cfg)

    def gguf_tensors(self, cfg, t):
        layer_map = {}
        for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                       ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
                       ("self_attn.o_proj", "attn_output"), ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down")):
            for suffix in ("weight", "bias"):
                layer_map[f"{hf}.{suffix}"] = f"{gg}.{suffix}"
        return rename_layers(t, MODEL_LAYER_RE, layer_map, dict(LLAMA_GLOBALS, **{"model.norm.bias": "output_norm.bias"}))


class Jamba(Family):
    """Jamba (Mini-Jamba layout): Mamba (selective-scan) layers and attention
    layers without rope in one stack (attention on layers offset, offset +
    period, ...), a mixture of experts on every expert_layer_period-th layer.
    The converter writes head_count_kv per layer (0 on Mamba layers), A_log as
    A = -exp(A_log), the conv weight squeezed to [d_inner, d_conv], and the
    experts stacked (qwen2moe's merged names)."""
    model_type, gguf_arch, tokenizer_kind = "jamba", "jamba", "spm-llama"
    tokenizer_class = "LlamaTokenizer"
    arch = "JambaForCausalLM"

    def config(self, d):
        cfg = {
            "architectures": [self.arch], "attention_dropout": 0.0, "attn_layer_offset": 1, "attn_layer_period": 2,
            "bos_token_id": d.bos_id, "eos_token_id": d.eos_id, "expert_layer_offset": 0, "expert_layer_period": 2,
            "hidden_act": "silu", "hidden_size": d.hidden, "initializer_range": 0.02, "intermediate_size": d.ff,
            "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": -(d.hidden // -16),
            "mamba_expand": 2, "mamba_proj_bias": False, "max_position_embeddings": 262144, "model_type": "jamba",
            "num_attention_heads": d.heads, "num_experts": d.experts, "num_experts_per_tok": d.experts_used,
            "num_hidden_layers": d.layers, "num_key_value_heads": d.kv_heads, "num_logits_to_keep": 1,
            "output_router_logits": False, "rms_norm_eps": 1e-6, "router_aux_loss_coef": 0.001,
            "sliding_window": None, "tie_word_embeddings": False, "use_cache": True, "use_mamba_kernels": False,
            "vocab_size": d.vocab,
        }
        if d.pad_id is not None:
            cfg["pad_token_id"] = d.pad_id
        return dict(sorted(cfg.items()))

    @staticmethod
    def is_attention(cfg, i):
        return i >= cfg["attn_layer_offset"] and (i - cfg["attn_layer_offset"]) % cfg["attn_layer_period"] == 0

    @staticmethod
    def is_moe(cfg, i):
        return i >= cfg["expert_layer_offset"] and (i - cfg["expert_layer_offset"]) % cfg["expert_layer_period"] == 0

    def hf_tensors(self, cfg, w):
        H, V, F, E = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_experts"]
        DI, N, R, K = cfg["mamba_expand"] * H, cfg["mamba_d_state"], cfg["mamba_dt_rank"], cfg["mamba_d_conv"]
        w.add("model.embed_tokens.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            w.add(p + "input_layernorm.weight", (H,), "norm")
            if self.is_attention(cfg, i):
                add_attention(cfg, w, p)
            else:
                m = p + "mamba."
                w.add(m + "in_proj.weight", (2 * DI, H))
                w.add(m + "conv1d.weight", (DI, 1, K))
                w.add(m + "conv1d.bias", (DI,))
                w.add(m + "x_proj.weight", (R + 2 * N, DI))
                w.add(m + "dt_proj.weight", (DI, R))
                w.add(m + "dt_proj.bias", (DI,))
                w.add(m + "A_log", (DI, N), "norm")   # near 1: A = -exp(A_log) near -2.7
                w.add(m + "D", (DI,), "norm")
                w.add(m + "out_proj.weight", (H, DI))
                w.add(m + "dt_layernorm.weight", (R,), "norm")
                w.add(m + "b_layernorm.weight", (N,), "norm")
                w.add(m + "c_layernorm.weight", (N,), "norm")
            w.add(p + "pre_ff_layernorm.weight", (H,), "norm")
            f = p + "feed_forward."
            if self.is_moe(cfg, i):
                w.add(f + "router.weight", (E, H))
                for e in range(E):
                    w.add(f + f"experts.{e}.gate_proj.weight", (F, H))
                    w.add(f + f"experts.{e}.up_proj.weight", (F, H))
                    w.add(f + f"experts.{e}.down_proj.weight", (H, F))
            else:
                w.add(f + "gate_proj.weight", (F, H))
                w.add(f + "up_proj.weight", (F, H))
                w.add(f + "down_proj.weight", (H, F))
        w.add("model.final_layernorm.weight", (H,), "norm")
        w.add("lm_head.weight", (V, H))

    def gguf_params(self, cfg):
        a, H = self.gguf_arch, cfg["hidden_size"]
        n_kv = [cfg["num_key_value_heads"] if self.is_attention(cfg, i) else 0 for i in range(cfg["num_hidden_layers"])]
        return [kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.context_length", cfg["max_position_embeddings"]),
                kv_u32(f"{a}.embedding_length", H), kv_u32(f"{a}.feed_forward_length", cfg["intermediate_size"]),
                kv_u32(f"{a}.attention.head_count", cfg["num_attention_heads"]),
                kv_arr(f"{a}.attention.head_count_kv", VT.INT32, n_kv),
                kv_u32(f"{a}.ssm.conv_kernel", cfg["mamba_d_conv"]),
                kv_u32(f"{a}.ssm.inner_size", cfg["mamba_expand"] * H),
                kv_u32(f"{a}.ssm.state_size", cfg["mamba_d_state"]),
                kv_u32(f"{a}.ssm.time_step_rank", cfg["mamba_dt_rank"]),
                kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"]),
                kv_u32(f"{a}.expert_count", cfg["num_experts"]),
                kv_u32(f"{a}.expert_used_count", cfg["num_experts_per_tok"]), FILE_TYPE_PLACEHOLDER]

    def gguf_tensors(self, cfg, t):
        t = {k: (-np.exp(v.astype(np.float32)) if k.endswith(".A_log") else
                 v.reshape(v.shape[0], v.shape[2]) if k.endswith("conv1d.weight") else v) for k, v in t.items()}
        t = stack_experts(t, r"model\.layers\.{bid}\.feed_forward\.experts\.{xid}\.{w}\.weight",
                          "model.layers.{bid}.mlp.experts.{w}.weight", ("down_proj", "gate_proj", "up_proj"))
        layer_map = {
            "input_layernorm.weight": "attn_norm.weight", "pre_ff_layernorm.weight": "ffn_norm.weight",
            "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
            "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
            "mamba.in_proj.weight": "ssm_in.weight", "mamba.conv1d.weight": "ssm_conv1d.weight",
            "mamba.conv1d.bias": "ssm_conv1d.bias", "mamba.x_proj.weight": "ssm_x.weight",
            "mamba.dt_proj.weight": "ssm_dt.weight", "mamba.dt_proj.bias": "ssm_dt.bias", "mamba.A_log": "ssm_a",
            "mamba.D": "ssm_d", "mamba.out_proj.weight": "ssm_out.weight",
            "mamba.dt_layernorm.weight": "ssm_dt_norm.weight", "mamba.b_layernorm.weight": "ssm_b_norm.weight",
            "mamba.c_layernorm.weight": "ssm_c_norm.weight", "feed_forward.router.weight": "ffn_gate_inp.weight",
            "mlp.experts.gate_proj.weight": "ffn_gate_exps.weight", "mlp.experts.up_proj.weight": "ffn_up_exps.weight",
            "mlp.experts.down_proj.weight": "ffn_down_exps.weight", "feed_forward.gate_proj.weight": "ffn_gate.weight",
            "feed_forward.up_proj.weight": "ffn_up.weight", "feed_forward.down_proj.weight": "ffn_down.weight"}
        return rename_layers(t, MODEL_LAYER_RE, layer_map, {
            "model.embed_tokens.weight": "token_embd.weight", "model.final_layernorm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"})


class Cohere(Family):
    """Cohere Command-R (v01 layout): LayerNorms without bias, attention and
    the MLP in parallel on one norm, rope on interleaved pairs (the converter
    copies q/k as they are: llama.cpp's command-r rope is the interleaved
    one), tied embeddings, logits times logit_scale."""
    model_type, gguf_arch, tokenizer_kind = "cohere", "command-r", "bpe"
    arch = "CohereForCausalLM"

    def config(self, d):
        return llama_like_config(d, model_type="cohere", arch=self.arch, rope_theta=8000000.0, tie=True, extra={
            "layer_norm_eps": 1e-5, "logit_scale": 0.5, "use_qk_norm": False, "max_position_embeddings": 8192,
            "model_max_length": 131072})

    def hf_tensors(self, cfg, w):
        add_llama_layers(cfg, w, ffn_norm=False)  # one norm feeds attention and MLP

    def gguf_params(self, cfg):
        a = self.gguf_arch
        # The converter takes model_max_length as the context (trained at 128k).
        cfg = dict(cfg, max_position_embeddings=cfg.get("model_max_length", cfg["max_position_embeddings"]))
        return base_params(a, cfg) + [kv_f32(f"{a}.logit_scale", cfg["logit_scale"]),
                                      kv_str(f"{a}.rope.scaling.type", "none")]

    def gguf_tensors(self, cfg, t):
        return rename_layers(t, MODEL_LAYER_RE, LLAMA_LAYER_MAP, LLAMA_GLOBALS)


class Mamba2(Family):
    """Mamba-2 (state-spaces/mamba2-130m layout, n_groups 1): every layer a
    Mamba-2 mixer after an RMSNorm. The converter writes head_count 0 and
    the scan's heads as ssm.time_step_rank, renames dt_bias to ssm_dt.bias,
    stores A = -exp(A_log) and D as [heads, 1], the gated norm as [groups,
    d_inner / groups], and squeezes the conv weight."""
    model_type, gguf_arch = "mamba2", "mamba2"
    arch = "Mamba2ForCausalLM"

    def config(self, d):
        head_dim = 16
        inner = 2 * d.hidden
        cfg = {
            "architectures": [self.arch], "bos_token_id": d.bos_id, "chunk_size": 256, "conv_kernel": 4,
            "eos_token_id": d.eos_id, "expand": 2, "head_dim": head_dim, "hidden_act": "silu",
            "hidden_size": d.hidden, "initializer_range": 0.1, "layer_norm_epsilon": 1e-5, "model_type": "mamba2",
            "n_groups": 1, "norm_before_gate": False, "num_heads": inner // head_dim,
            "num_hidden_layers": d.layers, "rescale_prenorm_residual": False, "residual_in_fp32": True,
            "rms_norm": True, "state_size": 16, "tie_word_embeddings": False, "time_step_floor": 1e-4,
            "time_step_max": 0.1, "time_step_min": 0.001, "time_step_rank": "auto", "use_bias": False,
            "use_cache": True, "use_conv_bias": True, "vocab_size": d.vocab,
        }
        if d.pad_id is not None:
            cfg["pad_token_id"] = d.pad_id
        return dict(sorted(cfg.items()))

    def hf_tensors(self, cfg, w):
        H, V = cfg["hidden_size"], cfg["vocab_size"]
        DI, N, G, NH = cfg["expand"] * H, cfg["state_size"], cfg["n_groups"], cfg["num_heads"]
        XBC = DI + 2 * G * N
        w.add("backbone.embeddings.weight", (V, H))
        for i in range(cfg["num_hidden_layers"]):
            p = f"backbone.layers.{i}."
            w.add(p + "norm.weight", (H,), "norm")
            w.add(p + "mixer.in_proj.weight", (2 * DI + 2 * G * N + NH, H))
            w.add(p + "mixer.conv1d.weight", (XBC, 1, cfg["conv_kernel"]))
            w.add(p + "mixer.conv1d.bias", (XBC,))
            w.add(p + "mixer.dt_bias", (NH,))
            w.add(p + "mixer.A_log", (NH,), "norm")
            w.add(p + "mixer.D", (NH,), "norm")
            w.add(p + "mixer.norm.weight", (DI,), "norm")
            w.add(p + "mixer.out_proj.weight", (H, DI))
        w.add("backbone.norm_f.weight", (H,), "norm")
        if not cfg["tie_word_embeddings"]:
            w.add("lm_head.weight", (V, H))

    def gguf_params(self, cfg):
        a, H = self.gguf_arch, cfg["hidden_size"]
        DI = cfg["expand"] * H
        return [kv_u32(f"{a}.context_length", 2 ** 20), kv_u32(f"{a}.embedding_length", H),
                kv_u32(f"{a}.feed_forward_length", 0), kv_u32(f"{a}.attention.head_count", 0),
                kv_u32(f"{a}.block_count", cfg["num_hidden_layers"]),
                kv_u32(f"{a}.ssm.conv_kernel", cfg["conv_kernel"]), kv_u32(f"{a}.ssm.inner_size", DI),
                kv_u32(f"{a}.ssm.state_size", cfg["state_size"]),
                kv_u32(f"{a}.ssm.time_step_rank", DI // cfg["head_dim"]),
                kv_u32(f"{a}.ssm.group_count", cfg["n_groups"]),
                kv_f32(f"{a}.attention.layer_norm_rms_epsilon", cfg["layer_norm_epsilon"]), FILE_TYPE_PLACEHOLDER]

    def gguf_tensors(self, cfg, t):
        G, DI = cfg["n_groups"], cfg["expand"] * cfg["hidden_size"]

        def convert(k, v):
            if k.endswith("conv1d.weight"):
                return v.reshape(v.shape[0], v.shape[2])
            if k.endswith(".A_log"):
                return (-np.exp(v.astype(np.float32))).reshape(-1, 1)
            if k.endswith(".D"):
                return v.reshape(-1, 1)
            if k.endswith("mixer.norm.weight"):
                return v.reshape(G, DI // G)
            return v
        t = {k: convert(k, v) for k, v in t.items()}
        layer_map = {"norm.weight": "attn_norm.weight", "mixer.in_proj.weight": "ssm_in.weight",
                     "mixer.conv1d.weight": "ssm_conv1d.weight", "mixer.conv1d.bias": "ssm_conv1d.bias",
                     "mixer.dt_bias": "ssm_dt.bias", "mixer.A_log": "ssm_a", "mixer.D": "ssm_d",
                     "mixer.norm.weight": "ssm_norm.weight", "mixer.out_proj.weight": "ssm_out.weight"}
        return rename_layers(t, r"backbone\.layers\.(\d+)\.(.+)", layer_map, {
            "backbone.embeddings.weight": "token_embd.weight", "backbone.norm_f.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"})


FAMILIES: dict[str, Family] = {f.model_type: f for f in (
    Llama(), Mistral(), Mixtral(), Qwen2(), Qwen2Moe(), Qwen3(), Qwen3Moe(), Gemma(), Gemma2(), Gemma3Text(),
    Phi3(), GPT2(), GPTNeoX(), Falcon(), Bloom(), Mpt(), Olmoe(), Granite(), DeepseekV3(), Lfm2(), Olmo2(),
    Starcoder2(), Jamba(), Cohere(), Mamba2())}

