#include "model/families/decoder.h"

#include "core/error.h"
#include "model/config_keys.h"
#include "ops/rope.h"

#include <algorithm>
#include <cmath>

namespace bonfire::families {

namespace {

// {"per_layer": [...]} when the values differ, else the one value.
template <typename T>
json per_layer(const std::vector<T>& v) {
  for (const auto& x : v)
    if (x != v.front()) return {{"per_layer", v}};
  return v.front();
}

json apply_on(const std::vector<bool>& on) {
  bool all = true, none = true;
  for (bool b : on) (b ? none : all) = false;
  if (all) return true;
  if (none) return false;
  return {{"per_layer", on}};
}

class Nodes {
 public:
  explicit Nodes(const DecoderSpec& s) : s_(s) {}
  void add(json node) { nodes_.push_back(std::move(node)); }
  json& last() { return nodes_.back(); }
  // A norm node; `prefix` is a name under the layer prefix unless `in_layer` is false.
  json norm_node(const std::string& in, const std::string& out, const std::string& prefix, bool in_layer = true) const {
    const std::string base = (in_layer ? s_.layer : "") + prefix;
    if (s_.norm == "layernorm")
      return {{"op", "layernorm"}, {"in", {in}}, {"out", out}, {"weight", base + ".weight"},
              {"bias", base + ".bias"}, {"eps", s_.eps}};
    json n = {{"op", "rmsnorm"}, {"in", {in}}, {"out", out}, {"weight", base + ".weight"}, {"eps", s_.eps}};
    if (s_.norm_offset != 0) n["weight_offset"] = s_.norm_offset;
    return n;
  }
  json take() { return std::move(nodes_); }

 private:
  const DecoderSpec& s_;
  json nodes_ = json::array();
};

json rope_node(const DecoderSpec& s, const std::vector<std::string>& names, int64_t heads, int64_t kv_heads,
               int64_t head_dim, int64_t n_rot) {
  json n = {{"op", "rope"}, {"in", names}, {"out", names}, {"heads", heads}, {"head_dim", head_dim},
            {"theta", per_layer(s.theta)}, {"pairing", s.pairing},
            {"rope_heads", n_rot == head_dim ? "all" : "first"}};
  if (names.size() > 1) n["kv_heads"] = kv_heads;
  if (n_rot != head_dim) n["n_rot"] = n_rot;
  if (!s.freq_factors.is_null()) n["freq_factors"] = s.freq_factors;
  if (std::any_of(s.freq_scale.begin(), s.freq_scale.end(), [](double f) { return f != 1; }))
    n["freq_scale"] = per_layer(s.freq_scale);
  if (s.attn_factor != 1) n["attn_factor"] = s.attn_factor;
  return n;
}

class Block {
 public:
  Block(const DecoderSpec& s, Nodes& n) : s_(s), n_(n) {}

  // Adds a node that runs only where `apply` says.
  void add(json node, const json& apply) {
    if (apply != json(true)) node["apply"] = apply;
    n_.add(std::move(node));
  }
  json linear(const std::string& in, const std::string& out, const std::string& name, bool bias) {
    json n = {{"op", "linear"}, {"in", {in}}, {"out", out}, {"weight", s_.layer + name + ".weight"}};
    if (bias) n["bias"] = s_.layer + name + ".bias";
    return n;
  }
  json rmsnorm(const std::string& in, const std::string& out, const std::string& name, int64_t group = 0) {
    json n = {{"op", "rmsnorm"}, {"in", {in}}, {"out", out}, {"weight", s_.layer + name + ".weight"}, {"eps", s_.eps}};
    if (s_.norm_offset != 0) n["weight_offset"] = s_.norm_offset;
    if (group > 0) n["group"] = group;
    return n;
  }
  static json op(const std::string& o, std::vector<std::string> in, const std::string& out) {
    return {{"op", o}, {"in", in}, {"out", out}};
  }
  json attention_node(const std::string& state) const {
    json a = {{"op", "attention"}, {"in", {"q", "k", "v"}}, {"out", "attn"}, {"state", state},
              {"heads", s_.heads}, {"kv_heads", s_.kv_heads}, {"head_dim", s_.head_dim},
              {"scale", s_.scale > 0 ? s_.scale : 1 / std::sqrt(double(s_.head_dim))}, {"causal", true},
              {"window", per_layer(s_.window)}, {"sinks", 0}};
    if (s_.softcap > 0) a["softcap"] = s_.softcap;
    if (s_.alibi) a["softmax"] = "alibi";
    return a;
  }

