#!/usr/bin/env python3
"""Write a small random model both as a Hugging Face folder and as GGUF files.

    write_test_model.py --family llama --out DIR [--tokenizer FOLDER]
        [--layers 2 --hidden 64 --heads 4 --kv-heads 2 --vocab N --seed 0
         --dtype bf16 --gguf f32,f16,q8_0,q4_0 --sliding-window N]

DIR/hf/ gets config.json (as transformers serializes the family's config
class), model.safetensors (HF tensor names and shapes), generation_config.json
and tokenizer.json + tokenizer_config.json (copied from FOLDER, or a small
synthetic tokenizer). DIR/model-<type>.gguf gets what llama.cpp's
convert_hf_to_gguf.py would write for that folder (f32, f16, bf16, q8_0), and
for q4_0 what llama_model_quantize makes of the f32 file.

--sliding-window N sets config.json's sliding_window (plus use_sliding_window
and max_window_layers where the config has them); the GGUF gets
<arch>.attention.sliding_window only where convert_hf_to_gguf.py writes it
(gemma2, gemma3, phi3): the converter writes none for mistral, mixtral and the
qwen families, and llama.cpp's llama/qwen2/qwen3 loaders read none.

The weights are rounded to --dtype first, so the f32 GGUF holds exactly the
safetensors values. Needs only numpy.

    write_test_model.py --from-hf FOLDER --out DIR [--family llama] [--gguf f32,q8_0,q4_0]

writes GGUF copies of an existing HF folder (e.g. the bundled models/demo)
instead of a random model, so the same converter rules can be checked on real
weights: config.json, tokenizer.json/tokenizer_config.json and the
model.safetensors tensors (or the shards model.safetensors.index.json names)
come from FOLDER; the family defaults to config.json's model_type. Only
DIR/model-<type>.gguf is written (FOLDER is not copied), and the options that
shape a random model (--layers, --hidden, --vocab, --seed, --dtype, ...) are
ignored. Like the converter, the GGUF also gets general.name from the folder
name (gguf-py's fallback when there is no model card name) and the
general.sampling.* keys from generation_config.json. The f32 file holds the
folder's values exactly (f16/bf16 widen losslessly).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from modelwriter.families import FAMILIES, FILE_TYPE_PLACEHOLDER, Dims, Family, Weights, merge_kvs  # noqa: E402
from modelwriter.formats import (LLAMA_FTYPE, GGUFFile, GGUFTensor, encode_tensor, kv_f32, kv_i32,  # noqa: E402
                                 kv_str, kv_u32, read_safetensors, write_gguf, write_safetensors)
from modelwriter.tensor_types import convert_type, quantize_types  # noqa: E402
from modelwriter import tokenizers as tk  # noqa: E402

TRANSFORMERS_VERSION = "4.55.4"
TORCH_DTYPE = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
ST_DTYPE = {"bf16": "BF16", "f16": "F16", "f32": "F32"}
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")


def size_label(tensors: list[tuple[str, np.ndarray]]) -> str:
    """gguf-py's size_label(): total parameters, or <experts>x<per-expert size> for MoE."""
    total = shared = expert = expert_sum = n_expert_tensors = 0
    for name, arr in tensors:
        n = int(arr.size)
        total += n
        if "_exps." in name and arr.ndim >= 3:
            count = arr.shape[-2 if ".bias" in name else 0]
            expert += n // count
            expert_sum += count
            n_expert_tensors += 1
        else:
            shared += n
    expert_count = expert_sum // n_expert_tensors if n_expert_tensors else 0
    count = shared + expert if expert_count else total

    if count > 1e12:
        scaled, suffix = count * 1e-12, "T"
    elif count > 1e9:
        scaled, suffix = count * 1e-9, "B"
    elif count > 1e6:
        scaled, suffix = count * 1e-6, "M"
    else:
        scaled, suffix = count * 1e-3, "K"
    fix = max(2 - len(str(round(scaled)).lstrip("0")), 0)
    label = f"{scaled:.{fix}f}{suffix}"
    return f"{expert_count}x{label}" if expert_count else label


