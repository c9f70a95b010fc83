#include "kernels/device.h"

#include <set>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {

// devices/cpu.json, byte for byte (kernel_package_test compares them).
const char* const kCpuDevice = R"cpu_device({
  "name": "cpu",
  "description": "A CPU worker as kernel packages see it. A workgroup is a unit of work one thread runs as a loop, a dispatch is a loop over workgroups split over the worker's threads, a storage buffer is a tensor in memory. No subgroups: SIMD lanes are inside the pass functions, not visible to the package.",
  "limits": {
    "maxComputeInvocationsPerWorkgroup": 1024,
    "maxComputeWorkgroupSizeX": 1024,
    "maxComputeWorkgroupSizeY": 1024,
    "maxComputeWorkgroupSizeZ": 64,
    "maxComputeWorkgroupStorageSize": 32768,
    "maxComputeWorkgroupsPerDimension": 2147483647,
    "maxStorageBufferBindingSize": 1073741824,
    "maxBufferSize": 1073741824,
    "maxStorageBuffersPerShaderStage": 1024,
    "maxUniformBufferBindingSize": 65536,
    "minStorageBufferOffsetAlignment": 4,
    "minUniformBufferOffsetAlignment": 4
  },
  "features": [],
  "adapterInfo": {
    "vendor": "bonfire",
    "architecture": "cpu",
    "device": "cpu",
    "description": "bonfire CPU worker (core/threads.h)"
  },
  "reasons": {
    "maxComputeInvocationsPerWorkgroup": "a workgroup's invocations are iterations of one thread's loop, so nothing in the hardware caps them; 1024, the largest value WebGPU devices commonly report, so packages written for GPUs size their workgroups as they would there",
    "maxComputeWorkgroupSizeX": "as maxComputeInvocationsPerWorkgroup",
    "maxComputeWorkgroupSizeY": "as maxComputeInvocationsPerWorkgroup",
    "maxComputeWorkgroupSizeZ": "64, WebGPU's usual Z limit; no package needs more",
    "maxComputeWorkgroupStorageSize": "workgroup memory is the running thread's scratch; 32 KiB is the L1 data cache of most x86-64 and ARM cores, so tiles sized to this limit stay in L1",
    "maxComputeWorkgroupsPerDimension": "a dispatch dimension is a 64-bit loop count on a CPU; 2^31-1 keeps every workgroup index inside the int32 the packages' index arithmetic assumes",
    "maxStorageBufferBindingSize": "1 GiB: the largest tensor the graph engine accepts (graph/limits.h, 2^28 float32 elements); larger intermediates are chunked by the package",
    "maxBufferSize": "as maxStorageBufferBindingSize",
    "maxStorageBuffersPerShaderStage": "a pass function takes any number of buffers; 1024 is simply large",
    "maxUniformBufferBindingSize": "WebGPU's usual 64 KiB; parameters are plain values on a CPU",
    "minStorageBufferOffsetAlignment": "4: a float32/uint32 element; a CPU has no binding alignment beyond the element",
    "minUniformBufferOffsetAlignment": "as minStorageBufferOffsetAlignment",
    "features": "none: no subgroups (SIMD is inside the pass functions), no subgroup matrices, no subgroup size control; shader-f16 is not claimed because the passes compute in float32",
    "adapterInfo": "no subgroupMinSize/subgroupMaxSize: without subgroups there is no subgroup size"
  }
}
)cpu_device";

[[noreturn]] void fail(const std::string& where, const std::string& path, const std::string& what) {
  throw Error(ErrorCode::BadGraph, where + ": " + path + ": " + what);
}

}  // namespace

bool Device::has_feature(const std::string& feature) const {
  for (const auto& f : view["features"])
    if (f == feature) return true;
  return false;
}

std::optional<double> Device::limit(const std::string& name) const {
  const json& l = view["limits"];
  if (!l.contains(name)) return std::nullopt;
  return l[name].get<double>();
}

Device parse_device(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "(root)", "a device is a JSON object");
  Device d;
  d.view = json::object();
  if (j.contains("name")) {
    if (!j["name"].is_string()) fail(where, "name", "must be a string");
    d.name = j["name"];
  } else {
    d.name = where;
  }
  if (!j.contains("limits") || !j["limits"].is_object()) fail(where, "limits", "must be an object of numbers");
  for (const auto& [k, v] : j["limits"].items())
    if (!v.is_number() || v.get<double>() < 0) fail(where, "limits." + k, "must be a number >= 0, got " + v.dump());
  d.view["limits"] = j["limits"];
  json features = j.value("features", json::array());
  if (!features.is_array()) fail(where, "features", "must be an array of strings");
  std::set<std::string> seen;
  for (size_t i = 0; i < features.size(); ++i) {
    if (!features[i].is_string()) fail(where, "features[" + std::to_string(i) + "]", "must be a string");
    if (!seen.insert(features[i].get<std::string>()).second)
      fail(where, "features[" + std::to_string(i) + "]", "\"" + features[i].get<std::string>() + "\" is listed twice");
  }
  d.view["features"] = features;
  json info = j.value("adapterInfo", json::object());
  if (!info.is_object()) fail(where, "adapterInfo", "must be an object");
  for (const char* k : {"subgroupMinSize", "subgroupMaxSize"})
    if (info.contains(k) && (!info[k].is_number() || info[k].get<double>() < 1))
      fail(where, std::string("adapterInfo.") + k, "must be a number >= 1");
  if (info.contains("subgroupMatrixConfigs")) {
    const json& c = info["subgroupMatrixConfigs"];
    if (!c.is_array()) fail(where, "adapterInfo.subgroupMatrixConfigs", "must be an array of objects");
    for (size_t i = 0; i < c.size(); ++i)
      if (!c[i].is_object())
        fail(where, "adapterInfo.subgroupMatrixConfigs[" + std::to_string(i) + "]", "must be an object");
  }
  d.view["adapterInfo"] = info;
  for (const auto& [k, v] : j.items())
    if (k != "name" && k != "description" && k != "limits" && k != "features" && k != "adapterInfo" &&
        k != "reasons")
      fail(where, k, "unknown key (a device has name, description, limits, features, adapterInfo, reasons)");
  return d;
}

Device load_device(const std::string& path) {
  const json j = parse_json_file(path);
  return parse_device(j, path);
}

const char* cpu_device_text() { return kCpuDevice; }

const Device& cpu_device() {
  static const Device d = parse_device(json::parse(kCpuDevice), "devices/cpu.json (built in)");
  return d;
}

}  // namespace bonfire::kernels
