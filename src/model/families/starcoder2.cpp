// StarCoder2: LayerNorms with biases, biased q/k/v/o projections, a GELU
// (tanh) MLP c_fc → c_proj with biases, rope, tied embeddings by default.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

void read_config(const json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"norm_epsilon", "layer_norm_epsilon"}, 1e-5, c.source);
  c.attention_bias = c.mlp_bias = get_bool(j, {"use_bias"}, true);
  c.hidden_act = get_str(j, {"hidden_act"}, "gelu_pytorch_tanh");  // transformers' default
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.hidden_act = "gelu_pytorch_tanh"; }

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.norm = "layernorm";
  s.qkv_bias = s.o_bias = c.attention_bias;
  s.mlp = families::plain_mlp(c, c.hidden_act, "hidden_act");
  s.up = "mlp.c_fc";
  s.down = "mlp.c_proj";
  s.mlp_bias = c.mlp_bias;
  return build_decoder_ir(s, c);
}

}  // namespace

void register_starcoder2_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"starcoder2"};
  f.gguf = {{"starcoder2", "starcoder2",
             {"model.layers.",
              gguf_fix::decoder_global(),
              {{"attn_norm", "input_layernorm"},
               {"attn_q", "self_attn.q_proj"},
               {"attn_k", "self_attn.k_proj"},
               {"attn_v", "self_attn.v_proj"},
               {"attn_output", "self_attn.o_proj"},
               {"ffn_norm", "post_attention_layernorm"},
               {"ffn_up", "mlp.c_fc"},
               {"ffn_down", "mlp.c_proj"}}}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
