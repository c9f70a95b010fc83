// Mamba-2: every layer x + mixer(rmsnorm(x)), the mixer being in_proj → z,
// xBC, dt; xBC = silu(conv1d_causal(xBC) + bias) → x, B, C; y =
// ssd_scan(x, dt, B, C; A_log, D, dt_bias); y = rmsnorm(y ⊙ silu(z));
// out_proj. No attention, no MLP. ssd_scan is the IR extension of the same
// name (docs/IR.md §17).
#include "core/error.h"
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/families/hybrid_keys.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

// Every layer a Mamba-2 mixer (no attention, no MLP).
void read_config(const json& j, ModelConfig& c) {
  const std::string& s = c.source;
  c.norm_eps = get_num(j, {"layer_norm_epsilon", "rms_norm_eps"}, 1e-5, s);
  c.conv_kernel = get_int(j, {"conv_kernel", "d_conv"}, 4, s);
  c.ssm_state = get_int(j, {"state_size", "d_state"}, 128, s);
  c.ssm_inner = get_int(j, {"expand"}, 2, s) * c.hidden_size;
  c.ssm_groups = get_int(j, {"n_groups"}, 1, s);
  c.head_dim = get_int(j, {"head_dim"}, 64, s);
  c.n_heads = c.n_kv_heads = get_int(j, {"num_heads"}, c.head_dim > 0 ? c.ssm_inner / c.head_dim : 0, s);
  c.ssm_dt_rank = c.n_heads;
  if (get_bool(j, {"use_bias"}, false) || !get_bool(j, {"use_conv_bias"}, true) || get_bool(j, {"norm_before_gate"}, false))
    fail(s, "Mamba-2 with use_bias, without use_conv_bias or with norm_before_gate is not supported");
  if (c.n_heads * c.head_dim != c.ssm_inner)
    fail(s, "num_heads " + std::to_string(c.n_heads) + " x head_dim " + std::to_string(c.head_dim) +
                " is not expand x hidden_size = " + std::to_string(c.ssm_inner));
  c.layer_types.assign(c.n_layers, "mamba2");
}

void read_gguf(const GgufKeys& k, ModelConfig& c, const TensorCensus*) {
  read_ssm_keys(k, c);
  // The converter writes head_count 0: the heads are the scan's (time_step_rank).
  c.n_heads = c.n_kv_heads = c.ssm_dt_rank;
  c.head_dim = c.n_heads > 0 ? c.ssm_inner / c.n_heads : 0;
  c.layer_types.assign(c.n_layers, "mamba2");
}

// The converter squeezed the conv weight, stored A = -exp(A_log) as
// [heads, 1], D as [heads, 1] and the gated norm as [groups, d_inner / groups].
void fix_tensor(const GgufTensorFix& in, std::string&, Tensor& t) {
  if (!in.options.hf_layout) return;
  if (in.rest == "ssm_conv1d.weight") gguf_fix::unsqueeze_conv(t);
  if (in.rest == "ssm_a") t = gguf_fix::a_log_of(in.file, in.gguf_name, t);
  if (in.rest == "ssm_a" || in.rest == "ssm_d" || in.rest == "ssm_norm.weight") t.shape = {t.numel()};
}

