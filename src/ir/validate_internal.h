// Shared by validate.cpp (the document's rules and the driver),
// validate_flow.cpp (names, lists, widths, weights: R4, R6, R10, R18),
// validate_expr.cpp (R15) and the ops' own rules (ir/ops/*.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/validate.h"

namespace bonfire::ir::detail {

using json = nlohmann::json;

struct Checker {
  json doc;  // the document, integral floats as integers
  const WeightStore* weights = nullptr;
  int64_t n_layers = 0;  // model.n_layers
  int64_t layers = 0;    // layers simulated: min(n_layers, kMaxSimulatedLayers)
  std::vector<IrProblem> problems;
  std::set<std::string> seen;

  // Adds a problem once per `key` (default: path + message), so a node that
  // is wrong on every layer is reported once.
  void report(const std::string& path, const std::string& message, int rule, const std::string& key = {});
  const json& nodes(const std::string& section) const { return doc[section]["nodes"]; }
};

inline const char* const kSections[] = {"embed", "block", "head"};

// A field on `layer` (-1 outside the block): nullopt when absent, null (a
// per_layer entry missing, or a per_layer outside the block) or another type.
std::optional<int64_t> int_field(const json& node, const char* key, int64_t layer);
std::optional<double> num_field(const json& node, const char* key, int64_t layer);
std::optional<std::string> str_field(const json& node, const char* key, int64_t layer);
std::optional<bool> bool_field(const json& node, const char* key, int64_t layer);

// The layers a node runs on: block nodes where they apply, {-1} elsewhere.
std::vector<int64_t> node_layers(const Checker& c, const std::string& section, const json& node);
// " on layer 3" (nothing for -1); with `obj`, only when one of its fields is per_layer.
std::string on_layer(int64_t layer);
std::string on_layer(const json& obj, int64_t layer);
// The slot named `name` in block.state, or nullptr.
const json* find_slot(const json& doc, const std::string& name);
// The names a node reads.
std::vector<std::string> in_names(const json& node);
// The document's output names (default ["logits"]) and input names (default ["tokens"]; tokens always).
std::vector<std::string> output_names(const json& doc);
std::vector<std::string> input_names(const json& doc);
std::string quoted(const std::string& s);  // "\"x\""
inline std::string str(int64_t v) { return std::to_string(v); }  // sizes in messages

// a*b and a+b for sizes; -1 (unknown: nothing is checked) when an operand is
// negative or the result overflows, so absurd sizes never wrap.
inline int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? -1 : r;
}
inline int64_t add(int64_t a, int64_t b) {
  int64_t r;
  return a < 0 || b < 0 || __builtin_add_overflow(a, b, &r) ? -1 : r;
}

// Layers simulated (a document may claim any n_layers; past this every
// layer without per_layer values looks like the ones before).
constexpr int64_t kMaxSimulatedLayers = 4096;

void check_flow(Checker& c);  // R4, R6 (lists), R10, R18 (validate_flow.cpp)
// R15 (validate_expr.cpp): an expr node's expression; a recurrence's program.
void check_expr_node(Checker& c, const std::string& path, const json& node);
void check_recurrence(Checker& c, const std::string& path, const json& node);
// R9: heads is a multiple of kv_heads (kv_heads defaults to heads) on `layer`.
void check_kv_heads_divide(Checker& c, const std::string& path, const json& node, int64_t layer);

}  // namespace bonfire::ir::detail
