#include "model/gguf.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace bonfire {

using nlohmann::json;

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "?";
}

namespace {

bool valid_type(uint32_t t) { return t <= (uint32_t)GgufType::F64; }

// Bytes one stored value of type t takes at least: what bounds a count
// against the bytes left before anything is allocated for it.
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: return 8;  // its length
    case GgufType::Array: return 12;  // element type + count
  }
  return 1;
}

}  // namespace

// A cursor over the header that never reads past the end: every read first
// checks the bytes left and throws an Error naming the file and the offset.
class GgufFile::Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(ErrorCode::BadGraph, name_ + ": " + what); }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail("truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
           " but the file has " + std::to_string(left()) + " left");
  }

  template <typename T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string str(const std::string& what) {
    const uint64_t n = get<uint64_t>(what + " length");
    need(n, what + " (" + std::to_string(n) + " bytes)");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), (size_t)n);
    pos_ += n;
    return s;
  }

  // A count of items each at least `min_bytes` long: more than the bytes left
  // can hold is refused before anything is allocated.
  uint64_t count(const std::string& what, uint64_t min_bytes) {
    const uint64_t n = get<uint64_t>(what);
    if (n > left() / min_bytes)
      fail(what + " is " + std::to_string(n) + " but the " + std::to_string(left()) +
           " bytes left can hold at most " + std::to_string(left() / min_bytes));
    return n;
  }

  json value(GgufType t, const std::string& key, int depth) {
    const std::string what = "value of \"" + key + "\"";
    switch (t) {
      case GgufType::U8: return get<uint8_t>(what);
      case GgufType::I8: return get<int8_t>(what);
      case GgufType::U16: return get<uint16_t>(what);
      case GgufType::I16: return get<int16_t>(what);
      case GgufType::U32: return get<uint32_t>(what);
      case GgufType::I32: return get<int32_t>(what);
      case GgufType::F32: return (double)get<float>(what);
      case GgufType::Bool: {
        const uint8_t b = get<uint8_t>(what);
        if (b > 1) fail("key \"" + key + "\" holds bool byte " + std::to_string(b) + " (must be 0 or 1)");
        return b == 1;
      }
      case GgufType::String: return str(what);
      case GgufType::U64: return get<uint64_t>(what);
      case GgufType::I64: return get<int64_t>(what);
      case GgufType::F64: return get<double>(what);
      case GgufType::Array: {
        if (depth >= kMaxArrayDepth)
          fail("key \"" + key + "\" nests arrays deeper than " + std::to_string(kMaxArrayDepth));
        const GgufType et = type(key, "array element type of \"" + key + "\"");
        const uint64_t n = count("array length of \"" + key + "\"", min_value_bytes(et));
        json arr = json::array();
        arr.get_ref<json::array_t&>().reserve((size_t)n);
        for (uint64_t i = 0; i < n; ++i) arr.push_back(value(et, key, depth + 1));
        return arr;
      }
    }
    fail("key \"" + key + "\" has an unknown value type");
  }

  GgufType type(const std::string& key, const std::string& what) {
    const uint32_t t = get<uint32_t>(what);
    if (!valid_type(t)) fail("key \"" + key + "\" has unknown value type " + std::to_string(t));
    return (GgufType)t;
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<MappedFile> f = MappedFile::open(path);
  return parse(f->data(), f->size(), path, f);
}

