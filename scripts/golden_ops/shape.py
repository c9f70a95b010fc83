"""Ops that move values: slice, concat, reshape, transpose, zeros, causal_mask, reductions."""
from .common import *  # noqa: F401,F403
from .matmul import mm_ref  # noqa: F401


# ---------------------------------------------------------------- shape ops


def gen_slice():
    R = rng_for("slice")
    cases = []
    a = rn(R, (6, 4))
    cases.append(mk("slice_axis0", [node("y", "slice", ["a"], start=1, length=3)], {"a": a}, {"y": a[1:4]}, EXACT))
    cases.append(mk("slice_axis0_explicit", [node("y", "slice", ["a"], start=5, length=1, axis=0)], {"a": a},
                    {"y": a[5:6]}, EXACT))
    b = rn(R, (3, 8))
    cases.append(mk("slice_axis_minus1", [node("y", "slice", ["a"], start=2, length=4, axis=-1)], {"a": b},
                    {"y": b[:, 2:6]}, EXACT))
    c3 = rn(R, (2, 3, 8))
    cases.append(mk("slice_3d_axis_last_explicit", [node("y", "slice", ["a"], start=3, length=5, axis=2)],
                    {"a": c3}, {"y": c3[:, :, 3:8]}, EXACT))
    cases.append(mk("slice_3d_axis0", [node("y", "slice", ["a"], start=1, length=1)], {"a": c3}, {"y": c3[1:2]},
                    EXACT))
    w = rn(R, (8, 64))
    p = pack(w, "q8_0")
    cases.append(mk("slice_packed_q8_0_axis0", [node("y", "slice", ["w:W"], start=2, length=3)], {},
                    {"y": p.deq[2:5]}, EXACT, packed={"W": p}))
    w = rn(R, (8, 64))
    p = pack(w, "q4_0")
    x = rn(R, (2, 64))
    cases.append(mk("slice_packed_q4_0_axis0_then_matmul",
                    [node("ws", "slice", ["w:W"], start=4, length=3), node("y", "matmul", ["x", "ws"], transB=True)],
                    {"x": x}, {"y": mm_ref(x, p.deq[4:7], True)}, MATMUL, packed={"W": p}))
    w = rn(R, (4, 64))
    p = pack(w, "q8_0")
    cases.append(mk("slice_packed_q8_0_axis_last", [node("y", "slice", ["w:W"], start=28, length=10, axis=-1)], {},
                    {"y": p.deq[:, 28:38]}, EXACT, packed={"W": p}))
    w = rn(R, (5, 6))
    p = pack(w, "f16")
    cases.append(mk("slice_packed_f16_axis0", [node("y", "slice", ["w:W"], start=1, length=2)], {},
                    {"y": p.deq[1:3]}, EXACT, packed={"W": p}))
    return cases


def gen_concat():
    R = rng_for("concat")
    cases = []

    def c(name, a, b, axis=None):
        params = {} if axis is None else {"axis": axis}
        ax = 0 if axis is None else axis
        cases.append(mk(name, [node("y", "concat", ["a", "b"], **params)], {"a": a, "b": b},
                        {"y": np.concatenate([a, b], axis=ax)}, EXACT))

    c("concat_axis0_default", rn(R, (2, 4)), rn(R, (3, 4)))
    c("concat_axis0_explicit_3d", rn(R, (1, 3, 4)), rn(R, (2, 3, 4)), 0)
    c("concat_axis_minus1", rn(R, (3, 2)), rn(R, (3, 5)), -1)
    c("concat_axis_minus1_3d", rn(R, (2, 3, 4)), rn(R, (2, 3, 1)), -1)
    c("concat_axis_last_explicit", rn(R, (2, 3)), rn(R, (2, 2)), 1)
    return cases


def gen_reshape():
    R = rng_for("reshape")
    cases = []
    a = rn(R, (2, 6))
    cases.append(mk("reshape_2d", [node("y", "reshape", ["a"], shape=[3, 4])], {"a": a}, {"y": a.reshape(3, 4)},
                    EXACT))
    b = rn(R, (2, 3, 4))
    cases.append(mk("reshape_minus1", [node("y", "reshape", ["a"], shape=[-1, 4])], {"a": b},
                    {"y": b.reshape(-1, 4)}, EXACT))
    c = rn(R, (12,))
    cases.append(mk("reshape_minus1_middle", [node("y", "reshape", ["a"], shape=[2, -1, 3])], {"a": c},
                    {"y": c.reshape(2, -1, 3)}, EXACT))
    cases.append(mk("reshape_to_vector", [node("y", "reshape", ["a"], shape=[24])], {"a": b},
                    {"y": b.reshape(24)}, EXACT))
    return cases


def gen_transpose():
    R = rng_for("transpose")
    cases = []
    for name, shape in [("transpose_3x5", (3, 5)), ("transpose_1x4", (1, 4)), ("transpose_7x2", (7, 2))]:
        a = rn(R, shape)
        cases.append(mk(name, [node("y", "transpose", ["a"])], {"a": a}, {"y": a.T}, EXACT))
    return cases


def gen_zeros():
    cases = []
    for name, shape in [("zeros_2d", [3, 4]), ("zeros_1d", [5]), ("zeros_3d", [2, 1, 3])]:
        cases.append(mk(name, [node("y", "zeros", [], shape=shape)], {}, {"y": np.zeros(shape, F32)}, EXACT))
    return cases


def gen_causal_mask():
    R = rng_for("causal_mask")
    cases = []
    for name, shape in [("causal_mask_4x4", (4, 4)), ("causal_mask_batch_2x3x3", (2, 3, 3)),
                        ("causal_mask_1x1", (1, 1))]:
        a = rn(R, shape)
        n = shape[-1]
        y = a.copy()
        y[..., np.triu(np.ones((n, n), bool), 1)] = -np.inf
        cases.append(mk(name, [node("y", "causal_mask", ["a"])], {"a": a}, {"y": y}, EXACT))
    return cases


def gen_reduce(op):
    R = rng_for(op)
    cases = []
    if op in ("reduce_sum", "reduce_mean"):
        f = (lambda x: x.sum()) if op == "reduce_sum" else (lambda x: x.mean())
        for name, shape in [(f"{op}_2d", (3, 4)), (f"{op}_3d", (2, 3, 5)), (f"{op}_vector", (7,))]:
            x = rn(R, shape)
            cases.append(unary_case(name, op, x, np.array([f(x.astype(np.float64))]), tl=REDUCE))
        big = np.array([1e8, 1.0, -1e8, 1.0, 0.5], F32)
        cases.append(unary_case(f"{op}_cancellation_double_accumulate", op, big,
                                np.array([f(big.astype(np.float64))]), tl=REDUCE))
        return cases
    # reduce_max / argmax: per row of the last axis
    is_arg = op == "argmax"

    def c(name, x):
        if is_arg:
            y = np.argmax(x, axis=-1).astype(F32)  # numpy returns the first maximal index
        else:
            y = np.max(x, axis=-1)
        y = np.asarray(y).reshape(x.shape[:-1]) if x.ndim > 1 else np.array([y]).reshape(1)
        cases.append(unary_case(name, op, x, y, tl=EXACT))

    c(f"{op}_2d", rn(R, (3, 6)))
    c(f"{op}_3d", rn(R, (2, 2, 5)))
    c(f"{op}_vector", rn(R, (7,)))
    c(f"{op}_ties", np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-1.0, -2.0, -1.0, -3.0]], F32))
    c(f"{op}_with_inf", np.array([[-np.inf, -np.inf, -5.0], [1.0, np.inf, np.inf]], F32))
    return cases
