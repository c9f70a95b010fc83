#include "graph/executor.h"

#include <chrono>
#include <map>
#include <new>

#include "core/error.h"
#include "graph/executor_internal.h"
#include "graph/profile.h"

namespace bonfire {

using json = nlohmann::json;

namespace detail {

namespace {

// One node's time for `generate --profile`; a product is labelled by the
// weight it streams (dtype and shape) and credited with its bytes.
void profile_node(const GraphNode& node, const OpInputs& in, std::chrono::steady_clock::duration took) {
  std::string label;
  double bytes = 0;
  for (size_t k = 0; k < node.in.size(); ++k) {
    if (node.in[k].kind != Ref::Weight || !node.op->accepts_packed(static_cast<int>(k))) continue;
    // A lookup reads the rows it is asked for, not the table.
    if (node.op->name == "embedding") continue;
    const Tensor& w = *in[k];
    label += std::string(label.empty() ? "" : " ") + dtype_name(w.dtype) + " " + shape_str(w.shape);
    bytes += static_cast<double>(w.nbytes());
  }
  profile_record(node.op->name, label, std::chrono::duration<double>(took).count(), bytes);
}

}  // namespace

}  // namespace detail

Params bind_params(const GraphNode& node, const json& bind) {
  if (node.exprs.empty()) return node.literal;
  json p = node.params;
  const Expr::Lookup lookup = [&](const std::string& name) -> std::optional<json> {
    if (bind.contains(name)) return bind[name];
    return std::nullopt;
  };
  for (const auto& [key, e] : node.exprs) p[key] = e.eval_number(lookup);
  return Params(std::move(p));
}

namespace detail {

Tensor BufferPool::take(const Shape& shape) {
  const size_t bytes = bytes_for(shape);
  auto it = free_.lower_bound(bytes);
  if (it != free_.end() && it->first <= 2 * bytes) {
    std::shared_ptr<void> owner = std::move(it->second);
    held_ -= it->first;
    free_.erase(it);
    return Tensor::view(DType::F32, shape, owner.get(), owner);
  }
  return Tensor::empty(shape);
}

void BufferPool::give(Tensor& t) {
  if (t.dtype == DType::F32 && t.owner && t.owner.use_count() == 1 && t.data == t.owner.get()) {
    const size_t bytes = bytes_for(t.shape);
    free_.emplace(bytes, std::move(t.owner));
    held_ += bytes;
  }
  t = Tensor();
}

void BufferPool::trim() {
  while (held_ > kCachedBytes && !free_.empty()) {
    auto last = std::prev(free_.end());
    held_ -= last->first;
    free_.erase(last);
  }
}

BufferPool& thread_buffer_pool() {
  thread_local BufferPool pool;
  return pool;
}

std::vector<Planned> plan_nodes(const Graph& g, const json& bind, const ExternalDesc& external, const Limits& limits,
                                int64_t* total_bytes, const std::vector<Planned>* like) {
  auto same_desc = [](const TensorDesc& a, const TensorDesc& b) { return a.dtype == b.dtype && a.shape == b.shape; };
  std::vector<Planned> plan(g.nodes.size());
  auto count_bytes = [&](const GraphNode& node, const Planned& p) {
    if (node.op->mutates_input < 0 && p.out.dtype == DType::F32) *total_bytes += p.out.numel() * 4;
    if (*total_bytes > limits.max_total_bytes)
      too_large("the graph would allocate over " + std::to_string(limits.max_total_bytes) + " bytes");
  };
  std::vector<TensorDesc> in;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    try {
      // The other row's plan holds when nothing here differs from it: the
      // same params (no expressions) over the same nodes' values, described
      // the same way (inputs and weights are the same for every row). A
      // session's tensor may differ between rows: a node reading one is
      // planned afresh.
      if (like && node.exprs.empty()) {
        bool same = true;
        for (size_t k = 0; k < node.in.size() && same; ++k) {
          const Ref& r = node.in[k];
          same = r.kind == Ref::Node ? same_desc(plan[r.node].out, (*like)[r.node].out) : r.kind != Ref::Session;
        }
        if (same) {
          plan[i] = (*like)[i];
          count_bytes(node, plan[i]);
          continue;
        }
      }
      in.clear();
      for (const Ref& r : node.in) in.push_back(r.kind == Ref::Node ? plan[r.node].out : external(r, node.id));
      plan[i].params = bind_params(node, bind);
      for (size_t k = 0; k < node.in.size(); ++k) {
        const Ref& r = node.in[k];
        if (in[k].dtype != DType::F32 && !node.op->accepts_packed((int)k))
          bad_graph("input " + std::to_string(k) + " (\"" + r.text() + "\") is a packed " +
                    dtype_name(in[k].dtype) + " weight; op " + node.op->name + " needs f32 there");
        if ((int)k == node.op->mutates_input || node.op->writes((int)k, plan[i].params, node.in.size())) {
          if (r.kind == Ref::Weight)
            bad_graph("op " + node.op->name + " writes its input " + std::to_string(k) + " in place; \"" + r.text() +
                      "\" is a weight");
        }
      }
      Shape out = node.op->infer(in, plan[i].params);
      if ((int64_t)out.size() > limits.max_rank) too_large("the output has more than " + std::to_string(limits.max_rank) + " axes");
      if (checked_numel(out.data(), out.size(), limits.max_tensor_elements) < 0)
        too_large("the output " + shape_str(out) + " is over the limit of " +
                  std::to_string(limits.max_tensor_elements) + " elements per tensor");
      plan[i].out = {node.op->out_dtype ? node.op->out_dtype(in, plan[i].params) : DType::F32, out};
      count_bytes(node, plan[i]);
    } catch (Error& e) {
      if (e.node.empty()) e.node = node.id;
      throw;
    } catch (const json::exception& e) {
      throw Error(ErrorCode::BadGraph, std::string("a param has the wrong type: ") + e.what(), node.id);
    }
  }
  return plan;
}

Lifetimes value_lifetimes(const Graph& g) {
  Lifetimes l{std::vector<int>(g.nodes.size(), -1), std::vector<bool>(g.nodes.size(), false)};
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& r : g.nodes[i].in)
      if (r.kind == Ref::Node) l.last_use[r.node] = (int)i;
  for (const auto& o : g.outputs)
    if (o.kind == Ref::Node) l.pinned[o.node] = true;
  for (const auto& [k, r] : g.retain)
    if (r.kind == Ref::Node) l.pinned[r.node] = true;
  return l;
}

