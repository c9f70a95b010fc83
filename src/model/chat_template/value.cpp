#include "model/chat_template/value.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <utf8proc.h>

#include "model/chat_template/text.h"

namespace bonfire::chat_template {

Value Value::null() {
  Value v;
  v.kind = Kind::Null;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(double x) {
  Value v;
  v.kind = Kind::Int;
  v.num = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.kind = Kind::Float;
  v.num = x;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.str = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::array(Array items, Kind kind) {
  Value v;
  v.kind = kind;
  v.arr = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::object(std::shared_ptr<Object> o, Kind kind) {
  Value v;
  v.kind = kind;
  v.obj = std::move(o);
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind = Kind::Function;
  v.fn = std::make_shared<const Function>(std::move(f));
  return v;
}

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

bool Object::erase(const std::string& key) {
  for (auto it = items.begin(); it != items.end(); ++it)
    if (it->first == key) {
      items.erase(it);
      return true;
    }
  return false;
}

const char* type_name(Kind kind) {
  switch (kind) {
    case Kind::Undefined: return "UndefinedValue";
    case Kind::Null: return "NullValue";
    case Kind::Bool: return "BooleanValue";
    case Kind::Int: return "IntegerValue";
    case Kind::Float: return "FloatValue";
    case Kind::String: return "StringValue";
    case Kind::Array: return "ArrayValue";
    case Kind::Tuple: return "TupleValue";
    case Kind::Object: return "ObjectValue";
    case Kind::Kwargs: return "KeywordArgumentsValue";
    case Kind::Namespace: return "NamespaceValue";
    case Kind::Function: return "FunctionValue";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null: return false;
    case Kind::Bool: return v.b;
    case Kind::Int:
    case Kind::Float: return v.num != 0 && !std::isnan(v.num);
    case Kind::String: return !v.s().empty();
    case Kind::Array:
    case Kind::Tuple: return !v.arr->empty();
    case Kind::Object:
    case Kind::Kwargs: return !v.obj->items.empty();
    case Kind::Namespace:
    case Kind::Function: return true;  // a JavaScript object is always truthy
  }
  return false;
}

namespace {

bool nullish(const Value& v) { return v.kind == Kind::Undefined || v.kind == Kind::Null; }
bool is_ref(const Value& v) {
  return v.is_array() || v.is_attr_container() || v.kind == Kind::Function;
}
bool same_ref(const Value& a, const Value& b) {
  if (a.is_array() && b.is_array()) return a.arr == b.arr;
  if (a.is_attr_container() && b.is_attr_container()) return a.obj == b.obj;
  if (a.kind == Kind::Function && b.kind == Kind::Function) return a.fn == b.fn;
  return false;
}

// JavaScript's StringToNumber.
double string_to_number(const std::string& raw) {
  const std::string s = js_trim(raw);
  if (s.empty()) return 0;
  if (s == "Infinity" || s == "+Infinity") return INFINITY;
  if (s == "-Infinity") return -INFINITY;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    double v = 0;
    for (size_t i = 2; i < s.size(); ++i) {
      const char c = s[i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
      if (d >= base) return NAN;
      v = v * base + d;
    }
    return v;
  }
  // StrDecimalLiteral: [+-] (digits [. digits] | . digits) [e [+-] digits]
  size_t i = 0, digits = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return NAN;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return NAN;
  }
  if (i != s.size()) return NAN;
  return std::strtod(s.c_str(), nullptr);
}

// ToPrimitive for a container: what String(x) gives.
std::string ref_to_primitive(const Value& v) {
  if (v.is_array()) return js_string(v);
  if (v.kind == Kind::Function) return "function";
  return "[object Map]";
}

}  // namespace

bool loose_equal(const Value& a, const Value& b) {
  if (nullish(a) || nullish(b)) return nullish(a) && nullish(b);
  if (is_ref(a) && is_ref(b)) return same_ref(a, b);
  if (is_ref(a)) return loose_equal(Value::string(ref_to_primitive(a)), b);
  if (is_ref(b)) return loose_equal(a, Value::string(ref_to_primitive(b)));
  if (a.kind == Kind::Bool) return loose_equal(Value::integer(a.b ? 1 : 0), b);
  if (b.kind == Kind::Bool) return loose_equal(a, Value::integer(b.b ? 1 : 0));
  if (a.is_string() && b.is_string()) return a.s() == b.s();
  const double x = a.is_string() ? string_to_number(a.s()) : a.num;
  const double y = b.is_string() ? string_to_number(b.s()) : b.num;
  return x == y;
}

bool strict_equal(const Value& a, const Value& b) {
  if (nullish(a) || nullish(b)) return nullish(a) && nullish(b);
  if (is_ref(a) || is_ref(b)) return same_ref(a, b);
  if (a.is_number() && b.is_number()) return a.num == b.num;
  if (a.kind == Kind::Bool && b.kind == Kind::Bool) return a.b == b.b;
  if (a.is_string() && b.is_string()) return a.s() == b.s();
  return false;
}

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  if (d == 0) return "0";
  char buf[64];
#ifdef __cpp_lib_to_chars
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e±xx, shortest round trip
#else  // libc++ before 16 (the browser worker's) has no floating to_chars
  int precision = 0;
  do std::snprintf(buf, sizeof buf, "%.*e", precision, d);
  while (std::strtod(buf, nullptr) != d && ++precision < 17);
  std::string sci(buf);
#endif
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int n = std::atoi(sci.c_str() + e + 1) + 1;  // decimal point position
  const int k = static_cast<int>(digits.size());
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    const int exp = n - 1;
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    out += std::to_string(exp < 0 ? -exp : exp);
  }
  return sign + out;
}

namespace {

// FloatValue.toString: integral values keep one decimal (toFixed(1)).
std::string float_output(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::fmod(d, 1.0) == 0) {
    if (std::fabs(d) >= 1e21) return js_number(d);  // toFixed falls back to String()
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    return buf;
  }
  return js_number(d);
}

void hex4(std::string& out, unsigned v) {
  static const char* digits = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += digits[(v >> shift) & 0xF];
}

// JSON.stringify of a string; with ensure_ascii, every UTF-16 unit from 0x7f up escaped.
std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (char32_t c : code_points(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (c < 0x20 || (c >= 0xD800 && c <= 0xDFFF)) {
      hex4(out, c);
    } else if (ensure_ascii && c >= 0x7F) {
      if (c >= 0x10000) {
        hex4(out, 0xD800 + ((c - 0x10000) >> 10));
        hex4(out, 0xDC00 + ((c - 0x10000) & 0x3FF));
      } else {
        hex4(out, c);
      }
    } else {
      utf8_append(out, c);
    }
  }
  return out + "\"";
}

// Approximates String.prototype.localeCompare (ICU root collation) for the
// keys tools use: spaces, punctuation, digits, then letters; letters compare
// by base letter first, then unaccented before accented, then lower case
// before upper case.
struct Collation {
  int cls;          // 0 space, 1 punctuation, 2 digit, 3 letter, 4 other
  char32_t weight;  // order within the class
  int accent;       // 1 if the letter carries a mark
  int upper;        // 1 for an upper-case letter
};

Collation collation(char32_t c) {
  static const std::string punct = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
  if (c < 0x80) {
    if (c == ' ' || (c >= 9 && c <= 13)) return {0, c, 0, 0};
    const size_t p = punct.find(static_cast<char>(c));
    if (p != std::string::npos) return {1, static_cast<char32_t>(p), 0, 0};
    if (c >= '0' && c <= '9') return {2, c, 0, 0};
    if (c >= 'A' && c <= 'Z') return {3, c + 32, 0, 1};
    if (c >= 'a' && c <= 'z') return {3, c, 0, 0};
    return {4, c, 0, 0};
  }
  utf8proc_int32_t base[8];
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_STRIPMARK);
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), base, 8, options, nullptr);
  if (n >= 1 && base[0] < 0x80 && std::isalpha(base[0])) {
    const Collation b = collation(static_cast<char32_t>(base[0]));
    return {3, b.weight, 1, b.upper};
  }
  return {4, c, 0, 0};
}