def build_tokenizer(family: Family, folder: str | None) -> tuple[dict, dict, tk.TokenizerInfo]:
    if folder:
        tok, cfg = tk.read_tokenizer_folder(Path(folder))
    elif family.tokenizer_kind in ("spm", "spm-llama"):
        tok, cfg = tk.synthetic_spm_bpe(style="gemma" if family.tokenizer_kind == "spm" else "llama",
                                        chat_tokens=family.chat_tokens, eos_token=family.eos_token)
    else:
        tok, cfg = tk.synthetic_byte_bpe(tokenizer_class=family.tokenizer_class)
    return tok, cfg, tk.load_tokenizer(tok, cfg)


def gguf_kvs(family: Family, cfg: dict, name: str, tensors: list[tuple[str, np.ndarray]],
             info: tk.TokenizerInfo, pre: str | None, sampling: list | None = None) -> list:
    """`sampling`: general.sampling.* keys, which gguf-py writes just before general.name."""
    arch = family.gguf_arch
    kvs = [kv_str("general.architecture", arch), kv_str("general.type", "model"), *(sampling or []),
           kv_str("general.name", name), kv_str("general.size_label", size_label(tensors)),
           kv_u32("general.alignment", 32)]
    params = family.gguf_params(cfg)
    if not family.writes_file_type:
        params = [kv for kv in params if kv is not FILE_TYPE_PLACEHOLDER]
    kvs += params
    kvs.append(kv_u32("general.quantization_version", 2))
    extras = family.vocab_extras(cfg)
    space_prefix = extras.get("add_space_prefix")
    if info.kind == "spm" and space_prefix is None and not tk.spm_prepends_space(info.tokenizer):
        space_prefix = False
    kvs += tk.gguf_vocab(info, cfg["vocab_size"], cfg, pre=pre, add_space_prefix_key=space_prefix)
    return merge_kvs(kvs)


def with_file_type(kvs: list, out_type: str, append_if_missing: bool) -> list:
    out, seen = [], False
    for kv in kvs:
        if kv.key == "general.file_type":
            kv = kv_u32("general.file_type", LLAMA_FTYPE[out_type])
            seen = True
        out.append(kv)
    if not seen and append_if_missing:
        out.append(kv_u32("general.file_type", LLAMA_FTYPE[out_type]))
    return out


def write_ggufs(out_dir: Path, family: Family, kvs: list, tensors: list[tuple[str, np.ndarray]],
                types: list[str]) -> list[Path]:
    written = []
    q4 = quantize_types([(n, a.shape) for n, a in tensors], family.gguf_arch, "q4_0") if "q4_0" in types else {}
    for out_type in types:
        if out_type == "q4_0":
            # llama_model_quantize copies the f32 file's keys and sets general.file_type
            file_kvs = with_file_type(kvs, "q4_0", append_if_missing=True)
            ggml_types = q4
        else:
            file_kvs = with_file_type(kvs, out_type, append_if_missing=False)
            ggml_types = {n: convert_type(n, a.shape, out_type) for n, a in tensors}
        gguf = GGUFFile(kvs=[kv for kv in file_kvs if kv.value != -1])
        for name, arr in tensors:
            gguf.tensors.append(GGUFTensor(name, tuple(arr.shape), ggml_types[name], encode_tensor(arr, ggml_types[name])))
        path = out_dir / f"model-{out_type}.gguf"
        write_gguf(path, gguf)
        written.append(path)
    return written


# --------------------------------------------------------------------------
# --from-hf: GGUF copies of an existing Hugging Face folder
# --------------------------------------------------------------------------

# (generation_config.json key, general.sampling.<key>, typed KV maker), in the
# order gguf-py's Metadata.set_gguf_meta_model writes them
SAMPLING_KEYS = [("sequence", "sequence", kv_str), ("top_k", "top_k", kv_i32), ("top_p", "top_p", kv_f32),
                 ("min_p", "min_p", kv_f32), ("xtc_probability", "xtc_probability", kv_f32),
                 ("xtc_threshold", "xtc_threshold", kv_f32), ("temperature", "temp", kv_f32),
                 ("penalty_last_n", "penalty_last_n", kv_i32), ("repetition_penalty", "penalty_repeat", kv_f32),
                 ("mirostat", "mirostat", kv_i32), ("mirostat_tau", "mirostat_tau", kv_f32),
                 ("mirostat_eta", "mirostat_eta", kv_f32)]


