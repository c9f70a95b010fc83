// An IR document against spec/ir.schema.json (JSON Schema draft 2020-12),
// checked with valijson. valijson knows drafts 3, 4 and 7; its draft-7 parser
// gives this schema its 2020-12 meaning once one difference is bridged (see
// schema_check.cpp): in 2020-12 a number with a zero fractional part (4.0) is
// an integer, in valijson only an integer literal is.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire::ir {

struct SchemaProblem {
  std::string path;     // "$.block.nodes[3].eps"
  std::string message;  // valijson's, sometimes with what was found
};

// The schema problems of `doc`; empty when it is valid. Only the innermost
// errors are kept (not the "failed to validate against any schema of anyOf"
// wrappers, not the alternatives of an anyOf that the value's type rules
// out), but a document that fails the schema always gets at least one.
std::vector<SchemaProblem> check_schema(const nlohmann::json& doc);

// True when `value` satisfies `fragment`, a schema whose "$ref"s point into
// the IR schema ("#/$defs/posint"). Used to check per_layer entries (R3).
bool schema_accepts(const nlohmann::json& fragment, const nlohmann::json& value);

// A copy of `v` with every float that has no fractional part (and fits in 64
// bits) turned into an integer: 2020-12's reading of "integer". The
// validator reads documents through this too, so `"heads": 4.0` is 4.
nlohmann::json integral_floats_as_integers(const nlohmann::json& v);

// "$.block.nodes[3].eps" from path parts ("block", 3 as index, ...): keys
// that are not plain identifiers are written ["key"].
std::string json_path_key(const std::string& key);

}  // namespace bonfire::ir
