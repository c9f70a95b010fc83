// GGUF's `<arch>.*` hyperparameter keys (as llama.cpp's converter writes
// them) into ModelConfig, so a GGUF file and the HF folder it was converted
// from describe the same model.
#include <cstdio>
#include <cstdlib>
#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/config_keys.h"
#include "model/family.h"

namespace bonfire {

using json = nlohmann::json;

namespace {

// GGUF stores f32: 1e-6 comes back as 9.99999997e-07. The shortest decimal
// that reads back as the same f32 is what the model's config.json said.
double float_shortest(double v) {
  const float f = static_cast<float>(v);
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, f);
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return v;
}

}  // namespace

const json* GgufKeys::find(const std::string& key) const {
  const std::string k = arch_ + "." + key;
  return kv_.contains(k) ? &kv_[k] : nullptr;
}

double GgufKeys::num(const std::string& key, double dflt) const {
  const json* v = find(key);
  if (!v) return dflt;
  if (v->is_array()) {
    double m = NAN;
    for (const auto& x : *v)
      if (x.is_number() && !(x.get<double>() <= m)) m = x.get<double>();
    return std::isnan(m) ? dflt : m;
  }
  if (!v->is_number()) throw Error(ErrorCode::BadGraph, src_ + ": " + arch_ + "." + key + " is not a number");
  return v->get<double>();
}

int64_t GgufKeys::integer(const std::string& key, int64_t dflt) const {
  const double v = num(key, (double)dflt);
  if (!(std::fabs(v) <= 9007199254740992.0) || v != std::floor(v))
    throw Error(ErrorCode::BadGraph, src_ + ": " + arch_ + "." + key + " = " + std::to_string(v) + " is not a usable integer");
  return (int64_t)v;
}

bool GgufKeys::flag(const std::string& key, bool dflt) const {
  const json* v = find(key);
  return v && v->is_boolean() ? v->get<bool>() : dflt;
}

