"""Protocol extension ops (docs/PROTOCOL-EXTENSIONS.md): linear_attention, ssm_scan, selective_scan, expr,
recurrence, depth_route.

References are plain torch float64 loops and formulas written from the docs, never from the expression strings
the cases send; selective_scan follows transformers' MambaMixer.slow_forward (huggingface/transformers,
src/transformers/models/mamba/modeling_mamba.py: discrete_A = exp(A * softplus(dt)), deltaB_u = dt * B * x,
h = discrete_A * h + deltaB_u, y = h @ C + D * x; softplus is torch's, threshold 20).

Stateful cases also run as chained calls (a case's "then": later calls on the same session): a prefill followed
by decode steps must give the rows and the final state of one long call.
"""
from .common import *  # noqa: F401,F403


def _spec(mn, mx, params, feature):
    return {"minInputs": mn, "maxInputs": mx, "params": {k: {"type": t} for k, t in params.items()},
            "features": [feature]}


EXT_OPS.update({
    "linear_attention": _spec(5, 5, {"heads": "number", "headDim": "number", "denFloor": "number?",
                                     "featureMap": "string?", "causal": "boolean?"}, "ext.linear_attention"),
    "ssm_scan": _spec(6, 6, {}, "ext.ssm_scan"),
    "selective_scan": _spec(6, 7, {"dtSoftplus": "boolean?"}, "ext.selective_scan"),
    "expr": _spec(1, 8, {"expr": "string"}, "ext.expr"),
    "recurrence": _spec(1, 64, {"index": "array", "inputs": "array?", "weights": "array?", "state": "array",
                                "let": "array?", "update": "array?", "readout": "string?", "init": "array?",
                                "mode": "string?"}, "ext.recurrence"),
    "depth_route": _spec(3, 3, {"step": "number", "gate": "string?"}, "ext.depth_route"),
    "ssd_scan": _spec(8, 8, {"heads": "number", "headDim": "number", "groups": "number?", "dState": "number"},
                      "ext.ssd_scan"),
    "ring_attention": _spec(5, 5, {"heads": "number", "headDim": "number", "kvHeads": "number?",
                                   "vHeadDim": "number?", "causal": "boolean?", "posOffset": "number?",
                                   "scale": "number?", "softcap": "number?", "window": "number",
                                   "alibi": "boolean?", "alibiMax": "number?", "alibiSlopes": "array?"},
                            "ext.ring_attention"),
})

SCAN = tol(1e-5, 1e-5)


def then_call(nodes, inputs, expected, bind=None, retain=None, weights=None):
    """A later call of a chained case: same session, its own inputs and expected outputs."""
    g = graph_call(nodes, inputs, expected, weights, bind, retain, in_session=True)
    return {"features": features(nodes), "graph": g, "expected": {k: tj(v) for k, v in expected.items()}}


def chained(case, calls):
    case["then"] = calls
    return case


def split_rows(a, sizes):
    out, at = [], 0
    for n in sizes:
        out.append(a[at:at + n])
        at += n
    return out


# ---------------------------------------------------------------- linear_attention


def phi(x):
    return torch.nn.functional.elu(x) + 1.0


def la_ref(q, k, v, S, z, H, D, den_floor=1e-6, causal=True):
    """Per head: S += phi(k) v^T, z += phi(k), out = phi(q)^T S / max(phi(q).z, den_floor)."""
    T = q.shape[0]
    q, k, v = (t64(a).reshape(T, H, D) for a in (q, k, v))
    S = t64(S).reshape(H, D, D).clone()
    z = t64(z).reshape(H, D).clone()
    out = torch.zeros(T, H, D, dtype=F64)

    def read(t):
        fq = phi(q[t])
        num = torch.einsum("hi,hij->hj", fq, S)
        den = torch.clamp((fq * z).sum(-1), min=den_floor)
        out[t] = num / den[:, None]

    for t in range(T):
        fk = phi(k[t])
        S += fk[:, :, None] * v[t][:, None, :]
        z += fk
        if causal:
            read(t)
    if not causal:
        for t in range(T):
            read(t)
    return out.reshape(T, H * D), S.reshape(H * D, D), z


def la_cumsum(q, k, v, S, z, H, D, den_floor=1e-6):
    """Independent check: the causal prefix-sum form of Katharopoulos et al."""
    T = q.shape[0]
    q, k, v = (t64(a).reshape(T, H, D) for a in (q, k, v))
    fk, fq = phi(k), phi(q)
    Ss = t64(S).reshape(H, D, D)[None] + torch.cumsum(fk[:, :, :, None] * v[:, :, None, :], 0)
    zs = t64(z).reshape(H, D)[None] + torch.cumsum(fk, 0)
    num = torch.einsum("thi,thij->thj", fq, Ss)
    den = torch.clamp((fq * zs).sum(-1), min=den_floor)
    return (num / den[..., None]).reshape(T, H * D)


