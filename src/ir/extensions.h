// IR extensions (docs/IR.md §17): what a document may use beyond
// spec/ir.schema.json (version 1), each under its own name and version. A
// document lists the extensions it uses in "extensions": {"NAME": VERSION};
// a reader that does not know one refuses the document naming it, and a
// document without the field is plain v1, read exactly as before.
//
// Known here:
//   ssd_scan 1: the op ssd_scan (Mamba-2's scan, ir/ops/ssd.cpp) and
//   recurrent slots of it.
//   layer_apply 1: `apply` (true, false or per_layer booleans) on every op,
//   including the ones with state (attention, mla_attention, conv1d_causal,
//   the scans, recurrence, depth_route), so a layer can choose among
//   stateful node kinds: a hybrid model's attention and convolution (or
//   state-space) layers are one block. A slot is allocated only on the
//   layers where a node that uses it applies.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ir/validate.h"

namespace bonfire::ir {

struct IrExtension {
  const char* name;
  int version;
  const char* summary;
};

// Every extension this reader knows.
const std::vector<IrExtension>& ir_extensions();

// Whether the document declares the extension `name` (at a version this reader knows).
bool uses_extension(const nlohmann::json& doc, std::string_view name);

// Problems of the "extensions" field itself (rule R19): not an object, a
// name or a version this reader does not know. Nothing else is checked
// when there are any.
std::vector<IrProblem> check_extension_names(const nlohmann::json& doc);

// The document as the v1 schema sees it: the "extensions" field and the
// fields only a declared extension allows are taken out, so the schema
// checks everything else as before.
nlohmann::json v1_view(const nlohmann::json& doc);

// The fields the declared extensions add, after the schema passed (R19):
// an `apply` the v1 schema does not allow is a boolean or per_layer booleans.
// Without layer_apply, such an `apply` is reported naming the extension.
std::vector<IrProblem> check_extension_fields(const nlohmann::json& doc);

}  // namespace bonfire::ir