  // `in` is the normed hidden state ("h"), or "x" itself when the layer has no pre-norm.
  void attention(const json& on, const std::string& in) {
    const int64_t H = s_.heads, KV = s_.kv_heads, hd = s_.head_dim;
    if (!s_.fused.weight.empty()) {
      json lin = {{"op", "linear"}, {"in", {in}}, {"out", "qkv"}, {"weight", s_.layer + s_.fused.weight}};
      if (!s_.fused.bias.empty()) lin["bias"] = s_.layer + s_.fused.bias;
      add(lin, on);
      json split = {{"op", "split"}, {"in", {"qkv"}}, {"out", {"q", "k", "v"}}, {"sizes", s_.fused.sizes}};
      if (s_.fused.groups > 1) split["groups"] = s_.fused.groups;
      add(split, on);
    } else {
      add(linear(in, "q", s_.q, s_.qkv_bias), on);
      add(linear(in, "k", s_.k, s_.qkv_bias), on);
      add(linear(in, "v", s_.v, s_.qkv_bias), on);
    }
    if (!s_.q_norm.empty()) {
      add(rmsnorm("q", "q", s_.q_norm, s_.qk_norm_per_head ? hd : 0), on);
      add(rmsnorm("k", "k", s_.k_norm, s_.qk_norm_per_head ? hd : 0), on);
    }
    if (s_.n_rot > 0) add(rope_node(s_, {"q", "k"}, H, KV, hd, s_.n_rot), on);
    add(attention_node("kv"), on);
  }

  // DeepSeek: low-rank q (or a plain q_proj), the compressed kv latent and
  // its shared rotary key part.
  void mla(const json& on, const std::string& in) {
    const int64_t H = s_.heads;
    if (s_.q_lora_rank > 0) {
      add(linear(in, "qa", "self_attn.q_a_proj", false), on);
      add(rmsnorm("qa", "qa", "self_attn.q_a_layernorm"), on);
      add(linear("qa", "q", "self_attn.q_b_proj", false), on);
    } else {
      add(linear(in, "q", "self_attn.q_proj", false), on);
    }
    add({{"op", "split"}, {"in", {"q"}}, {"out", {"q_nope", "q_pe"}}, {"sizes", {s_.qk_nope, s_.qk_rope}},
         {"groups", H}}, on);
    add(linear(in, "kva", "self_attn.kv_a_proj_with_mqa", false), on);
    add({{"op", "split"}, {"in", {"kva"}}, {"out", {"c", "k_pe"}}, {"sizes", {s_.kv_lora_rank, s_.qk_rope}}}, on);
    add(rmsnorm("c", "c", "self_attn.kv_a_layernorm"), on);
    add(rope_node(s_, {"q_pe", "k_pe"}, H, 1, s_.qk_rope, s_.qk_rope), on);
    const std::string kv_b = s_.layer + "self_attn.kv_b_proj.weight";
    add({{"op", "mla_attention"}, {"in", {"q_nope", "q_pe", "c", "k_pe"}}, {"out", "attn"}, {"state", "kv"},
         {"heads", H}, {"kv_rank", s_.kv_lora_rank}, {"qk_nope", s_.qk_nope}, {"qk_rope", s_.qk_rope},
         {"v_head_dim", s_.v_head_dim}, {"k_b", kv_b}, {"v_b", kv_b},
         {"scale", s_.scale > 0 ? s_.scale : 1 / std::sqrt(double(s_.qk_nope + s_.qk_rope))}, {"causal", true},
         {"window", 0}, {"sinks", 0}}, on);
  }

