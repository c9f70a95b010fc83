#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/tensor.h"
#include "model/config_keys.h"
#include "model/family.h"

namespace bonfire {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace cfg {

void fail(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::BadGraph, source + ": " + what);
}

// The first of `keys` present (and not null) in j.
const json* find_key(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (j.contains(k) && !j[k].is_null()) return &j[k];
  return nullptr;
}

// The key of `keys` that j spells (the first one when none is present).
std::string key_of(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (j.contains(k) && !j[k].is_null()) return k;
  return *keys.begin();
}

int64_t get_int(const json& j, std::initializer_list<const char*> keys, int64_t dflt, const std::string& src) {
  const json* v = find_key(j, keys);
  if (!v) return dflt;
  const std::string key = key_of(j, keys);
  if (!v->is_number()) fail(src, key + " must be a number, got " + v->dump().substr(0, 40));
  // 2^53: every integer below it is exact in a double and far beyond any
  // size; larger values (or 1e300, or 2.5) are refused here, not cast.
  constexpr double kMax = 9007199254740992.0;
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(kMax))
    fail(src, key + " = " + v->dump() + " is out of range");
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!(std::fabs(d) <= kMax) || d != std::floor(d)) fail(src, key + " = " + v->dump() + " is not an integer");
    return static_cast<int64_t>(d);
  }
  return v->get<int64_t>();
}

double get_num(const json& j, std::initializer_list<const char*> keys, double dflt, const std::string& src) {
  const json* v = find_key(j, keys);
  if (!v) return dflt;
  if (!v->is_number()) fail(src, key_of(j, keys) + " must be a number, got " + v->dump().substr(0, 40));
  return v->get<double>();
}

bool get_bool(const json& j, std::initializer_list<const char*> keys, bool dflt) {
  const json* v = find_key(j, keys);
  if (v && v->is_number()) return v->get<double>() != 0;  // Python reads a config's 1 as true
  return v && v->is_boolean() ? v->get<bool>() : dflt;
}

std::string get_str(const json& j, std::initializer_list<const char*> keys, const std::string& dflt) {
  const json* v = find_key(j, keys);
  return v && v->is_string() ? v->get<std::string>() : dflt;
}

std::vector<int64_t> id_list(const json* v) {
  std::vector<int64_t> out;
  if (!v) return out;
  if (v->is_number_integer()) out.push_back(v->get<int64_t>());
  if (v->is_array())
    for (const auto& x : *v)
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
  return out;
}

}  // namespace cfg

