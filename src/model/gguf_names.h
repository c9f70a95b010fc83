// GGUF tensors under the Hugging Face names the IR uses.
//
// llama.cpp's converter (convert_hf_to_gguf.py) renames every tensor and, for
// some architectures, moves rows, shifts values or splits tensors. Each
// family's module (model/family.h: GgufArch) says how its names map back and
// which of those changes to undo (q/k rope permutation, regrouped fused qkv,
// Gemma's 1 + w norms, Mamba's A = -exp(A_log), DeepSeek's split kv_b_proj),
// so a GGUF model and its safetensors original bind the same IR. Stacked
// experts (blk.N.ffn_{gate,up,down}_exps, [E, rows, cols]) become one view
// per expert under the family's per-expert names ("{e}" in its table).
//
// Everything else is a view into the file's mapping. Tensors without an HF
// counterpart (rope_freqs, rope_factors_*, archs no family lists) keep their
// GGUF names, so nothing in the file is lost. Not undone: gpt2's Conv1D
// weights were transposed by the converter and stay [out, in] (nn.Linear's
// layout); transposing a packed tensor would expand it. Gemma3's embedding
// table was cut to the tokenizer's vocabulary.
#pragma once
#include <string>

#include "model/gguf.h"
#include "model/weights.h"

namespace bonfire {

struct GgufLoadOptions {
  // Undo the converter's row moves and value shifts (above). Off: tensors
  // are renamed only, every one a view, in llama.cpp's layout.
  bool hf_layout = true;
  // For a copy that only lowers graphs (the coordinator's; the workers load
  // their own): names, shapes and dtypes as above, but moved rows stay in
  // the file's order, views instead of reordered copies (the 1.1B q8_0
  // bench model's q and k: 110 MB). Those tensors' values are then in the
  // wrong order and must not be computed with.
  bool lowering_only = false;
};

// The HF name for one GGUF tensor name of `arch`. Stacked expert tensors map
// to a pattern holding "{e}" for the expert index. False when the arch or the
// name has no known counterpart.
bool gguf_to_hf_name(const std::string& arch, const std::string& gguf_name, std::string* hf);

// The file's tensors under HF names (see above); the store's tensors keep the
// file's mapping alive. Throws Error naming the file when a tensor the layout
// fix needs is inconsistent with the metadata (e.g. q rows not divisible by
// the head count).
WeightStore load_gguf_weights(const GgufFile& file, const GgufLoadOptions& options = {});

}  // namespace bonfire
