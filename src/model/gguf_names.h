// GGUF tensors under the Hugging Face names the IR uses.
//
// llama.cpp's converter (convert_hf_to_gguf.py) renames every tensor and, for
// some architectures, moves rows or shifts values. This module maps the names
// back and undoes the row moves and shifts, so a GGUF model and its safetensors
// original bind the same IR:
//
//  - llama, granite (and Mixtral, which GGUF files as llama): q_proj/k_proj
//    rows were permuted for ggml's interleaved rope; the inverse permutation
//    restores the half-split order transformers' rope expects. Block formats
//    pack along a row, so moving whole rows is exact: the store gets a copy of
//    those two tensors (weights and biases) with rows reordered, still packed.
//  - bloom, gptneox: query_key_value rows were regrouped from per-head
//    [q k v] to [Q K V]; falcon's kv groups likewise. Regrouped back, as above.
//  - gemma, gemma2, gemma3: every *norm.weight was stored as 1 + w; the store
//    gets an f32 copy holding w (transformers adds the 1 at run time).
//  - lfm2: the short-conv weight regains its [C, 1, K] shape (a free view).
//  - Stacked experts (blk.N.ffn_{gate,up,down}_exps, [E, rows, cols]) become
//    one view per expert under transformers' per-expert names
//    (model.layers.N.mlp.experts.E.gate_proj.weight; Mixtral's w1/w2/w3).
//
// Everything else is a view into the file's mapping. Tensors without an HF
// counterpart (rope_freqs, rope_factors_*, deepseek2's split attn_k_b/attn_v_b,
// archs not listed) keep their GGUF names, so nothing in the file is lost.
// Not undone: gpt2's Conv1D weights were transposed by the converter and stay
// [out, in] (nn.Linear's layout); transposing a packed tensor would expand it.
// Gemma3's embedding table was cut to the tokenizer's vocabulary.
#pragma once
#include <string>

#include "model/gguf.h"
#include "model/weights.h"

namespace bonfire {

struct GgufLoadOptions {
  // Undo the converter's row moves and value shifts (above). Off: tensors
  // are renamed only, every one a view, in llama.cpp's layout.
  bool hf_layout = true;
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