namespace {

using namespace cfg;

json read_json_file(const std::string& path) {
  return parse_json_file(path);
}

// The checkpoint being checked against while a config parses (set by
// parse_hf_config for its duration; null: bounds only).
thread_local const TensorCensus* t_have = nullptr;

// Keys most decoder-only families share (Llama's names).
void read_common(const json& j, ModelConfig& c) {
  const std::string& s = c.source;
  c.keys = {{"vocab_size", key_of(j, {"vocab_size", "padded_vocab_size"})},
            {"hidden_size", key_of(j, {"hidden_size", "n_embd", "d_model", "n_embed"})},
            {"n_layers", key_of(j, {"num_hidden_layers", "n_layer", "n_layers", "num_layers"})},
            {"n_heads", key_of(j, {"num_attention_heads", "n_head", "n_heads"})},
            {"n_kv_heads", key_of(j, {"num_key_value_heads", "num_kv_heads", "n_head_kv"})},
            {"head_dim", "head_dim"},
            {"intermediate_size", key_of(j, {"intermediate_size", "n_inner", "ffn_hidden_size"})},
            {"max_position_embeddings", key_of(j, {"max_position_embeddings", "n_positions", "max_seq_len"})},
            {"n_experts", key_of(j, {"num_local_experts", "num_experts", "n_routed_experts"})},
            {"sliding_window", "sliding_window"}};
  c.vocab_size = get_int(j, {"vocab_size", "padded_vocab_size"}, 0, s);
  c.hidden_size = get_int(j, {"hidden_size", "n_embd", "d_model", "n_embed"}, 0, s);
  c.n_layers = get_int(j, {"num_hidden_layers", "n_layer", "n_layers", "num_layers"}, 0, s);
  c.n_heads = get_int(j, {"num_attention_heads", "n_head", "n_heads"}, 0, s);
  c.n_kv_heads = get_int(j, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}, c.n_heads, s);
  c.intermediate_size = get_int(j, {"intermediate_size", "n_inner", "ffn_hidden_size"}, 0, s);
  c.max_position_embeddings = get_int(j, {"max_position_embeddings", "n_positions", "max_seq_len"}, 0, s);
  c.rope_theta = get_num(j, {"rope_theta", "rotary_emb_base"}, 10000, s);
  if (const json* rs = find_key(j, {"rope_scaling", "rope_parameters"}); rs && rs->is_object()) {
    c.rope_scaling = *rs;
    // transformers 5 keeps theta inside rope_parameters.
    if (rs->contains("rope_theta")) c.rope_theta = get_num(*rs, {"rope_theta"}, c.rope_theta, s);
    const std::string type = get_str(*rs, {"rope_type", "type"}, "default");
    if (type == "default") c.rope_scaling = nullptr;
  }
  c.partial_rotary_factor = get_num(j, {"partial_rotary_factor", "rotary_pct"}, 1.0, s);
  c.norm_eps = get_num(j, {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"}, 1e-6, s);
  c.hidden_act = get_str(j, {"hidden_act", "hidden_activation", "activation_function"}, "silu");
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, false);
  c.attention_bias = get_bool(j, {"attention_bias", "qkv_bias"}, false);
  c.mlp_bias = get_bool(j, {"mlp_bias"}, false);
  c.sliding_window = get_int(j, {"sliding_window"}, 0, s);
  // Qwen's configs (qwen2, qwen3 and their MoE) keep a window that is off
  // unless use_sliding_window says so, as transformers reads them.
  const bool qwen = c.family.rfind("qwen", 0) == 0;
  if (!get_bool(j, {"use_sliding_window"}, !qwen)) c.sliding_window = 0;
  // OLMo's and OLMoE's clamp of q, k and v: no IR node clamps.
  if (const json* clip = find_key(j, {"clip_qkv"}); clip)
    fail(s, "clip_qkv = " + clip->dump().substr(0, 40) + ": clamping q, k and v is not supported");
  c.bos_token_id = get_int(j, {"bos_token_id"}, -1, s);
  c.eos_token_ids = id_list(find_key(j, {"eos_token_id"}));
  c.pad_token_id = get_int(j, {"pad_token_id"}, -1, s);
  // Before anything is sized by them (Gemma's and LFM2's per-layer lists).
  check_config_sizes(c, t_have);
  if (const json* lt = find_key(j, {"layer_types"}); lt && lt->is_array())
    for (const auto& t : *lt) c.layer_types.push_back(t.is_string() ? t.get<std::string>() : "");
  // There, without layer_types, only layers from max_window_layers on slide
  // (transformers' default: 28).
  if (qwen && c.sliding_window > 0 && c.layer_types.empty()) {
    const int64_t from = get_int(j, {"max_window_layers"}, 28, s);
    for (int64_t l = 0; l < c.n_layers; ++l)
      c.layer_types.push_back(l >= from ? "sliding_attention" : "full_attention");
  }
}


void check_config(const ModelConfig& c, const Family& family) {
  check_config_sizes(c, t_have);
  if (family.check) family.check(c);
  auto need = [&](int64_t v, const char* what) {
    if (v <= 0) fail(c.source, std::string(what) + " must be a positive number (model_type " + c.family + ")");
  };
  need(c.vocab_size, "vocab_size");
  need(c.hidden_size, "hidden_size");
  need(c.n_layers, "the layer count");
  need(c.n_heads, "the head count");
  need(c.n_kv_heads, "the key/value head count");
  if (c.n_heads % c.n_kv_heads != 0)
    fail(c.source, "num_attention_heads " + std::to_string(c.n_heads) + " is not a multiple of num_key_value_heads " +
                       std::to_string(c.n_kv_heads));
  if (!c.layer_types.empty() && (int64_t)c.layer_types.size() != c.n_layers)
    fail(c.source, "layer_types has " + std::to_string(c.layer_types.size()) + " entries for " +
                       std::to_string(c.n_layers) + " layers");
}

}  // namespace

