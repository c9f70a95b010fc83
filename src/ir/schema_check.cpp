#include "ir/schema_check.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>

// Schema-parser errors throw (std::runtime_error) instead of aborting.
#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "spec/manifest.h"

// How valijson's draft-7 parser reads spec/ir.schema.json (draft 2020-12):
//
// - "$schema" (the 2020-12 URI) and "$id" (a URN) are not read: valijson
//   reads no "$schema" and looks for draft-4 "id", so the resolution scope
//   stays the document itself, which is what "#/$defs/..." means here.
// - "$defs" is not a keyword to it, but "$ref": "#/$defs/x" is a plain JSON
//   pointer into the same document, which it resolves.
// - No "$ref" in this schema has sibling keywords (2020-12 applies both,
//   draft 7 only the "$ref"), and the schema uses no 2020-12-only keyword
//   (prefixItems, unevaluatedProperties, $dynamicRef, dependentSchemas).
// - if/then, const, enum, anyOf, allOf, patternProperties,
//   additionalProperties, minItems, minLength, minimum and type arrays mean
//   the same in both drafts.
// - One difference is in the instance, not the schema: 2020-12 counts 4.0 as
//   an integer, valijson (strict types) only 4. check_schema validates a copy
//   of the document with integral floats made integers
//   (integral_floats_as_integers). Whole numbers beyond int64 (1e19, 1e30)
//   are integers to 2020-12 too; valijson would read an unsigned one above
//   2^63 as negative, so the copy holds them as int64's extremes, which every
//   minimum in the schema reads as jsonschema reads the real value.
//
// The schema itself is parsed unchanged. tests/ir_validate_test.cpp checks
// the verdicts against python-jsonschema's Draft202012Validator on 600+
// mutated documents (goldens/ir_schema/cases.jsonl).

namespace bonfire::ir {

using json = nlohmann::json;

namespace {

struct Parsed {
  valijson::Schema schema;
  std::set<std::string> discriminators;  // properties `if` tests without requiring them ("op")
};

void collect_discriminators(const json& s, std::set<std::string>& out) {
  if (s.is_object()) {
    if (s.contains("if") && s["if"].is_object() && s["if"].contains("properties")) {
      std::set<std::string> required;
      if (s["if"].contains("required"))
        for (const auto& r : s["if"]["required"]) required.insert(r.get<std::string>());
      for (const auto& [k, v] : s["if"]["properties"].items())
        if (!required.count(k)) out.insert(k);
    }
    for (const auto& [k, v] : s.items()) collect_discriminators(v, out);
  } else if (s.is_array()) {
    for (const auto& v : s) collect_discriminators(v, out);
  }
}

const Parsed& parsed_ir_schema() {
  static const std::unique_ptr<Parsed> parsed = [] {
    auto p = std::make_unique<Parsed>();
    const json& schema = spec::ir_schema();
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(schema);
    parser.populateSchema(adapter, p->schema);
    collect_discriminators(schema, p->discriminators);
    return p;
  }();
  return *parsed;
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "value";
  }
}

struct Err {
  std::string path;
  const json* value = nullptr;  // the instance value at path (null if not found)
  std::string message;
  bool type = false;  // a 'type' constraint failure
};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

bool is_prefix_path(const std::string& parent, const std::string& child) {
  if (parent == child) return true;
  if (!starts_with(child, parent)) return false;
  const char c = child[parent.size()];
  return c == '.' || c == '[';
}

// valijson's context ("<root>", "[block]", "[nodes]", "[3]") as "$.block.nodes[3]",
// telling keys from indices by walking the instance.
Err to_err(const json& doc, const valijson::ValidationResults::Error& e) {
  Err out;
  out.path = "$";
  const json* cur = &doc;
  for (size_t i = 0; i < e.context.size(); ++i) {
    const std::string& part = e.context[i];
    if (part == "<root>") continue;
    const std::string t = part.size() >= 2 && part.front() == '[' && part.back() == ']' ? part.substr(1, part.size() - 2)
                                                                                         : part;
    if (cur && cur->is_array() && !t.empty() && t.find_first_not_of("0123456789") == std::string::npos) {
      const size_t idx = std::stoul(t);
      out.path += "[" + t + "]";
      cur = idx < cur->size() ? &(*cur)[idx] : nullptr;
    } else {
      out.path += json_path_key(t);
      cur = cur && cur->is_object() && cur->contains(t) ? &(*cur)[t] : nullptr;
    }
  }
  out.value = cur;
  out.message = e.description;
  return out;
}

std::string without_period(std::string s) {
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

constexpr int kMaxDepth = 256;

std::string json_path_key(const std::string& key) {
  bool plain = !key.empty() && !std::isdigit((unsigned char)key[0]);
  for (char c : key)
    if (!(std::isalnum((unsigned char)c) || c == '_')) plain = false;
  return plain ? "." + key : "[" + json(key).dump() + "]";
}

json integral_floats_as_integers(const json& v) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMax)) return json(kMax);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d) {
      if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) return json(static_cast<int64_t>(d));
      return json(d > 0 ? kMax : kMin);
    }
    return v;
  }
  if (v.is_array()) {
    json out = json::array();
    for (const auto& e : v) out.push_back(integral_floats_as_integers(e));
    return out;
  }
  if (v.is_object()) {
    json out = json::object();
    for (const auto& [k, e] : v.items()) out[k] = integral_floats_as_integers(e);
    return out;
  }
  return v;
}

