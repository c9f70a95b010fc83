#include "core/machine_load.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace bonfire {

std::optional<MachineLoad::Sample> MachineLoad::read() const {
  std::ifstream stat(proc_ + "/stat");
  std::string line;
  Sample s;
  int cpus = 0;
  bool have_total = false;
  while (std::getline(stat, line)) {
    if (line.compare(0, 4, "cpu ") == 0) {
      std::istringstream in(line.substr(4));
      uint64_t v[8] = {};
      for (auto& x : v) in >> x;
      if (!in) return std::nullopt;
      // user nice system idle iowait irq softirq steal
      const uint64_t idle = v[3] + v[4];
      for (uint64_t x : v) s.total += x;
      s.busy = s.total - idle;
      have_total = true;
    } else if (line.compare(0, 3, "cpu") == 0) {
      ++cpus;
    }
  }
  if (!have_total || cpus == 0) return std::nullopt;
  // Per-CPU ticks: the aggregate line sums every CPU's.
  s.total /= cpus;
  std::ifstream self(proc_ + "/self/stat");
  std::string text((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces) start after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (!in) return std::nullopt;
  s.self = utime + stime;
  return s;
}

bool MachineLoad::readable() const { return read().has_value(); }

std::optional<double> MachineLoad::other_busy_cores() {
  const auto now = read();
  if (!now) return std::nullopt;
  const Sample prev = last_;
  last_ = *now;
  if (now->total <= prev.total) return std::nullopt;
  const double elapsed = static_cast<double>(now->total - prev.total);
  const double busy = static_cast<double>(now->busy - std::min(now->busy, prev.busy));
  const double self = static_cast<double>(now->self - std::min(now->self, prev.self));
  return std::max(0.0, (busy - self) / elapsed);
}

}  // namespace bonfire
