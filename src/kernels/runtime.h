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
#include <memory>
#include <mutex>
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
  bool reused_plan = false;  // PlanCache: the call's plan was made by an earlier call
  Selection selection;
};

// Recycled intermediate storage (PlanCache keeps one): byte vectors whose
// pages stay mapped between calls, since under some hypervisors a fresh
// page's first touch costs more than the pass that writes it.
class BufferPool {
 public:
  explicit BufferPool(size_t max_bytes) : max_bytes_(max_bytes) {}
  std::vector<uint8_t> take(size_t bytes);  // zero-filled, `bytes` long
  void give(std::vector<uint8_t> v);        // dropped when the pool is full

 private:
  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> free_;
  size_t held_ = 0, max_bytes_;
};

// One variant of one checked call, planned: the pass functions, every pass
// call's dispatch and repeat index, the intermediates' shapes, all evaluated
// once here, so that running the plan evaluates no expression but the
// values a pass asks for (PassArgs::num), each once per pass call. A plan
// may run on several threads at once.
class CallPlan {
 public:
  CallPlan(const Package& package, Bound bound, const Device& device, int variant);
  CallPlan(const CallPlan&) = delete;
  CallPlan& operator=(const CallPlan&) = delete;

  // `buffers` holds the inputs by role; the outputs are added by role (an
  // output already there with the call's dtype and shape, or viewing as many
  // bytes, is written in place). The intermediates come from `pool` (null:
  // allocated) and are gone from `buffers` on return.
  RunReport run(std::map<std::string, Buffer>& buffers, BufferPool* pool = nullptr);

 private:
  struct Call {
    const Pass* pass;
    PassFn fn;
    int64_t repeat_index;
    std::map<std::string, int64_t> repeat;
    std::array<int64_t, 3> dispatch;
    std::map<std::string, double> values;  // PassArgs::num's, as asked
  };
  struct Storage {
    std::string id, dtype;
    std::vector<int64_t> shape;
    size_t bytes;
  };
  double num(size_t call, const std::string& name);

  const Package& package_;
  const Bound bound_;
  const Device& device_;
  const Variant& variant_;
  Scope scope_;  // reads bound_: declared after it
  std::vector<Call> calls_;
  std::vector<Storage> outputs_, intermediates_;
  std::mutex mutex_;  // scope_, parsed_ and the calls' values
  std::map<std::string, Expr> parsed_;
};

// `buffers` holds the inputs by role; the outputs are added by role. The
// intermediates are freed before returning.
RunReport run_variant(const Package& package, const Bound& bound, const Device& device, int variant,
                      std::map<std::string, Buffer>& buffers);

// check_problem + select_variant + run_variant. No applicable variant is
// Error(UnsupportedFeature) with each variant's first failure.
RunReport run_op(const Package& package, const nlohmann::json& attrs, std::map<std::string, Buffer>& buffers,
                 const Device& device);

// run_op for a caller that makes the same calls again and again (a model's
// QMoE layers, every decode step): the check, the choice and the plan are
// kept by the call's signature (attributes, input shapes and dtypes), the
// most recently used `capacity` of them, and the intermediates' storage is
// recycled. The package and device must outlive the cache. Thread-safe.
class PlanCache {
 public:
  PlanCache(const Package& package, const Device& device, size_t capacity = 32,
            size_t pool_bytes = size_t(512) << 20);
  RunReport run(const nlohmann::json& attrs, std::map<std::string, Buffer>& buffers);

 private:
  struct Entry {
    std::shared_ptr<CallPlan> plan;
    Selection selection;
    uint64_t used = 0;
  };
  const Package& package_;
  const Device& device_;
  size_t capacity_;
  BufferPool pool_;
  std::mutex mutex_;
  std::map<std::string, Entry> plans_;
  uint64_t clock_ = 0;
};

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