def sampling_kvs(gen: dict) -> list:
    """general.sampling.* from generation_config.json, as gguf-py's Metadata.load reads it."""
    gen = dict(gen)
    if "penalty_repeat" in gen:          # gguf-py prefers penalty_repeat over repetition_penalty
        gen["repetition_penalty"] = gen["penalty_repeat"]
    return [make(f"general.sampling.{key}", gen[src]) for src, key, make in SAMPLING_KEYS
            if gen.get(src) is not None]


def folder_title(folder: Path) -> str:
    """gguf-py's Metadata.id_to_title of the folder name: the converter's general.name when
    neither a model card nor config.json names the model (plain names only: gguf-py also
    strips size/version/finetune parts such as "-8B-Instruct" first)."""
    return " ".join(w.title() if w.islower() and not re.match(r"^(v\d+(?:\.\d+)*|\d.*)$", w) else w
                    for w in folder.resolve().name.strip().replace("-", " ").split())


def read_hf_weights(folder: Path) -> dict[str, np.ndarray]:
    """All tensors of the folder as float32, in the converter's order: the parts
    (model.safetensors, or the shards the index names) sorted by file name, and
    each part's tensors sorted by name."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        parts = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    else:
        parts = ["model.safetensors"]
    tensors: dict[str, np.ndarray] = {}
    for part in parts:
        loaded, _ = read_safetensors(folder / part)
        tensors.update(sorted(loaded.items()))
    return tensors


def check_hf_tensors(family: Family, cfg: dict, tensors: dict[str, np.ndarray]) -> list[str]:
    """Names/shapes the family expects for this config (what hf_tensors registers) vs the folder's."""
    expected = Weights(0, "F32", 0.0)
    family.hf_tensors(cfg, expected)
    problems = [f"{n}: missing" for n in expected.tensors if n not in tensors]
    problems += [f"{n}: not a {family.model_type} tensor" for n in tensors if n not in expected.tensors]
    problems += [f"{n}: shape {tensors[n].shape}, expected {a.shape}" for n, a in expected.tensors.items()
                 if n in tensors and tensors[n].shape != a.shape]
    return problems


def write_from_hf(folder: Path, out: Path, family: Family, types: list[str], pre: str | None,
                  trim: bool) -> list[Path]:
    """OUT/model-<type>.gguf from FOLDER's config, tokenizer and weights."""
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    gen_path = folder / "generation_config.json"
    gen = json.loads(gen_path.read_text(encoding="utf-8")) if gen_path.is_file() else {}
    tok, _, info = build_tokenizer(family, str(folder))
    if cfg["vocab_size"] < info.size:
        raise ValueError(f"vocab_size {cfg['vocab_size']} is smaller than the tokenizer ({info.size} ids)")
    weights = read_hf_weights(folder)
    problems = check_hf_tensors(family, cfg, weights)
    if problems:
        raise ValueError(f"{folder}: tensors do not match the {family.model_type} layout: " + "; ".join(problems[:5]))
    tensors = family.gguf_tensors(cfg, weights)
    if trim:
        tensors = trim_embedding(tensors, tok)
    kvs = gguf_kvs(family, cfg, folder_title(folder), tensors, info, pre, sampling_kvs(gen))
    out.mkdir(parents=True, exist_ok=True)
    return write_ggufs(out, family, kvs, tensors, types)


