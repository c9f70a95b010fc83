// Built-in members (string and dict methods) and global functions, with the
// reference's semantics. Note strip()/lstrip()/rstrip() ignore their argument
// and remove all whitespace, as the reference does (Python would strip only
// the given characters).
#include <cmath>
#include <ctime>

#include "model/chat_template/interpreter.h"
#include "model/chat_template/text.h"

namespace bonfire::chat_template {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw RenderError(msg); }

Value method(Function f) { return Value::function(std::move(f)); }

Value strings(std::vector<std::string> parts) {
  Array out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

// str.startswith / str.endswith with a string or a tuple of strings.
Value affix_test(const std::string& s, std::vector<Value>& args, const char* name, bool prefix) {
  auto has = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (args.empty()) fail(std::string(name) + "() requires at least one argument");
  const Value& p = args[0];
  if (p.is_string()) return Value::boolean(has(p.s()));
  if (p.is_array()) {
    for (const Value& item : *p.arr) {
      if (!item.is_string()) fail(std::string(name) + "() tuple elements must be strings");
      if (has(item.s())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  fail(std::string(name) + "() argument must be a string or tuple of strings");
}

// Python's str.split(sep=None, maxsplit=-1).
Value split(const std::string& s, std::vector<Value>& args) {
  const Value sep = args.size() > 0 ? args[0] : Value::null();
  if (!sep.is_string() && !sep.is_null()) fail("sep argument must be a string or null");
  const Value max_v = args.size() > 1 ? args[1] : Value::integer(-1);
  if (max_v.kind != Kind::Int) fail("maxsplit argument must be a number");
  const double maxsplit = max_v.num;
  std::vector<std::string> out;
  if (sep.is_null()) {
    const std::string text = js_trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      while (size_t w = js_space_at(text, i)) i += w;
      if (i >= text.size()) break;
      size_t j = i;
      while (j < text.size() && !js_space_at(text, j)) ++j;
      if (maxsplit >= 0 && out.size() >= maxsplit) {
        out.push_back(text.substr(i));
        break;
      }
      out.push_back(text.substr(i, j - i));
      i = j;
    }
    return strings(std::move(out));
  }
  const std::string& d = sep.s();
  if (d.empty()) fail("empty separator");
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    out.push_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.push_back(s.substr(start));
  if (maxsplit >= 0 && out.size() > maxsplit) {
    std::string rest;
    for (size_t k = static_cast<size_t>(maxsplit); k < out.size(); ++k) rest += (k > maxsplit ? d : "") + out[k];
    out.resize(static_cast<size_t>(maxsplit));
    out.push_back(rest);
  }
  return strings(std::move(out));
}

Value replace(const std::string& s, std::vector<Value>& args) {
  if (args.size() < 2) fail("replace() requires at least two arguments");
  if (!args[0].is_string() || !args[1].is_string()) fail("replace() arguments must be strings");
  Value count = Value::null();
  if (args.size() > 2) {
    if (args[2].kind == Kind::Kwargs) {
      const Value* c = args[2].obj->find("count");
      count = c ? *c : Value::null();
    } else {
      count = args[2];
    }
  }
  if (count.kind != Kind::Int && !count.is_null()) fail("replace() count argument must be a number or null");
  const std::string &from = args[0].s(), &to = args[1].s();
  if (count.kind == Kind::Int && count.num == 0) return Value::string(s);
  double remaining = count.is_null() || count.num < 0 ? INFINITY : count.num;
  std::string out;
  if (from.empty()) {  // an empty pattern matches before every character and at the end
    for (char32_t c : code_points(s)) {
      if (remaining > 0) out += to, --remaining;
      utf8_append(out, c);
    }
    if (remaining > 0) out += to;
    return Value::string(std::move(out));
  }
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos || remaining <= 0) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
    --remaining;
  }
  return Value::string(out + s.substr(start));
}

Value string_member(const Value& self, const std::string& name) {
  const auto str = self.str;
  auto unary = [str](std::string (*f)(std::string_view)) {
    return method([str, f](std::vector<Value>&, const EnvPtr&) { return Value::string(f(*str)); });
  };
  if (name == "upper") return unary(to_upper);
  if (name == "lower") return unary(to_lower);
  if (name == "strip") return unary(js_trim);
  if (name == "lstrip") return unary(js_trim_start);
  if (name == "rstrip") return unary(js_trim_end);
  if (name == "title") return unary(title_case);
  if (name == "capitalize") return unary(capitalize);
  if (name == "length") return Value::integer(utf16_length(*str));
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([str, prefix](std::vector<Value>& args, const EnvPtr&) {
      return affix_test(*str, args, prefix ? "startswith" : "endswith", prefix);
    });
  }
  if (name == "split") return method([str](std::vector<Value>& args, const EnvPtr&) { return split(*str, args); });
  if (name == "replace") return method([str](std::vector<Value>& args, const EnvPtr&) { return replace(*str, args); });
  return Value::undefined();
}

