// `bonfire ir validate`: an IR document against spec/ir.schema.json and the
// rules R1..R19 of docs/IR.md §12 (R19: the extensions it declares, extensions.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire {
class WeightStore;
}

namespace bonfire::ir {

struct IrProblem {
  std::string path;     // "$.block.nodes[4].sizes"
  std::string message;  // what is wrong and what was expected
  int rule;             // 1..19 (docs/IR.md §12); 0 = the schema
};

// The problems of `doc`, schema first: a document that fails the schema is
// not checked further. R18 (weights exist and fit) only with `weights`. A
// rule that cannot be decided (a width nothing fixes, a value the document
// leaves open) reports nothing.
std::vector<IrProblem> validate_ir(const nlohmann::json& doc, const WeightStore* weights = nullptr);

// "PATH: MESSAGE (rule RN)", or "PATH: schema: MESSAGE" for rule 0.
std::string format_problem(const IrProblem& p);

// Throws Error(BadGraph) "WHAT: the IR is not valid: FIRST PROBLEM (and N
// more; ...)" when validate_ir finds any: for commands that use a document
// rather than report on it.
void require_valid_ir(const nlohmann::json& doc, const WeightStore* weights, const std::string& what);

}  // namespace bonfire::ir
