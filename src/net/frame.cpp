#include "net/frame.h"

#include <cstring>

#include "core/error.h"
#include "core/json_parse.h"

namespace bonfire::net {

std::string encode_message(const Message& m) {
  json header = m.header;
  json list = json::array();
  size_t offset = 0;
  std::vector<const Tensor*> order;
  std::vector<Tensor> converted;
  converted.reserve(m.tensors.size());
  for (const auto& [name, t] : m.tensors) {
    const Tensor* src = &t;
    if (t.packed()) {
      converted.push_back(to_f32(t));
      src = &converted.back();
    }
    const size_t bytes = static_cast<size_t>(src->numel()) * sizeof(float);
    list.push_back({{"name", name}, {"shape", src->shape}, {"offset", offset}, {"bytes", bytes}});
    order.push_back(src);
    offset += bytes;
  }
  header["tensors"] = list;
  const std::string h = header.dump();
  std::string out(4 + h.size() + offset, '\0');
  const uint32_t n = static_cast<uint32_t>(h.size());
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 4, h.data(), h.size());
  char* payload = out.data() + 4 + h.size();
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i]->numel() > 0)
      std::memcpy(payload + list[i]["offset"].get<size_t>(), order[i]->data, list[i]["bytes"].get<size_t>());
  return out;
}

Message decode_message(std::string_view bytes, const Limits& limits) {
  if (bytes.size() < 4) throw Error(ErrorCode::BadGraph, "link message: shorter than its 4-byte header length");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 4)
    throw Error(ErrorCode::BadGraph, "link message: header length " + std::to_string(n) + " runs past the frame (" +
                                         std::to_string(bytes.size()) + " bytes)");
  Message m;
  m.header = parse_json(bytes.substr(4, n), "link message header", JsonLimits{64, SIZE_MAX});
  if (!m.header.is_object() || !m.header.contains("type") || !m.header["type"].is_string())
    throw Error(ErrorCode::BadGraph, "link message: header is not an object with a string \"type\"");
  const size_t payload_size = bytes.size() - 4 - n;
  const char* payload = bytes.data() + 4 + n;
  const json list = m.header.value("tensors", json::array());
  if (!list.is_array()) throw Error(ErrorCode::BadGraph, "link message: \"tensors\" is not a list");
  int64_t total = 0;
  for (const auto& d : list) {
    if (!d.is_object() || !d.contains("name") || !d["name"].is_string() || !d.contains("shape") ||
        !d["shape"].is_array() || !d.contains("offset") || !d["offset"].is_number_unsigned())
      throw Error(ErrorCode::BadGraph, "link message: a tensor entry lacks name, shape or offset");
    const std::string name = d["name"];
    if (d["shape"].size() > static_cast<size_t>(limits.max_rank))
      throw Error(ErrorCode::TooLarge, "link message: tensor " + name + " has more than " +
                                           std::to_string(limits.max_rank) + " axes");
    Shape shape;
    for (const auto& x : d["shape"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        throw Error(ErrorCode::BadGraph, "link message: tensor " + name + " has a bad shape");
      shape.push_back(x.get<int64_t>());
    }
    const int64_t numel = checked_numel(shape.data(), shape.size(), limits.max_tensor_elements);
    if (numel < 0)
      throw Error(ErrorCode::TooLarge, "link message: tensor " + name + " has more than " +
                                           std::to_string(limits.max_tensor_elements) + " elements");
    total += numel * 4;
    if (total > limits.max_total_bytes)
      throw Error(ErrorCode::TooLarge, "link message: its tensors exceed " + std::to_string(limits.max_total_bytes) +
                                           " bytes");
    const size_t offset = d["offset"].get<size_t>();
    const size_t size = static_cast<size_t>(numel) * 4;
    if (offset > payload_size || size > payload_size - offset)
      throw Error(ErrorCode::BadGraph, "link message: tensor " + name + " runs past the frame");
    if (m.tensors.count(name)) throw Error(ErrorCode::BadGraph, "link message: tensor " + name + " appears twice");
    Tensor t = Tensor::empty(shape);
    if (size) std::memcpy(t.data, payload + offset, size);
    m.tensors.emplace(name, std::move(t));
  }
  m.header.erase("tensors");
  return m;
}

}  // namespace bonfire::net
