#include "core/dtype.h"

#include <cmath>
#include <cstring>

namespace bonfire {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
  }
  return "?";
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    if (name == dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

int64_t dtype_block(DType t) { return (t == DType::Q8_0 || t == DType::Q4_0) ? 32 : 1; }

int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return sizeof(BlockQ8_0);
    case DType::Q4_0: return sizeof(BlockQ4_0);
  }
  return 0;
}

int64_t row_bytes(DType t, int64_t n) { return n / dtype_block(t) * dtype_block_bytes(t); }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

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

void dequantize_row(DType t, const void* row, float* out, int64_t n) {
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
      for (int64_t i = 0; i < n / 32; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) out[i * 32 + j] = d * b[i].qs[j];
      }
      return;
    }
    case DType::Q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(row);
      for (int64_t i = 0; i < n / 32; ++i) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < 16; ++j) {
          out[i * 32 + j] = d * ((b[i].qs[j] & 0x0f) - 8);
          out[i * 32 + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
  }
}

void quantize_row(DType t, const float* in, void* row, int64_t n) {
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
      for (int64_t i = 0; i < n / 32; ++i) {
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
      for (int64_t i = 0; i < n / 32; ++i) {
        const float* x = in + i * 32;
        float amax = 0, vmax = 0;  // the value of largest magnitude, with its sign
        for (int j = 0; j < 32; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            vmax = x[j];
          }
        }
        const float d = vmax / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < 16; ++j) {
          int lo = (int)(int8_t)(x[j] * id + 8.5f), hi = (int)(int8_t)(x[j + 16] * id + 8.5f);
          lo = lo > 15 ? 15 : lo;
          hi = hi > 15 ? 15 : hi;
          b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
      }
      return;
    }
  }
}

}  // namespace bonfire
