#include "kernels/runtime.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstring>
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

// The bytes of a tensor of `shape`, checked against graph/limits.h: alone
// and with the run's buffers so far (`total`).
size_t checked_bytes(const std::string& dtype, const std::vector<int64_t>& shape, const std::string& what,
                     int64_t& total) {
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
  return (size_t)bytes;
}

void check_inputs(const Package& p, const Bound& bound, const std::map<std::string, Buffer>& buffers) {
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

// ---- BufferPool --------------------------------------------------------------

std::vector<uint8_t> BufferPool::take(size_t bytes) {
  std::vector<uint8_t> v;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest free vector that holds `bytes` without growing.
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].capacity() >= bytes && (best == free_.size() || free_[i].capacity() < free_[best].capacity()))
        best = i;
    if (best < free_.size()) {
      held_ -= free_[best].capacity();
      v = std::move(free_[best]);
      free_.erase(free_.begin() + (std::ptrdiff_t)best);
    }
  }
  v.assign(bytes, 0);
  return v;
}

void BufferPool::give(std::vector<uint8_t> v) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (v.capacity() == 0 || held_ + v.capacity() > max_bytes_) return;
  held_ += v.capacity();
  free_.push_back(std::move(v));
}

// ---- CallPlan ----------------------------------------------------------------

CallPlan::CallPlan(const Package& package, Bound bound, const Device& device, int variant)
    : package_(package),
      bound_(std::move(bound)),
      device_(device),
      variant_((variant >= 0 && variant < (int)package.variants.size())
                   ? package.variants[variant]
                   : throw Error(ErrorCode::Internal, "no such variant")),
      scope_(package_, bound_, device_) {
  std::map<std::string, PassFn> functions;
  find_functions(variant_.passes, variant_, functions);
  scope_.set_variant(&variant_);

  int64_t total = 0;
  for (const auto& t : package_.outputs) {
    Storage s{t.role, bound_.dtypes.at(t.role), bound_.shapes.at(t.role), 0};
    s.bytes = checked_bytes(s.dtype, s.shape, t.role, total);
    outputs_.push_back(std::move(s));
  }
  for (const Intermediate& im : variant_.intermediates) {
    Storage s{im.id, im.dtype, intermediate_shape(scope_, im), 0};
    s.bytes = checked_bytes(s.dtype, s.shape, im.path + " (" + im.id + ")", total);
    intermediates_.push_back(std::move(s));
  }
  std::map<std::string, int64_t> repeat;  // walk_passes keeps it current
  walk_passes(scope_, variant_.passes, -1, repeat, [&](const Pass& s, int64_t repeat_index) {
    calls_.push_back({&s, functions.at(s.path), repeat_index, repeat, dispatch_size(scope_, s), {}});
  });
}

double CallPlan::num(size_t call, const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Call& c = calls_[call];
  auto v = c.values.find(name);
  if (v != c.values.end()) return v->second;
  auto e = parsed_.find(name);
  if (e == parsed_.end()) e = parsed_.emplace(name, Expr::parse(name)).first;
  scope_.set_repeat(c.repeat);
  const double x = scope_.number(e->second);
  c.values.emplace(name, x);
  return x;
}

