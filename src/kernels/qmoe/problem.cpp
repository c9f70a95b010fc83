// What every QMoE pass reads first: the attributes, the bound tensors and the
// current token chunk; and the activations, in ORT's float formulas.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/qmoe/qmoe.h"

namespace bonfire::kernels::qmoe {

namespace {

[[noreturn]] void broken(const std::string& what) { throw Error(ErrorCode::Internal, "QMoE pass: " + what); }

const Buffer* find(PassArgs& a, const std::string& name) {
  auto it = a.buffers.find(name);
  return it == a.buffers.end() ? nullptr : &it->second;
}

int64_t attr_int(const nlohmann::json& attrs, const char* name, int64_t fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() || it->is_null() ? fallback : it->get<int64_t>();
}

float attr_float(const nlohmann::json& attrs, const char* name, float fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() || it->is_null() ? fallback : it->get<float>();
}

}  // namespace

Buffer& bound(PassArgs& a, const std::string& name, const char* dtype, int64_t min_elems) {
  auto it = a.buffers.find(name);
  if (it == a.buffers.end()) broken("no buffer bound as \"" + name + "\"");
  Buffer& b = it->second;
  if (b.dtype != dtype) broken("\"" + name + "\" is " + b.dtype + ", expected " + dtype);
  const int64_t width = b.dtype == "uint8" ? 1 : 4;
  if ((int64_t)b.size_bytes() < min_elems * width)
    broken("\"" + name + "\" holds " + std::to_string(b.size_bytes() / width) + " elements, needs " +
           std::to_string(min_elems));
  return b;
}

QMatrix Problem::fc1_of(int64_t e) const {
  QMatrix m;
  m.bits = bits;
  m.midpoint = midpoint;
  m.rows = fc1_rows;
  m.cols = hidden;
  m.row_bytes = bits == 4 ? hidden / 2 : hidden;
  m.scale_blocks = fc1_blocks;
  m.data = fc1 + e * m.rows * m.row_bytes;
  m.scales = fc1_scales + e * m.rows * m.scale_blocks;
  return m;
}

QMatrix Problem::fc2_of(int64_t e) const {
  QMatrix m;
  m.bits = bits;
  m.midpoint = midpoint;
  m.rows = hidden;
  m.cols = inter;
  m.row_bytes = bits == 4 ? inter / 2 : inter;
  m.scale_blocks = fc2_blocks;
  m.data = fc2 + e * m.rows * m.row_bytes;
  m.scales = fc2_scales + e * m.rows * m.scale_blocks;
  return m;
}

Problem problem_of(PassArgs& a, bool need_weights) {
  Problem p;
  const nlohmann::json& at = a.attrs;
  p.topk = attr_int(at, "k", 1);
  p.bits = (int)attr_int(at, "expert_weight_bits", 4);
  if (p.bits != 4 && p.bits != 8) broken("expert_weight_bits " + std::to_string(p.bits));
  p.midpoint = p.bits == 4 ? 8 : 128;
  const std::string act = at.value("activation_type", std::string("relu"));
  p.swiglu = act == "swiglu";
  p.alpha = attr_float(at, "activation_alpha", 1.0f);
  p.beta = attr_float(at, "activation_beta", 0.0f);
  p.limit = attr_float(at, "swiglu_limit", std::numeric_limits<float>::infinity());

  // The shapes: any of the bound tensors that carry them.
  const Buffer* in = find(a, "input");
  const Buffer* out = find(a, "output");
  const Buffer* shape_src = in ? in : out;
  if (!shape_src || shape_src->shape.empty()) broken("neither input nor output is bound");
  p.hidden = shape_src->shape.back();
  p.tokens = p.hidden > 0 ? shape_src->numel() / p.hidden : 0;
  if (in) p.input = in->as<float>();

  const Buffer* router = find(a, "router_probs");
  const Buffer* w1 = find(a, "fc1_experts_weights");
  const Buffer* w2 = find(a, "fc2_experts_weights");
  if (router && router->shape.size() == 2) p.experts = router->shape[1];
  if (router) p.router = router->as<float>();
  if (w1 && w1->shape.size() == 3) {
    p.experts = w1->shape[0];
    p.fc1_rows = w1->shape[1];
  }
  if (w2 && w2->shape.size() == 3) p.inter = w2->shape[2] * (p.bits == 4 ? 2 : 1);
  if (w1 && w1->shape.size() == 3) p.inter = p.fc1_rows / (p.swiglu ? 2 : 1);
  p.fc1_rows = p.inter * (p.swiglu ? 2 : 1);

  if (need_weights) {
    const int64_t pack = p.bits == 4 ? 2 : 1;
    p.fc1 = bound(a, "fc1_experts_weights", "uint8", p.experts * p.fc1_rows * (p.hidden / pack)).as<uint8_t>();
    p.fc2 = bound(a, "fc2_experts_weights", "uint8", p.experts * p.hidden * (p.inter / pack)).as<uint8_t>();
    const Buffer& s1 = bound(a, "fc1_scales", "float32", p.experts * p.fc1_rows);
    const Buffer& s2 = bound(a, "fc2_scales", "float32", p.experts * p.hidden);
    p.fc1_blocks = s1.shape.size() == 3 ? s1.shape[2] : 1;
    p.fc2_blocks = s2.shape.size() == 3 ? s2.shape[2] : 1;
    if (p.fc1_blocks < 1 || p.fc2_blocks < 1 || (p.hidden / pack) % p.fc1_blocks != 0 ||
        (p.inter / pack) % p.fc2_blocks != 0)
      broken("scale blocks do not divide the rows");
    bound(a, "fc1_scales", "float32", p.experts * p.fc1_rows * p.fc1_blocks);
    bound(a, "fc2_scales", "float32", p.experts * p.hidden * p.fc2_blocks);
    p.fc1_scales = s1.as<float>();
    p.fc2_scales = s2.as<float>();
  }

  if (a.repeat_index >= 0) {
    p.chunk_tokens = std::max<int64_t>(1, (int64_t)a.num("hiddenChunkTokens"));
    p.token_offset = a.repeat_index * p.chunk_tokens;
    p.token_count = std::clamp<int64_t>(p.tokens - p.token_offset, 0, p.chunk_tokens);
  } else {
    p.chunk_tokens = p.token_count = p.tokens;
  }
  return p;
}

void activate(const Problem& p, const float* fc1_out, int64_t r0, int64_t n, float* hidden) {
  if (!p.swiglu) {
    // std::max(0.0f, x) as ORT writes it: NaN and -0 give +0.
    for (int64_t i = 0; i < n; ++i) hidden[r0 + i] = 0.0f < fc1_out[i] ? fc1_out[i] : 0.0f;
    return;
  }
  // Interleaved SwiGLU: the gate (even row) is clamped from above only, the
  // linear part (odd row) on both sides; alpha scales the gate inside the
  // sigmoid, beta is added to the linear part. Each step rounds to float in
  // ORT's order.
  const float limit = p.limit, alpha = p.alpha, beta = p.beta;
  for (int64_t i = 0; i + 1 < n; i += 2) {
    float gate = fc1_out[i], linear = fc1_out[i + 1];
    gate = std::min(gate, limit);
    linear = std::min(std::max(linear, -limit), limit);  // std::clamp as libstdc++ does it
    const float sigmoid_arg = alpha * gate;
    const float sigmoid_out = 1.0f / (1.0f + std::exp(-sigmoid_arg));
    const float swish_out = gate * sigmoid_out;
    hidden[(r0 + i) / 2] = swish_out * (linear + beta);
  }
}

}  // namespace bonfire::kernels::qmoe
