// libFuzzer target: kernel packages (kernels/package.h, docs/KERNELS.md).
// The input is a package's JSON text: parsed with the bounded JSON parser and
// loaded by parse_package; a package that loads is then checked
// (kernels/check.h) and its variant selected (kernels/select.h) on the
// built-in cpu device for two op calls: one with every input at the rank the
// package declares (2 when it declares none) and every axis 4, and one with
// QMoE's roles at small model-like sizes (roles the package lacks are left
// out, other inputs as in the first). Every expression the package holds is
// also evaluated in the bound scope. A refusal is bonfire::Error; anything
// else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_parse.h"
#include "kernels/check.h"
#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/scope.h"
#include "kernels/select.h"

namespace bk = bonfire::kernels;

namespace {

bk::Problem generic_problem(const bk::Package& p) {
  bk::Problem pr;
  for (const auto& t : p.inputs) pr.shapes[t.role] = std::vector<int64_t>(t.rank.value_or(2) > 8 ? 8 : t.rank.value_or(2), 4);
  return pr;
}

// QMoE (spec/kernels/qmoe.json) at hidden 64, intermediate 32, 4 experts,
// top-2, 4-bit column-wise scales, SwiGLU; `tokens` tokens.
bk::Problem qmoe_problem(const bk::Package& p, int64_t tokens) {
  bk::Problem pr = generic_problem(p);
  const int64_t H = 64, I = 32, E = 4;
  const std::pair<const char*, std::vector<int64_t>> shapes[] = {
      {"input", {tokens, H}},          {"router_probs", {tokens, E}},
      {"fc1_experts_weights", {E, 2 * I, H / 2}}, {"fc2_experts_weights", {E, H, I / 2}},
      {"fc1_scales", {E, 2 * I}},      {"fc2_scales", {E, H}},
  };
  for (const auto& [role, shape] : shapes)
    if (pr.shapes.count(role)) pr.shapes[role] = shape;
  const std::pair<const char*, nlohmann::json> attrs[] = {
      {"k", 2}, {"expert_weight_bits", 4}, {"activation_type", "swiglu"}, {"swiglu_fusion", 1}};
  for (const auto& [name, value] : attrs)
    if (p.attribute_names.count(name)) pr.attrs[name] = value;
  return pr;
}

void run(const bk::Package& p, const bk::Problem& pr) {
  const bk::Device& cpu = bk::cpu_device();
  bk::Bound b;
  try {
    b = bk::check_problem(p, pr, cpu);
  } catch (const bonfire::Error&) {
    return;
  }
  try {
    (void)bk::select_variant(p, b, cpu).explain();
  } catch (const bonfire::Error&) {
  }
  bk::Scope scope(p, b, cpu);
  for (const auto& site : p.expressions()) {
    if (!site.repeat.empty()) continue;  // repeat.<index> exists only inside its block
    try {
      scope.set_variant(site.variant >= 0 ? &p.variants[site.variant] : nullptr);
      (void)scope.eval(*site.expr);
    } catch (const bonfire::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bk::Package p;
  try {
    const nlohmann::json j = bonfire::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "package");
    p = bk::parse_package(j, "package.json");
  } catch (const bonfire::Error&) {
    return 0;
  }
  (void)bk::contract_conditions(p);
  run(p, generic_problem(p));
  run(p, qmoe_problem(p, 1));
  run(p, qmoe_problem(p, 8));
  return 0;
}
