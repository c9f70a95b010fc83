// Filters and tests. Which filter exists for which operand type, and every
// error message, follow the reference; `d`, `count`, `escape`/`e`, `default`
// without parentheses and tests with an argument are Jinja features it lacks.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "model/chat_template/interpreter.h"
#include "model/chat_template/text.h"

namespace bonfire::chat_template {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw RenderError(msg); }

const Value* kwarg(const Object& kw, const char* name) { return kw.find(name); }

// The first of: a positional argument, a keyword argument, a default.
Value arg_or(const std::vector<Value>& pos, size_t i, const Object& kw, const char* name, Value dflt) {
  if (i < pos.size()) return pos[i];
  if (const Value* v = kwarg(kw, name)) return *v;
  return dflt;
}

// JavaScript's parseInt(s, 10) and parseFloat(s); NaN when nothing parses.
double parse_int(const std::string& raw) {
  const std::string s = js_trim_start(raw);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  const size_t start = i;
  double v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  if (i == start) return NAN;
  return neg ? -v : v;
}

double parse_float(const std::string& raw) {
  const std::string s = js_trim_start(raw);
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (s.compare(i, 8, "Infinity") == 0) return s[0] == '-' ? -INFINITY : INFINITY;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return NAN;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      i = j;
    }
  }
  return std::strtod(s.substr(0, i).c_str(), nullptr);
}

// Array.prototype.join over the payloads: none and undefined print empty.
std::string join_values(const std::vector<Value>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (!items[i].is_undefined() && !items[i].is_null()) out += js_string(items[i]);
  }
  return out;
}

std::string indent_lines(const std::string& s, const std::string& indent, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t nl = s.find('\n', start);
    const std::string piece = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line) out += '\n';
    out += ((!first && line == 0) || (!blank && piece.empty())) ? piece : indent + piece;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value items_of(const Value& o) {
  Array out;
  for (const auto& [k, v] : o.obj->items) out.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(out));
}

Value unique(const std::vector<Value>& items) {
  Array out;
  for (const Value& v : items) {
    bool seen = false;
    for (const Value& o : out) seen = seen || strict_equal(o, v) || (std::isnan(o.num) && std::isnan(v.num) && o.is_number() && v.is_number());
    if (!seen) out.push_back(v);
  }
  return Value::array(std::move(out));
}

Value sorted(std::vector<Value> items, bool reverse, bool case_sensitive, const Value& attribute) {
  auto key = [&](const Value& v) {
    if (attribute.is_null()) return v;
    return attribute_path(v, attribute.kind == Kind::Int ? js_number(attribute.num) : attribute.s());
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int r = compare_values(key(a), key(b), case_sensitive);
    return reverse ? r > 0 : r < 0;
  });
  return Value::array(std::move(items));
}

