#include "apps/ir_validate_command.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_parse.h"
#include "ir/validate.h"
#include "model/model_files.h"

namespace bonfire {

namespace {

struct Options {
  std::string file, model;
};

int validate(const Options& o) {
  nlohmann::json doc;
  try {
    // "PATH is a directory", "PATH: cannot be read (REASON)", "PATH: malformed
    // JSON: parse error at line 3, column 7: ...", "PATH: JSON nested deeper ...".
    doc = parse_json_file(o.file);
  } catch (const Error& e) {
    std::cout << e.what() << "\n";
    return 1;
  }
  std::unique_ptr<WeightStore> weights;
  if (!o.model.empty()) {
    try {
      weights = std::make_unique<WeightStore>(ModelFiles::open(o.model)->weights());
    } catch (const std::exception& e) {
      std::cout << o.model << ": cannot open the model: " << e.what() << "\n";
      return 1;
    }
  }
  std::vector<ir::IrProblem> problems;
  try {
    problems = ir::validate_ir(doc, weights.get());
  } catch (const std::exception& e) {  // a bug, not a verdict: say so
    std::cout << o.file << ": internal error while validating: " << e.what() << "\n";
    return 1;
  }
  for (const auto& p : problems) std::cout << ir::format_problem(p) << "\n";
  if (problems.empty()) std::cerr << "valid\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace

std::function<int()> add_ir_validate_command(CLI::App& ir) {
  auto o = std::make_shared<Options>();
  auto* cmd = ir.add_subcommand("validate", "check an IR document against its schema and rules (docs/IR.md)");
  cmd->add_option("file", o->file, "the IR document (JSON)")->required();
  cmd->add_option("--model", o->model, "a model folder or GGUF file: also check the weights the document names (R18)");
  return [cmd, o]() -> int { return *cmd ? validate(*o) : -1; };
}

}  // namespace bonfire
