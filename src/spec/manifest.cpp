#include "spec/manifest.h"

namespace bonfire::spec {

extern const std::string_view kOpsManifest;

std::string_view ops_manifest_text() { return kOpsManifest; }

const nlohmann::json& ops_manifest() {
  static const nlohmann::json j = nlohmann::json::parse(kOpsManifest);
  return j;
}

}  // namespace bonfire::spec
