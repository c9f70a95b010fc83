"""attention: GQA, masks, windows, softcap, ALiBi, bias."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- attention


def bloom_slopes(n):
    cp = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(cp) - 3)))
    slopes = [base ** p for p in range(1, 1 + cp)]
    if cp != n:
        eb = 2 ** (-(2 ** -(math.log2(2 * cp) - 3)))
        rem = min(cp, n - cp)
        slopes += [eb ** p for p in range(1, 1 + 2 * rem, 2)]
    return slopes


def mpt_slopes(n, amax):
    n2 = 2 ** math.ceil(math.log2(n))
    m = torch.arange(1, n2 + 1, dtype=torch.float32) * (amax / n2)
    s = 1.0 / torch.pow(2, m)
    if n2 != n:
        s = torch.cat([s[1::2], s[::2]])[:n]
    return [float(v) for v in s]


def attention_ref(q, k, v, heads, headDim, kvHeads=None, vHeadDim=None, causal=True, posOffset=0, scale=None,
                  softcap=None, window=None, alibi=False, alibiMax=None, alibiSlopes=None, bias=None):
    H, D = heads, headDim
    KV = kvHeads or H
    Dv = vHeadDim or D
    T, S = q.shape[0], k.shape[0]
    Q, K, V = t64(q).reshape(T, H, D), t64(k).reshape(S, KV, D), t64(v).reshape(S, KV, Dv)
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    slopes = None
    if alibiSlopes is not None:
        slopes = list(alibiSlopes)
    elif alibiMax is not None:
        slopes = mpt_slopes(H, alibiMax)
    elif alibi:
        slopes = bloom_slopes(H)
    p = torch.arange(T, dtype=F64)[:, None] + posOffset
    s_ = torch.arange(S, dtype=F64)[None, :]
    if causal:
        vis = s_ <= p
        if window is not None:
            vis = vis & (s_ > p - window)
    else:
        vis = torch.ones(T, S, dtype=torch.bool)
        if window is not None:
            vis = (p - s_).abs() <= window
    out = torch.zeros(T, H, Dv, dtype=F64)
    for h in range(H):
        kh = h // (H // KV)
        sco = sc * (Q[:, h, :] @ K[:, kh, :].T)
        if softcap is not None:
            sco = softcap * torch.tanh(sco / softcap)
        if slopes is not None:
            sco = sco + slopes[h] * (s_ - p)
        if bias is not None:
            b = t64(bias)
            sco = sco + (b if b.dim() == 2 else b[h])
        sco = sco.masked_fill(~vis, -math.inf)
        for t in range(T):
            if vis[t].any():
                w = torch.softmax(sco[t], -1)
                out[t, h] = w @ V[:, kh, :]
    return out.reshape(T, H * Dv)


def gen_attention():
    R = rng_for("attention")
    cases = []

    def c(name, T, S, H, D, KV=None, Dv=None, bias=None, qscale=1.0, tl=ATTN, **p):
        q = rn(R, (T, H * D), qscale)
        k = rn(R, (S, (KV or H) * D))
        v = rn(R, (S, (KV or H) * (Dv or D)))
        params = {"heads": H, "headDim": D}
        if KV is not None:
            params["kvHeads"] = KV
        if Dv is not None:
            params["vHeadDim"] = Dv
        params.update(p)
        y = attention_ref(q, k, v, H, D, KV, Dv, bias=bias, **p)
        ins = ["q", "k", "v"] + (["bias"] if bias is not None else [])
        inputs = {"q": q, "k": k, "v": v}
        if bias is not None:
            inputs["bias"] = bias
        cases.append(mk(name, [node("y", "attention", ins, **params)], inputs, {"y": y}, tl))
        return y

    c("attention_mha_causal", 4, 4, 2, 8)
    c("attention_gqa_h4_kv2", 5, 5, 4, 8, KV=2)
    c("attention_vHeadDim", 3, 3, 2, 8, Dv=4)
    c("attention_mqa_vHeadDim_h4_kv1", 3, 5, 4, 8, KV=1, Dv=6, posOffset=2)
    c("attention_causal_posOffset_cache_rows_hidden", 3, 8, 2, 8, KV=1, posOffset=2)
    c("attention_causal_posOffset_full", 3, 7, 2, 8, posOffset=4)
    c("attention_decode_T1", 1, 6, 4, 8, KV=2, posOffset=5)
    c("attention_noncausal", 3, 5, 2, 8, causal=False)
    c("attention_window_causal", 6, 6, 2, 8, window=3)
    c("attention_window_causal_posOffset", 3, 10, 2, 8, KV=1, window=4, posOffset=5)
    c("attention_window_noncausal", 5, 5, 2, 8, causal=False, window=2)
    c("attention_scale", 4, 4, 2, 8, scale=0.3)
    c("attention_softcap", 4, 4, 2, 8, softcap=5.0, scale=1.0, qscale=3.0)
    c("attention_softcap_only", 3, 4, 2, 8, softcap=2.0, qscale=4.0, posOffset=1)
    c("attention_alibi_bloom_h6", 4, 4, 6, 4, alibi=True)
    c("attention_alibi_bloom_h8_posOffset", 2, 5, 8, 4, alibi=True, posOffset=3)
    c("attention_alibiMax_mpt_h6", 4, 4, 6, 4, alibiMax=8)
    c("attention_alibiSlopes_explicit", 3, 5, 3, 4, alibiSlopes=[0.5, 0.1, 2.0], posOffset=2)
    T, S, H = 3, 5, 2
    b2 = rn(R, (T, S), 0.5)
    b2[0, 1] = b2[2, 0] = b2[2, 3] = F32(-1e9)
    c("attention_bias_TS", T, S, H, 8, bias=b2, causal=False)
    b3 = rn(R, (H, T, S), 0.5)
    b3[0, :, 0] = F32(-1e9)
    b3[1, 1, 2] = F32(-1e9)
    c("attention_bias_HTS_causal", T, S, H, 8, bias=b3, posOffset=2)
    y = c("attention_all_masked_rows_zero", 3, 5, 2, 8, window=1, posOffset=4)
    assert float(y[1:].abs().max()) == 0.0 and float(y[0].abs().max()) > 0
    c("attention_long_S300", 3, 300, 2, 16, KV=1, posOffset=297)
    c("attention_long_S300_window", 2, 300, 2, 16, KV=1, posOffset=298, window=130)
    c("attention_gemma2_style", 4, 9, 4, 8, KV=2, posOffset=5, scale=0.25, softcap=50.0, window=4, qscale=2.0)
    return cases
