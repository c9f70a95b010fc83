// The values a chat template computes with. They follow the runtime of the
// reference renderer (@huggingface/jinja, the engine transformers.js uses), not
// Python's: numbers are JavaScript doubles tagged integer or float, strings are
// UTF-8 but measured and indexed the way JavaScript does (UTF-16 units), `==`
// is JavaScript's loose equality, and arrays, objects and namespaces are shared
// by reference so identity comparisons and namespace mutation behave alike.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bonfire::chat_template {

// A failure while rendering, in the reference's words; ChatTemplate::render
// adds the line and turns it into a bonfire::Error.
struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
  std::string detail;  // what bonfire adds after the line, e.g. the name of a missing method
};

struct Value;
struct Object;
class Env;
using Array = std::vector<Value>;
using EnvPtr = std::shared_ptr<Env>;
// Builtins and macros take positional arguments followed, when the call named
// any, by one keyword-arguments object (the reference's calling convention).
using Function = std::function<Value(std::vector<Value>& args, const EnvPtr& call_site)>;

enum class Kind { Undefined, Null, Bool, Int, Float, String, Array, Tuple, Object, Kwargs, Namespace, Function };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  double num = 0;  // Int and Float both hold a double, as JavaScript does
  std::shared_ptr<const std::string> str;
  std::shared_ptr<Array> arr;        // Array, Tuple
  std::shared_ptr<Object> obj;       // Object, Kwargs, Namespace
  std::shared_ptr<const Function> fn;

  static Value undefined() { return {}; }
  static Value null();
  static Value boolean(bool v);
  static Value integer(double v);
  static Value floating(double v);
  static Value string(std::string s);
  static Value array(Array items, Kind kind = Kind::Array);
  static Value object(std::shared_ptr<Object> o, Kind kind = Kind::Object);
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_null() const { return kind == Kind::Null; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_string() const { return kind == Kind::String; }
  bool is_array() const { return kind == Kind::Array || kind == Kind::Tuple; }  // ArrayValue or a subclass
  bool is_object() const { return kind == Kind::Object || kind == Kind::Kwargs; }  // ObjectValue or a subclass
  bool is_attr_container() const { return is_object() || kind == Kind::Namespace; }
  const std::string& s() const { return *str; }
};

// Insertion-ordered string-keyed map; chat-template objects are small.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
  bool erase(const std::string& key);
};

// The reference's type names, used in its error messages ("StringValue", ...).
const char* type_name(Kind kind);
inline const char* type_name(const Value& v) { return type_name(v.kind); }

// Python-like truthiness as the reference defines it.
bool truthy(const Value& v);

// JavaScript `==` on the values' payloads (null and undefined are equal; a
// number and a string compare numerically; containers by identity).
bool loose_equal(const Value& a, const Value& b);
// JavaScript `===` on the payloads (`in` on arrays, the equalto test).
bool strict_equal(const Value& a, const Value& b);

// The text `{{ v }}` prints (RuntimeValue.toString): floats keep a ".0",
// containers print as JSON with undefined kept as `undefined`.
std::string to_output(const Value& v);
// JavaScript's String(payload), used by `+` and `~` on strings and by join:
// numbers print without ".0", arrays join their elements' output with ",".
std::string js_string(const Value& v);
// JavaScript Number.prototype.toString().
std::string js_number(double d);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool custom_separators = false;
  std::string item_sep, key_sep;
};
// The reference's toJSON: Python-style ", " and ": " separators (",", ": " with
// an indent), undefined as null (or `undefined` when printing a container).
std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_to_null = true);

// A request's JSON (messages, tools, ...) as template values, the way the
// reference converts JavaScript objects: integral numbers are integers and
// array-index keys move to the front of an object, as JavaScript orders them.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace bonfire::chat_template
