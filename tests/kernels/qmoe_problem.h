// Shared by the kernel package tests: QMoE calls at model-like sizes, and
// the package and device files.
#pragma once
#include <string>

#include "kernels/check.h"
#include "kernels/device.h"
#include "kernels/package.h"

namespace bonfire::kernels::testing {

inline std::string source_path(const std::string& rel) { return std::string(BONFIRE_SOURCE_DIR) + "/" + rel; }

inline const Package& qmoe_package() {
  static const Package p = load_package(source_path("spec/kernels/qmoe.json"));
  return p;
}

inline Device test_device(const std::string& name) {
  if (name == "cpu") return load_device(source_path("devices/cpu.json"));
  return load_device(source_path("tests/kernels/devices/" + name + ".json"));
}

struct MoeSize {
  int64_t hidden, inter, experts, k;
};
// Qwen1.5-MoE-A2.7B: hidden 2048, moe_intermediate_size 1408, 60 experts, top-4.
constexpr MoeSize kQwenMoe{2048, 1408, 60, 4};
// OLMoE-1B-7B: hidden 2048, intermediate 1024, 64 experts, top-8.
constexpr MoeSize kOlmoe{2048, 1024, 64, 8};

struct QmoeOptions {
  int bits = 4;
  int block = 0;  // 0: column-wise scales
  bool swiglu = true;
  bool rank3 = false;
};

// The shapes and attributes of a QMoE call of `tokens` tokens; the output's
// shape is left to the package.
inline Problem qmoe_problem(const MoeSize& m, int64_t tokens, const QmoeOptions& o = {}) {
  Problem p;
  const int64_t fusion = o.swiglu ? 2 : 1, pack = o.bits == 4 ? 2 : 1;
  p.shapes["input"] = o.rank3 ? std::vector<int64_t>{1, tokens, m.hidden} : std::vector<int64_t>{tokens, m.hidden};
  p.shapes["router_probs"] = {tokens, m.experts};
  p.shapes["fc1_experts_weights"] = {m.experts, fusion * m.inter, m.hidden / pack};
  p.shapes["fc2_experts_weights"] = {m.experts, m.hidden, m.inter / pack};
  if (o.block) {
    p.shapes["fc1_scales"] = {m.experts, fusion * m.inter, m.hidden / o.block};
    p.shapes["fc2_scales"] = {m.experts, m.hidden, m.inter / o.block};
    p.attrs["block_size"] = o.block;
  } else {
    p.shapes["fc1_scales"] = {m.experts, fusion * m.inter};
    p.shapes["fc2_scales"] = {m.experts, m.hidden};
  }
  p.attrs["k"] = m.k;
  p.attrs["expert_weight_bits"] = o.bits;
  p.attrs["activation_type"] = o.swiglu ? "swiglu" : "relu";
  p.attrs["swiglu_fusion"] = o.swiglu ? 1 : 0;
  return p;
}

}  // namespace bonfire::kernels::testing
