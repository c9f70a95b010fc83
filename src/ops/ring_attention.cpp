// ring_attention (protocol extension, feature ext.ring_attention;
// docs/PROTOCOL-EXTENSIONS.md): causal sliding-window attention whose cache
// is a ring of R rows, so a window layer keeps R rows of keys and values
// however long the context grows. Inputs: q [T, heads*headDim], the ring
// kRing [R, kvHeads*headDim] and vRing [R, kvHeads*vHeadDim] (session
// tensors, advanced in place), and the step's own k [T, kvHeads*headDim]
// and v [T, kvHeads*vHeadDim]. Params: attention's heads, headDim, kvHeads,
// vHeadDim, scale, softcap, ALiBi, posOffset, and window (required, at most
// R + 1).
//
// Before the call the ring holds the latest R positions before posOffset:
// position p in row p mod R. Query t (position posOffset + t) sees the
// positions in (pos + t − window, pos + t]: the older ones from the ring,
// the step's own from k and v, so a prefill of any length is exact with a
// ring of window − 1 rows. Then the step's last min(T, R) rows are written
// into the ring.
#include <algorithm>

#include "ops/attention_core.h"

namespace bonfire {

namespace {

AttnConfig parse_ring(const Params& p) {
  AttnConfig c = parse_attention(p);
  check(p.has("window"), "ring_attention: param window is required");
  check(p.flag("causal", true), "ring_attention is causal only");
  check(c.pos_offset >= 0,
        [&] { return "ring_attention: posOffset must be >= 0, got " + std::to_string(c.pos_offset); });
  return c;
}

Shape infer_ring(const std::vector<TensorDesc>& in, const Params& p) {
  const char* names[] = {"q", "kRing", "vRing", "k", "v"};
  for (size_t i = 0; i < 5; ++i) {
    check_f32(in, i, names[i]);
    check(in[i].shape.size() == 2,
          [&] { return std::string(names[i]) + " must have rank 2, got " + shape_str(in[i].shape); });
  }
  const AttnConfig c = parse_ring(p);
  const int64_t T = in[0].shape[0], R = in[1].shape[0];
  const int64_t kw = c.kv_heads * c.head_dim, vw = c.kv_heads * c.v_head_dim;
  check(in[0].shape[1] == c.heads * c.head_dim, [&] {
    return "q must be heads*headDim = " + std::to_string(c.heads * c.head_dim) + " wide, got " + shape_str(in[0].shape);
  });
  check(R > 0 && in[2].shape[0] == R, [&] {
    return "kRing and vRing must have the same rows (R > 0), got " + shape_str(in[1].shape) + " and " +
           shape_str(in[2].shape);
  });
  check(in[1].shape[1] == kw && in[3].shape[1] == kw, [&] {
    return "kRing and k must be kvHeads*headDim = " + std::to_string(kw) + " wide, got " + shape_str(in[1].shape) +
           " and " + shape_str(in[3].shape);
  });
  check(in[2].shape[1] == vw && in[4].shape[1] == vw, [&] {
    return "vRing and v must be kvHeads*vHeadDim = " + std::to_string(vw) + " wide, got " + shape_str(in[2].shape) +
           " and " + shape_str(in[4].shape);
  });
  check(in[3].shape[0] == T && in[4].shape[0] == T,
        [&] { return "k and v must have q's " + std::to_string(T) + " rows"; });
  check(c.window <= R + 1, [&] {
    return "ring_attention: window " + std::to_string(c.window) +
           " needs a ring of at least window - 1 = " + std::to_string(c.window - 1) + " rows, got " + std::to_string(R);
  });
  return {T, c.heads * c.v_head_dim};
}

void run_ring(const OpInputs& in, const Params& p, Tensor& out) {
  const AttnConfig c = parse_ring(p);
  const int64_t T = in[0]->shape[0], R = in[1]->shape[0], pos0 = c.pos_offset;
  const int64_t kw = c.kv_heads * c.head_dim, vw = c.kv_heads * c.v_head_dim;
  float *kr = in[1]->f32(), *vr = in[2]->f32();
  const float *k = in[3]->f32(), *v = in[4]->f32();
  attend(c, in[0]->f32(), T, std::min(c.window, R + T), {}, out.f32(), [&](int64_t pos, std::vector<KeyRun>& runs) {
    const int64_t first = std::max<int64_t>(0, pos - c.window + 1);
    // From the ring: positions [first, pos0 - 1], in row order p mod R, which
    // wraps at most once (the ring holds R >= window - 1 positions).
    if (first < pos0) {
      const int64_t a = first % R, n = pos0 - first;
      const int64_t head = std::min(n, R - a);
      runs.push_back({kr + a * kw, vr + a * vw, head, first, 0});
      if (n > head) runs.push_back({kr, vr, n - head, first + head, 0});
    }
    // The step's own: positions [max(first, pos0), pos].
    const int64_t s = std::max(first, pos0);
    if (s <= pos) runs.push_back({k + (s - pos0) * kw, v + (s - pos0) * vw, pos - s + 1, s, 0});
  });
  // Then the ring takes the step's latest rows.
  for (int64_t t = std::max<int64_t>(0, T - R); t < T; ++t) {
    const int64_t row = (pos0 + t) % R;
    std::copy(k + t * kw, k + (t + 1) * kw, kr + row * kw);
    std::copy(v + t * vw, v + (t + 1) * vw, vr + row * vw);
  }
}

}  // namespace

void register_ext_ring_attention_ops(std::vector<OpDef>& ops) {
  OpDef op;
  op.name = "ring_attention";
  op.min_inputs = op.max_inputs = 5;
  op.params = {
      {"heads", ParamType::Number, false},  {"headDim", ParamType::Number, false},
      {"kvHeads", ParamType::Number, true}, {"vHeadDim", ParamType::Number, true},
      {"causal", ParamType::Bool, true},    {"posOffset", ParamType::Number, true},
      {"scale", ParamType::Number, true},   {"softcap", ParamType::Number, true},
      {"window", ParamType::Number, false}, {"alibi", ParamType::Bool, true},
      {"alibiMax", ParamType::Number, true}, {"alibiSlopes", ParamType::Array, true},
  };
  op.features = {ext_feature("ext.ring_attention")};
  op.infer = infer_ring;
  op.run = run_ring;
  op.writes_inputs = (1u << 1) | (1u << 2);
  ops.push_back(op);
}

}  // namespace bonfire
