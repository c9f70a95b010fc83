#include "kernels/runtime.h"

#include <chrono>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "graph/limits.h"
#include "kernels/graph_ops.h"
#include "kernels/scope.h"

namespace bonfire::kernels {

// The QMoE graph ops (moe layout "qmoe", the qmoe extension op) are installed
// into the op table's hook whenever the package runtime is linked in
// (kernels/graph_ops.h): the ops layer cannot call this layer itself.
[[maybe_unused]] static const bool kGraphOpsInstalled = (install_graph_ops(), true);

using json = nlohmann::json;

int64_t whole_number(double x, const std::string& what) {
  if (!(x >= 0) || x != std::floor(x) || x > 9.0e15)
    throw Error(ErrorCode::BadGraph, what + " is " + json(x).dump() + ", not a whole number >= 0");
  return (int64_t)x;
}

std::array<int64_t, 3> dispatch_size(Scope& scope, const Pass& s) {
  const std::string dp = s.path + ".dispatch";
  auto dim = [&](const std::optional<Expr>& e, const std::string& what) {
    return e ? whole_number(scope.number(*e), dp + what + " \"" + e->source() + "\"") : int64_t(1);
  };
  if (s.threads) return {dim(s.threads, ".threads"), 1, 1};
  return {dim(s.x, ".x"), dim(s.y, ".y"), dim(s.z, ".z")};
}

int64_t repeat_count(Scope& scope, const Pass& s) {
  return whole_number(scope.number(*s.repeat_count), s.path + ".repeat.count \"" + s.repeat_count->source() + "\"");
}

std::vector<int64_t> intermediate_shape(Scope& scope, const Intermediate& im) {
  const std::string what = im.path + " (" + im.id + ")";
  const json s = scope.eval(im.shape);
  std::vector<int64_t> shape;
  if (s.is_number()) shape.push_back(whole_number(s.get<double>(), what + ": shape"));
  else if (s.is_array())
    for (const auto& d : s) shape.push_back(whole_number(d.is_number() ? d.get<double>() : -1, what + ": a dimension"));
  else throw Error(ErrorCode::BadGraph, what + ": the shape \"" + im.shape.source() + "\" gave " + s.dump());
  return shape;
}

namespace {

void walk_passes(Scope& scope, const std::vector<Pass>& passes, int64_t repeat_index,
                 std::map<std::string, int64_t>& repeat,
                 const std::function<void(const Pass&, int64_t)>& call) {
  for (const Pass& s : passes) {
    if (!s.is_repeat()) {
      call(s, repeat_index);
      continue;
    }
    const int64_t count = repeat_count(scope, s);
    for (int64_t i = 0; i < count; ++i) {
      repeat[s.repeat_index] = i;
      scope.set_repeat(repeat);
      walk_passes(scope, s.passes, i, repeat, call);
    }
    repeat.erase(s.repeat_index);
    scope.set_repeat(repeat);
  }
}

}  // namespace

void for_each_pass_call(Scope& scope, const std::vector<Pass>& passes,
                        const std::function<void(const Pass&, int64_t)>& call) {
  std::map<std::string, int64_t> repeat;
  walk_passes(scope, passes, -1, repeat, call);
}

namespace {

void find_functions(const std::vector<Pass>& passes, const Variant& v, std::map<std::string, PassFn>& out) {
  for (const Pass& s : passes) {
    if (s.is_repeat()) {
      find_functions(s.passes, v, out);
      continue;
    }
    PassFn fn = find_pass(s.name);
    if (!fn)
      throw Error(ErrorCode::UnsupportedFeature,
                  "variant " + v.id + ": pass \"" + s.name + "\" (" + s.path + ") has no implementation", "", s.name);
    out[s.path] = fn;
  }
}

struct Runner {
  const Package& package;
  const Bound& bound;
  const Variant& variant;
  Scope& scope;
  std::map<std::string, Buffer>& buffers;
  std::map<std::string, PassFn> functions = {};
  std::map<std::string, Expr> parsed = {};  // PassArgs::num's names
  std::mutex parsed_mutex = {};
  int64_t calls = 0;

  // Pass functions may call num() from their threads.
  double num(const std::string& name) {
    const Expr* e;
    {
      std::lock_guard<std::mutex> lock(parsed_mutex);
      auto it = parsed.find(name);
      if (it == parsed.end()) it = parsed.emplace(name, Expr::parse(name)).first;
      e = &it->second;
    }
    return scope.number(*e);
  }