  // LFM2's gated short convolution; defines "o" as the attention output does.
  void short_conv(const json& on, const std::string& in) {
    const int64_t d = s_.d;
    add(linear(in, "bcx", s_.conv_in, false), on);
    add({{"op", "split"}, {"in", {"bcx"}}, {"out", {"cb", "cc", "cx"}}, {"sizes", {d, d, d}}}, on);
    add(op("mul", {"cb", "cx"}, "bx"), on);
    add({{"op", "conv1d_causal"}, {"in", {"bx"}}, {"out", "cv"}, {"state", "conv"}, {"weight", s_.layer + s_.conv + ".weight"},
         {"channels", d}, {"kernel", s_.conv_kernel}}, on);
    add(op("mul", {"cc", "cv"}, "cy"), on);
    add(linear("cy", "o", s_.conv_out, false), on);
  }

  // A Mamba mixer (selective scan); defines "o" as the attention output does.
  void mamba(const json& on, const std::string& in) {
    const int64_t DI = s_.ssm_inner, N = s_.ssm_state, R = s_.ssm_dt_rank;
    const std::string m = s_.mamba;
    add(linear(in, "mxz", m + "in_proj", false), on);
    add({{"op", "split"}, {"in", {"mxz"}}, {"out", {"mx", "mz"}}, {"sizes", {DI, DI}}}, on);
    add({{"op", "conv1d_causal"}, {"in", {"mx"}}, {"out", "mx"}, {"state", "mamba_conv"},
         {"weight", s_.layer + m + "conv1d.weight"}, {"bias", s_.layer + m + "conv1d.bias"}, {"channels", DI},
         {"kernel", s_.ssm_conv}}, on);
    add(op("silu", {"mx"}, "mx"), on);
    add(linear("mx", "mdbc", m + "x_proj", false), on);
    add({{"op", "split"}, {"in", {"mdbc"}}, {"out", {"mdt", "mB", "mC"}}, {"sizes", {R, N, N}}}, on);
    if (s_.mamba_norms) {
      add(rmsnorm("mdt", "mdt", m + "dt_layernorm"), on);
      add(rmsnorm("mB", "mB", m + "b_layernorm"), on);
      add(rmsnorm("mC", "mC", m + "c_layernorm"), on);
    }
    add(linear("mdt", "mdt", m + "dt_proj", true), on);
    add({{"op", "selective_scan"}, {"in", {"mx", "mdt", "mB", "mC"}}, {"out", "my"}, {"state", "ssm"},
         {"a", s_.layer + m + "A_log"}, {"d", s_.layer + m + "D"}, {"channels", DI}, {"d_state", N},
         {"dt_softplus", true}}, on);
    add(op("silu", {"mz"}, "mz"), on);
    add(op("mul", {"my", "mz"}, "my"), on);
    add(linear("my", "o", m + "out_proj", false), on);
  }

  void mlp(const std::string& in, const json& on) {
    if (s_.mlp == "gelu" || s_.mlp == "gelu_exact" || s_.mlp == "relu" || s_.mlp == "silu") {
      add(linear(in, "u", s_.up, s_.mlp_bias), on);
      if (s_.mlp == "relu" || s_.mlp == "silu") add(op(s_.mlp, {"u"}, "u"), on);
      else add({{"op", "gelu"}, {"in", {"u"}}, {"out", "u"}, {"approx", s_.mlp == "gelu" ? "tanh" : "none"}}, on);
      add(linear("u", "f", s_.down, s_.mlp_bias), on);
      return;
    }
    if (s_.mlp == "fused_swiglu") {
      add(linear(in, "gu", s_.gate, false), on);
      add({{"op", "split"}, {"in", {"gu"}}, {"out", {"g", "u"}}, {"sizes", {s_.ffn, s_.ffn}}}, on);
    } else {
      add(linear(in, "g", s_.gate, s_.mlp_bias), on);
      add(linear(in, "u", s_.up, s_.mlp_bias), on);
    }
    if (s_.mlp == "geglu")
      add({{"op", "gelu"}, {"in", {"g"}}, {"out", "g"}, {"approx", "tanh"}}, on);
    else
      add(op("silu", {"g"}, "g"), on);
    add(op("mul", {"g", "u"}, "m"), on);
    add(linear("m", "f", s_.down, s_.mlp_bias), on);
  }

