#include "net/worker_hello.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace bonfire::net {

using json = nlohmann::json;

namespace {

// A hello's "device", kept small and of known shape: a worker is untrusted,
// and this is shown to every client. An old worker without one runs on
// its CPU.
json device_of(const json& hello, const std::string& simd) {
  json out = {{"type", "cpu"}, {"adapter", simd}};
  const json d = hello.value("device", json());
  if (!d.is_object()) return out;
  if (d.value("type", json()) == "webgpu") out["type"] = "webgpu";
  // Only a guess at its speed until its steps are timed (net/placement.h).
  if (d.contains("readGBs") && d["readGBs"].is_number() && d["readGBs"].get<double>() > 0)
    out["readGBs"] = std::min(d["readGBs"].get<double>(), 10000.0);
  if (d.contains("adapter") && d["adapter"].is_string()) out["adapter"] = bounded_text(d["adapter"].get<std::string>(), 64);
  if (d.contains("webgpu") && d["webgpu"].is_object() && d["webgpu"].dump().size() <= 4096) out["webgpu"] = d["webgpu"];
  if (out["type"] == "webgpu" && d.contains("gpuOps") && d["gpuOps"].is_array() && d["gpuOps"].size() <= 64) {
    json ops = json::array();
    for (const auto& o : d["gpuOps"])
      if (o.is_string() && o.get<std::string>().size() <= 32) ops.push_back(o);
    out["gpuOps"] = ops;
  }
  return out;
}

}  // namespace

std::string read_hello(const json& hello, WorkerInfo& info) {
  auto whole = [&](const char* key, int64_t hi) -> std::optional<int64_t> {
    const json v = hello.value(key, json(0));
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= double(hi)) ||
        v.get<double>() != std::floor(v.get<double>()))
      return std::nullopt;
    return static_cast<int64_t>(v.get<double>());
  };
  auto names = [&](const char* key, std::set<std::string>& out) {
    const json& list = hello.at(key);
    if (!list.is_array() || list.size() > 4096) return false;
    for (const auto& n : list) {
      if (!n.is_string() || n.get<std::string>().size() > 128) return false;
      out.insert(n.get<std::string>());
    }
    return true;
  };
  const auto threads = whole("threads", 1 << 16), memory = whole("memory", int64_t(1) << 50);
  if (!threads || !memory)
    return "malformed hello: threads and memory must be whole numbers in range (0 to 65536 threads, 0 to 1 PiB)";
  if (!names("ops", info.ops) || !names("features", info.features))
    return "malformed hello: ops and features must be lists of names";
  info.limits = json::object();
  const json limits = hello.value("limits", json::object());
  if (!limits.is_object() || limits.size() > 32) return "malformed hello: limits must be an object of numbers";
  for (const auto& [k, v] : limits.items())
    if (v.is_number() && k.size() <= 64) info.limits[k] = v;  // read as numbers, or not at all
  info.threads = *threads;
  if (hello.contains("simd") && hello["simd"].is_string())
    info.simd = bounded_text(hello["simd"].get<std::string>(), 16);
  info.kind = hello.value("kind", json()) == "browser" ? "browser" : "native";
  if (const json r = hello.value("int8Rows", json()); r == "none" || r == "few" || r == "any") info.int8_rows = r;
  info.device = device_of(hello, info.simd);
  info.background = hello.value("background", false);
  info.memory = *memory;
  info.fetch = hello.value("fetch", false);
  const json models = hello.value("models", json::array());
  if (!models.is_array() || models.size() > 256) return "malformed hello: models must be a list (at most 256)";
  // A model id is a folder's or file's name (spaces and any script
  // allowed), never a path or a line break.
  auto model_name = [](const std::string& s) {
    return !s.empty() && s.size() <= 200 && s != "." && s != ".." &&
           std::none_of(s.begin(), s.end(), [](char c) { return (c >= 0 && c < 32) || c == 127 || c == '/' || c == '\\'; });
  };
  for (const auto& mm : models) {
    const json id = mm.at("id"), hash = mm.at("hash");
    if (!id.is_string() || !model_name(id.get<std::string>()) || !hash.is_string() ||
        hash.get<std::string>().size() > 128)
      return "malformed hello: a model's id must be a name (no slashes or control characters) and its hash a string";
    info.models[id.get<std::string>()] = hash.get<std::string>();
  }
  return "";
}

}  // namespace bonfire::net
