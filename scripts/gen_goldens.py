#!/usr/bin/python3
"""Golden values for bonfire's op tests and the Llama-layer test.

Run from anywhere (paths are relative to this file's repository):

    /usr/bin/python3 scripts/gen_goldens.py

Needs numpy and PyTorch (Debian: python3-numpy, python3-torch; written against
torch 1.13). No network. Deterministic: every op draws its data from its own
numpy Generator seeded with crc32(op name), torch is seeded and single-threaded,
so re-running rewrites byte-identical files.

Writes
  goldens/ops/<op>.json        one file per op of spec/ops-v3.json (format: see
                               tests/ops_golden_test.cpp and docs/OPS.md), and one
                               per protocol extension op (docs/PROTOCOL-EXTENSIONS.md,
                               golden_ops/ext_ops.py)
  goldens/layer/llama_layer.json  one Llama decoder layer, prefill + 3 decode steps
  goldens/rng.json             Philox4x64-10 first outputs, to check the C++ RNG

Semantics follow docs/OPS.md. Inputs are f32 values written with the shortest
decimal that reads back as the same f32; expected values are computed in float64
(torch) from those f32 inputs and written the same way. Packed weights are
quantized here in numpy (GGUF block layout) and the expected values are computed
from the DEQUANTIZED weights, so a golden tests the packed read, not the
quantization error.

RoPE frequencies follow Hugging Face transformers' src/transformers/modeling_rope_utils.py,
v5 line (__version__ "5.0.1.dev0"), read as mirrored in
github.com/zucchini-nlp/transformers @ 26892c16b782513fdf938920653228ef63a19d7d
(_compute_default/linear/dynamic_ntk/yarn/longrope/llama3_parameters and
dynamic_rope_update), cross-checked against huggingface/transformers @ ef46806
(4.4x) for default/linear/dynamic/llama3. Where HF reads config.max_position_embeddings
the op reads scaling["max_position_embeddings"]. inv_freq and the angles are
computed in float32 exactly as transformers does; cos/sin and the rotation in float64.
"""


import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from golden_ops.common import *  # noqa: E402,F401,F403
from golden_ops.elementwise import *  # noqa: E402,F401,F403
from golden_ops.norms import *  # noqa: E402,F401,F403
from golden_ops.matmul import *  # noqa: E402,F401,F403
from golden_ops.shape import *  # noqa: E402,F401,F403
from golden_ops.state import *  # noqa: E402,F401,F403
from golden_ops.rope import *  # noqa: E402,F401,F403
from golden_ops.attention import *  # noqa: E402,F401,F403
from golden_ops.moe import *  # noqa: E402,F401,F403
from golden_ops.sample import *  # noqa: E402,F401,F403
from golden_ops.layer import *  # noqa: E402,F401,F403
from golden_ops.ext_ops import EXT_GENS  # noqa: E402

# ---------------------------------------------------------------- self-checks of the quantizers


def self_checks():
    # q8_0 by hand: one block
    blk = np.array([0.5, -1.27, 0.01, 1.0] + [0.0] * 28, F32)
    p = pack(blk[None, :], "q8_0")
    raw = np.frombuffer(p.raw, np.uint8)
    d = np.frombuffer(raw[:2].tobytes(), "<f2")[0]
    q = np.frombuffer(raw[2:].tobytes(), np.int8)
    assert abs(float(d) - 0.01) < 1e-5  # amax 1.27 / 127
    assert list(q[:4]) == [50, -127, 1, 100], list(q[:4])
    assert np.allclose(p.deq[0, :4], np.float32(d) * np.array([50, -127, 1, 100], F32))
    # q4_0 by hand: largest |v| is -1.6 (negative) -> d = 0.2, q = trunc(x/d + 8.5)
    blk = np.array([-1.6, 0.8, 0.1, 1.59] + [0.0] * 12 + [0.4, -0.2] + [0.0] * 14, F32)
    p = pack(blk[None, :], "q4_0")
    raw = np.frombuffer(p.raw, np.uint8)
    d = float(np.frombuffer(raw[:2].tobytes(), "<f2")[0])
    assert abs(d - 0.2) < 1e-4, d
    # element 0: -1.6/0.2 = -8 -> 0; 1: 4 -> 12; 2: 0.5 -> 9 (trunc 9.0); 3: 7.95 -> 15 (min); 16: 2 -> 10; 17: -1 -> 7
    assert raw[2] == (0 | (10 << 4)) and raw[3] == (12 | (7 << 4)), (raw[2], raw[3])
    assert raw[4] & 15 == 9 and raw[5] & 15 == 15
    # bf16 agrees with torch's round-to-nearest-even conversion
    a = rn(rng_for("bf16check"), (1000,), 3.0, dec=7)
    assert np.array_equal(pack(a, "bf16").deq, torch.tensor(a).to(torch.bfloat16).float().numpy())
    # Philox: numpy's generator, first raw output, counter incremented before the first block. A plain
    # Philox4x64-10 (Salmon et al. 2011) on counter [step + 1, row, 0, 0], key [seed, 0], word 0, agrees:
    M = (1 << 64) - 1

    def philox4x64_10(ctr, key):
        c, k = list(ctr), list(key)
        for _ in range(10):
            p0, p1 = 0xD2E7470EE14C6C93 * c[0], 0xCA5A826395121157 * c[2]
            c = [(p1 >> 64) ^ c[1] ^ k[0], p1 & M, (p0 >> 64) ^ c[3] ^ k[1], p0 & M]
            k = [(k[0] + 0x9E3779B97F4A7C15) & M, (k[1] + 0xBB67AE8584CAA73B) & M]
        return c

    for s, st, r in [(0, 0, 0), (5, 9, 2), (2 ** 40 + 3, 2 ** 64 - 1, 1)]:
        ctr = [(st + 1) & M, (r + ((st + 1) >> 64)) & M, 0, 0]
        assert philox4x64_10(ctr, [s, 0])[0] == philox_raw(s, st, r)
    # f16 pack is numpy's round-to-nearest-even
    assert np.frombuffer(pack(np.array([1.0 / 3], F32), "f16").raw, "<f2")[0] == np.float16(1.0 / 3)


