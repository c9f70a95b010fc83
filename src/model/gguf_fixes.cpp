#include "model/gguf_fixes.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace bonfire::gguf_fix {

const GgufRenames& decoder_block() {
  static const GgufRenames r = {
      {"attn_norm", "input_layernorm"},     {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},       {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},  {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},  {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  return r;
}

const GgufRenames& decoder_global() {
  static const GgufRenames r = {{"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  return r;
}

const GgufRenames& moe_experts() {
  static const GgufRenames r = {
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_exps", "mlp.experts.{e}.gate_proj"},
      {"ffn_up_exps", "mlp.experts.{e}.up_proj"},
      {"ffn_down_exps", "mlp.experts.{e}.down_proj"},
  };
  return r;
}

GgufRenames join(std::initializer_list<GgufRenames> parts) {
  GgufRenames out;
  for (const GgufRenames& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void fail(const GgufFile& f, const std::string& what) { throw Error(ErrorCode::BadGraph, f.name() + ": " + what); }

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
    fail(f, "metadata \"" + key + "\" must be a positive integer, not " +
                v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return v->get<int64_t>();
}

Tensor reorder_rows(const GgufTensorFix& in, const Tensor& t, const std::function<int64_t(int64_t)>& src_of) {
  const GgufFile& f = in.file;
  const std::string& name = in.gguf_name;
  int64_t units;
  if (t.shape.size() == 1) {
    if (dtype_block(t.dtype) != 1) fail(f, "tensor \"" + name + "\" is a packed vector; its rows cannot be reordered");
    units = t.numel();
  } else {
    units = t.rows();
  }
  if (in.options.lowering_only) return t;
  const int64_t bytes = t.nbytes(), unit = bytes / units;
  void* p = std::aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  if (!p) throw std::bad_alloc();
  std::shared_ptr<void> owner(p, std::free);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < units; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * unit, src + src_of(r) * unit, unit);
  return Tensor::view(t.dtype, t.shape, p, owner);
}

namespace {

int64_t units_of(const Tensor& t) { return t.shape.size() == 1 ? t.numel() : t.rows(); }

}  // namespace

// Row h*hd + j*hd/2 + i (HF's half-split pairs) went to h*hd + 2i + j.
void unpermute_rope(const GgufTensorFix& in, std::string&, Tensor& t) {
  const bool is_q = in.rest == "attn_q.weight" || in.rest == "attn_q.bias";
  const bool is_k = in.rest == "attn_k.weight" || in.rest == "attn_k.bias";
  if (!in.options.hf_layout || !(is_q || is_k)) return;
  const int64_t heads = layer_count(in.file, in.arch + ".attention.head_count", in.layer, 0);
  const int64_t n = is_q ? heads : layer_count(in.file, in.arch + ".attention.head_count_kv", in.layer, heads);
  const int64_t rows = units_of(t);
  if (rows % n != 0 || (rows / n) % 2 != 0)
    fail(in.file, "tensor \"" + in.gguf_name + "\" has " + std::to_string(rows) + " rows, not " + std::to_string(n) +
                      " heads of an even size");
  const int64_t hd = rows / n, half = hd / 2;
  t = reorder_rows(in, t, [=](int64_t r) {
    const int64_t h = r / hd, j = (r % hd) / half, i = r % half;
    return h * hd + 2 * i + j;
  });
}

void ungroup_qkv(const GgufTensorFix& in, std::string&, Tensor& t) {
  if (!in.options.hf_layout || (in.rest != "attn_qkv.weight" && in.rest != "attn_qkv.bias")) return;
  const int64_t heads = layer_count(in.file, in.arch + ".attention.head_count", in.layer, 0);
  const int64_t rows = units_of(t);
  if (rows % (3 * heads) != 0)
    fail(in.file, "tensor \"" + in.gguf_name + "\" has " + std::to_string(rows) + " rows, not 3 x " +
                      std::to_string(heads) + " heads");
  const int64_t hd = rows / (3 * heads), embd = heads * hd;
  t = reorder_rows(in, t, [=](int64_t r) {
    const int64_t h = r / (3 * hd), s = (r / hd) % 3, i = r % hd;
    return s * embd + h * hd + i;
  });
}

void unsqueeze_conv(Tensor& t) {
  if (t.shape.size() == 2) t.shape = {t.shape[0], 1, t.shape[1]};
}

Tensor a_log_of(const GgufFile& f, const std::string& name, const Tensor& a) {
  Tensor out = to_f32(a);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float v = out.f32()[i];
    if (!(v < 0)) fail(f, "tensor \"" + name + "\" holds A = -exp(A_log), which must be negative, got " + std::to_string(v));
    out.f32()[i] = std::log(-v);
  }
  return out;
}

}  // namespace bonfire::gguf_fix
