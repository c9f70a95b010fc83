// Rotary position embedding. Frequencies follow transformers'
// modeling_rope_utils.py scheme by scheme, in the same f32 arithmetic, so a
// model rotates exactly as it did in training; docs/OPS.md states the choices.
//
// A run builds one cos/sin table (row x frequency) and then rotates the rows
// in parallel: every head of a row shares its row's angles.
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "core/threads.h"
#include "ops/op.h"
#include "ops/rope.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kRowGrain = 16;

// Everything a rope node asks for, checked. Position-dependent choices
// (dynamic base, longrope's long/short factors) wait for `freqs`.
struct RopeConfig {
  int64_t head_dim = 0;
  int64_t rot_dim = 0;  // R: channels of each head that rotate
  bool interleaved = false;
  double base = 10000;
  double offset = 0;
  std::string type = "default";  // scaling.rope_type (or the legacy "type")
  // Fields of the scaling object; NaN when absent.
  double factor = NAN, max_pos = NAN, orig_max_pos = NAN;
  double low_freq_factor = NAN, high_freq_factor = NAN;
  double beta_fast = 32, beta_slow = 1, mscale = 0, mscale_all_dim = 0;
  bool truncate = true;
  std::vector<float> long_factor, short_factor;
  std::optional<double> scaling_attention;  // scaling.attention_factor
  std::vector<float> inv_freq;              // the invFreq param
  std::optional<double> attention;          // the attentionFactor param
};

std::string num_str(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string((int64_t)v);
  return std::to_string(v);
}

// `scaling.key`, or nullptr when absent or null.
const json* scaling_field(const json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || it->is_null()) return nullptr;
  return &*it;
}
// A number field: nullopt when absent, bad_graph when not a finite number.
std::optional<double> scaling_num(const json& s, const char* key) {
  const json* v = scaling_field(s, key);
  if (!v) return std::nullopt;
  check(v->is_number() && std::isfinite(v->get<double>()),
        [&] { return std::string("param scaling: ") + key + " must be a finite number"; });
  return v->get<double>();
}
double scaling_required(const json& s, const char* key, const std::string& type) {
  auto v = scaling_num(s, key);
  check(v.has_value(), [&] { return "param scaling: rope_type \"" + type + "\" needs " + key; });
  return *v;
}
std::vector<float> number_array(const json& a, const std::string& what, size_t n) {
  check(a.is_array(), [&] { return what + " must be an array of numbers"; });
  check(a.size() == n, [&] {
    return what + " must have " + std::to_string(n) + " values (rotaryDim/2), got " + std::to_string(a.size());
  });
  std::vector<float> out;
  for (const auto& x : a) {
    check(x.is_number() && std::isfinite(x.get<double>()), [&] { return what + " must hold finite numbers only"; });
    out.push_back((float)x.get<double>());
  }
  return out;
}