void check_deadline(const Limits& limits, const GraphNode& node) {
  if (limits.deadline_ms > 0 && steady_now_ms() > limits.deadline_ms)
    throw Error(ErrorCode::Timeout, "the call ran over its time budget (stopped before node " + node.id + ")",
                node.id);
}

// Runs `fn` as node `node`'s work: its errors name the node, and running
// out of memory is TooLarge. Returns the time taken when profiling (the
// clock is not read otherwise).
template <typename Fn>
std::chrono::steady_clock::duration run_as(const GraphNode& node, Fn&& fn) {
  const bool prof = profiling();
  const auto started = prof ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    fn();
  } catch (Error& e) {
    if (e.node.empty()) e.node = node.id;
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::TooLarge, "out of memory while running the node", node.id);
  }
  return prof ? std::chrono::steady_clock::now() - started : std::chrono::steady_clock::duration{};
}

void run_node(const GraphNode& node, const OpInputs& in, const Params& params, Tensor& out) {
  const auto took = run_as(node, [&] { node.op->run(in, params, out); });
  if (profiling()) profile_node(node, in, took);
}

size_t sibling_count(const Graph& g, size_t i) {
  const GraphNode& a = g.nodes[i];
  auto weights_besides_input0 = [](const GraphNode& n) {
    for (size_t k = 1; k < n.in.size(); ++k)
      if (n.in[k].kind != Ref::Weight) return false;
    return !n.in.empty();
  };
  if (!a.op->run_siblings || !a.exprs.empty() || !weights_besides_input0(a)) return 1;
  size_t n = 1;
  for (; i + n < g.nodes.size(); ++n) {
    const GraphNode& b = g.nodes[i + n];
    if (b.op != a.op || !b.exprs.empty() || b.in.size() != a.in.size() || !(b.in[0] == a.in[0]) ||
        !weights_besides_input0(b))
      break;
  }
  return n;
}

