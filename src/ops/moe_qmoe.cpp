// The QMoE graph ops (moe_qmoe.h): moe's layout "qmoe" and the extension op
// `qmoe`. Both translate the node into a call of the QMoE kernel package and
// hand it to the backend the kernels layer installed; what the package
// accepts and computes is the package's (docs/QMOE.md), so these functions
// only map params and tensors and refuse what the mapping cannot express.
#include "ops/moe_qmoe.h"

#include <atomic>
#include <cmath>

#include "ops/moe_qmoe_internal.h"
#include "ops/op.h"

namespace bonfire {

namespace {

std::atomic<const QmoeBackend*> g_backend{nullptr};

const QmoeBackend& backend_or_refuse(const char* feature, const char* what) {
  const QmoeBackend* b = g_backend.load();
  if (!b)
    throw Error(ErrorCode::UnsupportedFeature,
                std::string(what) + " needs the QMoE kernel package, which this build has not installed", "", feature);
  return *b;
}

// Error(BadGraph) from the package, with the op named in front.
[[noreturn]] void rethrow_prefixed(const Error& e, const std::string& prefix) {
  throw Error(e.code, prefix + e.what(), e.node, e.feature);
}

}  // namespace

const char* const kQmoeRoles[6] = {"input", "router_probs", "fc1_experts_weights", "fc1_scales", "fc2_experts_weights",
                                   "fc2_scales"};

void set_qmoe_backend(const QmoeBackend* backend) { g_backend.store(backend); }
const QmoeBackend* qmoe_backend() { return g_backend.load(); }

// ---- moe, layout "qmoe" ------------------------------------------------------

// The package attributes a moe node with layout "qmoe" stands for. The
// number of bits and the block size are read from the shapes (ORT's layout
// fixes them: a 4-bit row packs two columns a byte; block-wise scales have a
// third axis of C / blockSize), so the v3 param list stays the manifest's.
nlohmann::json moe_qmoe_attrs(const std::vector<TensorDesc>& in, const Params& p) {
  auto refuse = [](const std::string& m) { bad_graph("moe (layout \"qmoe\"): " + m); };
  if (in.size() != 6)
    refuse("takes x, router logits, fc1 weights, fc1 scales, fc2 weights, fc2 scales (6 inputs), got " +
           std::to_string(in.size()));
  check_f32(in, 0, "moe: x");
  check_f32(in, 1, "moe: router logits");
  if (p.str("scoring", "softmax") != "softmax")
    refuse("scoring must be \"softmax\" (ONNX Runtime's QMoE routes by a softmax over the topK selected logits)");
  if (!p.flag("normalize", false))
    refuse("normalize must be true: ONNX Runtime's QMoE always takes the softmax over the topK selected logits, "
           "i.e. renormalised weights");
  if (p.has("scale") && p.num("scale") != 1.0) refuse("scale must be 1");
  if (p.int_("nGroup", 1) != 1 || p.has("topKGroup") || p.has("groupTopK"))
    refuse("group-limited routing (nGroup, topKGroup, groupTopK) is not available");
  if (p.flag("selectionBias", false)) refuse("selectionBias is not available");
  if (p.str("activation", "silu") != "silu")
    refuse("activation must be \"silu\" (SwiGLU experts, FC1 rows interleaved gate, up)");
  const Shape& xs = in[0].shape;
  check(xs.size() == 2 && xs[1] >= 1, [&] { return "moe: x must be [T, C] with C >= 1, got " + shape_str(xs); });
  const int64_t C = xs[1];
  for (int i : {2, 4})
    if (in[i].dtype != DType::U8)
      refuse(std::string(kQmoeRoles[i]) + " (input " + std::to_string(i) + ") must be u8 (packed codes), got " +
             dtype_name(in[i].dtype));
  const Shape& w1 = in[2].shape;
  if (w1.size() != 3) refuse("fc1 weights (input 2) must be [E, 2I, C/pack], got " + shape_str(w1));
  int bits = 0;
  if (w1[2] * 2 == C)
    bits = 4;
  else if (w1[2] == C)
    bits = 8;
  else
    refuse("fc1 weights (input 2) " + shape_str(w1) + ": the last axis must be C/2 (4 bits) or C (8 bits), C = " +
           std::to_string(C));
  nlohmann::json a = {{"k", p.int_("topK")},
                      {"activation_type", "swiglu"},
                      {"swiglu_fusion", 1},
                      {"normalize_routing_weights", 1},
                      {"expert_weight_bits", bits}};
  const Shape& s1 = in[3].shape;
  if (s1.size() == 3) {
    if (s1[2] < 1 || C % s1[2] != 0)
      refuse("fc1 scales (input 3) " + shape_str(s1) + ": the last axis must divide C = " + std::to_string(C));
    a["block_size"] = C / s1[2];
  }
  return a;
}

Shape infer_moe_qmoe(const std::vector<TensorDesc>& in, const Params& p) {
  const nlohmann::json a = moe_qmoe_attrs(in, p);
  const QmoeBackend& b = backend_or_refuse("ext.moe.qmoe", "moe with layout \"qmoe\"");
  try {
    b.check(a, in);
  } catch (const Error& e) {
    if (e.code != ErrorCode::BadGraph) throw;
    rethrow_prefixed(e, "moe (layout \"qmoe\", as QMoE " + a.dump() + "): ");
  }
  return in[0].shape;
}

void run_moe_qmoe(const OpInputs& in, const Params& p, Tensor& out) {
  std::vector<TensorDesc> d;
  std::vector<const Tensor*> t;
  for (const Tensor* x : in) d.push_back(x->desc()), t.push_back(x);
  const nlohmann::json a = moe_qmoe_attrs(d, p);
  backend_or_refuse("ext.moe.qmoe", "moe with layout \"qmoe\"").run(a, t, out);
}

// ---- the extension op qmoe ---------------------------------------------------

namespace {

// The package's attributes (spec/kernels/qmoe.json), as params; the package
// checks their values. tests/qmoe_graph_test.cpp holds this list equal to the
// package's attribute names.
const std::vector<ParamDef> kQmoeParams = {
    {"activation_alpha", ParamType::Number, true},  {"activation_beta", ParamType::Number, true},
    {"activation_type", ParamType::String, true},   {"block_size", ParamType::Number, true},
    {"expert_weight_bits", ParamType::Number, true}, {"k", ParamType::Number, true},
    {"normalize_routing_weights", ParamType::Number, true}, {"quant_type", ParamType::String, true},
    {"swiglu_fusion", ParamType::Number, true},     {"swiglu_limit", ParamType::Number, true},
    {"use_sparse_mixer", ParamType::Number, true},  {"weights_prepacked", ParamType::Number, true},
};

nlohmann::json qmoe_attrs(const Params& p) {
  nlohmann::json a = nlohmann::json::object();
  for (const auto& [k, v] : p.all().items()) {
    if (!k.empty() && k[0] == '_') continue;
    // Whole numbers as integers, so the package sees 2, not 2.0.
    if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
        std::fabs(v.get<double>()) < 9e15)
      a[k] = (int64_t)v.get<double>();
    else
      a[k] = v;
  }
  return a;
}

Shape infer_qmoe(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "qmoe: input");
  check_f32(in, 1, "qmoe: router_probs");
  const QmoeBackend& b = backend_or_refuse("ext.qmoe", "qmoe");
  try {
    b.check(qmoe_attrs(p), in);
  } catch (const Error& e) {
    if (e.code != ErrorCode::BadGraph) throw;
    rethrow_prefixed(e, "qmoe: ");
  }
  return in[0].shape;
}

void run_qmoe(const OpInputs& in, const Params& p, Tensor& out) {
  std::vector<const Tensor*> t(in.begin(), in.end());
  backend_or_refuse("ext.qmoe", "qmoe").run(qmoe_attrs(p), t, out);
}

}  // namespace

void register_ext_qmoe_ops(std::vector<OpDef>& ops) {
  OpDef d;
  d.name = "qmoe";
  d.min_inputs = 6;
  d.max_inputs = 6;
  d.params = kQmoeParams;
  FeatureDef f;
  f.name = "ext.qmoe";
  f.always = true;
  d.features = {f};
  d.infer = infer_qmoe;
  d.run = run_qmoe;
  d.packed_inputs = 0xFu << 2;  // the u8 weights and the scales (f16/bf16 widened)
  ops.push_back(std::move(d));
}

}  // namespace bonfire
