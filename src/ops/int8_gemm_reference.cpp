// reference_int8_gemm (ops/int8_gemm.h): the tiled kernel's arithmetic in
// plain C++, one output at a time, on any CPU. The kernel's tests hold it to
// this bit for bit, and this to the integer definition within rounding.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "ops/int8_gemm.h"

namespace bonfire::simd {

void reference_int8_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const ActBlock* x,
                         int64_t M, float* out, int64_t ldo, const float* bias) {
  const int64_t nb = K / 32;
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t* row = w + n * stride;
    for (int64_t m = 0; m < M; ++m) {
      // second: q4_k's sub-block mins, q6_k's odd sub-blocks, summed apart
      float acc = 0, second = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const ActBlock& xb = x[m * nb + b];
        int32_t dot = 0;
        float dw;
        if (weight == DType::Q8_0) {
          const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
          dw = f16_to_f32(blk.d);
          for (int j = 0; j < 32; ++j) dot += int32_t(blk.qs[j]) * xb.qs[j];
        } else if (weight == DType::Q4_K || weight == DType::Q5_K) {
          // Sub-block b % 8 of super-block b / 8; q5_k adds bit (b % 8) of qh[l].
          const bool five = weight == DType::Q5_K;
          const auto* k4 = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
          const auto* k5 = reinterpret_cast<const BlockQ5_K*>(row) + b / 8;
          const uint16_t d = five ? k5->d : k4->d, dmin = five ? k5->dmin : k4->dmin;
          const uint8_t* qs = five ? k5->qs : k4->qs;
          const int sub = static_cast<int>(b % 8);
          uint8_t sc, mn;
          k4_scale_min(sub, five ? k5->scales : k4->scales, &sc, &mn);
          int32_t sum = 0;
          for (int l = 0; l < 32; ++l) {
            const uint8_t q = qs[32 * (sub / 2) + l];
            const int fifth = five ? ((k5->qh[l] >> sub) & 1) << 4 : 0;
            dot += (int32_t(sub % 2 ? q >> 4 : q & 15) | fifth) * xb.qs[l];
            sum += xb.qs[l];
          }
          const float ds = f16_to_f32(d) * static_cast<float>(sc);
          const float dm = f16_to_f32(dmin) * static_cast<float>(mn);
          acc = std::fma(static_cast<float>(dot), ds * xb.d, acc);
          second = std::fma(dm, -(xb.d * static_cast<float>(sum)), second);
          continue;
        } else if (weight == DType::Q6_K) {
          // Block b is sub-blocks 2j and 2j + 1 (16 values each, own scales)
          // of super-block b / 8; value l's 6 bits as dequantize_row reads them.
          const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
          const int j = static_cast<int>(b % 8), h = j / 4, q = j % 4;
          const float d = f16_to_f32(blk.d);
          for (int s = 0; s < 2; ++s) {
            int32_t sub_dot = 0;
            for (int l = 16 * s; l < 16 * s + 16; ++l) {
              const uint8_t lo = blk.ql[64 * h + 32 * (q % 2) + l];
              const int code = ((q >= 2 ? lo >> 4 : lo & 15) | (((blk.qh[32 * h + l] >> (2 * q)) & 3) << 4)) - 32;
              sub_dot += code * xb.qs[l];
            }
            const float t = d * static_cast<float>(blk.scales[2 * j + s]) * xb.d;
            if (s == 0) acc = std::fma(static_cast<float>(sub_dot), t, acc);
            else second = std::fma(static_cast<float>(sub_dot), t, second);
          }
          continue;
        } else {
          const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
          dw = f16_to_f32(blk.d);
          for (int j = 0; j < 16; ++j)
            dot += (int32_t(blk.qs[j] & 15) - 8) * xb.qs[j] + (int32_t(blk.qs[j] >> 4) - 8) * xb.qs[j + 16];
        }
        const float scale = dw * xb.d;
        acc = std::fma(static_cast<float>(dot), scale, acc);
      }
      acc += second;
      out[m * ldo + n] = bias ? acc + bias[n] : acc;
    }
  }
}
}  // namespace bonfire::simd
