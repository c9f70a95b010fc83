#include "model/gguf_names.h"

#include "core/error.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

const char* find_rename(const GgufRenames& renames, const std::string& key) {
  for (const GgufRename& r : renames)
    if (key == r.gguf) return r.hf;
  return nullptr;
}

// Splits "blk.12.attn_q.weight" into layer 12 and "attn_q.weight"; -1 for a
// name outside the blocks.
int64_t split_layer(const std::string& name, std::string* rest) {
  if (name.compare(0, 4, "blk.") != 0) {
    *rest = name;
    return -1;
  }
  size_t i = 4;
  int64_t layer = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < 100000000) layer = layer * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') {
    *rest = name;
    return -1;
  }
  *rest = name.substr(i + 1);
  return layer;
}

bool hf_name_of(const GgufNames& names, const std::string& gguf_name, std::string* hf) {
  std::string rest;
  const int64_t layer = split_layer(gguf_name, &rest);
  const GgufRenames& renames = layer >= 0 ? names.block : names.global;
  const std::string prefix = layer >= 0 ? names.block_prefix + std::to_string(layer) + "." : std::string();
  if (const char* r = find_rename(renames, rest)) {  // the suffix itself is renamed
    *hf = prefix + r;
    return true;
  }
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return false;
  const char* r = find_rename(renames, rest.substr(0, dot));
  if (!r) return false;
  *hf = prefix + r + rest.substr(dot);
  return true;
}

}  // namespace

bool gguf_to_hf_name(const std::string& arch, const std::string& gguf_name, std::string* hf) {
  const GgufArch* entry = nullptr;
  return find_gguf_family(arch, &entry) && hf_name_of(entry->names, gguf_name, hf);
}

WeightStore load_gguf_weights(const GgufFile& file, const GgufLoadOptions& options) {
  const std::string arch = file.architecture();
  const GgufArch* entry = nullptr;
  find_gguf_family(arch, &entry);
  WeightStore store;
  for (const GgufTensorInfo& ti : file.tensors()) {
    Tensor t = file.tensor(ti);
    std::string hf;
    if (!entry || !hf_name_of(entry->names, ti.name, &hf)) {
      store.add(ti.name, t, file.name());
      continue;
    }
    const size_t e = hf.find("{e}");
    if (e != std::string::npos) {
      if (t.shape.size() != 3)
        gguf_fix::fail(file, "tensor \"" + ti.name + "\" should be [experts, rows, cols], is " + shape_str(t.shape));
      const Shape one = {t.shape[1], t.shape[2]};
      const int64_t stride = row_bytes(t.dtype, one[1]) * one[0];
      for (int64_t x = 0; x < t.shape[0]; ++x) {
        std::string name = hf;
        name.replace(e, 3, std::to_string(x));
        store.add(name, Tensor::view(t.dtype, one, static_cast<uint8_t*>(t.data) + x * stride, t.owner), file.name());
      }
      continue;
    }
    if (entry->fix_tensor) {
      std::string rest;
      const int64_t layer = split_layer(ti.name, &rest);
      entry->fix_tensor({file, arch, ti.name, layer, rest, options}, hf, t);
    }
    store.add(hf, t, file.name());
  }
  if (entry && entry->finish) entry->finish(file, options, store);
  return store;
}

}  // namespace bonfire
