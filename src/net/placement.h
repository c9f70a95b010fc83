// Where a generation's stages run: the workers' speeds, and the cut of a
// model's layers into stages that fit the workers and keep their step times
// even. Pure functions of numbers, so placement can be tested without a
// network; served_generation.cpp gathers the numbers and applies the plan.
//
// Speed is what a decode step streams per unit of time: its stage's weights
// (ServedModel::stage_bytes) over the call's round trip as the coordinator
// times it, on calls of one row (a batched call's time grows with its rows,
// and placement counts the worker's load on its own). A worker cannot fake that upward. Before
// a worker has answered decode steps, its own announcement stands in (hello
// "device.readGBs", the read bandwidth it measured), at kAnnouncedShare of
// its value since a step also computes and crosses the link; a worker with
// neither (a browser tab's GPU) counts as the slowest one known.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace bonfire::net {

// What is known of one worker's speed, in GB/s (0: nothing).
struct SpeedEvidence {
  double measured = 0;   // decode steps' bytes / round trip, once measured
  double announced = 0;  // the worker's own read-bandwidth figure
};
constexpr double kAnnouncedShare = 0.5;
// Speeds are rounded to a power of kSpeedStep: workers of about the same
// speed then rank by their load and join order, and the cuts between stages
// do not move with each step's noise (a generation placed like the ones
// already decoding shares their batched calls).
constexpr double kSpeedStep = 1.5;
// The speed placement uses for each worker: measured, else a share of the
// announced, else the slowest of the others (1 when nothing is known),
// rounded.
std::vector<double> placement_speeds(const std::vector<SpeedEvidence>& workers);

// One stage's worker as the cut sees it.
struct StageSlot {
  double speed = 1;       // > 0; only ratios matter
  int64_t capacity = -1;  // bytes it may hold; -1: no limit
};

// Cuts layers [0, L) into one contiguous range per slot, in slot order, each
// with at least one layer (so at most L slots are used: the result may be
// shorter than `slots`). Each range's bytes (its layers', plus `tail_bytes`
// on the last range: the embedding and head) aim at the slot's share of the
// total by speed, within its capacity. Throws Error(TooLarge) when the
// layers cannot be cut to fit the capacities.
std::vector<std::pair<int64_t, int64_t>> cut_layers(const std::vector<int64_t>& layer_bytes, int64_t tail_bytes,
                                                    const std::vector<StageSlot>& slots);

}  // namespace bonfire::net
