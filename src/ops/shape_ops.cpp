// Ops that move values without arithmetic: reshape, slice, concat, transpose,
// zeros, causal_mask, embedding, and cache_write (in place into a cache).
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/json_parse.h"
#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {

namespace {

// The manifest allows the leading axis or the last one (-1 or rank-1).
bool is_last_axis(const TensorDesc& t, const Params& p) {
  const int64_t axis = p.int_("axis", 0);
  const int64_t rank = (int64_t)t.shape.size();
  if (axis == 0 && rank > 1) return false;
  if (axis == 0 || axis == -1 || axis == rank - 1) return true;
  bad_graph("param axis must be 0 or the last axis (-1), got " + std::to_string(axis));
}

// --- reshape ---------------------------------------------------------------

Shape infer_reshape(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "input");
  const json& js = *p.get("shape");
  Shape s;
  int infer_at = -1;
  for (const auto& v : js) {
    const std::optional<int64_t> d = whole_number(v, kMaxExactInteger);
    check(d && *d >= -1, [&] { return "param shape must hold integers >= 0 or one -1, got " + dump_json(js); });
    if (*d == -1) {
      check(infer_at < 0, "param shape may have only one -1");
      infer_at = (int)s.size();
    }
    s.push_back(*d);
  }
  check(!s.empty(), "param shape must not be empty");
  const int64_t n = in[0].numel();
  if (infer_at >= 0) {
    Shape known = s;
    known.erase(known.begin() + infer_at);
    const int64_t k = checked_numel(known.data(), known.size(), n);  // -1 when over n
    check(k > 0 && n % k == 0,
          [&] { return "cannot infer -1 in " + dump_json(js) + " for " + std::to_string(n) + " values"; });
    s[infer_at] = n / k;
  }
  check(checked_numel(s.data(), s.size(), n) == n,
        [&] { return "reshape " + shape_str(in[0].shape) + " to " + dump_json(js) + " changes the element count"; });
  return s;
}

void run_copy(const OpInputs& in, const Params&, Tensor& out) {
  std::memcpy(out.data, in[0]->data, out.numel() * sizeof(float));
}

// --- slice -----------------------------------------------------------------

Shape infer_slice(const std::vector<TensorDesc>& in, const Params& p) {
  const TensorDesc& a = in[0];
  check(!a.shape.empty(), "input must have at least one axis");
  const bool last = is_last_axis(a, p);
  const int64_t dim = last ? a.shape.back() : a.shape[0];
  const int64_t start = p.int_("start"), length = p.int_("length");
  check(start >= 0 && length >= 0 && start <= dim && length <= dim - start, [&] {
    return "slice [" + std::to_string(start) + ", " + std::to_string(start + length) + ") is outside an axis of " +
           std::to_string(dim);
  });
  Shape s = a.shape;
  (last ? s.back() : s[0]) = length;
  return s;
}

DType slice_dtype(const std::vector<TensorDesc>& in, const Params& p) {
  return is_last_axis(in[0], p) ? DType::F32 : in[0].dtype;
}

void run_slice(const OpInputs& in, const Params& p, Tensor& out) {
  const Tensor& a = *in[0];
  const int64_t start = p.int_("start"), length = p.int_("length");
  if (!is_last_axis(a.desc(), p)) {
    // Leading axis: a contiguous run of rows. Packed weights stay packed.
    const int64_t rows_per = a.shape[0] ? a.rows() / a.shape[0] : 0;
    if (a.packed() || !out.data) {  // unallocated: a weight's rows (OpDef::views_weight)
      out = Tensor::view(a.dtype, out.shape, const_cast<uint8_t*>(a.row(start * rows_per)), a.owner);
    } else {
      std::memcpy(out.data, a.f32() + start * rows_per * a.cols(), out.numel() * sizeof(float));
    }
    return;
  }
  if (!out.data) out = Tensor::empty(out.shape);
  const int64_t C = a.cols();
  std::vector<float> row(a.packed() ? C : 0);
  for (int64_t r = 0; r < a.rows(); ++r) {
    const float* src = a.f32() + r * C;
    if (a.packed()) {
      dequantize_row(a.dtype, a.row(r), row.data(), C);
      src = row.data();
    }
    std::memcpy(out.f32() + r * length, src + start, length * sizeof(float));
  }
}

