// The vendored specs, compiled into the binary (see cmake/embed_spec.cmake).
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace bonfire::spec {

std::string_view ops_manifest_text();       // spec/ops-v3.json, byte for byte
const nlohmann::json& ops_manifest();       // the same, parsed
std::string_view ir_schema_text();          // spec/ir.schema.json, byte for byte
const nlohmann::json& ir_schema();          // the same, parsed
std::string_view qmoe_package_text();       // spec/kernels/qmoe.json, byte for byte

}  // namespace bonfire::spec