// Filters written without arguments: `x | name`.
Value plain_filter(Interpreter& in, const Value& v, const std::string& name, const EnvPtr& env) {
  if (name == "safe") return v;
  if (name == "tojson") return Value::string(to_json(v, JsonOptions{}));
  if (name == "d" || name == "default") return v.is_undefined() ? Value::string("") : v;
  if (name == "count" && (v.is_array() || v.is_string() || v.is_object())) return plain_filter(in, v, "length", env);
  if ((name == "escape" || name == "e") && v.is_string()) return Value::string(html_escape(v.s()));
  if (v.is_array()) {
    const Array& a = *v.arr;
    if (name == "list") return v;
    if (name == "first") return a.empty() ? Value::undefined() : a.front();
    if (name == "last") return a.empty() ? Value::undefined() : a.back();
    if (name == "length") return Value::integer(a.size());
    if (name == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
    if (name == "sort") return sorted(a, false, false, Value::null());
    if (name == "join") return Value::string(join_values(a, ""));
    if (name == "string") return Value::string(to_json(v, JsonOptions{}, false));
    if (name == "unique") return unique(a);
    fail("Unknown ArrayValue filter: " + name);
  }
  if (v.is_string()) {
    if (name == "length" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      const Value b = builtin_member(v, name);
      if (b.kind != Kind::Function) return b;
      std::vector<Value> none;
      return (*b.fn)(none, env);
    }
    if (name == "trim") return Value::string(js_trim(v.s()));
    if (name == "indent") return Value::string(indent_lines(v.s(), "    ", false, false));
    if (name == "join" || name == "string") return v;
    if (name == "int") {
      const double d = parse_int(v.s());
      return Value::integer(std::isnan(d) ? 0 : d);
    }
    if (name == "float") {
      const double d = parse_float(v.s());
      return Value::floating(std::isnan(d) ? 0 : d);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (v.is_number()) {
    if (name == "abs") return v.kind == Kind::Int ? Value::integer(std::fabs(v.num)) : Value::floating(std::fabs(v.num));
    if (name == "int") return Value::integer(std::trunc(v.num) + 0.0);
    if (name == "float") return Value::floating(v.num);
    if (name == "string") return Value::string(to_output(v));
    fail("Unknown NumericValue filter: " + name);
  }
  if (v.is_object()) {
    if (name == "items") return items_of(v);
    if (name == "length") return Value::integer(v.obj->items.size());
    const Value b = builtin_member(v, name);
    if (b.kind == Kind::Function) {
      std::vector<Value> none;
      return (*b.fn)(none, env);
    }
    if (!b.is_undefined()) return b;
    fail("Unknown ObjectValue filter: " + name);
  }
  if (v.kind == Kind::Bool) {
    if (name == "bool") return v;
    if (name == "int") return Value::integer(v.b ? 1 : 0);
    if (name == "float") return Value::floating(v.b ? 1 : 0);
    if (name == "string") return Value::string(v.b ? "true" : "false");
    fail("Unknown BooleanValue filter: " + name);
  }
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(v));
}

}  // namespace

Value Interpreter::apply_filter(const Value& v, const Node& filter, const EnvPtr& env) {
  if (filter.kind == NodeKind::Identifier) return plain_filter(*this, v, filter.name, env);
  const std::string& name = filter.a->name;
  const NodeList& arg_nodes = filter.items;
  std::vector<Value> pos;
  Object kw;
  if (name == "tojson") {
    split_args(arg_nodes, env, &pos, &kw);
    const Value indent = arg_or({}, 0, kw, "indent", Value::null());
    if (indent.kind != Kind::Int && !indent.is_null()) fail("If set, indent must be a number");
    const Value ascii = arg_or({}, 0, kw, "ensure_ascii", Value::boolean(false));
    if (ascii.kind != Kind::Bool) fail("If set, ensure_ascii must be a boolean");
    const Value sort_keys = arg_or({}, 0, kw, "sort_keys", Value::boolean(false));
    if (sort_keys.kind != Kind::Bool) fail("If set, sort_keys must be a boolean");
    const Value seps = arg_or({}, 0, kw, "separators", Value::null());
    JsonOptions opt;
    if (seps.is_array()) {
      if (seps.arr->size() != 2 || !(*seps.arr)[0].is_string() || !(*seps.arr)[1].is_string())
        fail("separators must be a tuple of two strings");
      opt.custom_separators = true;
      opt.item_sep = (*seps.arr)[0].s();
      opt.key_sep = (*seps.arr)[1].s();
    } else if (!seps.is_null()) {
      fail("If set, separators must be a tuple of two strings");
    }
    if (indent.kind == Kind::Int && indent.num < 0) fail("If set, indent must not be negative");
    opt.indent = indent.kind == Kind::Int ? static_cast<int>(indent.num) : 0;
    opt.ensure_ascii = ascii.b;
    opt.sort_keys = sort_keys.b;
    return Value::string(to_json(v, opt));
  }
  if (name == "join") {
    std::vector<Value> items;
    if (v.is_string()) {
      for (char32_t c : code_points(v.s())) {
        std::string ch;
        utf8_append(ch, c);
        items.push_back(Value::string(ch));
      }
    } else if (v.is_array()) {
      items = *v.arr;
    } else {
      fail("Cannot apply filter \"join\" to type: " + std::string(type_name(v)));
    }
    split_args(arg_nodes, env, &pos, &kw);
    const Value sep = arg_or(pos, 0, kw, "separator", Value::string(""));
    if (!sep.is_string()) fail("separator must be a string");
    return Value::string(join_values(items, sep.s()));
  }
  if (name == "int" || name == "float") {
    split_args(arg_nodes, env, &pos, &kw);
    const bool is_int = name == "int";
    const Value dflt = arg_or(pos, 0, kw, "default", is_int ? Value::integer(0) : Value::floating(0));
    if (v.is_string()) {
      const double d = is_int ? parse_int(v.s()) : parse_float(v.s());
      if (std::isnan(d)) return dflt;
      return is_int ? Value::integer(d) : Value::floating(d);
    }
    if (v.is_number()) return is_int ? Value::integer(std::trunc(v.num) + 0.0) : Value::floating(v.num);
    if (v.kind == Kind::Bool) return is_int ? Value::integer(v.b ? 1 : 0) : Value::floating(v.b ? 1 : 0);
    fail("Cannot apply filter \"" + name + "\" to type: " + type_name(v));
  }
  if (name == "default" || name == "d") {
    split_args(arg_nodes, env, &pos, &kw);
    const Value dflt = pos.empty() ? Value::string("") : pos[0];
    const Value boolean = arg_or(pos, 1, kw, "boolean", Value::boolean(false));
    if (boolean.kind != Kind::Bool) fail("`default` filter flag must be a boolean");
    return v.is_undefined() || (boolean.b && !truthy(v)) ? dflt : v;
  }
  if (v.is_array()) {
    const Array& a = *v.arr;
    if (name == "sort") {
      split_args(arg_nodes, env, &pos, &kw);
      const Value reverse = arg_or(pos, 0, kw, "reverse", Value::boolean(false));
      if (reverse.kind != Kind::Bool) fail("reverse must be a boolean");
      const Value cs = arg_or(pos, 1, kw, "case_sensitive", Value::boolean(false));
      if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
      const Value attr = arg_or(pos, 2, kw, "attribute", Value::null());
      if (!attr.is_string() && attr.kind != Kind::Int && !attr.is_null())
        fail("attribute must be a string, integer, or null");
      return sorted(a, reverse.b, cs.b, attr);
    }
    if (name == "selectattr" || name == "rejectattr") {
      const bool select = name == "selectattr";
      for (const Value& item : a)
        if (!item.is_attr_container()) fail("`" + name + "` can only be applied to array of objects");
      for (const auto& n : arg_nodes)
        if (n->kind != NodeKind::StrLit) fail("arguments of `" + name + "` must be strings");
      std::vector<Value> args;
      for (const auto& n : arg_nodes) args.push_back(eval(*n, env));
      if (args.empty()) fail("`" + name + "` needs an attribute name");
      const std::string test = args.size() > 1 ? args[1].s() : "";
      std::vector<Value> test_args;
      if (args.size() > 2) test_args.push_back(args[2]);
      Array out;
      for (const Value& item : a) {
        const Value* attr = item.obj->find(args[0].s());
        bool r = false;
        if (attr) r = test.empty() ? truthy(*attr) : run_test(test, *attr, test_args);
        if (r == select) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (name == "map") {
      split_args(arg_nodes, env, &pos, &kw);
      const Value* attr = kw.find("attribute");
      if (!attr) fail("`map` expressions without `attribute` set are not currently supported.");
      if (!attr->is_string()) fail("attribute must be a string");
      const Value* dflt = kw.find("default");
      Array out;
      for (const Value& item : a) {
        if (!item.is_attr_container()) fail("items in map must be an object");
        const Value r = attribute_path(item, attr->s());
        out.push_back(r.is_undefined() && dflt ? *dflt : r);
      }
      return Value::array(std::move(out));
    }
    if (name == "count") return plain_filter(*this, v, "length", env);
    fail("Unknown ArrayValue filter: " + name);
  }
  if (v.is_string()) {
    if (name == "indent") {
      split_args(arg_nodes, env, &pos, &kw);
      const Value width = arg_or(pos, 0, kw, "width", Value::integer(4));
      if (width.kind != Kind::Int && !width.is_string()) fail("width must be an integer or a string");
      const Value first = arg_or(pos, 1, kw, "first", Value::boolean(false));
      const Value blank = arg_or(pos, 2, kw, "blank", Value::boolean(false));
      const std::string unit = width.is_string() ? width.s() : std::string(std::max(0.0, width.num), ' ');
      return Value::string(indent_lines(v.s(), unit, truthy(first), truthy(blank)));
    }
    if (name == "replace") {
      split_args(arg_nodes, env, &pos, &kw);
      pos.push_back(Value::object(std::make_shared<Object>(kw), Kind::Kwargs));
      const Value fn = builtin_member(v, "replace");
      return (*fn.fn)(pos, env);
    }
    fail("Unknown StringValue filter: " + name);
  }
  if (v.is_object()) {
    const Value b = builtin_member(v, name);
    if (b.kind == Kind::Function) {
      std::vector<Value> args = call_args(arg_nodes, env);
      return (*b.fn)(args, env);
    }
    fail("Unknown ObjectValue filter: " + name);
  }
  fail("Cannot apply filter \"" + name + "\" to type: " + type_name(v));
}

bool Interpreter::run_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  const Value arg = args.empty() ? Value::undefined() : args[0];
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "callable") return v.kind == Kind::Function;
  if (name == "odd" || name == "even") {
    if (v.kind != Kind::Int) fail("cannot " + name + " on " + type_name(v));
    const bool odd = std::fmod(v.num, 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return v.kind == Kind::Bool && !v.b;
  if (name == "true") return v.kind == Kind::Bool && v.b;
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "iterable") return v.kind == Kind::Array || v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "lower") return v.is_string() && v.s() == to_lower(v.s());
  if (name == "upper") return v.is_string() && v.s() == to_upper(v.s());
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq" || name == "sameas") return strict_equal(v, arg);
  if (name == "in") return truthy(binary_op("in", v, arg));
  fail("Unknown test: " + name);
}

}  // namespace bonfire::chat_template