nlohmann::json document(const ModelConfig& c) {
  using json = nlohmann::json;
  const int64_t DI = c.ssm_inner, N = c.ssm_state, H = c.n_heads, G = c.ssm_groups, K = c.conv_kernel;
  if (DI < 1 || N < 1 || H < 1 || G < 1 || K < 2 || DI % H != 0 || H % G != 0)
    throw Error(ErrorCode::BadGraph, c.source + ": Mamba-2 sizes do not fit (inner " + std::to_string(DI) + ", state " +
                                         std::to_string(N) + ", heads " + std::to_string(H) + ", groups " +
                                         std::to_string(G) + ", conv " + std::to_string(K) + ")");
  // The gated norm's weight is per channel; the IR's grouped rmsnorm shares one
  // weight across groups, so only one group is expressible.
  if (G != 1)
    throw Error(ErrorCode::BadGraph, c.source + ": Mamba-2 with n_groups " + std::to_string(G) +
                                         " is not supported (its per-group gated norm); n_groups 1 is");
  const int64_t XBC = DI + 2 * G * N;
  const std::string l = "backbone.layers.{i}.", m = l + "mixer.";
  auto node = [](const char* op, std::vector<std::string> in, json out) { return json{{"op", op}, {"in", in}, {"out", out}}; };
  json rms = node("rmsnorm", {"x"}, "h");
  rms["weight"] = l + "norm.weight", rms["eps"] = c.norm_eps;
  json in_proj = node("linear", {"h"}, "zxbcdt");
  in_proj["weight"] = m + "in_proj.weight";
  json split1 = node("split", {"zxbcdt"}, json::array({"mz", "mxbc", "mdt"}));
  split1["sizes"] = {DI, XBC, H};
  json conv = node("conv1d_causal", {"mxbc"}, "mxbc");
  conv["state"] = "conv", conv["weight"] = m + "conv1d.weight", conv["bias"] = m + "conv1d.bias";
  conv["channels"] = XBC, conv["kernel"] = K;
  json split2 = node("split", {"mxbc"}, json::array({"mx", "mB", "mC"}));
  split2["sizes"] = {DI, G * N, G * N};
  json scan = node("ssd_scan", {"mx", "mdt", "mB", "mC"}, "my");
  scan["state"] = "ssm", scan["a"] = m + "A_log", scan["d"] = m + "D", scan["dt_bias"] = m + "dt_bias";
  scan["heads"] = H, scan["head_dim"] = DI / H, scan["d_state"] = N;
  json gate_norm = node("rmsnorm", {"my"}, "my");
  gate_norm["weight"] = m + "norm.weight", gate_norm["eps"] = c.norm_eps;
  json out_proj = node("linear", {"my"}, "o");
  out_proj["weight"] = m + "out_proj.weight";
  const json block = json::array({rms, in_proj, split1, conv, node("silu", {"mxbc"}, "mxbc"), split2, scan,
                       node("silu", {"mz"}, "mz"), node("mul", {"my", "mz"}, "my"), gate_norm, out_proj,
                       node("add", {"x", "o"}, "x")});
  json state = json::array(
      {{{"name", "conv"}, {"kind", "recurrent"}, {"op", "conv1d_causal"}, {"dtype", "f32"},
        {"tensors", {{{"name", "conv"}, {"shape", {K - 1, XBC}}, {"init", 0}}}}},
       {{"name", "ssm"}, {"kind", "recurrent"}, {"op", "ssd_scan"}, {"dtype", "f32"},
        {"tensors", {{{"name", "h"}, {"shape", {DI, N}}, {"init", 0}}}}}});
  json embed = node("embedding", {"tokens"}, "x");
  embed["weight"] = "backbone.embeddings.weight";
  json final_norm = node("rmsnorm", {"x"}, "x");
  final_norm["weight"] = "backbone.norm_f.weight", final_norm["eps"] = c.norm_eps;
  json head = node("linear", {"x"}, "logits");
  head["weight"] = c.tie_word_embeddings ? "backbone.embeddings.weight" : "lm_head.weight";
  if (c.tie_word_embeddings) head["tied_to"] = "backbone.embeddings.weight";
  const int64_t ctx = c.max_position_embeddings > 0 ? c.max_position_embeddings : 1 << 20;
  json doc = {{"ir_version", 1},
              {"extensions", {{"ssd_scan", 1}}},
              {"family_hint", c.family},
              {"model", {{"vocab", c.vocab_size}, {"d", c.hidden_size}, {"n_layers", c.n_layers}, {"ctx", ctx}}},
              {"inputs", {"tokens"}},
              {"outputs", {"logits"}},
              {"embed", {{"nodes", {embed}}}},
              {"block", {{"repeat", c.n_layers}, {"state", state}, {"nodes", block}}},
              {"head", {{"nodes", {final_norm, head}}}}};
  doc["tokenizer"] = tokenizer_block(c);
  return doc;
}

}  // namespace

void register_mamba2_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"mamba2"};
  f.gguf = {{"mamba2", "mamba2",
             {"backbone.layers.",
              {{"token_embd", "backbone.embeddings"}, {"output_norm", "backbone.norm_f"}, {"output", "lm_head"}},
              {{"attn_norm", "norm"},
               {"ssm_in", "mixer.in_proj"},
               {"ssm_conv1d", "mixer.conv1d"},
               {"ssm_dt.bias", "mixer.dt_bias"},  // whole names: the suffix itself is renamed
               {"ssm_a", "mixer.A_log"},
               {"ssm_d", "mixer.D"},
               {"ssm_norm", "mixer.norm"},
               {"ssm_out", "mixer.out_proj"}}},
             fix_tensor}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
