#include "model/chat_template/interpreter.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "model/chat_template/text.h"

namespace bonfire::chat_template {
namespace {

struct BreakSignal {};
struct ContinueSignal {};

[[noreturn]] void fail(const std::string& msg) { throw RenderError(msg); }

// Names a macro reads without declaring them: the reference binds caller,
// kwargs and varargs only for macros that use them.
void collect_identifiers(const Node* n, std::set<std::string>* used) {
  if (!n) return;
  if (n->kind == NodeKind::Identifier) used->insert(n->name);
  for (const Node* c : {n->a.get(), n->b.get(), n->c.get()}) collect_identifiers(c, used);
  for (const NodeList* l : {&n->items, &n->body, &n->alt})
    for (const auto& c : *l) collect_identifiers(c.get(), used);
}

std::set<std::string> special_args(const NodeList& params, const NodeList& body) {
  std::set<std::string> used, out;
  for (const auto& p : params)
    if (p->kind == NodeKind::KwArg) collect_identifiers(p->a.get(), &used);
  for (const auto& s : body) collect_identifiers(s.get(), &used);
  for (const char* name : {"caller", "kwargs", "varargs"}) {
    bool declared = false;
    for (const auto& p : params) declared = declared || p->name == name;
    if (used.count(name) && !declared) out.insert(name);
  }
  return out;
}

bool nullish(const Value& v) { return v.is_undefined() || v.is_null(); }
bool numeric_like(const Value& v) { return v.is_number() || v.kind == Kind::Bool; }
double numeric(const Value& v) { return v.kind == Kind::Bool ? (v.b ? 1 : 0) : v.num; }

// An integer value as an index or step: clamped to +-2^62, which is past
// any length and still leaves room to add one (a template may write 1e47,
// and converting that to long long is undefined behaviour); NaN is 0.
long long as_index(double v) {
  constexpr double kFar = 0x1p62;
  if (!(v == v)) return 0;
  return static_cast<long long>(std::clamp(v, -kFar, kFar));
}

std::vector<Value> slice(const std::vector<Value>& items, const Value& start_v, const Value& stop_v,
                         const Value& step_v) {
  const long long len = static_cast<long long>(items.size());
  const long long step = step_v.is_undefined() ? 1 : as_index(step_v.num);
  const int direction = step > 0 ? 1 : step < 0 ? -1 : 0;
  long long start, stop;
  if (direction >= 0) {
    start = start_v.is_undefined() ? 0 : as_index(start_v.num);
    start = start < 0 ? std::max(len + start, 0LL) : std::min(start, len);
    stop = stop_v.is_undefined() ? len : as_index(stop_v.num);
    stop = stop < 0 ? std::max(len + stop, 0LL) : std::min(stop, len);
  } else {
    start = start_v.is_undefined() ? len - 1 : as_index(start_v.num);
    start = start < 0 ? std::max(len + start, -1LL) : std::min(start, len - 1);
    stop = stop_v.is_undefined() ? -1 : as_index(stop_v.num);
    stop = stop < -1 ? std::max(len + stop, -1LL) : std::min(stop, len - 1);
  }
  std::vector<Value> out;
  if (direction == 0) return out;
  for (long long i = start; direction * i < direction * stop; i += step) out.push_back(items[i]);
  return out;
}

}  // namespace

void Env::declare(const std::string& name, Value v) {
  if (vars_.count(name)) fail("Variable already declared: " + name);
  vars_[name] = std::move(v);
}

const Value* Env::own(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent_.get())
    if (const Value* v = e->own(name)) return *v;
  return Value::undefined();
}

std::string Interpreter::render(const NodeList& body, const EnvPtr& env) {
  std::string out;
  render_into(out, body, env);
  return out;
}

void Interpreter::render_into(std::string& out, const NodeList& body, const EnvPtr& env) {
  for (const auto& s : body) {
    line_ = s->line;
    switch (s->kind) {
      case NodeKind::Text: out += s->name; break;
      case NodeKind::Comment: break;
      case NodeKind::If:
        render_into(out, truthy(eval(*s->a, env)) ? s->body : s->alt, env);
        break;
      case NodeKind::For: out += render_for(*s, env); break;
      case NodeKind::Set: exec_set(*s, env); break;
      default: {
        const Value v = eval(*s, env);
        if (!nullish(v)) out += to_output(v);
      }
    }
  }
}