static int nesting_depth(const json& v) {
  int deepest = 0;
  std::vector<std::pair<const json*, int>> todo = {{&v, 1}};
  while (!todo.empty()) {
    auto [x, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (x->is_structured() && d <= kMaxDepth)
      for (const auto& e : *x) todo.push_back({&e, d + 1});
  }
  return deepest;
}

std::vector<SchemaProblem> check_schema(const json& input) {
  // Copying, validating and walking a document recurse; refuse absurd
  // nesting before any of that (an IR document nests about 8 deep).
  if (nesting_depth(input) > kMaxDepth)
    return {{"$", "the document nests deeper than " + std::to_string(kMaxDepth) + " levels; not validated"}};
  const Parsed& parsed = parsed_ir_schema();
  const json doc = integral_floats_as_integers(input);
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  if (validator.validate(parsed.schema, adapter, &results)) return {};

  std::vector<Err> all;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) all.push_back(to_err(doc, e));

  // 1. Drop the wrappers that only say a child failed.
  std::vector<Err> errs;
  for (auto& x : all) {
    if (starts_with(x.message, "Failed to validate against") || starts_with(x.message, "Failed to validate item #"))
      continue;
    x.type = starts_with(x.message, "Value type not permitted");
    // An unknown key: point at the key itself.
    const std::string marker = "or 'additionalProperties' constraints: '";
    if (const size_t at = x.message.find(marker); at != std::string::npos) {
      const std::string key = x.message.substr(at + marker.size(), x.message.size() - at - marker.size() - 2);
      x.path += json_path_key(key);
      x.value = x.value && x.value->is_object() && x.value->contains(key) ? &(*x.value)[key] : nullptr;
      x.message = "unknown key '" + key + "' (not allowed by 'properties' or 'additionalProperties')";
    }
    errs.push_back(x);
  }
  if (errs.empty()) errs = all;  // never lose the verdict

  // 2. A node without "op" matches every `if` that tests op, so every `then`
  //    complains; keep the missing-discriminator error alone there.
  std::vector<std::string> undiscriminated;
  for (const auto& x : errs)
    for (const auto& d : parsed.discriminators)
      if (x.message == "Missing required property '" + d + "'.") undiscriminated.push_back(x.path);
  if (!undiscriminated.empty()) {
    std::vector<Err> kept;
    for (const auto& x : errs) {
      bool noise = false;
      for (const auto& p : undiscriminated)
        if (is_prefix_path(p, x.path) && !(x.path == p && starts_with(x.message, "Missing required property") &&
                                            parsed.discriminators.count(x.message.substr(27, x.message.size() - 29))))
          noise = true;
      if (!noise) kept.push_back(x);
    }
    if (!kept.empty()) errs = kept;
  }

  // 3. A type failure where another error exists at or below the same path
  //    is an anyOf alternative the value was not meant for.
  std::vector<Err> kept;
  for (const auto& x : errs) {
    bool shadowed = false;
    if (x.type)
      for (const auto& y : errs)
        if (&x != &y && !y.type && is_prefix_path(x.path, y.path)) shadowed = true;
    if (x.type && !shadowed)
      for (const auto& y : errs)
        if (&x != &y && y.type && y.path != x.path && is_prefix_path(x.path, y.path)) shadowed = true;
    if (!shadowed) kept.push_back(x);
  }
  if (!kept.empty()) errs = kept;

  // 4. Say what was found; drop repeats.
  std::vector<SchemaProblem> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& x : errs) {
    std::string msg = x.message;
    // valijson prints limits as doubles: "greater than or equal to 1.000000".
    for (size_t at; (at = msg.find(".000000")) != std::string::npos;) msg.erase(at, 7);
    if (x.value && x.type) msg = without_period(msg) + " (found " + type_name(*x.value) + ")";
    if (x.value && starts_with(msg, "Failed to match against any enum values"))
      msg = without_period(msg) + " (found " + x.value->dump(-1, ' ', false, json::error_handler_t::replace) + ")";
    if (seen.insert({x.path, msg}).second) out.push_back({x.path, msg});
  }
  return out;
}

bool schema_accepts(const json& fragment, const json& value) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<valijson::Schema>> cache;
  const std::string key = fragment.dump();
  const valijson::Schema* schema = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = cache[key];
    if (!slot) {
      json s = fragment;
      if (s.is_object()) s["$defs"] = spec::ir_schema()["$defs"];
      slot = std::make_unique<valijson::Schema>();
      valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
      valijson::adapters::NlohmannJsonAdapter adapter(s);
      parser.populateSchema(adapter, *slot);
    }
    schema = slot.get();
  }
  const json v = integral_floats_as_integers(value);
  valijson::Validator validator;
  valijson::adapters::NlohmannJsonAdapter adapter(v);
  return validator.validate(*schema, adapter, nullptr);
}

}  // namespace bonfire::ir
