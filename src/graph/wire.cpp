#include "graph/wire.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "graph/limits.h"

namespace bonfire {

using json = nlohmann::json;

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

float value_from_json(const json& v, const std::string& what) {
  if (v.is_number()) return v.get<float>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (auto& c : s) c = (char)std::tolower((unsigned char)c);
    if (s == "nan") return std::numeric_limits<float>::quiet_NaN();
    if (s == "infinity" || s == "inf") return std::numeric_limits<float>::infinity();
    if (s == "-infinity" || s == "-inf") return -std::numeric_limits<float>::infinity();
  }
  bad_graph(what + " holds " + v.dump() + ", which is not a number");
}

json value_to_json(float f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", f);  // 9 digits read back as the same f32
  return std::strtod(buf, nullptr);
}

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

Tensor tensor_from_json(const json& j, const std::string& what, const Limits& limits) {
  if (!j.is_object() || !j.contains("shape") || !j["shape"].is_array())
    bad_graph(what + " must be an object with a \"shape\" array and \"data\" or \"b64\"");
  Shape shape;
  for (const auto& d : j["shape"]) {
    if (!d.is_number() || d.get<double>() != std::floor(d.get<double>()) || d.get<double>() < 0)
      bad_graph(what + " has shape " + j["shape"].dump() + "; dimensions must be integers >= 0");
    if (d.get<double>() > (double)limits.max_tensor_elements)
      too_large(what + " has a dimension over the limit of " + std::to_string(limits.max_tensor_elements));
    shape.push_back(d.get<int64_t>());
  }
  if ((int64_t)shape.size() > limits.max_rank)
    too_large(what + " has " + std::to_string(shape.size()) + " axes; the limit is " + std::to_string(limits.max_rank));
  const int64_t n = checked_numel(shape.data(), shape.size(), limits.max_tensor_elements);
  if (n < 0)
    too_large(what + " " + shape_str(shape) + " is over the limit of " + std::to_string(limits.max_tensor_elements) +
              " elements");
  if (j.contains("b64")) {
    if (!j["b64"].is_string()) bad_graph(what + ": \"b64\" must be a string");
    std::string bytes;
    if (!base64_decode(j["b64"].get<std::string>(), &bytes)) bad_graph(what + ": \"b64\" is not valid base64");
    if ((int64_t)bytes.size() != n * 4)
      bad_graph(what + ": \"b64\" holds " + std::to_string(bytes.size()) + " bytes; shape " + shape_str(shape) +
                " needs " + std::to_string(n * 4));
    Tensor t = Tensor::empty(shape);
    std::memcpy(t.data, bytes.data(), bytes.size());
    return t;
  }
  if (!j.contains("data") || !j["data"].is_array()) bad_graph(what + " needs \"data\" (an array) or \"b64\"");
  const json& data = j["data"];
  if ((int64_t)data.size() != n)
    bad_graph(what + " has " + std::to_string(data.size()) + " values; shape " + shape_str(shape) + " needs " +
              std::to_string(n));
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = value_from_json(data[i], what);
  return t;
}

json tensor_to_json(const Tensor& t, bool b64) {
  const Tensor f = t.packed() ? to_f32(t) : t;
  json out = {{"shape", f.shape}};
  if (b64) {
    out["b64"] = base64_encode(f.data, f.numel() * sizeof(float));
    return out;
  }
  json data = json::array();
  const float* p = f.f32();
  for (int64_t i = 0, n = f.numel(); i < n; ++i) data.push_back(value_to_json(p[i]));
  out["data"] = std::move(data);
  return out;
}

std::string base64_encode(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kB64[v & 63] : '=';
  }
  return out;
}

bool base64_decode(const std::string& in, std::string* out) {
  int8_t rev[256];
  std::memset(rev, -1, sizeof rev);
  for (int i = 0; i < 64; ++i) rev[(uint8_t)kB64[i]] = (int8_t)i;
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : in) {
    if (c == '=') {
      ++pad;
      continue;
    }
    if (std::isspace((unsigned char)c)) continue;
    if (pad || rev[(uint8_t)c] < 0) return false;  // data after padding, or a foreign character
    acc = acc << 6 | (uint32_t)rev[(uint8_t)c];
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back((char)((acc >> bits) & 0xff));
    }
  }
  return pad <= 2;
}

}  // namespace bonfire

namespace bonfire {
nlohmann::json error_to_json(const Error& e) {
  // Messages and node ids may quote what a client sent: bounded.
  nlohmann::json j = {{"error", bounded_text(e.what(), 2048)}, {"code", error_code_name(e.code)}};
  if (!e.node.empty()) j["node"] = bounded_text(e.node, 256);
  if (!e.feature.empty()) j["feature"] = bounded_text(e.feature, 256);
  return j;
}
}  // namespace bonfire
