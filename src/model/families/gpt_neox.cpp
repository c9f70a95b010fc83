// GPT-NeoX (Pythia): parallel attention and MLP with two norms, fused
// query_key_value stored per head ([h][q|k|v]; the converter regrouped it),
// partial rope, exact GELU, untied embed_out.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_eps"}, 1e-5, c.source);
  c.hidden_act = get_str(j, {"hidden_act"}, "gelu");
  c.parallel_residual = get_bool(j, {"use_parallel_residual"}, true);
  c.attention_bias = get_bool(j, {"attention_bias"}, true);
  c.mlp_bias = true;
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  c.parallel_residual = k.flag("use_parallel_residual", true);
  c.hidden_act = "gelu";
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.embed = "gpt_neox.embed_in.weight";
  s.norm = "layernorm";
  s.layer = "gpt_neox.layers.{i}.";
  s.fused = {"attention.query_key_value.weight", c.attention_bias ? "attention.query_key_value.bias" : "", s.heads,
             {s.head_dim, s.head_dim, s.head_dim}};
  s.o = "attention.dense";
  s.o_bias = c.attention_bias;
  s.parallel = c.parallel_residual ? "two_norms" : "";
  s.mlp = families::plain_mlp(c, c.hidden_act, "hidden_act");
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = true;
  s.final_norm = "gpt_neox.final_layer_norm";
  s.lm_head = "embed_out.weight";
  s.tied = false;
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_gpt_neox_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"gpt_neox"};
  f.gguf = {{"gptneox", "gpt_neox",
             {"gpt_neox.layers.",
              {{"token_embd", "gpt_neox.embed_in"}, {"output_norm", "gpt_neox.final_layer_norm"}, {"output", "embed_out"}},
              {{"attn_norm", "input_layernorm"},
               {"attn_qkv", "attention.query_key_value"},
               {"attn_output", "attention.dense"},
               {"ffn_norm", "post_attention_layernorm"},
               {"ffn_up", "mlp.dense_h_to_4h"},
               {"ffn_down", "mlp.dense_4h_to_h"}}},
             gguf_fix::ungroup_qkv}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
