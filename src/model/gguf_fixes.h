// The pieces family modules (model/family.h) use to take a GGUF file's
// tensors back to Hugging Face's names and layout: the rename sets most
// architectures share, and the undoing of what llama.cpp's converter
// (convert_hf_to_gguf.py) did to rows and values. Block formats pack along a
// row, so moving whole rows is exact: a fixed tensor is a packed copy with
// its rows reordered. Errors name the file and the tensor.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.h"
#include "model/family.h"
#include "model/gguf.h"

namespace bonfire::gguf_fix {

// transformers' decoder layout (model.layers.N.self_attn.q_proj, ...).
const GgufRenames& decoder_block();
const GgufRenames& decoder_global();  // token_embd, output_norm, output
const GgufRenames& moe_experts();     // ffn_gate_inp and ffn_*_exps as mlp.gate, mlp.experts.{e}.*
GgufRenames join(std::initializer_list<GgufRenames> parts);

[[noreturn]] void fail(const GgufFile& f, const std::string& what);

// A positive count from metadata: a number, or a per-layer array's entry.
// Missing: `fallback` when positive, else an Error.
int64_t layer_count(const GgufFile& f, const std::string& key, int64_t layer, int64_t fallback);

// A packed copy of t (the tensor `in` names) whose unit r (a row; an
// element of a 1-D tensor) is the source's unit src_of(r); t itself, the
// same shape, for a store that only lowers graphs (in.options.lowering_only).
Tensor reorder_rows(const GgufTensorFix& in, const Tensor& t, const std::function<int64_t(int64_t)>& src_of);

// LlamaModel.permute moved q/k rows from HF's half-split rope pairs to
// ggml's interleaved ones; this moves them back (llama, granite). A
// GgufArch::fix_tensor.
void unpermute_rope(const GgufTensorFix& in, std::string& hf, Tensor& t);

// Bloom and GPT-NeoX store q, k, v per head ([h][q|k|v][hd]); the converter
// regrouped them to [q|k|v][h][hd]. A GgufArch::fix_tensor.
void ungroup_qkv(const GgufTensorFix& in, std::string& hf, Tensor& t);

// Mamba's layers (Jamba, Mamba-2): the conv weight the converter squeezed
// to [C, K] regains [C, 1, K]; A = -exp(A_log) goes back to A_log (one
// document then reads a folder and its GGUF alike).
void unsqueeze_conv(Tensor& t);
Tensor a_log_of(const GgufFile& f, const std::string& name, const Tensor& a);

}  // namespace bonfire::gguf_fix