bool locale_less(const std::string& a, const std::string& b) {
  const auto x = code_points(a), y = code_points(b);
  std::vector<Collation> cx, cy;
  for (char32_t c : x) cx.push_back(collation(c));
  for (char32_t c : y) cy.push_back(collation(c));
  for (size_t i = 0; i < cx.size() && i < cy.size(); ++i) {
    if (cx[i].cls != cy[i].cls) return cx[i].cls < cy[i].cls;
    if (cx[i].weight != cy[i].weight) return cx[i].weight < cy[i].weight;
  }
  if (cx.size() != cy.size()) return cx.size() < cy.size();
  for (size_t i = 0; i < cx.size(); ++i)
    if (cx[i].accent != cy[i].accent) return cx[i].accent < cy[i].accent;
  for (size_t i = 0; i < cx.size(); ++i)
    if (cx[i].upper != cy[i].upper) return cx[i].upper < cy[i].upper;
  return false;
}

}  // namespace

std::string to_output(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null: return "undefined";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int: return js_number(v.num);
    case Kind::Float: return float_output(v.num);
    case Kind::String: return v.s();
    case Kind::Function: throw RenderError("Cannot print a function");
    default: return to_json(v, JsonOptions{}, false);
  }
}

std::string js_string(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::Null: return "undefined";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int:
    case Kind::Float: return js_number(v.num);
    case Kind::String: return v.s();
    case Kind::Array:
    case Kind::Tuple: {
      std::string out;
      for (size_t i = 0; i < v.arr->size(); ++i) {
        if (i) out += ",";
        out += to_output((*v.arr)[i]);
      }
      return out;
    }
    case Kind::Function: throw RenderError("Cannot convert a function to a string");
    default: return "[object Map]";
  }
}