RunReport CallPlan::run(std::map<std::string, Buffer>& buffers, BufferPool* pool) {
  const auto start = std::chrono::steady_clock::now();
  check_inputs(package_, bound_, buffers);
  for (const Storage& o : outputs_) {
    auto it = buffers.find(o.id);
    if (it != buffers.end() && it->second.dtype == o.dtype && it->second.shape == o.shape &&
        it->second.size_bytes() == o.bytes) {
      std::memset(it->second.as<uint8_t>(), 0, o.bytes);
      continue;
    }
    Buffer& b = buffers[o.id];
    b = Buffer{o.dtype, o.shape, {}};
    b.bytes.assign(o.bytes, 0);
  }
  for (const Storage& im : intermediates_) {
    Buffer& b = buffers[im.id];
    b = Buffer{im.dtype, im.shape, {}};
    b.bytes = pool ? pool->take(im.bytes) : std::vector<uint8_t>(im.bytes, 0);
  }
  const auto release = [&] {
    for (const Storage& im : intermediates_) {
      auto it = buffers.find(im.id);
      if (it == buffers.end()) continue;
      if (pool) pool->give(std::move(it->second.bytes));
      buffers.erase(it);
    }
  };
  try {
    for (size_t i = 0; i < calls_.size(); ++i) {
      const Call& c = calls_[i];
      PassArgs args{bound_.attrs, [this, i](const std::string& n) { return num(i, n); }, buffers, c.repeat_index,
                    c.dispatch, variant_.id};
      try {
        c.fn(args);
      } catch (const Error& e) {
        throw Error(e.code, "variant " + variant_.id + ", pass " + c.pass->id + " (" + c.pass->name + "): " + e.what(),
                    e.node, e.feature);
      } catch (const std::exception& e) {
        throw Error(ErrorCode::Internal,
                    "variant " + variant_.id + ", pass " + c.pass->id + " (" + c.pass->name + "): " + e.what());
      }
    }
  } catch (...) {
    release();
    throw;
  }
  release();
  RunReport report;
  report.variant = variant_.id;
  report.pass_calls = (int64_t)calls_.size();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

// ---- one-shot and cached runs --------------------------------------------------

RunReport run_variant(const Package& p, const Bound& bound, const Device& device, int index,
                      std::map<std::string, Buffer>& buffers) {
  return CallPlan(p, bound, device, index).run(buffers);
}

namespace {

struct Checked {
  Bound bound;
  Selection selection;
};

Checked check_and_select(const Package& p, const json& attrs, const std::map<std::string, Buffer>& buffers,
                         const Device& device) {
  Problem problem = problem_of(attrs, buffers);
  for (const auto& t : p.outputs) {  // outputs are computed, not given
    problem.shapes.erase(t.role);
    problem.dtypes.erase(t.role);
  }
  Checked c{check_problem(p, problem, device), select_variant(p, c.bound, device)};
  if (c.selection.chosen < 0)
    throw Error(ErrorCode::UnsupportedFeature, "no variant of " + p.name + " applies on " + device.name + ": " +
                                                   c.selection.explain()["variants"].dump());
  return c;
}

}  // namespace

RunReport run_op(const Package& p, const json& attrs, std::map<std::string, Buffer>& buffers, const Device& device) {
  Checked c = check_and_select(p, attrs, buffers, device);
  RunReport r = run_variant(p, c.bound, device, c.selection.chosen, buffers);
  r.selection = std::move(c.selection);
  return r;
}

PlanCache::PlanCache(const Package& package, const Device& device, size_t capacity, size_t pool_bytes)
    : package_(package), device_(device), capacity_(std::max<size_t>(1, capacity)), pool_(pool_bytes) {}

RunReport PlanCache::run(const json& attrs, std::map<std::string, Buffer>& buffers) {
  // The signature: what check_problem and the plan read.
  std::string key = attrs.dump();
  for (const auto& t : package_.inputs) {
    auto it = buffers.find(t.role);
    if (it == buffers.end()) continue;  // refused by the check below
    key += '|' + t.role + ':' + it->second.dtype;
    for (int64_t d : it->second.shape) key += ',' + std::to_string(d);
  }
  std::shared_ptr<CallPlan> plan;
  Selection selection;
  bool reused = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      it->second.used = ++clock_;
      plan = it->second.plan;
      selection = it->second.selection;
      reused = true;
    }
  }
  if (!plan) {  // checked and planned outside the lock; a refusal is not kept
    Checked c = check_and_select(package_, attrs, buffers, device_);
    plan = std::make_shared<CallPlan>(package_, c.bound, device_, c.selection.chosen);
    selection = c.selection;
    std::lock_guard<std::mutex> lock(mutex_);
    if (plans_.size() >= capacity_) {
      auto oldest = std::min_element(plans_.begin(), plans_.end(),
                                     [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      plans_.erase(oldest);
    }
    plans_[key] = Entry{plan, selection, ++clock_};
  }
  RunReport r = plan->run(buffers, &pool_);
  r.selection = std::move(selection);
  r.reused_plan = reused;
  return r;
}

}  // namespace bonfire::kernels
