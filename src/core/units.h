// Sizes as messages and summaries print them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace bonfire {

// "12.3 MiB": `bytes` in mebibytes, to `decimals` places (0 to 3).
inline std::string mib_text(int64_t bytes, int decimals = 1) {
  char s[48];
  std::snprintf(s, sizeof s, "%.*f MiB", decimals, static_cast<double>(bytes) / (1 << 20));
  return s;
}

}  // namespace bonfire
