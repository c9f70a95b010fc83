#!/usr/bin/env python3
"""Absorbed MLA (issue 19) against llama.cpp on a DeepSeek-V3-shaped model.

    /usr/bin/python3 scripts/bench_mla.py [--model-dir /tmp/benchmla] [--far 4000]
        [--near 64] [--decode 32] [--threads 2] [--reps 2]

Writes (once, into --model-dir) a random model with DeepSeek-V3's attention
sizes (kv_lora_rank 512, qk_rope 64, qk_nope 128, v_head_dim 128; 16 heads,
4 layers, width 1024, 8 experts of which 2 are used; f32 GGUF in the
converter's layout, scripts/write_test_model.py --mla), then in one run:

  * KV bytes per token: bonfire's from the graph its prefill lowers to (the
    kv slots' session tensors, allocated for the whole context, over the
    context length), llama.cpp's from its own KV cache log line (K and V in
    f32 there too);
  * the decode step time at position --near and at position --far:
    `bonfire bench generate --prefill P --decode D` for both P, each with
    llama.cpp measured in the same process (llama.cpp's defaults: F16 KV,
    flash attention auto), and the ratio step(far) / step(near) for each.

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = "/usr/bin/python3"


def run_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def bonfire_kv_bytes_per_token(bonfire: Path, gguf: Path, ctx: int) -> tuple[float, int]:
    doc = subprocess.run([str(bonfire), "ir", "from-hf", str(gguf)], check=True, capture_output=True, text=True).stdout
    kinds = {s["name"]: s["kind"] for s in json.loads(doc)["block"].get("state", [])}
    graph = json.loads(subprocess.run([str(bonfire), "ir", "lower", "-", "--mode", "prefill", "--ctx", str(ctx),
                                       "--model", str(gguf)], input=doc, check=True, capture_output=True,
                                      text=True).stdout)
    total, layers = 0, set()
    for n in graph["nodes"]:  # a prefill allocates each session tensor as "L<l>.<slot>.<tensor>.alloc"
        m = re.fullmatch(r"L(\d+)\.(\w+)\.(\w+)\.alloc", n["id"])
        if n["op"] == "zeros" and m and kinds.get(m.group(2)) == "kv":
            count = 1
            for d in n["params"]["shape"]:
                count *= d
            total += count * 4  # f32
            layers.add(m.group(1))
    return total / ctx, len(layers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/benchmla"))
    ap.add_argument("--near", type=int, default=64)
    ap.add_argument("--far", type=int, default=4000)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--bonfire", type=Path, default=ROOT / "build" / "bonfire")
    args = ap.parse_args()

    gguf = args.model_dir / "model-f32.gguf"
    if not gguf.exists():
        subprocess.run([PY, "scripts/write_test_model.py", "--family", "deepseek_v3", "--out", str(args.model_dir),
                        "--layers", "4", "--hidden", "1024", "--heads", "16", "--kv-heads", "16", "--intermediate",
                        "2048", "--experts", "8", "--experts-used", "2", "--moe-intermediate", "512", "--mla",
                        "512,64,128,128", "--dtype", "f32", "--gguf", "f32"], check=True, cwd=ROOT)

    ctx = args.far + args.decode
    ours, layers = bonfire_kv_bytes_per_token(args.bonfire, gguf, ctx)
    ref = run_json([PY, "scripts/bench_llama_cpp.py", "--model", str(gguf), "--prefill", "8", "--decode", "1",
                    "--reps", "1", "--kv-type", "f32", "--threads", str(args.threads)])["kv_cache"]

    steps = {}
    for p in (args.near, args.far):
        r = run_json([str(args.bonfire), "bench", "generate", "--model", str(gguf), "--prefill", str(p), "--decode",
                      str(args.decode), "--reps", str(args.reps), "--threads", str(args.threads), "--json"])
        steps[p] = {"bonfire_ms": 1000 / r["bonfire"]["decode_tps"], "llama_cpp_ms": 1000 / r["llama_cpp"]["decode_tps"],
                    "llama_cpp_flash_attn": r["llama_cpp"].get("flash_attn"), "llama_cpp_kv": r["llama_cpp"].get("kv_type")}
    near, far = steps[args.near], steps[args.far]
    ratio_b = far["bonfire_ms"] / near["bonfire_ms"]
    ratio_l = far["llama_cpp_ms"] / near["llama_cpp_ms"]

    print(f"KV bytes per token ({layers} layers, f32): bonfire {ours:.1f}, llama.cpp {ref['bytes_per_token']:.1f} "
          f"(K {ref['k_mib']} MiB, V {ref['v_mib']} MiB over {ref['cells']} cells)")
    print(f"{'decode step':<24}{'bonfire ms':>12}{'llama.cpp ms':>14}")
    for p in (args.near, args.far):
        print(f"{'at position ' + str(p):<24}{steps[p]['bonfire_ms']:>12.2f}{steps[p]['llama_cpp_ms']:>14.2f}")
    print(f"{'far / near':<24}{ratio_b:>12.2f}{ratio_l:>14.2f}   (bonfire's ratio / llama.cpp's: {ratio_b / ratio_l:.2f})")
    print(json.dumps({"kv_bytes_per_token": {"bonfire": ours, "llama_cpp": ref["bytes_per_token"]}, "steps": steps,
                      "far_over_near": {"bonfire": ratio_b, "llama_cpp": ratio_l}, "near": args.near, "far": args.far,
                      "threads": args.threads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
