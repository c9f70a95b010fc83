// Sizes a graph call may not exceed. Checked while parsing and during shape
// inference, before anything is allocated; over a limit is `too_large`.
// A worker applies its own limits whatever a coordinator asks.
#pragma once
#include <cstdint>

#include "core/tensor.h"  // checked_numel, which checks shapes against these

namespace bonfire {

struct Limits {
  int64_t max_nodes = 100000;               // nodes per graph
  int64_t max_tensor_elements = 1LL << 28;  // elements in any one tensor (1 GiB of f32)
  int64_t max_rank = 8;                     // axes per tensor
  int64_t max_total_bytes = 8LL << 30;      // all tensors one call creates, summed
  // The call's outputs as they travel (f32, 4 bytes an element), summed: a
  // worker sets it under its link's frame limit, the coordinator lower for
  // an answer it must encode as JSON. Checked before anything runs.
  int64_t max_output_bytes = 8LL << 30;  // refused with kOverOutputBytes in the message
  // When the call must be done: steady_clock milliseconds (0: no deadline).
  // Checked between nodes: a call over its time budget stops with `timeout`
  // at the next node (a session it wrote to may hold a partial step).
  int64_t deadline_ms = 0;
};

// The words that mark a refusal over max_output_bytes, which a coordinator
// answering in JSON can lift by asking for base64.
constexpr const char* kOverOutputBytes = "this answer may carry";

// The clock deadline_ms is on: std::chrono::steady_clock in milliseconds.
int64_t steady_now_ms();

}  // namespace bonfire