void parse_scaling(const json& s, RopeConfig& c) {
  check(s.is_object(), "param scaling must be an object (rope_scaling from config.json)");
  const json* t = scaling_field(s, "rope_type");
  if (!t) t = scaling_field(s, "type");
  if (t) {
    check(t->is_string(), "param scaling: rope_type must be a string");
    c.type = t->get<std::string>();
  }
  const std::string& type = c.type;
  check(type == "default" || type == "linear" || type == "dynamic" || type == "llama3" || type == "yarn" ||
            type == "longrope",
        [&] {
          return "param scaling: unknown rope_type \"" + type +
                 "\" (known: default, linear, dynamic, llama3, yarn, longrope)";
        });

  // rope_parameters (transformers 5) carry rope_theta; the base param wins.
  if (auto theta = scaling_num(s, "rope_theta")) c.base = *theta;
  c.max_pos = scaling_num(s, "max_position_embeddings").value_or(NAN);
  c.orig_max_pos = scaling_num(s, "original_max_position_embeddings").value_or(NAN);
  c.factor = scaling_num(s, "factor").value_or(NAN);
  c.scaling_attention = scaling_num(s, "attention_factor");
  const size_t half = (size_t)c.rot_dim / 2;

  if (type == "linear" || type == "dynamic" || type == "llama3") {
    c.factor = scaling_required(s, "factor", type);
    check(c.factor > 0, "param scaling: factor must be positive");
  }
  if (type == "dynamic") {
    c.max_pos = scaling_required(s, "max_position_embeddings", type);
    check(c.max_pos > 0, "param scaling: max_position_embeddings must be positive");
    check(c.rot_dim > 2, "param scaling: rope_type \"dynamic\" needs rotaryDim > 2");
  } else if (type == "llama3") {
    c.low_freq_factor = scaling_required(s, "low_freq_factor", type);
    c.high_freq_factor = scaling_required(s, "high_freq_factor", type);
    c.orig_max_pos = scaling_required(s, "original_max_position_embeddings", type);
    check(c.high_freq_factor != c.low_freq_factor,
          "param scaling: low_freq_factor and high_freq_factor must differ");
  } else if (type == "yarn") {
    // transformers 5: an explicit factor wins; without one it is the ratio
    // of the context lengths. The original length defaults to the current.
    if (std::isnan(c.orig_max_pos)) c.orig_max_pos = c.max_pos;
    check(!std::isnan(c.orig_max_pos),
          "param scaling: rope_type \"yarn\" needs original_max_position_embeddings (or max_position_embeddings)");
    check(c.orig_max_pos > 0, "param scaling: original_max_position_embeddings must be positive");
    if (std::isnan(c.factor)) {
      check(!std::isnan(c.max_pos), "param scaling: rope_type \"yarn\" needs factor (or max_position_embeddings)");
      c.factor = c.max_pos / c.orig_max_pos;
    }
    check(c.factor > 0, "param scaling: factor must be positive");
    // `x or default` in Python: absent, null and 0 all mean the default.
    c.beta_fast = scaling_num(s, "beta_fast").value_or(0);
    c.beta_slow = scaling_num(s, "beta_slow").value_or(0);
    if (c.beta_fast == 0) c.beta_fast = 32;
    if (c.beta_slow == 0) c.beta_slow = 1;
    check(c.beta_fast > 0 && c.beta_slow > 0, "param scaling: beta_fast and beta_slow must be positive");
    c.mscale = scaling_num(s, "mscale").value_or(0);
    c.mscale_all_dim = scaling_num(s, "mscale_all_dim").value_or(0);
    if (const json* tr = scaling_field(s, "truncate")) {
      check(tr->is_boolean(), "param scaling: truncate must be a boolean");
      c.truncate = tr->get<bool>();
    }
  } else if (type == "longrope") {
    const json* lf = scaling_field(s, "long_factor");
    const json* sf = scaling_field(s, "short_factor");
    check(lf && sf, "param scaling: rope_type \"longrope\" needs long_factor and short_factor");
    c.long_factor = number_array(*lf, "param scaling: long_factor", half);
    c.short_factor = number_array(*sf, "param scaling: short_factor", half);
    if (std::isnan(c.orig_max_pos)) c.orig_max_pos = c.max_pos;
    check(!std::isnan(c.orig_max_pos),
          "param scaling: rope_type \"longrope\" needs original_max_position_embeddings (or "
          "max_position_embeddings)");
    check(c.orig_max_pos > 1, "param scaling: original_max_position_embeddings must be greater than 1");
  }
}

RopeConfig parse_rope(const Params& p) {
  RopeConfig c;
  check(p.has("headDim"), "param headDim is required");
  c.head_dim = p.int_("headDim");
  check(c.head_dim > 0, [&] { return "param headDim must be positive, got " + std::to_string(c.head_dim); });
  c.rot_dim = p.int_("rotaryDim", c.head_dim);
  check(c.rot_dim > 0 && c.rot_dim <= c.head_dim, [&] {
    return "param rotaryDim must be in [2, headDim=" + std::to_string(c.head_dim) + "], got " +
           std::to_string(c.rot_dim);
  });
  check(c.rot_dim % 2 == 0, [&] { return "param rotaryDim must be even, got " + std::to_string(c.rot_dim); });
  c.interleaved = p.flag("interleaved", false);
  c.offset = p.num("offset", 0.0);
  check(std::isfinite(c.offset), "param offset must be a finite number");
  if (const json* s = p.get("scaling")) parse_scaling(*s, c);
  if (p.has("base")) c.base = p.num("base");
  check(std::isfinite(c.base) && c.base > 0 && c.base != 1,
        [&] { return "param base must be a positive number other than 1, got " + num_str(c.base); });
  if (const json* f = p.get("invFreq")) c.inv_freq = number_array(*f, "param invFreq", (size_t)c.rot_dim / 2);
  if (p.has("attentionFactor")) {
    c.attention = p.num("attentionFactor");
    check(std::isfinite(*c.attention), "param attentionFactor must be a finite number");
  }
  return c;
}

