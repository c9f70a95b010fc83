// A tensor is plain data: an element type, a row-major shape and a pointer to
// bytes that someone owns. Copying a Tensor shares the bytes (like a view);
// `owner` keeps them alive, whether they are a heap buffer or a mapped file.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace bonfire {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
// shape's element count, or -1 when it exceeds `limit` or has a negative
// dimension (no overflow on the way).
int64_t checked_numel(const int64_t* dims, size_t rank, int64_t limit);
std::string shape_str(const Shape& s);  // "[2, 3]"

// What shape inference needs to know about a value.
struct TensorDesc {
  DType dtype = DType::F32;
  Shape shape;
  int64_t numel() const { return shape_numel(shape); }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return shape.empty() ? 1 : numel() / (cols() ? cols() : 1); }
  int64_t nbytes() const { return rows() * row_bytes(dtype, cols()); }  // as stored (packed rows included)
};

struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  void* data = nullptr;
  std::shared_ptr<void> owner;
  // The same values in the layout a CPU kernel streams best (ops/int8_gemm.h's
  // panels for q8_0), made once at load (model/weights.h); null for most
  // tensors. Copies share it, like the bytes.
  std::shared_ptr<const uint8_t> repacked;

  // A fresh f32 buffer, 64-byte aligned; `zeros` also clears it.
  static Tensor empty(const Shape& shape);
  static Tensor zeros(const Shape& shape);
  // Before writing [at, at + bytes) of this tensor's data: a `zeros` tensor
  // of 64 KiB or more (1 MiB in the browser worker) has its pages mapped
  // lazily, and each first write to one traps to the kernel (to the
  // hypervisor, under this project's VM: ~9 µs a page).
  // When the write starts a new 64 KiB stretch, its pages are mapped in one
  // call instead. Only a hint: nothing changes for other tensors.
  void prepare_write(int64_t at, int64_t bytes) const;
  // Wraps bytes that `owner` keeps alive.
  static Tensor view(DType dtype, const Shape& shape, void* data, std::shared_ptr<void> owner);

  TensorDesc desc() const { return {dtype, shape}; }
  int64_t numel() const { return shape_numel(shape); }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return desc().rows(); }
  int64_t nbytes() const;
  bool packed() const { return dtype != DType::F32; }

  float* f32() { return static_cast<float*>(data); }
  const float* f32() const { return static_cast<const float*>(data); }
  // Start of row r for any dtype (rows are the leading dims folded).
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes(dtype, cols());
  }
};

// A deep copy into a fresh f32 buffer (dequantizing packed data).
Tensor to_f32(const Tensor& t);

// Part `i` of `parts` equal parts of an f32 tensor along axis 0 (a scalar
// counts as [1]), without a copy: it shares t's buffer.
Tensor axis0_part(const Tensor& t, int64_t i, int64_t parts);
// f32 tensors of one shape concatenated along axis 0 into a buffer from
// `alloc` (Tensor::empty by default).
Tensor stack_axis0(const std::vector<const Tensor*>& parts,
                   const std::function<Tensor(const Shape&)>& alloc = Tensor::empty);

}  // namespace bonfire
