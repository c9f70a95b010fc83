// Checking an op call against its package before anything runs: the
// attributes (known names, the defaults' types, attributeConstraints'
// values), the tensors (every input present, ranks, typeConstraints with one
// dtype per type name), the outputs' shapes (from the package's shape
// expressions unless given), and the package's contract: the
// device-independent conditions every variant's `when` list requires
// (found by following `when` entries through derive names and their
// top-level `and` terms; for QMoE, quantContract and what it contains).
//
// Promises: a refusal is Error(BadGraph) whose message starts with the
// attribute or tensor it is about ("use_sparse_mixer: 1 is not allowed
// (allowed: 0)", "router_probs: rank 3, the package needs rank 2"); a false
// contract names every attribute and tensor its failing term reads, the
// attributes the caller set first ("block_size = 24, ...: refused by
// QMoE's contract: quantContract -> quantShapeOk -> quantBlockSizeOk:
// \"colWiseScales or (...)\" is false").
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/scope.h"

namespace bonfire::kernels {

// An op call as given: attributes without defaults, tensors' shapes (an
// output's may be omitted) and dtypes (an omitted one is its type
// constraint's first allowed dtype).
struct Problem {
  nlohmann::json attrs = nlohmann::json::object();
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> dtypes;
};

Bound check_problem(const Package& package, const Problem& problem, const Device& device);

// The contract's conditions (derive names), as check_problem evaluates them.
std::vector<std::string> contract_conditions(const Package& package);

}  // namespace bonfire::kernels
