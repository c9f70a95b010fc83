// Private to the expression language (expr.cpp parses and evaluates JSON
// values; expr_numeric.cpp compiles the numeric program): the syntax tree
// and the elementwise functions both evaluators share.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/expr.h"

namespace bonfire {

struct Expr::Node {
  enum Kind { Literal, Name, Member, Index, Call, List, Unary, Binary, Ternary } kind;
  nlohmann::json value;  // Literal
  std::string text;     // Name, Member (member name), Unary/Binary (operator)
  std::vector<std::shared_ptr<const Node>> kids;
  size_t pos = 0;       // character offset, for errors
  size_t begin = 0, end = 0;  // the source text the node was parsed from: [begin, end)
  int depth = 1;              // levels of the tree below and including this node
};

namespace expr_detail {

using NodeP = std::shared_ptr<const Expr::Node>;
using Node = Expr::Node;

// The elementwise functions both evaluators share (IR §10).
inline double fn_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double fn_silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double fn_softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }  // torch: threshold 20
inline double fn_relu(double x) { return x < 0 ? 0.0 : x; }                            // NaN stays NaN
inline double fn_rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline double fn_pow2ceil(double x) {
  double p = 1;
  while (p < x) p *= 2;
  return p;
}
inline double fn_mod(double x, double y) { return x - std::floor(x / y) * y; }  // follows the divisor's sign

// "a.b.c" for a member chain rooted at a name (a Name is its own path);
// empty for anything else.
inline std::string path_of(const Node& n) {
  if (n.kind == Node::Name) return n.text;
  if (n.kind != Node::Member) return {};
  std::string base = path_of(*n.kids[0]);
  return base.empty() ? base : base + "." + n.text;
}

[[noreturn]] inline void expr_error(std::string_view src, size_t pos, const std::string& what) {
  throw Error(ErrorCode::BadGraph,
              "expression \"" + std::string(src) + "\": " + what + " at character " + std::to_string(pos + 1));
}

}  // namespace expr_detail

}  // namespace bonfire
