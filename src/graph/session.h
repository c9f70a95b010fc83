// Sessions: named tensors that stay on a worker between calls (KV caches,
// recurrent states). A call reads them as "s:NAME", writes them in place with
// cache_write, and adds or replaces them with "retain".
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/tensor.h"

namespace bonfire {

struct Session {
  std::map<std::string, Tensor> tensors;
  int64_t bytes() const;
  // The tensor `name` as a run reads it; throws SessionNotFound when the
  // session has none, or when it is held on a device (below) and the run
  // needs its data (`node`: the reader, for the error).
  Tensor* find(const std::string& name, const std::string& node, bool need_data);
};

// A tensor whose data is held outside this process's memory (a GPU buffer
// of the browser worker's, kernels/gpu_step.h): it has its shape and dtype
// (so plans and memory accounting see it) and no data; its owner releases
// the device buffer when the last reference goes.
inline bool on_device(const Tensor& t) { return t.data == nullptr && t.numel() > 0; }

// All sessions of one worker. Calls on one session are serialised by the
// caller (a session lives on one worker and runs one call at a time).
class SessionStore {
 public:
  // The session, created empty when `create` and it does not exist; else null.
  std::shared_ptr<Session> get(const std::string& id, bool create);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace bonfire
