// What a session of a model keeps between steps (KV caches, rings of
// sliding windows, latent caches, recurrent states), per kind of layer, read
// from the graph its allocating prefill lowers to: the same tensors a worker
// will hold, so placement, /api/v3/models and `bonfire generate` agree with
// what is allocated.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/weights.h"

namespace bonfire::ir {

struct KvLayerKind {
  std::string kind;             // "attention" (a full cache), "window" (a ring), "latent" (MLA), "recurrent"
  int64_t layers = 0;           // layers of this kind
  int64_t bytes_per_token = 0;  // per layer, for each position of the context (full and latent caches)
  int64_t fixed_bytes = 0;      // per layer, whatever the context (rings, recurrent states)
};

struct KvMemory {
  int64_t ctx = 0;
  int64_t bytes = 0;  // everything, at ctx
  std::vector<KvLayerKind> kinds;
  nlohmann::json to_json() const;
  std::string summary() const;  // "KV cache at ctx 32768: 20.0 MiB (2 attention layers: 512 B/token; ...)"
};

// For a session of `ctx` positions (the document's ctx when 0): lowers the
// allocating prefill and reads it.
KvMemory kv_memory(const nlohmann::json& doc, int64_t ctx, const WeightStore* weights = nullptr);
// The same from a prefill already lowered for `ctx` (allocate, one token).
KvMemory kv_memory_of(const nlohmann::json& doc, const nlohmann::json& prefill, int64_t ctx);

}  // namespace bonfire::ir
