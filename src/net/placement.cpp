#include "net/placement.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace bonfire::net {

std::vector<double> placement_speeds(const std::vector<SpeedEvidence>& workers) {
  std::vector<double> out;
  double slowest = 0;
  for (const auto& w : workers) {
    const double s = w.measured > 0 ? w.measured : w.announced > 0 ? kAnnouncedShare * w.announced : 0;
    out.push_back(s);
    if (s > 0 && (slowest == 0 || s < slowest)) slowest = s;
  }
  for (double& s : out) {
    if (s <= 0) s = slowest > 0 ? slowest : 1;
    s = std::pow(kSpeedStep, std::round(std::log(s) / std::log(kSpeedStep)));
  }
  return out;
}

namespace {

std::string size_text(int64_t bytes) {
  if (bytes < (int64_t(1) << 20)) return std::to_string(bytes) + " bytes";
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

// Each slot's share of `total` by speed, none above its capacity: the share
// of a slot that would exceed it is fixed at the capacity and the rest is
// shared again among the others.
std::vector<double> shares(int64_t total, const std::vector<StageSlot>& slots) {
  const size_t n = slots.size();
  std::vector<double> t(n, 0);
  std::vector<bool> fixed(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    double left = (double)total, speed = 0;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) left -= t[i];
      else speed += slots[i].speed;
    }
    if (speed <= 0) break;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      t[i] = left * slots[i].speed / speed;
      if (slots[i].capacity >= 0 && t[i] > (double)slots[i].capacity) {
        t[i] = (double)slots[i].capacity;
        fixed[i] = changed = true;
      }
    }
  }
  return t;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> cut_layers(const std::vector<int64_t>& layer_bytes, int64_t tail_bytes,
                                                    const std::vector<StageSlot>& slots_in) {
  const int64_t L = (int64_t)layer_bytes.size();
  if (L == 0 || slots_in.empty()) return {{0, L}};
  const std::vector<StageSlot> slots(slots_in.begin(), slots_in.begin() + std::min<int64_t>(L, slots_in.size()));
  const int64_t n = (int64_t)slots.size();
  std::vector<int64_t> prefix(L + 1, 0);
  for (int64_t l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + layer_bytes[l];
  const int64_t total = prefix[L] + tail_bytes;
  const std::vector<double> target = shares(total, slots);
  // What the slots after i can hold (-1: no limit).
  std::vector<int64_t> room_after(n, 0);
  for (int64_t i = n - 2; i >= 0; --i) {
    const int64_t next = slots[i + 1].capacity, after = room_after[i + 1];
    room_after[i] = next < 0 || after < 0 ? -1 : next + after;
  }
  auto too_large = [&](int64_t stage, const std::string& why) {
    return Error(ErrorCode::TooLarge, "the model's " + std::to_string(L) + " layers (" + size_text(total) +
                                          ") cannot be cut into " + std::to_string(n) +
                                          " stages that fit the workers' memory: stage " + std::to_string(stage + 1) +
                                          " " + why);
  };

  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t first = 0;
  double aim = 0;  // cumulative: rounding one cut does not shift the later ones
  for (int64_t i = 0; i + 1 < n; ++i) {
    aim += target[i];
    int64_t best = -1;
    double best_distance = 0;
    for (int64_t end = first + 1; end <= L - (n - 1 - i); ++end) {
      if (slots[i].capacity >= 0 && prefix[end] - prefix[first] > slots[i].capacity) break;
      if (room_after[i] >= 0 && prefix[L] - prefix[end] + tail_bytes > room_after[i]) continue;
      const double distance = std::fabs((double)prefix[end] - aim);
      if (best < 0 || distance < best_distance) best = end, best_distance = distance;
    }
    if (best < 0 && slots[i].capacity >= 0 && layer_bytes[first] > slots[i].capacity)
      throw too_large(i, "would start with layer " + std::to_string(first) + ", which alone needs " +
                             size_text(layer_bytes[first]) + " and its worker holds " + size_text(slots[i].capacity));
    if (best < 0)
      throw too_large(i, "cannot hold enough of the layers from " + std::to_string(first) +
                             " on for the rest to fit the later stages' workers (" + size_text(room_after[i]) + ")");
    out.push_back({first, best});
    first = best;
  }
  const int64_t last = prefix[L] - prefix[first] + tail_bytes;
  if (slots[n - 1].capacity >= 0 && last > slots[n - 1].capacity)
    throw too_large(n - 1, "needs " + size_text(last) + " and its worker holds " + size_text(slots[n - 1].capacity));
  out.push_back({first, L});
  return out;
}

}  // namespace bonfire::net