  void moe(const std::string& in, const json& on) {
    const std::string sfx = s_.experts_qmoe ? "" : ".weight";
    json m = {{"op", "moe_ffn"}, {"in", {in}}, {"out", "f"}, {"router", s_.layer + s_.router + ".weight"},
              {"experts", {{"gate", s_.layer + s_.expert_gate + sfx}, {"up", s_.layer + s_.expert_up + sfx},
                           {"down", s_.layer + s_.expert_down + sfx}}},
              {"n_experts", s_.n_experts}, {"top_k", s_.top_k}, {"gate_norm", s_.renorm ? "renorm" : "raw"},
              {"activation", "silu"}, {"scoring", s_.scoring}};
    if (!s_.selection_bias.empty()) m["selection_bias"] = s_.layer + s_.selection_bias;
    if (s_.groups > 1) m["groups"] = {{"n", s_.groups}, {"top", s_.top_groups}};
    add(m, on);
    if (s_.routed_scale != 1)
      add({{"op", "affine"}, {"in", {"f"}}, {"out", "f"}, {"scale", s_.routed_scale}, {"shift", 0}}, on);
    if (s_.shared_up.empty()) return;
    add(linear(in, "sg", s_.shared_gate, false), on);
    add(linear(in, "su", s_.shared_up, false), on);
    add(op("silu", {"sg"}, "sg"), on);
    add(op("mul", {"sg", "su"}, "sm"), on);
    add(linear("sm", "sf", s_.shared_down, false), on);
    if (!s_.shared_expert_gate.empty()) {
      add(linear(in, "sgate", s_.shared_expert_gate, false), on);
      add(op("sigmoid", {"sgate"}, "sgate"), on);
      add(op("mul_col", {"sf", "sgate"}, "sf"), on);
    }
    add(op("add", {"f", "sf"}, "f"), on);
  }

