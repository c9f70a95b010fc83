// rope: rotary position embedding of q (and k), with partial rotation,
// interleaved pairs, frequency scaling and per-dimension factors (LongRoPE,
// Llama 3) (docs/IR.md §6 "rope"; rules R9, R11).
#include <cmath>

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

size_t rope_outputs(const json& node, std::string& why) {
  const size_t n = node["in"].size();
  why = "one per input (" + str(n) + ")";
  return n;
}

void check_rope(Checker& c, const std::string& sec, size_t k, const json& node) {
  using namespace detail;
  const std::string path = node_path(sec, k);
  for (int64_t l : node_layers(c, sec, node)) check_kv_heads_divide(c, path, node, l);
  for (int64_t l : node_layers(c, sec, node)) {
    const auto hd = int_field(node, "head_dim", l);
    const bool has_n_rot = node.contains("n_rot") && !at_layer(node["n_rot"], l).is_null();
    const auto n_rot = int_field(node, "n_rot", l);
    const auto mode = str_field(node, "rope_heads", l);
    const auto theta = num_field(node, "theta", l);
    if (n_rot && *n_rot % 2 != 0)
      c.report(path + ".n_rot", "n_rot " + str(*n_rot) + on_layer(node, l) + " is odd; rotary pairs need it even", 11, path + "|odd");
    if (n_rot && hd && *n_rot > *hd)
      c.report(path + ".n_rot", "n_rot " + str(*n_rot) + on_layer(node, l) + " is more than head_dim " + str(*hd), 11,
               path + "|big");
    if (mode && *mode == "first" && !has_n_rot && !(node.contains("n_rot") && is_per_layer(node["n_rot"])))
      c.report(path + ".rope_heads", "rope_heads \"first\"" + on_layer(node, l) + " needs n_rot (how many channels rotate)", 11,
               path + "|first");
    if (mode && *mode == "all" && !n_rot && hd && *hd % 2 != 0)
      c.report(path + ".head_dim",
               "rope_heads \"all\" rotates the whole head, but head_dim " + str(*hd) + on_layer(node, l) +
                   " is odd; rotary pairs need it even",
               11, path + "|odd_all");
    if (mode && *mode == "all" && n_rot && hd && *n_rot != *hd)
      c.report(path + ".n_rot",
               "rope_heads \"all\" rotates the whole head but n_rot " + str(*n_rot) + on_layer(node, l) +
                   " is not head_dim " + str(*hd),
               11, path + "|all");
    if (theta && !(*theta > 0))
      c.report(path + ".theta", "theta " + json(*theta).dump() + on_layer(node, l) + " must be > 0", 11, path + "|theta");
    if (node.contains("freq_factors") && node["freq_factors"].is_array()) {
      const auto rot = has_n_rot ? n_rot : hd;
      if (rot && (int64_t)node["freq_factors"].size() != *rot / 2)
        c.report(path + ".freq_factors",
                 "freq_factors has " + str(node["freq_factors"].size()) + " entries but n_rot/2 is " + str(*rot / 2) +
                     on_layer(node, l),
                 11, path + "|ff");
    }
  }
}

void rope_widths(Flow& f) {
  const json& n = f.node();
  const auto h = f.i("heads"), hd = f.i("head_dim");
  const auto kv = n.contains("kv_heads") ? f.i("kv_heads") : h;
  for (size_t j = 0; j < f.inputs() && j < 2; ++j) {
    const auto heads = j == 0 ? h : kv;
    const int v = f.x(j);
    if (heads && hd)
      f.need(v, detail::mul(*heads, *hd), f.name(j),
             std::string(j == 0 ? "heads" : "kv_heads") + "*head_dim = " + str(*heads) + "*" + str(*hd),
             ".in[" + str(j) + "]");
    f.same_width(v);
  }
  if (!n.contains("freq_factors")) return;
  // Factor tensors hold one value per rotated pair.
  const json& ff = n["freq_factors"];
  const auto rot = n.contains("n_rot") ? f.i("n_rot") : hd;
  auto check = [&](const std::string& tmpl, const std::string& suffix) {
    if (const Tensor* t = f.tensor(tmpl, suffix))
      if (rot && t->numel() != *rot / 2)
        f.bad_shape(suffix, f.tname(tmpl), *t, "freq_factors hold n_rot/2 = " + str(*rot / 2) + " values");
  };
  if (ff.is_string()) check(ff.get<std::string>(), ".freq_factors");
  if (ff.is_object()) {
    check(ff["short"].get<std::string>(), ".freq_factors.short");
    check(ff["long"].get<std::string>(), ".freq_factors.long");
  }
}

std::vector<float> tensor_values(Lowerer& L, const std::string& tmpl) {
  const Tensor* t = L.weight_tensor(tmpl);
  if (!t && L.skipping()) return {};  // the rotation is dropped with the rest of an earlier stage
  if (!t) L.fail("freq_factors \"" + tmpl + "\" is a checkpoint tensor; lower with the model's weights");
  const Tensor f = to_f32(*t);
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

// The rope node's per-dimension frequency factors, or empty for none.
std::vector<float> freq_factors(Lowerer& L) {
  const json& f = L.field("freq_factors");
  if (f.is_null()) return {};
  if (f.is_array()) return f.get<std::vector<float>>();
  if (f.is_string()) return tensor_values(L, f.get<std::string>());
  const int64_t original = f.value("original_ctx", int64_t(0));
  return tensor_values(L, f[L.options().ctx > original ? "long" : "short"].get<std::string>());
}

Value rope_one(Lowerer& L, const Value& x, int64_t heads) {
  const int64_t head_dim = L.int_field("head_dim", 0);
  const double theta = L.num_field("theta", 10000);
  const int64_t n_rot = L.int_field("n_rot", head_dim);
  json p = {{"headDim", head_dim}, {"base", theta}, {"offset", "pos"}};
  if (n_rot != head_dim) p["rotaryDim"] = n_rot;
  if (L.str_field("pairing", "neox") == "interleaved") p["interleaved"] = true;
  const double freq_scale = L.num_field("freq_scale", 1);
  const std::vector<float> factors = freq_factors(L);
  if (freq_scale != 1 || !factors.empty()) {
    if (!factors.empty() && (int64_t)factors.size() != n_rot / 2)
      L.fail("freq_factors has " + std::to_string(factors.size()) + " entries, rope needs n_rot/2 = " +
             std::to_string(n_rot / 2) + " (rule R11)");
    std::vector<double> inv(n_rot / 2);
    for (int64_t j = 0; j < n_rot / 2; ++j)
      inv[j] = std::pow(theta, -2.0 * j / n_rot) * freq_scale / (factors.empty() ? 1.0 : factors[j]);
    p["invFreq"] = inv;
  }
  if (const double a = L.num_field("attn_factor", 1); a != 1) p["attentionFactor"] = a;
  return {L.emit("rope", {x.ref}, p), x.width >= 0 ? x.width : heads * head_dim};
}

std::vector<Value> lower_rope(Lowerer& L) {
  const int64_t heads = L.int_field("heads", 1);
  std::vector<Value> out;
  for (size_t j = 0; j < L.input_count(); ++j) out.push_back(rope_one(L, L.input(j), j == 0 ? heads : L.int_field("kv_heads", heads)));
  return out;
}

}  // namespace

void register_ir_rope_ops(std::vector<IrOpDef>& ops) {
  IrOpDef d = ir_op("rope", 1, rope_widths, lower_rope);
  d.max_inputs = 2;  // q, or q and k
  d.outputs_of = rope_outputs;
  d.check = check_rope;
  ops.push_back(d);
}

}  // namespace bonfire::ir
