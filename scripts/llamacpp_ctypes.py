"""ctypes bindings for llama.cpp's prebuilt libllama (node-llama-cpp 3.21.1,
installed under refs/llama by scripts/fetch_llama_cpp.sh).

The struct layouts follow include/llama.h of the same release
(refs/llama/llama.cpp). Shared by check_test_models.py,
gen_generate_goldens.py and bench_llama_cpp.py.

    from llamacpp_ctypes import Llama, find_libdir
    ll = Llama(find_libdir())
"""

from __future__ import annotations

import ctypes as C
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_LLAMA_CPP = "node-llama-cpp@3.21.1"

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
LLAMA_FLASH_ATTN_TYPE_AUTO, LLAMA_FLASH_ATTN_TYPE_DISABLED, LLAMA_FLASH_ATTN_TYPE_ENABLED = -1, 0, 1
LLAMA_TOKEN_ATTR_UNKNOWN, LLAMA_TOKEN_ATTR_UNUSED, LLAMA_TOKEN_ATTR_NORMAL = 1 << 0, 1 << 1, 1 << 2
LLAMA_TOKEN_ATTR_CONTROL, LLAMA_TOKEN_ATTR_USER_DEFINED, LLAMA_TOKEN_ATTR_BYTE = 1 << 3, 1 << 4, 1 << 5
LLAMA_TOKEN_NULL = -1


def find_libdir(bases: tuple[Path, ...] = (ROOT / "refs/llama", ROOT / "refs/writer")) -> Path | None:
    """The folder holding libllama*.so, or None."""
    for base in bases:
        d = base / "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
        if list(d.glob("libllama*.so")):
            return d
    return None


def describe_build(libdir: Path) -> str:
    """'llama.cpp <release> (source <commit>)' as far as the install tells."""
    release = "?"
    meta = libdir / "_nlcBuildMetadata.json"
    if meta.is_file():
        try:
            release = json.loads(meta.read_text())["buildOptions"]["llamaCpp"]["release"]
        except (KeyError, ValueError):
            pass
    commit = ""
    head = ROOT / "refs/llama/llama.cpp/.git/HEAD"
    if head.is_file():
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            f = head.parent / ref[5:]
            ref = f.read_text().strip() if f.is_file() else ""
        commit = ref[:12]
    return f"llama.cpp release {release}" + (f", source bundle commit {commit}" if commit else "")


# --------------------------------------------------------------------------
# structs (llama.h of the same release)
# --------------------------------------------------------------------------

class ModelParams(C.Structure):
    _fields_ = [("devices", C.c_void_p), ("tensor_buft_overrides", C.c_void_p), ("n_gpu_layers", C.c_int32),
                ("split_mode", C.c_int), ("load_mode", C.c_int), ("lazy_mode", C.c_int), ("main_gpu", C.c_int32),
                ("tensor_split", C.c_void_p), ("progress_callback", C.c_void_p),
                ("progress_callback_user_data", C.c_void_p), ("kv_overrides", C.c_void_p),
                ("vocab_only", C.c_bool), ("check_tensors", C.c_bool), ("use_extra_bufts", C.c_bool),
                ("no_host", C.c_bool), ("no_alloc", C.c_bool), ("load_mtp", C.c_bool)]


class ContextParams(C.Structure):
    _fields_ = [("n_ctx", C.c_uint32), ("n_batch", C.c_uint32), ("n_ubatch", C.c_uint32),
                ("n_seq_max", C.c_uint32), ("n_rs_seq", C.c_uint32), ("n_outputs_max", C.c_uint32),
                ("n_outputs_max_per_seq", C.c_uint32), ("n_threads", C.c_int32), ("n_threads_batch", C.c_int32),
                ("ctx_type", C.c_int), ("rope_scaling_type", C.c_int), ("pooling_type", C.c_int),
                ("attention_type", C.c_int), ("flash_attn_type", C.c_int),
                ("rope_freq_base", C.c_float), ("rope_freq_scale", C.c_float), ("yarn_ext_factor", C.c_float),
                ("yarn_attn_factor", C.c_float), ("yarn_beta_fast", C.c_float), ("yarn_beta_slow", C.c_float),
                ("yarn_orig_ctx", C.c_uint32), ("defrag_thold", C.c_float),
                ("cb_eval", C.c_void_p), ("cb_eval_user_data", C.c_void_p), ("type_k", C.c_int),
                ("type_v", C.c_int), ("abort_callback", C.c_void_p), ("abort_callback_data", C.c_void_p),
                ("embeddings", C.c_bool), ("offload_kqv", C.c_bool), ("no_perf", C.c_bool),
                ("op_offload", C.c_bool), ("swa_full", C.c_bool), ("kv_unified", C.c_bool),
                ("samplers", C.c_void_p), ("n_samplers", C.c_size_t), ("ctx_other", C.c_void_p)]


class Batch(C.Structure):
    _fields_ = [("n_tokens", C.c_int32), ("token", C.POINTER(C.c_int32)), ("embd", C.POINTER(C.c_float)),
                ("pos", C.POINTER(C.c_int32)), ("n_seq_id", C.POINTER(C.c_int32)),
                ("seq_id", C.POINTER(C.POINTER(C.c_int32))), ("logits", C.POINTER(C.c_int8))]


class QuantizeParams(C.Structure):
    _fields_ = [("nthread", C.c_int32), ("ftype", C.c_int), ("output_tensor_type", C.c_int),
                ("token_embedding_type", C.c_int), ("allow_requantize", C.c_bool),
                ("quantize_output_tensor", C.c_bool), ("only_copy", C.c_bool), ("pure", C.c_bool),
                ("keep_split", C.c_bool), ("dry_run", C.c_bool), ("imatrix", C.c_void_p),
                ("kv_overrides", C.c_void_p), ("tt_overrides", C.c_void_p), ("prune_layers", C.c_void_p),
                ("max_buf_size", C.c_size_t)]


