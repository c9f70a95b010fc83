// Ops that advance a recurrent state kept in the session: conv1d_causal,
// linear_attention, ssm_scan, selective_scan (docs/IR.md §11). Protocol v3
// has no exp, log or division, so the scans lower to protocol extension ops
// (docs/PROTOCOL-EXTENSIONS.md) that advance the state in place.
#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Flow;

using detail::str;

namespace {

std::string weight_or_null(Lowerer& L, const char* key) {
  if (!L.has(key)) return "";
  return L.weight(L.field(key).get<std::string>());
}

// ---- conv1d_causal ------------------------------------------------------------

void conv_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.x(0);
  const auto ch = f.i("channels"), kernel = f.i("kernel");
  if (ch) f.need(v, *ch, f.name(0), "channels", ".in[0]");
  if (const Tensor* t = f.field_tensor("weight"))
    if (ch && kernel && detail::mul(*ch, *kernel) >= 0 && t->numel() != detail::mul(*ch, *kernel))
      f.bad_shape(".weight", f.tname(n["weight"]), *t,
                  "conv1d_causal needs channels*kernel = " + str(*ch) + "*" + str(*kernel) + " values");
  if (const Tensor* t = f.field_tensor("bias"))
    if (ch && t->numel() != *ch) f.bad_shape(".bias", f.tname(n["bias"]), *t, "the bias has channels = " + str(*ch) + " values");
  f.same_width(v);
}

std::vector<Value> lower_conv(Lowerer& L) {
  const Value x = L.input(0);
  const int64_t C = L.int_field("channels", 1), K = L.int_field("kernel", 1);
  const json& slot = L.slot(L.field("state").get<std::string>());
  const std::string tensor = slot["tensors"][0]["name"].get<std::string>();
  const std::string state = L.state(slot["name"].get<std::string>(), tensor, {K - 1, C});
  std::string y = L.emit("conv1d", {x.ref, L.weight(L.field("weight").get<std::string>()), state});
  if (L.has("bias")) y = L.emit("add", {y, L.weight(L.field("bias").get<std::string>())});
  // The state keeps the last K-1 rows of [state; x].
  const std::string all = L.emit("concat", {state, x.ref}, {{"axis", 0}}, "conv_rows");
  const std::string last = L.emit("slice", {all}, {{"start", L.tokens()}, {"length", K - 1}}, "conv_rows");
  L.state_written(slot["name"].get<std::string>(), tensor, L.emit("cache_write", {state, last}, {{"offset", 0}}, "conv_state"));
  return {{y, C}};
}

// ---- linear_attention -----------------------------------------------------------

void linear_attention_widths(Flow& f) {
  const auto h = f.i("heads"), hd = f.i("head_dim");
  for (size_t j = 0; j < 3 && j < f.inputs(); ++j)
    if (h && hd)
      f.need(f.x(j), detail::mul(*h, *hd), f.name(j),
             std::string(1, "qkv"[j]) + ": heads*head_dim = " + str(*h) + "*" + str(*hd), ".in[" + str(j) + "]");
  f.fixed(h && hd ? detail::mul(*h, *hd) : -1, "linear_attention output heads*head_dim");
}

std::vector<Value> lower_linear_attention(Lowerer& L) {
  const std::vector<std::string> states = L.slot_states(L.slot(L.field("state").get<std::string>()));
  const int64_t heads = L.int_field("heads", 1), head_dim = L.int_field("head_dim", 1);
  json p = {{"heads", heads}, {"headDim", head_dim}, {"denFloor", L.num_field("den_floor", 1e-6)},
            {"featureMap", L.str_field("feature_map", "elu_plus_one")}};
  std::vector<std::string> in = {L.input(0).ref, L.input(1).ref, L.input(2).ref};
  in.insert(in.end(), states.begin(), states.end());
  return {{L.emit("linear_attention", in, p), heads * head_dim}};
}

// ---- ssm_scan ---------------------------------------------------------------------

