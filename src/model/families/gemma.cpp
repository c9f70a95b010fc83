// Gemma 1/2/3: embeddings scaled by sqrt(d), RMSNorm weights stored as
// offsets from 1 (GGUF stores 1 + w), GeGLU; Gemma 2 adds sandwich norms,
// attention and final logit softcaps and alternating sliding windows;
// Gemma 3 per-head q/k norms and a separate rope base for its local layers.
#include <cmath>

#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using namespace cfg;

// Gemma 2 alternates sliding and global layers; Gemma 3 has every
// `pattern`-th layer global.
void sliding_layers(ModelConfig& c, int64_t pattern) {
  for (int64_t i = 0; i < c.n_layers; ++i)
    c.layer_types.push_back((i + 1) % pattern == 0 ? "full_attention" : "sliding_attention");
}

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm_weight_offset = true;
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
  c.hidden_act = get_str(j, {"hidden_activation", "hidden_act"}, "gelu_pytorch_tanh");
  if (c.family == "gemma") return;
  c.attn_logit_softcap = get_num(j, {"attn_logit_softcapping"}, 0, c.source);
  c.final_logit_softcap = get_num(j, {"final_logit_softcapping"}, 0, c.source);
  c.query_pre_attn_scalar = get_num(j, {"query_pre_attn_scalar"}, 0, c.source);
  if (c.family == "gemma3_text") {
    c.qk_norm = true;
    c.rope_local_theta = get_num(j, {"rope_local_base_freq"}, 10000, c.source);
  }
  if (c.layer_types.empty())
    sliding_layers(c, c.family == "gemma2" ? 2 : get_int(j, {"sliding_window_pattern"}, 6, c.source));
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  c.norm_weight_offset = true;
  c.hidden_act = "gelu_pytorch_tanh";
  c.qk_norm = c.family == "gemma3_text";
  // Sliding layers as llama.cpp (and transformers' defaults) lay them out;
  // Gemma 3's local layers rotate with base 10000.
  if (c.family != "gemma" && c.sliding_window > 0)
    sliding_layers(c, c.family == "gemma2" ? 2 : k.integer("attention.sliding_window_pattern", 6));
  if (c.family == "gemma3_text") c.rope_local_theta = 10000;
}

// The converter stored every *norm.weight as 1 + w; the store gets an f32
// copy holding w (transformers adds the 1 at run time).
void unshift_norms(const GgufTensorFix& in, std::string&, Tensor& t) {
  if (!in.options.hf_layout || !in.gguf_name.ends_with("norm.weight")) return;
  t = to_f32(t);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] -= 1.0f;
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.embed_scale = std::sqrt(double(c.hidden_size));
  s.norm_offset = 1;
  s.mlp = "geglu";  // transformers runs Gemma with the tanh GELU whatever hidden_act says
  s.tied = true;
  if (c.family != "gemma") {
    s.post_attn_norm = "post_attention_layernorm";
    s.ffn_norm = "pre_feedforward_layernorm";
    s.post_ffn_norm = "post_feedforward_layernorm";
    s.softcap = c.attn_logit_softcap;
    s.final_softcap = c.final_logit_softcap;
    if (c.query_pre_attn_scalar > 0) s.scale = 1 / std::sqrt(c.query_pre_attn_scalar);
  }
  if (c.family == "gemma3_text") {
    s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
    // Local layers rotate with their own base and without the config's
    // rope_scaling, which transformers applies to the global layers only.
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (c.layer_types[l] == "sliding_attention") {
        s.theta[l] = c.rope_local_theta;
        if (!s.freq_scale.empty()) s.freq_scale[l] = 1;
      }
  }
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_gemma_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"gemma", "gemma2", "gemma3_text"};
  // Gemma 2 and 3 norm around both sublayers; "post_attention_layernorm"
  // is the attention output's norm there, not the FFN input's.
  const GgufRenames sandwich = {
      {"attn_norm", "input_layernorm"},          {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},            {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},       {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},       {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_norm", "pre_feedforward_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},             {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  f.gguf = {{"gemma", "gemma", {"model.layers.", gguf_fix::decoder_global(), gguf_fix::decoder_block()}, unshift_norms},
            {"gemma2", "gemma2", {"model.layers.", gguf_fix::decoder_global(), sandwich}, unshift_norms},
            {"gemma3", "gemma3_text", {"model.layers.", gguf_fix::decoder_global(), sandwich}, unshift_norms}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