void cfg::read_moe_keys(const json& j, ModelConfig& c) {
  const std::string& s = c.source;
  c.n_experts = get_int(j, {"num_local_experts", "num_experts", "n_routed_experts"}, 0, s);
  c.n_experts_per_tok = get_int(j, {"num_experts_per_tok"}, 0, s);
  c.moe_intermediate_size = get_int(j, {"moe_intermediate_size"}, c.intermediate_size, s);
  c.n_shared_experts = get_int(j, {"n_shared_experts"}, 0, s);
  c.shared_expert_intermediate_size = get_int(j, {"shared_expert_intermediate_size"}, 0, s);
  c.norm_topk_prob = get_bool(j, {"norm_topk_prob"}, false);
  c.moe_layer_freq = get_int(j, {"decoder_sparse_step", "moe_layer_freq"}, 1, s);
  c.mlp_only_layers = id_list(find_key(j, {"mlp_only_layers"}));
  // Experts packed in ONNX Runtime's QMoE layout (docs/QMOE.md).
  if (const json* q = find_key(j, {"quantization_config"}); q && q->is_object() &&
                                                            q->value("quant_method", json()) == "qmoe") {
    c.expert_quant = "qmoe";
    c.expert_quant_bits = get_int(*q, {"bits"}, 4, s);
    c.expert_quant_block = get_int(*q, {"block_size"}, 0, s);
    if (c.expert_quant_bits != 4 && c.expert_quant_bits != 8)
      throw Error(ErrorCode::BadGraph, s + ": quantization_config.bits " + std::to_string(c.expert_quant_bits) +
                                           " (qmoe experts are 4 or 8 bits)");
  }
}

ModelConfig parse_hf_config(const json& j, const std::string& source, const TensorCensus* have) {
  struct Guard {
    const TensorCensus* saved = t_have;
    ~Guard() { t_have = saved; }
  } guard;
  t_have = have;
  if (!j.is_object()) fail(source, "config.json must be a JSON object");
  ModelConfig c;
  c.source = source;
  c.raw = j;
  c.family = get_str(j, {"model_type"}, "");
  const Family* family = find_family(c.family);
  // A multimodal config (Gemma 3's) nests the language model's.
  if (!family && j.contains("text_config") && j["text_config"].is_object() &&
      find_family(get_str(j["text_config"], {"model_type"}, "")))
    return parse_hf_config(j["text_config"], source, have);
  if (!family) fail(source, "model_type \"" + c.family + "\" is not one bonfire knows (" + known_model_types_text() + ")");
  try {
    read_common(j, c);
    if (family->read_config) family->read_config(j, c);
  } catch (const nlohmann::json::exception& e) {  // a value of a type no reader checked
    fail(source, std::string("a value has the wrong type (") + e.what() + ")");
  }
  if (c.head_dim == 0)
    c.head_dim = get_int(j, {"head_dim"}, c.n_heads > 0 ? c.hidden_size / c.n_heads : 0, source);
  check_config(c, *family);
  return c;
}

ModelConfig load_hf_config(const std::string& path, const TensorCensus* have) {
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  return parse_hf_config(read_json_file(file), file, have);
}