std::shared_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name,
                                          std::shared_ptr<const void> owner) {
  std::shared_ptr<GgufFile> g(new GgufFile());
  g->name_ = name;
  g->data_ = data;
  g->size_ = size;
  g->owner_ = std::move(owner);
  Reader r(data, size, g->name_);

  // Header.
  r.need(4, "magic");
  if (std::memcmp(data, "GGUF", 4) != 0) r.fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  r.get<uint32_t>("magic");
  g->version_ = r.get<uint32_t>("version");
  if (g->version_ == 1) r.fail("GGUF version 1 is not supported (only versions 2 and 3 are)");
  if (g->version_ != 0 && (g->version_ & 0xffffu) == 0)
    r.fail("big-endian GGUF is not supported (version field reads " + std::to_string(g->version_) + ")");
  if (g->version_ != 2 && g->version_ != 3)
    r.fail("GGUF version " + std::to_string(g->version_) + " is not supported (only versions 2 and 3 are)");
  // Bounds from the smallest possible entries: a tensor info is at least a
  // name length, n_dims, one dim, a type and an offset; a key-value pair a
  // key length, a type and one byte.
  const uint64_t n_tensors = r.count("tensor count", 8 + 4 + 8 + 4 + 8);
  const uint64_t n_kv = r.count("metadata count", 8 + 4 + 1);

  // Metadata.
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.str("metadata key " + std::to_string(i));
    if (key.empty()) r.fail("metadata key " + std::to_string(i) + " is empty");
    if (g->metadata_.contains(key)) r.fail("metadata key \"" + key + "\" appears twice");
    const GgufType t = r.type(key, "value type of \"" + key + "\"");
    GgufType et = t;
    if (t == GgufType::Array) {
      // Peek the element type for array_type(); value() reads it again.
      r.need(4, "array element type of \"" + key + "\"");
      uint32_t raw;
      std::memcpy(&raw, data + r.pos(), 4);
      et = valid_type(raw) ? (GgufType)raw : GgufType::Array;
    }
    g->metadata_[key] = r.value(t, key, 0);
    g->types_[key] = {t, et};
  }

  GgufType at;
  if (g->value_type("general.alignment", &at)) {
    if (at != GgufType::U32)
      r.fail(std::string("general.alignment must be a u32, not ") + gguf_type_name(at));
    const uint64_t a = g->metadata_["general.alignment"].get<uint64_t>();
    if (a == 0 || (a & (a - 1)) != 0) r.fail("general.alignment " + std::to_string(a) + " is not a power of 2");
    g->alignment_ = a;
  }

  // Tensor infos.
  g->tensors_.reserve((size_t)n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    ti.name = r.str("tensor name " + std::to_string(i));
    const std::string tn = "tensor \"" + ti.name + "\"";
    if (g->by_name_.count(ti.name)) r.fail(tn + " appears twice");
    const uint32_t n_dims = r.get<uint32_t>(tn + " dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail(tn + " has " + std::to_string(n_dims) + " dimensions (must be 1 to " + std::to_string(kMaxDims) + ")");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.get<uint64_t>(tn + " dimension " + std::to_string(d));
      if (ne == 0) r.fail(tn + " has size 0 along dimension " + std::to_string(d));
      if (ne > (uint64_t)INT64_MAX)
        r.fail(tn + " dimension " + std::to_string(d) + " is " + std::to_string((int64_t)ne) + " (negative)");
      if (__builtin_mul_overflow(numel, (int64_t)ne, &numel)) r.fail(tn + " has more elements than fit in 64 bits");
      ti.ne.push_back(ne);
    }
    ti.shape.assign(ti.ne.rbegin(), ti.ne.rend());
    ti.ggml_type = r.get<uint32_t>(tn + " type");
    if (!dtype_from_ggml_type(ti.ggml_type, &ti.dtype)) {
      const char* known = ggml_type_name(ti.ggml_type);
      if (known)
        r.fail(tn + " is stored as " + known + " (ggml type " + std::to_string(ti.ggml_type) +
               "), which bonfire cannot read");
      r.fail(tn + " has unknown ggml type " + std::to_string(ti.ggml_type));
    }
    const int64_t block = dtype_block(ti.dtype);
    if ((int64_t)ti.ne[0] % block != 0)
      r.fail(tn + " rows have " + std::to_string(ti.ne[0]) + " elements, not a multiple of " + dtype_name(ti.dtype) +
             "'s block of " + std::to_string(block));
    int64_t bytes;
    if (__builtin_mul_overflow(numel / block, dtype_block_bytes(ti.dtype), &bytes))
      r.fail(tn + " is larger than 2^63 bytes");
    ti.bytes = (uint64_t)bytes;
    ti.offset = r.get<uint64_t>(tn + " data offset");
    g->by_name_[ti.name] = g->tensors_.size();
    g->tensors_.push_back(std::move(ti));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t a = g->alignment_;
  const uint64_t pad = (a - r.pos() % a) % a;
  g->data_offset_ = r.pos() + pad;
  if (n_tensors > 0 && g->data_offset_ > size)
    r.fail("truncated: the data section would start at offset " + std::to_string(g->data_offset_) +
           " but the file has " + std::to_string(size) + " bytes");
  const uint64_t data_size = n_tensors > 0 ? size - g->data_offset_ : 0;

  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& ti : g->tensors_) {
    const std::string tn = "tensor \"" + ti.name + "\"";
    if (ti.offset % a != 0)
      r.fail(tn + " data offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
             std::to_string(a));
    if (ti.offset > data_size || ti.bytes > data_size - ti.offset)
      r.fail("truncated: " + tn + " needs bytes [" + std::to_string(ti.offset) + ", +" + std::to_string(ti.bytes) +
             ") of a data section of " + std::to_string(data_size) + " bytes");
    if ((g->data_offset_ + ti.offset) % (uint64_t)dtype_align(ti.dtype) != 0)
      r.fail(tn + " starts at file offset " + std::to_string(g->data_offset_ + ti.offset) + ", misaligned for " +
             dtype_name(ti.dtype));
    order.push_back(&ti);
  }
  std::sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->offset < y->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset)
      r.fail("tensors \"" + order[i - 1]->name + "\" and \"" + order[i]->name + "\" overlap");
  }
  return g;
}

bool GgufFile::value_type(const std::string& key, GgufType* out) const {
  auto it = types_.find(key);
  if (it == types_.end()) return false;
  *out = it->second.first;
  return true;
}

bool GgufFile::array_type(const std::string& key, GgufType* out) const {
  auto it = types_.find(key);
  if (it == types_.end() || it->second.first != GgufType::Array) return false;
  *out = it->second.second;
  return true;
}

std::string GgufFile::architecture() const {
  auto it = metadata_.find("general.architecture");
  return it != metadata_.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const GgufTensorInfo* GgufFile::find(const std::string& tensor_name) const {
  auto it = by_name_.find(tensor_name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(const std::string& tensor_name) const {
  const GgufTensorInfo* ti = find(tensor_name);
  if (!ti) throw Error(ErrorCode::BadGraph, name_ + ": no tensor \"" + tensor_name + "\"");
  return tensor(*ti);
}

Tensor GgufFile::tensor(const GgufTensorInfo& ti) const {
  // Weights are only read; the view's pointer is non-const because Tensor's is.
  void* p = const_cast<uint8_t*>(data_ + data_offset_ + ti.offset);
  return Tensor::view(ti.dtype, ti.shape, p, std::const_pointer_cast<void>(owner_));
}

}  // namespace bonfire
