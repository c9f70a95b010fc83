#include "core/dtype.h"

#include <cctype>
#include <cfloat>
#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/error.h"

// Bit-exactness with ggml needs every product rounded on its own: a fused
// multiply-add would change the last bit. The build targets baseline x86-64
// (no FMA), and this keeps it so if someone adds -march flags.
#pragma GCC optimize("fp-contract=off")

namespace bonfire {

namespace {

struct TypeInfo {
  DType t;
  const char* name;
  int ggml;  // -1: not a ggml type
  int64_t block, bytes, align;
};

constexpr TypeInfo kTypes[] = {
    {DType::F32, "f32", 0, 1, 4, 4},
    {DType::F16, "f16", 1, 1, 2, 2},
    {DType::BF16, "bf16", 30, 1, 2, 2},
    {DType::Q8_0, "q8_0", 8, kQK, sizeof(BlockQ8_0), 2},
    {DType::Q4_0, "q4_0", 2, kQK, sizeof(BlockQ4_0), 2},
    {DType::Q4_1, "q4_1", 3, kQK, sizeof(BlockQ4_1), 2},
    {DType::Q5_0, "q5_0", 6, kQK, sizeof(BlockQ5_0), 2},
    {DType::Q5_1, "q5_1", 7, kQK, sizeof(BlockQ5_1), 2},
    {DType::Q2_K, "q2_k", 10, kQK_K, sizeof(BlockQ2_K), 2},
    {DType::Q3_K, "q3_k", 11, kQK_K, sizeof(BlockQ3_K), 2},
    {DType::Q4_K, "q4_k", 12, kQK_K, sizeof(BlockQ4_K), 2},
    {DType::Q5_K, "q5_k", 13, kQK_K, sizeof(BlockQ5_K), 2},
    {DType::Q6_K, "q6_k", 14, kQK_K, sizeof(BlockQ6_K), 2},
    {DType::IQ4_NL, "iq4_nl", 20, kQK, sizeof(BlockIQ4_NL), 2},
    {DType::IQ4_XS, "iq4_xs", 23, kQK_K, sizeof(BlockIQ4_XS), 2},
    {DType::MXFP4, "mxfp4", 39, kQK, sizeof(BlockMXFP4), 1},
    {DType::I8, "i8", 24, 1, 1, 1},
    {DType::U8, "u8", -1, 1, 1, 1},
    {DType::I16, "i16", 25, 1, 2, 2},
    {DType::I32, "i32", 26, 1, 4, 4},
};

const TypeInfo& info(DType t) {
  for (const TypeInfo& i : kTypes)
    if (i.t == t) return i;
  return kTypes[0];  // unreachable for a valid DType
}

// ggml's names for every id it has defined, readable or not (ids 4, 5 and
// 31-33, 36-38 were removed from ggml and stay empty).
constexpr const char* kGgmlNames[] = {
    "f32",     "f16",    "q4_0",   "q4_1",    nullptr, nullptr, "q5_0",  "q5_1",   "q8_0",   "q8_1",   "q2_K",
    "q3_K",    "q4_K",   "q5_K",   "q6_K",    "q8_K",  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",
    "iq2_s",   "iq4_xs", "i8",     "i16",     "i32",   "i64",   "f64",    "iq1_m",  "bf16",   nullptr,  nullptr,
    nullptr,   "tq1_0",  "tq2_0",  nullptr,   nullptr, nullptr, "mxfp4",  "nvfp4",  "q1_0",   "q2_0",
};

// The two 16-entry tables ggml's non-linear formats index.
constexpr int8_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace

const char* dtype_name(DType t) { return info(t).name; }

bool dtype_from_name(const std::string& name, DType* out) {
  std::string lower = name;
  for (char& c : lower) c = (char)std::tolower((unsigned char)c);
  for (const TypeInfo& i : kTypes) {
    if (lower == i.name) {
      *out = i.t;
      return true;
    }
  }
  return false;
}

bool dtype_from_ggml_type(uint32_t ggml_type, DType* out) {
  for (const TypeInfo& i : kTypes) {
    if (i.ggml >= 0 && (uint32_t)i.ggml == ggml_type) {
      *out = i.t;
      return true;
    }
  }
  return false;
}

int dtype_ggml_type(DType t) { return info(t).ggml; }

const char* ggml_type_name(uint32_t ggml_type) {
  return ggml_type < sizeof(kGgmlNames) / sizeof(kGgmlNames[0]) ? kGgmlNames[ggml_type] : nullptr;
}

bool dtype_is_integer(DType t) {
  return t == DType::I8 || t == DType::U8 || t == DType::I16 || t == DType::I32;
}

int64_t dtype_block(DType t) { return info(t).block; }
int64_t dtype_block_bytes(DType t) { return info(t).bytes; }
int64_t dtype_align(DType t) { return info(t).align; }
int64_t row_bytes(DType t, int64_t n) { return n / dtype_block(t) * dtype_block_bytes(t); }


uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past the largest f16
  if (abs < 0x38800000u) {                         // result is subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;    // 2^24: units of the smallest subnormal
    return sign | (uint16_t)std::nearbyint(a);
  }
  // Normal: round mantissa to nearest even.
  uint32_t m = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | (uint16_t)((m - (112u << 23)) >> 13);
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

namespace {

// q3_K's sixteen 6-bit scales: low nibbles in bytes 0-7 (two per byte, the
// first 8 sub-blocks in low nibbles), top 2 bits four to a byte in 8-11.
inline void scales_q3_k(const uint8_t* s, int8_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = (s[i % 8] >> (4 * (i / 8))) & 0xF;
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (int8_t)(low | (high << 4));
  }
}

// 2^(e - 128): half of E8M0's value, since the fp4 table is doubled.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void deq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (b[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

// The fifth bits of q5_0/q5_1: element j's is bit j of the word.
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | (int)(((qh >> j) & 1u) << 4);
}

void deq_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK; ++j) y[j] = (q5_value(b[i].qs, qh, j) - 16) * d;
  }
}

