"""sample and the Philox RNG check file."""
from .common import *  # noqa: F401,F403


# ---------------------------------------------------------------- sample


def philox_raw(seed, step, row):
    g = np.random.Philox(key=np.array([seed, 0], dtype=np.uint64),
                         counter=np.array([step, row, 0, 0], dtype=np.uint64))
    return int(g.random_raw())


def philox_u(seed, step, row):
    return (philox_raw(seed, step, row) >> 11) * 2.0 ** -53


def sample_ref(logits, history=None, temperature=0.0, topK=0, topP=1.0, seed=0, step=0, repetitionPenalty=1.0,
               presencePenalty=0.0, penaltyWindow=None, penaltyEnd=None, margin=1e-5):
    L = np.asarray(logits, np.float64)
    V = L.shape[-1]
    rows = L.reshape(-1, V)
    ids = []
    if history is not None:
        h = np.asarray(history, np.float64).reshape(-1)
        Nh = len(h)
        end = Nh if penaltyEnd is None else penaltyEnd
        win = Nh if penaltyWindow is None else penaltyWindow
        seen = set()
        for v in h[max(0, end - win):end]:
            if 0 <= v < V:
                seen.add(int(v))
        ids = sorted(seen)
    out = []
    info = []
    for r, row in enumerate(rows):
        l = row.copy()
        for i in ids:
            l[i] = l[i] / repetitionPenalty if l[i] > 0 else l[i] * repetitionPenalty
            l[i] -= presencePenalty
        if temperature == 0:
            out.append(int(np.argmax(l)))
            continue
        order = sorted(range(V), key=lambda i: (-l[i], i))
        if topK > 0:
            if topK < V:
                assert l[order[topK - 1]] - l[order[topK]] > margin, "topK boundary near-tie"
            order = order[:topK]
        z = np.array([l[i] for i in order]) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        cum = np.cumsum(p)
        n = len(order)
        if topP < 1.0:
            n = int(np.argmax(cum >= topP)) + 1 if (cum >= topP).any() else len(order)
            assert np.min(np.abs(cum - topP)) > margin, "topP boundary too close"
        kept = cum[n - 1]
        u = philox_u(seed, step, r)
        thr = u * kept
        assert np.min(np.abs(cum[:n] - thr)) > margin, "draw too close to a boundary"
        j = int(np.argmax(cum[:n] > thr))
        out.append(order[j])
        info.append((n, u))
    return np.array(out, F32), info


def gen_sample():
    R = rng_for("sample")
    cases = []
    V = 32

    def c(name, logits, history=None, bind=None, ref_over=None, tl=EXACT, **p):
        rp = dict(p)
        if ref_over:
            rp.update(ref_over)
        y, info = sample_ref(logits, history, **rp)
        if logits.ndim == 1:
            y = y.reshape(1)
        ins = ["logits"] + (["history"] if history is not None else [])
        inputs = {"logits": logits}
        if history is not None:
            inputs["history"] = history
        cases.append(mk(name, [node("y", "sample", ins, **p)], inputs, {"y": y}, tl, bind=bind))
        return y, info

    c("sample_greedy_default", rn(R, (V,), 2.0))
    tie = rn(R, (3, V), 1.0)
    tie[0, 5] = tie[0, 17] = F32(9.0)
    tie[1, :] = F32(0.25)
    tie[2, 30] = tie[2, 31] = F32(7.5)
    y, _ = c("sample_greedy_ties_rows", tie, temperature=0, topK=5, topP=0.5, seed=3)
    assert list(y) == [5, 0, 30]
    c("sample_temperature_seed0_step0", rn(R, (1, V), 2.0), temperature=1.0, seed=0, step=0)
    c("sample_temperature_0.7_seed42", rn(R, (V,), 2.0), temperature=0.7, seed=42, step=3)
    c("sample_topK", rn(R, (V,), 2.0), temperature=1.0, topK=5, seed=7, step=11)
    c("sample_topP", rn(R, (V,), 2.0), temperature=0.8, topP=0.9, seed=9, step=1)
    c("sample_topK_topP", rn(R, (V,), 2.0), temperature=1.2, topK=8, topP=0.6, seed=11, step=5)
    y, info = c("sample_rows_3", rn(R, (3, V), 1.0), temperature=1.5, seed=123, step=9)
    c("sample_large_seed", rn(R, (2, V), 1.0), temperature=1.0, seed=2 ** 40 + 3, step=1000000)
    c("sample_flat_logits_ties_sorted_by_index", np.zeros((2, 8), F32), temperature=1.0, seed=5, step=2)
    c("sample_high_temperature", rn(R, (V,), 2.0), temperature=5.0, seed=77, step=0)

    # penalties
    lg = rn(R, (V,), 1.0)
    lg[4], lg[9], lg[2] = F32(5.0), F32(4.8), F32(-2.0)
    hist = np.array([4, 2, 4, -1, 40], F32)
    y, _ = c("sample_penalty_repetition_greedy", lg, hist, temperature=0, repetitionPenalty=1.3)
    assert y[0] == 9 and np.argmax(lg) == 4
    lg2 = rn(R, (2, V), 1.5)
    hist2 = np.array([[1], [7], [3], [7], [-1], [12]], F32)
    c("sample_penalty_presence_history_Nx1", lg2, hist2, temperature=0.9, presencePenalty=2.0, seed=21, step=4)
    lg3 = rn(R, (V,), 1.0)
    lg3[6], lg3[8], lg3[10] = F32(6.0), F32(5.9), F32(5.8)
    hist3 = np.array([6, 8, -1, 10, 31, 99, 6], F32)
    # window = rows [2, 5) = {-1, 10, 31}: ids 10 and 31 penalised, 6 and 8 are outside the window
    y, _ = c("sample_penalty_window_end", lg3, hist3, temperature=0, repetitionPenalty=1.5, presencePenalty=0.5,
             penaltyWindow=3, penaltyEnd=5)
    assert y[0] == 6
    lg4 = rn(R, (V,), 1.0)
    lg4[3], lg4[12] = F32(3.0), F32(2.9)
    hist4 = np.array([3, 12, 3, -1, -1, -1, -1, -1], F32)
    # bind pos = 0 -> end 1: only id 3 counts
    y, _ = c("sample_penalty_end_bind_expr", lg4, hist4, bind={"pos": 0}, ref_over={"penaltyEnd": 1},
             temperature=0, repetitionPenalty=2.0, penaltyEnd="pos + 1")
    assert y[0] == 12
    lg5 = rn(R, (3, V), 1.0)
    hist5 = np.array([0, 5, 5, 17, -3, 2], F32)
    c("sample_penalty_all_sampled", lg5, hist5, temperature=0.8, topK=10, topP=0.95, seed=2 ** 33 + 1, step=7,
      repetitionPenalty=1.1, presencePenalty=0.3, penaltyWindow=4)
    return cases


def gen_rng():
    triples = [(0, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0), (7, 3, 2), (42, 7, 2), (123456789, 1000, 0),
               (2 ** 33 + 1, 7, 2), (2 ** 40 + 3, 0, 0), (2 ** 40 + 3, 1000000, 1), (2 ** 32 - 1, 2 ** 32 + 5, 3)]
    out = []
    for s, st, r in triples:
        raw = philox_raw(s, st, r)
        out.append({"seed": s, "step": st, "row": r, "raw": str(raw), "u": (raw >> 11) * 2.0 ** -53})
    return out
