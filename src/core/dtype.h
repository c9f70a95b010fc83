// Element types a tensor may be stored in. Activations are always F32; weights
// may stay packed as the checkpoint stored them and are read row by row.
// Block formats follow GGUF's layout (ggml's q8_0 / q4_0) bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace bonfire {

enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_0 };

const char* dtype_name(DType t);
bool dtype_from_name(const std::string& name, DType* out);

// Elements per block (1 for plain types) and bytes per block.
int64_t dtype_block(DType t);
int64_t dtype_block_bytes(DType t);
// Bytes of one row of n elements; n must be a multiple of dtype_block(t).
int64_t row_bytes(DType t, int64_t n);

// q8_0: f16 scale d, 32 int8; value = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// q4_0: f16 scale d, 16 bytes; element j < 16 in the low nibble of qs[j],
// element j + 16 in the high nibble; value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even

// Expands elements [0, n) of a row stored as `t` into f32.
void dequantize_row(DType t, const void* row, float* out, int64_t n);
// Packs n f32 values as `t` (used by tests and model writers).
void quantize_row(DType t, const float* in, void* row, int64_t n);

}  // namespace bonfire
