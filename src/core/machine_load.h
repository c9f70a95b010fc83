// How busy the machine is with programs other than this one, from Linux's
// /proc/stat (all CPU time) minus /proc/self/stat (this process's).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace bonfire {

class MachineLoad {
 public:
  // `proc`: where procfs is mounted (tests point it elsewhere).
  explicit MachineLoad(std::string proc = "/proc") : proc_(std::move(proc)) {}

  // False when /proc/stat or /proc/self/stat cannot be read or parsed.
  bool readable() const;
  // Cores' worth of CPU time other processes used since the previous call
  // (the first call measures since the process started). nullopt when the
  // files cannot be read or no time has passed.
  std::optional<double> other_busy_cores();

 private:
  struct Sample {
    uint64_t busy = 0, total = 0, self = 0;  // clock ticks
  };
  std::optional<Sample> read() const;
  std::string proc_;
  Sample last_{};
};

}  // namespace bonfire
