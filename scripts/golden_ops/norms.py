"""layernorm and rmsnorm."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- norms


def layernorm_ref(x, g, b, eps):
    x = t64(x)
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * t64(g) + t64(b)


def gen_layernorm():
    R = rng_for("layernorm")
    cases = []
    x, g, b = rn(R, (4, 16), 2.0) + F32(0.5), rn(R, (16,), 0.2) + F32(1), rn(R, (16,), 0.2)
    cases.append(mk("layernorm_default_eps", [node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x, "gamma": g, "beta": b}, {"y": layernorm_ref(x, g, b, 1e-5)}, NORM))
    x = rn(R, (3, 16), 1e-3, dec=7)  # tiny variance so eps matters
    cases.append(mk("layernorm_eps_1e-12", [node("y", "layernorm", ["x", "gamma", "beta"], eps=1e-12)],
                    {"x": x, "gamma": g, "beta": b}, {"y": layernorm_ref(x, g, b, 1e-12)}, NORM))
    x3, g8, b8 = rn(R, (2, 3, 8)), rn(R, (8,), 0.2) + F32(1), rn(R, (8,), 0.2)
    cases.append(mk("layernorm_3d", [node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x3, "gamma": g8, "beta": b8}, {"y": layernorm_ref(x3, g8, b8, 1e-5)}, NORM))
    x = rn(R, (3, 8))
    cases.append(mk("layernorm_zeros_beta",
                    [node("beta", "zeros", [], shape=[8]), node("y", "layernorm", ["x", "gamma", "beta"])],
                    {"x": x, "gamma": g8}, {"y": layernorm_ref(x, g8, np.zeros(8, F32), 1e-5)}, NORM))
    return cases


def rmsnorm_ref(x, g, eps=1e-6, offset=0.0, group=None):
    x = t64(x)
    shp = x.shape
    if group:
        x = x.reshape(*shp[:-1], shp[-1] // group, group)
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (t64(g) + offset)
    return y.reshape(shp)


def gen_rmsnorm():
    R = rng_for("rmsnorm")
    cases = []
    x, g = rn(R, (4, 16), 2.0), rn(R, (16,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_default_eps", [node("y", "rmsnorm", ["x", "gamma"])], {"x": x, "gamma": g},
                    {"y": rmsnorm_ref(x, g)}, NORM))
    xs = rn(R, (3, 16), 1e-3, dec=7)
    cases.append(mk("rmsnorm_eps_1e-5_small_x", [node("y", "rmsnorm", ["x", "gamma"], eps=1e-5)],
                    {"x": xs, "gamma": g}, {"y": rmsnorm_ref(xs, g, 1e-5)}, NORM))
    go = rn(R, (16,), 0.3)
    cases.append(mk("rmsnorm_weightOffset_1", [node("y", "rmsnorm", ["x", "gamma"], weightOffset=1, eps=1e-6)],
                    {"x": x, "gamma": go}, {"y": rmsnorm_ref(x, go, 1e-6, 1.0)}, NORM))
    xq, gq = rn(R, (3, 4 * 8), 2.0), rn(R, (8,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_groupSize_headDim", [node("y", "rmsnorm", ["x", "gamma"], groupSize=8)],
                    {"x": xq, "gamma": gq}, {"y": rmsnorm_ref(xq, gq, 1e-6, 0.0, 8)}, NORM))
    gq2 = rn(R, (8,), 0.3)
    cases.append(mk("rmsnorm_groupSize_weightOffset_gemma3",
                    [node("y", "rmsnorm", ["x", "gamma"], groupSize=8, weightOffset=1, eps=1e-6)],
                    {"x": xq, "gamma": gq2}, {"y": rmsnorm_ref(xq, gq2, 1e-6, 1.0, 8)}, NORM))
    x3 = rn(R, (2, 3, 8))
    g8 = rn(R, (8,), 0.2) + F32(1)
    cases.append(mk("rmsnorm_3d", [node("y", "rmsnorm", ["x", "gamma"])], {"x": x3, "gamma": g8},
                    {"y": rmsnorm_ref(x3, g8)}, NORM))
    return cases
