#include "model/gguf_names.h"

#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <vector>

#include "core/error.h"

namespace bonfire {

namespace {

// One GGUF name (without "blk.N." and without its ".weight"/".bias" suffix,
// unless the suffix itself is renamed) and its HF counterpart.
struct Rule {
  const char* gguf;
  const char* hf;
};

struct ArchNames {
  const char* block_prefix;  // HF prefix of layer N, before N
  std::vector<Rule> global;
  std::vector<Rule> block;
};

using Rules = std::vector<Rule>;

// The transformers decoder layout most archs share.
const Rules kDecoderBlock = {
    {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},       {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},  {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},  {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
const Rules kDecoderGlobal = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

const Rules kMoeExperts = {
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_exps", "mlp.experts.{e}.gate_proj"},
    {"ffn_up_exps", "mlp.experts.{e}.up_proj"},
    {"ffn_down_exps", "mlp.experts.{e}.down_proj"},
};

Rules join(std::initializer_list<Rules> parts) {
  Rules out;
  for (const Rules& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const std::map<std::string, ArchNames>& arch_table() {
  static const std::map<std::string, ArchNames> table = [] {
    std::map<std::string, ArchNames> t;
    const Rules mixtral = {
        {"ffn_gate_inp", "block_sparse_moe.gate"},
        {"ffn_gate_exps", "block_sparse_moe.experts.{e}.w1"},
        {"ffn_down_exps", "block_sparse_moe.experts.{e}.w2"},
        {"ffn_up_exps", "block_sparse_moe.experts.{e}.w3"},
    };
    const Rules shared_expert = {
        {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
        {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
        {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
        {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    };
    // Gemma 2 and 3 norm around both sublayers; "post_attention_layernorm"
    // is the attention output's norm there, not the FFN input's.
    const Rules gemma2_block = {
        {"attn_norm", "input_layernorm"},         {"attn_q", "self_attn.q_proj"},
        {"attn_k", "self_attn.k_proj"},           {"attn_v", "self_attn.v_proj"},
        {"attn_output", "self_attn.o_proj"},      {"attn_q_norm", "self_attn.q_norm"},
        {"attn_k_norm", "self_attn.k_norm"},      {"post_attention_norm", "post_attention_layernorm"},
        {"ffn_norm", "pre_feedforward_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
        {"ffn_gate", "mlp.gate_proj"},            {"ffn_up", "mlp.up_proj"},
        {"ffn_down", "mlp.down_proj"},
    };
    // OLMo 2 norms the sublayers' outputs only: its post_attention_layernorm
    // is the attention output's norm (GGUF post_attention_norm).
    const Rules olmo2_block = {
        {"attn_q", "self_attn.q_proj"},           {"attn_k", "self_attn.k_proj"},
        {"attn_v", "self_attn.v_proj"},           {"attn_output", "self_attn.o_proj"},
        {"attn_q_norm", "self_attn.q_norm"},      {"attn_k_norm", "self_attn.k_norm"},
        {"post_attention_norm", "post_attention_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
        {"ffn_gate", "mlp.gate_proj"},            {"ffn_up", "mlp.up_proj"},
        {"ffn_down", "mlp.down_proj"},
    };
    t["llama"] = {"model.layers.", kDecoderGlobal, join({kDecoderBlock, mixtral})};
    t["olmo2"] = {"model.layers.", kDecoderGlobal, olmo2_block};
    t["command-r"] = {"model.layers.", kDecoderGlobal, kDecoderBlock};
    t["mamba2"] = {"backbone.layers.",
                   {{"token_embd", "backbone.embeddings"}, {"output_norm", "backbone.norm_f"}, {"output", "lm_head"}},
                   {{"attn_norm", "norm"},
                    {"ssm_in", "mixer.in_proj"},
                    {"ssm_conv1d", "mixer.conv1d"},
                    {"ssm_dt.bias", "mixer.dt_bias"},  // whole names: the suffix itself is renamed
                    {"ssm_a", "mixer.A_log"},
                    {"ssm_d", "mixer.D"},
                    {"ssm_norm", "mixer.norm"},
                    {"ssm_out", "mixer.out_proj"}}};
    t["jamba"] = {"model.layers.",
                  {{"token_embd", "model.embed_tokens"}, {"output_norm", "model.final_layernorm"}, {"output", "lm_head"}},
                  join({{{"attn_norm", "input_layernorm"},
                         {"attn_q", "self_attn.q_proj"},
                         {"attn_k", "self_attn.k_proj"},
                         {"attn_v", "self_attn.v_proj"},
                         {"attn_output", "self_attn.o_proj"},
                         {"ffn_norm", "pre_ff_layernorm"},
                         {"ssm_in", "mamba.in_proj"},
                         {"ssm_conv1d", "mamba.conv1d"},
                         {"ssm_x", "mamba.x_proj"},
                         {"ssm_dt", "mamba.dt_proj"},
                         {"ssm_a", "mamba.A_log"},  // whole names: no ".weight"; A = -exp(A_log) undone on load
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
                         {"ffn_down", "feed_forward.down_proj"}}})};
    t["starcoder2"] = {"model.layers.", kDecoderGlobal,
                       {{"attn_norm", "input_layernorm"},
                        {"attn_q", "self_attn.q_proj"},
                        {"attn_k", "self_attn.k_proj"},
                        {"attn_v", "self_attn.v_proj"},
                        {"attn_output", "self_attn.o_proj"},
                        {"ffn_norm", "post_attention_layernorm"},
                        {"ffn_up", "mlp.c_fc"},
                        {"ffn_down", "mlp.c_proj"}}};
    t["granite"] = {"model.layers.", kDecoderGlobal, kDecoderBlock};
    t["qwen2"] = {"model.layers.", kDecoderGlobal, kDecoderBlock};
    t["qwen3"] = {"model.layers.", kDecoderGlobal, kDecoderBlock};
    t["qwen2moe"] = {"model.layers.", kDecoderGlobal, join({kDecoderBlock, kMoeExperts, shared_expert})};
    t["qwen3moe"] = {"model.layers.", kDecoderGlobal, join({kDecoderBlock, kMoeExperts})};
    t["olmoe"] = {"model.layers.", kDecoderGlobal, join({kDecoderBlock, kMoeExperts})};
    t["gemma"] = {"model.layers.", kDecoderGlobal, kDecoderBlock};
    t["gemma2"] = {"model.layers.", kDecoderGlobal, gemma2_block};
    t["gemma3"] = {"model.layers.", kDecoderGlobal, gemma2_block};
    t["phi3"] = {"model.layers.", kDecoderGlobal,
                 {{"attn_norm", "input_layernorm"},
                  {"attn_qkv", "self_attn.qkv_proj"},
                  {"attn_output", "self_attn.o_proj"},
                  {"ffn_norm", "post_attention_layernorm"},
                  {"ffn_up", "mlp.gate_up_proj"},
                  {"ffn_down", "mlp.down_proj"}}};
    t["deepseek2"] = {"model.layers.", kDecoderGlobal,
                      join({kDecoderBlock,
                            kMoeExperts,
                            {{"attn_q_a", "self_attn.q_a_proj"},
                             {"attn_q_a_norm", "self_attn.q_a_layernorm"},
                             {"attn_q_b", "self_attn.q_b_proj"},
                             {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
                             {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
                             {"attn_kv_b", "self_attn.kv_b_proj"},
                             {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
                             {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
                             {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
                             {"ffn_down_shexp", "mlp.shared_experts.down_proj"}}})};
    t["lfm2"] = {"model.layers.",
                 {{"token_embd", "model.embed_tokens"}, {"token_embd_norm", "model.embedding_norm"}, {"output", "lm_head"}},
                 {{"attn_norm", "operator_norm"},
                  {"ffn_norm", "ffn_norm"},
                  {"attn_q", "self_attn.q_proj"},
                  {"attn_k", "self_attn.k_proj"},
                  {"attn_v", "self_attn.v_proj"},
                  {"attn_output", "self_attn.out_proj"},
                  {"attn_q_norm", "self_attn.q_layernorm"},
                  {"attn_k_norm", "self_attn.k_layernorm"},
                  {"shortconv.conv", "conv.conv"},
                  {"shortconv.in_proj", "conv.in_proj"},
                  {"shortconv.out_proj", "conv.out_proj"},
                  {"ffn_gate", "feed_forward.w1"},
                  {"ffn_up", "feed_forward.w3"},
                  {"ffn_down", "feed_forward.w2"}}};
    t["gpt2"] = {"transformer.h.",
                 {{"token_embd", "transformer.wte"},
                  {"position_embd", "transformer.wpe"},
                  {"output_norm", "transformer.ln_f"},
                  {"output", "lm_head"}},
                 {{"attn_norm", "ln_1"},
                  {"attn_qkv", "attn.c_attn"},
                  {"attn_output", "attn.c_proj"},
                  {"ffn_norm", "ln_2"},
                  {"ffn_up", "mlp.c_fc"},
                  {"ffn_down", "mlp.c_proj"}}};
    t["gptneox"] = {"gpt_neox.layers.",
                    {{"token_embd", "gpt_neox.embed_in"},
                     {"output_norm", "gpt_neox.final_layer_norm"},
                     {"output", "embed_out"}},
                    {{"attn_norm", "input_layernorm"},
                     {"attn_qkv", "attention.query_key_value"},
                     {"attn_output", "attention.dense"},
                     {"ffn_norm", "post_attention_layernorm"},
                     {"ffn_up", "mlp.dense_h_to_4h"},
                     {"ffn_down", "mlp.dense_4h_to_h"}}};
    // Falcon-7B's single norm; 40B's two (ln_attn, ln_mlp) are resolved per
    // file in load_gguf_weights.
    t["falcon"] = {"transformer.h.",
                   {{"token_embd", "transformer.word_embeddings"},
                    {"output_norm", "transformer.ln_f"},
                    {"output", "lm_head"}},
                   {{"attn_norm", "input_layernorm"},
                    {"attn_norm_2", "ln_attn"},
                    {"attn_qkv", "self_attention.query_key_value"},
                    {"attn_output", "self_attention.dense"},
                    {"ffn_up", "mlp.dense_h_to_4h"},
                    {"ffn_down", "mlp.dense_4h_to_h"}}};
    // Bloom checkpoints are saved from BloomModel: no "transformer." prefix
    // (ModelFiles adds the BloomForCausalLM names the IR uses as aliases).
    t["bloom"] = {"h.",
                  {{"token_embd", "word_embeddings"},
                   {"token_embd_norm", "word_embeddings_layernorm"},
                   {"output_norm", "ln_f"},
                   {"output", "lm_head"}},
                  {{"attn_norm", "input_layernorm"},
                   {"attn_qkv", "self_attention.query_key_value"},
                   {"attn_output", "self_attention.dense"},
                   {"ffn_norm", "post_attention_layernorm"},
                   {"ffn_up", "mlp.dense_h_to_4h"},
                   {"ffn_down", "mlp.dense_4h_to_h"}}};
    t["mpt"] = {"transformer.blocks.",
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
                 {"ffn_down", "ffn.down_proj"}}};
    return t;
  }();
  return table;
}

const char* find_rule(const Rules& rules, const std::string& key) {
  for (const Rule& r : rules)
    if (key == r.gguf) return r.hf;
  return nullptr;
}

// Splits "blk.12.attn_q.weight" into layer 12 and "attn_q.weight"; -1 for a
// name outside the blocks.
int64_t split_layer(const std::string& name, std::string* rest) {
  if (name.compare(0, 4, "blk.") != 0) {
    *rest = name;
    return -1;
  }
  size_t i = 4;
  int64_t layer = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < 100000000) layer = layer * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') {
    *rest = name;
    return -1;
  }
  *rest = name.substr(i + 1);
  return layer;
}

}  // namespace

bool gguf_to_hf_name(const std::string& arch, const std::string& gguf_name, std::string* hf) {
  const auto& table = arch_table();
  auto it = table.find(arch);
  if (it == table.end()) return false;
  const ArchNames& a = it->second;
  std::string rest;
  const int64_t layer = split_layer(gguf_name, &rest);
  const Rules& rules = layer >= 0 ? a.block : a.global;
  const std::string prefix = layer >= 0 ? a.block_prefix + std::to_string(layer) + "." : std::string();
  if (const char* r = find_rule(rules, rest)) {  // the suffix itself is renamed
    *hf = prefix + r;
    return true;
  }
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return false;
  const char* r = find_rule(rules, rest.substr(0, dot));
  if (!r) return false;
  *hf = prefix + r + rest.substr(dot);
  return true;
}

namespace {

[[noreturn]] void fail(const GgufFile& f, const std::string& what) {
  throw Error(ErrorCode::BadGraph, f.name() + ": " + what);
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A positive count from metadata: a number, or a per-layer array.
int64_t layer_count(const GgufFile& f, const std::string& key, int64_t layer, int64_t fallback) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) {
    if (fallback > 0) return fallback;
    fail(f, "metadata \"" + key + "\" is missing (needed to restore Hugging Face's row order)");
  }
  const nlohmann::json* v = &*it;
  if (v->is_array()) {
    if (layer < 0 || (size_t)layer >= v->size()) fail(f, "metadata \"" + key + "\" has no entry for layer " + std::to_string(layer));
    v = &(*v)[(size_t)layer];
  }
  if (!v->is_number_integer() || v->get<int64_t>() <= 0)
    fail(f, "metadata \"" + key + "\" must be a positive integer, not " + v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return v->get<int64_t>();
}

// A packed copy of t whose unit r (a row; an element for 1-D tensors) is the
// source's unit src_of(r).
Tensor reorder_rows(const GgufFile& f, const std::string& name, const Tensor& t,
                    const std::function<int64_t(int64_t)>& src_of) {
  int64_t units;
  if (t.shape.size() == 1) {
    if (dtype_block(t.dtype) != 1) fail(f, "tensor \"" + name + "\" is a packed vector; its rows cannot be reordered");
    units = t.numel();
  } else {
    units = t.rows();
  }
  const int64_t bytes = t.nbytes(), unit = bytes / units;
  void* p = std::aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  std::shared_ptr<void> owner(p, std::free);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < units; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * unit, src + src_of(r) * unit, unit);
  return Tensor::view(t.dtype, t.shape, p, owner);
}

int64_t units_of(const Tensor& t) { return t.shape.size() == 1 ? t.numel() : t.rows(); }

// convert_hf_to_gguf's LlamaModel.permute moved row h*hd + j*hd/2 + i (HF's
// half-split pairs) to h*hd + 2i + j (ggml's interleaved pairs).
Tensor unpermute_rope(const GgufFile& f, const std::string& name, const Tensor& t, int64_t heads) {
  const int64_t rows = units_of(t);
  if (rows % heads != 0 || (rows / heads) % 2 != 0)
    fail(f, "tensor \"" + name + "\" has " + std::to_string(rows) + " rows, not " + std::to_string(heads) +
                " heads of an even size");
  const int64_t hd = rows / heads, half = hd / 2;
  return reorder_rows(f, name, t, [=](int64_t r) {
    const int64_t h = r / hd, j = (r % hd) / half, i = r % half;
    return h * hd + 2 * i + j;
  });
}

// Bloom and GPT-NeoX store q, k, v per head ([h][q|k|v][hd]); the converter
// regrouped them to [q|k|v][h][hd].
Tensor ungroup_qkv(const GgufFile& f, const std::string& name, const Tensor& t, int64_t heads) {
  const int64_t rows = units_of(t);
  if (rows % (3 * heads) != 0)
    fail(f, "tensor \"" + name + "\" has " + std::to_string(rows) + " rows, not 3 x " + std::to_string(heads) + " heads");
  const int64_t hd = rows / (3 * heads), embd = heads * hd;
  return reorder_rows(f, name, t, [=](int64_t r) {
    const int64_t h = r / (3 * hd), s = (r / hd) % 3, i = r % hd;
    return s * embd + h * hd + i;
  });
}

// Falcon stores kv groups [g][q_0..q_{n-1}, k, v][hd]; the converter moved
// all q heads first, then the k heads, then the v heads.
Tensor ungroup_falcon(const GgufFile& f, const std::string& name, const Tensor& t, int64_t heads, int64_t kv) {
  const int64_t rows = units_of(t);
  if (heads % kv != 0 || rows % (heads + 2 * kv) != 0)
    fail(f, "tensor \"" + name + "\" has " + std::to_string(rows) + " rows, which do not split into " +
                std::to_string(heads) + " query and 2 x " + std::to_string(kv) + " kv heads");
  const int64_t hd = rows / (heads + 2 * kv), per = heads / kv, group = (per + 2) * hd;
  return reorder_rows(f, name, t, [=](int64_t r) {
    const int64_t g = r / group, j = (r % group) / hd, i = r % hd;
    if (j < per) return (g * per + j) * hd + i;
    if (j == per) return heads * hd + g * hd + i;
    return heads * hd + kv * hd + g * hd + i;
  });
}

// Gemma's norms were stored as 1 + w.
Tensor unshift_norm(const Tensor& t) {
  Tensor out = to_f32(t);
  for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] -= 1.0f;
  return out;
}

// Mamba's A_log from the A = -exp(A_log) the converter stores (llama.cpp's
// scan takes A), so one document reads a folder and its GGUF alike.
Tensor a_log_of(const GgufFile& f, const std::string& name, const Tensor& a) {
  Tensor out = to_f32(a);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float v = out.f32()[i];
    if (!(v < 0)) fail(f, "tensor \"" + name + "\" holds A = -exp(A_log), which must be negative, got " + std::to_string(v));
    out.f32()[i] = std::log(-v);
  }
  return out;
}

// DeepSeek's kv_b_proj [H*(nope+v), lora], which the converter split into
// attn_k_b [H, lora, nope] (transposed) and attn_v_b [H, v, lora]. Rebuilt
// in f32: these are small next to the experts.
Tensor join_kv_b(const GgufFile& f, const Tensor& kb, const Tensor& vb) {
  if (kb.shape.size() != 3 || vb.shape.size() != 3 || kb.shape[0] != vb.shape[0] || kb.shape[1] != vb.shape[2])
    fail(f, "attn_k_b " + shape_str(kb.shape) + " and attn_v_b " + shape_str(vb.shape) +
                " do not split one kv_b_proj [heads, lora, nope] / [heads, v, lora]");
  const int64_t H = kb.shape[0], lora = kb.shape[1], nope = kb.shape[2], v = vb.shape[1];
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

}  // namespace

WeightStore load_gguf_weights(const GgufFile& file, const GgufLoadOptions& options) {
  const std::string arch = file.architecture();
  const bool rope_permuted = arch == "llama" || arch == "granite";
  const bool qkv_grouped = arch == "bloom" || arch == "gptneox";
  const bool norm_shifted = arch == "gemma" || arch == "gemma2" || arch == "gemma3";
  WeightStore store;
  for (const GgufTensorInfo& ti : file.tensors()) {
    Tensor t = file.tensor(ti);
    std::string hf;
    if (!gguf_to_hf_name(arch, ti.name, &hf)) {
      store.add(ti.name, t, file.name());
      continue;
    }
    std::string rest;
    const int64_t layer = split_layer(ti.name, &rest);
    // Falcon-40B (two norms per layer) names this one ln_mlp.
    if (arch == "falcon" && (rest == "attn_norm.weight" || rest == "attn_norm.bias") &&
        file.find("blk." + std::to_string(layer) + ".attn_norm_2.weight"))
      hf = "transformer.h." + std::to_string(layer) + ".ln_mlp" + rest.substr(rest.find('.'));
    const size_t e = hf.find("{e}");
    if (e != std::string::npos) {
      if (t.shape.size() != 3) fail(file, "tensor \"" + ti.name + "\" should be [experts, rows, cols], is " + shape_str(t.shape));
      const Shape one = {t.shape[1], t.shape[2]};
      const int64_t stride = row_bytes(t.dtype, one[1]) * one[0];
      for (int64_t x = 0; x < t.shape[0]; ++x) {
        std::string name = hf;
        name.replace(e, 3, std::to_string(x));
        store.add(name, Tensor::view(t.dtype, one, static_cast<uint8_t*>(t.data) + x * stride, t.owner), file.name());
      }
      continue;
    }
    if (options.hf_layout) {
      const bool is_q = rest == "attn_q.weight" || rest == "attn_q.bias";
      const bool is_k = rest == "attn_k.weight" || rest == "attn_k.bias";
      const bool is_qkv = rest == "attn_qkv.weight" || rest == "attn_qkv.bias";
      const std::string heads_key = arch + ".attention.head_count";
      if (rope_permuted && (is_q || is_k)) {
        const int64_t heads = layer_count(file, heads_key, layer, 0);
        const int64_t n = is_q ? heads : layer_count(file, arch + ".attention.head_count_kv", layer, heads);
        t = unpermute_rope(file, ti.name, t, n);
      } else if (qkv_grouped && is_qkv) {
        t = ungroup_qkv(file, ti.name, t, layer_count(file, heads_key, layer, 0));
      } else if (arch == "falcon" && is_qkv) {
        const int64_t heads = layer_count(file, heads_key, layer, 0);
        t = ungroup_falcon(file, ti.name, t, heads, layer_count(file, arch + ".attention.head_count_kv", layer, 1));
      } else if (norm_shifted && ends_with(ti.name, "norm.weight")) {
        t = unshift_norm(t);
      } else if (arch == "lfm2" && rest == "shortconv.conv.weight" && t.shape.size() == 2) {
        t.shape = {t.shape[0], 1, t.shape[1]};
      } else if ((arch == "jamba" || arch == "mamba2") && rest == "ssm_conv1d.weight" && t.shape.size() == 2) {
        t.shape = {t.shape[0], 1, t.shape[1]};  // squeezed by the converter
      } else if ((arch == "jamba" || arch == "mamba2") && rest == "ssm_a") {
        t = a_log_of(file, ti.name, t);
        if (arch == "mamba2") t.shape = {t.numel()};  // unsqueezed to [heads, 1] by the converter
      } else if (arch == "mamba2" && (rest == "ssm_d" || rest == "ssm_norm.weight")) {
        t.shape = {t.numel()};  // [heads, 1] and [groups, d_inner / groups] in the file
      }
    }
    store.add(hf, t, file.name());
  }
  if (options.hf_layout && arch == "deepseek2") {
    for (int64_t l = 0;; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const GgufTensorInfo* kb = file.find(p + "attn_k_b.weight");
      const GgufTensorInfo* vb = file.find(p + "attn_v_b.weight");
      if (!kb || !vb) break;
      const std::string name = "model.layers." + std::to_string(l) + ".self_attn.kv_b_proj.weight";
      if (!store.find(name)) store.add(name, join_kv_b(file, file.tensor(*kb), file.tensor(*vb)), file.name());
    }
  }
  return store;
}

}  // namespace bonfire
