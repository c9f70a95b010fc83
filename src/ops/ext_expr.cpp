// Protocol extension ops that run the project's expression language over
// tensors (docs/PROTOCOL-EXTENSIONS.md): `expr`, an elementwise expression over
// up to 8 inputs, and `recurrence`, a small elementwise program run token by
// token over state tensors advanced in place. Expressions are compiled once
// per call (Expr::compile_numeric) and evaluated a block of elements at a time.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "core/expr.h"
#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {

namespace {

constexpr int64_t kBlock = 256;  // elements per evaluation block

// --- expr ------------------------------------------------------------------------

constexpr int kMaxExprInputs = 8;

// How input i is read at flat output index e of the first input's shape.
enum class Bcast { Same, Single, Column, Row };

Bcast classify(const TensorDesc& first, const TensorDesc& t, size_t i) {
  if (t.shape == first.shape) return Bcast::Same;
  if (t.numel() == 1) return Bcast::Single;
  const Shape& f = first.shape;
  if (!t.shape.empty() && t.shape.back() == 1 && t.shape.size() == f.size() && !f.empty() &&
      std::equal(f.begin(), f.end() - 1, t.shape.begin()))
    return Bcast::Column;
  const bool row_shape = t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[0] == 1);
  if (row_shape && t.numel() == first.cols()) return Bcast::Row;
  Shape col = f;
  if (!col.empty()) col.back() = 1;
  bad_graph("input " + std::string(1, char('a' + i)) + " " + shape_str(t.shape) + " must have the first input's shape " +
            shape_str(f) + ", or its last axis 1 (" + shape_str(col) + "), or be a row of " +
            std::to_string(first.cols()) + " values, or one value");
}

std::vector<std::string> expr_names(size_t n) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) v.push_back(std::string(1, char('a' + i)));
  for (size_t i = 0; i < n; ++i) v.push_back("x" + std::to_string(i));
  return v;
}

NumericExpr compile_expr(const Params& p, size_t n) {
  const std::string src = p.str("expr", "");
  return Expr::parse(src).compile_numeric(expr_names(n));
}

Shape infer_expr(const std::vector<TensorDesc>& in, const Params& p) {
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string name = "input " + std::string(1, char('a' + i));
    check_f32(in, i, name.c_str());
  }
  for (size_t i = 1; i < in.size(); ++i) classify(in[0], in[i], i);
  compile_expr(p, in.size());
  return in[0].shape;
}

void run_expr(const OpInputs& in, const Params& p, Tensor& out) {
  const NumericExpr prog = compile_expr(p, in.size());
  const size_t n_in = in.size();
  const TensorDesc first = in[0]->desc();
  std::vector<Bcast> kind(n_in, Bcast::Same);
  for (size_t i = 1; i < n_in; ++i) kind[i] = classify(first, in[i]->desc(), i);
  const int64_t E = out.numel(), C = std::max<int64_t>(1, first.cols());
  float* o = out.f32();
  parallel_for(E, 4 * kBlock, [&](int64_t e0, int64_t e1) {
    std::vector<double> buf(n_in * kBlock), res(kBlock);
    std::vector<const double*> vars(2 * n_in);
    for (size_t i = 0; i < n_in; ++i) vars[i] = vars[n_in + i] = buf.data() + i * kBlock;
    for (int64_t b0 = e0; b0 < e1; b0 += kBlock) {
      const int64_t n = std::min(kBlock, e1 - b0);
      for (size_t i = 0; i < n_in; ++i) {
        const float* src = in[i]->f32();
        double* dst = buf.data() + i * kBlock;
        switch (kind[i]) {
          case Bcast::Same:
            for (int64_t j = 0; j < n; ++j) dst[j] = src[b0 + j];
            break;
          case Bcast::Single:
            for (int64_t j = 0; j < n; ++j) dst[j] = src[0];
            break;
          case Bcast::Column:
            for (int64_t j = 0; j < n; ++j) dst[j] = src[(b0 + j) / C];
            break;
          case Bcast::Row:
            for (int64_t j = 0; j < n; ++j) dst[j] = src[(b0 + j) % C];
            break;
        }
      }
      prog.eval_batch(vars.data(), n, res.data());
      for (int64_t j = 0; j < n; ++j) o[b0 + j] = (float)res[j];
    }
  });
}

// --- recurrence -------------------------------------------------------------------

constexpr int64_t kMaxWidth = int64_t(1) << 28;

struct Stmt {
  int target;  // variable slot written
  NumericExpr e;
};

