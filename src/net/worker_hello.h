// What a worker's hello says of it (docs/NETWORK.md, "Worker link"), read
// into a WorkerInfo. A worker is untrusted and what it says is shown to
// every client and read by placement, so every field is checked before
// anything reads it: numbers whole and in range, lists lists of short
// names, a model id a name and never a path or a line break, limits an
// object of numbers, the device small and of known shape. The protocol
// version, token, id and bans are the coordinator's own checks.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "net/coordinator.h"

namespace bonfire::net {

// Fills what the hello says (ops, features, limits, threads, simd, kind,
// int8Rows, device, background, memory, fetch, models) into `info`;
// returns "" or why the hello is refused ("malformed hello: ..."). Throws
// nlohmann::json::exception where a required key is missing.
std::string read_hello(const nlohmann::json& hello, WorkerInfo& info);

}  // namespace bonfire::net