namespace {

void to_json_into(std::string& out, const Value& v, const JsonOptions& opt, int depth, bool undefined_to_null) {
  std::string item_sep = opt.indent ? "," : ", ", key_sep = ": ";
  if (opt.custom_separators) item_sep = opt.item_sep, key_sep = opt.key_sep;
  switch (v.kind) {
    case Kind::Null: out += "null"; return;
    case Kind::Undefined: out += undefined_to_null ? "null" : "undefined"; return;
    case Kind::Int:
    case Kind::Float: out += std::isfinite(v.num) ? js_number(v.num) : "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::String: out += json_string(v.s(), opt.ensure_ascii); return;
    case Kind::Array:
    case Kind::Object:
    case Kind::Namespace: break;
    default: throw RenderError(std::string("Cannot convert to JSON: ") + type_name(v));
  }
  const std::string unit(opt.indent, ' ');
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += unit;
  const std::string child = base + unit;
  if (v.kind == Kind::Array) {
    out += "[";
    for (size_t i = 0; i < v.arr->size(); ++i) {
      if (i) out += item_sep;
      if (opt.indent) out += child;
      to_json_into(out, (*v.arr)[i], opt, depth + 1, undefined_to_null);
    }
    if (opt.indent && !v.arr->empty()) out += base;
    out += "]";
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& kv : v.obj->items) entries.push_back(&kv);
  if (opt.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return locale_less(a->first, b->first); });
  out += "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (opt.indent) out += child;
    out += json_string(entries[i]->first, opt.ensure_ascii);
    out += key_sep;
    to_json_into(out, entries[i]->second, opt, depth + 1, undefined_to_null);
  }
  if (opt.indent && !entries.empty()) out += base;
  out += "}";
}

// A canonical array index ("0", "17", ...), which JavaScript objects list first.
bool array_index_key(const std::string& k, unsigned long long* value) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  for (char c : k)
    if (c < '0' || c > '9') return false;
  *value = std::stoull(k);
  return *value < 4294967295ULL;
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_to_null) {
  std::string out;
  to_json_into(out, v, opt, 0, undefined_to_null);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::null();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(static_cast<double>(j.get<int64_t>()));
    case nlohmann::json::value_t::number_unsigned: return Value::integer(static_cast<double>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) && std::fmod(d, 1.0) == 0 ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Array items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::array(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto o = std::make_shared<Object>();
      std::vector<std::pair<unsigned long long, std::string>> indices;
      for (const auto& [k, e] : j.items()) {
        unsigned long long idx;
        if (array_index_key(k, &idx)) indices.emplace_back(idx, k);
      }
      std::sort(indices.begin(), indices.end());
      for (const auto& [idx, k] : indices) o->items.emplace_back(k, from_json(j.at(k)));
      for (const auto& [k, e] : j.items()) {
        unsigned long long idx;
        if (!array_index_key(k, &idx)) o->items.emplace_back(k, from_json(e));
      }
      return Value::object(std::move(o));
    }
    default: return Value::undefined();  // binary and discarded values do not occur in requests
  }
}

}  // namespace bonfire::chat_template
