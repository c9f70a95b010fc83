// What identifies a model on the network: its files and their SHA-256. A
// worker's copy is used only when its fingerprint equals the coordinator's,
// and weights fetched over HTTP are checked file by file before use.
#pragma once
#include "core/progress.h"
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire::net {

struct ModelFile {
  std::string name;    // relative to the model folder (a GGUF: its file name)
  std::string path;    // on this machine
  std::string sha256;  // hex
  int64_t bytes = 0;
};

struct ModelFingerprint {
  std::string id;      // the name clients use: the folder's name, or the GGUF's without .gguf
  std::string hash;    // SHA-256 over the sorted "name sha256" lines
  std::vector<ModelFile> files;
  nlohmann::json to_json() const;
};

// Hashes a model folder's regular files (not subfolders) or one GGUF file.
// Results are cached per (path, size, mtime) for the life of the process.
ModelFingerprint fingerprint_model(const std::string& path);

// progress, when given, advances by the bytes read.
std::string sha256_file(const std::string& path, Progress* progress = nullptr);
std::string sha256_hex(const void* data, size_t n);
// Model ids and file names that may travel in URLs and paths: no '/', no
// "..", printable ASCII.
bool safe_name(const std::string& s);

// A load_model request (the worker link), checked: names safe, sizes known.
struct ModelFetch {
  std::string model, hash;
  std::vector<ModelFile> files;  // name, sha256, bytes (path unset)
  int64_t bytes = 0;             // all files together
};
// Throws Error(BadGraph) naming what is malformed, or Error(TooLarge) when
// the files add up to more than `max_bytes` (a worker lending `lent`
// bytes), before a byte of them is fetched.
ModelFetch parse_model_fetch(const nlohmann::json& request, int64_t max_bytes, int64_t lent);

}  // namespace bonfire::net
