#include "core/tensor.h"

#include "core/error.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace bonfire {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t checked_numel(const int64_t* dims, size_t rank, int64_t limit) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return -1;
    if (dims[i] != 0 && n > limit / dims[i]) return -1;
    n *= dims[i];
  }
  return n > limit ? -1 : n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Tensor Tensor::empty(const Shape& shape) {
  const size_t bytes = std::max<int64_t>(1, shape_numel(shape)) * sizeof(float);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  Tensor t;
  t.shape = shape;
  t.data = p;
  t.owner = std::shared_ptr<void>(p, std::free);
  return t;
}

namespace {
// Tensor::zeros maps tensors from this size on lazily. A session's KV
// tensors at a short context are this small: 200 positions of 4 kv heads x
// 64 take 200 KiB, and clearing them with memset faulted every page (~9 µs
// a page under this project's VM): the 44 of the 1.1B bench model cost
// 12-17 ms on a process's first 8-token prefill (1.3-2.1x the steady one)
// and 1.7-3.9 ms on later ones, as glibc gave the pages back between
// sessions. Mapped lazily: 0.2-0.3 ms, and about 2 ms as the cache's first
// writes map their 64 KiB stretches (prepare_write); the threshold was 1 MiB.
// The browser worker's memory has no pages to fault (emscripten's mmap is an
// aligned allocation it clears), so there it stays at 1 MiB.
#ifdef __EMSCRIPTEN__
constexpr size_t kLazyZeroBytes = size_t{1} << 20;
#else
constexpr size_t kLazyZeroBytes = size_t{64} << 10;
#endif
}  // namespace

Tensor Tensor::zeros(const Shape& shape) {
  const size_t bytes = std::max<int64_t>(1, shape_numel(shape)) * sizeof(float);
  if (bytes >= kLazyZeroBytes) {
    // Fresh pages from the kernel read as zero and cost nothing until
    // written: a session's KV cache (hundreds of MB at a long context) is
    // mostly never touched by a short generation, and memset would fault in
    // every page of it before the first token.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    Tensor t;
    t.shape = shape;
    t.data = p;
    t.owner = std::shared_ptr<void>(p, [bytes](void* q) { munmap(q, bytes); });
    return t;
  }
  Tensor t = empty(shape);
  std::memset(t.data, 0, bytes);
  return t;
}

void Tensor::prepare_write(int64_t at, int64_t bytes) const {
#ifdef MADV_POPULATE_WRITE
  constexpr int64_t kStretch = int64_t{64} << 10;
  const int64_t total = nbytes();
  if (!owner || data != owner.get() || static_cast<size_t>(total) < kLazyZeroBytes || bytes <= 0) return;
  const int64_t first = at / kStretch, last = (at + bytes - 1) / kStretch;
  if (first == last && at % kStretch != 0) return;  // inside a stretch an earlier write prepared
  const auto base = reinterpret_cast<uintptr_t>(data);
  const int64_t from = first * kStretch, to = std::min(total, (last + 1) * kStretch);
  const uintptr_t page = 4096, start = (base + from) & ~(page - 1);
  madvise(reinterpret_cast<void*>(start), base + to - start, MADV_POPULATE_WRITE);  // a failure only costs the faults
#else
  (void)at;
  (void)bytes;
#endif
}

Tensor Tensor::view(DType dtype, const Shape& shape, void* data, std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = data;
  t.owner = std::move(owner);
  return t;
}

int64_t Tensor::nbytes() const { return desc().nbytes(); }

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape);
  const int64_t n = t.cols();
  for (int64_t r = 0; r < t.rows(); ++r) dequantize_row(t.dtype, t.row(r), out.f32() + r * n, n);
  return out;
}

Tensor axis0_part(const Tensor& t, int64_t i, int64_t parts) {
  Shape s = t.shape.empty() ? Shape{1} : t.shape;
  s[0] /= parts;
  return Tensor::view(DType::F32, s, const_cast<float*>(t.f32()) + i * shape_numel(s), t.owner);
}

Tensor stack_axis0(const std::vector<const Tensor*>& parts, const std::function<Tensor(const Shape&)>& alloc) {
  Shape s = parts[0]->shape.empty() ? Shape{1} : parts[0]->shape;
  const int64_t each = shape_numel(s);
  s[0] *= static_cast<int64_t>(parts.size());
  Tensor out = alloc(s);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i]->numel() != each) bad_graph("the parts to stack have different shapes");
    std::memcpy(out.f32() + i * each, parts[i]->f32(), each * sizeof(float));
  }
  return out;
}

}  // namespace bonfire
