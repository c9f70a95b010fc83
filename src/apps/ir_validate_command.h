// `bonfire ir validate FILE [--model PATH]`: checks an IR document against
// spec/ir.schema.json and the rules of docs/IR.md §12 (R18, the weights, only
// with --model). Valid: exit 0, "valid" on stderr. Otherwise exit 1 and one
// line per problem on stdout, "PATH: MESSAGE (rule RN)" or
// "PATH: schema: MESSAGE"; a file that cannot be read or is not JSON, or a
// model that cannot be opened, is one line naming it.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds `validate` to the `ir` subcommand; returns what to run once parsing
// is done (-1 when validate was not chosen).
std::function<int()> add_ir_validate_command(CLI::App& ir);

}  // namespace bonfire
