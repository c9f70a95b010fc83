// Llama and Mistral: the reference decoder (RMSNorm, rope, GQA, SwiGLU).
// llama.cpp files Mixtral under the same GGUF architecture; such a file
// reads as model_type mixtral (moe.cpp).
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  if (c.n_experts == 0) return;
  c.family = "mixtral";
  // llama.cpp renormalises Mixtral's chosen weights whatever the file says.
  c.norm_topk_prob = k.flag("expert_weights_norm", true);
}

nlohmann::json document(const ModelConfig& c) { return families::build_decoder_ir(families::llama_like(c), c); }

}  // namespace

void register_llama_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"llama", "mistral"};
  const GgufRenames mixtral = {
      {"ffn_gate_inp", "block_sparse_moe.gate"},
      {"ffn_gate_exps", "block_sparse_moe.experts.{e}.w1"},
      {"ffn_down_exps", "block_sparse_moe.experts.{e}.w2"},
      {"ffn_up_exps", "block_sparse_moe.experts.{e}.w3"},
  };
  f.gguf = {{"llama", "llama",
             {"model.layers.", gguf_fix::decoder_global(), gguf_fix::join({gguf_fix::decoder_block(), mixtral})},
             gguf_fix::unpermute_rope}};
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
