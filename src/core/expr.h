// The project's one expression language: graph `bind` params ("pos + 1"),
// kernel packages (`when`, `derive`, dispatch sizes) and the IR's
// `expr`/`recurrence` all parse with this.
//
//   literals   1  2.5e-3  "text"  'text'  true  false  null  [1, 2]
//   names      pos   attrs.k   shapes.input   x[0]
//   operators  + - * / %   == != < <= > >=   and or not (&& || !)
//              A if C else B
//   calls      min max floor ceil round abs sqrt exp log pow ceilDiv pow2ceil
//              rsqrt tanh sigmoid silu softplus relu   (elementwise, IR §10)
//              has(obj, "key")  dim(shape, i)  numel(shape)  len(x)
//              obj.has("key")  (a method call passes obj first)
//
// Values are JSON values (numbers are doubles). Names resolve through a
// caller-supplied lookup, so the caller decides what exists and may compute
// values lazily. A dotted name (`constants.X`, `device.limits.Y`) is offered
// to the lookup whole first ("constants.X"); when it answers nullopt the
// base is looked up and the member taken from it. A name or dotted name
// nobody defines is an error naming it ("unknown name 'attrs.foo'"). Errors are bonfire::Error(BadGraph) naming the expression
// and the character position.
//
// softplus(x) is log(1 + exp(x)), and x itself above 20 (torch's threshold);
// sigmoid(x) = 1 / (1 + exp(-x)); silu(x) = x · sigmoid(x); relu keeps NaN.
//
// For tensor math an expression is compiled once (`compile_numeric`) into a
// small program over double variables and run per element or per block of
// elements. Same parser, same functions; the differences: only numbers exist
// (true/false are 1/0, comparisons and logic give 1/0, no strings, lists,
// members, has/dim/numel/len), and arithmetic is IEEE (x / 0 is ±inf or NaN,
// not an error).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace bonfire {

class NumericExpr;

class Expr {
 public:
  // Returns the value of a name, or nullopt when it is not defined.
  using Lookup = std::function<std::optional<nlohmann::json>(const std::string& name)>;

  static Expr parse(std::string_view source);  // throws Error(BadGraph)

  nlohmann::json eval(const Lookup& lookup) const;
  double eval_number(const Lookup& lookup) const;  // throws unless a finite number
  // Top-level names the expression reads (not members or function names).
  std::set<std::string> names() const;
  // Names and dotted names the expression reads, as written: "a",
  // "attrs.k", "device.limits.maxBufferSize"; `device.features.has("x")`
  // reads "device.features" (function and method names are not read). Each
  // with the character offset (0-based) where it first appears.
  std::map<std::string, size_t> paths() const;
  // The operands of the top-level `and` chain, as source text, in order
  // ("a and (b or c) and d" → "a", "(b or c)", "d"); one item, the whole
  // source, when the expression is not an `and`.
  std::vector<std::string> and_terms() const;
  const std::string& source() const { return source_; }
  // The numeric program for variables `vars` (variable i is vars[i]). Throws
  // Error(BadGraph) with the position of an unknown name or of anything that
  // is not numeric.
  NumericExpr compile_numeric(const std::vector<std::string>& vars) const;

  struct Node;

 private:
  std::string source_;
  std::shared_ptr<const Node> root_;
};

// A compiled expression over double variables (Expr::compile_numeric).
// Thread-safe to run concurrently.
class NumericExpr {
 public:
  // One value: vars[i] is variable i.
  double eval(const double* vars) const;
  // n values at once: vars[i] points at n values of variable i. `out` may be
  // one of the vars arrays (every input is read before out is written).
  void eval_batch(const double* const* vars, int64_t n, double* out) const;

  struct Ins {
    uint8_t op;
    int32_t arg = 0;
    double k = 0;
  };

 private:
  friend class Expr;
  template <typename Get>
  void exec(int64_t n, double* stack, const Get& get) const;
  std::vector<Ins> code_;
  int depth_ = 0;
};

}  // namespace bonfire