std::string Interpreter::render_for(const Node& n, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  line_ = n.line;
  std::vector<Value> candidates;
  if (iterable.is_array()) {
    candidates = *iterable.arr;
  } else if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.obj->items) candidates.push_back(Value::string(k));
  } else if (!iterable.is_undefined()) {  // Jinja iterates an undefined value as empty
    fail(std::string("Expected iterable or object type in for loop: got ") + type_name(iterable));
  }
  const Node& target = *n.a;
  auto bind = [&](const Value& item, const EnvPtr& into) {
    if (target.kind == NodeKind::Identifier) {
      into->set(target.name, item);
      return;
    }
    for (size_t j = 0; j < target.items.size(); ++j) {
      if (target.items[j]->kind != NodeKind::Identifier) fail("Cannot unpack non-identifier type");
      into->set(target.items[j]->name, j < item.arr->size() ? (*item.arr)[j] : Value::undefined());
    }
  };
  std::vector<Value> items;
  for (const Value& item : candidates) {
    if (target.kind == NodeKind::TupleLit) {
      if (item.kind != Kind::Array) fail(std::string("Cannot unpack non-iterable type: ") + type_name(item));
      if (item.arr->size() != target.items.size())
        fail(std::string("Too ") + (target.items.size() > item.arr->size() ? "few" : "many") + " items to unpack");
    }
    if (test) {
      auto loop_scope = std::make_shared<Env>(scope);
      bind(item, loop_scope);
      if (!truthy(eval(*test, loop_scope))) continue;
    }
    items.push_back(item);
  }
  std::string out;
  bool no_iteration = true;
  for (size_t i = 0; i < items.size(); ++i) {
    auto loop = std::make_shared<Object>();
    const double len = static_cast<double>(items.size());
    loop->set("index", Value::integer(i + 1));
    loop->set("index0", Value::integer(i));
    loop->set("revindex", Value::integer(len - i));
    loop->set("revindex0", Value::integer(len - i - 1));
    loop->set("first", Value::boolean(i == 0));
    loop->set("last", Value::boolean(i + 1 == items.size()));
    loop->set("length", Value::integer(len));
    loop->set("previtem", i > 0 ? items[i - 1] : Value::undefined());
    loop->set("nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined());
    scope->set("loop", Value::object(loop));
    bind(items[i], scope);
    // Like the reference, an iteration left by break or continue loses what
    // it printed and does not count as one for the else block.
    ++loop_depth_;
    std::string iteration;
    try {
      render_into(iteration, n.body, scope);
    } catch (const ContinueSignal&) {
      --loop_depth_;
      continue;
    } catch (const BreakSignal&) {
      --loop_depth_;
      break;
    } catch (...) {
      --loop_depth_;
      throw;
    }
    --loop_depth_;
    out += iteration;
    no_iteration = false;
  }
  if (no_iteration) render_into(out, n.alt, scope);
  return out;
}

void Interpreter::exec_set(const Node& n, const EnvPtr& env) {
  const Value rhs = n.b ? eval(*n.b, env) : Value::string(render(n.body, env));
  const Node& target = *n.a;
  if (target.kind == NodeKind::Identifier) {
    env->set(target.name, rhs);
  } else if (target.kind == NodeKind::TupleLit) {
    if (!rhs.is_array()) fail(std::string("Cannot unpack non-iterable type in set: ") + type_name(rhs));
    if (rhs.arr->size() != target.items.size())
      fail(std::string("Too ") + (target.items.size() > rhs.arr->size() ? "few" : "many") + " items to unpack in set");
    for (size_t i = 0; i < target.items.size(); ++i) {
      if (target.items[i]->kind != NodeKind::Identifier) fail("Cannot unpack to non-identifier in set");
      env->set(target.items[i]->name, (*rhs.arr)[i]);
    }
  } else if (target.kind == NodeKind::Member) {
    const Value object = eval(*target.a, env);
    if (object.kind != Kind::Namespace) fail("cannot assign attribute on non-namespace object");
    if (target.flag || target.b->kind != NodeKind::Identifier) fail("Cannot assign to member with non-identifier property");
    object.obj->set(target.b->name, rhs);
  } else {
    fail("Invalid LHS inside assignment expression");
  }
}

