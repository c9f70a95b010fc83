"""moe: the three layouts, scorings, group-limited routing."""
from .common import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403


# ---------------------------------------------------------------- moe


def moe_route(logits, topK, scoring="softmax", normalize=False, scale=1.0, nGroup=None, topKGroup=None,
              groupTopK=1, bias=None, check_margin=True):
    L = t64(logits)
    Tn, E = L.shape
    s = torch.softmax(L, -1) if scoring == "softmax" else torch.sigmoid(L)
    choice = s + t64(bias) if bias is not None else s.clone()
    sel, wts = [], []
    for t in range(Tn):
        ch = choice[t].clone()
        if nGroup and nGroup > 1:
            gsz = E // nGroup
            gscore = [float(torch.sort(ch[g * gsz:(g + 1) * gsz], descending=True)[0][:groupTopK].sum())
                      for g in range(nGroup)]
            gorder = sorted(range(nGroup), key=lambda g: (-gscore[g], g))
            if check_margin:
                assert gscore[gorder[topKGroup - 1]] - gscore[gorder[topKGroup]] > 1e-4, "group near-tie"
            keep = set(gorder[:topKGroup])
            for e in range(E):
                if e // gsz not in keep:
                    ch[e] = -math.inf
        order = sorted(range(E), key=lambda e: (-float(ch[e]), e))
        if check_margin and topK < E and math.isfinite(float(ch[order[topK]])):
            assert float(ch[order[topK - 1]] - ch[order[topK]]) > 1e-4, "expert near-tie"
        chosen = order[:topK]
        w = s[t, chosen]
        if normalize:
            w = w / w.sum()
        w = w * scale
        sel.append(chosen)
        wts.append(w)
    return sel, wts


def moe_ref(x, logits, experts, activation="silu", **route):
    sel, wts = moe_route(logits, **route)
    X = t64(x)
    out = torch.zeros_like(X)
    act = (lambda g: g * torch.sigmoid(g)) if activation == "silu" else gelu_tanh
    for t in range(X.shape[0]):
        for e, w in zip(sel[t], wts[t]):
            g, u, d = experts[e]
            h = act(t64(g) @ X[t]) * (t64(u) @ X[t])
            out[t] += w * (t64(d) @ h)
    return out, sel