def la_state(R, H, D, n=3):
    """A plausible nonzero state: what n earlier tokens leave behind."""
    k, v = rn(R, (n, H * D)), rn(R, (n, H * D))
    _, S, z = la_ref(np.zeros((n, H * D), F32), k, v, np.zeros((H * D, D), F32), np.zeros((H, D), F32), H, D)
    return npf(S).astype(F32), npf(z).astype(F32)


def gen_linear_attention():
    R = rng_for("linear_attention")
    cases = []
    ins = ["q", "k", "v", "s:S", "s:z"]

    def case(name, T, H, D, state=True, tl=SCAN, q=None, **params):
        q = rn(R, (T, H * D)) if q is None else q
        k, v = rn(R, (T, H * D)), rn(R, (T, H * D))
        S, z = la_state(R, H, D) if state else (np.zeros((H * D, D), F32), np.zeros((H, D), F32))
        y, S1, z1 = la_ref(q, k, v, S, z, H, D, params.get("denFloor", 1e-6), params.get("causal", True))
        if params.get("causal", True):
            assert np.allclose(npf(y), npf(la_cumsum(q, k, v, S, z, H, D, params.get("denFloor", 1e-6))), atol=1e-12)
        cases.append(mk(name, [node("y", "linear_attention", ins, heads=H, headDim=D, **params)],
                        {"q": q, "k": k, "v": v}, {"y": y}, tl, session={"S": S, "z": z},
                        expected_session={"S": S1, "z": z1}))

    case("linear_attention_decode_T1", 1, 2, 3)
    case("linear_attention_prefill_T5_zero_state", 5, 2, 4, state=False)
    case("linear_attention_T3_one_head", 3, 1, 5)
    case("linear_attention_noncausal", 3, 2, 3, causal=False)
    # queries far below zero: phi(q) = exp(q) is tiny and the denominator hits the floor
    case("linear_attention_den_floor", 2, 2, 3, q=np.full((2, 6), -12.0, F32), denFloor=1e-3,
         featureMap="elu_plus_one")

    # chained: a prefill of 4 then a decode step equals one call of 5
    H, D = 2, 4
    q, k, v = rn(R, (5, H * D)), rn(R, (5, H * D)), rn(R, (5, H * D))
    S, z = la_state(R, H, D)
    y, S1, z1 = la_ref(q, k, v, S, z, H, D)
    y = npf(y)
    n1 = [node("y", "linear_attention", ins, heads=H, headDim=D)]
    c = mk("linear_attention_prefill_then_decode", n1, {"q": q[:4], "k": k[:4], "v": v[:4]}, {"y": y[:4]}, SCAN,
           session={"S": S, "z": z}, expected_session={"S": S1, "z": z1})
    cases.append(chained(c, [then_call(n1, {"q": q[4:], "k": k[4:], "v": v[4:]}, {"y": y[4:]})]))

    # as the IR lowering emits it: the prefill allocates the state (zeros + retain), decode steps reuse it
    H, D = 1, 3
    q, k, v = rn(R, (4, H * D)), rn(R, (4, H * D)), rn(R, (4, H * D))
    y, S1, z1 = la_ref(q, k, v, np.zeros((H * D, D), F32), np.zeros((H, D), F32), H, D)
    y = npf(y)
    pre = [node("S0", "zeros", [], shape=[H * D, D]), node("z0", "zeros", [], shape=[H, D]),
           node("y", "linear_attention", ["q", "k", "v", "S0", "z0"], heads=H, headDim=D)]
    dec = [node("y", "linear_attention", ins, heads=H, headDim=D)]
    c = mk("linear_attention_zeros_retain_then_decode_x2", pre, {"q": q[:2], "k": k[:2], "v": v[:2]}, {"y": y[:2]},
           SCAN, retain={"S": "S0", "z": "z0"}, expected_session={"S": S1, "z": z1})
    cases.append(chained(c, [then_call(dec, {"q": q[t:t + 1], "k": k[t:t + 1], "v": v[t:t + 1]}, {"y": y[t:t + 1]})
                             for t in (2, 3)]))
    return cases


# ---------------------------------------------------------------- ssm_scan


def ssm_ref(x, a, b, c, d, h):
    """h = a * h + b * x_t (x broadcast over n); y_t = sum_n c * h + d * x_t."""
    x, a, b, c, d = (t64(v) for v in (x, a, b, c, d))
    h = t64(h).clone()
    ys = []
    for t in range(x.shape[0]):
        h = a * h + b * x[t][:, None]
        ys.append((c * h).sum(-1) + d * x[t])
    return torch.stack(ys), h


