// libFuzzer target: model IR documents (docs/IR.md). The input is parsed
// with the project's bounded JSON parser (core/json_parse.h) and validated
// by ir/validate.h: the schema (spec/ir.schema.json), then rules R1..R18
// (R18 needs weights and is not reached). Problems are reported, not thrown;
// a refusal is bonfire::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json_parse.h"
#include "ir/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json doc = bonfire::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "ir");
    for (const auto& p : bonfire::ir::validate_ir(doc)) (void)bonfire::ir::format_problem(p);
  } catch (const bonfire::Error&) {
  }
  return 0;
}