// base^(-2i/dim) as transformers computes it: exponent and power in f32.
std::vector<float> default_inv_freq(double base, int64_t dim) {
  std::vector<float> f(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) f[i] = 1.0f / std::pow((float)base, (float)(2 * i) / (float)dim);
  return f;
}

// The frequencies and the cos/sin multiplier for rows at positions
// [offset, offset + rows): dynamic and longrope depend on that length.
std::vector<float> freqs(const RopeConfig& c, int64_t rows, float* attention) {
  const int64_t R = c.rot_dim, half = R / 2;
  const double seq_len = c.offset + (double)rows;  // max(position) + 1
  double att = 1.0;
  std::vector<float> inv;
  if (c.type == "default") {
    inv = default_inv_freq(c.base, R);
  } else if (c.type == "linear") {
    inv = default_inv_freq(c.base, R);
    for (auto& f : inv) f /= (float)c.factor;
  } else if (c.type == "dynamic") {
    // NTK: beyond the trained length the base grows with the sequence.
    // transformers does this arithmetic on an f32 tensor (seq_len is one).
    if (seq_len > c.max_pos) {
      const float fac = (float)c.factor;
      const float ratio = fac * (float)seq_len / (float)c.max_pos - (float)(c.factor - 1.0);
      const float b = (float)c.base * std::pow(ratio, (float)((double)R / (double)(R - 2)));
      inv = default_inv_freq(b, R);
    } else {
      inv = default_inv_freq(c.base, R);
    }
  } else if (c.type == "llama3") {
    // Long wavelengths are divided by factor, short ones kept, the band in
    // between blended smoothly.
    inv = default_inv_freq(c.base, R);
    const float fac = (float)c.factor, lo = (float)c.low_freq_factor;
    const float old_len = (float)c.orig_max_pos;
    const float low_wavelen = (float)(c.orig_max_pos / c.low_freq_factor);
    const float high_wavelen = (float)(c.orig_max_pos / c.high_freq_factor);
    const float span = (float)(c.high_freq_factor - c.low_freq_factor);
    for (auto& f : inv) {
      const float wavelen = (float)(2 * kPi) / f;
      if (wavelen > low_wavelen) {
        f = f / fac;
      } else if (!(wavelen < high_wavelen)) {
        const float smooth = (old_len / wavelen - lo) / span;
        f = (1.0f - smooth) * f / fac + smooth * f;
      }
    }
  } else if (c.type == "yarn") {
    // Ramp from interpolation (f/factor) for slow dimensions to
    // extrapolation (f) for fast ones, between the dimensions that turn
    // beta_slow and beta_fast times over the original context.
    auto correction_dim = [&](double rotations) {
      return (R * std::log(c.orig_max_pos / (rotations * 2 * kPi))) / (2 * std::log(c.base));
    };
    double low = correction_dim(c.beta_fast), high = correction_dim(c.beta_slow);
    if (c.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, (double)(R - 1));
    if (low == high) high += 0.001;  // the ramp needs a width
    inv.resize(half);
    for (int64_t i = 0; i < half; ++i) {
      const float pos_freq = std::pow((float)c.base, (float)(2 * i) / (float)R);
      const float extrapolation = 1.0f / pos_freq;
      const float interpolation = 1.0f / ((float)c.factor * pos_freq);
      const float ramp = std::clamp(((float)i - (float)low) / (float)(high - low), 0.0f, 1.0f);
      const float extra = 1.0f - ramp;
      inv[i] = interpolation * (1.0f - extra) + extrapolation * extra;
    }
    auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (c.mscale != 0 && c.mscale_all_dim != 0)
      att = mscale(c.factor, c.mscale) / mscale(c.factor, c.mscale_all_dim);
    else
      att = mscale(c.factor, 1.0);
  } else if (c.type == "longrope") {
    // Per-frequency rescaling: long factors past the original context.
    const std::vector<float>& ext = seq_len > c.orig_max_pos ? c.long_factor : c.short_factor;
    inv.resize(half);
    for (int64_t i = 0; i < half; ++i)
      inv[i] = 1.0f / (ext[i] * std::pow((float)c.base, (float)(2 * i) / (float)R));
    // docs/OPS.md: f is the ratio of the context lengths when both are
    // known, else `factor`.
    double f = !std::isnan(c.max_pos) ? c.max_pos / c.orig_max_pos : c.factor;
    if (std::isnan(f)) f = 1.0;
    att = f <= 1.0 ? 1.0 : std::sqrt(1 + std::log(f) / std::log(c.orig_max_pos));
  }
  if (c.scaling_attention) att = *c.scaling_attention;
  if (c.attention) att = *c.attention;
  if (!c.inv_freq.empty()) inv = c.inv_freq;
  *attention = (float)att;
  return inv;
}

}  // namespace

