// Real model files for tests, written on first use by
// scripts/write_test_model.py (random weights, an HF folder plus GGUF files)
// into the build tree, so no test needs a model hub or committed weights.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "golden_util.h"

namespace bonfire::testing {

// The folder holding hf/ and model-<type>.gguf for `family`; empty on failure.
inline std::filesystem::path test_model(const std::string& family, const std::string& gguf_types = "f32,q8_0") {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels";
  const fs::path dir = root / (family + "-" + gguf_types);
  if (fs::exists(dir / "hf" / "config.json")) return dir;
  fs::create_directories(root);
  // Written aside and renamed, so concurrent tests never see half a model.
  const fs::path tmp = root / (family + ".tmp." + std::to_string(::getpid()));
  const std::string cmd = "/usr/bin/python3 " + (fs::path(BONFIRE_SOURCE_DIR) / "scripts" / "write_test_model.py").string() +
                          " --family " + family + " --out " + tmp.string() + " --gguf " + gguf_types + " > /dev/null";
  if (std::system(cmd.c_str()) != 0) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // another test won the race
  return fs::exists(dir / "hf" / "config.json") ? dir : fs::path();
}

}  // namespace bonfire::testing