void run_siblings(const Graph& g, size_t i, const std::vector<OpInputs>& in, const std::vector<Params>& params,
                  const std::vector<Tensor*>& out) {
  const GraphNode& first = g.nodes[i];
  const auto took = run_as(first, [&] { first.op->run_siblings(in, params, out); });
  if (!profiling()) return;
  // Each node is credited with a share of the time by the bytes it streams.
  double total = 0;
  std::vector<double> bytes;
  for (const OpInputs& ins : in) {
    double b = 0;
    for (size_t k = 1; k < ins.size(); ++k) b += static_cast<double>(ins[k]->nbytes());
    bytes.push_back(b);
    total += b;
  }
  for (size_t k = 0; k < in.size(); ++k)
    profile_node(g.nodes[i + k], in[k],
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     took * (total > 0 ? bytes[k] / total : 1.0 / static_cast<double>(in.size()))));
}

const Tensor* external_value(const Ref& r, const std::string& node, const std::map<std::string, Tensor>& inputs,
                             const WeightLookup& weights, Session* session, bool need_data) {
  switch (r.kind) {
    case Ref::Input: return &inputs.at(r.name);
    case Ref::Weight: {
      const Tensor* w = weights ? weights(r.name) : nullptr;
      if (!w) bad_graph("weight \"" + r.name + "\" was not given inline and the model has none of that name", node);
      return w;
    }
    case Ref::Session:
      if (!session) throw Error(ErrorCode::SessionNotFound, "the session holds no tensor \"" + r.name + "\"", node);
      return session->find(r.name, node, need_data);
    case Ref::Node: break;
  }
  return nullptr;
}

std::vector<Planned> plan_call(const Graph& g, const std::map<std::string, Tensor>& inputs, const json& bind,
                               const WeightLookup& weights, Session* session, const Limits& limits, bool need_data,
                               int64_t* total_bytes) {
  for (const auto& name : g.input_names)
    if (!inputs.count(name)) bad_graph("the call gives no input \"" + name + "\"");
  return plan_nodes(
      g, bind,
      [&](const Ref& r, const std::string& node) {
        return external_value(r, node, inputs, weights, session, need_data)->desc();
      },
      limits, total_bytes);
}

bool output_is_buffer(const GraphNode& node, const TensorDesc& desc) {
  return node.op->mutates_input < 0 && desc.dtype == DType::F32 &&
         !(node.op->views_weight && !node.in.empty() && node.in[0].kind == Ref::Weight);
}

void prepare_output(const GraphNode& node, const TensorDesc& desc, const OpInputs& in, Tensor& out, BufferPool* pool) {
  if (node.op->mutates_input >= 0) {
    out = *in[node.op->mutates_input];  // shares the buffer: written in place
  } else if (output_is_buffer(node, desc)) {
    out = pool ? pool->take(desc.shape) : Tensor::empty(desc.shape);
  } else {
    out.dtype = desc.dtype;
    out.shape = desc.shape;
  }
}

}  // namespace detail

using detail::BufferPool;
using detail::Planned;

std::set<std::string> implemented_features() {
  std::set<std::string> out;
  for (const auto& op : op_registry())
    for (const auto& f : op.features) out.insert(f.name);
  return out;
}

void require_features(const Graph& g, const std::set<std::string>& available) {
  for (const auto& f : g.features)
    if (!available.count(f))
      throw Error(ErrorCode::UnsupportedFeature, "no worker implements the feature \"" + f + "\" this graph uses",
                  g.first_user.count(f) ? g.first_user.at(f) : "", f);
}

