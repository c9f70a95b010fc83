// A device as kernel packages read it (docs/KERNELS.md, "The device file"):
// WebGPU-style limits (device.limits.maxComputeWorkgroupStorageSize, ...),
// features (device.features.has("subgroups")) and adapter info
// (device.adapterInfo.subgroupMinSize, adapterInfo.subgroupMatrixConfigs).
//
// Promises: a loaded Device has "limits" (an object of non-negative
// numbers), "features" (an array of distinct strings) and "adapterInfo" (an
// object); anything else in the file is refused naming the file and the JSON
// path. The CPU worker's own description is built in (cpu_device()), equal
// to devices/cpu.json (a test keeps them equal).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace bonfire::kernels {

struct Device {
  std::string name;
  // {"limits": {...}, "features": [...], "adapterInfo": {...}}: what
  // `device.*` in a package's expressions reads.
  nlohmann::json view;

  bool has_feature(const std::string& feature) const;
  std::optional<double> limit(const std::string& name) const;
};

// `where` names the source in errors (a file path).
Device parse_device(const nlohmann::json& j, const std::string& where);
Device load_device(const std::string& path);  // throws Error(BadGraph)
const Device& cpu_device();                   // devices/cpu.json, compiled in
const char* cpu_device_text();

}  // namespace bonfire::kernels
