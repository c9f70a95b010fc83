// Element types a tensor may be stored in. Activations are always F32; weights
// may stay packed as the checkpoint stored them and are read row by row.
//
// Block formats follow ggml's layouts bit for bit (GGUF stores them as they
// are in memory, little-endian), and dequantize_row reproduces ggml's
// to_float exactly: the same products in the same order, so the floats are
// bit-identical (tests/quant_test.cpp checks it against llama.cpp itself).
//
// Raw integer types (i8, u8, i16, i32) come from GGUF and safetensors files
// that store ids or masks. They are not quantized: dequantize_row and dot_row
// read them as plain numbers (i32 rounds to the nearest f32), so an op handed
// one computes with the values instead of crashing or refusing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace bonfire {

// The first five keep their values: they predate the others.
enum class DType : uint8_t {
  F32, F16, BF16, Q8_0, Q4_0,
  Q4_1, Q5_0, Q5_1,
  Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
  IQ4_NL, IQ4_XS, MXFP4,
  I8, U8, I16, I32,
};
inline constexpr DType kAllDTypes[] = {
    DType::F32,  DType::F16,  DType::BF16,   DType::Q8_0,   DType::Q4_0,  DType::Q4_1, DType::Q5_0,
    DType::Q5_1, DType::Q2_K, DType::Q3_K,   DType::Q4_K,   DType::Q5_K,  DType::Q6_K, DType::IQ4_NL,
    DType::IQ4_XS, DType::MXFP4, DType::I8, DType::U8, DType::I16, DType::I32,
};

// Lower-case names ("q4_k"); dtype_from_name also accepts ggml's spelling
// ("q4_K"): the match ignores case.
const char* dtype_name(DType t);
bool dtype_from_name(const std::string& name, DType* out);

// ggml's type ids as GGUF stores them (0 = f32, 1 = f16, 2 = q4_0, 3 = q4_1,
// 6 = q5_0, 7 = q5_1, 8 = q8_0, 10..14 = q2_K..q6_K, 20 = iq4_nl,
// 23 = iq4_xs, 24 = i8, 25 = i16, 26 = i32, 30 = bf16, 39 = mxfp4). False for
// ids bonfire does not read (known ones such as iq2_xxs included).
bool dtype_from_ggml_type(uint32_t ggml_type, DType* out);
// The ggml id of t, or -1 for types ggml lacks (u8).
int dtype_ggml_type(DType t);
// ggml's name for any id it defines ("iq2_xxs"), or nullptr for an unknown id:
// lets a reader say what a file holds even when bonfire cannot read it.
const char* ggml_type_name(uint32_t ggml_type);

bool dtype_is_integer(DType t);  // i8, u8, i16, i32

// Elements per block (1 for plain types) and bytes per block.
int64_t dtype_block(DType t);
int64_t dtype_block_bytes(DType t);
// Bytes of one row of n elements; n must be a multiple of dtype_block(t).
int64_t row_bytes(DType t, int64_t n);

// --- ggml block layouts. Scales are f16 bit patterns. -----------------------

constexpr int kQK = 32;    // elements per block of the simple formats
constexpr int kQK_K = 256; // elements per super-block of the K formats

// q8_0: value = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// q4_0: element j < 16 in the low nibble of qs[j], element j + 16 in the high
// nibble; value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// q4_1: nibbles as q4_0; value = d * nibble + m.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
// q5_0: nibbles as q4_0 plus a fifth bit: bit j of the little-endian word qh
// belongs to element j; value = d * (q - 16).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
// q5_1: as q5_0 with value = d * q + m.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// q2_K: 16 sub-blocks of 16; scales[i] holds a 4-bit scale (low) and 4-bit
// min (high); value = d * scale * q - dmin * min, q two bits.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// q3_K: 16 sub-blocks of 16 with 6-bit signed scales (offset 32) packed in 12
// bytes; q is two low bits in qs plus a high bit in hmask (set = no -4).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// q4_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes;
// value = d * scale * q - dmin * min.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Sub-block j's 6-bit scale and min in the 12 scale bytes of q4_K/q5_K:
// bytes 0-3 hold scales 0-3 (low 6 bits), bytes 4-7 mins 0-3; sub-blocks 4-7
// keep their low 4 bits in bytes 8-11 and their top 2 bits in the spare high
// bits of bytes 0-7.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// q5_K: q4_K plus a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// q6_K: 16 sub-blocks of 16 with int8 scales; q = 4 low bits (ql) and 2 high
// bits (qh), value = d * scale * (q - 32).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// iq4_nl: nibbles as q4_0 index a fixed non-linear table; value = d * table.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
// iq4_xs: iq4_nl's table in 8 sub-blocks of 32 with 6-bit scales (offset 32).
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
// mxfp4: an E8M0 exponent and 32 E2M1 nibbles laid out as q4_0's.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

// The minimum alignment a row of t needs in memory (its widest field).
int64_t dtype_align(DType t);

// Inline: the block dot kernels convert one scale per 32 values, so a call
// per block would cost as much as the arithmetic. Exact for every input.
inline float f16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)(h & 0x7fffu) << 13;  // exponent and mantissa in place
  const uint32_t exp = bits & (0x7c00u << 13);
  bits += (127 - 15) << 23;  // rebias the exponent
  float f;
  if (exp == (0x7c00u << 13)) {
    bits += (128 - 16) << 23;  // inf and NaN keep an all-ones exponent
    std::memcpy(&f, &bits, 4);
  } else if (exp == 0) {
    // Subnormal (or zero): let the FPU renormalise through a magic subtract.
    bits += 1 << 23;
    std::memcpy(&f, &bits, 4);
    f -= 6.103515625e-05f;  // 2^-14
  } else {
    std::memcpy(&f, &bits, 4);
  }
  uint32_t out;
  std::memcpy(&out, &f, 4);
  out |= (uint32_t)(h & 0x8000u) << 16;
  std::memcpy(&f, &out, 4);
  return f;
}
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even

// Expands elements [0, n) of a row stored as `t` into f32 (n a multiple of
// dtype_block(t)).
void dequantize_row(DType t, const void* row, float* out, int64_t n);
// Packs n f32 values as `t` with ggml's reference quantizer (bit-identical to
// quantize_row_*_ref). Implemented for f32, f16, bf16, q8_0, q4_0, q4_1, q5_0
// and q5_1; other types throw Error(Internal) (files bring them quantized).
void quantize_row(DType t, const float* in, void* row, int64_t n);
bool dtype_can_quantize(DType t);

}  // namespace bonfire