// A recurrence node's params, checked and compiled. Variable slots: index
// names, data inputs, weights, state tensors, then let names (step mode) or
// init temporaries (init mode).
struct Program {
  bool init_mode = false;
  std::vector<std::string> index_names;
  std::vector<int64_t> index_sizes;
  int64_t W = 1;
  size_t n_inputs = 0, n_weights = 0, n_state = 0;
  bool data_given = true;  // init mode may leave the data inputs out
  std::vector<std::string> vars;
  std::vector<Stmt> lets, updates, init;
  NumericExpr readout;

  size_t first_input() const { return index_names.size(); }
  size_t first_weight() const { return first_input() + n_inputs; }
  size_t first_state() const { return first_weight() + n_weights; }
  size_t first_temp() const { return first_state() + n_state; }
};

std::vector<std::string> string_list(const Params& p, const char* key, bool required) {
  std::vector<std::string> out;
  const json* j = p.get(key);
  if (!j) {
    check(!required, [&] { return std::string("recurrence needs param \"") + key + "\""; });
    return out;
  }
  check(j->is_array(), [&] { return std::string("param ") + key + " must be an array of strings"; });
  for (const auto& v : *j) {
    check(v.is_string(), [&] { return std::string("param ") + key + " must be an array of strings, got " + v.dump(); });
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool is_name(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
}

// "name = expression" -> (name, expression).
std::pair<std::string, std::string> split_statement(const std::string& s, const std::string& where) {
  size_t i = 0;
  while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
  size_t j = i;
  while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) ++j;
  std::string name = s.substr(i, j - i);
  while (j < s.size() && std::isspace((unsigned char)s[j])) ++j;
  if (!is_name(name) || j >= s.size() || s[j] != '=' || (j + 1 < s.size() && s[j + 1] == '='))
    bad_graph(where + " must be a statement \"name = expression\", got \"" + s + "\"");
  return {name, s.substr(j + 1)};
}

int slot_of(const std::vector<std::string>& vars, const std::string& n) {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i] == n) return (int)i;
  return -1;
}

Program build_program(const Params& p, size_t n_in) {
  Program g;
  const std::string mode = p.str("mode", "step");
  check(mode == "step" || mode == "init", [&] { return "mode must be \"step\" or \"init\", got \"" + mode + "\""; });
  g.init_mode = mode == "init";

  const json* idx = p.get("index");
  check(idx && idx->is_array() && !idx->empty(),
        "param index must be a non-empty array of [name, size] pairs, e.g. [[\"c\", 64]]");
  for (const auto& e : *idx) {
    check(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(),
          [&] { return "param index must be an array of [name, size] pairs, got " + e.dump(); });
    const double sz = e[1].get<double>();
    check(sz >= 1 && sz == std::floor(sz) && sz <= (double)kMaxWidth, [&] {
      return "index size of \"" + e[0].get<std::string>() + "\" must be a positive integer, got " + e[1].dump();
    });
    g.index_names.push_back(e[0].get<std::string>());
    g.index_sizes.push_back((int64_t)sz);
    g.W *= (int64_t)sz;
    check(g.W <= kMaxWidth, [&] { return "the index sizes multiply to over " + std::to_string(kMaxWidth); });
  }
  const auto inputs = string_list(p, "inputs", false);
  const auto weights = string_list(p, "weights", false);
  const auto state = string_list(p, "state", true);
  check(!state.empty(), "param state must name at least one state tensor");
  g.n_inputs = inputs.size();
  g.n_weights = weights.size();
  g.n_state = state.size();

  // Input layout.
  const size_t full = g.n_inputs + g.n_weights + g.n_state;
  if (g.init_mode) {
    check(n_in == full || n_in == g.n_weights + g.n_state, [&] {
      return "recurrence (mode init) takes its " + std::to_string(g.n_weights) + " weight(s) then " +
             std::to_string(g.n_state) + " state tensor(s), optionally after its " + std::to_string(g.n_inputs) +
             " data input(s): " + std::to_string(g.n_weights + g.n_state) + " or " + std::to_string(full) +
             " inputs, got " + std::to_string(n_in);
    });
    g.data_given = n_in == full;
  } else {
    check(g.n_inputs >= 1, "param inputs must name at least one data input");
    check(n_in == full, [&] {
      return "recurrence takes its " + std::to_string(g.n_inputs) + " data input(s), " + std::to_string(g.n_weights) +
             " weight(s) and " + std::to_string(g.n_state) + " state tensor(s) in that order: " + std::to_string(full) +
             " inputs, got " + std::to_string(n_in);
    });
  }

  const std::vector<std::string> names_copy = g.index_names;
  for (const std::vector<std::string>* group : {&names_copy, &inputs, &weights, &state})
    for (const auto& n : *group) {
      check(is_name(n), [&] { return "\"" + n + "\" is not a name (letters, digits, _)"; });
      check(slot_of(g.vars, n) < 0,
            [&] { return "the name \"" + n + "\" is used twice (index, inputs, weights, state)"; });
      g.vars.push_back(n);
    }

  auto compile = [&](const std::string& src, const std::vector<std::string>& visible) {
    return Expr::parse(src).compile_numeric(visible);
  };

  if (g.init_mode) {
    const auto init = string_list(p, "init", true);
    check(!init.empty(), "mode init needs init statements");
    // Data inputs are not visible: there is no token.
    std::vector<std::string> visible = g.vars;
    for (size_t i = 0; i < g.n_inputs; ++i) visible[g.first_input() + i] = "";
    for (size_t i = 0; i < init.size(); ++i) {
      auto [name, src] = split_statement(init[i], "init[" + std::to_string(i) + "]");
      Stmt st{slot_of(g.vars, name), compile(src, visible)};
      // An eager message: clang before 16 cannot capture a structured binding.
      check(st.target < 0 || (size_t)st.target >= g.first_state(),
            "init[" + std::to_string(i) + "] assigns \"" + name +
                "\", which is an index, input or weight; assign a state tensor or a new name");
      if (st.target < 0) {  // a temporary, visible to later statements
        visible.push_back(name);
        g.vars.push_back(name);
        st.target = (int)g.vars.size() - 1;
      }
      g.init.push_back(std::move(st));
    }
    return g;
  }

  const auto lets = string_list(p, "let", false);
  const auto updates = string_list(p, "update", true);
  check(!updates.empty(), "param update must hold at least one statement");
  check(p.has("readout"), "recurrence needs param \"readout\" (the output expression)");
  for (size_t i = 0; i < lets.size(); ++i) {
    auto [name, src] = split_statement(lets[i], "let[" + std::to_string(i) + "]");
    check(slot_of(g.vars, name) < 0, "let[" + std::to_string(i) + "] defines \"" + name + "\", which already exists");
    Stmt st{(int)g.vars.size(), compile(src, g.vars)};  // sees only earlier lets
    g.vars.push_back(name);
    g.lets.push_back(std::move(st));
  }
  for (size_t i = 0; i < updates.size(); ++i) {
    auto [name, src] = split_statement(updates[i], "update[" + std::to_string(i) + "]");
    const int slot = slot_of(g.vars, name);
    check(slot >= (int)g.first_state() && slot < (int)g.first_temp(),
          "update[" + std::to_string(i) + "] assigns \"" + name + "\", which is not a state tensor");
    g.updates.push_back({slot, compile(src, g.vars)});
  }
  g.readout = compile(p.str("readout", ""), g.vars);
  return g;
}