std::vector<float> rope_inv_freq(const json& scaling, double base, int64_t rot_dim, int64_t seq_len, float* attention) {
  json p = {{"headDim", rot_dim}, {"base", base}};
  if (!scaling.is_null()) p["scaling"] = scaling;
  const RopeConfig c = parse_rope(Params(p));
  return freqs(c, seq_len, attention);
}

namespace {

// Whether objects a and b hold the same fields, `skip` aside.
bool equal_except(const json& a, const json& b, const char* skip) {
  if (!a.is_object() || !b.is_object()) return a == b;
  if (a.size() - a.count(skip) != b.size() - b.count(skip)) return false;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (it.key() == skip) continue;
    const auto jt = b.find(it.key());
    if (jt == b.end() || *jt != *it) return false;
  }
  return true;
}

// parse_rope, remembered per thread for params that differ only in their
// offset: a batched decode step checks 44 rope nodes for every row, each at
// its own position, and parsing invFreq and the scaling object each time
// was a quarter of planning the step. The offset is checked here; the
// reference stays valid until this thread's next call.
const RopeConfig& parse_rope_cached(const Params& p) {
  struct Entry {
    json params;
    RopeConfig config;
  };
  constexpr size_t kEntries = 4;
  thread_local std::deque<Entry> recent;
  const double offset = p.num("offset", 0.0);
  check(std::isfinite(offset), "param offset must be a finite number");
  for (const Entry& e : recent)
    if (equal_except(e.params, p.all(), "offset")) return e.config;
  recent.push_front({p.all(), parse_rope(p)});
  if (recent.size() > kEntries) recent.pop_back();
  return recent.front().config;
}

Shape infer_rope(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "x");
  const RopeConfig& c = parse_rope_cached(p);
  const Shape& s = in[0].shape;
  check(s.size() >= 2, [&] { return "x must have rank 2 or more ([tokens, heads*headDim]), got " + shape_str(s); });
  check(s.back() % c.head_dim == 0, [&] {
    return "the last axis of x (" + std::to_string(s.back()) + ") must be a multiple of param headDim " +
           std::to_string(c.head_dim);
  });
  return s;
}

// rope_tables, remembered: a decode step ropes q and k at the same
// position in every layer (44 calls a step on a 22-layer model), and each
// table costs a parse, a pow per frequency and a cos and sin per angle. The
// last few tables of moderate size are kept per thread, keyed by the whole
// params object (offset included) and the row count.
std::shared_ptr<const RopeTables> cached_rope_tables(const json& params, int64_t rows) {
  struct Entry {
    json params;
    int64_t rows;
    std::shared_ptr<const RopeTables> tables;
  };
  constexpr size_t kEntries = 8;
  constexpr int64_t kMaxAngles = int64_t(1) << 16;  // per table: 512 KiB of cos and sin
  thread_local std::deque<Entry> recent;
  // The offset first: the entries of one step differ in little else.
  const auto offset_of = [](const json& p) { return p.is_object() ? p.value("offset", json()) : json(); };
  const json offset = offset_of(params);
  for (const Entry& e : recent)
    if (e.rows == rows && offset_of(e.params) == offset && equal_except(e.params, params, "offset")) return e.tables;
  auto t = std::make_shared<const RopeTables>(rope_tables(params, rows));
  if (rows * (t->rot_dim / 2) > kMaxAngles) return t;  // a long prefill's: used once
  recent.push_front({params, rows, t});
  if (recent.size() > kEntries) recent.pop_back();
  return t;
}