def ssm_closed(x, a, b, c, d, h):
    """Independent check: h_t = a^(t+1) h_0 + sum_{s<=t} a^(t-s) b x_s."""
    x, a, b, c, d, h0 = (t64(v) for v in (x, a, b, c, d, h))
    ys = []
    for t in range(x.shape[0]):
        ht = a ** (t + 1) * h0 + sum(a ** (t - s) * b * x[s][:, None] for s in range(t + 1))
        ys.append((c * ht).sum(-1) + d * x[t])
    return torch.stack(ys)


def gen_ssm_scan():
    R = rng_for("ssm_scan")
    cases = []
    ins = ["x", "w:a", "w:b", "w:c", "w:d", "s:h"]

    def weights(C, N):
        a = (0.5 + 0.45 * np.tanh(rn(R, (C, N)))).astype(F32)  # a decay in (0.05, 0.95)
        a = np.round(a, 3).astype(F32)
        return a, rn(R, (C, N), 0.5), rn(R, (C, N), 0.5), rn(R, (C,))

    def case(name, T, C, N, zero=False, packed_dtype=None):
        x = rn(R, (T, C))
        a, b, c, d = weights(C, N)
        h = np.zeros((C, N), F32) if zero else rn(R, (C, N))
        packed = None
        w = {"a": a, "b": b, "c": c, "d": d}
        if packed_dtype:
            packed = {k: pack(v, packed_dtype) for k, v in w.items()}
            a, b, c, d = (packed[k].deq for k in "abcd")
            w = None
        y, h1 = ssm_ref(x, a, b, c, d, h)
        assert np.allclose(npf(y), npf(ssm_closed(x, a, b, c, d, h)), atol=1e-10)
        cases.append(mk(name, [node("y", "ssm_scan", ins)], {"x": x}, {"y": y}, SCAN, weights=w, packed=packed,
                        session={"h": h}, expected_session={"h": h1}))

    case("ssm_scan_decode_T1", 1, 4, 3)
    case("ssm_scan_prefill_T6_zero_state", 6, 5, 2, zero=True)
    case("ssm_scan_T3_N1", 3, 6, 1)
    case("ssm_scan_f16_weights", 2, 4, 4, packed_dtype="f16")
    # state and weights as plain inputs (only the output is checked)
    T, C, N = 2, 3, 2
    x, (a, b, c, d), h = rn(R, (T, C)), weights(C, N), rn(R, (C, N))
    y, _ = ssm_ref(x, a, b, c, d, h)
    cases.append(mk("ssm_scan_all_plain_inputs", [node("y", "ssm_scan", ["x", "a", "b", "c", "d", "h"])],
                    {"x": x, "a": a, "b": b, "c": c, "d": d, "h": h}, {"y": y}, SCAN))
    # chained: prefill 3, then two decode steps
    T, C, N = 5, 4, 3
    x, (a, b, c, d), h = rn(R, (T, C)), weights(C, N), rn(R, (C, N))
    y, h1 = ssm_ref(x, a, b, c, d, h)
    y = npf(y)
    n1 = [node("y", "ssm_scan", ins)]
    w = {"a": a, "b": b, "c": c, "d": d}
    c0 = mk("ssm_scan_prefill_then_decode_x2", n1, {"x": x[:3]}, {"y": y[:3]}, SCAN, weights=w, session={"h": h},
            expected_session={"h": h1})
    cases.append(chained(c0, [then_call(n1, {"x": x[t:t + 1]}, {"y": y[t:t + 1]}, weights=w) for t in (3, 4)]))
    return cases


# ---------------------------------------------------------------- selective_scan


def selective_ref(x, dt, B, C, A_log, D, h, dt_softplus=True):
    """transformers' MambaMixer.slow_forward from the SSM parameters on (batch 1, float64)."""
    hidden = t64(x).T[None]                                                  # [1, C, T]
    dts = t64(dt)
    if dt_softplus:
        dts = torch.nn.functional.softplus(dts)                              # threshold 20
    dts = dts.T[None]                                                        # [1, C, T]
    A = -torch.exp(t64(A_log))                                               # [C, N]
    Bm, Cm = t64(B)[None], t64(C)[None]                                      # [1, T, N]
    discrete_A = torch.exp(A[None, :, None, :] * dts[:, :, :, None])         # [1, C, T, N]
    discrete_B = dts[:, :, :, None] * Bm[:, None, :, :]                      # [1, C, T, N]
    deltaB_u = discrete_B * hidden[:, :, :, None]
    ssm_state = t64(h)[None].clone()
    outs = []
    for i in range(hidden.shape[2]):
        ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
        outs.append(torch.matmul(ssm_state, Cm[:, i, :].unsqueeze(-1))[:, :, 0])
    y = torch.stack(outs, dim=-1)                                            # [1, C, T]
    if D is not None:
        y = y + hidden * t64(D)[None, :, None]
    return y[0].T, ssm_state[0]


