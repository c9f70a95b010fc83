#include "ir/kv_memory.h"

#include <algorithm>
#include <map>
#include <regex>

#include "core/units.h"
#include "ir/ir_doc.h"
#include "ir/lower.h"

namespace bonfire::ir {

namespace {

// The op of the node that uses `slot` on `layer` ("" when none applies).
std::string user_op(const json& doc, const std::string& slot, int64_t layer) {
  for (const auto& n : doc["block"]["nodes"])
    if (n.value("state", "") == slot && applies(n, layer)) return n["op"].get<std::string>();
  return "";
}

}  // namespace

KvMemory kv_memory(const json& doc, int64_t ctx, const WeightStore* weights) {
  LowerOptions o;
  o.mode = "prefill";
  o.tokens = 1;
  // A session never holds more positions than the model's context.
  const int64_t model_ctx = doc["model"]["ctx"].get<int64_t>();
  o.ctx = ctx > 0 ? std::min(ctx, model_ctx) : model_ctx;
  return kv_memory_of(doc, lower(doc, o, weights), o.ctx);
}

KvMemory kv_memory_of(const json& doc, const json& call, int64_t ctx) {
  std::map<std::string, std::string> slot_kind;
  if (doc["block"].contains("state"))
    for (const auto& s : doc["block"]["state"]) slot_kind[s["name"].get<std::string>()] = s["kind"].get<std::string>();

  // Per layer: its kind, and the bytes that grow with the context or not.
  struct Layer {
    std::string kind;
    int64_t per_token = 0, fixed = 0;
  };
  std::map<int64_t, Layer> layers;
  KvMemory m;
  m.ctx = ctx;
  static const std::regex alloc(R"(L(\d+)\.([^.]+)\.[^.]+\.alloc)");  // "L3.kv.k.alloc" (Lowerer::state)
  for (const auto& n : call["nodes"]) {
    std::smatch g;
    const std::string id = n["id"].get<std::string>();
    if (n["op"] != "zeros" || !std::regex_match(id, g, alloc)) continue;
    const int64_t layer = std::stoll(g[1].str());
    const std::string slot = g[2].str();
    const auto shape = n["params"]["shape"].get<std::vector<int64_t>>();
    int64_t bytes = 4;  // f32
    for (int64_t d : shape) bytes *= d;
    m.bytes += bytes;
    Layer& l = layers[layer];
    if (slot_kind[slot] != "kv") {
      l.kind = l.kind.empty() ? "recurrent" : l.kind;
      l.fixed += bytes;
    } else if (shape[0] < ctx) {
      l.kind = "window";  // a ring of the window's rows
      l.fixed += bytes;
    } else {
      l.kind = user_op(doc, slot, layer) == "mla_attention" ? "latent" : "attention";
      l.per_token += bytes / shape[0];
    }
  }
  for (const auto& [index, l] : layers) {
    KvLayerKind* k = nullptr;
    for (auto& e : m.kinds)
      if (e.kind == l.kind && e.bytes_per_token == l.per_token && e.fixed_bytes == l.fixed) k = &e;
    if (!k) {
      m.kinds.push_back({l.kind, 0, l.per_token, l.fixed});
      k = &m.kinds.back();
    }
    ++k->layers;
  }
  return m;
}

json KvMemory::to_json() const {
  json kinds_json = json::array();
  for (const auto& k : kinds)
    kinds_json.push_back({{"kind", k.kind}, {"layers", k.layers}, {"bytesPerToken", k.bytes_per_token}, {"fixedBytes", k.fixed_bytes}});
  return {{"ctx", ctx}, {"bytes", bytes}, {"layerKinds", kinds_json}};
}

std::string KvMemory::summary() const {
  std::string s = "KV cache at ctx " + std::to_string(ctx) + ": " + mib_text(bytes, 2);
  std::string parts;
  for (const auto& k : kinds) {
    std::string p = std::to_string(k.layers) + " " + k.kind + (k.layers == 1 ? " layer" : " layers") + ": ";
    if (k.bytes_per_token) p += std::to_string(k.bytes_per_token) + " B/token";
    if (k.bytes_per_token && k.fixed_bytes) p += " + ";
    if (k.fixed_bytes || !k.bytes_per_token) p += mib_text(k.fixed_bytes, 2) + " fixed";
    parts += (parts.empty() ? "" : "; ") + p + " each";
  }
  return s + (parts.empty() ? "" : " (" + parts + ")");
}

}  // namespace bonfire::ir
