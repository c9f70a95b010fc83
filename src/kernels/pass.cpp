#include "kernels/pass.h"

#include <mutex>

#include "core/error.h"

namespace bonfire::kernels {

namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PassFn>& registry() {
  static std::map<std::string, PassFn> r;
  return r;
}

}  // namespace

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void register_pass(const std::string& name, PassFn fn) {
  if (name.empty() || !fn) throw Error(ErrorCode::Internal, "register_pass needs a name and a function");
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto [it, inserted] = registry().emplace(name, fn);
  if (!inserted && it->second != fn)
    throw Error(ErrorCode::Internal, "pass \"" + name + "\" is registered twice with different functions");
}

PassFn find_pass(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, [] { register_qmoe_passes(); });
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

}  // namespace bonfire::kernels
