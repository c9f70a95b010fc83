#include "graph/session.h"

#include "core/error.h"

namespace bonfire {

int64_t Session::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : tensors) n += t.nbytes();
  return n;
}

Tensor* Session::find(const std::string& name, const std::string& node, bool need_data) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw Error(ErrorCode::SessionNotFound, "the session holds no tensor \"" + name + "\"", node);
  if (need_data && on_device(it->second))
    throw Error(ErrorCode::SessionNotFound,
                "the session's tensor \"" + name + "\" is held by this worker's GPU; this call cannot run there", node);
  return &it->second;
}

std::shared_ptr<Session> SessionStore::get(const std::string& id, bool create) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second;
  if (!create) return nullptr;
  auto s = std::make_shared<Session>();
  sessions_[id] = s;
  return s;
}

bool SessionStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.erase(id) > 0;
}

size_t SessionStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace bonfire