def gen_selective_scan():
    R = rng_for("selective_scan")
    cases = []

    def params(Ch, N):
        A_log = np.round(np.log(np.tile(np.arange(1, N + 1, dtype=np.float64), (Ch, 1))) + rn(R, (Ch, N), 0.1),
                         3).astype(F32)  # S4D-real init plus noise
        return A_log, rn(R, (Ch,))

    def acts(T, Ch, N):
        return rn(R, (T, Ch)), rn(R, (T, Ch), 1.5), rn(R, (T, N)), rn(R, (T, N))

    def case(name, T, Ch, N, use_d=True, zero=False, dt=None, packed_dtype=None, **p):
        x, dt_, B, C = acts(T, Ch, N)
        dt = dt_ if dt is None else dt
        A_log, D = params(Ch, N)
        h = np.zeros((Ch, N), F32) if zero else rn(R, (Ch, N))
        w = {"A_log": A_log}
        if use_d:
            w["D"] = D
        packed = None
        if packed_dtype:
            packed = {k: pack(v, packed_dtype) for k, v in w.items()}
            A_log = packed["A_log"].deq
            D = packed["D"].deq if use_d else D
            w = None
        y, h1 = selective_ref(x, dt, B, C, A_log, D if use_d else None, h, p.get("dtSoftplus", True))
        ins = ["x", "dt", "B", "C", "w:A_log"] + (["w:D"] if use_d else []) + ["s:h"]
        cases.append(mk(name, [node("y", "selective_scan", ins, **p)], {"x": x, "dt": dt, "B": B, "C": C}, {"y": y},
                        SCAN, weights=w, packed=packed, session={"h": h}, expected_session={"h": h1}))

    case("selective_scan_decode_T1", 1, 4, 3)
    case("selective_scan_prefill_T5_zero_state", 5, 6, 4, zero=True)
    case("selective_scan_without_D", 3, 4, 2, use_d=False)
    case("selective_scan_dt_raw", 3, 3, 2, dt=np.round(np.abs(rn(R, (3, 3))) * 0.3, 3).astype(F32),
         dtSoftplus=False)
    case("selective_scan_dt_softplus_explicit", 2, 3, 2, dtSoftplus=True)
    # softplus past torch's threshold (dt > 20 passes through) and far below it
    big = np.array([[25.0, -30.0, 0.5], [20.5, 19.5, -1.0]], F32)
    case("selective_scan_softplus_threshold", 2, 3, 2, dt=big)
    case("selective_scan_bf16_params", 2, 4, 2, packed_dtype="bf16")

    # chained: prefill 4, then a decode step
    T, Ch, N = 5, 5, 3
    x, dt, B, C = acts(T, Ch, N)
    A_log, D = params(Ch, N)
    h = rn(R, (Ch, N))
    y, h1 = selective_ref(x, dt, B, C, A_log, D, h)
    y = npf(y)
    ins = ["x", "dt", "B", "C", "w:A_log", "w:D", "s:h"]
    n1 = [node("y", "selective_scan", ins)]
    w = {"A_log": A_log, "D": D}
    sl = [(0, 4), (4, 5)]
    part = [{"x": x[a:b], "dt": dt[a:b], "B": B[a:b], "C": C[a:b]} for a, b in sl]
    c0 = mk("selective_scan_prefill_then_decode", n1, part[0], {"y": y[0:4]}, SCAN, weights=w, session={"h": h},
            expected_session={"h": h1})
    cases.append(chained(c0, [then_call(n1, part[1], {"y": y[4:5]}, weights=w)]))
    return cases


# ---------------------------------------------------------------- expr