def hf_deepseek_v3_route(logits, bias, top_k, n_group, topk_group, norm, rsf):
    """Independent check, written after transformers' DeepseekV3 router (sum of the best 2 per group,
    masked_fill 0.0)."""
    L = t64(logits)
    scores = torch.sigmoid(L)
    sfc = scores + t64(bias)
    E = L.shape[1]
    gs = sfc.view(-1, n_group, E // n_group).topk(2, dim=-1)[0].sum(dim=-1)
    gidx = torch.topk(gs, k=topk_group, dim=-1, sorted=False)[1]
    gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
    smask = gmask.unsqueeze(-1).expand(-1, n_group, E // n_group).reshape(-1, E)
    sfc = sfc.masked_fill(~smask.bool(), 0.0)
    idx = torch.topk(sfc, k=top_k, dim=-1, sorted=False)[1]
    w = scores.gather(1, idx)
    if norm:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * rsf


def gen_moe():
    R = rng_for("moe")
    cases = []
    E, Tn, C, I, K = 8, 5, 16, 16, 2  # small f32 experts (inline JSON); packed cases use C = I = 32

    def experts_f32(C_, I_):
        return [(rn(R, (I_, C_), 0.3, 2), rn(R, (I_, C_), 0.3, 2), rn(R, (C_, I_), 0.3, 2)) for _ in range(E)]

    def c(name, layout="separate", scoring=None, normalize=None, scale=None, nGroup=None, topKGroup=None,
          groupTopK=None, bias=None, activation=None, packed_dtype=None, C_=C, I_=I, topK=K, logit_scale=1.5,
          extra_check=None):
        x = rn(R, (Tn, C_))
        logits = rn(R, (Tn, E), logit_scale)
        ex = experts_f32(C_, I_)
        params = {"topK": topK}
        for k_, v_ in [("scoring", scoring), ("normalize", normalize), ("scale", scale), ("nGroup", nGroup),
                       ("topKGroup", topKGroup), ("groupTopK", groupTopK), ("activation", activation)]:
            if v_ is not None:
                params[k_] = v_
        if bias is not None:
            params["selectionBias"] = True
        if layout != "separate":
            params["layout"] = layout
        ins = ["x", "logits"] + (["bias"] if bias is not None else [])
        weights, packed = {}, {}

        def put(nm, arr):
            if packed_dtype:
                p = pack(arr, packed_dtype)
                packed[nm] = p
                return p.deq
            weights[nm] = arr
            return arr

        deq = []
        if layout == "separate":
            for e, (g, u, d) in enumerate(ex):
                deq.append((put(f"gate_{e}", g), put(f"up_{e}", u), put(f"down_{e}", d)))
                ins += [f"w:gate_{e}", f"w:up_{e}", f"w:down_{e}"]
        elif layout == "fused":
            gu = np.stack([np.concatenate([g, u], 0) for g, u, _ in ex])  # [E, 2I, C]
            dn = np.stack([d for _, _, d in ex])  # [E, C, I]
            gu, dn = put("gate_up", gu), put("down", dn)
            deq = [(gu[e, :I_], gu[e, I_:], dn[e]) for e in range(E)]
            ins += ["w:gate_up", "w:down"]
        else:
            G = put("gate", np.stack([g for g, _, _ in ex]))
            U = put("up", np.stack([u for _, u, _ in ex]))
            Dn = put("down", np.stack([d for _, _, d in ex]))
            deq = [(G[e], U[e], Dn[e]) for e in range(E)]
            ins += ["w:gate", "w:up", "w:down"]
        route = dict(topK=topK, scoring=scoring or "softmax", normalize=bool(normalize), scale=scale or 1.0,
                     nGroup=nGroup, topKGroup=topKGroup, groupTopK=groupTopK or 1, bias=bias)
        y, sel = moe_ref(x, logits, deq, activation=activation or "silu", **route)
        if extra_check:
            extra_check(x, logits, deq, route, y, sel)
        inputs = {"x": x, "logits": logits}
        if bias is not None:
            inputs["bias"] = bias
        cases.append(mk(name, [node("y", "moe", ins, **params)], inputs, {"y": y}, MOE,
                        weights=weights or None, packed=packed or None))

    def mixtral_check(x, logits, deq, route, y, sel):
        rw = torch.softmax(t64(logits), -1)
        w, idx = torch.topk(rw, 2, -1)
        w = w / w.sum(-1, keepdim=True)
        X = t64(x)
        out = torch.zeros_like(X)
        for t in range(X.shape[0]):
            for j in range(2):
                g, u, d = deq[int(idx[t, j])]
                out[t] += w[t, j] * (t64(d) @ (torch.nn.functional.silu(t64(g) @ X[t]) * (t64(u) @ X[t])))
        assert torch.allclose(out, y, atol=1e-12)

    c("moe_separate_softmax_normalize_mixtral", scoring="softmax", normalize=True, activation="silu",
      extra_check=mixtral_check)
    c("moe_separate_defaults_normalize", normalize=True)
    c("moe_separate_softmax_no_normalize_qwen", scoring="softmax", normalize=False)
    c("moe_fused_softmax_normalize", layout="fused", normalize=True)
    c("moe_stacked_softmax_normalize", layout="stacked", normalize=True, scoring="softmax")
    c("moe_stacked_sigmoid_normalize_scale", layout="stacked", scoring="sigmoid", normalize=True, scale=2.5)
    c("moe_stacked_sigmoid_no_normalize", layout="stacked", scoring="sigmoid", normalize=False)

    sb = np.array([0.0, 0.0, 0.9, 0.0, 0.0, 0.0, 0.0, 0.8], F32)

    def bias_changes_choice(x, logits, deq, route, y, sel):
        r2 = dict(route)
        r2["bias"] = None
        sel2, _ = moe_route(logits, check_margin=False, **{k: v for k, v in r2.items()})
        assert sel2 != sel, "selection bias should change the choice"

    c("moe_stacked_sigmoid_selectionBias", layout="stacked", scoring="sigmoid", normalize=True, bias=sb,
      extra_check=bias_changes_choice)

    def groups_matter(x, logits, deq, route, y, sel):
        r2 = dict(route)
        r2["nGroup"] = None
        sel2, _ = moe_route(logits, check_margin=False, **r2)
        assert sel2 != sel, "group limit should change the choice"

    c("moe_group_limited_groupTopK1_default", layout="stacked", scoring="softmax", normalize=False, scale=1.5,
      nGroup=4, topKGroup=1, extra_check=groups_matter, logit_scale=2.0)
    c("moe_group_limited_groupTopK1_explicit_topK3", layout="separate", scoring="sigmoid", normalize=True,
      nGroup=2, topKGroup=1, groupTopK=1, topK=3, extra_check=groups_matter, logit_scale=2.0)

    sb2 = rn(R, (E,), 0.3)

    def deepseek_v3_check(x, logits, deq, route, y, sel):
        groups_matter(x, logits, deq, route, y, sel)
        idx, w = hf_deepseek_v3_route(logits, sb2, 2, 4, 2, True, 2.5)
        _, wts = moe_route(logits, check_margin=False, **route)
        for t in range(len(sel)):
            assert sorted(sel[t]) == sorted(int(i) for i in idx[t]), (sel[t], idx[t])
            mine = dict(zip(sel[t], [float(v) for v in wts[t]]))
            for i, wv in zip(idx[t], w[t]):
                assert abs(mine[int(i)] - float(wv)) < 1e-12

    c("moe_group_limited_groupTopK2_deepseek_v3", layout="stacked", scoring="sigmoid", normalize=True, scale=2.5,
      nGroup=4, topKGroup=2, groupTopK=2, bias=sb2, extra_check=deepseek_v3_check, logit_scale=2.0)
    c("moe_fused_gelu", layout="fused", normalize=True, activation="gelu")
    c("moe_separate_gelu_sigmoid", scoring="sigmoid", normalize=False, activation="gelu")
    c("moe_packed_q8_0_stacked", layout="stacked", normalize=True, packed_dtype="q8_0", C_=32, I_=32)
    c("moe_packed_q4_0_separate", layout="separate", normalize=True, packed_dtype="q4_0", C_=32, I_=32)
    c("moe_packed_f16_fused", layout="fused", normalize=True, packed_dtype="f16", C_=8, I_=8)
    return cases
