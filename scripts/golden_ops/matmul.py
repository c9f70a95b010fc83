"""matmul, linear and embedding, with packed weights."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- matmul / linear / embedding


def mm_ref(a, b, transB=False, bias=None):
    B = t64(b)
    if transB:
        B = B.T
    y = t64(a) @ B
    if bias is not None:
        y = y + t64(bias)
    return y


def gen_matmul_linear(op):
    R = rng_for(op)
    cases = []
    lin = op == "linear"

    def c(name, a, b, transB=False, packed_dtype=None, as_weight=False):
        params = {"transB": True} if transB else {}
        bias = rn(R, (b.shape[0] if transB else b.shape[1],)) if lin else None
        ins = ["a", "w:B" if (packed_dtype or as_weight) else "b"] + (["bias"] if lin else [])
        inputs = {"a": a}
        if lin:
            inputs["bias"] = bias
        packed, weights = None, None
        if packed_dtype:
            p = pack(b, packed_dtype)
            packed = {"B": p}
            b = p.deq
        elif as_weight:
            weights = {"B": b}
        else:
            inputs["b"] = b
        cases.append(mk(name, [node("y", op, ins, **params)], inputs, {"y": mm_ref(a, b, transB, bias)}, MATMUL,
                        weights=weights, packed=packed))

    c(f"{op}_plain", rn(R, (3, 8)), rn(R, (8, 5)))
    c(f"{op}_transB", rn(R, (3, 8)), rn(R, (5, 8)), transB=True)
    c(f"{op}_3d_activations", rn(R, (2, 3, 8)), rn(R, (8, 4)))
    c(f"{op}_3d_activations_transB", rn(R, (2, 3, 8)), rn(R, (4, 8)), transB=True)
    c(f"{op}_inline_weight_transB", rn(R, (2, 8)), rn(R, (6, 8)), transB=True, as_weight=True)
    for dt in ["f16", "bf16", "q8_0", "q4_0"]:
        c(f"{op}_packed_{dt}_transB", rn(R, (3, 64)), rn(R, (5, 64)), transB=True, packed_dtype=dt)
    c(f"{op}_packed_q4_0_transB_3d", rn(R, (2, 3, 64)), rn(R, (4, 64)), transB=True, packed_dtype="q4_0")
    c(f"{op}_packed_q8_0_notransB", rn(R, (3, 16)), rn(R, (16, 32)), packed_dtype="q8_0")
    if not lin:
        c("matmul_packed_f16_notransB", rn(R, (2, 8)), rn(R, (8, 6)), packed_dtype="f16")
    return cases


def emb_ref(ids, table):
    V, C = table.shape
    out = np.zeros((len(ids), C), F32)
    for i, v in enumerate(ids):
        if np.isnan(v):
            continue
        r = int(np.rint(v))
        if 0 <= r < V:
            out[i] = table[r]
    return out


def gen_embedding():
    R = rng_for("embedding")
    cases = []
    table = rn(R, (10, 8))
    ids = np.array([3, 0, 9, -1, 10, 3], F32)
    cases.append(mk("embedding_f32_out_of_range", [node("y", "embedding", ["ids", "table"])],
                    {"ids": ids, "table": table}, {"y": emb_ref(ids, table)}, EXACT))
    ids2 = np.array([np.nan, 2, 1000000, -5], F32)
    cases.append(mk("embedding_f32_nan_and_far_ids", [node("y", "embedding", ["ids", "table"])],
                    {"ids": ids2, "table": table}, {"y": emb_ref(ids2, table)}, EXACT))
    cases.append(mk("embedding_f32_weight", [node("y", "embedding", ["ids", "w:table"])],
                    {"ids": ids}, {"y": emb_ref(ids, table)}, EXACT, weights={"table": table}))
    for dt in ["f16", "bf16", "q8_0", "q4_0"]:
        tbl = rn(R, (12, 64))
        p = pack(tbl, dt)
        ids = np.array([0, 11, 5, -1, 12, 7, 5], F32)
        cases.append(mk(f"embedding_packed_{dt}", [node("y", "embedding", ["ids", "w:table"])], {"ids": ids},
                        {"y": emb_ref(ids, p.deq)}, EXACT, packed={"table": p}))
    return cases
