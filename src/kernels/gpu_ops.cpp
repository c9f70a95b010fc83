#include "kernels/gpu_ops.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/json_parse.h"
#include "ops/op.h"
#include "ops/rope.h"

namespace bonfire::kernels {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int64_t kWorkgroup = 64;

// One node being planned: what an op's entry reads and fills.
struct NodePlan {
  const std::string& op;
  const json& params;
  const std::vector<GpuValue>& in;
  std::vector<int64_t> out_shape = {};
  int64_t threads = 0;
  std::vector<BindingSlot::Field> fields = {};  // the Params struct (values unused: words below)
  std::vector<std::pair<std::string, std::vector<float>>> tables = {};  // constant inputs the planner computed
  std::vector<uint32_t> words = {};
  ojson constants = ojson::object();

  [[noreturn]] void unsupported(const std::string& why) const {
    throw Error(ErrorCode::UnsupportedFeature, op + " on WebGPU: " + why, "", op);
  }
  [[noreturn]] void bad(const std::string& why) const { throw Error(ErrorCode::BadGraph, op + ": " + why); }

  // Only these params; each a number (a bind expression must be resolved first).
  void known_params(std::initializer_list<const char*> names) const {
    if (params.is_null()) return;
    for (const auto& [k, v] : params.items()) {
      bool known = false;
      for (const char* n : names) known |= k == n;
      if (!known) unsupported("param " + k + " has no GPU kernel here");
      if (v.is_string()) unsupported("param " + k + " is the bind expression \"" + v.get<std::string>() + "\"; resolve it first");
    }
  }
  double num(const char* name, double fallback) const {
    if (params.is_null() || !params.contains(name)) return fallback;
    const json& v = params[name];
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    if (!v.is_number()) bad(std::string("param ") + name + " must be a number");
    return v.get<double>();
  }
  void f32_input(size_t i, const char* what) const {
    if (in.at(i).dtype != "float32") unsupported(std::string(what) + " is " + in[i].dtype + ", not float32");
  }
  void field(const std::string& name, const std::string& type, double value) {
    fields.push_back({name, type, Expr::parse("0")});
    if (type == "f32") {
      words.push_back(f32_bits(value));
    } else {
      words.push_back((uint32_t)(int64_t)value);
    }
  }
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The stored bytes of a value: GGUF's q8_0 blocks are 32 values in 34
// bytes (an f16 scale, 32 int8), q4_0's in 18 (an f16 scale, 16 bytes of
// nibbles: values 0-15 low, 16-31 high).
int64_t stored_bytes(const GpuValue& v) {
  const int64_t n = numel(v.shape);
  if (v.dtype == "float32") return n * 4;
  if (v.dtype == "float16" || v.dtype == "bfloat16") return n * 2;
  if (v.dtype == "q8_0") return n / 32 * 34;
  if (v.dtype == "q4_0") return n / 32 * 18;
  return -1;
}

// A weight matrix [rows, cols] as weight_at(r, c) reads it.
void weight_input(NodePlan& p, size_t i, const char* binding) {
  const GpuValue& w = p.in.at(i);
  if (w.shape.size() != 2) p.bad(std::string(binding) + " must be a matrix, got rank " + std::to_string(w.shape.size()));
  if (stored_bytes(w) < 0) p.unsupported(std::string(binding) + " is " + w.dtype + ", which no GPU kernel here reads");
  if ((w.dtype == "q8_0" || w.dtype == "q4_0") && w.shape[1] % 32 != 0)
    p.bad(std::string(binding) + " is " + w.dtype + " with rows of " + std::to_string(w.shape[1]) +
          ", not whole blocks of 32");
  p.constants["weight"] = binding;
  p.constants["weightDtype"] = w.dtype;
  p.constants["weightCols"] = w.shape[1];
}

// ---- the ops ---------------------------------------------------------------

// add, mul: numpy broadcasting over up to 4 axes.
void plan_binary(NodePlan& p) {
  p.known_params({});
  if (p.in.size() != 2) p.bad("takes 2 inputs");
  p.f32_input(0, "a");
  p.f32_input(1, "b");
  const auto &a = p.in[0].shape, &b = p.in[1].shape;
  const size_t rank = std::max(a.size(), b.size());
  if (rank > 4) p.unsupported("rank " + std::to_string(rank) + " (the kernel broadcasts over 4 axes)");
  std::vector<int64_t> out(rank), sa(4, 0), sb(4, 0), dims(4, 1);
  int64_t stride_a = 1, stride_b = 1;
  for (size_t k = 0; k < rank; ++k) {  // from the last axis
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1, db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      p.bad("shapes do not broadcast at axis -" + std::to_string(k + 1) + " (" + std::to_string(da) + " and " +
            std::to_string(db) + ")");
    out[rank - 1 - k] = std::max(da, db);
    dims[3 - k] = std::max(da, db);
    sa[3 - k] = da == 1 ? 0 : stride_a;
    sb[3 - k] = db == 1 ? 0 : stride_b;
    stride_a *= da;
    stride_b *= db;
  }
  p.out_shape = out;
  p.threads = numel(out);
  for (int k = 0; k < 4; ++k) p.field("dim" + std::to_string(k), "u32", (double)dims[k]);
  for (int k = 0; k < 4; ++k) p.field("aStride" + std::to_string(k), "u32", (double)sa[k]);
  for (int k = 0; k < 4; ++k) p.field("bStride" + std::to_string(k), "u32", (double)sb[k]);
  p.constants["mul"] = p.op == "mul";
}

void plan_silu(NodePlan& p) {
  p.known_params({});
  if (p.in.size() != 1) p.bad("takes 1 input");
  p.f32_input(0, "x");
  p.out_shape = p.in[0].shape;
  p.threads = numel(p.out_shape);
}

// slice: a window of the leading axis or of the last one (f32 only: a
// packed weight's slice stays packed, on the CPU), as ops/shape_ops.cpp.
void plan_slice(NodePlan& p) {
  p.known_params({"start", "length", "axis"});
  if (p.in.size() != 1) p.bad("takes 1 input");
  p.f32_input(0, "a");
  const auto& a = p.in[0].shape;
  if (a.empty()) p.bad("input must have at least one axis");
  const double axis = p.num("axis", 0);
  const int64_t rank = (int64_t)a.size();
  bool last;
  if (axis == 0 && rank > 1) last = false;
  else if (axis == 0 || axis == -1 || axis == rank - 1) last = true;
  else p.bad("param axis must be 0 or the last axis (-1)");
  const int64_t dim = last ? a.back() : a[0];
  const double start = p.num("start", NAN), length = p.num("length", NAN);
  if (!(start >= 0) || !(length >= 0) || start != std::floor(start) || length != std::floor(length) ||
      start + length > dim)
    p.bad("the slice is outside an axis of " + std::to_string(dim));
  p.out_shape = a;
  (last ? p.out_shape.back() : p.out_shape[0]) = (int64_t)length;
  p.threads = numel(p.out_shape);
  p.field("last", "u32", last ? 1 : 0);
  p.field("width", "u32", (double)a.back());  // the input's last axis
  p.field("start", "u32", start);
  p.field("length", "u32", length);
  p.field("inner", "u32", (double)(dim ? numel(a) / dim : 0));  // elements per leading index
}

// zeros: the shape, every element 0 (a pooled GPU buffer is not zeroed).
void plan_zeros(NodePlan& p) {
  p.known_params({"shape"});
  if (!p.in.empty()) p.bad("takes no input");
  const json* shape = p.params.is_object() && p.params.contains("shape") ? &p.params["shape"] : nullptr;
  if (!shape || !shape->is_array()) p.bad("param shape must be an array");
  for (const auto& d : *shape) {
    const std::optional<int64_t> n = whole_number(d, kMaxIntParam);
    if (!n || *n < 0) p.bad("param shape must hold whole numbers");
    p.out_shape.push_back(*n);
  }
  p.threads = numel(p.out_shape);
}

// One invocation per group of channels (the row, unless groupSize).
void plan_rmsnorm(NodePlan& p) {
  p.known_params({"eps", "groupSize", "weightOffset"});
  if (p.in.size() != 2) p.bad("takes x and gamma");
  p.f32_input(0, "x");
  p.f32_input(1, "gamma");
  const auto& x = p.in[0].shape;
  if (x.empty()) p.bad("x must have at least one axis");
  const int64_t C = x.back(), G = (int64_t)p.num("groupSize", (double)C);
  if (G <= 0 || C % G != 0) p.bad("param groupSize " + std::to_string(G) + " must divide the row width " + std::to_string(C));
  if (numel(p.in[1].shape) != G) p.bad("gamma must have " + std::to_string(G) + " values");
  p.out_shape = x;
  p.threads = numel(x) / G;
  p.field("group", "u32", (double)G);
  p.field("eps", "f32", p.num("eps", 1e-6));
  p.field("weightOffset", "f32", p.num("weightOffset", 0));
}

// y [..., M, N] = a [..., M, K] · b, b [K, N] or (transB) [N, K], in any
// weight dtype; one invocation per output element.
void plan_matmul(NodePlan& p) {
  p.known_params({"transB"});
  if (p.in.size() != 2) p.bad("takes a and b");
  p.f32_input(0, "a");
  weight_input(p, 1, "b");
  const auto& a = p.in[0].shape;
  const auto& b = p.in[1].shape;
  if (a.empty()) p.bad("a must have at least one axis");
  const bool trans = p.num("transB", 0) != 0;
  const int64_t K = a.back(), N = trans ? b[0] : b[1];
  if ((trans ? b[1] : b[0]) != K) p.bad("a's last axis is " + std::to_string(K) + ", b is " + std::to_string(b[0]) + "x" + std::to_string(b[1]));
  p.out_shape = a;
  p.out_shape.back() = N;
  p.threads = numel(a) / std::max<int64_t>(1, K) * N;
  p.field("k", "u32", (double)K);
  p.field("n", "u32", (double)N);
  p.field("transB", "u32", trans ? 1 : 0);
}

// y [ids..., D]: table rows by rounded id (half to even); an id outside
// [0, V) or NaN gives zeros.
void plan_embedding(NodePlan& p) {
  p.known_params({});
  if (p.in.size() != 2) p.bad("takes ids and table");
  p.f32_input(0, "ids");
  weight_input(p, 1, "table");
  const int64_t V = p.in[1].shape[0], D = p.in[1].shape[1];
  p.out_shape = p.in[0].shape;
  p.out_shape.push_back(D);
  p.threads = numel(p.in[0].shape) * D;
  p.field("vocab", "u32", (double)V);
  p.field("width", "u32", (double)D);
}

// rope: the CPU op's own cos/sin tables (ops/rope.h, every scaling type)
// as constant inputs; one invocation per output element.
void plan_rope(NodePlan& p) {
  if (p.in.size() != 1) p.bad("takes x");
  p.f32_input(0, "x");
  if (p.params.contains("offset") && p.params["offset"].is_string())
    p.unsupported("param offset is the bind expression \"" + p.params["offset"].get<std::string>() + "\"; resolve it first");
  const auto& x = p.in[0].shape;
  if (x.size() < 2) p.bad("x must have rank 2 or more");
  const int64_t C = x.back(), rows = numel(x) / std::max<int64_t>(1, C);
  RopeTables t;
  try {
    t = rope_tables(p.params, rows);
  } catch (const Error& e) {
    p.bad(e.what());
  }
  if (C % t.head_dim != 0) p.bad("the last axis of x must be a multiple of param headDim");
  p.out_shape = x;
  p.threads = numel(x);
  p.field("width", "u32", (double)C);
  p.field("headDim", "u32", (double)t.head_dim);
  p.field("half", "u32", (double)(t.rot_dim / 2));
  p.field("interleaved", "u32", t.interleaved ? 1 : 0);
  p.tables.push_back({"cos", std::move(t.cos)});
  p.tables.push_back({"sin", std::move(t.sin)});
}

// cache_write: the cache with rows [offset, offset + T) replaced by the
// values; one invocation per element of the cache.
void plan_cache_write(NodePlan& p) {
  p.known_params({"offset"});
  if (p.in.size() != 2) p.bad("takes cache and values");
  p.f32_input(0, "cache");
  p.f32_input(1, "values");
  const auto &cache = p.in[0].shape, &v = p.in[1].shape;
  if (cache.empty() || v.empty() || cache.back() != v.back()) p.bad("values must be as wide as the cache");
  const int64_t C = cache.back(), S = numel(cache) / std::max<int64_t>(1, C), T = numel(v) / std::max<int64_t>(1, C);
  const double off = p.num("offset", NAN);
  if (!(off >= 0) || off != std::floor(off) || off + T > S)
    p.bad("writing rows at offset " + json(off).dump() + " overflows a cache of " + std::to_string(S) + " rows");
  p.out_shape = cache;
  p.threads = numel(cache);
  p.field("width", "u32", (double)C);
  p.field("first", "u32", off);
  p.field("rows", "u32", (double)T);
}

// attention: one invocation per (query row, head): the visible keys' scores
// (scale, softcap, explicit ALiBi slopes, an additive bias), their softmax
// and the weighted values, as the CPU op; a NaN score makes the row NaN,
// no visible key makes it zeros.
void plan_attention(NodePlan& p) {
  p.known_params({"heads", "headDim", "kvHeads", "vHeadDim", "causal", "posOffset", "scale", "softcap", "window",
                  "alibiSlopes"});
  if (p.in.size() < 3 || p.in.size() > 4) p.bad("takes q, k, v and an optional bias");
  for (size_t i = 0; i < p.in.size(); ++i) p.f32_input(i, i == 0 ? "q" : i == 1 ? "k" : i == 2 ? "v" : "bias");
  auto positive = [&](const char* name, double fallback) {
    const double v = p.num(name, fallback);
    if (!(v > 0) || v != std::floor(v)) p.bad(std::string("param ") + name + " must be a positive integer");
    return (int64_t)v;
  };
  const int64_t H = positive("heads", -1), D = positive("headDim", -1), KV = positive("kvHeads", (double)H),
                Dv = positive("vHeadDim", (double)D);
  if (H % KV) p.bad("param heads must be a multiple of param kvHeads");
  const auto &q = p.in[0].shape, &k = p.in[1].shape, &v = p.in[2].shape;
  if (q.size() != 2 || k.size() != 2 || v.size() != 2 || q[1] != H * D || k[1] != KV * D || v[1] != KV * Dv ||
      k[0] != v[0])
    p.bad("q, k, v must be [T, heads*headDim], [S, kvHeads*headDim], [S, kvHeads*vHeadDim]");
  const int64_t T = q[0], S = k[0];
  int bias = 0;
  if (p.in.size() == 4) {
    const auto& b = p.in[3].shape;
    if (b.size() == 2 && b[0] == T && b[1] == S) bias = 1;
    else if (b.size() == 3 && b[0] == H && b[1] == T && b[2] == S) bias = 2;
    else p.bad("bias must be [T, S] or [heads, T, S]");
  }
  std::vector<float> slopes(H, 0.0f);
  if (p.params.contains("alibiSlopes")) {
    const json& a = p.params["alibiSlopes"];
    if (!a.is_array() || (int64_t)a.size() != H) p.bad("param alibiSlopes must hold one number per head");
    for (int64_t h = 0; h < H; ++h) slopes[h] = a[h].get<float>();
  }
  const double window = p.num("window", 0);
  p.out_shape = {T, H * Dv};
  p.threads = T * H;
  p.field("heads", "u32", (double)H);
  p.field("group", "u32", (double)(H / KV));
  p.field("headDim", "u32", (double)D);
  p.field("kvHeads", "u32", (double)KV);
  p.field("keys", "u32", (double)S);
  p.field("rows", "u32", (double)T);
  p.field("causal", "u32", p.num("causal", 1) != 0 ? 1 : 0);
  p.field("posOffset", "u32", p.num("posOffset", 0));
  p.field("window", "u32", window);
  p.field("bias", "u32", bias);
  p.field("scale", "f32", p.num("scale", 1.0 / std::sqrt((double)D)));
  p.field("softcap", "f32", p.num("softcap", 0));
  p.constants["vHeadDim"] = Dv;
  p.constants["hasBias"] = bias != 0;
  p.tables.push_back({"slopes", std::move(slopes)});
}

struct GpuOpDef {
  const char* op;
  const char* shader;
  std::vector<const char*> bindings;  // the inputs' binding names, in order
  void (*plan)(NodePlan&);
};

const std::vector<GpuOpDef>& gpu_ops() {
  static const std::vector<GpuOpDef> table = {
      {"add", "elementwise-binary.wgsl.jinja", {"a", "b"}, plan_binary},
      {"mul", "elementwise-binary.wgsl.jinja", {"a", "b"}, plan_binary},
      {"silu", "silu.wgsl.jinja", {"x"}, plan_silu},
      {"rmsnorm", "rmsnorm.wgsl.jinja", {"x", "gamma"}, plan_rmsnorm},
      {"matmul", "matmul.wgsl.jinja", {"a", "b"}, plan_matmul},
      {"embedding", "embedding.wgsl.jinja", {"ids", "table"}, plan_embedding},
      {"rope", "rope.wgsl.jinja", {"x"}, plan_rope},
      {"cache_write", "cache-write.wgsl.jinja", {"cache", "values"}, plan_cache_write},
      {"attention", "attention.wgsl.jinja", {"q", "k", "v", "bias"}, plan_attention},
      {"slice", "slice.wgsl.jinja", {"a"}, plan_slice},
      {"zeros", "zeros.wgsl.jinja", {}, plan_zeros},
  };
  return table;
}

}  // namespace

std::vector<std::string> gpu_op_names() {
  std::vector<std::string> out;
  for (const auto& d : gpu_ops()) out.emplace_back(d.op);
  return out;
}

GpuPlan plan_gpu_node(const std::string& op, const json& params, const std::vector<GpuValue>& inputs,
                      const std::string& output_id, const Device& device, const TemplateRenderer& render) {
  const GpuOpDef* def = nullptr;
  for (const auto& d : gpu_ops())
    if (op == d.op) def = &d;
  if (!def) throw Error(ErrorCode::UnsupportedFeature, op + " has no GPU kernel here (ops with one: " +
                                                           json(gpu_op_names()).dump() + ")", "", op);
  NodePlan p{op, params, inputs};
  if (inputs.size() > def->bindings.size()) p.bad("takes at most " + std::to_string(def->bindings.size()) + " inputs");
  def->plan(p);

  GpuPlan plan;
  plan.variant = op;
  std::vector<BindingSlot> slots;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GpuValue& v = inputs[i];
    plan.buffers.push_back({v.id, "input", v.dtype, v.shape, stored_bytes(v)});
    slots.push_back({def->bindings[i], v.id, "read-only-storage", v.dtype == "float32" ? "f32" : "u32", "", {}});
  }
  if (op == "attention" && inputs.size() == 3) {  // no bias: a placeholder keeps the bindings fixed
    plan.buffers.push_back({"bias", "constant", "float32", {1}, 4, {0}});
    slots.push_back({"bias", "bias", "read-only-storage", "f32", "", {}});
  }
  for (auto& [name, values] : p.tables) {
    GpuBuffer b{name, "constant", "float32", {(int64_t)values.size()}, (int64_t)values.size() * 4, {}};
    for (float f : values) b.words.push_back(f32_bits(f));
    if (b.words.empty()) b.words.push_back(0), b.bytes = 4;
    plan.buffers.push_back(std::move(b));
    slots.push_back({name, name, "read-only-storage", "f32", "", {}});
  }
  plan.buffers.push_back({output_id, "output", "float32", p.out_shape, numel(p.out_shape) * 4});
  slots.push_back({"y", output_id, "storage", "f32", "", {}});
  if (!p.fields.empty()) slots.push_back({"params", "kernel.params", "uniform", "", "Params", p.fields});
  for (const auto& b : plan.buffers) {
    const auto limit = device.limit("maxStorageBufferBindingSize");
    if (limit && b.bytes > *limit)
      throw Error(ErrorCode::UnsupportedFeature, op + " on WebGPU: " + b.id + " is " + std::to_string(b.bytes) +
                                                     " bytes, over the device's maxStorageBufferBindingSize", "", op);
  }