void ssm_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.x(0);
  const auto nn = f.i("n");
  if (const Tensor* t = f.field_tensor("d")) f.need(v, t->numel(), f.name(0), "size of " + f.desc(f.tname(n["d"]), *t), ".d", 18);
  for (const char* key : {"a", "b", "c"})
    if (const Tensor* t = f.field_tensor(key))
      if (nn && detail::mul(f.w().width(v), *nn) >= 0 && t->numel() != detail::mul(f.w().width(v), *nn))
        f.bad_shape(std::string(".") + key, f.tname(n[key]), *t,
                    "ssm_scan weights a, b, c are [channels, n] = " + shape_str({f.w().width(v), *nn}));
  f.same_width(v);
}

std::vector<Value> lower_ssm(Lowerer& L) {
  const std::vector<std::string> states = L.slot_states(L.slot(L.field("state").get<std::string>()));
  const Value x = L.input(0);
  std::vector<std::string> in = {x.ref, weight_or_null(L, "a"), weight_or_null(L, "b"), weight_or_null(L, "c"),
                                 weight_or_null(L, "d")};
  in.insert(in.end(), states.begin(), states.end());
  return {{L.emit("ssm_scan", in), x.width}};
}

// ---- selective_scan (Mamba) -------------------------------------------------------

void selective_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.x(0);
  const auto ch = f.i("channels"), ds = f.i("d_state");
  if (ch) f.need(v, *ch, f.name(0), "x: channels", ".in[0]");
  if (f.inputs() > 1) f.defer(0, 1, "selective_scan's dt,");
  for (size_t j = 2; j < 4 && j < f.inputs(); ++j)
    if (ds) f.need(f.x(j), *ds, f.name(j), std::string(j == 2 ? "B" : "C") + ": d_state", ".in[" + str(j) + "]");
  if (const Tensor* t = f.field_tensor("a"))
    if (ch && ds && detail::mul(*ch, *ds) >= 0 && t->numel() != detail::mul(*ch, *ds))
      f.bad_shape(".a", f.tname(n["a"]), *t, "a (A_log) is [channels, d_state] = " + shape_str({*ch, *ds}));
  if (const Tensor* t = f.field_tensor("d"))
    if (ch && t->numel() != *ch) f.bad_shape(".d", f.tname(n["d"]), *t, "d is [channels] = [" + str(*ch) + "]");
  f.same_width(v);
}

std::vector<Value> lower_selective(Lowerer& L) {
  const std::vector<std::string> states = L.slot_states(L.slot(L.field("state").get<std::string>()));
  const Value x = L.input(0);
  std::vector<std::string> in = {x.ref, L.input(1).ref, L.input(2).ref, L.input(3).ref, weight_or_null(L, "a")};
  if (L.has("d")) in.push_back(weight_or_null(L, "d"));
  in.insert(in.end(), states.begin(), states.end());
  json p = json::object();
  const json& sp = L.field("dt_softplus");
  if (sp.is_boolean()) p["dtSoftplus"] = sp.get<bool>();
  return {{L.emit("selective_scan", in, p), x.width}};
}

IrOpDef scan(const char* name, int inputs, void (*widths)(Flow&), std::vector<Value> (*lower)(Lowerer&)) {
  IrOpDef d = ir_op(name, inputs, widths, lower);
  d.state = SlotKind::Recurrent;
  return d;
}

}  // namespace

void register_ir_scan_ops(std::vector<IrOpDef>& ops) {
  ops.push_back(scan("conv1d_causal", 1, conv_widths, lower_conv));
  ops.push_back(scan("linear_attention", 3, linear_attention_widths, lower_linear_attention));
  IrOpDef ssm = scan("ssm_scan", 1, ssm_widths, lower_ssm);
  ssm.weight_keys = {"a", "b", "c", "d"};
  ops.push_back(ssm);
  IrOpDef sel = scan("selective_scan", 4, selective_widths, lower_selective);
  sel.weight_keys = {"a", "b", "c", "d"};
  ops.push_back(sel);
}

}  // namespace bonfire::ir