void deq_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK; ++j) y[j] = q5_value(b[i].qs, qh, j) * d + m;
  }
}

// q2_K and q3_K share a walk: two halves of 128; in each, 2-bit field `shift`
// of byte qs[l] (l < 32) feeds sub-blocks of 16 in order.
void deq_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    int is = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b[i].qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++is) {
          const uint8_t sc = b[i].scales[is];
          const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void deq_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    int8_t sc[16];
    scales_q3_k(b[i].scales, sc);
    int is = 0;
    uint8_t bit = 1;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b[i].qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2, bit <<= 1) {
        for (int part = 0; part < 2; ++part, ++is) {
          const float dl = d * (sc[is] - 32);
          for (int l = 16 * part; l < 16 * part + 16; ++l)
            *y++ = dl * (((q[l] >> shift) & 3) - ((b[i].hmask[l] & bit) ? 0 : 4));
        }
      }
    }
  }
}

void deq_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, mn;
      k4_scale_min(j, b[i].scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      k4_scale_min(j + 1, b[i].scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void deq_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, mn;
      k4_scale_min(j, b[i].scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      k4_scale_min(j + 1, b[i].scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      const uint8_t lo = (uint8_t)(1u << j), hi = (uint8_t)(2u << j);
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + ((b[i].qh[l] & lo) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + ((b[i].qh[l] & hi) ? 16 : 0)) - m2;
    }
  }
}

void deq_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int half = 0; half < 2; ++half, y += 128) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        // (d * scale) * q, in that order, as ggml rounds it.
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void deq_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIQ4NL[b[i].qs[j] & 0xF];
      y[j + 16] = d * kIQ4NL[b[i].qs[j] >> 4];
    }
  }
}

void deq_iq4_xs(const BlockIQ4_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b[i].scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * (ls - 32);
      const uint8_t* qs = b[i].qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIQ4NL[qs[j] & 0xF];
        y[j + 16] = dl * kIQ4NL[qs[j] >> 4];
      }
    }
  }
}

void deq_mxfp4(const BlockMXFP4* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = e8m0_half(b[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = kFP4[b[i].qs[j] & 0xF] * d;
      y[j + 16] = kFP4[b[i].qs[j] >> 4] * d;
    }
  }
}

template <typename T>
void deq_int(const void* row, float* y, int64_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    y[i] = (float)v;
  }
}

}  // namespace