uint64_t recurrence_writes(const Params& p, size_t n_in) {
  const json* s = p.get("state");
  if (!s || !s->is_array() || s->size() > n_in) return 0;
  uint64_t m = 0;
  for (size_t i = n_in - s->size(); i < n_in && i < 64; ++i) m |= uint64_t(1) << i;
  return m;
}

Shape infer_recurrence(const std::vector<TensorDesc>& in, const Params& p) {
  const Program g = build_program(p, in.size());
  const size_t base = g.data_given ? 0 : g.n_inputs;  // input position of data input 0, shifted when absent
  const int64_t W = g.W;
  int64_t T = -1;
  if (g.data_given)
    for (size_t i = 0; i < g.n_inputs; ++i) {
      const std::string what = "data input " + g.vars[g.first_input() + i];
      check_f32(in, i, what.c_str());
      const TensorDesc& t = in[i];
      check(t.shape.size() == 2 && (t.shape[1] == W || t.shape[1] == 1),
            [&] { return what + " must be [T, " + std::to_string(W) + "] or [T, 1], got " + shape_str(t.shape); });
      if (T < 0) T = t.shape[0];
      check(t.shape[0] == T, [&] {
        return what + " has " + std::to_string(t.shape[0]) + " rows; the first data input has " + std::to_string(T);
      });
    }
  for (size_t i = 0; i < g.n_weights; ++i) {
    const TensorDesc& t = in[g.n_inputs + i - base];
    const std::string what = "weight " + g.vars[g.first_weight() + i];
    check(t.numel() == W || t.numel() == 1,
          [&] { return what + " must hold " + std::to_string(W) + " values (or one), got " + shape_str(t.shape); });
  }
  for (size_t i = 0; i < g.n_state; ++i) {
    const size_t k = g.n_inputs + g.n_weights + i - base;
    const std::string what = "state " + g.vars[g.first_state() + i];
    check_f32(in, k, what.c_str());
    check(in[k].numel() == W, [&] {
      return what + " must hold " + std::to_string(W) + " values (the product of the index sizes), got " +
             shape_str(in[k].shape);
    });
  }
  if (g.init_mode) return {1};
  return {T, W};
}

