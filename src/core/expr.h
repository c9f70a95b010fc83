// The project's one expression language: graph `bind` params ("pos + 1"),
// kernel packages (`when`, `derive`, dispatch sizes) and the IR's
// `expr`/`recurrence` all parse with this.
//
//   literals   1  2.5e-3  "text"  'text'  true  false  null  [1, 2]
//   names      pos   attrs.k   shapes.input   x[0]
//   operators  + - * / %   == != < <= > >=   and or not (&& || !)
//              A if C else B
//   calls      min max floor ceil round abs sqrt exp log pow ceilDiv pow2ceil
//              has(obj, "key")  dim(shape, i)  numel(shape)  len(x)
//              obj.has("key")  (a method call passes obj first)
//
// Values are JSON values (numbers are doubles). Names resolve through a
// caller-supplied lookup, so the caller decides what exists and may compute
// values lazily. Errors are bonfire::Error(BadGraph) naming the expression
// and the character position.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace bonfire {

class Expr {
 public:
  // Returns the value of a name, or nullopt when it is not defined.
  using Lookup = std::function<std::optional<nlohmann::json>(const std::string& name)>;

  static Expr parse(std::string_view source);  // throws Error(BadGraph)

  nlohmann::json eval(const Lookup& lookup) const;
  double eval_number(const Lookup& lookup) const;  // throws unless a finite number
  // Top-level names the expression reads (not members or function names).
  std::set<std::string> names() const;
  const std::string& source() const { return source_; }

  struct Node;

 private:
  std::string source_;
  std::shared_ptr<const Node> root_;
};

}  // namespace bonfire
