// A progress bar for long work on the terminal (reading a model, hashing,
// downloading, evaluating). It draws on stderr only when stderr is a TTY,
// so logs and pipes stay clean; redraws are rate-limited, so calling
// advance() per item is cheap. Thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace bonfire {

class Progress {
 public:
  enum class Unit { Items, Bytes };
  // total 0: unknown (shows the count and rate only).
  Progress(std::string label, int64_t total, Unit unit = Unit::Items);
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(int64_t n = 1);
  void set(int64_t done);
  // Draws the final state and ends the line (once). Quiet when not a TTY.
  void finish();

  // False when stderr is not a terminal or BONFIRE_NO_PROGRESS is set.
  static bool enabled();

 private:
  void draw(bool final);

  const std::string label_;
  const int64_t total_;
  const Unit unit_;
  const bool on_;
  std::atomic<int64_t> done_{0};
  std::mutex draw_mutex_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool finished_ = false;
};

}  // namespace bonfire
