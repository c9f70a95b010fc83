// Where a run's time goes, per op kind: switched on by `bonfire generate
// --profile`, filled by the executor around every node, printed at the end.
// Products over weights (matmul, linear, the MoE ops) are kept per weight
// shape and dtype with the bytes of weight they read, so their GB/s can be
// set beside the machine's read bandwidth. Off, it costs one relaxed load per
// node.
#pragma once
#include <cstdint>
#include <string>

namespace bonfire {

void set_profiling(bool on);
bool profiling();

// Which part of the work follows ("prefill", "decode"); rows are kept apart
// by phase. Set by the generation loop.
void set_profile_phase(const std::string& phase);

// One node's run: its op, the label products carry (weight shape and dtype,
// empty for other ops), seconds, and bytes of packed weight it read.
void profile_record(const std::string& op, const std::string& weight_label, double seconds, double weight_bytes);

// A table per phase: op (or op and weight), calls, total ms, share of the
// phase, ms per call and, for products, GB/s. Empty if nothing was recorded.
std::string profile_report();
void profile_reset();

}  // namespace bonfire
