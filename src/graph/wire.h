// Tensors on the wire (PROTOCOL.md): {"shape": [...], "data": [...]} or
// {"shape": [...], "b64": "<little-endian f32>"}; non-finite values travel as
// the strings "NaN", "Infinity", "-Infinity".
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/tensor.h"

namespace bonfire {

struct Limits;

// Reads a wire tensor; `what` names it in errors ("input x"). Shapes are
// checked against `limits` before anything is allocated.
Tensor tensor_from_json(const nlohmann::json& j, const std::string& what, const Limits& limits);
// Writes an f32 tensor (packed tensors are dequantized) as data or b64.
nlohmann::json tensor_to_json(const Tensor& t, bool b64 = false);

std::string base64_encode(const void* data, size_t n);
// Returns false on characters outside the base64 alphabet or bad padding.
bool base64_decode(const std::string& in, std::string* out);

}  // namespace bonfire

namespace bonfire {
class Error;
// {"error", "code", "node"?, "feature"?} as PROTOCOL.md writes errors.
nlohmann::json error_to_json(const Error& e);
}  // namespace bonfire
