#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_parse.h"

namespace bonfire {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::BadGraph, path + ": " + what);
}

// A header larger than this is not a header (the format caps it at 100 MB).
constexpr uint64_t kMaxHeader = 100u << 20;
constexpr int64_t kMaxElements = int64_t(1) << 40;

struct DtypeInfo {
  const char* name;
  DType dtype;
  int bytes;
};

bool dtype_for(const std::string& s, DType* t, int* bytes) {
  // I8/U8 (and I16/I32) hold quantized checkpoints' integer data and scales'
  // companions; ops read them as plain numbers.
  static const DtypeInfo kTypes[] = {{"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2},
                                     {"I8", DType::I8, 1},   {"U8", DType::U8, 1},   {"I16", DType::I16, 2},
                                     {"I32", DType::I32, 4}};
  for (const auto& d : kTypes) {
    if (s == d.name) {
      *t = d.dtype;
      *bytes = d.bytes;
      return true;
    }
  }
  return false;
}

}  // namespace

void load_safetensors_file(const std::string& path, WeightStore& store) {
  auto file = MappedFile::open(path);
  const uint64_t size = file->size();
  if (size < 8) fail(path, "shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);  // little-endian, as x86-64 is
  if (n > kMaxHeader || n > size - 8)
    fail(path, "header claims " + std::to_string(n) + " bytes but the file has " + std::to_string(size - 8) +
                   " after the length");
  const json header = parse_json(std::string_view(reinterpret_cast<const char*>(file->data()) + 8, n),
                                 path + ": header", JsonLimits{16, kMaxHeader});
  if (!header.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = size - data_start;

  std::vector<std::pair<uint64_t, uint64_t>> extents;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor \"" + name + "\"";
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() || !info.contains("shape") ||
        !info["shape"].is_array() || !info.contains("data_offsets") || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2)
      fail(path, where + " needs dtype, shape and data_offsets [begin, end]");
    DType dtype;
    int esize;
    const std::string ds = info["dtype"].get<std::string>();
    if (!dtype_for(ds, &dtype, &esize))
      fail(path, where + " has dtype \"" + ds + "\"; bonfire reads F32, F16, BF16, I8, U8, I16 and I32");
    Shape shape;
    int64_t numel = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned()) fail(path, where + " has a shape entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t)kMaxElements || (v && numel > kMaxElements / (int64_t)v))
        fail(path, where + " claims more than 2^40 elements");
      numel *= (int64_t)v;
      shape.push_back((int64_t)v);
    }
    if (shape.empty()) shape = {1};  // a scalar
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, where + " has data_offsets that are not non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail(path, where + " spans bytes [" + std::to_string(b) + ", " + std::to_string(e) + ") but the data section has " +
                     std::to_string(data_size));
    if (e - b != (uint64_t)numel * esize)
      fail(path, where + " has " + std::to_string(e - b) + " bytes; " + ds + " " + shape_str(shape) + " needs " +
                     std::to_string((uint64_t)numel * esize));
    extents.push_back({b, e});
    const uint8_t* p = file->data() + data_start + b;
    Tensor t;
    if (dtype == DType::F32 && reinterpret_cast<uintptr_t>(p) % 4 != 0) {
      // The format does not promise alignment; copy the rare unaligned f32.
      t = Tensor::empty(shape);
      std::memcpy(t.data, p, e - b);
    } else if (reinterpret_cast<uintptr_t>(p) % esize != 0) {
      // The same for f16, bf16, i16 and i32 (found by fuzz_safetensors): a
      // view would be read through a misaligned uint16_t/int32_t pointer,
      // which is undefined behaviour. A header length that is not a multiple
      // of 8 is enough to cause it.
      auto buf = std::shared_ptr<uint64_t[]>(new uint64_t[(e - b + 7) / 8]);
      std::memcpy(buf.get(), p, e - b);
      t = Tensor::view(dtype, shape, buf.get(), std::shared_ptr<void>(buf, buf.get()));
    } else {
      t = Tensor::view(dtype, shape, const_cast<uint8_t*>(p), file);
    }
    store.add(name, t, path);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i)
    if (extents[i].first < extents[i - 1].second && extents[i].first != extents[i].second)
      fail(path, "two tensors overlap at byte " + std::to_string(extents[i].first) + " of the data section");
}

void load_safetensors_folder(const std::string& dir, WeightStore& store) {
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json j = parse_json_file(index.string());
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) fail(index.string(), "has no weight_map object");
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        fail(index.string(), "weight_map[\"" + name + "\"] must be a file name in the folder");
      shards.insert(file.get<std::string>());
    }
    for (const auto& s : shards) load_safetensors_file((fs::path(dir) / s).string(), store);
    for (const auto& [name, file] : j["weight_map"].items())
      if (!store.find(name))
        fail(index.string(), "names \"" + name + "\" in " + file.get<std::string>() + ", which does not hold it");
    return;
  }
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec) fail(dir, "cannot list the folder (" + ec.message() + ")");
  if (files.empty()) fail(dir, "holds no .safetensors file");
  std::sort(files.begin(), files.end());
  for (const auto& f : files) load_safetensors_file(f.string(), store);
}

}  // namespace bonfire