Value Interpreter::eval(const Node& n, const EnvPtr& env) {
  line_ = n.line;
  switch (n.kind) {
    case NodeKind::Identifier: return env->lookup(n.name);
    case NodeKind::IntLit: return Value::integer(n.num);
    case NodeKind::FloatLit: return Value::floating(n.num);
    case NodeKind::StrLit:
    case NodeKind::Text: return Value::string(n.name);
    case NodeKind::ArrayLit:
    case NodeKind::TupleLit: {
      Array items;
      for (const auto& e : n.items) items.push_back(eval(*e, env));
      return Value::array(std::move(items), n.kind == NodeKind::ArrayLit ? Kind::Array : Kind::Tuple);
    }
    case NodeKind::ObjectLit: {
      auto o = std::make_shared<Object>();
      for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
        const Value key = eval(*n.items[i], env);
        if (!key.is_string()) fail(std::string("Object keys must be strings: got ") + type_name(key));
        o->set(key.s(), eval(*n.items[i + 1], env));
      }
      return Value::object(std::move(o));
    }
    case NodeKind::Member: return eval_member(n, env);
    case NodeKind::Call: return eval_call(n, env);
    case NodeKind::Filter: {
      const Value operand = eval(*n.a, env);
      line_ = n.line;
      return apply_filter(operand, *n.b, env);
    }
    case NodeKind::Test: {
      const Value operand = eval(*n.a, env);
      std::vector<Value> args;
      for (const auto& a : n.items) args.push_back(eval(*a, env));
      line_ = n.line;
      const bool r = run_test(n.name, operand, args);
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::Ternary: return truthy(eval(*n.a, env)) ? eval(*n.b, env) : eval(*n.c, env);
    case NodeKind::Select: return truthy(eval(*n.b, env)) ? eval(*n.a, env) : Value::undefined();
    case NodeKind::Unary: {
      const Value v = eval(*n.a, env);
      line_ = n.line;
      if (n.name == "not") return Value::boolean(!truthy(v));
      if (!numeric_like(v)) fail("Unknown operator \"" + n.name + "\" for " + type_name(v));
      const double r = (n.name == "-" ? -1 : 1) * numeric(v);
      return v.kind == Kind::Float ? Value::floating(r) : Value::integer(r);
    }
    case NodeKind::Binary: {
      const Value left = eval(*n.a, env);
      if (n.name == "and") return truthy(left) ? eval(*n.b, env) : left;
      if (n.name == "or") return truthy(left) ? left : eval(*n.b, env);
      const Value right = eval(*n.b, env);
      line_ = n.line;
      return binary_op(n.name, left, right);
    }
    case NodeKind::If: return Value::string(render(truthy(eval(*n.a, env)) ? n.body : n.alt, env));
    case NodeKind::For: return Value::string(render_for(n, env));
    case NodeKind::Set: exec_set(n, env); return Value::null();
    case NodeKind::Macro: return define_macro(n, env);
    case NodeKind::CallBlock: return call_block(n, env);
    case NodeKind::FilterBlock: {
      const Value body = Value::string(render(n.body, env));
      line_ = n.line;
      return apply_filter(body, *n.a, env);
    }
    case NodeKind::Comment: return Value::null();
    case NodeKind::Break:
    case NodeKind::Continue:
      if (loop_depth_ == 0) fail(std::string(n.kind == NodeKind::Break ? "break" : "continue") + " outside of a loop");
      if (n.kind == NodeKind::Break) throw BreakSignal{};
      throw ContinueSignal{};
    default: fail("Unexpected expression");
  }
}

Value Interpreter::binary_op(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return Value::boolean(loose_equal(left, right));
  if (op == "!=") return Value::boolean(!loose_equal(left, right));
  if (left.is_number() && right.is_number() && op != "~" && op != "**") {
    const double a = left.num, b = right.num;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    auto num = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "<=") return Value::boolean(a <= b);
  } else if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    if (op == "~" && !left.is_null() && !right.is_null())
      return Value::string((left.is_undefined() ? "" : js_string(left)) + (right.is_undefined() ? "" : js_string(right)));
    fail("Cannot perform operation " + op + " on undefined values");
  } else if (left.is_null() || right.is_null()) {
    fail("Cannot perform operation on null values");
  } else if (op == "~") {
    return Value::string(js_string(left) + js_string(right));
  } else if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = numeric(left), b = numeric(right);
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    const double r = std::pow(a, b);
    if (!std::isfinite(r)) fail("Exponentiation result is not a finite real number");
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      Array items = *left.arr;
      items.insert(items.end(), right.arr->begin(), right.arr->end());
      return Value::array(std::move(items));
    }
  } else if (right.is_array()) {
    bool member = false;
    for (const Value& x : *right.arr) member = member || strict_equal(x, left);
    if (op == "in") return Value::boolean(member);
    if (op == "not in") return Value::boolean(!member);
  }
  if ((left.is_string() || right.is_string()) && op == "+") return Value::string(js_string(left) + js_string(right));
  if (left.is_string() && right.is_string()) {
    if (op == "in") return Value::boolean(right.s().find(left.s()) != std::string::npos);
    if (op == "not in") return Value::boolean(right.s().find(left.s()) == std::string::npos);
  }
  if (left.is_string() && right.is_object()) {
    if (op == "in") return Value::boolean(right.obj->find(left.s()) != nullptr);
    if (op == "not in") return Value::boolean(right.obj->find(left.s()) == nullptr);
  }
  fail("Unknown operator \"" + op + "\" between " + type_name(left) + " and " + type_name(right));
}

