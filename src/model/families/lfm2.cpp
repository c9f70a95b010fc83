// LFM2 (Liquid AI): gated short-convolution layers and attention layers
// (per-head q/k RMSNorm) in one stack, a SwiGLU feed-forward after each, and
// the final norm named embedding_norm. The two kinds of layer need the IR
// extension layer_apply (docs/IR.md §17).
#include "core/error.h"
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/families/hybrid_keys.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

void read_config(const json& j, ModelConfig& c) {
  const std::string& s = c.source;
  c.conv_kernel = get_int(j, {"conv_L_cache"}, 3, s);
  c.norm_eps = get_num(j, {"norm_eps"}, 1e-5, s);
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings", "tie_embedding"}, true);
  if (c.layer_types.empty()) {
    const auto full = id_list(find_key(j, {"full_attn_idxs"}));
    for (int64_t i = 0; i < c.n_layers; ++i)
      c.layer_types.push_back(std::count(full.begin(), full.end(), i) ? "full_attention" : "conv");
  }
  // LFM2 sizes its feed-forward from block_ff_dim with auto-adjustment.
  int64_t ff = get_int(j, {"block_ff_dim", "intermediate_size"}, c.intermediate_size, s);
  if (get_bool(j, {"block_auto_adjust_ff_dim"}, false)) {
    ff = 2 * ff / 3;
    const double mult = get_num(j, {"block_ffn_dim_multiplier"}, 1.0, s);
    ff = (int64_t)(mult * ff);
    const int64_t m = get_int(j, {"block_multiple_of"}, 256, s);
    ff = m * ((ff + m - 1) / m);
  }
  c.intermediate_size = ff;
  c.qk_norm = true;
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  c.conv_kernel = k.integer("shortconv.l_cache", 0);
  c.qk_norm = true;
  layer_types_from_kv_heads(k, c, "conv");
}

// The short-conv weight regains its [C, 1, K] shape (a free view).
void fix_tensor(const GgufTensorFix& in, std::string&, Tensor& t) {
  if (in.options.hf_layout && in.rest == "shortconv.conv.weight") gguf_fix::unsqueeze_conv(t);
}

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.layer_types.size() != size_t(c.n_layers))
    throw Error(ErrorCode::BadGraph, c.source + ": LFM2 needs one layer type per layer (layer_types or full_attn_idxs), got " +
                                         std::to_string(c.layer_types.size()) + " for " + std::to_string(c.n_layers) + " layers");
  if (c.conv_kernel < 2)
    throw Error(ErrorCode::BadGraph, c.source + ": LFM2's conv_L_cache must be at least 2, got " + std::to_string(c.conv_kernel));
  for (const auto& t : c.layer_types) s.conv_layer.push_back(t == "conv");
  s.conv_kernel = c.conv_kernel;
  s.attn_norm = "operator_norm";
  s.ffn_norm = "ffn_norm";
  s.o = "self_attn.out_proj";
  s.q_norm = "self_attn.q_layernorm", s.k_norm = "self_attn.k_layernorm";
  s.gate = "feed_forward.w1", s.up = "feed_forward.w3", s.down = "feed_forward.w2";
  s.final_norm = "model.embedding_norm";
  return build_decoder_ir(s, c);
}

}  // namespace

void register_lfm2_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"lfm2"};
  f.gguf = {{"lfm2", "lfm2",
             {"model.layers.",
              {{"token_embd", "model.embed_tokens"}, {"token_embd_norm", "model.embedding_norm"}, {"output", "lm_head"}},
              {{"attn_norm", "operator_norm"},
               {"ffn_norm", "ffn_norm"},
               {"attn_q", "self_attn.q_proj"},
               {"attn_k", "self_attn.k_proj"},
               {"attn_v", "self_attn.v_proj"},
               {"attn_output", "self_attn.out_proj"},
               {"attn_q_norm", "self_attn.q_layernorm"},
               {"attn_k_norm", "self_attn.k_layernorm"},
               {"shortconv.conv", "conv.conv"},
               {"shortconv.in_proj", "conv.in_proj"},
               {"shortconv.out_proj", "conv.out_proj"},
               {"ffn_gate", "feed_forward.w1"},
               {"ffn_up", "feed_forward.w3"},
               {"ffn_down", "feed_forward.w2"}}},
             fix_tensor}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
