// Block formats against llama.cpp: goldens/gguf/quant.json holds blocks that
// llama.cpp's ggml_quantize_chunk made (and random blocks) with the floats its
// to_float returned (scripts/gen_gguf_goldens.py). dequantize_row must give
// the same bits; quantize_row the same bytes where bonfire has a quantizer;
// dot_row and the GEMM paths the dot of those floats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "core/dtype.h"
#include "core/error.h"
#include "golden_util.h"
#include "ops/gemm.h"
#include "ops/simd.h"

namespace bonfire {
namespace {

using nlohmann::json;

std::string b64_decode(const std::string& s) {
  static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = chars.find(c);
    if (v == std::string::npos) throw std::runtime_error("bad base64 in golden");
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back((char)((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct Case {
  DType t;
  std::string source;
  int64_t n, rows;
  std::string blocks;
  std::vector<float> floats, input;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> out;
    const json g = testing::read_json(testing::source_dir() / "goldens/gguf/quant.json");
    for (const json& c : g.at("cases")) {
      Case k;
      if (!dtype_from_name(c.at("type").get<std::string>(), &k.t)) throw std::runtime_error("unknown type in golden");
      DType by_id;
      if (!dtype_from_ggml_type(c.at("ggml_type").get<uint32_t>(), &by_id) || by_id != k.t)
        throw std::runtime_error("ggml id of " + c.at("type").get<std::string>() + " does not map back");
      k.source = c.at("source");
      k.n = c.at("n");
      k.rows = c.at("rows");
      k.blocks = b64_decode(c.at("blocks"));
      k.floats = floats_of(b64_decode(c.at("floats")));
      if (c.contains("input")) k.input = floats_of(b64_decode(c.at("input")));
      out.push_back(std::move(k));
    }
    return out;
  }();
  return all;
}

std::string label(const Case& c) { return std::string(dtype_name(c.t)) + "/" + c.source; }

TEST(QuantGolden, EveryTypeHasCases) {
  std::set<DType> seen;
  for (const Case& c : cases()) seen.insert(c.t);
  for (DType t : kAllDTypes) {
    if (t == DType::F32 || t == DType::U8) continue;  // no ggml reference; plain copies (below)
    EXPECT_TRUE(seen.count(t)) << dtype_name(t);
  }
}

TEST(QuantGolden, DequantizeIsBitIdenticalToLlamaCpp) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    ASSERT_EQ((int64_t)c.blocks.size(), c.rows * row_bytes(c.t, c.n));
    ASSERT_EQ((int64_t)c.floats.size(), c.rows * c.n);
    std::vector<float> got(c.n);
    int bad = 0;
    for (int64_t r = 0; r < c.rows; ++r) {
      dequantize_row(c.t, c.blocks.data() + r * row_bytes(c.t, c.n), got.data(), c.n);
      for (int64_t i = 0; i < c.n; ++i) {
        const float want = c.floats[r * c.n + i];
        if (std::memcmp(&got[i], &want, 4) != 0 && bad++ < 5)
          ADD_FAILURE() << "row " << r << " [" << i << "] got " << got[i] << " want " << want;
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(QuantGolden, QuantizeMatchesLlamaCppReference) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.input.empty() || !dtype_can_quantize(c.t)) continue;
    SCOPED_TRACE(label(c));
    std::string got(c.blocks.size(), '\0');
    for (int64_t r = 0; r < c.rows; ++r)
      quantize_row(c.t, &c.input[r * c.n], got.data() + r * row_bytes(c.t, c.n), c.n);
    EXPECT_TRUE(got == c.blocks);
    ++checked;
  }
  EXPECT_EQ(checked, 7);  // f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1
}

TEST(QuantGolden, UnsupportedQuantizerThrows) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(sizeof(BlockQ4_K));
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), out.data(), 256), Error);
}

