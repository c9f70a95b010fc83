"""Elementwise ops: binary with broadcast, unary maps, softcap, gated pairs, softmax."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- elementwise ops


def gen_binary(op):
    R = rng_for(op)
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
    cases = []

    def c(name, a, b):
        y = f(t64(a), t64(b))
        cases.append(mk(name, [node("y", op, ["a", "b"])], {"a": a, "b": b}, {"y": y}, ELEM))

    c(f"{op}_same_shape", rn(R, (3, 5)), rn(R, (3, 5)))
    c(f"{op}_same_shape_3d", rn(R, (2, 3, 4)), rn(R, (2, 3, 4)))
    c(f"{op}_row_vector", rn(R, (4, 6)), rn(R, (6,)))
    c(f"{op}_row_vector_1xC_3d", rn(R, (2, 3, 5)), rn(R, (1, 5)))
    c(f"{op}_scalar", rn(R, (3, 4)), rn(R, (1,)))
    if op == "add":
        inf, nan = np.inf, np.nan
        a = np.array([[nan, 1.0, inf, -inf], [inf, -inf, 2.0, 0.0]], F32)
        b = np.array([[1.0, nan, 1.0, 1.0], [-inf, -inf, inf, -0.0]], F32)
        c("add_nan_inf", a, b)
    return cases


def gen_scale():
    R = rng_for("scale")
    cases = []
    for name, x, fct in [("scale_basic", rn(R, (3, 5)), 2.5), ("scale_negative_3d", rn(R, (2, 2, 3)), -0.125),
                         ("scale_zero", rn(R, (4,)), 0.0)]:
        cases.append(unary_case(name, "scale", x, t64(x) * fct, factor=fct))
    return cases


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


UNARY = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": lambda x: x * torch.sigmoid(x),
    "tanh": torch.tanh,
    "gelu": gelu_tanh,
    "gelu_exact": gelu_erf,
    "gelu_quick": lambda x: x * torch.sigmoid(1.702 * x),
}


def gen_unary(op):
    R = rng_for(op)
    f = UNARY[op]
    cases = []
    x = rn(R, (4, 8), 2.0)
    cases.append(unary_case(f"{op}_basic", op, x, f(t64(x))))
    ramp = np.array([-30.0, -12.0, -6.0, -3.0, -1.0, -0.5, -0.001, 0.0, 0.001, 0.5, 1.0, 3.0, 6.0, 12.0, 30.0,
                     80.0], F32)
    cases.append(unary_case(f"{op}_range", op, ramp, f(t64(ramp))))
    x3 = rn(R, (2, 3, 4))
    cases.append(unary_case(f"{op}_3d", op, x3, f(t64(x3))))
    if op == "relu":
        a = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, -1.5], F32)
        y = torch.relu(torch.tensor(a)).to(F64)  # NaN stays NaN, as IEEE / torch
        cases.append(unary_case("relu_nan_inf", "relu", a, y))
    return cases


def gen_softcap():
    R = rng_for("softcap")
    cases = []
    x = rn(R, (3, 6), 10.0)
    cases.append(unary_case("softcap_30", "softcap", x, 30.0 * torch.tanh(t64(x) / 30.0), cap=30.0))
    x = np.array([-1000.0, -50.0, -5.0, -1.0, 0.0, 0.5, 5.0, 50.0, 1000.0], F32)
    cases.append(unary_case("softcap_5_large", "softcap", x, 5.0 * torch.tanh(t64(x) / 5.0), cap=5.0))
    return cases


def gen_gated(op):
    R = rng_for(op)
    act = (lambda g: g * torch.sigmoid(g)) if op == "swiglu" else gelu_tanh
    cases = []
    for name, shape in [(f"{op}_2d", (3, 8)), (f"{op}_3d", (2, 2, 5))]:
        g, u = rn(R, shape, 2.0), rn(R, shape)
        cases.append(mk(name, [node("y", op, ["gate", "up"])], {"gate": g, "up": u},
                        {"y": act(t64(g)) * t64(u)}, ELEM))
    return cases


def gen_softmax():
    R = rng_for("softmax")
    cases = []

    def c(name, x):
        cases.append(unary_case(name, "softmax", x, torch.softmax(t64(x), dim=-1), tl=tol(1e-6, 1e-5)))

    c("softmax_basic", rn(R, (3, 7), 2.0))
    c("softmax_large_logits", np.array([[1000.0, 999.0, 998.0, -1000.0, 0.0],
                                         [-1000.0, -1001.0, -999.0, -1000.0, -1000.5],
                                         [1e4, 1e4, -1e4, 0.0, 1e4]], F32))
    c("softmax_3d", rn(R, (2, 3, 4)))
    c("softmax_neg_inf_entries", np.array([[1.0, -np.inf, 2.0, -np.inf], [-np.inf, -np.inf, 0.5, 0.25]], F32))
    c("softmax_vector", rn(R, (9,)))
    return cases
