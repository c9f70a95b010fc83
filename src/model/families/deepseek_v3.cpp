// DeepSeek-V3: multi-head latent attention (low-rank q, a cached kv latent
// with a shared rotary key part), dense leading layers, then sigmoid-scored
// group-limited experts with a selection bias, shared experts and a routed
// scaling factor. YaRN's attention scale multiplies the softmax scale.
#include <cmath>
#include <cstring>

#include "core/error.h"
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
  read_moe_keys(j, c);
  const std::string& s = c.source;
  c.moe_scoring = get_str(j, {"scoring_func"}, "sigmoid");
  c.routed_scaling_factor = get_num(j, {"routed_scaling_factor"}, 1.0, s);
  c.n_group = get_int(j, {"n_group"}, 0, s);
  c.topk_group = get_int(j, {"topk_group"}, 0, s);
  c.first_k_dense_replace = get_int(j, {"first_k_dense_replace"}, 0, s);
  c.norm_topk_prob = get_bool(j, {"norm_topk_prob"}, true);
  c.q_lora_rank = get_int(j, {"q_lora_rank"}, 0, s);
  c.kv_lora_rank = get_int(j, {"kv_lora_rank"}, 0, s);
  c.qk_rope_head_dim = get_int(j, {"qk_rope_head_dim"}, 0, s);
  c.qk_nope_head_dim = get_int(j, {"qk_nope_head_dim"}, 0, s);
  c.v_head_dim = get_int(j, {"v_head_dim"}, 0, s);
  c.head_dim = c.qk_rope_head_dim + c.qk_nope_head_dim;
  c.rope_interleaved = get_bool(j, {"rope_interleave"}, true);
}

// llama.cpp rotates DeepSeek's pairs (2i, 2i+1).
void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.rope_interleaved = true; }

// Multi-head latent attention: the ranks must fit together before a weight
// is read (the latent cache is kv_lora_rank + qk_rope_head_dim wide).
void check_mla_ranks(const ModelConfig& c) {
  auto key = [&](const char* field) {
    const auto it = c.keys.find(field);
    return it != c.keys.end() ? it->second : std::string(field);
  };
  auto str = [](int64_t v) { return std::to_string(v); };
  auto need = [&](bool ok, const std::string& field, const std::string& why) {
    if (!ok) fail(c.source, field + " " + why + " (multi-head latent attention)");
  };
  need(c.kv_lora_rank > 0, key("kv_lora_rank"), "= " + str(c.kv_lora_rank) + " must be positive: it is the latent's width");
  need(c.qk_rope_head_dim > 0 && c.qk_rope_head_dim % 2 == 0, key("qk_rope_head_dim"),
       "= " + str(c.qk_rope_head_dim) + " must be positive and even (rotary pairs)");
  need(c.qk_nope_head_dim > 0, key("qk_nope_head_dim"), "= " + str(c.qk_nope_head_dim) + " must be positive");
  need(c.v_head_dim > 0, key("v_head_dim"), "= " + str(c.v_head_dim) + " must be positive");
  if (c.raw.is_object() && c.raw.contains("qk_head_dim") && c.raw["qk_head_dim"].is_number_integer())
    need(c.raw["qk_head_dim"].get<int64_t>() == c.qk_nope_head_dim + c.qk_rope_head_dim, "qk_head_dim",
         "= " + c.raw["qk_head_dim"].dump() + " is not qk_nope_head_dim + qk_rope_head_dim = " + str(c.qk_nope_head_dim) +
             " + " + str(c.qk_rope_head_dim));
}