Value dictsort(const Value& self, std::vector<Value>& args) {
  Object kw;
  std::vector<Value> pos;
  for (const Value& a : args) {
    if (a.kind == Kind::Kwargs)
      kw = *a.obj;
    else
      pos.push_back(a);
  }
  auto pick = [&](size_t i, const char* key, Value dflt) {
    if (i < pos.size()) return pos[i];
    const Value* v = kw.find(key);
    return v ? *v : dflt;
  };
  const Value cs = pick(0, "case_sensitive", Value::boolean(false));
  if (cs.kind != Kind::Bool) fail("case_sensitive must be a boolean");
  const Value by = pick(1, "by", Value::string("key"));
  if (!by.is_string()) fail("by must be a string");
  if (by.s() != "key" && by.s() != "value") fail("by must be either 'key' or 'value'");
  const Value reverse = pick(2, "reverse", Value::boolean(false));
  if (reverse.kind != Kind::Bool) fail("reverse must be a boolean");
  std::vector<std::pair<std::string, Value>> items = self.obj->items;
  const bool by_key = by.s() == "key";
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    const int r = by_key ? compare_values(Value::string(a.first), Value::string(b.first), cs.b)
                         : compare_values(a.second, b.second, cs.b);
    return reverse.b ? r > 0 : r < 0;
  });
  Array out;
  for (auto& [k, v] : items) out.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(out));
}

Value object_member(const Value& self, const std::string& name) {
  if (name == "get")
    return method([self](std::vector<Value>& args, const EnvPtr&) {
      if (args.empty() || !args[0].is_string())
        fail(std::string("Object key must be a string: got ") + (args.empty() ? "undefined" : type_name(args[0])));
      if (const Value* v = self.obj->find(args[0].s())) return *v;
      return args.size() > 1 ? args[1] : Value::null();
    });
  if (name == "items" || name == "keys" || name == "values")
    return method([self, name](std::vector<Value>&, const EnvPtr&) {
      Array out;
      for (const auto& [k, v] : self.obj->items) {
        if (name == "items") out.push_back(Value::array({Value::string(k), v}));
        if (name == "keys") out.push_back(Value::string(k));
        if (name == "values") out.push_back(v);
      }
      return Value::array(std::move(out));
    });
  if (name == "dictsort") return method([self](std::vector<Value>& args, const EnvPtr&) { return dictsort(self, args); });
  return Value::undefined();
}

// One [key, value] pair for namespace() from an array or a two-character string.
std::pair<std::string, Value> namespace_pair(const Value& pair) {
  std::vector<Value> values;
  if (pair.is_array()) values = *pair.arr;
  if (pair.is_string())
    for (char32_t c : code_points(pair.s())) values.push_back(Value::string(utf8({c})));
  if (values.size() != 2) fail("namespace expected an object or an iterable of [key, value] pairs");
  if (!values[0].is_string()) fail("namespace keys must be strings");
  return {values[0].s(), values[1]};
}

Value make_namespace(std::vector<Value>& args, const EnvPtr&) {
  std::vector<Value> pos = args;
  std::shared_ptr<Object> kwargs;
  if (!pos.empty() && pos.back().kind == Kind::Kwargs) {
    kwargs = pos.back().obj;
    pos.pop_back();
  }
  if (pos.size() > 1) fail("namespace expected at most 1 argument, got " + std::to_string(pos.size()));
  auto entries = std::make_shared<Object>();
  if (pos.size() == 1) {
    const Value& src = pos[0];
    if (src.is_object()) {
      for (const auto& [k, v] : src.obj->items) entries->set(k, v);
    } else if (src.is_array()) {
      for (const Value& pair : *src.arr) {
        auto [k, v] = namespace_pair(pair);
        entries->set(k, v);
      }
    } else {
      fail(std::string("'") + type_name(src) + "' object is not iterable");
    }
  }
  if (kwargs)
    for (const auto& [k, v] : kwargs->items) entries->set(k, v);
  return Value::object(entries, Kind::Namespace);
}

