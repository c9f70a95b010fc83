// One message on the worker link (docs/NETWORK.md): a WebSocket binary frame
// holding a JSON header and the raw bytes of the tensors it carries, so
// activations travel as little-endian f32, never as JSON numbers.
//
//   u32 LE header length | header JSON (UTF-8) | tensor bytes ...
//
// The header's "tensors" lists {"name", "shape", "offset", "bytes"} for each
// tensor, offsets counted from the end of the header. Decoding trusts
// nothing: every offset, size and shape is checked against the frame and
// the receiver's limits before a byte is copied.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "graph/limits.h"

namespace bonfire::net {

using nlohmann::json;

struct Message {
  json header = json::object();  // "type" and the message's fields
  std::map<std::string, Tensor> tensors;

  Message() = default;
  explicit Message(json h) : header(std::move(h)) {}
  std::string type() const { return header.value("type", ""); }
};

// Packed tensors are dequantized: only f32 travels.
std::string encode_message(const Message& m);
// Throws Error(BadGraph) naming what is malformed, or Error(TooLarge).
Message decode_message(std::string_view bytes, const Limits& limits);

}  // namespace bonfire::net
