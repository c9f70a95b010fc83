// Real model files for tests, written on first use by
// scripts/write_test_model.py (random weights, an HF folder plus GGUF files)
// into the build tree, so no test needs a model hub or committed weights.
#pragma once
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "golden_util.h"

namespace bonfire::testing {

namespace detail {

// "--sliding-window 8 --layers 3" -> "sw8-l3": a short, readable folder-name
// suffix for extra writer arguments. Unknown options, or values that are not
// plain [A-Za-z0-9._], add an FNV-1a hash of the whole list so different
// argument lists never share a folder.
inline std::string writer_args_suffix(const std::vector<std::string>& args) {
  static const std::map<std::string, std::string> kShort = {
      {"--sliding-window", "sw"}, {"--layers", "l"},      {"--hidden", "h"},         {"--heads", "nh"},
      {"--kv-heads", "kv"},       {"--head-dim", "hd"},   {"--intermediate", "ff"},  {"--experts", "e"},
      {"--experts-used", "eu"},   {"--moe-intermediate", "mff"}, {"--vocab", "v"},   {"--vocab-multiple", "vm"},
      {"--seed", "s"},            {"--std", "std"},       {"--dtype", "dt"},           {"--pre", "pre"},
      {"--ctx", "ctx"}};
  auto plain = [](const std::string& v) {
    if (v.empty()) return false;
    for (char c : v)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_')) return false;
    return true;
  };
  std::string out;
  bool hash = false;
  for (size_t i = 0; i < args.size(); ++i) {
    auto it = kShort.find(args[i]);
    std::string part;
    if (it != kShort.end() && i + 1 < args.size() && plain(args[i + 1])) {
      part = it->second + args[i + 1];
      ++i;
    } else {
      hash = true;
      continue;
    }
    out += (out.empty() ? "" : "-") + part;
  }
  if (hash) {
    uint32_t h = 2166136261u;
    for (const auto& a : args) {
      for (unsigned char c : a) h = (h ^ c) * 16777619u;
      h = (h ^ 0u) * 16777619u;  // separator
    }
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", h);
    out += (out.empty() ? "" : "-") + std::string(buf);
  }
  return out;
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace detail

// The folder holding hf/ and model-<type>.gguf for `family` written with the
// writer's default arguments plus `extra_args` (e.g. {"--sliding-window", "8"}
// -> build/testmodels/mistral-f32,q8_0-sw8); empty on failure.
inline std::filesystem::path test_model(const std::string& family, const std::string& gguf_types,
                                        const std::vector<std::string>& extra_args) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels";
  std::string name = family + "-" + gguf_types;
  if (!extra_args.empty()) name += "-" + detail::writer_args_suffix(extra_args);
  const fs::path dir = root / name;
  if (fs::exists(dir / "hf" / "config.json")) return dir;
  fs::create_directories(root);
  // Written aside and renamed, so concurrent tests never see half a model.
  const fs::path tmp = root / (name + ".tmp." + std::to_string(::getpid()));
  std::string cmd = "/usr/bin/python3 " + (fs::path(BONFIRE_SOURCE_DIR) / "scripts" / "write_test_model.py").string() +
                    " --family " + family + " --out " + detail::shell_quote(tmp.string()) + " --gguf " + gguf_types;
  for (const auto& a : extra_args) cmd += " " + detail::shell_quote(a);
  cmd += " > /dev/null";
  if (std::system(cmd.c_str()) != 0) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // another test won the race
  return fs::exists(dir / "hf" / "config.json") ? dir : fs::path();
}

// The folder holding hf/ and model-<type>.gguf for `family` with the writer's
// default arguments; empty on failure.
inline std::filesystem::path test_model(const std::string& family, const std::string& gguf_types = "f32,q8_0") {
  return test_model(family, gguf_types, {});
}

}  // namespace bonfire::testing
