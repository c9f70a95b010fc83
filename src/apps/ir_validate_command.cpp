#include "apps/ir_validate_command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/validate.h"
#include "model/model_files.h"

namespace bonfire {

namespace {

struct Options {
  std::string file, model;
};

int validate(const Options& o) {
  if (std::filesystem::is_directory(o.file)) {
    std::cout << o.file << ": cannot read the file: it is a directory\n";
    return 1;
  }
  std::ifstream in(o.file, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    std::cout << o.file << ": cannot read the file: " << std::strerror(errno) << "\n";
    return 1;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 7: ..." without the tag.
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    std::cout << o.file << ": not JSON: " << what << " (byte " << e.byte << ")\n";
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
