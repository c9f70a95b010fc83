#include "kernels/case_dir.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"
#include "kernels/package.h"

namespace bonfire::kernels {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& m) { throw Error(ErrorCode::BadGraph, m); }

template <class T>
void store(std::vector<uint8_t>& bytes, size_t i, double v) {
  const T x = static_cast<T>(v);
  std::memcpy(bytes.data() + i * sizeof(T), &x, sizeof(T));
}

}  // namespace

Buffer read_tensor(const json& spec, const std::string& dir, const std::string& what) {
  if (!spec.is_object()) bad(what + ": must be an object with file (or data), dtype and shape");
  Buffer b;
  if (!spec.contains("dtype") || !spec["dtype"].is_string()) bad(what + ": needs a dtype");
  b.dtype = spec["dtype"];
  const size_t es = dtype_size(b.dtype);
  if (es == 0) bad(what + ": \"" + b.dtype + "\" is not a dtype");
  if (!spec.contains("shape") || !spec["shape"].is_array()) bad(what + ": needs a shape (a list of sizes)");
  for (const auto& d : spec["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) bad(what + ": shape " + spec["shape"].dump() + " is not sizes");
    b.shape.push_back(d.get<int64_t>());
  }
  double n = 1;
  for (int64_t d : b.shape) n *= (double)d;
  if (n * es > 64.0 * (1LL << 30)) bad(what + ": shape " + spec["shape"].dump() + " is too large");
  const size_t want = (size_t)b.numel() * es;
  if (spec.contains("file")) {
    if (!spec["file"].is_string()) bad(what + ": file must be a string");
    const std::string path = (fs::path(dir) / spec["file"].get<std::string>()).string();
    std::error_code ec;
    if (fs::is_directory(path, ec)) bad(what + ": " + path + " is a directory");  // it would "open" with size -1
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) bad(what + ": " + path + " cannot be read");
    const size_t size = (size_t)f.tellg();
    if (size != want)
      bad(what + ": " + path + " has " + std::to_string(size) + " bytes, " + b.dtype + " " + spec["shape"].dump() +
          " needs " + std::to_string(want));
    b.bytes.resize(size);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(b.bytes.data()), (std::streamsize)size);
    if (!f) bad(what + ": " + path + " cannot be read");
  } else if (spec.contains("data")) {
    const json& d = spec["data"];
    if (!d.is_array() || (int64_t)d.size() != b.numel())
      bad(what + ": data must be a flat list of " + std::to_string(b.numel()) + " numbers");
    b.bytes.resize(want);
    for (size_t i = 0; i < d.size(); ++i) {
      if (!d[i].is_number()) bad(what + ": data[" + std::to_string(i) + "] is not a number");
      const double v = d[i].get<double>();
      if (b.dtype == "float32") store<float>(b.bytes, i, v);
      else if (b.dtype == "float64") store<double>(b.bytes, i, v);
      else if (b.dtype == "uint8") store<uint8_t>(b.bytes, i, v);
      else if (b.dtype == "int8") store<int8_t>(b.bytes, i, v);
      else if (b.dtype == "uint32") store<uint32_t>(b.bytes, i, v);
      else if (b.dtype == "int32") store<int32_t>(b.bytes, i, v);
      else if (b.dtype == "int64") store<int64_t>(b.bytes, i, v);
      else bad(what + ": inline data is not supported for " + b.dtype + " (use a file)");
    }
  } else {
    bad(what + ": needs a file or data");
  }
  return b;
}

CaseDir load_case(const std::string& dir) {
  CaseDir c;
  c.dir = dir;
  const std::string path = (fs::path(dir) / "case.json").string();
  // Case files hold inline tensors: a larger bound than a config's.
  const json j = parse_json_file(path, JsonLimits{64, size_t(1) << 30});
  if (!j.is_object()) bad(path + ": must be a JSON object");
  if (j.contains("op")) {
    if (!j["op"].is_string()) bad(path + ": op must be a string");
    c.op = j["op"];
  }
  if (j.contains("attributes")) {
    if (!j["attributes"].is_object()) bad(path + ": attributes must be an object");
    c.attrs = j["attributes"];
  }
  if (!j.contains("inputs") || !j["inputs"].is_object()) bad(path + ": inputs must be an object of tensors by role");
  for (const auto& [role, spec] : j["inputs"].items()) c.inputs[role] = read_tensor(spec, dir, role);
  if (j.contains("expected")) {
    const json& e = j["expected"];
    if (!e.is_object()) bad(path + ": expected must be an object");
    for (const auto& [k, v] : e.items()) {
      if (k == "error") {
        if (!v.is_string()) bad(path + ": expected.error must be the name the error must contain");
        c.expected_error = v.get<std::string>();
      } else if (k == "atol" || k == "rtol") {
        if (!v.is_number()) bad(path + ": expected." + k + " must be a number");
        (k == "atol" ? c.atol : c.rtol) = v.get<double>();
      } else {
        c.expected_outputs[k] = read_tensor(v, dir, "expected." + k);
      }
    }
  }
  return c;
}

void write_buffer_file(const std::string& path, const Buffer& b) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) bad(tmp + ": cannot be written");
    f.write(reinterpret_cast<const char*>(b.bytes.data()), (std::streamsize)b.bytes.size());
    f.flush();
    if (!f) {
      f.close();
      std::remove(tmp.c_str());
      bad(tmp + ": cannot be written (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    bad(path + ": cannot be written: " + ec.message());
  }
}

Comparison compare(const Buffer& got, const Buffer& want, const std::string& what, double atol, double rtol) {
  if (got.dtype != "float32" || want.dtype != "float32")
    bad(what + ": only float32 outputs are compared (got " + got.dtype + ", expected " + want.dtype + ")");
  if (got.numel() != want.numel())
    bad(what + ": " + std::to_string(got.numel()) + " values, the expected output has " +
        std::to_string(want.numel()));
  Comparison c;
  c.numel = got.numel();
  const float* a = got.as<float>();
  const float* b = want.as<float>();
  for (int64_t i = 0; i < c.numel; ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!same) {
        ++c.nan_mismatches;
        ++c.over_tolerance;
      }
      continue;
    }
    const double d = std::fabs(x - y);
    c.max_abs = std::max(c.max_abs, d);
    c.max_rel = std::max(c.max_rel, d / std::max(std::fabs(y), 1e-6));
    if (atol >= 0 && d > atol + rtol * std::fabs(y)) ++c.over_tolerance;
  }
  return c;
}

}  // namespace bonfire::kernels