void dequantize_row(DType t, const void* row, float* out, int64_t n) {
  const int64_t nb = n / dtype_block(t);
  switch (t) {
    case DType::F32:
      std::memcpy(out, row, n * sizeof(float));
      return;
    case DType::F16: {
      auto* p = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      return;
    }
    case DType::BF16: {
      auto* p = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<const BlockQ8_0*>(row);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) out[i * 32 + j] = b[i].qs[j] * d;
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(row);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 16; ++j) {
          out[i * 32 + j] = ((b[i].qs[j] & 0x0f) - 8) * d;
          out[i * 32 + j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case DType::Q4_1: return deq_q4_1(static_cast<const BlockQ4_1*>(row), out, nb);
    case DType::Q5_0: return deq_q5_0(static_cast<const BlockQ5_0*>(row), out, nb);
    case DType::Q5_1: return deq_q5_1(static_cast<const BlockQ5_1*>(row), out, nb);
    case DType::Q2_K: return deq_q2_k(static_cast<const BlockQ2_K*>(row), out, nb);
    case DType::Q3_K: return deq_q3_k(static_cast<const BlockQ3_K*>(row), out, nb);
    case DType::Q4_K: return deq_q4_k(static_cast<const BlockQ4_K*>(row), out, nb);
    case DType::Q5_K: return deq_q5_k(static_cast<const BlockQ5_K*>(row), out, nb);
    case DType::Q6_K: return deq_q6_k(static_cast<const BlockQ6_K*>(row), out, nb);
    case DType::IQ4_NL: return deq_iq4_nl(static_cast<const BlockIQ4_NL*>(row), out, nb);
    case DType::IQ4_XS: return deq_iq4_xs(static_cast<const BlockIQ4_XS*>(row), out, nb);
    case DType::MXFP4: return deq_mxfp4(static_cast<const BlockMXFP4*>(row), out, nb);
    case DType::I8: return deq_int<int8_t>(row, out, n);
    case DType::U8: return deq_int<uint8_t>(row, out, n);
    case DType::I16: return deq_int<int16_t>(row, out, n);
    case DType::I32: return deq_int<int32_t>(row, out, n);
  }
}

namespace {

// Smallest and largest of a block, as ggml's reference quantizers find them.
inline void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = FLT_MAX;
  *mx = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *mn) *mn = x[j];
    if (x[j] > *mx) *mx = x[j];
  }
}

// The value of largest magnitude, with its sign (first one on ties).
inline float signed_absmax(const float* x, int n) {
  float amax = 0, vmax = 0;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      vmax = x[j];
    }
  }
  return vmax;
}

void quant_q4_1(const float* in, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, in += kQK) {
    float mn, mx;
    min_max(in, kQK, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(mn);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, (int)(int8_t)((in[j] - mn) * id + 0.5f));
      const int hi = std::min(15, (int)(int8_t)((in[j + 16] - mn) * id + 0.5f));
      b[i].qs[j] = (uint8_t)(lo | (hi << 4));
    }
  }
}

void quant_q5(const float* in, uint16_t* d_out, uint16_t* m_out, uint8_t* qh_out, uint8_t* qs, bool with_min) {
  float d, mn = 0;
  if (with_min) {
    float mx;
    min_max(in, kQK, &mn, &mx);
    d = (mx - mn) / 31;
  } else {
    d = signed_absmax(in, kQK) / -16;
  }
  const float id = d != 0 ? 1.0f / d : 0.0f;
  *d_out = f32_to_f16(d);
  if (with_min) *m_out = f32_to_f16(mn);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    int q0, q1;
    if (with_min) {
      q0 = (uint8_t)((in[j] - mn) * id + 0.5f);
      q1 = (uint8_t)((in[j + 16] - mn) * id + 0.5f);
    } else {
      q0 = std::min(31, (int)(int8_t)(in[j] * id + 16.5f));
      q1 = std::min(31, (int)(int8_t)(in[j + 16] * id + 16.5f));
    }
    qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= (uint32_t)((q0 >> 4) & 1) << j;
    qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

}  // namespace

bool dtype_can_quantize(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
    case DType::Q4_1: case DType::Q5_0: case DType::Q5_1:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType t, const float* in, void* row, int64_t n) {
  const int64_t nb = n / dtype_block(t);
  switch (t) {
    case DType::F32:
      std::memcpy(row, in, n * sizeof(float));
      return;
    case DType::F16: {
      auto* p = static_cast<uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(in[i]);
      return;
    }
    case DType::BF16: {
      auto* p = static_cast<uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(in[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(row);
      for (int64_t i = 0; i < nb; ++i) {
        const float* x = in + i * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 32; ++j) b[i].qs[j] = (int8_t)std::round(x[j] * id);
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<BlockQ4_0*>(row);
      for (int64_t i = 0; i < nb; ++i) {
        const float* x = in + i * 32;
        const float d = signed_absmax(x, 32) / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 16; ++j) {
          const int lo = std::min(15, (int)(int8_t)(x[j] * id + 8.5f));
          const int hi = std::min(15, (int)(int8_t)(x[j + 16] * id + 8.5f));
          b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
      }
      return;
    }
    case DType::Q4_1: return quant_q4_1(in, static_cast<BlockQ4_1*>(row), nb);
    case DType::Q5_0: {
      auto* b = static_cast<BlockQ5_0*>(row);
      for (int64_t i = 0; i < nb; ++i) quant_q5(in + i * kQK, &b[i].d, nullptr, b[i].qh, b[i].qs, false);
      return;
    }
    case DType::Q5_1: {
      auto* b = static_cast<BlockQ5_1*>(row);
      for (int64_t i = 0; i < nb; ++i) quant_q5(in + i * kQK, &b[i].d, &b[i].m, b[i].qh, b[i].qs, true);
      return;
    }
    default:
      throw Error(ErrorCode::Internal, std::string("quantize_row: bonfire has no quantizer for ") + dtype_name(t));
  }
}

}  // namespace bonfire