def gen_expr():
    R = rng_for("expr")
    cases = []

    def case(name, src, inputs, ref, tl=ELEM):
        names = list(inputs)
        cases.append(mk(name, [node("y", "expr", names, expr=src)], inputs, {"y": ref}, tl))

    a, b = rn(R, (3, 5)), rn(R, (3, 5))
    A, B = t64(a), t64(b)
    case("expr_swiglu_same_shape", "silu(a) * b", {"a": a, "b": b}, A * torch.sigmoid(A) * B)
    col, one = rn(R, (3, 1)), rn(R, (1,))
    case("expr_column_and_single_broadcast", "a * sigmoid(b) + c - d", {"a": a, "b": b, "c": col, "d": one},
         A * torch.sigmoid(B) + t64(col) - t64(one))
    row = rn(R, (5,))
    case("expr_row_vector", "a / (1 + abs(b)) + exp(c)", {"a": a, "b": b, "c": row},
         A / (1 + B.abs()) + torch.exp(t64(row)))
    sp = np.array([[-30.0, -1.0, 0.0, 0.5, 19.5, 20.0, 20.5, 40.0]], F32)
    case("expr_softplus_threshold", "softplus(a)", {"a": sp}, torch.nn.functional.softplus(t64(sp)))
    x = rn(R, (4, 6), 2.0)
    y_ = rn(R, (4, 6), 2.0)
    X, Y = t64(x), t64(y_)
    case("expr_every_function",
         "pow(abs(a), 1.5) + rsqrt(b * b + 1) + tanh(a) + relu(b) + log(1 + a * a) + sqrt(abs(b))"
         " + min(a, b, 0.5) - max(a, b) + sigmoid(-a)",
         {"a": x, "b": y_},
         X.abs() ** 1.5 + torch.rsqrt(Y * Y + 1) + torch.tanh(X) + torch.relu(Y) + torch.log(1 + X * X)
         + torch.sqrt(Y.abs()) + torch.minimum(torch.minimum(X, Y), torch.full_like(X, 0.5)) - torch.maximum(X, Y)
         + torch.sigmoid(-X))
    case("expr_conditional_and_compare", "a * 2 if a > b and not (b < -1) else b % 1.5",
         {"a": x, "b": y_},
         torch.where((X > Y) & ~(Y < -1), X * 2, Y - torch.floor(Y / 1.5) * 1.5))
    p_, q_, r_ = x, y_, rn(R, (4, 1))
    case("expr_x_names", "x0 - x1 * x2", {"p": p_, "q": q_, "r": r_}, X - Y * t64(r_))
    t1 = rn(R, (1, 7))
    case("expr_T1_decode_row", "exp(a) - 1", {"a": t1}, torch.exp(t64(t1)) - 1)
    eight = [rn(R, (2, 3)) for _ in range(8)]
    E = [t64(e) for e in eight]
    case("expr_eight_inputs", "a + b * c - d + e * f - g * h",
         {k: v for k, v in zip("abcdefgh", eight)},
         E[0] + E[1] * E[2] - E[3] + E[4] * E[5] - E[6] * E[7])
    big = rn(R, (37, 70))
    case("expr_many_blocks_3d", "a * a * 0.5 + 1", {"a": big.reshape(37, 7, 10)},
         t64(big.reshape(37, 7, 10)) ** 2 * 0.5 + 1)
    return cases


# ---------------------------------------------------------------- recurrence


def rec_node(id_, ins, **p):
    return node(id_, "recurrence", ins, **p)


