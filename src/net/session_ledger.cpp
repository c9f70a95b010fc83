#include "net/session_ledger.h"

namespace bonfire::net {

std::vector<SessionLedger::Shortfall> SessionLedger::try_reserve(const std::vector<Claim>& claims) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Shortfall> asked;
  for (const auto& c : claims) {
    Shortfall& a = asked[c.worker];
    a.worker = c.worker;
    a.asked += c.bytes;
    a.budget = c.budget;
  }
  std::vector<Shortfall> short_of;
  for (auto& [worker, a] : asked) {
    const auto it = reserved_.find(worker);
    a.held = it == reserved_.end() ? 0 : it->second;
    if (a.held + a.asked > a.budget) short_of.push_back(a);
  }
  if (short_of.empty())
    for (const auto& c : claims) reserved_[c.worker] += c.bytes;
  return short_of;
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