// dot of an x with a stored row, against a double-precision dot of llama.cpp's
// floats for that row.
TEST(QuantGolden, DotRowMatchesDoubleDot) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    std::vector<float> x(c.n);
    for (float& v : x) v = nd(rng);
    for (int64_t r = 0; r < c.rows; ++r) {
      double want = 0, mag = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        want += (double)c.floats[r * c.n + i] * x[i];
        mag += std::fabs((double)c.floats[r * c.n + i] * x[i]);
      }
      const float got = simd::dot_row(c.t, c.blocks.data() + r * row_bytes(c.t, c.n), x.data(), c.n);
      EXPECT_LE(std::fabs(got - want), 2e-6 * mag + 1e-30) << "row " << r << " got " << got << " want " << want;
      // A prefix of whole blocks (the tail path of the kernels).
      const int64_t part = c.n / 2 / dtype_block(c.t) * dtype_block(c.t);
      if (part == 0) continue;
      double want_part = 0, mag_part = 0;
      for (int64_t i = 0; i < part; ++i) {
        want_part += (double)c.floats[r * c.n + i] * x[i];
        mag_part += std::fabs((double)c.floats[r * c.n + i] * x[i]);
      }
      const float got_part = simd::dot_row(c.t, c.blocks.data() + r * row_bytes(c.t, c.n), x.data(), part);
      EXPECT_LE(std::fabs(got_part - want_part), 2e-6 * mag_part + 1e-30) << "row " << r << " prefix " << part;
    }
  }
}

// The GEMM paths (fused dot for few rows, dequantized tiles for many, and the
// [K, N] band path) on every type.
TEST(QuantGolden, GemmReadsEveryType) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    const WeightRows w{c.t, reinterpret_cast<const uint8_t*>(c.blocks.data()), c.rows, c.n};
    for (int64_t M : {1, 6}) {
      std::vector<float> x(M * c.n), out(M * c.rows);
      for (float& v : x) v = nd(rng);
      gemm_nt(x.data(), M, c.n, w, out.data(), c.rows);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t r = 0; r < c.rows; ++r) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < c.n; ++i) {
            want += (double)c.floats[r * c.n + i] * x[m * c.n + i];
            mag += std::fabs((double)c.floats[r * c.n + i] * x[m * c.n + i]);
          }
          EXPECT_LE(std::fabs(out[m * c.rows + r] - want), 1e-5 * mag + 1e-30) << "nt M=" << M << " m=" << m << " r=" << r;
        }
      }
      // out[M, n] = x[M, rows] · w
      std::vector<float> xk(M * c.rows), outn(M * c.n);
      for (float& v : xk) v = nd(rng);
      gemm_nn(xk.data(), M, c.rows, w, outn.data(), c.n);
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < c.n; j += 17) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < c.rows; ++k) {
            want += (double)xk[m * c.rows + k] * c.floats[k * c.n + j];
            mag += std::fabs((double)xk[m * c.rows + k] * c.floats[k * c.n + j]);
          }
          EXPECT_LE(std::fabs(outn[m * c.n + j] - want), 1e-5 * mag + 1e-30) << "nn M=" << M << " j=" << j;
        }
      }
    }
  }
}

TEST(Quant, TypeTable) {
  for (DType t : kAllDTypes) {
    DType back;
    ASSERT_TRUE(dtype_from_name(dtype_name(t), &back)) << dtype_name(t);
    EXPECT_EQ(back, t);
    const int id = dtype_ggml_type(t);
    if (id >= 0) {
      ASSERT_TRUE(dtype_from_ggml_type((uint32_t)id, &back));
      EXPECT_EQ(back, t);
      EXPECT_STRCASEEQ(ggml_type_name((uint32_t)id), dtype_name(t));
    }
    EXPECT_EQ(row_bytes(t, 256 * 4), 256 * 4 / dtype_block(t) * dtype_block_bytes(t));
  }
  DType t;
  EXPECT_TRUE(dtype_from_name("Q4_K", &t));
  EXPECT_EQ(t, DType::Q4_K);
  EXPECT_FALSE(dtype_from_name("q4_2", &t));
  EXPECT_FALSE(dtype_from_ggml_type(16, &t));  // iq2_xxs: known to ggml, not read here
  EXPECT_STREQ(ggml_type_name(16), "iq2_xxs");
  EXPECT_EQ(ggml_type_name(4), nullptr);  // removed from ggml
  EXPECT_EQ(ggml_type_name(1000), nullptr);
  EXPECT_EQ(dtype_ggml_type(DType::U8), -1);
  EXPECT_EQ(dtype_block(DType::Q4_K), 256);
  EXPECT_EQ(dtype_block_bytes(DType::Q6_K), 210);
}

TEST(Quant, U8IsPlainValues) {
  const uint8_t v[4] = {0, 1, 128, 255};
  float out[4];
  dequantize_row(DType::U8, v, out, 4);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 128.0f);
  EXPECT_EQ(out[3], 255.0f);
  const float x[4] = {1, 2, 3, 4};
  EXPECT_EQ(simd::dot_row(DType::U8, v, x, 4), 0 + 2 + 384 + 1020);
}

}  // namespace
}  // namespace bonfire
