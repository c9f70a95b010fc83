#include "graph/profile.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

namespace bonfire {

namespace {

struct Row {
  int64_t calls = 0;
  double seconds = 0, bytes = 0;
};

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::string g_phase = "run";
std::vector<std::string> g_phase_order;
std::map<std::string, std::map<std::string, Row>> g_rows;  // phase → key → row

}  // namespace

void set_profiling(bool on) { g_on = on; }
bool profiling() { return g_on.load(std::memory_order_relaxed); }

void set_profile_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_phase = phase;
}

void profile_record(const std::string& op, const std::string& weight_label, double seconds, double weight_bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_rows.count(g_phase)) g_phase_order.push_back(g_phase);
  Row& r = g_rows[g_phase][weight_label.empty() ? op : op + " " + weight_label];
  ++r.calls;
  r.seconds += seconds;
  r.bytes += weight_bytes;
}

std::string profile_report() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::string out;
  char line[256];
  for (const auto& phase : g_phase_order) {
    const auto& rows = g_rows[phase];
    double total = 0;
    for (const auto& [k, r] : rows) total += r.seconds;
    std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    std::snprintf(line, sizeof line, "profile: %s, %.1f ms in ops\n", phase.c_str(), total * 1e3);
    out += line;
    std::snprintf(line, sizeof line, "  %-44s %8s %10s %6s %10s %8s\n", "op", "calls", "ms", "share", "ms/call", "GB/s");
    out += line;
    for (const auto& [key, r] : sorted) {
      char gbs[16] = "";
      if (r.bytes > 0 && r.seconds > 0) std::snprintf(gbs, sizeof gbs, "%.1f", r.bytes / r.seconds / 1e9);
      std::snprintf(line, sizeof line, "  %-44s %8lld %10.2f %5.1f%% %10.4f %8s\n", key.c_str(), (long long)r.calls,
                    r.seconds * 1e3, total > 0 ? 100.0 * r.seconds / total : 0.0, r.seconds * 1e3 / r.calls, gbs);
      out += line;
    }
  }
  return out;
}

void profile_reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_rows.clear();
  g_phase_order.clear();
}

}  // namespace bonfire