RunResult run_graph(const Graph& g, const std::map<std::string, Tensor>& inputs, const json& bind,
                    const WeightLookup& weights, Session* session, const Limits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  auto external = [&](const Ref& r, const std::string& node) {
    return detail::external_value(r, node, inputs, weights, session, true);
  };

  // Pass 1: bind params, infer shapes, check limits. Nothing is written.
  int64_t total_bytes = 0;
  const std::vector<Planned> plan = detail::plan_call(g, inputs, bind, weights, session, limits, true, &total_bytes);
  int64_t output_bytes = 0;
  for (const auto& o : g.outputs) {
    const TensorDesc d = o.kind == Ref::Node ? plan[o.node].out : external(o, "")->desc();
    output_bytes += d.numel() * 4;  // packed weights travel dequantized (net/frame.h)
  }
  if (output_bytes > limits.max_output_bytes)
    too_large("the outputs would be " + std::to_string(output_bytes) + " bytes, over the " +
              std::to_string(limits.max_output_bytes) + " " + kOverOutputBytes);
  for (const auto& [k, r] : g.retain)
    if (r.kind != Ref::Node) external(r, "");

  const auto [last_use, pinned] = detail::value_lifetimes(g);

  // Pass 2: run.
  std::vector<Tensor> values(g.nodes.size());
  BufferPool& pool = detail::thread_buffer_pool();
  struct Trim {
    BufferPool& pool;
    ~Trim() { pool.trim(); }
  } trim_on_exit{pool};
  auto inputs_of = [&](const GraphNode& node) {
    OpInputs in;
    for (const auto& r : node.in)
      in.push_back(r.kind == Ref::Node ? &values[r.node] : const_cast<Tensor*>(external(r, node.id)));
    return in;
  };
  size_t ran_until = 0;  // nodes before this one ran already, with a sibling before them
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    detail::check_deadline(limits, node);
    if (const size_t n = i < ran_until ? 0 : detail::sibling_count(g, i); n == 1) {
      const OpInputs in = inputs_of(node);
      detail::prepare_output(node, plan[i].out, in, values[i], &pool);
      detail::run_node(node, in, plan[i].params, values[i]);
    } else if (n > 1) {
      std::vector<OpInputs> ins;
      std::vector<Params> params;
      std::vector<Tensor*> outs;
      for (size_t k = i; k < i + n; ++k) {
        ins.push_back(inputs_of(g.nodes[k]));
        detail::prepare_output(g.nodes[k], plan[k].out, ins.back(), values[k], &pool);
        params.push_back(plan[k].params);
        outs.push_back(&values[k]);
      }
      detail::run_siblings(g, i, ins, params, outs);
      ran_until = i + n;
    }
    for (const auto& r : node.in)
      if (r.kind == Ref::Node && last_use[r.node] == (int)i && !pinned[r.node]) pool.give(values[r.node]);
    if (last_use[i] < 0 && !pinned[i]) pool.give(values[i]);
  }

  RunResult result;
  for (const auto& o : g.outputs) result.outputs[o.text()] = o.kind == Ref::Node ? values[o.node] : *external(o, "");
  if (session)
    for (const auto& [k, r] : g.retain) session->tensors[k] = r.kind == Ref::Node ? values[r.node] : *external(r, "");
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::vector<PlannedNode> plan_graph(const Graph& g, const std::map<std::string, Tensor>& inputs, const json& bind,
                                    const WeightLookup& weights, Session* session, const Limits& limits) {
  int64_t total_bytes = 0;
  return detail::plan_call(g, inputs, bind, weights, session, limits, false, &total_bytes);
}

void run_planned_node(const Graph& g, size_t i, const PlannedNode& plan, const OpInputs& in, Tensor& out) {
  const GraphNode& node = g.nodes.at(i);
  detail::prepare_output(node, plan.out, in, out, nullptr);
  detail::run_node(node, in, plan.params, out);
}

RunResult run_call(const Call& call, Session* session, const Limits& limits, const WeightLookup& model_weights) {
  const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
    if (auto it = call.weights.find(name); it != call.weights.end()) return &it->second;
    return model_weights ? model_weights(name) : nullptr;
  };
  return run_graph(call.graph, call.inputs, call.bind, lookup, session, limits);
}

}  // namespace bonfire
