"""Ops on carried state: cache_write, conv1d, short_conv."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- cache_write / conv


def gen_cache_write():
    R = rng_for("cache_write")
    cases = []
    kv = rn(R, (8, 4))
    v = rn(R, (3, 4))
    new = kv.copy()
    new[2:5] = v
    cases.append(mk("cache_write_session_in_place", [node("c", "cache_write", ["s:kv", "v"], offset=2)], {"v": v},
                    {"c": new}, EXACT, session={"kv": kv}, expected_session={"kv": new}))
    v2 = rn(R, (3, 4))
    new2 = kv.copy()
    new2[5:8] = v2
    cases.append(mk("cache_write_session_bind_expr", [node("c", "cache_write", ["s:kv", "v"], offset="pos + 1")],
                    {"v": v2}, {"c": new2}, EXACT, session={"kv": kv}, expected_session={"kv": new2},
                    bind={"pos": 4}))
    cache = rn(R, (6, 3))
    v3 = rn(R, (1, 3))
    new3 = cache.copy()
    new3[5:6] = v3
    cases.append(mk("cache_write_plain_input_last_row", [node("c", "cache_write", ["cache", "v"], offset=5)],
                    {"cache": cache, "v": v3}, {"c": new3}, EXACT))
    v4 = rn(R, (2, 2))
    new4 = np.zeros((4, 2), F32)
    new4[0:2] = v4
    cases.append(mk("cache_write_zeros_then_retain",
                    [node("z", "zeros", [], shape=[4, 2]), node("c", "cache_write", ["z", "v"], offset="pos")],
                    {"v": v4}, {"c": new4}, EXACT, bind={"pos": 0}, retain={"kc": "c"},
                    expected_session={"kc": new4}))
    return cases


def conv_ref(x, w, state):
    """y[t, c] = sum_k w[c, 0, k] * z[t + k, c], z = [state; x]."""
    z = np.concatenate([state, x], 0).astype(np.float64)
    K = w.shape[2]
    T = x.shape[0]
    y = np.zeros(x.shape, np.float64)
    for t in range(T):
        for k in range(K):
            y[t] += w[:, 0, k].astype(np.float64) * z[t + k]
    return y


def conv_ref_torch(x, w, state):
    """Independent check: torch depthwise conv1d, as HF LFM2 / Mamba run it."""
    z = torch.cat([t64(state), t64(x)], 0).T.unsqueeze(0)  # [1, C, K-1+T]
    y = torch.nn.functional.conv1d(z, t64(w), groups=w.shape[0])  # valid conv
    return y[0].T


def gen_conv1d():
    R = rng_for("conv1d")
    cases = []
    for name, T, C, K in [("conv1d_T5_C6_K3", 5, 6, 3), ("conv1d_decode_T1_K4", 1, 4, 4), ("conv1d_K2", 3, 5, 2)]:
        x, w, st = rn(R, (T, C)), rn(R, (C, 1, K)), rn(R, (K - 1, C))
        y = conv_ref(x, w, st)
        assert np.allclose(y, npf(conv_ref_torch(x, w, st)), atol=1e-12)
        cases.append(mk(name, [node("y", "conv1d", ["x", "w", "state"])], {"x": x, "w": w, "state": st}, {"y": y},
                        tol(1e-5, 1e-5)))
    return cases


def short_conv_ref(x, in_proj, conv, out_proj, state):
    C = x.shape[1]
    K = conv.shape[2]
    p = t64(x) @ t64(in_proj).T
    B, Cg, xx = p[:, :C], p[:, C:2 * C], p[:, 2 * C:]
    Bx = B * xx
    z = torch.cat([t64(state), Bx], 0)
    conv_out = torch.nn.functional.conv1d(z.T.unsqueeze(0), t64(conv), groups=C)[0].T
    y = Cg * conv_out
    out = y @ t64(out_proj).T
    new_state = z[-(K - 1):]
    return out, new_state


def gen_short_conv():
    R = rng_for("short_conv")
    cases = []
    for name, T, C, K in [("short_conv_prefill_T4_K3", 4, 8, 3), ("short_conv_decode_T1_K3", 1, 8, 3),
                          ("short_conv_T2_K4", 2, 6, 4)]:
        x = rn(R, (T, C))
        ip, cw, op_ = rn(R, (3 * C, C), 0.4), rn(R, (C, 1, K), 0.5), rn(R, (C, C), 0.4)
        st = rn(R, (K - 1, C))
        out, ns = short_conv_ref(x, ip, cw, op_, st)
        cases.append(mk(name, [node("y", "short_conv", ["x", "w:in_proj", "w:conv", "w:out_proj", "s:conv_state"])],
                        {"x": x}, {"y": out}, tol(5e-5, 1e-4),
                        weights={"in_proj": ip, "conv": cw, "out_proj": op_},
                        session={"conv_state": st}, expected_session={"conv_state": ns}))
    # state given as a plain input: only the output is checked
    T, C, K = 3, 4, 3
    x = rn(R, (T, C))
    ip, cw, op_, st = rn(R, (3 * C, C), 0.4), rn(R, (C, 1, K), 0.5), rn(R, (C, C), 0.4), rn(R, (K - 1, C))
    out, _ = short_conv_ref(x, ip, cw, op_, st)
    cases.append(mk("short_conv_state_as_input", [node("y", "short_conv", ["x", "in_proj", "conv", "out_proj", "st"])],
                    {"x": x, "in_proj": ip, "conv": cw, "out_proj": op_, "st": st}, {"y": out}, tol(5e-5, 1e-4)))
    return cases
