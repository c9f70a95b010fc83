// OLMo 2: the sublayers read the residual stream unnormed and their outputs
// are normed instead (post_attention_layernorm, post_feedforward_layernorm);
// q_norm and k_norm are RMSNorms over the whole projection, before rope.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace families;

void read_config(const json&, ModelConfig& c) {
  c.qk_norm = true;  // q_norm and k_norm over the whole projection
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.qk_norm = true; }

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.attn_norm = "";
  s.ffn_norm = "";
  s.post_attn_norm = "post_attention_layernorm";
  s.post_ffn_norm = "post_feedforward_layernorm";
  s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
  s.qk_norm_per_head = false;
  return build_decoder_ir(s, c);
}

}  // namespace

void register_olmo2_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"olmo2"};
  f.gguf = {{"olmo2", "olmo2",
             // OLMo 2 norms the sublayers' outputs only: its post_attention_layernorm
             // is the attention output's norm (GGUF post_attention_norm).
             {"model.layers.",
              gguf_fix::decoder_global(),
              {{"attn_q", "self_attn.q_proj"},
               {"attn_k", "self_attn.k_proj"},
               {"attn_v", "self_attn.v_proj"},
               {"attn_output", "self_attn.o_proj"},
               {"attn_q_norm", "self_attn.q_norm"},
               {"attn_k_norm", "self_attn.k_norm"},
               {"post_attention_norm", "post_attention_layernorm"},
               {"post_ffw_norm", "post_feedforward_layernorm"},
               {"ffn_gate", "mlp.gate_proj"},
               {"ffn_up", "mlp.up_proj"},
               {"ffn_down", "mlp.down_proj"}}}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