// --- concat ----------------------------------------------------------------

Shape infer_concat(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "a");
  check_f32(in, 1, "b");
  const TensorDesc &a = in[0], &b = in[1];
  check(!a.shape.empty() && a.shape.size() == b.shape.size(),
        [&] { return "a " + shape_str(a.shape) + " and b " + shape_str(b.shape) + " must have the same rank"; });
  const bool last = is_last_axis(a, p);
  const size_t axis = last ? a.shape.size() - 1 : 0;
  for (size_t i = 0; i < a.shape.size(); ++i)
    check(i == axis || a.shape[i] == b.shape[i],
          [&] { return "a " + shape_str(a.shape) + " and b " + shape_str(b.shape) + " differ off the concat axis"; });
  Shape s = a.shape;
  s[axis] += b.shape[axis];
  return s;
}

void run_concat(const OpInputs& in, const Params& p, Tensor& out) {
  const Tensor &a = *in[0], &b = *in[1];
  if (!is_last_axis(a.desc(), p)) {
    std::memcpy(out.f32(), a.f32(), a.numel() * sizeof(float));
    std::memcpy(out.f32() + a.numel(), b.f32(), b.numel() * sizeof(float));
    return;
  }
  const int64_t ca = a.cols(), cb = b.cols();
  for (int64_t r = 0; r < a.rows(); ++r) {
    std::memcpy(out.f32() + r * (ca + cb), a.f32() + r * ca, ca * sizeof(float));
    std::memcpy(out.f32() + r * (ca + cb) + ca, b.f32() + r * cb, cb * sizeof(float));
  }
}

// --- transpose ---------------------------------------------------------------

Shape infer_transpose(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "input");
  check(in[0].shape.size() == 2, [&] { return "transpose takes a 2-D tensor, got " + shape_str(in[0].shape); });
  return {in[0].shape[1], in[0].shape[0]};
}

void run_transpose(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t R = in[0]->shape[0], C = in[0]->shape[1];
  const float* a = in[0]->f32();
  float* o = out.f32();
  parallel_for(C, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = 0; r < R; ++r) o[c * R + r] = a[r * C + c];
  });
}

// --- zeros -------------------------------------------------------------------

Shape infer_zeros(const std::vector<TensorDesc>&, const Params& p) {
  Shape s;
  for (const auto& v : *p.get("shape")) {
    const std::optional<int64_t> d = whole_number(v, kMaxExactInteger);
    check(d && *d >= 0, [&] { return "param shape must hold integers >= 0, got " + dump_json(*p.get("shape")); });
    s.push_back(*d);
  }
  check(!s.empty(), "param shape must not be empty");
  return s;
}

void run_zeros(const OpInputs&, const Params&, Tensor& out) {
  // Tensor::zeros gives large tensors lazily zeroed pages (a session's KV
  // cache), which beats clearing the executor's buffer.
  out = Tensor::zeros(out.shape);
}

// --- causal_mask -------------------------------------------------------------

Shape infer_causal_mask(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "input");
  const Shape& s = in[0].shape;
  check(s.size() >= 2 && s[s.size() - 1] == s[s.size() - 2],
        [&] { return "causal_mask needs square trailing blocks [..., n, n], got " + shape_str(s); });
  return s;
}

void run_causal_mask(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t n = out.cols();
  const float* a = in[0]->f32();
  float* o = out.f32();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < out.rows(); ++r) {
    const int64_t i = r % n;
    for (int64_t j = 0; j < n; ++j) o[r * n + j] = j > i ? ninf : a[r * n + j];
  }
}

// --- embedding ---------------------------------------------------------------