void run_recurrence(const OpInputs& in, const Params& p, Tensor& out) {
  const Program g = build_program(p, in.size());
  const size_t base = g.data_given ? 0 : g.n_inputs;
  const int64_t W = g.W;
  const int64_t T = g.init_mode ? 0 : in[0]->shape[0];
  std::vector<Tensor> weights;
  for (size_t i = 0; i < g.n_weights; ++i) {
    const Tensor& w = *in[g.n_inputs + i - base];
    weights.push_back(w.packed() ? to_f32(w) : w);
  }
  std::vector<float*> state;
  for (size_t i = 0; i < g.n_state; ++i) state.push_back(in[g.n_inputs + g.n_weights + i - base]->f32());
  const size_t V = g.vars.size();

  parallel_for(W, kBlock, [&](int64_t k0, int64_t k1) {
    std::vector<double> buf(V * kBlock), res(kBlock);
    std::vector<const double*> vars(V);
    for (size_t v = 0; v < V; ++v) vars[v] = buf.data() + v * kBlock;
    auto slot = [&](size_t v) { return buf.data() + v * kBlock; };
    for (int64_t b0 = k0; b0 < k1; b0 += kBlock) {
      const int64_t n = std::min(kBlock, k1 - b0);
      // Index coordinates, row-major in the order written.
      for (int64_t j = 0; j < n; ++j) {
        int64_t rest = b0 + j;
        for (size_t d = g.index_sizes.size(); d-- > 0;) {
          slot(d)[j] = (double)(rest % g.index_sizes[d]);
          rest /= g.index_sizes[d];
        }
      }
      for (size_t i = 0; i < g.n_weights; ++i) {
        const Tensor& w = weights[i];
        double* dst = slot(g.first_weight() + i);
        for (int64_t j = 0; j < n; ++j) dst[j] = w.numel() == 1 ? w.f32()[0] : w.f32()[b0 + j];
      }
      for (size_t i = 0; i < g.n_state; ++i) {
        double* dst = slot(g.first_state() + i);
        for (int64_t j = 0; j < n; ++j) dst[j] = state[i][b0 + j];
      }
      if (g.init_mode) {
        for (const auto& st : g.init) st.e.eval_batch(vars.data(), n, slot(st.target));
      } else {
        for (int64_t t = 0; t < T; ++t) {
          for (size_t i = 0; i < g.n_inputs; ++i) {
            const Tensor& x = *in[i];
            double* dst = slot(g.first_input() + i);
            if (x.shape[1] == 1 && W != 1) {
              std::fill(dst, dst + n, (double)x.f32()[t]);
            } else {
              const float* row = x.f32() + t * W + b0;
              for (int64_t j = 0; j < n; ++j) dst[j] = row[j];
            }
          }
          for (const auto& st : g.lets) st.e.eval_batch(vars.data(), n, slot(st.target));
          for (const auto& st : g.updates) st.e.eval_batch(vars.data(), n, slot(st.target));
          g.readout.eval_batch(vars.data(), n, res.data());
          float* orow = out.f32() + t * W + b0;
          for (int64_t j = 0; j < n; ++j) orow[j] = (float)res[j];
        }
      }
      for (size_t i = 0; i < g.n_state; ++i) {
        const double* src = slot(g.first_state() + i);
        for (int64_t j = 0; j < n; ++j) state[i][b0 + j] = (float)src[j];
      }
    }
  });
  if (g.init_mode) out.f32()[0] = 0.0f;
}

}  // namespace

void register_ext_expr_ops(std::vector<OpDef>& ops) {
  OpDef e;
  e.name = "expr";
  e.min_inputs = 1;
  e.max_inputs = kMaxExprInputs;
  e.params = {{"expr", ParamType::String, false}};
  e.features = {ext_feature("ext.expr")};
  e.infer = infer_expr;
  e.run = run_expr;
  ops.push_back(e);

  OpDef r;
  r.name = "recurrence";
  r.min_inputs = 1;
  r.max_inputs = 64;
  r.params = {{"index", ParamType::Array, false},   {"inputs", ParamType::Array, true},
              {"weights", ParamType::Array, true},  {"state", ParamType::Array, false},
              {"let", ParamType::Array, true},      {"update", ParamType::Array, true},
              {"readout", ParamType::String, true}, {"init", ParamType::Array, true},
              {"mode", ParamType::String, true}};
  r.features = {ext_feature("ext.recurrence")};
  r.infer = infer_recurrence;
  r.run = run_recurrence;
  r.writes_inputs_of = recurrence_writes;
  // Weights may be packed (expanded once per call); data and state must be
  // f32, which infer checks since their positions depend on the params.
  r.packed_inputs = ~0u;
  ops.push_back(r);
}

}  // namespace bonfire
