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
};

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