Value range(std::vector<Value>& args, const EnvPtr&) {
  for (const Value& a : args)
    if (!a.is_number()) fail("range() arguments must be numbers");
  if (args.empty()) fail("range() expects at least one argument");
  double start = args[0].num, stop, step = args.size() > 2 ? args[2].num : 1;
  if (args.size() > 1) {
    stop = args[1].num;
  } else {
    stop = start;
    start = 0;
  }
  if (step == 0) fail("range() step must not be zero");
  if ((stop - start) / step > 1e6) fail("range() of more than a million numbers");
  Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(std::fmod(i, 1.0) == 0 ? Value::integer(i) : Value::floating(i));
  return Value::array(std::move(out));
}

// The reference's strftime: %Y %m %d %b %B %H %M %% in local time, English
// month names; any other directive is left as written.
Value strftime_now(std::vector<Value>& args, const EnvPtr&) {
  if (args.empty() || !args[0].is_string()) fail("strftime_now() expects a format string");
  static const char* months[] = {"January", "February", "March",     "April",   "May",      "June",
                                 "July",    "August",   "September", "October", "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm t{};
  localtime_r(&now, &t);
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  const std::string& f = args[0].s();
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char d = f[i + 1];
    switch (d) {
      case 'Y': out += std::to_string(t.tm_year + 1900); break;
      case 'm': out += pad2(t.tm_mon + 1); break;
      case 'd': out += pad2(t.tm_mday); break;
      case 'b': out += std::string(months[t.tm_mon]).substr(0, 3); break;
      case 'B': out += months[t.tm_mon]; break;
      case 'H': out += pad2(t.tm_hour); break;
      case 'M': out += pad2(t.tm_min); break;
      case '%': out += '%'; break;
      default: out += f[i]; continue;  // not a directive: keep the '%' and read on
    }
    ++i;
  }
  return Value::string(std::move(out));
}

}  // namespace

Value builtin_member(const Value& object, const std::string& name) {
  if (object.is_string()) return string_member(object, name);
  if (object.is_array()) return name == "length" ? Value::integer(object.arr->size()) : Value::undefined();
  if (object.is_object()) return object_member(object, name);
  return Value::undefined();
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  auto nullish = [](const Value& v) { return v.is_null() || v.is_undefined(); };
  if (nullish(a) || nullish(b)) {
    if (a.kind == b.kind) return 0;
    fail(std::string("Cannot compare ") + type_name(a) + " with " + type_name(b));
  }
  auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (numeric_like(a) && numeric_like(b)) {
    const double x = a.kind == Kind::Bool ? a.b : a.num, y = b.kind == Kind::Bool ? b.b : b.num;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind != b.kind) fail(std::string("Cannot compare different types: ") + type_name(a) + " and " + type_name(b));
  if (!a.is_string()) fail(std::string("Cannot compare type: ") + type_name(a));
  const std::string x = case_sensitive ? a.s() : to_lower(a.s());
  const std::string y = case_sensitive ? b.s() : to_lower(b.s());
  return x < y ? -1 : x > y ? 1 : 0;
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attr_container()) {
      const Value* f = v.obj->find(part);
      v = f ? *f : Value::undefined();
    } else if (v.is_array()) {
      char* end = nullptr;
      const long idx = std::strtol(part.c_str(), &end, 10);  // parseInt: leading digits count
      if (end == part.c_str() || idx < 0 || idx >= static_cast<long>(v.arr->size())) return Value::undefined();
      const Value next = (*v.arr)[idx];
      v = next;
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

EnvPtr Interpreter::global_env() {
  auto env = std::make_shared<Env>();
  env->declare("namespace", Value::function(make_namespace));
  env->declare("false", Value::boolean(false));
  env->declare("true", Value::boolean(true));
  env->declare("none", Value::null());
  env->declare("raise_exception", Value::function([](std::vector<Value>& args, const EnvPtr&) -> Value {
    const bool empty = args.empty() || args[0].is_undefined();
    throw RaisedError(empty ? "" : js_string(args[0]));
  }));
  env->declare("range", Value::function(range));
  env->declare("strftime_now", Value::function(strftime_now));
  env->declare("True", Value::boolean(true));
  env->declare("False", Value::boolean(false));
  env->declare("None", Value::null());
  return env;
}

}  // namespace bonfire::chat_template
