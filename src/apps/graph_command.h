// `bonfire graph run FILE`: run graph calls locally, print PROTOCOL.md's
// result JSON, or its error JSON with exit status 1.
#pragma once
#include <string>
#include <vector>

namespace bonfire {

struct GraphRunOptions {
  std::string file;
  std::vector<std::string> binds;  // "k=v"
  std::string session_dir;         // sessions persist here between runs
  bool b64 = false;
};

int graph_run_command(const GraphRunOptions& opts);

}  // namespace bonfire