def gen_recurrence():
    R = rng_for("recurrence")
    cases = []

    # 1. a gated EMA: index c, inputs x [T, C] and g [T, 1], weight decay [C]
    EMA = dict(index=[["c", 6]], inputs=["x", "g"], weights=["decay"], state=["h"], let=["a = sigmoid(decay)"],
               update=["h = a * h + (1 - a) * x * g"], readout="h * 2")

    def ema_ref(x, g, decay, h):
        a = torch.sigmoid(t64(decay))
        h = t64(h).clone()
        ys = []
        for t in range(x.shape[0]):
            h = a * h + (1 - a) * t64(x)[t] * t64(g)[t]
            ys.append(h * 2)
        return torch.stack(ys), h

    ema_in = ["x", "g", "w:decay", "s:h"]
    for name, T in [("recurrence_ema_T4", 4), ("recurrence_ema_decode_T1", 1)]:
        x, g, decay, h = rn(R, (T, 6)), rn(R, (T, 1)), rn(R, (6,)), rn(R, (6,))
        y, h1 = ema_ref(x, g, decay, h)
        cases.append(mk(name, [rec_node("y", ema_in, **EMA)], {"x": x, "g": g}, {"y": y}, SCAN,
                        weights={"decay": decay}, session={"h": h}, expected_session={"h": h1}))
    # chained: prefill 3, decode, decode
    x, g, decay, h = rn(R, (5, 6)), rn(R, (5, 1)), rn(R, (6,)), rn(R, (6,))
    y, h1 = ema_ref(x, g, decay, h)
    y = npf(y)
    n1 = [rec_node("y", ema_in, **EMA)]
    c0 = mk("recurrence_ema_prefill_then_decode_x2", n1, {"x": x[:3], "g": g[:3]}, {"y": y[:3]}, SCAN,
            weights={"decay": decay}, session={"h": h}, expected_session={"h": h1})
    cases.append(chained(c0, [then_call(n1, {"x": x[t:t + 1], "g": g[t:t + 1]}, {"y": y[t:t + 1]},
                                        weights={"decay": decay}) for t in (3, 4)]))

    # 2. two index names (row-major), a [1] weight, two states updated in order (s reads the new m)
    H, D, T = 2, 3, 4
    x, w, m0, s0 = rn(R, (T, H * D)), rn(R, (1,)), rn(R, (H * D,)), np.abs(rn(R, (H * D,))) + 0.5
    hh = torch.arange(H, dtype=F64).repeat_interleave(D)
    dd = torch.arange(D, dtype=F64).repeat(H)
    m, s = t64(m0).clone(), t64(s0).clone()
    ys = []
    for t in range(T):
        zt = t64(x)[t] * t64(w)[0] + hh - dd
        m = torch.maximum(m, zt)
        s = s * math.exp(-0.5) + torch.exp(zt - m)
        ys.append(torch.log(s) + m + hh * 10 + dd)
    cases.append(mk("recurrence_two_index_two_states",
                    [rec_node("y", ["x", "w:w", "s:m", "s:s"], index=[["h", H], ["d", D]], inputs=["x"],
                              weights=["w"], state=["m", "s"], let=["z = x * w + h - d"],
                              update=["m = max(m, z)", "s = s * exp(-0.5) + exp(z - m)"],
                              readout="log(s) + m + h * 10 + d")],
                    {"x": x}, {"y": torch.stack(ys)}, SCAN, weights={"w": w}, session={"m": m0, "s": s0},
                    expected_session={"m": m, "s": s}))

    # 3. init mode then steps, as the lowering allocates a body-initialised slot: zeros, init, step, retain;
    #    the state n is [2, 2] (any shape holding W values)
    C = 4
    w0 = rn(R, (C,))
    cc = torch.arange(C, dtype=F64)
    tt = t64(w0) * 2
    h_init, n_init = tt + cc, torch.exp(-tt * tt)
    x = rn(R, (3, C))
    h, n_ = h_init.clone(), n_init.clone()
    ys = []
    for t in range(3):
        h = h + t64(x)[t] * n_
        n_ = n_ * 0.5
        ys.append(h + n_)
    y = npf(torch.stack(ys))
    INIT = dict(index=[["c", C]], inputs=["x"], weights=["w0"], state=["h", "n"],
                init=["t = w0 * 2", "h = t + c", "n = exp(-t * t)"], mode="init")
    STEP = dict(index=[["c", C]], inputs=["x"], weights=["w0"], state=["h", "n"], update=["h = h + x * n", "n = n * 0.5"],
                readout="h + n")
    pre = [node("h0", "zeros", [], shape=[C]), node("n0", "zeros", [], shape=[2, 2]),
           rec_node("i", ["w:w0", "h0", "n0"], **INIT), rec_node("y", ["x", "w:w0", "h0", "n0"], **STEP)]
    c0 = mk("recurrence_init_then_prefill_then_decode", pre, {"x": x[:2]}, {"i": np.zeros(1, F32), "y": y[:2]},
            SCAN, weights={"w0": w0}, retain={"h": "h0", "n": "n0"},
            expected_session={"h": h, "n": n_.reshape(2, 2)})
    cases.append(chained(c0, [then_call([rec_node("y", ["x", "w:w0", "s:h", "s:n"], **STEP)], {"x": x[2:3]},
                                        {"y": y[2:3]}, weights={"w0": w0})]))
    # init with the data inputs present (ignored): inputs, weights, state
    hs = rn(R, (C,))
    cases.append(mk("recurrence_init_with_data_inputs",
                    [rec_node("i", ["x", "w:w0", "s:h"], index=[["c", C]], inputs=["x"], weights=["w0"], state=["h"],
                              init=["h = w0 * c + h"], mode="init")],
                    {"x": rn(R, (2, C))}, {"i": np.zeros(1, F32)}, SCAN, weights={"w0": w0}, session={"h": hs},
                    expected_session={"h": t64(w0) * cc + t64(hs)}))

    # 4. wide: 300 elements over several evaluation blocks, two tokens, no weights
    I_, J_ = 20, 15
    x, h0 = rn(R, (2, I_ * J_)), rn(R, (I_ * J_,))
    ii = torch.arange(I_, dtype=F64).repeat_interleave(J_)
    jj = torch.arange(J_, dtype=F64).repeat(I_)
    h = t64(h0).clone()
    ys = []
    for t in range(2):
        h = h * 0.9 + t64(x)[t] * (ii - jj) / 10
        ys.append(torch.tanh(h))
    cases.append(mk("recurrence_wide_300", [rec_node("y", ["x", "s:h"], index=[["i", I_], ["j", J_]], inputs=["x"],
                                                     state=["h"], update=["h = h * 0.9 + x * (i - j) / 10"],
                                                     readout="tanh(h)")],
                    {"x": x}, {"y": torch.stack(ys)}, SCAN, session={"h": h0}, expected_session={"h": h}))
    return cases


# ---------------------------------------------------------------- depth_route


def route_ref(x, y, router, step, gate):
    X, Y = t64(x), t64(y)
    p = torch.softmax(X @ t64(router).T, -1)
    best = torch.argmax(p, -1)  # the first maximal index
    g = p.gather(1, best[:, None]) if gate == "score" else torch.ones(X.shape[0], 1, dtype=F64)
    routed = (best + 1 >= step)[:, None]
    return torch.where(routed, X + g * (Y - X), X)