ModelConfig parse_gguf_config(const json& kv, const std::string& source, const TensorCensus* have) {
  if (!kv.contains("general.architecture") || !kv["general.architecture"].is_string())
    throw Error(ErrorCode::BadGraph, source + ": no general.architecture key");
  const std::string arch = kv["general.architecture"].get<std::string>();
  ModelConfig c;
  c.source = source;
  c.raw = nullptr;
  const GgufArch* entry = nullptr;
  const Family* family = find_gguf_family(arch, &entry);
  if (!family) {
    std::string known;
    for (const Family& f : family_registry())
      for (const GgufArch& a : f.gguf) known += (known.empty() ? "" : ", ") + std::string(a.arch);
    throw Error(ErrorCode::BadGraph, source + ": GGUF architecture \"" + arch + "\" is not one bonfire knows (" + known + ")");
  }
  c.family = entry->model_type;
  const GgufKeys k(kv, arch, source);

  c.hidden_size = k.integer("embedding_length", 0);
  c.n_layers = k.integer("block_count", 0);
  c.n_heads = k.integer("attention.head_count", 0);
  c.n_kv_heads = k.integer("attention.head_count_kv", c.n_heads);
  c.intermediate_size = k.integer("feed_forward_length", 0);
  c.max_position_embeddings = k.integer("context_length", 0);
  c.vocab_size = k.integer("vocab_size", 0);
  c.keys = {{"vocab_size", arch + ".vocab_size"},
            {"hidden_size", arch + ".embedding_length"},
            {"n_layers", arch + ".block_count"},
            {"n_heads", arch + ".attention.head_count"},
            {"n_kv_heads", arch + ".attention.head_count_kv"},
            {"head_dim", arch + ".attention.key_length"},
            {"intermediate_size", arch + ".feed_forward_length"},
            {"max_position_embeddings", arch + ".context_length"},
            {"n_experts", arch + ".expert_count"},
            {"sliding_window", arch + ".attention.sliding_window"}};
  if (c.vocab_size == 0 && kv.contains("tokenizer.ggml.tokens")) {
    c.vocab_size = (int64_t)kv["tokenizer.ggml.tokens"].size();
    c.keys["vocab_size"] = "the tokenizer.ggml.tokens count";
    // The converter may cut the embedding to the tokenizer's real size
    // (Gemma 3 drops out-of-vocabulary rows) while padding the token list
    // to config.json's vocab_size with [PAD] entries: those ids have no
    // embedding and no logit, so the model's vocabulary is the table's.
    if (have && have->embed.found() && have->embed.shape.size() == 2 && have->embed.shape[0] < c.vocab_size &&
        (!have->output.found() || (have->output.shape.size() == 2 && have->output.shape[0] == have->embed.shape[0])))
      c.vocab_size = have->embed.shape[0];
  }
  // MLA files carry the unabsorbed sizes as *_mla (key_length is then
  // kv_lora_rank + rope dims, the absorbed form llama.cpp runs).
  c.head_dim = k.integer("attention.key_length_mla",
                         k.integer("attention.key_length", c.n_heads ? c.hidden_size / c.n_heads : 0));
  c.rope_theta = k.num("rope.freq_base", 10000);
  check_config_sizes(c, have);  // before anything is sized by them
  const int64_t rope_dims = k.integer("rope.dimension_count", c.head_dim);
  c.partial_rotary_factor = c.head_dim ? (double)rope_dims / (double)c.head_dim : 1.0;
  if (const json* t = k.find("rope.scaling.type"); t && t->is_string() && *t != "none") {
    c.rope_scaling = {{"rope_type", *t}, {"factor", k.num("rope.scaling.factor", 1.0)}};
    if (k.find("rope.scaling.original_context_length"))
      c.rope_scaling["original_max_position_embeddings"] = k.integer("rope.scaling.original_context_length", 0);
    // DeepSeek's YaRN: the converter keeps 0.1·mscale_all_dim (mscale equals it).
    if (const double mul = k.num("rope.scaling.yarn_log_multiplier", 0); mul > 0)
      c.rope_scaling["mscale"] = c.rope_scaling["mscale_all_dim"] = float_shortest(mul / 0.1);
  }
  const bool layernorm = k.find("attention.layer_norm_epsilon") != nullptr;
  c.norm = layernorm ? "layernorm" : "rmsnorm";
  c.norm_eps = float_shortest(layernorm ? k.num("attention.layer_norm_epsilon", 1e-5)
                                         : k.num("attention.layer_norm_rms_epsilon", 1e-6));
  c.sliding_window = k.integer("attention.sliding_window", 0);
  c.attn_logit_softcap = k.num("attn_logit_softcapping", 0);
  c.final_logit_softcap = k.num("final_logit_softcapping", 0);
  c.alibi = k.find("attention.max_alibi_bias") != nullptr;
  c.alibi_max = k.num("attention.max_alibi_bias", 8);
  if (c.alibi) c.partial_rotary_factor = 0;

  c.n_experts = k.integer("expert_count", 0);
  c.n_experts_per_tok = k.integer("expert_used_count", 0);
  c.moe_intermediate_size = k.integer("expert_feed_forward_length", c.intermediate_size);
  c.n_shared_experts = k.integer("expert_shared_count", 0);
  c.shared_expert_intermediate_size = k.integer("expert_shared_feed_forward_length", 0);
  c.norm_topk_prob = k.flag("expert_weights_norm", false);
  c.routed_scaling_factor = k.num("expert_weights_scale", 1.0);
  c.moe_scoring = k.integer("expert_gating_func", 1) == 2 ? "sigmoid" : "softmax";
  c.first_k_dense_replace = k.integer("leading_dense_block_count", 0);
  c.n_group = k.integer("expert_group_count", 0);
  c.topk_group = k.integer("expert_group_used_count", 0);

  c.q_lora_rank = k.integer("attention.q_lora_rank", 0);
  c.kv_lora_rank = k.integer("attention.kv_lora_rank", 0);
  if (c.kv_lora_rank > 0) {
    // llama.cpp stores MLA in its absorbed form with one kv head; the model
    // (and HF's config) has as many kv heads as query heads.
    c.n_kv_heads = c.n_heads;
    c.qk_rope_head_dim = rope_dims;
    c.qk_nope_head_dim = c.head_dim - rope_dims;
    c.v_head_dim = k.integer("attention.value_length_mla", k.integer("attention.value_length", c.head_dim));
  }
  c.attention_multiplier = k.num("attention.scale", 0);
  c.embedding_multiplier = k.num("embedding_scale", 0);
  c.residual_multiplier = k.num("residual_scale", 0);
  c.logits_scaling = k.num("logit_scale", 0);

  if (family->read_gguf) family->read_gguf(k, c, have);

  auto id = [&](const char* key) {
    return kv.contains(key) && kv[key].is_number() ? kv[key].get<int64_t>() : int64_t(-1);
  };
  c.bos_token_id = id("tokenizer.ggml.bos_token_id");
  if (id("tokenizer.ggml.eos_token_id") >= 0) c.eos_token_ids = {id("tokenizer.ggml.eos_token_id")};
  if (id("tokenizer.ggml.eot_token_id") >= 0 && id("tokenizer.ggml.eot_token_id") != id("tokenizer.ggml.eos_token_id"))
    c.eos_token_ids.push_back(id("tokenizer.ggml.eot_token_id"));
  c.pad_token_id = id("tokenizer.ggml.padding_token_id");
  if (c.hidden_size <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.vocab_size <= 0)
    throw Error(ErrorCode::BadGraph, source + ": GGUF lacks " + arch + ".embedding_length, block_count, "
                                              "attention.head_count or a vocabulary");
  check_config_sizes(c, have);
  if (const Family* f = find_family(c.family); f && f->check) f->check(c);
  return c;
}

}  // namespace bonfire
