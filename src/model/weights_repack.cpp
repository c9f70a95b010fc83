// WeightStore::repack_for_cpu, apart from weights.cpp so the file readers
// (and their fuzz targets) do not depend on the ops layer's kernels.
#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <memory>
#include <new>

#include "core/threads.h"
#include "model/weights.h"
#include "ops/half_gemm.h"
#include "ops/int8_gemm.h"

namespace bonfire {

namespace {

// A buffer in 2 MiB pages where the kernel gives them: a model's worth of
// 4 KiB pages costs a fault each on first touch, and under this project's
// VM every one of those traps to the hypervisor (2.4 s for 1.1 GB measured).
// The start is aligned to 2 MiB: mmap's own placement left a third of the
// 1.1B model's panels in 4 KiB pages (a [2048, 2048] matrix's 4.3 MiB held
// one huge page at most), where the streaming kernels' prefetches stop at
// every page and walk the page tables.
std::shared_ptr<uint8_t> huge_buffer(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t mapped = bytes + kHuge;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* start = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1));
  madvise(start, bytes, MADV_HUGEPAGE);
  return std::shared_ptr<uint8_t>(start, [p, mapped](uint8_t*) { munmap(p, mapped); });
}

}  // namespace

int64_t WeightStore::repack_for_cpu() {
  int64_t added = 0;
  // Names that alias one tensor (a tied output, the IR's aliases) share one copy.
  std::map<const void*, std::shared_ptr<const uint8_t>> done;
  for (auto& [name, e] : tensors_) {
    Tensor& t = e.tensor;
    if (t.repacked || t.shape.size() < 2 || t.rows() < 16) continue;
    if (auto it = done.find(t.data); it != done.end()) {
      t.repacked = it->second;
      continue;
    }
    const int64_t n = t.rows(), k = t.cols(), stride = row_bytes(t.dtype, k);
    const uint8_t* w = static_cast<const uint8_t*>(t.data);
    std::shared_ptr<uint8_t> out;
    int64_t bytes = 0;
    if (simd::int8_gemm_available(t.dtype, k)) {
      bytes = simd::int8_packed_bytes(t.dtype, n, k);
      out = huge_buffer(static_cast<size_t>(bytes));
      parallel_for((n + 15) / 16, 8,
                   [&](int64_t p0, int64_t p1) { simd::int8_pack(t.dtype, w, stride, n, k, p0, p1, out.get()); });
    } else if (simd::half_gemm_available(t.dtype)) {
      bytes = simd::half_packed_bytes(n, k);
      out = huge_buffer(static_cast<size_t>(bytes));
      parallel_for((n + 15) / 16, 8,
                   [&](int64_t p0, int64_t p1) { simd::half_pack(w, stride, n, k, p0, p1, out.get()); });
    } else {
      continue;
    }
    t.repacked = std::move(out);
    done[t.data] = t.repacked;
    added += bytes;
  }
  return added;
}

}  // namespace bonfire
