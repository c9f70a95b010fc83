// Renders a parsed template. Scoping follows the reference: a for loop opens a
// scope (so `set` inside it is lost after the loop, hence namespace()), `if`
// does not, macros see the scope they were defined in. Failures are thrown as
// RenderError in the reference's words; `line()` says where evaluation was.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "model/chat_template/ast.h"
#include "model/chat_template/value.h"

namespace bonfire::chat_template {

class Env {
 public:
  explicit Env(EnvPtr parent = nullptr) : parent_(std::move(parent)) {}
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }
  // Fails if `name` is already declared here (the reference's declareVariable).
  void declare(const std::string& name, Value v);
  Value lookup(const std::string& name) const;
  const Value* own(const std::string& name) const;
  bool call_block = false;  // the scope a {% call %} block calls its macro from

 private:
  EnvPtr parent_;
  std::unordered_map<std::string, Value> vars_;
};

// raise_exception(): the template's own message, passed on unchanged.
struct RaisedError : RenderError {
  using RenderError::RenderError;
};

class Interpreter {
 public:
  // The globals every render starts with (true, none, range, namespace, ...).
  static EnvPtr global_env();

  std::string render(const NodeList& body, const EnvPtr& env);
  Value eval(const Node& n, const EnvPtr& env);
  int line() const { return line_; }

  // Arguments as builtins receive them: positional, then one Kwargs object if
  // any keyword was given.
  std::vector<Value> call_args(const NodeList& args, const EnvPtr& env);
  // Positional and keyword arguments apart (spreads expanded).
  void split_args(const NodeList& args, const EnvPtr& env, std::vector<Value>* positional, Object* kwargs);

  Value apply_filter(const Value& operand, const Node& filter, const EnvPtr& env);
  bool run_test(const std::string& name, const Value& operand, const std::vector<Value>& args);
  static Value binary_op(const std::string& op, const Value& left, const Value& right);

 private:
  void render_into(std::string& out, const NodeList& body, const EnvPtr& env);
  std::string render_for(const Node& n, const EnvPtr& env);
  void exec_set(const Node& n, const EnvPtr& env);
  Value eval_member(const Node& n, const EnvPtr& env);
  Value eval_call(const Node& n, const EnvPtr& env);
  Value define_macro(const Node& n, const EnvPtr& env);
  Value call_block(const Node& n, const EnvPtr& env);
  void bind_macro_args(const std::string& display, const NodeList& params, bool uses_kwargs, bool uses_varargs,
                       std::vector<Value> args, const EnvPtr& scope);

  int line_ = 0;
  int loop_depth_ = 0;  // break and continue are errors outside a loop
  int call_depth_ = 0;  // macro calls under way, bounded against runaway recursion
  // Scopes that macros and call blocks close over. The closures hold them
  // weakly (a macro lives in the scope it captures, which would be a cycle);
  // this keeps them alive until the render ends.
  std::vector<EnvPtr> closures_;
};

// Members of built-in types: string methods, dict methods, `.length`.
Value builtin_member(const Value& object, const std::string& name);
// -1, 0 or 1; the reference's compareRuntimeValues (sort, dictsort).
int compare_values(const Value& a, const Value& b, bool case_sensitive);
// Follows "a.b.0" through objects and arrays (sort and map's attribute=).
Value attribute_path(const Value& item, const std::string& path);

}  // namespace bonfire::chat_template
