// The parts of model_hash.h that need no hashing library, so the browser
// worker (WebAssembly, no OpenSSL: the page hashes with crypto.subtle) has them.
#include <algorithm>

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

}  // namespace bonfire::net