void run_rope(const OpInputs& in, const Params& p, Tensor& out) {
  const Tensor& x = *in[0];
  const int64_t rows = x.rows(), C = x.cols();
  const std::shared_ptr<const RopeTables> tables = cached_rope_tables(p.all(), rows);
  const RopeTables& t = *tables;
  const int64_t D = t.head_dim, R = t.rot_dim, half = R / 2, heads = C / D;
  const std::vector<float>& cos_t = t.cos;
  const std::vector<float>& sin_t = t.sin;

  const float* xs = x.f32();
  float* o = out.f32();
  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* cs = &cos_t[r * half];
      const float* sn = &sin_t[r * half];
      for (int64_t h = 0; h < heads; ++h) {
        const float* xh = xs + r * C + h * D;
        float* oh = o + r * C + h * D;
        if (t.interleaved) {  // GPT-J: pairs (2i, 2i+1)
          for (int64_t i = 0; i < half; ++i) {
            const float a = xh[2 * i], b = xh[2 * i + 1];
            oh[2 * i] = a * cs[i] - b * sn[i];
            oh[2 * i + 1] = b * cs[i] + a * sn[i];
          }
        } else {  // NeoX/Llama: pairs (i, i + R/2)
          simd::rotate_halves(xh, cs, sn, half, oh);
        }
        for (int64_t i = R; i < D; ++i) oh[i] = xh[i];  // partial rotary: the rest passes
      }
    }
  });
}

}  // namespace

RopeTables rope_tables(const json& params, int64_t rows) {
  const RopeConfig c = parse_rope(Params(params));
  const int64_t half = c.rot_dim / 2;
  float attention = 1.0f;
  const std::vector<float> inv = freqs(c, rows, &attention);
  RopeTables t{c.head_dim, c.rot_dim, c.interleaved, std::vector<float>(rows * half), std::vector<float>(rows * half)};
  // One cos/sin pair per (row, frequency). The angle is the f32 product
  // pos * inv_freq, as transformers forms it before taking cos and sin.
  parallel_for(rows, kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float pos = (float)(c.offset + (double)r);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv[i];
        t.cos[r * half + i] = (float)std::cos((double)angle) * attention;
        t.sin[r * half + i] = (float)std::sin((double)angle) * attention;
      }
    }
  });
  return t;
}

void register_rope_ops(std::vector<OpDef>& ops) {
  OpDef op;
  op.name = "rope";
  op.min_inputs = 1;
  op.max_inputs = 1;
  op.params = {
      {"headDim", ParamType::Number, false},     {"base", ParamType::Number, true},
      {"offset", ParamType::Number, true},       {"rotaryDim", ParamType::Number, true},
      {"interleaved", ParamType::Bool, true},    {"scaling", ParamType::Object, true},
      {"invFreq", ParamType::Array, true},       {"attentionFactor", ParamType::Number, true},
  };
  op.features = {
      {.name = "rope.interleaved", .params = {"interleaved"},
       .neutral = [](const nlohmann::json& p) { return p["interleaved"] == false; }},
      {.name = "rope.rotaryDim", .params = {"rotaryDim"},
       .neutral = [](const nlohmann::json& p) { return p.contains("headDim") && p["rotaryDim"] == p["headDim"]; }},
      {.name = "rope.scaling", .params = {"scaling", "invFreq", "attentionFactor"}},
  };
  op.infer = infer_rope;
  op.run = run_rope;
  ops.push_back(std::move(op));
}

}  // namespace bonfire
