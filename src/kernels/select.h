// Choosing a package's variant for a checked op call on a device, and
// explaining the choice.
//
// A variant applies when the device meets its `requires` (every feature
// present; every limit at least the number asked — at most, for limits
// named min*; every subgroupMatrixConfig offered by
// device.adapterInfo.subgroupMatrixConfigs) and then every `when` entry
// holds, in order. The chosen variant is the applicable one with the highest
// priority; on a tie, the first in the package.
//
// Promises: explain() reports every variant with the first thing that
// failed: {"feature": F}, {"limit": L, "need": N, "have": H},
// {"subgroupMatrixConfig": {...}}, or {"condition": the when entry's text,
// "value": its value, "because": [derive names followed through their
// first false `and` term..., the innermost false term's text]}, or
// {"condition", "error"} when the entry cannot be evaluated. A variant
// without "failed" applies.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/scope.h"

namespace bonfire::kernels {

struct VariantReport {
  std::string id;
  double priority = 0;
  bool selected = false;
  nlohmann::json failed;  // null when the variant applies
};

struct Selection {
  int chosen = -1;  // index into package.variants, -1 when none applies
  std::vector<VariantReport> variants;
  // {"variant": id or null, "variants": [{"id", "priority", "selected", "failed"?}...]}
  nlohmann::json explain() const;
};

Selection select_variant(const Package& package, const Bound& bound, const Device& device);

// Whether the device meets a variant's `requires`: null, or the failure
// object (as in explain()).
nlohmann::json unmet_requirement(const Variant& variant, const Device& device);

}  // namespace bonfire::kernels
