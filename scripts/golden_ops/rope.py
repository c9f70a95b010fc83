"""rope, following transformers' modeling_rope_utils (see gen_goldens.py's docstring)."""
from .common import *  # noqa: F401,F403


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
