#include "spec/manifest.h"

namespace bonfire::spec {

extern const std::string_view kOpsManifest;

std::string_view ops_manifest_text() { return kOpsManifest; }

const nlohmann::json& ops_manifest() {
  static const nlohmann::json j = nlohmann::json::parse(kOpsManifest);
  return j;
}

}  // namespace bonfire::spec

namespace bonfire::spec {

extern const std::string_view kIrSchema;

std::string_view ir_schema_text() { return kIrSchema; }

extern const std::string_view kQmoePackage;
std::string_view qmoe_package_text() { return kQmoePackage; }

const nlohmann::json& ir_schema() {
  static const nlohmann::json j = nlohmann::json::parse(kIrSchema);
  return j;
}

}  // namespace bonfire::spec
