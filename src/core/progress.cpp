#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace bonfire {

namespace {

std::string amount(double v, Progress::Unit unit) {
  char buf[32];
  if (unit == Progress::Unit::Items) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else if (v >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
  }
  return buf;
}

}  // namespace

bool Progress::enabled() {
  static const bool on = isatty(STDERR_FILENO) && std::getenv("BONFIRE_NO_PROGRESS") == nullptr;
  return on;
}

Progress::Progress(std::string label, int64_t total, Unit unit)
    : label_(std::move(label)), total_(total), unit_(unit), on_(enabled()) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::advance(int64_t n) {
  done_ += n;
  if (on_) draw(false);
}

void Progress::set(int64_t done) {
  done_ = done;
  if (on_) draw(false);
}

void Progress::finish() {
  if (on_) draw(true);
}

void Progress::draw(bool final) {
  std::lock_guard<std::mutex> lock(draw_mutex_);
  if (finished_) return;
  const auto now = std::chrono::steady_clock::now();
  // ~10 redraws a second keeps a fast loop fast and the bar alive.
  if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const int64_t done = done_.load();
  std::string line = "\r" + label_ + " ";
  if (total_ > 0) {
    const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    const int width = 30, fill = static_cast<int>(f * width);
    line += "[" + std::string(fill, '#') + std::string(width - fill, '.') + "] ";
    char pct[16];
    std::snprintf(pct, sizeof pct, "%3.0f%% ", f * 100);
    line += pct + amount(static_cast<double>(done), unit_) + "/" + amount(static_cast<double>(total_), unit_);
  } else {
    line += amount(static_cast<double>(done), unit_);
  }
  if (secs > 0.05) {
    line += "  " + amount(static_cast<double>(done) / secs, unit_) + "/s";
  }
  line += "\x1b[K";  // clear what a longer previous line left behind
  if (final) {
    line += "\n";
    finished_ = true;
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace bonfire
