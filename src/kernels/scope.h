// The values a package's expressions read for one op call on one device:
// `derive` names (computed lazily, once, on first use), constants.X (the
// chosen variant's, then the package's), tunables.X, attrs.X, shapes.ROLE,
// ranks.ROLE, tensorDtypes.ROLE, device.limits.X, device.features,
// device.adapterInfo.X and repeat.<index> inside a repeat block.
//
// Promises: every evaluation error is Error(BadGraph) naming the expression
// and the character position, prefixed by the derive or constant being
// computed ("derive.hiddenChunkTokens: expression ...: unknown name
// 'device.limits.maxBufferSize' at character 40"); a derive or constant that
// needs itself is "derive cycle: a -> b -> a". A Scope may be used from
// several threads (calls are serialised).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/expr.h"
#include "kernels/device.h"
#include "kernels/package.h"

namespace bonfire::kernels {

// An op call after checking (check.h): attributes with defaults applied,
// every tensor's shape and dtype, outputs included.
struct Bound {
  nlohmann::json attrs = nlohmann::json::object();
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> dtypes;
};

class Scope {
 public:
  Scope(const Package& package, const Bound& bound, const Device& device);

  // The variant whose constants are visible (null: the package's only).
  void set_variant(const Variant* variant);
  // The repeat indexes in scope (repeat.chunk); empty outside repeat blocks.
  void set_repeat(const std::map<std::string, int64_t>& indexes);

  nlohmann::json eval(const Expr& e);
  double number(const Expr& e);  // a finite number (true/false are 1/0)
  bool holds(const Expr& e);     // a condition: booleans, numbers (non-zero) or null (false)
  // A derive name or "constants.X", computed once per variant/repeat context.
  nlohmann::json value(const std::string& name);

  const Package& package() const { return package_; }
  const Bound& bound() const { return bound_; }
  const Device& device() const { return device_; }
  const Variant* variant() const { return variant_; }

 private:
  std::optional<nlohmann::json> lookup(const std::string& name);
  nlohmann::json compute(const std::string& label, const std::string& cycle_name, const Expr& e);
  template <class F>
  auto guarded(F&& f);

  const Package& package_;
  const Bound& bound_;
  const Device& device_;
  const Variant* variant_ = nullptr;
  nlohmann::json attrs_, shapes_, ranks_, dtypes_, repeat_ = nlohmann::json::object();
  std::recursive_mutex mutex_;
  std::map<std::string, nlohmann::json> memo_;
  std::vector<std::string> stack_;  // what is being computed, for cycle detection
  bool labelled_ = false;           // the error in flight already names its derive
};

// Why a condition is false: the derive names followed from it through their
// top-level `and` terms (each the first false term), the innermost false
// term's text, and the names that term reads (as reads_of).
struct Failure {
  std::vector<std::string> chain;
  std::string leaf;
  std::vector<std::string> reads;
};
Failure explain_false(Scope& scope, const Expr& condition);

// The names an expression reads, followed through derive names and
// constants: "attrs.block_size", "shapes.input", "tensorDtypes.fc1_scales",
// "device.limits.maxBufferSize", ... Each once, depth first in the order
// they are written, so what the expression reads first comes first.
std::vector<std::string> reads_of(const Package& package, const Variant* variant, const Expr& e);

}  // namespace bonfire::kernels