def trim_embedding(tensors: list[tuple[str, np.ndarray]], tok: dict) -> list[tuple[str, np.ndarray]]:
    """token_embd.weight cut to tokenizer.json's vocab plus added tokens (Gemma3Model in the converter)."""
    n_real = len(tok["model"]["vocab"]) + len(tok.get("added_tokens", []))
    return [(n, a[:n_real] if n == "token_embd.weight" else a) for n, a in tensors]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=sorted(FAMILIES),
                    help="config.json model_type (required unless --from-hf, where it defaults to the folder's)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--from-hf", type=Path, metavar="FOLDER",
                    help="write GGUF copies of this HF folder's model instead of a random one")
    ap.add_argument("--tokenizer", help="folder with tokenizer.json (+ tokenizer_config.json) to embed")
    ap.add_argument("--pre", help="override tokenizer.ggml.pre for byte-level BPE tokenizers")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, help="default: hidden/heads (2*hidden/heads for qwen3*, gemma3_text)")
    ap.add_argument("--intermediate", type=int, help="MLP width (default 2*hidden)")
    ap.add_argument("--experts", type=int, default=4)
    ap.add_argument("--experts-used", type=int, default=2)
    ap.add_argument("--moe-intermediate", type=int, help="expert MLP width (default hidden)")
    ap.add_argument("--vocab", type=int, help="vocab_size (default: tokenizer size rounded up to --vocab-multiple)")
    ap.add_argument("--vocab-multiple", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02, help="standard deviation of the random weights")
    ap.add_argument("--dtype", choices=sorted(ST_DTYPE), default="bf16", help="safetensors dtype")
    ap.add_argument("--sliding-window", type=int, metavar="N",
                    help="sliding attention window of N tokens, for families whose config has one (mistral, mixtral, "
                         "qwen2, qwen2_moe, qwen3, qwen3_moe, gemma2, gemma3_text, phi3); default: the family's own")
    ap.add_argument("--longrope", type=int, metavar="N",
                    help="phi3 only: LongRoPE rope_scaling (long/short factors) with original context N; the GGUF "
                         "gets the converter's layout: rope_factors_{long,short}.weight and rope.scaling.attn_factor, "
                         "no rope.scaling.type")
    ap.add_argument("--ctx", type=int, metavar="N",
                    help="config.json's max_position_embeddings (the model's context), for families that have it")
    ap.add_argument("--mla", metavar="R,P,N,V",
                    help="deepseek_v3 only: kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim (default "
                         "32,16,32,32; DeepSeek-V3's own are 512,64,128,128)")
    ap.add_argument("--trim-embedding", action="store_true",
                    help="gemma3_text only: cut token_embd.weight to the tokenizer's real size (tokenizer.json's vocab "
                         "plus added tokens) as convert_hf_to_gguf.py's Gemma3Model does, while the token list stays "
                         "padded to vocab_size (a file llama.cpp refuses and bonfire reads)")
    ap.add_argument("--gguf", default="f32,f16,q8_0,q4_0", help=f"comma list of {', '.join(GGUF_TYPES)}; '' for none")
    args = ap.parse_args(argv)

    types = [t for t in args.gguf.split(",") if t]
    for t in types:
        if t not in GGUF_TYPES:
            ap.error(f"unknown GGUF type {t}")
    if args.from_hf is not None:
        return main_from_hf(ap, args, types)
    if args.family is None:
        ap.error("--family is required (unless --from-hf)")
    family = FAMILIES[args.family]

    tok, tok_cfg, info = build_tokenizer(family, args.tokenizer)
    if args.vocab is not None:
        vocab = args.vocab
    else:
        m = args.vocab_multiple
        vocab = (info.size + m - 1) // m * m
    if vocab < info.size:
        ap.error(f"--vocab {vocab} is smaller than the tokenizer ({info.size} ids)")
    ids = info.special_ids
    dims = Dims(hidden=args.hidden, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                head_dim=args.head_dim, intermediate=args.intermediate, vocab=vocab, experts=args.experts,
                experts_used=args.experts_used, moe_intermediate=args.moe_intermediate,
                bos_id=ids.get("bos", ids.get("eos", 0)), eos_id=ids.get("eos", 0), pad_id=ids.get("pad"))

    cfg = family.config(dims)
    if args.sliding_window is not None:
        if args.sliding_window < 1:
            ap.error("--sliding-window must be positive")
        try:
            cfg = family.set_sliding_window(cfg, args.sliding_window)
        except ValueError as e:
            ap.error(str(e))
    if args.ctx is not None:
        if "max_position_embeddings" not in cfg or args.ctx < 1:
            ap.error(f"--ctx: {args.family}'s config has no max_position_embeddings (or N < 1)")
        cfg["max_position_embeddings"] = args.ctx
    if args.mla is not None:
        if args.family != "deepseek_v3":
            ap.error("--mla is for --family deepseek_v3")
        try:
            R, P, N, V = (int(x) for x in args.mla.split(","))
        except ValueError:
            ap.error(f"--mla takes four integers R,P,N,V, got {args.mla!r}")
        if min(R, P, N, V) < 1 or P % 2:
            ap.error("--mla sizes must be positive and the rope part P even")
        cfg.update(kv_lora_rank=R, qk_rope_head_dim=P, qk_nope_head_dim=N, v_head_dim=V, head_dim=P, qk_head_dim=N + P)
    if args.longrope is not None:
        if not hasattr(family, "set_longrope") or args.longrope < 2:
            ap.error("--longrope N (N >= 2) is for phi3")
        cfg = family.set_longrope(cfg, args.longrope)
    cfg["torch_dtype"] = TORCH_DTYPE[args.dtype]
    cfg["transformers_version"] = TRANSFORMERS_VERSION
    cfg = dict(sorted(cfg.items()))
    weights = Weights(args.seed, ST_DTYPE[args.dtype], args.std)
    family.hf_tensors(cfg, weights)

    hf_dir = args.out / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    (hf_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    gen = {"_from_model_config": True, "bos_token_id": cfg.get("bos_token_id"), "eos_token_id": cfg.get("eos_token_id"),
           "transformers_version": TRANSFORMERS_VERSION}
    if cfg.get("pad_token_id") is not None:
        gen["pad_token_id"] = cfg["pad_token_id"]
    (hf_dir / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.tokenizer:
        src = Path(args.tokenizer)
        (hf_dir / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
        if (src / "tokenizer_config.json").is_file():
            (hf_dir / "tokenizer_config.json").write_bytes((src / "tokenizer_config.json").read_bytes())
    else:
        (hf_dir / "tokenizer.json").write_text(json.dumps(tok, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (hf_dir / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2, ensure_ascii=False) + "\n",
                                                      encoding="utf-8")
    write_safetensors(hf_dir / "model.safetensors", weights.tensors, ST_DTYPE[args.dtype])

    written = [hf_dir]
    if types:
        tensors = family.gguf_tensors(cfg, weights.tensors)
        if args.trim_embedding:
            if family.model_type != "gemma3_text":
                ap.error("--trim-embedding is what the converter does for gemma3_text only")
            tensors = trim_embedding(tensors, tok)
        kvs = gguf_kvs(family, cfg, f"bonfire-test-{family.model_type}", tensors, info, args.pre)
        written += write_ggufs(args.out, family, kvs, tensors, types)
    for p in written:
        print(p)
    return 0


def main_from_hf(ap: argparse.ArgumentParser, args: argparse.Namespace, types: list[str]) -> int:
    folder = args.from_hf
    if not (folder / "config.json").is_file():
        ap.error(f"--from-hf {folder}: no config.json")
    model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    name = args.family or model_type
    if name not in FAMILIES:
        ap.error(f"--from-hf {folder}: model_type {model_type!r} is not one of the writer's families")
    if args.family and model_type != args.family:
        ap.error(f"--family {args.family} but {folder}/config.json has model_type {model_type!r}")
    if args.tokenizer:
        ap.error("--tokenizer does not go with --from-hf (the folder's tokenizer is used)")
    if args.trim_embedding and name != "gemma3_text":
        ap.error("--trim-embedding is what the converter does for gemma3_text only")
    try:
        written = write_from_hf(folder, args.out, FAMILIES[name], types, args.pre, args.trim_embedding)
    except (ValueError, KeyError) as e:
        print(f"write_test_model: {e}", file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
