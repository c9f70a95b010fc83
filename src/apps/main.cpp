// bonfire: the one command-line program. Subcommands are listed in
// spec/PROTOCOL.md ("Command line"); each lives in its own function here
// until it grows enough to need a file.
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/bench_command.h"
#include "apps/compute_options.h"
#include "apps/graph_command.h"
#include "apps/ir_validate_command.h"
#include "apps/ir_commands.h"
#include "apps/model_commands.h"
#include "apps/kernel_commands.h"
#include "apps/net_commands.h"
#include "core/error.h"
#include "spec/manifest.h"

int main(int argc, char** argv) {
  CLI::App app{"bonfire: serve large language models on lent compute"};
  app.require_subcommand(1);
  bonfire::add_compute_options(app, true);

  auto* ops = app.add_subcommand("ops", "print the op manifest (protocol v3)");

  auto* graph = app.add_subcommand("graph", "graph calls");
  graph->require_subcommand(1);
  auto* run = graph->add_subcommand("run", "run a graph call locally and print the result JSON");
  bonfire::GraphRunOptions gro;
  run->add_option("file", gro.file, "the graph call (JSON; a list of calls runs them in order; - reads stdin)")->required();
  run->add_option("--bind", gro.binds, "k=v values for param expressions")->take_all();
  gro.session_dir = bonfire::default_session_dir();
  run->add_option("--session-dir", gro.session_dir,
                  "where session tensors persist between runs; \"\" keeps them in memory only")
      ->capture_default_str();
  run->add_option("--disable-feature", gro.disabled_features, "run as a worker without this feature");
  run->add_flag("--b64", gro.b64, "write output tensors as base64");
  bonfire::add_compute_options(*run, false);

  auto* ir = app.add_subcommand("ir", "model IR documents (docs/IR.md)");
  ir->require_subcommand(1);
  auto ir_command = bonfire::add_ir_commands(app, *ir);
  auto ir_validate_command = bonfire::add_ir_validate_command(*ir);

  auto model_command = bonfire::add_model_commands(app);
  auto bench_command = bonfire::add_bench_commands(app);
  auto net_command = bonfire::add_net_commands(app);
  auto kernel_command = bonfire::add_kernel_commands(app);

  // A usage error (unknown option, missing or out-of-range value) exits 2,
  // as a refused input exits 1: one status for every kind of usage error
  // instead of CLI11's 105-109.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help and --version are not errors
  }
  if (!bonfire::apply_compute_options()) return 2;

  if (*ops) {
    std::cout << bonfire::spec::ops_manifest_text();
    return 0;
  }
  if (*run) return bonfire::graph_run_command(gro);
  if (const int status = ir_command(); status >= 0) return status;
  if (const int status = ir_validate_command(); status >= 0) return status;
  if (const int status = model_command(); status >= 0) return status;
  if (const int status = bench_command(); status >= 0) return status;
  if (const int status = net_command(); status >= 0) return status;
  if (const int status = kernel_command(); status >= 0) return status;
  return 0;
}
