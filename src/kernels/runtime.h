// Running a package's op: check the call (check.h), choose the variant
// (select.h), allocate its intermediates (shapes from their expressions,
// zero-filled), allocate the outputs (zero-filled), then call the variant's
// passes in order — a repeat block runs its passes `count` times with
// repeat.<index> = 0, 1, ... — each with its dispatch size evaluated in the
// scope of that moment (PassArgs, pass.h).
//
// Promises: every pass function the variant needs is looked up before
// anything is allocated (a missing one is Error(UnsupportedFeature) naming
// the pass, its JSON path and the variant); a dispatch size, repeat count
// or intermediate dimension that is not a whole number >= 0 is
// Error(BadGraph) naming it; an intermediate over graph/limits.h's tensor
// limit is Error(TooLarge). The input buffers must match the checked call's
// shapes and dtypes and be numel * dtype size bytes long.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/pass.h"
#include "kernels/scope.h"
#include "kernels/select.h"

namespace bonfire::kernels {

struct RunReport {
  std::string variant;
  double seconds = 0;      // allocation and passes
  int64_t pass_calls = 0;  // pass functions called (repeat blocks unrolled)
  Selection selection;
};

// `buffers` holds the inputs by role; the outputs are added by role. The
// intermediates are freed before returning.
RunReport run_variant(const Package& package, const Bound& bound, const Device& device, int variant,
                      std::map<std::string, Buffer>& buffers);

// check_problem + select_variant + run_variant. No applicable variant is
// Error(UnsupportedFeature) with each variant's first failure.
RunReport run_op(const Package& package, const nlohmann::json& attrs, std::map<std::string, Buffer>& buffers,
                 const Device& device);

// The sizes a variant's passes work with, evaluated in `scope` as the runner
// does (the GPU plan, gpu_plan.h, uses the same): each a whole number >= 0,
// else Error(BadGraph) naming the JSON path and the expression.
int64_t whole_number(double x, const std::string& what);
std::array<int64_t, 3> dispatch_size(Scope& scope, const Pass& pass);  // {threads,1,1} or {x,y,z}
int64_t repeat_count(Scope& scope, const Pass& repeat_block);
std::vector<int64_t> intermediate_shape(Scope& scope, const Intermediate& im);
// Calls `call(pass, repeat_index)` for each pass call in order, repeat blocks
// unrolled with repeat.<index> set in `scope` (repeat_index: the innermost
// block's iteration, -1 outside any).
void for_each_pass_call(Scope& scope, const std::vector<Pass>& passes,
                        const std::function<void(const Pass&, int64_t repeat_index)>& call);

// The call a set of buffers makes (shapes and dtypes by role).
Problem problem_of(const nlohmann::json& attrs, const std::map<std::string, Buffer>& buffers);

}  // namespace bonfire::kernels
