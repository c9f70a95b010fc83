// Placement's arithmetic (src/net/placement.h): which speed each worker gets,
// and how a model's layers are cut into stages by speed within memory.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "net/placement.h"

namespace bonfire::net {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

int64_t bytes_of(const std::vector<int64_t>& layers, std::pair<int64_t, int64_t> r, int64_t tail, bool last) {
  return std::accumulate(layers.begin() + r.first, layers.begin() + r.second, int64_t(0)) + (last ? tail : 0);
}

TEST(PlacementSpeeds, MeasuredThenAnnouncedThenTheSlowestKnown) {
  const double step2 = kSpeedStep * kSpeedStep, step4 = step2 * step2;  // speeds on the rounding grid
  const auto s = placement_speeds({{step4, 50.0}, {0, step2 / kAnnouncedShare}, {0, 0}, {step2, 0}});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0], step4);  // measured beats announced
  EXPECT_DOUBLE_EQ(s[1], step2);  // a share of what it announced
  EXPECT_DOUBLE_EQ(s[2], step2);  // nothing known: the slowest of the others
  EXPECT_DOUBLE_EQ(s[3], step2);
  EXPECT_EQ(placement_speeds({{0, 0}, {0, 0}}), (std::vector<double>{1, 1}));  // all unknown: equal
}

TEST(PlacementSpeeds, AboutTheSameSpeedIsTheSame) {
  // Two workers 8% apart are equals to placement; a third 3x faster is not.
  const auto s = placement_speeds({{10.0, 0}, {10.8, 0}, {30.0, 0}});
  EXPECT_DOUBLE_EQ(s[0], s[1]);
  EXPECT_GT(s[2], 2 * s[0]);
  EXPECT_LT(std::fabs(std::log(s[0] / 10.0)), std::log(kSpeedStep));  // within a step of the measure
}

TEST(CutLayers, EqualSpeedsCutEqualBytes) {
  const std::vector<int64_t> layers(8, 100);
  EXPECT_EQ(cut_layers(layers, 0, {{1, -1}, {1, -1}}), (Ranges{{0, 4}, {4, 8}}));
  EXPECT_EQ(cut_layers(layers, 0, {{1, -1}, {1, -1}, {1, -1}, {1, -1}}), (Ranges{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  EXPECT_EQ(cut_layers(layers, 0, {{1, -1}}), (Ranges{{0, 8}}));
}

TEST(CutLayers, FasterWorkersTakeMoreLayers) {
  const std::vector<int64_t> layers(12, 100);
  // 3:1 -> 9 and 3 layers.
  EXPECT_EQ(cut_layers(layers, 0, {{3, -1}, {1, -1}}), (Ranges{{0, 9}, {9, 12}}));
  EXPECT_EQ(cut_layers(layers, 0, {{1, -1}, {3, -1}}), (Ranges{{0, 3}, {3, 12}}));
  // The head's bytes count on the last stage: 1200 + 400 at 1:1 is 800 each.
  EXPECT_EQ(cut_layers(layers, 400, {{1, -1}, {1, -1}}), (Ranges{{0, 8}, {8, 12}}));
  // However slow, a stage keeps one layer.
  EXPECT_EQ(cut_layers(layers, 0, {{1000, -1}, {1, -1}}), (Ranges{{0, 11}, {11, 12}}));
}

TEST(CutLayers, CapacitiesBoundTheShares) {
  const std::vector<int64_t> layers(10, 100);
  // The fast worker holds only 300 bytes: it gets 3 layers, the rest go on.
  const Ranges r = cut_layers(layers, 0, {{10, 300}, {1, -1}});
  EXPECT_EQ(r, (Ranges{{0, 3}, {3, 10}}));
  // Uneven layers: no stage exceeds its capacity, and every layer is placed once.
  const std::vector<int64_t> uneven = {50, 400, 50, 50, 300, 50, 50, 50};
  const std::vector<StageSlot> slots = {{5, 500}, {1, 600}, {2, 500}};
  const Ranges u = cut_layers(uneven, 0, slots);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u.front().first, 0);
  EXPECT_EQ(u.back().second, (int64_t)uneven.size());
  for (size_t i = 0; i < u.size(); ++i) {
    EXPECT_LT(u[i].first, u[i].second);
    if (i) {
      EXPECT_EQ(u[i].first, u[i - 1].second);
    }
    EXPECT_LE(bytes_of(uneven, u[i], 0, i + 1 == u.size()), slots[i].capacity) << "stage " << i;
  }
}

TEST(CutLayers, MoreSlotsThanLayersUsesOneLayerEach) {
  EXPECT_EQ(cut_layers({5, 5}, 0, {{1, -1}, {1, -1}, {1, -1}}), (Ranges{{0, 1}, {1, 2}}));
}

// The refusal cut_layers gives, or "" when it placed the layers.
std::string refusal(const std::vector<int64_t>& layers, int64_t tail, const std::vector<StageSlot>& slots) {
  try {
    cut_layers(layers, tail, slots);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::TooLarge) << e.what();
    return e.what();
  }
}

TEST(CutLayers, RefusesWhatCannotFitNamingTheStage) {
  // One layer alone is larger than the first worker's memory.
  EXPECT_NE(refusal({500, 100}, 0, {{1, 400}, {1, 1000}})
                .find("stage 1 would start with layer 0, which alone needs 500 bytes"),
            std::string::npos);
  // The head cannot fit on the last worker, however the layers are cut.
  EXPECT_NE(refusal({100, 100}, 900, {{1, 1000}, {1, 500}})
                .find("stage 1 cannot hold enough of the layers from 0 on for the rest to fit the later stages' "
                      "workers (500 bytes)"),
            std::string::npos);
  // One worker for the whole model.
  EXPECT_NE(refusal({100, 100}, 900, {{1, 500}}).find("stage 1 needs 1100 bytes and its worker holds 500 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace bonfire::net