 private:
  const DecoderSpec& s_;
  Nodes& n_;
};

json affine(const std::string& in, const std::string& out, double scale, double shift) {
  return {{"op", "affine"}, {"in", {in}}, {"out", out}, {"scale", scale}, {"shift", shift}};
}

}  // namespace

json build_decoder_ir(const DecoderSpec& s, const ModelConfig& c) {
  const int64_t L = s.n_layers;
  // Embedding.
  Nodes embed(s);
  embed.add({{"op", "embedding"}, {"in", {"tokens"}}, {"out", "x"}, {"weight", s.embed}});
  if (!s.pos_embed.empty()) {
    embed.add({{"op", "pos_embedding"}, {"in", json::array()}, {"out", "p"}, {"weight", s.pos_embed}});
    embed.add(Block::op("add", {"x", "p"}, "x"));
  }
  if (s.embed_scale != 1) embed.add(affine("x", "x", s.embed_scale, 0));
  if (!s.embed_norm.empty()) embed.add(embed.norm_node("x", "x", s.embed_norm, false));

  // The block.
  Nodes nodes(s);
  Block b(s, nodes);
  std::vector<bool> dense_on(L), moe_on(L);
  for (int64_t l = 0; l < L; ++l) {
    moe_on[l] = s.moe_layer.size() == size_t(L) && s.moe_layer[l];
    dense_on[l] = !moe_on[l];
  }
  const json always = true;
  // Each layer mixes tokens by attention, or by LFM2's convolution, or by Mamba.
  std::vector<bool> attn_on(L, true), conv_on(L, false), mamba_on(L, false);
  for (int64_t l = 0; l < L; ++l) {
    conv_on[l] = s.conv_layer.size() == size_t(L) && s.conv_layer[l];
    mamba_on[l] = s.mamba_layer.size() == size_t(L) && s.mamba_layer[l];
    attn_on[l] = !conv_on[l] && !mamba_on[l];
  }
  const json attn_apply = apply_on(attn_on), conv_apply = apply_on(conv_on), mamba_apply = apply_on(mamba_on);
  // Without a pre-norm (OLMo 2) the sublayers read x itself.
  const std::string h = s.attn_norm.empty() ? "x" : "h";
  if (!s.attn_norm.empty()) b.add(nodes.norm_node("x", "h", s.attn_norm), always);
  if (attn_apply != json(false)) {
    if (s.mla)
      b.mla(attn_apply, h);
    else
      b.attention(attn_apply, h);
    b.add(b.linear("attn", "o", s.o, s.o_bias), attn_apply);
  }
  if (conv_apply != json(false)) b.short_conv(conv_apply, h);
  if (mamba_apply != json(false)) b.mamba(mamba_apply, h);
  if (!s.post_attn_norm.empty()) b.add(nodes.norm_node("o", "o", s.post_attn_norm), always);
  if (s.residual_scale != 1) b.add(affine("o", "o", s.residual_scale, 0), always);
  std::string mlp_in = s.ffn_norm.empty() ? "x" : "h2";
  if (s.parallel.empty()) {
    b.add(Block::op("add", {"x", "o"}, "x"), always);
    if (!s.ffn_norm.empty()) b.add(nodes.norm_node("x", "h2", s.ffn_norm), always);
  } else if (s.parallel == "shared") {
    mlp_in = h;
  } else {
    b.add(nodes.norm_node("x", "h2", s.ffn_norm), always);
  }
  if (std::find(dense_on.begin(), dense_on.end(), true) != dense_on.end()) b.mlp(mlp_in, apply_on(dense_on));
  if (std::find(moe_on.begin(), moe_on.end(), true) != moe_on.end()) b.moe(mlp_in, apply_on(moe_on));
  if (!s.post_ffn_norm.empty()) b.add(nodes.norm_node("f", "f", s.post_ffn_norm), always);
  if (s.residual_scale != 1) b.add(affine("f", "f", s.residual_scale, 0), always);
  if (!s.parallel.empty()) b.add(Block::op("add", {"x", "o"}, "x"), always);
  b.add(Block::op("add", {"x", "f"}, "x"), always);

  // State: one kv slot (MLA caches the latent).
  json state = json::array();
  std::vector<int64_t> max_len(L, s.ctx);
  if (s.mla)
    state.push_back({{"name", "kv"}, {"kind", "kv"}, {"heads", 1}, {"kv_heads", 1},
                     {"head_dim", s.kv_lora_rank + s.qk_rope}, {"max_len", s.ctx}, {"window", 0}, {"sinks", 0}});
  else
    state.push_back({{"name", "kv"}, {"kind", "kv"}, {"heads", s.heads}, {"kv_heads", s.kv_heads},
                     {"head_dim", s.head_dim}, {"max_len", s.ctx}, {"window", per_layer(s.window)}, {"sinks", 0}});

  if (conv_apply != json(false))
    state.push_back({{"name", "conv"}, {"kind", "recurrent"}, {"op", "conv1d_causal"}, {"dtype", "f32"},
                     {"tensors", {{{"name", "conv"}, {"shape", {s.conv_kernel - 1, s.d}}, {"init", 0}}}}});
  if (mamba_apply != json(false)) {
    state.push_back({{"name", "mamba_conv"}, {"kind", "recurrent"}, {"op", "conv1d_causal"}, {"dtype", "f32"},
                     {"tensors", {{{"name", "conv"}, {"shape", {s.ssm_conv - 1, s.ssm_inner}}, {"init", 0}}}}});
    state.push_back({{"name", "ssm"}, {"kind", "recurrent"}, {"op", "selective_scan"}, {"dtype", "f32"},
                     {"tensors", {{{"name", "h"}, {"shape", {s.ssm_inner, s.ssm_state}}, {"init", 0}}}}});
  }

  // Head.
  Nodes head(s);
  head.add(head.norm_node("x", "x", s.final_norm, false));
  head.add({{"op", "linear"}, {"in", {"x"}}, {"out", "logits"}, {"weight", s.tied ? s.embed : s.lm_head}});
  if (s.tied) head.last()["tied_to"] = s.embed;
  if (s.logit_scale != 1) head.add(affine("logits", "logits", s.logit_scale, 0));
  if (s.final_softcap > 0) {
    // cap·tanh(z/cap) = 2cap·sigmoid(2z/cap) − cap, in ops every worker has.
    head.add(affine("logits", "logits", 2 / s.final_softcap, 0));
    head.add(Block::op("sigmoid", {"logits"}, "logits"));
    head.add(affine("logits", "logits", 2 * s.final_softcap, -s.final_softcap));
  }

  json doc = {{"ir_version", 1},
              {"family_hint", s.family},
              {"model", {{"vocab", s.vocab}, {"d", s.d}, {"n_layers", L}, {"ctx", s.ctx}}},
              {"inputs", {"tokens"}},
              {"outputs", {"logits"}},
              {"modes", {{"prefill", "T prompt tokens at positions pos..pos+T-1; fills the caches"},
                         {"decode", "one token at position pos"}}},
              {"embed", {{"nodes", embed.take()}}},
              {"block", {{"repeat", L}, {"state", state}, {"nodes", nodes.take()}}},
              {"head", {{"nodes", head.take()}}}};
  // Stateful nodes that run on some layers only: the layer_apply extension.
  auto some_layers = [](const json& apply) { return apply != json(true) && apply != json(false); };
  if (some_layers(attn_apply) || some_layers(conv_apply) || some_layers(mamba_apply))
    doc["extensions"] = {{"layer_apply", 1}};
  doc["tokenizer"] = tokenizer_block(c);
  return doc;
}

json tokenizer_block(const ModelConfig& c) {
  json tok = {{"type", "bpe"}, {"source", "tokenizer.json"}};
  tok["bos"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  json specials = json::object();
  if (!c.eos_token_ids.empty()) specials["eos"] = c.eos_token_ids.front();
  if (c.bos_token_id >= 0) specials["bos"] = c.bos_token_id;
  if (c.pad_token_id >= 0) specials["pad"] = c.pad_token_id;
  tok["specials"] = specials;
  return tok;
}

std::string plain_mlp(const ModelConfig& c, const std::string& act, const char* key) {
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return "gelu";
  if (act == "gelu" || act == "gelu_python") return "gelu_exact";
  if (act == "relu") return "relu";
  if (act == "silu" || act == "swish") return "silu";
  throw Error(ErrorCode::BadGraph, c.source + ": " + key + " \"" + bounded_text(act, 64) + "\" is not supported for " +
                                       c.family + " (gelu_new, gelu_pytorch_tanh, gelu_fast, gelu, relu, silu)");
}

DecoderSpec llama_like(const ModelConfig& c) {
  DecoderSpec s;
  s.family = c.family;
  s.vocab = c.vocab_size;
  s.d = c.hidden_size;
  s.n_layers = c.n_layers;
  s.ctx = c.max_position_embeddings > 0 ? c.max_position_embeddings : 4096;
  s.eps = c.norm_eps;
  s.heads = c.n_heads;
  s.kv_heads = c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads;
  s.head_dim = c.head_dim > 0 ? c.head_dim : c.hidden_size / c.n_heads;
  s.n_rot = static_cast<int64_t>(std::llround(s.head_dim * c.partial_rotary_factor));
  s.theta.assign(c.n_layers, c.rope_theta);
  s.window.assign(c.n_layers, 0);
  // transformers' llama-like attention gives o_proj a bias too when
  // attention_bias is set (Qwen 2's fixed q/k/v biases are its module's).
  s.qkv_bias = s.o_bias = c.attention_bias;
  s.mlp_bias = c.mlp_bias;
  s.tied = c.tie_word_embeddings;
  s.moe_layer.assign(c.n_layers, false);
  // A window as long as the context is full attention.
  if (c.sliding_window > 0 && c.sliding_window < s.ctx)
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (c.layer_types.empty() || c.layer_types[l] == "sliding_attention") s.window[l] = c.sliding_window;
  set_rope_scaling(s, c);
  return s;
}

// A config.json's rope_scaling with what transformers reads beside it (the
// context lengths), checked as the rope op checks its scaling: an unknown
// type, a factor that is no positive number or a string where a number
// belongs is refused naming the key, never read as plain rope.
json checked_hf_rope_scaling(const ModelConfig& c, int64_t n_rot) {
  json rs = c.rope_scaling;
  const std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  if (!rs.contains("max_position_embeddings") && c.max_position_embeddings > 0)
    rs["max_position_embeddings"] = c.max_position_embeddings;
  if (type == "longrope" || type == "su") {
    rs["rope_type"] = "longrope";
    // Phi-3's config keeps the original context at the top level (default
    // 4096); elsewhere it falls back to the current one (yarn's, in the op).
    if (!rs.contains("original_max_position_embeddings")) {
      const json* top = cfg::find_key(c.raw, {"original_max_position_embeddings"});
      rs["original_max_position_embeddings"] =
          top ? *top : json(c.family == "phi3" ? int64_t(4096) : c.max_position_embeddings);
    }
    const int64_t half = n_rot / 2;  // the factors are tensors to the loader; the op wants their count
    if (!rs.contains("long_factor")) rs["long_factor"] = std::vector<double>(half, 1.0);
    if (!rs.contains("short_factor")) rs["short_factor"] = std::vector<double>(half, 1.0);
  }
  float attention = 1;
  try {
    rope_inv_freq(rs, c.rope_theta, n_rot, 1, &attention);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("param scaling", 0) == 0) why = "rope_scaling" + why.substr(13);
    throw Error(ErrorCode::BadGraph, c.source + ": " + why);
  }
  return rs;
}

void set_rope_scaling(DecoderSpec& s, const ModelConfig& c) {
  if (!c.rope_scaling.is_object() || s.n_rot == 0) return;
  // A GGUF file's scaling comes from the converter's keys, checked on load.
  const json rs = c.raw.is_object() ? checked_hf_rope_scaling(c, s.n_rot) : c.rope_scaling;
  const std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
  const double theta = c.rope_theta;
  if (type == "linear") {
    s.freq_scale.assign(s.n_layers, 1 / rs.value("factor", 1.0));
  } else if (type == "llama3" && !rs.contains("factor")) {
    // A GGUF file: the converter kept Llama 3's factors only as this tensor.
    s.freq_factors = "rope_freqs.weight";
  } else if (type == "llama3" || type == "yarn") {
    // Position-independent: the ratio to the plain frequencies, per frequency.
    float attention = 1;
    const std::vector<float> plain = rope_inv_freq(nullptr, theta, s.n_rot, 1, &attention);
    const std::vector<float> scaled = rope_inv_freq(rs, theta, s.n_rot, 1, &attention);
    json f = json::array();
    for (size_t j = 0; j < plain.size(); ++j) f.push_back(double(plain[j]) / double(scaled[j]));
    s.freq_factors = f;
    s.attn_factor = attention;
  } else if (type == "longrope" || type == "su") {
    // Short factors within the original context, long ones beyond it: the
    // loader provides both as tensors (GGUF names), the lowering chooses.
    const int64_t orig = rs.contains("original_max_position_embeddings")
                             ? int64_t(rs["original_max_position_embeddings"].get<double>())
                             : int64_t(0);
    s.freq_factors = {{"short", "rope_factors_short.weight"}, {"long", "rope_factors_long.weight"},
                      {"original_ctx", orig}};
    const double f = orig > 0 ? double(c.max_position_embeddings) / double(orig) : rs.value("factor", 1.0);
    s.attn_factor = rs.contains("attention_factor") && !rs["attention_factor"].is_null()
                        ? rs["attention_factor"].get<double>()
                    : f <= 1                        ? 1.0
                                                    : std::sqrt(1 + std::log(f) / std::log(double(orig)));
  }
  // "dynamic" (NTK) changes frequencies only past max_position_embeddings,
  // which is the document's ctx: within it, the plain frequencies are exact.
}

}  // namespace bonfire::families
