// The parts of model_hash.h that need no hashing library, so the browser
// worker (WebAssembly, no OpenSSL: the page hashes with crypto.subtle) has them.
#include <algorithm>

#include "core/error.h"
#include "core/units.h"
#include "net/model_hash.h"

namespace bonfire::net {

bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == ".." || s.find("..") != std::string::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 32 && c < 127 && c != '/' && c != '\\'; });
}

nlohmann::json ModelFingerprint::to_json() const {
  nlohmann::json files_json = nlohmann::json::array();
  for (const auto& f : files) files_json.push_back({{"name", f.name}, {"sha256", f.sha256}, {"bytes", f.bytes}});
  return {{"id", id}, {"hash", hash}, {"files", files_json}};
}

ModelFetch parse_model_fetch(const nlohmann::json& h, int64_t max_bytes, int64_t lent) {
  ModelFetch f;
  f.model = h.value("model", "");
  f.hash = h.value("hash", "");
  if (!safe_name(f.model) || !safe_name(f.hash)) throw Error(ErrorCode::BadGraph, "load_model: bad model id or hash");
  if (!h.contains("files") || !h["files"].is_array()) throw Error(ErrorCode::BadGraph, "load_model: no files");
  for (const auto& j : h["files"]) {
    ModelFile file;
    file.name = j.at("name");
    file.sha256 = j.at("sha256");
    file.bytes = j.at("bytes");
    if (!safe_name(file.name) || !safe_name(file.sha256)) throw Error(ErrorCode::BadGraph, "load_model: bad file name");
    if (file.bytes < 0) throw Error(ErrorCode::BadGraph, "load_model: negative file size");
    f.bytes += file.bytes;
    f.files.push_back(file);
  }
  if (f.bytes > max_bytes)
    throw Error(ErrorCode::TooLarge, "model " + f.model + " is " + mib_text(f.bytes) + ", more than the " + mib_text(max_bytes) +
                                         " this worker accepts (it lends " + mib_text(lent) + " of memory)");
  return f;
}

}  // namespace bonfire::net
