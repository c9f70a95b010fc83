// MPT: ALiBi (alibi_bias_max 8 gives BLOOM's slopes), fused Wqkv ([q; k; v]),
// bias-free LayerNorms (the loader supplies zero biases), exact GELU, tied
// output.
#include "core/error.h"
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_epsilon"}, 1e-5, c.source);
  c.hidden_act = "gelu_exact";
  c.intermediate_size = get_int(j, {"expansion_ratio"}, 4, c.source) * c.hidden_size;
  const nlohmann::json attn = j.value("attn_config", nlohmann::json::object());
  c.alibi = get_bool(attn, {"alibi"}, true);
  c.alibi_max = get_num(attn, {"alibi_bias_max"}, 8, c.source);
  c.partial_rotary_factor = 0;
  c.attention_bias = c.mlp_bias = !get_bool(j, {"no_bias"}, true);
  c.tie_word_embeddings = true;
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) {
  c.alibi = true;
  c.partial_rotary_factor = 0;
  c.hidden_act = "gelu_exact";
}

void zero_biases(const ModelConfig&, bool, bool, WeightStore& store) {
  add_zero_norm_biases(store, {"norm_1.weight", "norm_2.weight", "norm_f.weight"});
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  if (c.alibi && c.alibi_max != 8)
    throw Error(ErrorCode::BadGraph, c.source + ": MPT with alibi_bias_max " + std::to_string(c.alibi_max) +
                                         " has slopes the IR's \"alibi\" softmax does not express");
  s.embed = "transformer.wte.weight";
  s.norm = "layernorm";
  s.layer = "transformer.blocks.{i}.";
  s.attn_norm = "norm_1";
  s.ffn_norm = "norm_2";
  s.fused = {"attn.Wqkv.weight", c.attention_bias ? "attn.Wqkv.bias" : "", 1, {s.d, s.d, s.d}};
  s.o = "attn.out_proj";
  s.o_bias = c.attention_bias;
  s.n_rot = 0;
  s.alibi = c.alibi;
  s.mlp = "gelu_exact";
  s.up = "ffn.up_proj";
  s.down = "ffn.down_proj";
  s.mlp_bias = c.mlp_bias;
  s.final_norm = "transformer.norm_f";
  s.tied = true;
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_mpt_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"mpt"};
  f.gguf = {{"mpt", "mpt",
             {"transformer.blocks.",
              {{"token_embd", "transformer.wte"},
               {"position_embd", "transformer.wpe"},
               {"output_norm", "transformer.norm_f"},
               {"output", "lm_head"}},
              {{"attn_norm", "norm_1"},
               {"attn_qkv", "attn.Wqkv"},
               {"attn_q_norm", "attn.q_ln"},
               {"attn_k_norm", "attn.k_ln"},
               {"attn_output", "attn.out_proj"},
               {"ffn_norm", "norm_2"},
               {"ffn_up", "ffn.up_proj"},
               {"ffn_down", "ffn.down_proj"}}}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.adapt_weights = zero_biases;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
