// libFuzzer target: graph calls (PROTOCOL.md) and bind expressions.
// The input is parsed as a whole call with Call::parse_text (graph/graph.h,
// wire tensors through graph/wire.h); when it parses, every node's
// expression params are evaluated against the call's "bind" object the way
// the executor's bind_params does. Independently, the same bytes are parsed
// as one core/expr expression, evaluated against a fixed set of names, and
// compiled to a numeric program and run. A refusal is bonfire::Error;
// anything else (another exception, a sanitizer report, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/expr.h"
#include "graph/graph.h"
#include "graph/wire.h"

using nlohmann::json;

namespace {

void graph_call(const std::string& text) {
  bonfire::Call call;
  try {
    call = bonfire::Call::parse_text(text, bonfire::Limits{});
  } catch (const bonfire::Error&) {
    return;
  }
  // As graph/executor.cpp's bind_params: a bind value wins over the expression.
  const bonfire::Expr::Lookup lookup = [&](const std::string& name) -> std::optional<json> {
    if (call.bind.contains(name)) return call.bind[name];
    return std::nullopt;
  };
  for (const auto& node : call.graph.nodes)
    for (const auto& [key, e] : node.exprs) {
      try {
        (void)e.eval_number(lookup);
      } catch (const bonfire::Error&) {
      }
    }
  // Wire tensors round-trip (both encodings).
  for (const auto& [name, t] : call.inputs) {
    (void)bonfire::tensor_to_json(t, false);
    (void)bonfire::tensor_to_json(t, true);
  }
}

void expression(const std::string& text) {
  bonfire::Expr e;
  try {
    e = bonfire::Expr::parse(text);
  } catch (const bonfire::Error&) {
    return;
  }
  (void)e.names();
  (void)e.paths();
  (void)e.and_terms();
  static const json values = {{"pos", 7},
                              {"step", 2},
                              {"n", -3.5},
                              {"s", "text"},
                              {"flag", true},
                              {"none", nullptr},
                              {"x", json::array({1, 2, 3})},
                              {"shape", json::array({2, 3, 4})},
                              {"attrs", {{"k", 4}, {"name", "a"}, {"list", {1, 2}}}}};
  const bonfire::Expr::Lookup lookup = [](const std::string& name) -> std::optional<json> {
    if (values.contains(name)) return values[name];
    return std::nullopt;
  };
  try {
    (void)e.eval(lookup);
  } catch (const bonfire::Error&) {
  }
  try {
    (void)e.eval_number(lookup);
  } catch (const bonfire::Error&) {
  }
  try {
    const bonfire::NumericExpr ne = e.compile_numeric({"x", "y"});
    const double one[2] = {1.5, -2.0};
    (void)ne.eval(one);
    double xs[3] = {0.0, -1.0, 1e300}, ys[3] = {2.0, 0.0, -1e-300}, out[3];
    const double* vars[2] = {xs, ys};
    ne.eval_batch(vars, 3, out);
  } catch (const bonfire::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  graph_call(text);
  expression(text);
  return 0;
}
