// Mamba-2: every layer x + mixer(rmsnorm(x)), the mixer being in_proj → z,
// xBC, dt; xBC = silu(conv1d_causal(xBC) + bias) → x, B, C; y =
// ssd_scan(x, dt, B, C; A_log, D, dt_bias); y = rmsnorm(y ⊙ silu(z));
// out_proj. No attention, no MLP. ssd_scan is the IR extension of the same
// name (docs/IR.md §17).
#include "core/error.h"
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

nlohmann::json mamba2_ir(const ModelConfig& c) {
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

}  // namespace bonfire::ir
