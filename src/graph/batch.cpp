#include "graph/batch.h"

#include <chrono>

#include "core/error.h"
#include "core/threads.h"
#include "graph/executor_internal.h"
#include "ops/gemm.h"

namespace bonfire {

using json = nlohmann::json;

namespace {

// Where a value lives during a batched run.
enum class Kind {
  Shared,   // one tensor, the same for every row (weights, what depends only on them)
  Stacked,  // one tensor: the rows' own values concatenated on axis 0
  PerRow,   // one tensor per row, as that row's own call has it
};

std::string row_prefix(size_t r) { return "row " + std::to_string(r) + ": "; }

// The rows' values (one shape) stacked on axis 0, in a pooled buffer.
Tensor stack(const std::vector<Tensor>& rows, detail::BufferPool& pool) {
  std::vector<const Tensor*> parts;
  for (const auto& t : rows) parts.push_back(&t);
  return stack_axis0(parts, [&](const Shape& s) { return pool.take(s); });
}

// Whether node i may run once over the stacked rows: its op is row-wise,
// its bound params are the same for every row, and its inputs fit the op's
// rule (`solo` is the shape input k has in one row's own call).
bool runs_stacked(const GraphNode& node, const std::vector<Kind>& in_kind, const std::vector<const Shape*>& solo,
                  bool same_params) {
  const RowRule rule = node.op->rows;
  if (rule == RowRule::None || !same_params || node.op->mutates_input >= 0 || in_kind.empty()) return false;
  if (in_kind[0] == Kind::Shared) return false;
  // Stacking 1-D values would merge rows a last-axis op keeps apart.
  const Shape& a = *solo[0];
  if (a.empty() || (rule == RowRule::FirstOperand && a.size() < 2)) return false;
  for (size_t k = 1; k < in_kind.size(); ++k) {
    if (rule != RowRule::Elementwise) {
      if (in_kind[k] != Kind::Shared) return false;
      continue;
    }
    // Elementwise: the same solo shape as input 0, or a shared row vector /
    // scalar that broadcasts the same way over one row or over all.
    if (in_kind[k] != Kind::Shared) {
      if (*solo[k] != a) return false;
    } else if (shape_numel(*solo[k]) != 1 && shape_numel(*solo[k]) != a.back()) {
      return false;
    }
  }
  return true;
}

}  // namespace

RunResult run_graph_rows(const Graph& g, const std::map<std::string, Tensor>& stacked_inputs,
                         const std::vector<BatchRow>& rows, const WeightLookup& weights, const Limits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t B = rows.size();
  if (B == 0) bad_graph("a batched call needs at least one row");
  for (size_t r = 0; r < B; ++r) {
    if (!rows[r].session) bad_graph(row_prefix(r) + "a batched row needs a session");
    for (size_t q = 0; q < r; ++q)
      if (rows[q].session == rows[r].session) bad_graph(row_prefix(r) + "its session is also row " + std::to_string(q) + "'s");
  }
  for (const auto& name : g.input_names) {
    auto it = stacked_inputs.find(name);
    if (it == stacked_inputs.end()) bad_graph("the call gives no input \"" + name + "\"");
    const Tensor& t = it->second;
    if (t.packed() || t.shape.empty() || t.shape[0] % static_cast<int64_t>(B) != 0)
      bad_graph("input \"" + name + "\" " + shape_str(t.shape) + " does not stack " + std::to_string(B) +
                " rows on its first axis");
  }

  auto weight = [&](const Ref& r, const std::string& node) -> const Tensor* {
    const Tensor* w = weights ? weights(r.name) : nullptr;
    if (!w) bad_graph("weight \"" + r.name + "\" was not given inline and the model has none of that name", node);
    return w;
  };
  auto session_tensor = [&](size_t row, const Ref& r, const std::string& node) -> Tensor* {
    try {
      return rows[row].session->find(r.name, node, true);
    } catch (Error& e) {
      throw Error(e.code, row_prefix(row) + e.what(), e.node);
    }
  };

  // Pass 1: each row planned as its own call would be. Nothing is written.
  // Row 0 first; the others, side by side, copy what they share with it.
  std::vector<int64_t> row_bytes(B, 0);
  std::vector<std::exception_ptr> row_error(B);
  std::vector<std::vector<detail::Planned>> plan(B);
  auto plan_row = [&](size_t r) {
    const detail::ExternalDesc desc = [&](const Ref& ref, const std::string& node) -> TensorDesc {
      switch (ref.kind) {
        case Ref::Input: {
          TensorDesc d = stacked_inputs.at(ref.name).desc();
          d.shape[0] /= static_cast<int64_t>(B);
          return d;
        }
        case Ref::Weight: return weight(ref, node)->desc();
        case Ref::Session: return session_tensor(r, ref, node)->desc();
        case Ref::Node: break;
      }
      return {};
    };
    try {
      plan[r] = detail::plan_nodes(g, rows[r].bind, desc, limits, &row_bytes[r], r > 0 ? &plan[0] : nullptr);
    } catch (Error& e) {
      row_error[r] = std::make_exception_ptr(Error(e.code, row_prefix(r) + e.what(), e.node, e.feature));
    } catch (...) {
      row_error[r] = std::current_exception();
    }
  };
  plan_row(0);
  if (row_error[0]) std::rethrow_exception(row_error[0]);
  parallel_for(static_cast<int64_t>(B) - 1, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) plan_row(static_cast<size_t>(r) + 1);
  });
  for (size_t r = 1; r < B; ++r)
    if (row_error[r]) std::rethrow_exception(row_error[r]);
  int64_t total_bytes = 0;
  for (int64_t b : row_bytes) total_bytes += b;
  if (total_bytes > limits.max_total_bytes)
    too_large("the batched call would allocate over " + std::to_string(limits.max_total_bytes) + " bytes");
  for (const auto& o : g.outputs)
    if (o.kind != Ref::Node && o.kind != Ref::Input) bad_graph("a batched call's outputs must be node values");
  for (const auto& [k, ref] : g.retain)
    if (ref.kind != Ref::Node) bad_graph("a batched call may retain only node values (\"" + k + "\")");

  // Where each node's value lives, decided before anything runs.
  std::vector<Kind> kind(g.nodes.size());
  auto kind_of = [&](const Ref& ref) {
    switch (ref.kind) {
      case Ref::Input: return Kind::Stacked;
      case Ref::Weight: return Kind::Shared;
      case Ref::Session: return Kind::PerRow;
      case Ref::Node: return kind[ref.node];
    }
    return Kind::Shared;
  };
  // The inputs' shapes in one row's own call.
  std::map<std::string, Shape> solo_inputs;
  for (const auto& [name, t] : stacked_inputs) {
    Shape s = t.shape;
    s[0] /= static_cast<int64_t>(B);
    solo_inputs.emplace(name, std::move(s));
  }
  std::vector<Kind> in_kind;
  std::vector<const Shape*> solo;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    in_kind.clear();
    solo.clear();
    bool all_shared = true;
    for (const auto& ref : node.in) {
      in_kind.push_back(kind_of(ref));
      all_shared = all_shared && in_kind.back() == Kind::Shared;
      switch (ref.kind) {
        case Ref::Node: solo.push_back(&plan[0][ref.node].out.shape); break;
        case Ref::Input: solo.push_back(&solo_inputs.at(ref.name)); break;
        case Ref::Weight: solo.push_back(&weight(ref, node.id)->shape); break;
        case Ref::Session: solo.push_back(&session_tensor(0, ref, node.id)->shape); break;
      }
    }
    // Rows bind the same params when their expressions' values agree (the
    // rest of the params are the node's own).
    bool same_params = true;
    for (size_t r = 1; r < B && same_params; ++r)
      for (const auto& [key, e] : node.exprs) {
        if (plan[r][i].params.all().at(key) != plan[0][i].params.all().at(key)) {
          same_params = false;
          break;
        }
      }
    for (size_t k = 0; k < node.in.size(); ++k)
      if (((int)k == node.op->mutates_input || node.op->writes((int)k, plan[0][i].params, node.in.size())) &&
          in_kind[k] != Kind::PerRow)
        bad_graph("a batched call cannot write input " + std::to_string(k) + " (\"" + node.in[k].text() +
                      "\"): its rows would share it",
                  node.id);
    if (all_shared && same_params && node.op->mutates_input < 0)
      kind[i] = Kind::Shared;
    else if (runs_stacked(node, in_kind, solo, same_params))
      kind[i] = Kind::Stacked;
    else
      kind[i] = Kind::PerRow;
  }

  // Not a structured binding: the browser worker's clang 14 cannot capture
  // one in the lambdas below.
  const detail::Lifetimes lifetimes = detail::value_lifetimes(g);
  const std::vector<int>& last_use = lifetimes.last_use;
  const std::vector<bool>& pinned = lifetimes.pinned;

  // Pass 2: run.
  detail::BufferPool& pool = detail::thread_buffer_pool();
  struct Trim {
    detail::BufferPool& pool;
    ~Trim() { pool.trim(); }
  } trim_on_exit{pool};
  BatchRowsScope per_row_products;
  std::vector<Tensor> one(g.nodes.size());                  // Shared and Stacked values
  std::vector<std::vector<Tensor>> per_row(g.nodes.size());  // PerRow values
  auto release = [&](int n) {
    if (kind[n] == Kind::PerRow) {
      for (auto& t : per_row[n]) pool.give(t);
      per_row[n].clear();
    } else {
      pool.give(one[n]);
    }
  };
  std::vector<Tensor> inputs_tmp;  // stacked copies of per-row inputs, for this node only
  int64_t nodes_once = 0;
  // A node run once: its inputs (per-row values stacked into inputs_tmp)
  // and its plan, with a stacked output's rows multiplied.
  auto once_inputs = [&](const GraphNode& node) {
    inputs_tmp.assign(node.in.size(), Tensor());
    OpInputs in;
    for (size_t k = 0; k < node.in.size(); ++k) {
      const Ref& ref = node.in[k];
      if (ref.kind == Ref::Input) {
        in.push_back(const_cast<Tensor*>(&stacked_inputs.at(ref.name)));
      } else if (ref.kind == Ref::Weight) {
        in.push_back(const_cast<Tensor*>(weight(ref, node.id)));
      } else if (kind[ref.node] == Kind::PerRow) {
        inputs_tmp[k] = stack(per_row[ref.node], pool);
        in.push_back(&inputs_tmp[k]);
      } else {
        in.push_back(&one[ref.node]);
      }
    }
    return in;
  };
  auto once_plan = [&](size_t i) {
    detail::Planned p = plan[0][i];
    if (kind[i] == Kind::Stacked) {
      if (p.out.shape.empty()) p.out.shape = {1};
      p.out.shape[0] *= static_cast<int64_t>(B);
    }
    return p;
  };
  // Sibling products run together when they run once, of one kind, on an
  // input 0 that needs no stacking.
  auto siblings = [&](size_t i) {
    size_t n = detail::sibling_count(g, i);
    if (n == 1) return n;
    const Ref& x = g.nodes[i].in[0];  // siblings have one
    if (x.kind == Ref::Node && kind[x.node] == Kind::PerRow) return size_t{1};
    for (size_t k = 1; k < n; ++k)
      if (kind[i + k] != kind[i]) n = k;
    return n;
  };
  // Node i for row r, on its own slice of the inputs.
  auto run_row = [&](size_t i, size_t r) {
    const GraphNode& node = g.nodes[i];
    std::vector<Tensor> slices(node.in.size());
    OpInputs in;
    for (size_t k = 0; k < node.in.size(); ++k) {
      const Ref& ref = node.in[k];
      if (ref.kind == Ref::Input) {
        slices[k] = axis0_part(stacked_inputs.at(ref.name), r, B);
        in.push_back(&slices[k]);
      } else if (ref.kind == Ref::Weight) {
        in.push_back(const_cast<Tensor*>(weight(ref, node.id)));
      } else if (ref.kind == Ref::Session) {
        in.push_back(session_tensor(r, ref, node.id));
      } else if (kind[ref.node] == Kind::PerRow) {
        in.push_back(&per_row[ref.node][r]);
      } else if (kind[ref.node] == Kind::Stacked) {
        slices[k] = axis0_part(one[ref.node], r, B);
        in.push_back(&slices[k]);
      } else {
        in.push_back(&one[ref.node]);
      }
    }
    Tensor& out = per_row[i][r];
    const detail::Planned& p = plan[r][i];
    if (!out.data) detail::prepare_output(node, p.out, in, out, nullptr);  // not a buffer (see take_row_outputs)
    try {
      detail::run_node(node, in, p.params, out);
    } catch (Error& e) {
      throw Error(e.code, row_prefix(r) + e.what(), e.node, e.feature);
    }
  };
  // The buffers that nodes [i, last) write for every row, from this call's
  // pool, before the rows run side by side: taken by each row's thread
  // under a lock instead, the takes and the waits for the lock cost an
  // 8-row step of the 1.1B bench model 2.2 ms of CPU (a helper's own pool
  // was empty every time, and fresh buffers' page faults cost more).
  auto take_row_outputs = [&](size_t i, size_t last) {
    for (size_t k = i; k < last; ++k)
      for (size_t r = 0; r < B; ++r)
        if (detail::output_is_buffer(g.nodes[k], plan[r][k].out)) per_row[k][r] = pool.take(plan[r][k].out.shape);
  };
  // Gives back what node i's run was the last to read, and its own value
  // when nothing reads it.
  auto release_after = [&](size_t i) {
    for (const auto& ref : g.nodes[i].in)
      if (ref.kind == Ref::Node && last_use[ref.node] == (int)i && !pinned[ref.node]) release(ref.node);
    if (last_use[i] < 0 && !pinned[i]) release((int)i);
  };
  size_t ran_until = 0;  // nodes before this one ran already, with a sibling or in a run of per-row nodes
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    detail::check_deadline(limits, node);
    if (i < ran_until) {
      // ran with its sibling
    } else if (const size_t n = kind[i] == Kind::PerRow ? 0 : siblings(i); n == 1) {
      const OpInputs in = once_inputs(node);
      const detail::Planned p = once_plan(i);
      detail::prepare_output(node, p.out, in, one[i], &pool);
      detail::run_node(node, in, p.params, one[i]);
      ++nodes_once;
      for (auto& t : inputs_tmp) pool.give(t);
    } else if (n > 1) {
      std::vector<OpInputs> ins;
      std::vector<Params> params;
      std::vector<Tensor*> outs;
      for (size_t k = i; k < i + n; ++k) {
        ins.push_back(once_inputs(g.nodes[k]));  // input 0 is not per-row: nothing is stacked
        const detail::Planned p = once_plan(k);
        detail::prepare_output(g.nodes[k], p.out, ins.back(), one[k], &pool);
        params.push_back(p.params);
        outs.push_back(&one[k]);
      }
      detail::run_siblings(g, i, ins, params, outs);
      nodes_once += static_cast<int64_t>(n);
      ran_until = i + n;
    } else {
      // A run of per-row nodes (a layer's ropes, cache writes and
      // attention; the draw) goes through the rows once: each row's nodes
      // one after another on one thread, with one join at the end instead
      // of one a node.
      size_t last = i + 1;
      while (last < g.nodes.size() && kind[last] == Kind::PerRow) ++last;
      for (size_t k = i; k < last; ++k) per_row[k].resize(B);
      take_row_outputs(i, last);
      auto run_rows = [&](size_t r) {
        for (size_t k = i; k < last; ++k) {
          if (k > i) detail::check_deadline(limits, g.nodes[k]);
          run_row(k, r);
        }
      };
      // The rows side by side, one thread each: a row's rope, cache write,
      // attention or draw is too small to split over the threads (a decode
      // row's attention spent more on the split than on its keys), and a
      // row's result does not depend on the threads it runs on. One row
      // alone keeps the op's own split.
      if (B > 1)
        parallel_for(static_cast<int64_t>(B), 1, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) run_rows(static_cast<size_t>(r));
        });
      else
        run_rows(0);
      ran_until = last;  // the loop gives back their values from here on, node by node
    }
    release_after(i);
  }

  RunResult result;
  for (const auto& o : g.outputs) {
    if (o.kind == Ref::Input) {
      result.outputs[o.text()] = stacked_inputs.at(o.name);
    } else if (kind[o.node] == Kind::PerRow) {
      result.outputs[o.text()] = stack(per_row[o.node], pool);
    } else {
      result.outputs[o.text()] = one[o.node];  // a Shared output is the same for every row: sent once
    }
  }
  for (const auto& [k, ref] : g.retain)
    for (size_t r = 0; r < B; ++r)
      rows[r].session->tensors[k] = kind[ref.node] == Kind::PerRow  ? per_row[ref.node][r]
                                    : kind[ref.node] == Kind::Stacked ? to_f32(axis0_part(one[ref.node], r, B))
                                                                      : to_f32(one[ref.node]);
  result.nodes_once = nodes_once;
  result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

void parse_batch_rows(const nlohmann::json& rows, size_t max_rows, std::vector<std::string>& sessions,
                      std::vector<nlohmann::json>& binds) {
  if (!rows.is_array() || rows.empty() || rows.size() > max_rows)
    throw Error(ErrorCode::BadGraph, "\"rows\" must be an array of 1 to " + std::to_string(max_rows) + " rows");
  std::set<std::string> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    const std::string where = "rows[" + std::to_string(i) + "]";
    if (!row.is_object() || !row.contains("session") || !row["session"].is_string() ||
        row["session"].get<std::string>().empty())
      throw Error(ErrorCode::BadGraph, where + " needs a \"session\" string");
    const std::string sid = row["session"].get<std::string>();
    if (!seen.insert(sid).second)
      throw Error(ErrorCode::BadGraph, where + ": session \"" + bounded_text(sid, 64) + "\" is in the call twice");
    const nlohmann::json bind = row.value("bind", nlohmann::json::object());
    if (!bind.is_object()) throw Error(ErrorCode::BadGraph, where + ".bind must be an object");
    sessions.push_back(sid);
    binds.push_back(bind);
  }
}

}  // namespace bonfire