def gen_depth_route():
    R = rng_for("depth_route")
    cases = []
    T, d, n = 6, 4, 3
    x, y, router = rn(R, (T, d)), rn(R, (T, d)), rn(R, (n, d))
    ins = ["x", "y", "w:router"]
    for step in (1, 2, 3):
        cases.append(mk(f"depth_route_score_step{step}", [node("o", "depth_route", ins, step=step, gate="score")],
                        {"x": x, "y": y}, {"o": route_ref(x, y, router, step, "score")}, ELEM,
                        weights={"router": router}))
    cases.append(mk("depth_route_gate_none_step2", [node("o", "depth_route", ins, step=2, gate="none")],
                    {"x": x, "y": y}, {"o": route_ref(x, y, router, 2, "none")}, ELEM, weights={"router": router}))
    cases.append(mk("depth_route_step_bound_default_gate", [node("o", "depth_route", ins, step="l + 1")],
                    {"x": x, "y": y}, {"o": route_ref(x, y, router, 2, "score")}, ELEM, weights={"router": router},
                    bind={"l": 1}))
    # identical router rows: every p ties, depth 1 wins (lowest index), g = 1/n
    same = np.tile(rn(R, (1, d)), (n, 1))
    for step in (1, 2):
        cases.append(mk(f"depth_route_ties_step{step}", [node("o", "depth_route", ins, step=step, gate="score")],
                        {"x": x, "y": y}, {"o": route_ref(x, y, same, step, "score")}, ELEM,
                        weights={"router": same}))
    x1, y1 = rn(R, (1, d)), rn(R, (1, d))
    cases.append(mk("depth_route_decode_T1", [node("o", "depth_route", ins, step=1, gate="score")],
                    {"x": x1, "y": y1}, {"o": route_ref(x1, y1, router, 1, "score")}, ELEM,
                    weights={"router": router}))
    return cases


# ---------------------------------------------------------------- ssd_scan
# Mamba-2 (transformers' Mamba2Mixer.torch_forward, one token at a time):
# dt = softplus(dt + dt_bias), dA = exp(dt * A) with A = -exp(A_log) per head,
# h = dA * h + dt * x B (B of the head's group), y = h C + D * x.


