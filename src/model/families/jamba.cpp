// Jamba (AI21): Mamba layers and attention layers (no positional encoding)
// in one stack, a mixture of experts (softmax routing, no renormalisation)
// on every other layer. The two mixers need the IR extension layer_apply
// (docs/IR.md §17).
#include <algorithm>

#include "core/error.h"
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/families/moe_layers.h"
#include "model/families/hybrid_keys.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

// Attention on layers attn_layer_offset + k·attn_layer_period, Mamba on the
// others; experts on layers expert_layer_offset + k·expert_layer_period.
void read_config(const json& j, ModelConfig& c) {
  const std::string& s = c.source;
  read_moe_keys(j, c);
  c.conv_kernel = get_int(j, {"mamba_d_conv"}, 4, s);
  c.ssm_state = get_int(j, {"mamba_d_state"}, 16, s);
  c.ssm_inner = get_int(j, {"mamba_expand"}, 2, s) * c.hidden_size;
  const json* rank = find_key(j, {"mamba_dt_rank"});
  c.ssm_dt_rank = rank && rank->is_number_integer() ? rank->get<int64_t>() : (c.hidden_size + 15) / 16;  // "auto"
  if (get_bool(j, {"mamba_proj_bias"}, false) || !get_bool(j, {"mamba_conv_bias"}, true))
    fail(s, "Jamba with mamba_proj_bias = true or mamba_conv_bias = false is not supported (llama.cpp's layout has "
            "a conv bias and no projection biases)");
  const int64_t a_off = get_int(j, {"attn_layer_offset"}, 4, s), a_per = get_int(j, {"attn_layer_period"}, 8, s);
  const int64_t e_off = get_int(j, {"expert_layer_offset"}, 1, s), e_per = get_int(j, {"expert_layer_period"}, 2, s);
  if (a_per < 1 || e_per < 1 || a_off < 0 || e_off < 0)
    fail(s, "attn_layer_period/offset and expert_layer_period/offset must be a positive period and an offset >= 0");
  c.layer_types.clear();
  c.mlp_only_layers.clear();
  for (int64_t i = 0; i < c.n_layers; ++i) {
    c.layer_types.push_back(i >= a_off && (i - a_off) % a_per == 0 ? "full_attention" : "mamba");
    if (!(i >= e_off && (i - e_off) % e_per == 0)) c.mlp_only_layers.push_back(i);
  }
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus* have) {
  layer_types_from_kv_heads(k, c, "mamba");
  read_ssm_keys(k, c);
  // llama.cpp gives a layer experts where the file has a router for it.
  if (have && !have->router_layers.empty())
    for (int64_t i = 0; i < c.n_layers; ++i)
      if (std::find(have->router_layers.begin(), have->router_layers.end(), i) == have->router_layers.end())
        c.mlp_only_layers.push_back(i);
}

// The converter squeezed the conv weight and stored A = -exp(A_log).
void fix_tensor(const GgufTensorFix& in, std::string&, Tensor& t) {
  if (!in.options.hf_layout) return;
  if (in.rest == "ssm_conv1d.weight") gguf_fix::unsqueeze_conv(t);
  if (in.rest == "ssm_a") t = gguf_fix::a_log_of(in.file, in.gguf_name, t);
}

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.layer_types.size() != size_t(c.n_layers))
    throw Error(ErrorCode::BadGraph, c.source + ": Jamba needs one layer type per layer, got " +
                                         std::to_string(c.layer_types.size()) + " for " + std::to_string(c.n_layers));
  if (c.ssm_inner < 1 || c.ssm_state < 1 || c.ssm_dt_rank < 1 || c.conv_kernel < 2)
    throw Error(ErrorCode::BadGraph, c.source + ": Jamba's Mamba sizes (inner " + std::to_string(c.ssm_inner) + ", state " +
                                         std::to_string(c.ssm_state) + ", dt rank " + std::to_string(c.ssm_dt_rank) +
                                         ", conv " + std::to_string(c.conv_kernel) + ") must be positive (conv >= 2)");
  for (const auto& t : c.layer_types) s.mamba_layer.push_back(t == "mamba");
  s.ssm_inner = c.ssm_inner, s.ssm_state = c.ssm_state, s.ssm_dt_rank = c.ssm_dt_rank, s.ssm_conv = c.conv_kernel;
  s.mamba_norms = true;
  s.n_rot = 0;  // no positional encoding
  s.ffn_norm = "pre_ff_layernorm";
  s.gate = "feed_forward.gate_proj", s.up = "feed_forward.up_proj", s.down = "feed_forward.down_proj";
  s.final_norm = "model.final_layernorm";
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = false;
  s.moe_layer = moe_layers(c);
  s.router = "feed_forward.router";
  s.expert_gate = "feed_forward.experts.{e}.gate_proj";
  s.expert_up = "feed_forward.experts.{e}.up_proj";
  s.expert_down = "feed_forward.experts.{e}.down_proj";
  return build_decoder_ir(s, c);
}

}  // namespace

void register_jamba_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"jamba"};
  f.gguf = {{"jamba", "jamba",
             {"model.layers.",
              {{"token_embd", "model.embed_tokens"}, {"output_norm", "model.final_layernorm"}, {"output", "lm_head"}},
              {{"attn_norm", "input_layernorm"},
               {"attn_q", "self_attn.q_proj"},
               {"attn_k", "self_attn.k_proj"},
               {"attn_v", "self_attn.v_proj"},
               {"attn_output", "self_attn.o_proj"},
               {"ffn_norm", "pre_ff_layernorm"},
               {"ssm_in", "mamba.in_proj"},
               {"ssm_conv1d", "mamba.conv1d"},
               {"ssm_x", "mamba.x_proj"},
               {"ssm_dt", "mamba.dt_proj"},
               {"ssm_a", "mamba.A_log"},  // whole names: no ".weight"
               {"ssm_d", "mamba.D"},
               {"ssm_out", "mamba.out_proj"},
               {"ssm_dt_norm", "mamba.dt_layernorm"},
               {"ssm_b_norm", "mamba.b_layernorm"},
               {"ssm_c_norm", "mamba.c_layernorm"},
               {"ffn_gate_inp", "feed_forward.router"},
               {"ffn_gate_exps", "feed_forward.experts.{e}.gate_proj"},
               {"ffn_up_exps", "feed_forward.experts.{e}.up_proj"},
               {"ffn_down_exps", "feed_forward.experts.{e}.down_proj"},
               {"ffn_gate", "feed_forward.gate_proj"},
               {"ffn_up", "feed_forward.up_proj"},
               {"ffn_down", "feed_forward.down_proj"}}},
             fix_tensor}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