namespace {

// The layer index in a tensor name ("model.layers.3.mlp..." or GGUF's
// "blk.3.ffn_up.weight") and the name's segments after it; -1 when none.
int64_t layer_of(const std::vector<std::string>& seg, size_t* after) {
  for (size_t i = 0; i + 1 < seg.size(); ++i) {
    const std::string& s = seg[i];
    if (s != "layers" && s != "h" && s != "blocks" && s != "blk" && s != "layer") continue;
    const std::string& n = seg[i + 1];
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) continue;
    if (after) *after = i + 2;
    return std::stoll(n);
  }
  return -1;
}

std::vector<std::string> segments(const std::string& name) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i)
    if (i == name.size() || name[i] == '.') {
      out.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TensorCensus census_of(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  TensorCensus c;
  int64_t q_layer = -1, k_layer = -1, up_layer = -1;
  auto take = [](TensorCensus::Named& slot, const std::string& name, const std::vector<int64_t>& shape) {
    if (!slot.found() || name < slot.name) slot = {name, shape};
  };
  for (const auto& entry : tensors) {
    // Named, not bound: Clang 14 (the fuzz build) cannot capture a structured binding.
    const std::string& name = entry.first;
    const std::vector<int64_t>& shape = entry.second;
    const std::vector<std::string> seg = segments(name);
    // A multimodal checkpoint's vision or audio tower has layers, q_proj...
    // of its own (Gemma 3's vision_tower); only the language model counts.
    if (std::any_of(seg.begin(), seg.end(), [](const std::string& x) {
          return x == "vision_tower" || x == "vision_model" || x == "visual" || x == "vision" ||
                 x == "multi_modal_projector" || x == "mm_projector" || x == "audio_tower" || x == "audio_model";
        }))
      continue;
    size_t after = 0;
    const int64_t layer = layer_of(seg, &after);
    if (layer >= 0) {
      c.layers = std::max(c.layers, layer + 1);
      const std::vector<std::string> rest(seg.begin() + static_cast<std::ptrdiff_t>(after), seg.end());
      auto is = [&](std::initializer_list<const char*> want) {
        return rest.size() == want.size() && std::equal(rest.begin(), rest.end(), want.begin());
      };
      auto first = [&](int64_t& at, TensorCensus::Named& slot) {
        if (at < 0 || layer < at) {
          at = layer;
          slot = {name, shape};
        }
      };
      if (is({"self_attn", "q_proj", "weight"}) || is({"attn_q", "weight"})) first(q_layer, c.q);
      if (is({"self_attn", "k_proj", "weight"}) || is({"attn_k", "weight"})) first(k_layer, c.k);
      if (is({"mlp", "up_proj", "weight"}) || is({"ffn_up", "weight"})) first(up_layer, c.up);
      if (is({"mlp", "gate_proj", "weight"}) || is({"ffn_gate", "weight"})) c.has_gate = true;
      if (is({"ffn_gate_inp", "weight"}) &&
          std::find(c.router_layers.begin(), c.router_layers.end(), layer) == c.router_layers.end())
        c.router_layers.push_back(layer);
      for (size_t i = after; i + 1 < seg.size(); ++i)
        if (seg[i] == "experts" && !seg[i + 1].empty() && seg[i + 1].size() <= 9 &&
            seg[i + 1].find_first_not_of("0123456789") == std::string::npos)
          c.experts = std::max<int64_t>(c.experts, std::stoll(seg[i + 1]) + 1);
      if (!rest.empty() && ends_with(rest[0], "_exps") && shape.size() == 3) c.experts = std::max(c.experts, shape[0]);
      continue;
    }
    if (name == "token_embd.weight" || ends_with(name, "embed_tokens.weight") || ends_with(name, ".wte.weight") ||
        name == "wte.weight" || ends_with(name, "word_embeddings.weight") || ends_with(name, "embed_in.weight") ||
        ends_with(name, "tok_embeddings.weight"))
      take(c.embed, name, shape);
    if (name == "output.weight" || name == "lm_head.weight" || name == "embed_out.weight") take(c.output, name, shape);
    if (name == "position_embd.weight" || ends_with(name, "wpe.weight")) take(c.positions, name, shape);
  }
  return c;
}

void check_config_sizes(const ModelConfig& c, const TensorCensus* have) {
  const std::string& src = c.source;
  auto key = [&](const char* field) {
    const auto it = c.keys.find(field);
    return it != c.keys.end() ? it->second : std::string(field);
  };
  auto str = [](int64_t v) { return std::to_string(v); };
  // The checkpoint first: its tensors say what the sizes are.
  if (have) {
    if (have->layers >= 0 && c.n_layers > have->layers)
      fail(src, key("n_layers") + " = " + str(c.n_layers) + " but the checkpoint has tensors for " +
                    str(have->layers) + " layers");
    if (have->experts >= 0 && c.n_experts > have->experts)
      fail(src, key("n_experts") + " = " + str(c.n_experts) + " but the checkpoint has tensors for " +
                    str(have->experts) + " experts");
    if (const auto& e = have->embed; e.found() && e.shape.size() == 2) {
      if (c.hidden_size > 0 && c.hidden_size != e.shape[1])
        fail(src, key("hidden_size") + " = " + str(c.hidden_size) + " but the embedding " + e.name + " is " +
                      shape_str(e.shape));
      if (c.vocab_size > e.shape[0])
        fail(src, key("vocab_size") + " = " + str(c.vocab_size) + " but the embedding " + e.name + " has " +
                      str(e.shape[0]) + " rows");
    }
    if (const auto& o = have->output; o.found() && o.shape.size() == 2 && c.vocab_size > o.shape[0])
      fail(src, key("vocab_size") + " = " + str(c.vocab_size) + " but the output " + o.name + " has " +
                    str(o.shape[0]) + " rows");
    if (const auto& p = have->positions; p.found() && !p.shape.empty() && c.max_position_embeddings > p.shape[0])
      fail(src, key("max_position_embeddings") + " = " + str(c.max_position_embeddings) + " but the position table " +
                    p.name + " has " + str(p.shape[0]) + " rows");
    // Latent attention (kv_lora_rank) projects queries and keys otherwise.
    if (c.kv_lora_rank == 0 && c.head_dim > 0) {
      if (const auto& q = have->q; q.found() && q.shape.size() == 2 && c.n_heads > 0 &&
                                   c.n_heads * c.head_dim != q.shape[0])
        fail(src, key("n_heads") + " = " + str(c.n_heads) + " × head_dim " + str(c.head_dim) + " = " +
                      str(c.n_heads * c.head_dim) + " but " + q.name + " has " + str(q.shape[0]) + " rows");
      if (const auto& k = have->k; k.found() && k.shape.size() == 2 && c.n_kv_heads > 0 &&
                                   c.n_kv_heads * c.head_dim != k.shape[0])
        fail(src, key("n_kv_heads") + " = " + str(c.n_kv_heads) + " × head_dim " + str(c.head_dim) + " = " +
                      str(c.n_kv_heads * c.head_dim) + " but " + k.name + " has " + str(k.shape[0]) + " rows");
    }
    // Without a separate gate, ffn_up may be the fused gate_up projection
    // (Phi-3's GGUF): 2 × the width.
    if (const auto& u = have->up; u.found() && u.shape.size() == 2 && c.intermediate_size > 0 &&
                                  u.shape[0] != c.intermediate_size &&
                                  !(!have->has_gate && u.shape[0] == 2 * c.intermediate_size))
      fail(src, key("intermediate_size") + " = " + str(c.intermediate_size) + " but " + u.name + " has " +
                    str(u.shape[0]) + " rows");
  }
  // Then bounds no model comes near, so nothing is sized by a wild number.
  auto range = [&](int64_t v, const std::string& name, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      fail(src, name + " = " + str(v) + " is out of range (" + str(lo) + " to " + str(hi) + ")");
  };
  constexpr int64_t K = 1024;
  range(c.vocab_size, key("vocab_size"), 0, 16 * K * K);
  range(c.hidden_size, key("hidden_size"), 0, 256 * K);
  range(c.n_layers, key("n_layers"), 0, 16 * K);
  range(c.n_heads, key("n_heads"), 0, 16 * K);
  range(c.n_kv_heads, key("n_kv_heads"), 0, 16 * K);
  range(c.head_dim, key("head_dim"), 0, 16 * K);
  range(c.intermediate_size, key("intermediate_size"), 0, K * K);
  range(c.max_position_embeddings, key("max_position_embeddings"), 0, int64_t{1} << 32);
  range(c.sliding_window, key("sliding_window"), 0, int64_t{1} << 32);
  range(c.n_experts, key("n_experts"), 0, 64 * K);
  range(c.n_experts_per_tok, "num_experts_per_tok", 0, std::max<int64_t>(c.n_experts, 0));
  range(c.moe_intermediate_size, "moe_intermediate_size", 0, K * K);
  range(c.shared_expert_intermediate_size, "shared_expert_intermediate_size", 0, K * K);
  range(c.n_shared_experts, "n_shared_experts", 0, K);
  range(c.first_k_dense_replace, "first_k_dense_replace", 0, std::max<int64_t>(c.n_layers, 0));
  range(c.moe_layer_freq, "decoder_sparse_step", 0, std::max<int64_t>(c.n_layers, 1));
  range(c.n_group, "n_group", 0, std::max<int64_t>(c.n_experts, 0));
  range(c.topk_group, "topk_group", 0, std::max<int64_t>(c.n_group, 0));
  for (const auto& [v, name] : {std::pair{c.q_lora_rank, "q_lora_rank"}, {c.kv_lora_rank, "kv_lora_rank"},
                                {c.qk_rope_head_dim, "qk_rope_head_dim"}, {c.qk_nope_head_dim, "qk_nope_head_dim"},
                                {c.v_head_dim, "v_head_dim"}})
    range(v, name, 0, 64 * K);
  range(c.conv_kernel, "conv_L_cache", 0, K);
  range(c.ssm_inner, "mamba_expand * hidden_size", 0, 1024 * K);
  range(c.ssm_state, "mamba_d_state", 0, 64 * K);
  range(c.ssm_dt_rank, "mamba_dt_rank", 0, 64 * K);
  range(c.ssm_groups, "n_groups", 0, 64 * K);
  for (int64_t l : c.mlp_only_layers) range(l, "mlp_only_layers[]", 0, std::max<int64_t>(c.n_layers - 1, 0));
  if (!(c.partial_rotary_factor >= 0 && c.partial_rotary_factor <= 1))
    fail(src, "partial_rotary_factor = " + std::to_string(c.partial_rotary_factor) + " is out of range (0 to 1)");
  if (!(c.rope_theta > 0 && std::isfinite(c.rope_theta)))
    fail(src, "rope_theta = " + std::to_string(c.rope_theta) + " is not a positive number");
}

GenerationConfig load_generation_config(const std::string& path) {
  GenerationConfig g;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "generation_config.json").string() : path;
  if (!fs::exists(file)) return g;
  const json j = read_json_file(file);
  g.eos_token_ids = id_list(find_key(j, {"eos_token_id"}));
  g.bos_token_id = get_int(j, {"bos_token_id"}, -1, file);
  g.do_sample = get_bool(j, {"do_sample"}, false);
  g.temperature = get_num(j, {"temperature"}, 1.0, file);
  g.top_k = get_int(j, {"top_k"}, 0, file);
  g.top_p = get_num(j, {"top_p"}, 1.0, file);
  g.repetition_penalty = get_num(j, {"repetition_penalty"}, 1.0, file);
  g.max_new_tokens = get_int(j, {"max_new_tokens"}, 0, file);
  return g;
}

}  // namespace bonfire
