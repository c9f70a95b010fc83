#include "ops/attention_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/threads.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr int64_t kKeyTile = 64;

// Online-softmax state of one query row of one head.
struct RowState {
  float max;   // running max of the scores seen
  double sum;  // running sum of exp(score - max)
  bool nan;    // a NaN score poisons the row, as it would the softmax
  float* acc;  // running sum of exp(score - max) * v, Dv wide
};

}  // namespace

void attend(const AttnConfig& c, const float* q, int64_t T, int64_t keys, const AttendBias& bias, float* o,
            const VisibleRuns& visible) {
  const int64_t H = c.heads, D = c.head_dim, KV = c.kv_heads, Dv = c.v_head_dim;
  const int64_t group = H / KV;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // A job is one query row of a block of `hb` query heads sharing one kv
  // head, so each K/V row is fetched once for the whole block: decode
  // against a long cache is bound by that traffic. Blocks shrink (down to
  // one head) when there would be too few jobs to occupy the threads.
  int64_t hb = group;
  while (hb % 2 == 0 && (H / hb) * T < 2 * num_threads()) hb /= 2;
  const int64_t blocks = H / hb;
  const int64_t grain = std::max<int64_t>(1, 16384 / (keys * hb * (D + Dv) + 1));
  parallel_for(blocks * T, grain, [&](int64_t j0, int64_t j1) {
    std::vector<float> acc_buf(hb * Dv);
    std::vector<RowState> st(hb);
    std::vector<float> score(hb * kKeyTile);  // [head][key in tile]
    std::vector<KeyRun> runs;
    for (int64_t j = j0; j < j1; ++j) {
      // Rows innermost: neighbouring jobs read the same kv head.
      const int64_t h0 = (j / T) * hb, t = j % T, g = h0 / group;
      const int64_t pos = c.pos_offset + t;
      for (int64_t b = 0; b < hb; ++b) st[b] = {kNegInf, 0.0, false, &acc_buf[b * Dv]};
      std::fill(acc_buf.begin(), acc_buf.end(), 0.0f);

      runs.clear();
      visible(pos, runs);
      for (const KeyRun& run : runs) {
        const float* kh = run.k + g * D;
        const float* vh = run.v + g * Dv;
        for (int64_t i0 = 0; i0 < run.rows; i0 += kKeyTile) {
          const int64_t n = std::min(kKeyTile, run.rows - i0);
          for (int64_t b = 0; b < hb; ++b) {
            const int64_t h = h0 + b;
            const float* qr = q + t * H * D + h * D;
            const float* brow = bias.data ? bias.data + ((bias.per_head ? h * T : 0) + t) * bias.cols + run.bias_col : nullptr;
            const float slope = c.slopes.empty() ? 0.0f : c.slopes[h];
            float* sc = &score[b * kKeyTile];
            RowState& r = st[b];
            float tile_max = kNegInf;
            simd::dot_rows(qr, kh + i0 * KV * D, KV * D, n, D, sc);
            if (c.softcap == 0 && slope == 0.0f && !brow) {  // the common case, vectorized
              tile_max = simd::scale_max(sc, n, c.scale, &r.nan);
            } else {
              for (int64_t i = 0; i < n; ++i) {
                float x = sc[i] * c.scale;
                if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
                // ALiBi relative to the query: BLOOM's slope*s shifted per row.
                if (slope != 0.0f) x += slope * (float)(run.first_pos + i0 + i - pos);
                if (brow) x += brow[i0 + i];
                r.nan |= std::isnan(x);
                sc[i] = x;
                tile_max = std::max(tile_max, x);
              }
            }
            if (tile_max > r.max) {
              // The terms so far were relative to a smaller max: shrink them.
              const float corr = std::exp(r.max - tile_max);
              r.sum *= corr;
              simd::scale_f32(corr, r.acc, Dv);
              r.max = tile_max;
            }
            // Turn scores into weights now; -inf (every key biased away)
            // gives 0 and is skipped below.
            if (r.max == kNegInf)
              std::fill(sc, sc + n, 0.0f);
            else
              r.sum += simd::exp_shifted(sc, n, r.max);
          }
          simd::weighted_rows(score.data(), kKeyTile, hb, vh + i0 * KV * Dv, KV * Dv, n, Dv, acc_buf.data(), Dv);
        }
      }
      for (int64_t b = 0; b < hb; ++b) {
        const RowState& r = st[b];
        float* orow = o + t * H * Dv + (h0 + b) * Dv;
        if (r.nan) {
          std::fill(orow, orow + Dv, std::numeric_limits<float>::quiet_NaN());
        } else if (r.max == kNegInf) {
          std::fill(orow, orow + Dv, 0.0f);  // no key visible: zeros, by decision
        } else {
          const float inv = (float)(1.0 / r.sum);
          for (int64_t d = 0; d < Dv; ++d) orow[d] = r.acc[d] * inv;
        }
      }
    }
  });
}

}  // namespace bonfire