Shape infer_embedding(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "ids");
  check(in[1].shape.size() == 2, [&] { return "table must be 2-D [V, C], got " + shape_str(in[1].shape); });
  Shape s = in[0].shape;
  if (s.size() == 2 && s[1] == 1) s.pop_back();  // ids as a column [T, 1]
  s.push_back(in[1].shape[1]);
  return s;
}

void run_embedding(const OpInputs& in, const Params&, Tensor& out) {
  const Tensor& table = *in[1];
  const int64_t V = table.shape[0], C = table.shape[1];
  const float* ids = in[0]->f32();
  parallel_for(in[0]->numel(), 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out.f32() + t * C;
      const double id = std::nearbyint((double)ids[t]);
      if (!(id >= 0 && id < (double)V))  // also catches NaN
        std::memset(o, 0, C * sizeof(float));
      else
        dequantize_row(table.dtype, table.row((int64_t)id), o, C);
    }
  });
}

// --- cache_write -------------------------------------------------------------

Shape infer_cache_write(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "cache");
  check_f32(in, 1, "values");
  const TensorDesc &cache = in[0], &v = in[1];
  check(!cache.shape.empty() && !v.shape.empty(), "cache and values must have at least one axis");
  check(cache.cols() == v.cols(),
        [&] { return "values are " + std::to_string(v.cols()) + " wide, the cache " + std::to_string(cache.cols()); });
  const int64_t offset = p.int_("offset");
  check(offset >= 0 && offset <= cache.rows() && v.rows() <= cache.rows() - offset, [&] {
    return "writing rows [" + std::to_string(offset) + ", " + std::to_string(offset + v.rows()) +
           ") overflows a cache of " + std::to_string(cache.rows()) + " rows";
  });
  return cache.shape;
}

void run_cache_write(const OpInputs& in, const Params& p, Tensor& out) {
  const int64_t offset = p.int_("offset");
  const int64_t bytes = in[1]->numel() * static_cast<int64_t>(sizeof(float));
  out.prepare_write(offset * out.cols() * static_cast<int64_t>(sizeof(float)), bytes);
  std::memcpy(out.f32() + offset * out.cols(), in[1]->f32(), bytes);
}

OpDef def(const char* name, int min_in, int max_in, Shape (*infer)(const std::vector<TensorDesc>&, const Params&),
          void (*run)(const OpInputs&, const Params&, Tensor&)) {
  OpDef d;
  d.name = name;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.infer = infer;
  d.run = run;
  return d;
}

}  // namespace

void register_shape_ops(std::vector<OpDef>& ops) {
  OpDef reshape = def("reshape", 1, 1, infer_reshape, run_copy);
  reshape.params = {{"shape", ParamType::Array, false}};
  ops.push_back(reshape);

  OpDef slice = def("slice", 1, 1, infer_slice, run_slice);
  slice.params = {{"start", ParamType::Number, false},
                  {"length", ParamType::Number, false},
                  {"axis", ParamType::Number, true}};
  slice.out_dtype = slice_dtype;
  slice.packed_inputs = 1u;
  slice.views_weight = true;
  ops.push_back(slice);

  OpDef concat = def("concat", 2, 2, infer_concat, run_concat);
  concat.params = {{"axis", ParamType::Number, true}};
  ops.push_back(concat);

  ops.push_back(def("transpose", 1, 1, infer_transpose, run_transpose));

  OpDef zeros = def("zeros", 0, 0, infer_zeros, run_zeros);
  zeros.params = {{"shape", ParamType::Array, false}};
  ops.push_back(zeros);

  ops.push_back(def("causal_mask", 1, 1, infer_causal_mask, run_causal_mask));

  OpDef embedding = def("embedding", 2, 2, infer_embedding, run_embedding);
  embedding.packed_inputs = 1u << 1;
  embedding.rows = RowRule::Gather;
  ops.push_back(embedding);

  OpDef cw = def("cache_write", 2, 2, infer_cache_write, run_cache_write);
  cw.params = {{"offset", ParamType::Number, false}};
  cw.mutates_input = 0;
  ops.push_back(cw);
}

}  // namespace bonfire