Value Interpreter::eval_member(const Node& n, const EnvPtr& env) {
  const Value object = eval(*n.a, env);
  Value property;
  if (n.flag) {
    if (n.b->kind == NodeKind::Slice) {
      if (!object.is_array() && !object.is_string()) fail("Slice object must be an array or string");
      const Value start = n.b->a ? eval(*n.b->a, env) : Value::undefined();
      const Value stop = n.b->b ? eval(*n.b->b, env) : Value::undefined();
      const Value step = n.b->c ? eval(*n.b->c, env) : Value::undefined();
      line_ = n.line;
      for (auto [v, what] : {std::pair{&start, "start"}, {&stop, "stop"}, {&step, "step"}})
        if (v->kind != Kind::Int && !v->is_undefined()) fail(std::string("Slice ") + what + " must be numeric or undefined");
      if (object.is_array()) return Value::array(slice(*object.arr, start, stop, step));
      std::vector<Value> chars;
      for (char32_t c : code_points(object.s())) {
        std::string ch;
        utf8_append(ch, c);
        chars.push_back(Value::string(std::move(ch)));
      }
      std::string out;
      for (const Value& c : slice(chars, start, stop, step)) out += c.s();
      return Value::string(std::move(out));
    }
    property = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::IntLit) {
    property = Value::integer(n.b->num);
  } else {
    property = Value::string(n.b->name);
  }
  line_ = n.line;
  if (object.is_attr_container()) {
    if (!property.is_string()) fail(std::string("Cannot access property with non-string: got ") + type_name(property));
    if (const Value* v = object.obj->find(property.s())) return *v;
    return object.is_object() ? builtin_member(object, property.s()) : Value::undefined();
  }
  if (object.is_array() || object.is_string()) {
    if (property.kind == Kind::Int) {
      long long i = as_index(property.num);
      if (object.is_string()) {
        std::string ch;
        return utf16_at(object.s(), i, &ch) ? Value::string(ch) : Value::undefined();
      }
      const long long len = static_cast<long long>(object.arr->size());
      if (i < 0) i += len;
      return i >= 0 && i < len ? (*object.arr)[i] : Value::undefined();
    }
    if (property.is_string()) return builtin_member(object, property.s());
    fail(std::string("Cannot access property with non-string/non-number: got ") + type_name(property));
  }
  if (!property.is_string()) fail(std::string("Cannot access property with non-string: got ") + type_name(property));
  return Value::undefined();  // numbers, booleans, none and undefined have no members
}

void Interpreter::split_args(const NodeList& args, const EnvPtr& env, std::vector<Value>* positional, Object* kwargs) {
  for (const auto& a : args) {
    if (a->kind == NodeKind::Spread) {
      const Value v = eval(*a->a, env);
      if (!v.is_array()) fail(std::string("Cannot unpack non-iterable type: ") + type_name(v));
      positional->insert(positional->end(), v.arr->begin(), v.arr->end());
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      positional->push_back(eval(*a, env));
    }
  }
  auto add = [&](const std::string& key, Value v) {
    if (kwargs->find(key)) fail("Got multiple values for keyword argument '" + key + "'");
    kwargs->items.emplace_back(key, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::KwArg) {
      add(a->name, eval(*a->a, env));
    } else if (a->kind == NodeKind::KwSpread) {
      const Value v = eval(*a->a, env);
      if (!v.is_object()) fail(std::string("Argument after ** must be a mapping, not ") + type_name(v));
      for (const auto& [k, e] : v.obj->items) add(k, e);
    }
  }
}

std::vector<Value> Interpreter::call_args(const NodeList& args, const EnvPtr& env) {
  std::vector<Value> positional;
  auto kwargs = std::make_shared<Object>();
  split_args(args, env, &positional, kwargs.get());
  if (!kwargs->items.empty()) positional.push_back(Value::object(kwargs, Kind::Kwargs));
  return positional;
}

