// A GGUF file (llama.cpp's model format), versions 2 and 3, little-endian.
//
// Opening maps the file and reads only its header: metadata, tensor infos,
// then every claim the header makes is checked against the file's size before
// anything is read through it (lengths, counts, shapes, offsets). Tensors are
// views into the mapping, packed as stored; nothing is copied or expanded.
//
// Refusals are Error(BadGraph) whose message starts with the file's name and
// says what is wrong: truncation, absurd counts, unknown value or tensor
// types, shapes whose element count is zero or overflows, rows that are not a
// whole number of blocks, tensor data past the end, misaligned or
// overlapping tensors, duplicate keys or tensor names. Version 1 files and
// big-endian files are refused by name.
//
// Metadata becomes one JSON object keyed by the full GGUF key
// ("general.architecture"). Integers stay integers (u64 as unsigned, i64 as
// signed), f32 and f64 become doubles (f32 widened exactly), bools booleans,
// arrays JSON arrays (arrays of arrays too). Strings are kept as the file's
// bytes: GGUF promises UTF-8 but a broken file may hold anything, so call
// dump() with an error handler (json::error_handler_t::replace) on untrusted
// metadata.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/weights.h"

namespace bonfire {

// GGUF's metadata value types, as the file stores them.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  uint32_t ggml_type = 0;
  std::vector<uint64_t> ne;  // GGUF's order: ne[0] is the fastest axis
  Shape shape;               // row-major: reverse(ne)
  uint64_t offset = 0;       // from the start of the data section
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;
  // Arrays may nest; deeper than this is refused (a header, not a data set).
  static constexpr int kMaxArrayDepth = 8;
  static constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

  // Maps and parses `path`.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses bytes that `owner` keeps alive; `name` stands for the file in
  // errors. Used by tests to feed damaged headers without writing files.
  static std::shared_ptr<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name,
                                         std::shared_ptr<const void> owner);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute, in the file

  const nlohmann::json& metadata() const { return metadata_; }
  // The stored type of a key (arrays report Array); false when absent.
  bool value_type(const std::string& key, GgufType* out) const;
  // For arrays: the element type of the outermost array.
  bool array_type(const std::string& key, GgufType* out) const;
  // general.architecture, or "" when the file has none.
  std::string architecture() const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find(const std::string& tensor_name) const;
  // A view of the named tensor's bytes; throws Error naming the file when the
  // tensor does not exist.
  Tensor tensor(const std::string& tensor_name) const;
  Tensor tensor(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  class Reader;

  std::string name_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::map<std::string, std::pair<GgufType, GgufType>> types_;  // key -> (type, element type)
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

}  // namespace bonfire