def ssd_ref(x, dt, B, C, A_log, D, dt_bias, h, H, P, G, N):
    x, dt, B, C, A_log, D, dt_bias = (t64(v) for v in (x, dt, B, C, A_log, D, dt_bias))
    h = t64(h).clone().reshape(H, P, N)
    T = x.shape[0]
    ys = []
    for t in range(T):
        d = torch.nn.functional.softplus(dt[t] + dt_bias)            # [H]
        dA = torch.exp(d * -torch.exp(A_log))                          # [H]
        xt = x[t].reshape(H, P)
        Bt = B[t].reshape(G, N).repeat_interleave(H // G, 0)           # [H, N]
        Ct = C[t].reshape(G, N).repeat_interleave(H // G, 0)
        h = dA[:, None, None] * h + (d[:, None] * xt)[:, :, None] * Bt[:, None, :]
        y = (h * Ct[:, None, :]).sum(-1) + D[:, None] * xt
        ys.append(y.reshape(H * P))
    return torch.stack(ys), h.reshape(H * P, N)


def gen_ssd_scan():
    R_ = rng_for("ssd_scan")
    cases = []
    ins = ["x", "dt", "B", "C", "w:A_log", "w:D", "w:dt_bias", "s:h"]

    def case(name, T, H, P, G, N, state=True, **extra):
        x, dt = rn(R_, (T, H * P)), rn(R_, (T, H))
        B, C = rn(R_, (T, G * N)), rn(R_, (T, G * N))
        A_log, D, dt_bias = rn(R_, (H,), 0.5), rn(R_, (H,)), rn(R_, (H,), 0.5)
        h = rn(R_, (H * P, N), 0.5) if state else np.zeros((H * P, N), F32)
        y, h1 = ssd_ref(x, dt, B, C, A_log, D, dt_bias, h, H, P, G, N)
        params = dict(heads=H, headDim=P, dState=N, **extra)
        if G != 1:
            params["groups"] = G
        cases.append(mk(name, [node("y", "ssd_scan", ins, **params)], {"x": x, "dt": dt, "B": B, "C": C}, {"y": y},
                        SCAN, weights={"A_log": A_log, "D": D, "dt_bias": dt_bias}, session={"h": h},
                        expected_session={"h": h1}))

    case("ssd_scan_decode_T1", 1, 2, 3, 1, 4)
    case("ssd_scan_prefill_T6_zero_state", 6, 2, 2, 1, 3, state=False)
    case("ssd_scan_groups", 3, 4, 2, 2, 3)
    case("ssd_scan_T2_one_head", 2, 1, 4, 1, 2)
    return cases


# ---------------------------------------------------------------- ring_attention
# The reference is attention over the whole history with the same window
# (attention_ref, float64, written from docs/OPS.md); the ring the case sends
# holds the history's latest R positions before posOffset at rows p mod R, and
# the expected session is that ring after the step's latest rows went in.


def ring_of(k_hist, v_hist, pos, R):
    kr = np.zeros((R, k_hist.shape[1]), F32)
    vr = np.zeros((R, v_hist.shape[1]), F32)
    for p in range(max(0, pos - R), pos):
        kr[p % R], vr[p % R] = k_hist[p], v_hist[p]
    return kr, vr


def gen_ring_attention():
    from .attention import attention_ref
    R_ = rng_for("ring_attention")
    cases = []
    ins = ["q", "s:kRing", "s:vRing", "k", "v"]

    def case(name, pos, T, R, H, D, KV=None, Dv=None, tl=tol(1e-5, 1e-5), **p):
        KV, Dv = KV or H, Dv or D
        k_all, v_all = rn(R_, (pos + T, KV * D)), rn(R_, (pos + T, KV * Dv))
        q = rn(R_, (T, H * D))
        params = dict(heads=H, headDim=D, posOffset=pos, **p)
        if KV != H:
            params["kvHeads"] = KV
        if Dv != D:
            params["vHeadDim"] = Dv
        ref_p = {k: v for k, v in params.items() if k not in ("heads", "headDim")}
        y = attention_ref(q, k_all, v_all, H, D, **ref_p)
        kr, vr = ring_of(k_all, v_all, pos, R)
        kr1, vr1 = ring_of(k_all, v_all, pos + T, R)
        cases.append(mk(name, [node("y", "ring_attention", ins, **params)],
                        {"q": q, "k": k_all[pos:], "v": v_all[pos:]}, {"y": y}, tl,
                        session={"kRing": kr, "vRing": vr}, expected_session={"kRing": kr1, "vRing": vr1}))

    case("ring_attention_decode_after_wraps", 11, 1, 4, 2, 4, window=4)
    case("ring_attention_prefill_longer_than_ring", 0, 6, 4, 2, 4, window=5)
    case("ring_attention_chunk_across_the_wrap_gqa_softcap", 5, 3, 4, 4, 4, KV=2, Dv=3, window=3, softcap=2.0,
         scale=0.4)
    case("ring_attention_window_longer_than_history", 2, 2, 8, 2, 4, window=8, causal=True)
    case("ring_attention_alibi_by_position", 9, 2, 4, 4, 4, window=4, alibi=True)
    case("ring_attention_alibi_max", 6, 1, 3, 2, 4, window=3, alibiMax=8.0)
    case("ring_attention_alibi_slopes", 7, 2, 5, 2, 4, window=5, alibiSlopes=[0.5, 0.25])

    # as the IR lowering emits it: a prefill allocates the ring (zeros + retain), decode steps reuse it
    H, D, R, W = 2, 4, 3, 3
    k_all, v_all, q_all = rn(R_, (6, H * D)), rn(R_, (6, H * D)), rn(R_, (6, H * D))
    y = npf(attention_ref(q_all, k_all, v_all, H, D, window=W))
    pre = [node("kr0", "zeros", [], shape=[R, H * D]), node("vr0", "zeros", [], shape=[R, H * D]),
           node("y", "ring_attention", ["q", "kr0", "vr0", "k", "v"], heads=H, headDim=D, window=W, posOffset=0)]
    kr, vr = ring_of(k_all, v_all, 6, R)

    def dec(t):
        return [node("y", "ring_attention", ins, heads=H, headDim=D, window=W, posOffset=t)]

    c = mk("ring_attention_zeros_retain_then_decode_x2", pre, {"q": q_all[:4], "k": k_all[:4], "v": v_all[:4]},
           {"y": y[:4]}, tol(1e-5, 1e-5), retain={"kRing": "kr0", "vRing": "vr0"},
           expected_session={"kRing": kr, "vRing": vr})
    cases.append(chained(c, [then_call(dec(t), {"q": q_all[t:t + 1], "k": k_all[t:t + 1], "v": v_all[t:t + 1]},
                                       {"y": y[t:t + 1]}) for t in (4, 5)]))
    return cases


EXT_GENS = {
    "linear_attention": gen_linear_attention, "ssm_scan": gen_ssm_scan, "selective_scan": gen_selective_scan,
    "expr": gen_expr, "recurrence": gen_recurrence, "depth_route": gen_depth_route,
    "ring_attention": gen_ring_attention, "ssd_scan": gen_ssd_scan,
}