LOG_CB = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)


class Llama:
    def __init__(self, libdir: Path):
        C.CDLL(str(libdir / "libggml-base.so"), mode=C.RTLD_GLOBAL)
        ggml = C.CDLL(str(next(libdir.glob("libggml.*so"))), mode=C.RTLD_GLOBAL)
        self.lib = lib = C.CDLL(str(next(libdir.glob("libllama.*so"))), mode=C.RTLD_GLOBAL)
        self.log: list[str] = []
        self._cb = LOG_CB(lambda level, text, ud: self.log.append(text.decode("utf-8", "replace")))
        lib.llama_log_set(self._cb, None)
        ggml.ggml_backend_load_all_from_path.argtypes = [C.c_char_p]
        ggml.ggml_backend_load_all_from_path(str(libdir).encode())
        lib.llama_backend_init()
        lib.llama_model_default_params.restype = ModelParams
        lib.llama_context_default_params.restype = ContextParams
        lib.llama_model_quantize_default_params.restype = QuantizeParams
        lib.llama_model_load_from_file.argtypes = [C.c_char_p, ModelParams]
        lib.llama_model_load_from_file.restype = C.c_void_p
        lib.llama_model_get_vocab.argtypes = [C.c_void_p]
        lib.llama_model_get_vocab.restype = C.c_void_p
        lib.llama_vocab_n_tokens.argtypes = [C.c_void_p]
        lib.llama_init_from_model.argtypes = [C.c_void_p, ContextParams]
        lib.llama_init_from_model.restype = C.c_void_p
        lib.llama_tokenize.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_int32), C.c_int32,
                                       C.c_bool, C.c_bool]
        lib.llama_batch_get_one.argtypes = [C.POINTER(C.c_int32), C.c_int32]
        lib.llama_batch_get_one.restype = Batch
        lib.llama_decode.argtypes = [C.c_void_p, Batch]
        lib.llama_get_logits_ith.argtypes = [C.c_void_p, C.c_int32]
        lib.llama_get_logits_ith.restype = C.POINTER(C.c_float)
        lib.llama_free.argtypes = [C.c_void_p]
        lib.llama_model_free.argtypes = [C.c_void_p]
        lib.llama_model_quantize.argtypes = [C.c_char_p, C.c_char_p, C.POINTER(QuantizeParams)]
        lib.llama_model_quantize.restype = C.c_uint32
        for fn in ("bos", "eos", "eot", "pad", "sep", "nl", "cls"):
            f = getattr(lib, f"llama_vocab_{fn}")
            f.argtypes, f.restype = [C.c_void_p], C.c_int32
        lib.llama_vocab_get_attr.argtypes = [C.c_void_p, C.c_int32]
        lib.llama_vocab_get_attr.restype = C.c_int
        lib.llama_vocab_is_control.argtypes = [C.c_void_p, C.c_int32]
        lib.llama_vocab_is_control.restype = C.c_bool
        lib.llama_vocab_is_eog.argtypes = [C.c_void_p, C.c_int32]
        lib.llama_vocab_is_eog.restype = C.c_bool
        lib.llama_model_n_swa.argtypes = [C.c_void_p]
        lib.llama_model_n_swa.restype = C.c_int32
        lib.llama_model_desc.argtypes = [C.c_void_p, C.c_char_p, C.c_size_t]
        lib.llama_model_n_params.argtypes = [C.c_void_p]
        lib.llama_model_n_params.restype = C.c_uint64
        lib.llama_model_size.argtypes = [C.c_void_p]
        lib.llama_model_size.restype = C.c_uint64
        lib.llama_get_memory.argtypes = [C.c_void_p]
        lib.llama_get_memory.restype = C.c_void_p
        lib.llama_memory_clear.argtypes = [C.c_void_p, C.c_bool]
        lib.llama_synchronize.argtypes = [C.c_void_p]
        lib.llama_print_system_info.restype = C.c_char_p
        lib.llama_batch_init.argtypes = [C.c_int32, C.c_int32, C.c_int32]
        lib.llama_batch_init.restype = Batch
        lib.llama_batch_free.argtypes = [Batch]

    def tokenize(self, vocab, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """parse_special=True: special-token text becomes the special token, as HF tokenizers do."""
        raw = text.encode("utf-8")
        buf = (C.c_int32 * (len(raw) + 8))()
        n = self.lib.llama_tokenize(vocab, raw, len(raw), buf, len(buf), add_special, parse_special)
        if n < 0:
            raise RuntimeError(f"llama_tokenize needs {-n} slots")
        return list(buf[:n])

    def model_desc(self, model) -> str:
        buf = C.create_string_buffer(256)
        self.lib.llama_model_desc(model, buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def system_info(self) -> str:
        return self.lib.llama_print_system_info().decode("utf-8", "replace")

    def quantize(self, src: Path, dst: Path, ftype: int, nthread: int = 1, allow_requantize: bool = False) -> int:
        """llama_model_quantize; allow_requantize also converts quantized tensors (ftype 0: all to F32)."""
        p = self.lib.llama_model_quantize_default_params()
        p.ftype = ftype
        p.nthread = nthread
        p.allow_requantize = allow_requantize
        return self.lib.llama_model_quantize(str(src).encode(), str(dst).encode(), C.byref(p))


def last_error(log: list[str]) -> str:
    lines = [l.strip() for l in "".join(log).splitlines() if l.strip()]
    bad = [l for l in lines if any(w in l.lower() for w in ("error", "failed", "wrong", "missing", "invalid"))]
    return " | ".join((bad or lines)[-3:])


