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
  std::vector<std::string> disabled_features;  // act as a worker without these
};

// Where sessions persist between runs unless --session-dir says otherwise:
// $BONFIRE_SESSION_DIR, else ${TMPDIR:-/tmp}/bonfire-sessions-UID.
std::string default_session_dir();

int graph_run_command(const GraphRunOptions& opts);

}  // namespace bonfire