Value Interpreter::eval_call(const Node& n, const EnvPtr& env) {
  std::vector<Value> args = call_args(n.items, env);
  const Value fn = eval(*n.a, env);
  line_ = n.line;
  if (fn.kind != Kind::Function) {
    RenderError e(std::string("Cannot call something that is not a function: got ") + type_name(fn));
    if (n.a->kind == NodeKind::Member && !n.a->flag) e.detail = "calling '" + n.a->b->name + "'";
    if (n.a->kind == NodeKind::Identifier) e.detail = "calling '" + n.a->name + "'";
    throw e;
  }
  return (*fn.fn)(args, env);
}

void Interpreter::bind_macro_args(const std::string& display, const NodeList& params, bool uses_kwargs,
                                  bool uses_varargs, std::vector<Value> args, const EnvPtr& scope) {
  auto kwargs = std::make_shared<Object>();
  if (!args.empty() && args.back().kind == Kind::Kwargs) {
    *kwargs = *args.back().obj;
    args.pop_back();
  }
  std::vector<const Node*> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    Value v;
    bool given = i < args.size();
    if (given) v = args[i];
    if (!given)
      if (const Value* kw = kwargs->find(p.name)) {
        v = *kw;
        kwargs->erase(p.name);
        given = true;
      }
    if (!given && p.kind == NodeKind::KwArg) pending_defaults.push_back(&p);
    scope->set(p.name, given ? v : Value::undefined());
  }
  if (uses_kwargs)
    scope->set("kwargs", Value::object(kwargs));
  else if (!kwargs->items.empty())
    fail("macro " + display + " takes no keyword argument '" + kwargs->items.front().first + "'");
  if (uses_varargs)
    scope->set("varargs", Value::array(args.size() > params.size() ? Array(args.begin() + params.size(), args.end()) : Array{}));
  else if (args.size() > params.size())
    fail("macro " + display + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  for (const Node* p : pending_defaults) scope->set(p->name, eval(*p->a, scope));
}

Value Interpreter::define_macro(const Node& n, const EnvPtr& env) {
  const auto special = special_args(n.items, n.body);
  const Node* node = &n;
  closures_.push_back(env);
  const std::weak_ptr<Env> weak = env;
  env->set(n.name, Value::function([this, node, weak, special](std::vector<Value>& args, const EnvPtr& call_site) {
    const EnvPtr env = weak.lock();
    EnvPtr parent = env;
    if (special.count("caller")) {
      const Value* caller = call_site && call_site->call_block ? call_site->own("caller") : nullptr;
      parent = std::make_shared<Env>(env);
      parent->set("caller", caller ? *caller : Value::undefined());
    }
    auto scope = std::make_shared<Env>(parent);
    bind_macro_args("'" + node->name + "'", node->items, special.count("kwargs"), special.count("varargs"), args, scope);
    if (call_depth_ >= 200) fail("macro '" + node->name + "' recurses too deeply");
    ++call_depth_;
    try {
      Value out = Value::string(render(node->body, scope));
      --call_depth_;
      return out;
    } catch (...) {
      --call_depth_;
      throw;
    }
  }));
  return Value::null();
}

Value Interpreter::call_block(const Node& n, const EnvPtr& env) {
  const auto special = special_args(n.items, n.body);
  const Node* node = &n;
  closures_.push_back(env);
  const std::weak_ptr<Env> weak = env;
  const Value caller = Value::function([this, node, weak, special](std::vector<Value>& args, const EnvPtr&) {
    auto scope = std::make_shared<Env>(weak.lock());
    bind_macro_args("None", node->items, special.count("kwargs"), special.count("varargs"), args, scope);
    return Value::string(render(node->body, scope));
  });
  const Node& call = *n.a;
  std::vector<Value> args;
  auto kwargs = std::make_shared<Object>();
  split_args(call.items, env, &args, kwargs.get());
  args.push_back(Value::object(kwargs, Kind::Kwargs));
  const Value fn = eval(*call.a, env);
  line_ = n.line;
  if (fn.kind != Kind::Function) {
    RenderError e(std::string("Cannot call something that is not a function: got ") + type_name(fn));
    e.detail = "calling '" + call.a->name + "'";
    throw e;
  }
  auto site = std::make_shared<Env>(env);
  site->call_block = true;
  site->set("caller", caller);
  return (*fn.fn)(args, site);
}

}  // namespace bonfire::chat_template
