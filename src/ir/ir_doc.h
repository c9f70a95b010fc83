// Reading an IR document (docs/IR.md): per-layer values, `apply`, weight-name
// placeholders. Validation (validate.h) and lowering (lower.h) both read
// documents through these, so the two agree on what a field means.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire::ir {

using nlohmann::json;

// True for {"per_layer": [...]}.
bool is_per_layer(const json& v);

// The value a field takes on `layer`: entry `layer` of a per_layer object,
// else the value itself. Out-of-range entries give null (the validator
// reports them; R2).
const json& at_layer(const json& v, int64_t layer);

// Whether `node` is applied on `layer` (`apply`, default true).
bool applies(const json& node, int64_t layer);

// The weight set `{i}` stands for on `layer` (docs/IR.md §3): the
// application count with tensor_index "application", else
// block.weight_index[layer], else the layer itself. `applications` is how
// many earlier layers applied this node.
int64_t weight_set(const json& doc, const json& node, int64_t layer, int64_t applications);

// A weight-name template with `{i}` and `{e}` replaced (e < 0: leave `{e}`).
std::string weight_name(const std::string& tmpl, int64_t set, int64_t expert = -1);

// The node's `out` as a list (a single name becomes a list of one).
std::vector<std::string> out_names(const json& node);

// The document with its keys in reading order (ir_version, family_hint,
// model, ..., embed, block, head; each node's op, in, out first), for
// printing: nlohmann::json itself keeps keys sorted.
nlohmann::ordered_json in_reading_order(const json& doc);

// A JSON path for messages: "$.block.nodes[3].eps".
std::string node_path(const std::string& section, size_t index);

}  // namespace bonfire::ir
