// A model's tensors, by the Hugging Face name the IR uses, whatever file they
// came from. Tensors are views into memory-mapped files (or buffers the store
// owns, for the few that need converting), so opening a model reads headers,
// not weights.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace bonfire {

// A read-only memory mapping of a whole file. Throws Error(BadGraph) naming
// the path when it cannot be opened.
class MappedFile {
 public:
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

class WeightStore {
 public:
  // Adds a tensor; a second tensor of the same name is an error naming both files.
  void add(const std::string& name, Tensor t, const std::string& source);
  // Adds or replaces (a converted copy standing in for the file's tensor).
  void put(const std::string& name, Tensor t, const std::string& source);
  const Tensor* find(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  int64_t bytes() const;
  // Maps every tensor's pages into this process now, so the first step does
  // not take a page fault per 4 KiB of weights (about 0.2 s on a 1.1 GB
  // model). The bytes must already be in the page cache (ModelFiles::warm)
  // or this reads them from disk. Tensors with a repacked copy are skipped:
  // products read the copy (and packing it read the original's pages).
  void map_in() const;
  // Gives each q8_0, f16 and bf16 matrix a copy in the layout the CPU's
  // kernels stream best (Tensor::repacked: ops/int8_gemm.h, ops/half_gemm.h),
  // where this CPU has those kernels (AVX-512). Costs 36 bytes per 32 q8_0
  // values beside the file's 34, and a second copy of f16/bf16 ones; the
  // file's pages stay in the page cache, which the kernel may reclaim.
  // Returns the bytes added.
  int64_t repack_for_cpu();

 private:
  struct Entry {
    Tensor tensor;
    std::string source;  // the file it came from, for errors
  };
  std::map<std::string, Entry> tensors_;
};

}  // namespace bonfire