// kv_b_proj [H*(nope+v), lora], which the converter split into attn_k_b
// [H, lora, nope] (transposed) and attn_v_b [H, v, lora]. Rebuilt in f32:
// these are small next to the experts. For a store that only lowers graphs,
// zeros of that shape, whose pages are never touched (8 MB a layer of
// DeepSeek-V2-Lite otherwise).
Tensor kv_b_of(const GgufFile& f, const Tensor& kb, const Tensor& vb, bool lowering_only) {
  if (kb.shape.size() != 3 || vb.shape.size() != 3 || kb.shape[0] != vb.shape[0] || kb.shape[1] != vb.shape[2])
    gguf_fix::fail(f, "attn_k_b " + shape_str(kb.shape) + " and attn_v_b " + shape_str(vb.shape) +
                          " do not split one kv_b_proj [heads, lora, nope] / [heads, v, lora]");
  const int64_t H = kb.shape[0], lora = kb.shape[1], nope = kb.shape[2], v = vb.shape[1];
  if (lowering_only) return Tensor::zeros({H * (nope + v), lora});
  const Tensor k = to_f32(kb), vv = to_f32(vb);
  Tensor out = Tensor::empty({H * (nope + v), lora});
  for (int64_t h = 0; h < H; ++h) {
    float* base = out.f32() + h * (nope + v) * lora;
    for (int64_t n = 0; n < nope; ++n)
      for (int64_t l = 0; l < lora; ++l) base[n * lora + l] = k.f32()[(h * lora + l) * nope + n];
    std::memcpy(base + nope * lora, vv.f32() + h * v * lora, v * lora * sizeof(float));
  }
  return out;
}

void join_kv_b(const GgufFile& file, const GgufLoadOptions& options, WeightStore& store) {
  if (!options.hf_layout) return;
  for (int64_t l = 0;; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const GgufTensorInfo* kb = file.find(p + "attn_k_b.weight");
    const GgufTensorInfo* vb = file.find(p + "attn_v_b.weight");
    if (!kb || !vb) break;
    const std::string name = "model.layers." + std::to_string(l) + ".self_attn.kv_b_proj.weight";
    if (!store.find(name))
      store.add(name, kv_b_of(file, file.tensor(*kb), file.tensor(*vb), options.lowering_only), file.name());
  }
}

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.mla = true;
  s.q_lora_rank = c.q_lora_rank;
  s.kv_lora_rank = c.kv_lora_rank;
  s.qk_nope = c.qk_nope_head_dim;
  s.qk_rope = c.qk_rope_head_dim;
  s.v_head_dim = c.v_head_dim;
  s.n_rot = c.qk_rope_head_dim;
  s.pairing = c.rope_interleaved ? "interleaved" : "neox";
  set_rope_scaling(s, c);
  double scale = 1 / std::sqrt(double(s.qk_nope + s.qk_rope));
  if (c.rope_scaling.is_object()) {
    const double factor = c.rope_scaling.value("factor", 1.0);
    const double m = c.rope_scaling.value("mscale_all_dim", 0.0);
    if (m > 0 && factor > 1) {
      const double mscale = 0.1 * m * std::log(factor) + 1.0;
      scale *= mscale * mscale;
    }
  }
  s.scale = scale;
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = c.norm_topk_prob;
  s.scoring = c.moe_scoring;
  s.router = "mlp.gate";
  s.selection_bias = "mlp.gate.e_score_correction_bias";
  s.expert_gate = "mlp.experts.{e}.gate_proj";
  s.expert_up = "mlp.experts.{e}.up_proj";
  s.expert_down = "mlp.experts.{e}.down_proj";
  s.groups = c.n_group;
  s.top_groups = c.topk_group;
  s.routed_scale = c.routed_scaling_factor;
  if (c.n_shared_experts > 0) {
    s.shared_gate = "mlp.shared_experts.gate_proj";
    s.shared_up = "mlp.shared_experts.up_proj";
    s.shared_down = "mlp.shared_experts.down_proj";
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    s.moe_layer[l] = c.n_experts > 0 && l >= c.first_k_dense_replace && l % std::max<int64_t>(1, c.moe_layer_freq) == 0;
  return build_decoder_ir(s, c);
}

}  // namespace

void register_deepseek_v3_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"deepseek_v3"};
  f.gguf = {{"deepseek2", "deepseek_v3",
             {"model.layers.",
              gguf_fix::decoder_global(),
              gguf_fix::join({gguf_fix::decoder_block(),
                              gguf_fix::moe_experts(),
                              {{"attn_q_a", "self_attn.q_a_proj"},
                               {"attn_q_a_norm", "self_attn.q_a_layernorm"},
                               {"attn_q_b", "self_attn.q_b_proj"},
                               {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
                               {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
                               {"attn_kv_b", "self_attn.kv_b_proj"},
                               {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
                               {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
                               {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
                               {"ffn_down_shexp", "mlp.shared_experts.down_proj"}}})},
             nullptr,
             join_kv_b}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.check = check_mla_ranks;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