# ---------------------------------------------------------------- main


def write_json(path, obj, cases_key=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sep = (",", ":")
    if cases_key:
        head = {k: v for k, v in obj.items() if k != cases_key}
        s = json.dumps(head, separators=sep, allow_nan=False)[:-1]
        body = ",\n".join(json.dumps(c, separators=sep, allow_nan=False) for c in obj[cases_key])
        text = f'{s},"{cases_key}":[\n{body}\n]}}\n'
    else:
        text = json.dumps(obj, separators=sep, allow_nan=False) + "\n"
    json.loads(text)
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def main():
    self_checks()
    gens = {
        "add": lambda: gen_binary("add"), "sub": lambda: gen_binary("sub"), "mul": lambda: gen_binary("mul"),
        "scale": gen_scale, "softcap": gen_softcap, "softmax": gen_softmax,
        "swiglu": lambda: gen_gated("swiglu"), "geglu": lambda: gen_gated("geglu"),
        "layernorm": gen_layernorm, "rmsnorm": gen_rmsnorm,
        "matmul": lambda: gen_matmul_linear("matmul"), "linear": lambda: gen_matmul_linear("linear"),
        "embedding": gen_embedding, "slice": gen_slice, "concat": gen_concat, "reshape": gen_reshape,
        "transpose": gen_transpose, "zeros": gen_zeros, "causal_mask": gen_causal_mask,
        "cache_write": gen_cache_write, "conv1d": gen_conv1d, "short_conv": gen_short_conv,
        "rope": gen_rope, "attention": gen_attention, "moe": gen_moe, "sample": gen_sample,
    }
    for op in UNARY:
        gens[op] = (lambda o: (lambda: gen_unary(o)))(op)
    for op in ("reduce_sum", "reduce_mean", "reduce_max", "argmax"):
        gens[op] = (lambda o: (lambda: gen_reduce(o)))(op)
    assert set(gens) == set(OPS), (set(OPS) - set(gens), set(gens) - set(OPS))
    assert set(EXT_GENS) == set(EXT_OPS) and not set(EXT_OPS) & set(OPS)
    gens.update(EXT_GENS)
    total = 0
    sizes = {}
    for op in sorted(gens):
        cases = gens[op]()
        names = [c["name"] for c in cases]
        assert len(names) == len(set(names)), op
        for c in cases:
            for g in [c["graph"]] + [t["graph"] for t in c.get("then", [])]:
                assert all(n["op"] in OPS or n["op"] in EXT_OPS for n in g["nodes"])
        sizes[op] = write_json(os.path.join(ROOT, "goldens", "ops", f"{op}.json"), {"op": op, "cases": cases},
                               "cases")
        total += sizes[op]
        print(f"{op:12s} {len(cases):3d} cases {sizes[op]:8d} bytes")
    n = write_json(os.path.join(ROOT, "goldens", "layer", "llama_layer.json"), llama_layer_golden())
    print(f"{'llama_layer':12s}           {n:8d} bytes")
    total += n
    n = write_json(os.path.join(ROOT, "goldens", "rng.json"), gen_rng())
    total += n
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()

