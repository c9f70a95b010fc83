// Sparse mixture-of-experts decoders: Mixtral (block_sparse_moe, w1/w3/w2;
// its GGUF files are llama.cpp's "llama", read in llama.cpp), Qwen2-MoE (a
// gated shared expert), Qwen3-MoE and OLMoE (q/k norms).
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/families/moe_layers.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  read_moe_keys(j, c);
  if (c.family == "mixtral") c.norm_topk_prob = get_bool(j, {"norm_topk_prob"}, true);
  c.qk_norm = c.family == "qwen3_moe" || c.family == "olmoe";
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  // llama.cpp renormalises Qwen3-MoE's chosen weights whatever the file says.
  if (c.family == "qwen3_moe") c.norm_topk_prob = k.flag("expert_weights_norm", true);
  c.qk_norm = c.family == "qwen3_moe" || c.family == "olmoe";
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = c.norm_topk_prob;
  s.moe_layer = families::moe_layers(c);
  if (c.family == "mixtral") {
    s.router = "block_sparse_moe.gate";
    s.expert_gate = "block_sparse_moe.experts.{e}.w1";
    s.expert_up = "block_sparse_moe.experts.{e}.w3";
    s.expert_down = "block_sparse_moe.experts.{e}.w2";
  } else {
    s.router = "mlp.gate";
    s.expert_gate = "mlp.experts.{e}.gate_proj";
    s.expert_up = "mlp.experts.{e}.up_proj";
    s.expert_down = "mlp.experts.{e}.down_proj";
  }
  if (c.expert_quant == "qmoe") {
    // ONNX Runtime GenAI's int4 QMoE layout (docs/QMOE.md): one fc1 tensor
    // (gate and up rows interleaved) and one fc2 tensor per layer, with
    // scales beside them. ORT's QMoE always renormalises over the topK.
    s.experts_qmoe = true;
    s.expert_gate = s.expert_up = "mlp.experts.fc1_experts_weights";
    s.expert_down = "mlp.experts.fc2_experts_weights";
    s.renorm = true;
  }
  if (c.family == "qwen2_moe") {
    s.qkv_bias = true, s.o_bias = false;  // transformers: o_proj has none
    if (c.shared_expert_intermediate_size > 0) {
      s.shared_gate = "mlp.shared_expert.gate_proj";
      s.shared_up = "mlp.shared_expert.up_proj";
      s.shared_down = "mlp.shared_expert.down_proj";
      s.shared_expert_gate = "mlp.shared_expert_gate";
    }
  }
  if (c.qk_norm) {
    s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
    s.qk_norm_per_head = c.family != "olmoe";  // OLMoE normalises the whole projection
  }
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_moe_family(std::vector<Family>& v) {
  using gguf_fix::join;
  Family f;
  f.model_types = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"};
  const GgufRenames shared_expert = {
      {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
  };
  const GgufRenames block = join({gguf_fix::decoder_block(), gguf_fix::moe_experts()});
  f.gguf = {{"qwen2moe", "qwen2_moe", {"model.layers.", gguf_fix::decoder_global(), join({block, shared_expert})}},
            {"qwen3moe", "qwen3_moe", {"model.layers.", gguf_fix::decoder_global(), block}},
            {"olmoe", "olmoe", {"model.layers.", gguf_fix::decoder_global(), block}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
