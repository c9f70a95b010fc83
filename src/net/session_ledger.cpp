#include "net/session_ledger.h"

namespace bonfire::net {

bool SessionLedger::try_reserve(const std::vector<Claim>& claims) {
  std::lock_guard<std::mutex> lock(mu_);
  // Claims on one worker (two stages of a pipeline) count together.
  std::map<std::string, int64_t> asked;
  for (const auto& c : claims) asked[c.worker] += c.bytes;
  for (const auto& c : claims) {
    const auto it = reserved_.find(c.worker);
    const int64_t held = it == reserved_.end() ? 0 : it->second;
    if (held + asked[c.worker] > c.budget) return false;
  }
  for (const auto& c : claims) reserved_[c.worker] += c.bytes;
  return true;
}

void SessionLedger::release(const std::vector<Claim>& claims) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : claims) {
      auto it = reserved_.find(c.worker);
      if (it == reserved_.end()) continue;
      it->second -= c.bytes;
      if (it->second <= 0) reserved_.erase(it);
    }
    ++releases_;
  }
  released_.notify_all();
}

bool SessionLedger::wait_for_release(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t seen = releases_;
  ++waiting_;
  const bool woke = released_.wait_until(lock, until, [&] { return releases_ != seen; });
  --waiting_;
  return woke;
}

int SessionLedger::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

int64_t SessionLedger::reserved(const std::string& worker) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = reserved_.find(worker);
  return it == reserved_.end() ? 0 : it->second;
}

}  // namespace bonfire::net
