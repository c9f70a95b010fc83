// Whole-file reads for small files (JSON configs, graph calls, templates).
// Large files are memory-mapped instead (model/weights.h).
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace bonfire {

// The file's bytes; throws Error(BadGraph) "PATH: cannot be read".
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::BadGraph, path + ": cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace bonfire
