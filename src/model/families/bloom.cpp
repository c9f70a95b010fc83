// BLOOM: ALiBi instead of rope, a LayerNorm right after the embedding,
// per-head fused query_key_value with biases (regrouped by the converter),
// tanh GELU, tied output. Checkpoints saved from BloomModel lack
// BloomForCausalLM's "transformer." prefix; the loader adds it as an alias.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_epsilon"}, 1e-5, c.source);
  c.hidden_act = "gelu_new";  // BloomGelu is the tanh approximation
  c.alibi = true;
  c.partial_rotary_factor = 0;
  c.intermediate_size = 4 * c.hidden_size;
  c.attention_bias = c.mlp_bias = true;
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) {
  c.alibi = true;
  c.partial_rotary_factor = 0;
  c.hidden_act = "gelu_new";
}

void add_prefix(const ModelConfig& c, bool, bool, WeightStore& store) {
  for (const std::string& name : store.names())
    if (name.rfind("transformer.", 0) != 0 && name.rfind("lm_head", 0) != 0 && !store.find("transformer." + name))
      store.put("transformer." + name, *store.find(name), c.source + " (as transformer." + name + ")");
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.embed = "transformer.word_embeddings.weight";
  s.embed_norm = "transformer.word_embeddings_layernorm";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  s.fused = {"self_attention.query_key_value.weight", "self_attention.query_key_value.bias", s.heads,
             {s.head_dim, s.head_dim, s.head_dim}};
  s.o = "self_attention.dense";
  s.o_bias = true;
  s.n_rot = 0;
  s.alibi = true;
  s.mlp = "gelu";
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = true;
  s.final_norm = "transformer.ln_f";
  s.tied = true;
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_bloom_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"bloom"};
  f.gguf = {{"bloom", "bloom",
             {"h.",
              {{"token_embd", "word_embeddings"},
               {"token_embd_norm", "word_embeddings_layernorm"},
               {"output_norm", "ln_f"},
               {"output", "lm_head"}},
              {{"attn_norm", "input_layernorm"},
               {"attn_qkv", "self_attention.query_key_value"},
               {"attn_output", "self_attention.dense"},
               {"ffn_norm", "post_attention_layernorm"},
               {"ffn_up", "mlp.dense_h_to_4h"},
               {"ffn_down", "mlp.dense_4h_to_h"}}},
             gguf_fix::ungroup_qkv}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.adapt_weights = add_prefix;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