  ojson vars = ojson::object();
  vars["constants"] = p.constants;
  vars["workgroupSize"] = kWorkgroup;
  vars["bindings"] = wgsl_declarations(slots);
  vars["pass"] = {{"id", op}, {"name", op}, {"variant", op}};
  vars["features"] = ojson(device.view.value("features", json::array()));
  try {
    plan.shaders[std::string(def->shader) + "#0"] = render(def->shader, vars);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::UnsupportedFeature, op + " on WebGPU: " + def->shader + " did not render: " + e.what(), "", op);
  }
  GpuDispatch d;
  d.pass = d.name = op;
  d.path = output_id;
  d.shader = std::string(def->shader) + "#0";
  d.workgroups = thread_workgroups(p.threads, kWorkgroup, device);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].type == "uniform") d.bindings.push_back({(int)i, "params", "uniform", "", p.words});
    else d.bindings.push_back({(int)i, slots[i].name, slots[i].type, slots[i].semantic, {}});
  }
  while (!d.bindings.empty() && d.bindings.back().type == "uniform" && d.bindings.back().words.size() % 4)
    d.bindings.back().words.push_back(0);
  d.bindings.push_back({(int)slots.size(), "dispatchInfo", "uniform", "", {(uint32_t)p.threads, (uint32_t)d.workgroups[0], 0, 0}});
  plan.dispatches.push_back(std::move(d));
  return plan;
}

}  // namespace bonfire::kernels