  void run(const std::vector<Pass>& passes) {
    for_each_pass_call(scope, passes, [&](const Pass& s, int64_t repeat_index) {
      const std::array<int64_t, 3> d = dispatch_size(scope, s);
      PassArgs args{bound.attrs, [this](const std::string& n) { return num(n); }, buffers, repeat_index, d, variant.id};
      try {
        functions.at(s.path)(args);
      } catch (const Error& e) {
        throw Error(e.code, "variant " + variant.id + ", pass " + s.id + " (" + s.name + "): " + e.what(), e.node,
                    e.feature);
      } catch (const std::exception& e) {
        throw Error(ErrorCode::Internal, "variant " + variant.id + ", pass " + s.id + " (" + s.name + "): " + e.what());
      }
      ++calls;
    });
  }
};

Buffer allocate(const std::string& dtype, std::vector<int64_t> shape, const std::string& what, int64_t& total) {
  const Limits limits;
  const int64_t n = checked_numel(shape.data(), shape.size(), limits.max_tensor_elements);
  if (n < 0)
    throw Error(ErrorCode::TooLarge, what + ": shape " + json(shape).dump() + " is over " +
                                         std::to_string(limits.max_tensor_elements) + " elements");
  const int64_t bytes = n * (int64_t)dtype_size(dtype);
  total += bytes;
  if (total > limits.max_total_bytes)
    throw Error(ErrorCode::TooLarge, what + ": the run's buffers are over " + std::to_string(limits.max_total_bytes) +
                                         " bytes");
  Buffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.bytes.assign((size_t)bytes, 0);
  return b;
}

}  // namespace

Problem problem_of(const json& attrs, const std::map<std::string, Buffer>& buffers) {
  Problem p;
  p.attrs = attrs;
  for (const auto& [role, b] : buffers) {
    p.shapes[role] = b.shape;
    p.dtypes[role] = b.dtype;
  }
  return p;
}

RunReport run_variant(const Package& p, const Bound& bound, const Device& device, int index,
                      std::map<std::string, Buffer>& buffers) {
  if (index < 0 || index >= (int)p.variants.size()) throw Error(ErrorCode::Internal, "no such variant");
  const Variant& v = p.variants[index];
  const auto start = std::chrono::steady_clock::now();
  for (const auto& t : p.inputs) {
    auto it = buffers.find(t.role);
    if (it == buffers.end()) throw Error(ErrorCode::BadGraph, t.role + ": missing (an input of " + p.name + ")");
    const Buffer& b = it->second;
    if (b.shape != bound.shapes.at(t.role) || b.dtype != bound.dtypes.at(t.role))
      throw Error(ErrorCode::BadGraph, t.role + ": the buffer is " + b.dtype + " " + json(b.shape).dump() +
                                           ", the checked call says " + bound.dtypes.at(t.role) + " " +
                                           json(bound.shapes.at(t.role)).dump());
    if ((int64_t)b.size_bytes() != b.numel() * (int64_t)dtype_size(b.dtype))
      throw Error(ErrorCode::BadGraph, t.role + ": " + std::to_string(b.size_bytes()) + " bytes, " + b.dtype + " " +
                                           json(b.shape).dump() + " needs " +
                                           std::to_string(b.numel() * (int64_t)dtype_size(b.dtype)));
  }
  Scope scope(p, bound, device);
  Runner r{p, bound, v, scope, buffers};
  find_functions(v.passes, v, r.functions);
  r.scope.set_variant(&v);

  int64_t total = 0;
  for (const auto& t : p.outputs)
    buffers[t.role] = allocate(bound.dtypes.at(t.role), bound.shapes.at(t.role), t.role, total);
  for (const Intermediate& im : v.intermediates) {
    buffers[im.id] = allocate(im.dtype, intermediate_shape(r.scope, im), im.path + " (" + im.id + ")", total);
  }
  try {
    r.run(v.passes);
  } catch (...) {
    for (const Intermediate& im : v.intermediates) buffers.erase(im.id);
    throw;
  }
  for (const Intermediate& im : v.intermediates) buffers.erase(im.id);
  RunReport report;
  report.variant = v.id;
  report.pass_calls = r.calls;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

RunReport run_op(const Package& p, const json& attrs, std::map<std::string, Buffer>& buffers, const Device& device) {
  Problem problem = problem_of(attrs, buffers);
  for (const auto& t : p.outputs) {  // outputs are computed, not given
    problem.shapes.erase(t.role);
    problem.dtypes.erase(t.role);
  }
  const Bound bound = check_problem(p, problem, device);
  Selection s = select_variant(p, bound, device);
  if (s.chosen < 0)
    throw Error(ErrorCode::UnsupportedFeature,
                "no variant of " + p.name + " applies on " + device.name + ": " + s.explain()["variants"].dump());
  RunReport r = run_variant(p, bound, device, s.chosen, buffers);
  r.selection = std::move(s);
  return r;
}

}  // namespace bonfire::kernels
