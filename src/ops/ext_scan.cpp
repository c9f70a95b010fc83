// Protocol extension ops over a recurrent state (docs/PROTOCOL-EXTENSIONS.md):
// linear_attention, ssm_scan, selective_scan, and depth_route (mixture-of-
// recursions routing). Each is routed by its own `ext.` feature. State inputs
// are session tensors advanced in place, like short_conv's; within one call
// the state is carried in double and written back as f32 once at the end.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {

namespace {

// A weight input as f32 (small per-channel tensors: a packed one is expanded).
Tensor f32_of(const Tensor& t) { return t.packed() ? to_f32(t) : t; }

std::string dims(std::initializer_list<int64_t> d) { return shape_str(Shape(d)); }

void check_shape(const TensorDesc& t, const Shape& want, const std::string& what, const std::string& formula) {
  check(t.shape == want,
        [&] { return what + " must be " + formula + " = " + shape_str(want) + ", got " + shape_str(t.shape); });
}

// Rank 2 [T, C] activations.
void check_rows(const TensorDesc& t, const std::string& what, const std::string& formula) {
  check(t.shape.size() == 2, [&] { return what + " must be " + formula + ", got " + shape_str(t.shape); });
}

// A per-channel vector: C values ([C] or [1, C]).
void check_vector(const TensorDesc& t, int64_t C, const std::string& what) {
  const bool ok = (t.shape.size() == 1 && t.shape[0] == C) || (t.shape.size() == 2 && t.shape[0] == 1 && t.shape[1] == C);
  check(ok, [&] { return what + " must be [C] = " + dims({C}) + ", got " + shape_str(t.shape); });
}

// --- linear_attention ------------------------------------------------------

double elu_plus_one(double x) { return x > 0 ? x + 1.0 : std::exp(x); }

Shape infer_linear_attention(const std::vector<TensorDesc>& in, const Params& p) {
  static const char* names[] = {"q", "k", "v", "S (state)", "z (state)"};
  for (size_t i = 0; i < 5; ++i) check_f32(in, i, names[i]);
  const int64_t H = p.int_("heads"), D = p.int_("headDim");
  check(H > 0 && D > 0,
        [&] { return "heads and headDim must be positive, got " + std::to_string(H) + " and " + std::to_string(D); });
  const std::string fm = p.str("featureMap", "elu_plus_one");
  check(fm == "elu_plus_one", [&] { return "featureMap must be \"elu_plus_one\", got \"" + fm + "\""; });
  const double floor_ = p.num("denFloor", 1e-6);
  check(std::isfinite(floor_) && floor_ >= 0, "denFloor must be a finite number >= 0");
  check_rows(in[0], "q", "[T, heads*headDim]");
  const int64_t T = in[0].shape[0];
  check_shape(in[0], {T, H * D}, "q", "[T, heads*headDim]");
  check_shape(in[1], {T, H * D}, "k", "[T, heads*headDim]");
  check_shape(in[2], {T, H * D}, "v", "[T, heads*headDim]");
  check_shape(in[3], {H * D, D}, "S (state)", "[heads*headDim, headDim]");
  check_shape(in[4], {H, D}, "z (state)", "[heads, headDim]");
  return in[0].shape;
}

void run_linear_attention(const OpInputs& in, const Params& p, Tensor& out) {
  const int64_t H = p.int_("heads"), D = p.int_("headDim"), T = in[0]->shape[0], W = H * D;
  const double den_floor = p.num("denFloor", 1e-6);
  const bool causal = p.flag("causal", true);
  const float *q = in[0]->f32(), *k = in[1]->f32(), *v = in[2]->f32();
  float* S_all = in[3]->f32();
  float* z_all = in[4]->f32();
  float* o = out.f32();
  parallel_for(H, 1, [&](int64_t h0, int64_t h1) {
    std::vector<double> S(D * D), z(D), fk(D), fq(D), num(D);
    for (int64_t h = h0; h < h1; ++h) {
      float* Sh = S_all + h * D * D;
      float* zh = z_all + h * D;
      for (int64_t i = 0; i < D * D; ++i) S[i] = Sh[i];
      for (int64_t i = 0; i < D; ++i) z[i] = zh[i];
      auto update = [&](int64_t t) {
        const float* kt = k + t * W + h * D;
        const float* vt = v + t * W + h * D;
        for (int64_t i = 0; i < D; ++i) {
          fk[i] = elu_plus_one(kt[i]);
          z[i] += fk[i];
          double* Si = S.data() + i * D;
          for (int64_t j = 0; j < D; ++j) Si[j] += fk[i] * (double)vt[j];
        }
      };
      auto readout = [&](int64_t t) {
        const float* qt = q + t * W + h * D;
        double den = 0;
        for (int64_t i = 0; i < D; ++i) {
          fq[i] = elu_plus_one(qt[i]);
          den += fq[i] * z[i];
        }
        std::fill(num.begin(), num.end(), 0.0);
        for (int64_t i = 0; i < D; ++i) {
          const double* Si = S.data() + i * D;
          for (int64_t j = 0; j < D; ++j) num[j] += fq[i] * Si[j];
        }
        den = std::max(den, den_floor);
        float* ot = o + t * W + h * D;
        for (int64_t j = 0; j < D; ++j) ot[j] = (float)(num[j] / den);
      };
      if (causal) {
        for (int64_t t = 0; t < T; ++t) update(t), readout(t);
      } else {
        for (int64_t t = 0; t < T; ++t) update(t);
        for (int64_t t = 0; t < T; ++t) readout(t);
      }
      for (int64_t i = 0; i < D * D; ++i) Sh[i] = (float)S[i];
      for (int64_t i = 0; i < D; ++i) zh[i] = (float)z[i];
    }
  });
}

// --- ssm_scan ----------------------------------------------------------------

Shape infer_ssm_scan(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "x");
  check_f32(in, 5, "h (state)");
  check_rows(in[0], "x", "[T, C]");
  const int64_t C = in[0].shape[1];
  check(in[1].shape.size() == 2 && in[1].shape[0] == C,
        [&] { return "a must be [C, N] with C = " + std::to_string(C) + ", got " + shape_str(in[1].shape); });
  const int64_t N = in[1].shape[1];
  check_shape(in[2], {C, N}, "b", "[C, N]");
  check_shape(in[3], {C, N}, "c", "[C, N]");
  check_vector(in[4], C, "d");
  check_shape(in[5], {C, N}, "h (state)", "[C, N]");
  return in[0].shape;
}

void run_ssm_scan(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t T = in[0]->shape[0], C = in[0]->shape[1], N = in[1]->shape[1];
  const Tensor a = f32_of(*in[1]), b = f32_of(*in[2]), c = f32_of(*in[3]), d = f32_of(*in[4]);
  const float* x = in[0]->f32();
  float* hs = in[5]->f32();
  float* y = out.f32();
  parallel_for(C, 16, [&](int64_t c0, int64_t c1) {
    std::vector<double> h(N);
    for (int64_t ch = c0; ch < c1; ++ch) {
      const float *ar = a.f32() + ch * N, *br = b.f32() + ch * N, *cr = c.f32() + ch * N;
      float* hr = hs + ch * N;
      for (int64_t n = 0; n < N; ++n) h[n] = hr[n];
      for (int64_t t = 0; t < T; ++t) {
        const double xt = x[t * C + ch];
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          h[n] = (double)ar[n] * h[n] + (double)br[n] * xt;
          acc += (double)cr[n] * h[n];
        }
        y[t * C + ch] = (float)(acc + (double)d.f32()[ch] * xt);
      }
      for (int64_t n = 0; n < N; ++n) hr[n] = (float)h[n];
    }
  });
}

// --- selective_scan ------------------------------------------------------------

// Inputs: x, dt, B, C, A_log, [D], h. The state is always last; D is there
// when the node has 7 inputs.
Shape infer_selective_scan(const std::vector<TensorDesc>& in, const Params&) {
  const bool has_d = in.size() == 7;
  const size_t hi = in.size() - 1;
  static const char* acts[] = {"x", "dt", "B", "C"};
  for (size_t i = 0; i < 4; ++i) check_f32(in, i, acts[i]);
  check_f32(in, hi, "h (state)");
  check_rows(in[0], "x", "[T, channels]");
  const int64_t T = in[0].shape[0], Ch = in[0].shape[1];
  check_shape(in[1], {T, Ch}, "dt", "[T, channels]");
  check(in[2].shape.size() == 2 && in[2].shape[0] == T,
        [&] { return "B must be [T, d_state] with T = " + std::to_string(T) + ", got " + shape_str(in[2].shape); });
  const int64_t N = in[2].shape[1];
  check_shape(in[3], {T, N}, "C", "[T, d_state]");
  check_shape(in[4], {Ch, N}, "A_log", "[channels, d_state]");
  if (has_d) check_vector(in[5], Ch, "D");
  check_shape(in[hi], {Ch, N}, "h (state)", "[channels, d_state]");
  return in[0].shape;
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }  // torch: threshold 20

void run_selective_scan(const OpInputs& in, const Params& p, Tensor& out) {
  const bool has_d = in.size() == 7;
  const bool dt_softplus = p.flag("dtSoftplus", true);
  const int64_t T = in[0]->shape[0], Ch = in[0]->shape[1], N = in[2]->shape[1];
  const float *x = in[0]->f32(), *dt = in[1]->f32(), *B = in[2]->f32(), *Cm = in[3]->f32();
  const Tensor A_log = f32_of(*in[4]);
  const Tensor D = has_d ? f32_of(*in[5]) : Tensor();
  float* hs = in[in.size() - 1]->f32();
  float* y = out.f32();
  parallel_for(Ch, 8, [&](int64_t c0, int64_t c1) {
    std::vector<double> h(N), A(N);
    for (int64_t c = c0; c < c1; ++c) {
      float* hr = hs + c * N;
      for (int64_t n = 0; n < N; ++n) {
        h[n] = hr[n];
        A[n] = -std::exp((double)A_log.f32()[c * N + n]);
      }
      const double dc = has_d ? (double)D.f32()[c] : 0.0;
      for (int64_t t = 0; t < T; ++t) {
        const double xt = x[t * Ch + c];
        const double delta = dt_softplus ? softplus(dt[t * Ch + c]) : (double)dt[t * Ch + c];
        const float* Bt = B + t * N;
        const float* Ct = Cm + t * N;
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          h[n] = std::exp(delta * A[n]) * h[n] + delta * (double)Bt[n] * xt;
          acc += h[n] * (double)Ct[n];
        }
        y[t * Ch + c] = (float)(acc + dc * xt);
      }
      for (int64_t n = 0; n < N; ++n) hr[n] = (float)h[n];
    }
  });
}

// --- ssd_scan (Mamba-2) ------------------------------------------------------------

// Inputs: x [T, heads*headDim], dt [T, heads] (raw), B and C [T, groups*dState],
// A_log, D and dtBias [heads], h [heads*headDim, dState] (state). Head h
// reads group h / (heads / groups).
struct SsdShape {
  int64_t T, H, P, G, N;
};

SsdShape ssd_shape(const std::vector<TensorDesc>& in, const Params& p) {
  static const char* acts[] = {"x", "dt", "B", "C"};
  for (size_t i = 0; i < 4; ++i) check_f32(in, i, acts[i]);
  check_f32(in, 7, "h (state)");
  SsdShape s;
  s.H = p.int_("heads");
  s.P = p.int_("headDim");
  s.G = p.int_("groups", 1);
  s.N = p.int_("dState");
  check(s.H > 0 && s.P > 0 && s.G > 0 && s.N > 0, "heads, headDim, groups and dState must be positive");
  check(s.H % s.G == 0,
        [&] { return "heads " + std::to_string(s.H) + " must be a multiple of groups " + std::to_string(s.G); });
  check_rows(in[0], "x", "[T, heads*headDim]");
  s.T = in[0].shape[0];
  check_shape(in[0], {s.T, s.H * s.P}, "x", "[T, heads*headDim]");
  check_shape(in[1], {s.T, s.H}, "dt", "[T, heads]");
  check_shape(in[2], {s.T, s.G * s.N}, "B", "[T, groups*dState]");
  check_shape(in[3], {s.T, s.G * s.N}, "C", "[T, groups*dState]");
  check_vector(in[4], s.H, "A_log");
  check_vector(in[5], s.H, "D");
  check_vector(in[6], s.H, "dtBias");
  check_shape(in[7], {s.H * s.P, s.N}, "h (state)", "[heads*headDim, dState]");
  return s;
}

Shape infer_ssd_scan(const std::vector<TensorDesc>& in, const Params& p) {
  const SsdShape s = ssd_shape(in, p);
  return {s.T, s.H * s.P};
}

void run_ssd_scan(const OpInputs& in, const Params& p, Tensor& out) {
  // infer_ssd_scan checked every shape against these.
  const SsdShape s = {in[0]->shape[0], p.int_("heads"), p.int_("headDim"), p.int_("groups", 1), p.int_("dState")};
  const float *x = in[0]->f32(), *dt = in[1]->f32(), *B = in[2]->f32(), *Cm = in[3]->f32();
  const Tensor A_log = f32_of(*in[4]), D = f32_of(*in[5]), bias = f32_of(*in[6]);
  float* hs = in[7]->f32();
  float* y = out.f32();
  const int64_t per_group = s.H / s.G;
  parallel_for(s.H, 1, [&](int64_t h0, int64_t h1) {
    std::vector<double> st(s.P * s.N);
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / per_group;
      const double A = -std::exp((double)A_log.f32()[h]), Dh = D.f32()[h];
      float* hr = hs + h * s.P * s.N;
      for (int64_t i = 0; i < s.P * s.N; ++i) st[i] = hr[i];
      for (int64_t t = 0; t < s.T; ++t) {
        const double delta = softplus((double)dt[t * s.H + h] + bias.f32()[h]);
        const double decay = std::exp(delta * A);
        const float* Bt = B + t * s.G * s.N + g * s.N;
        const float* Ct = Cm + t * s.G * s.N + g * s.N;
        for (int64_t q = 0; q < s.P; ++q) {
          const double xt = x[t * s.H * s.P + h * s.P + q];
          double* sr = &st[q * s.N];
          double acc = 0;
          for (int64_t n = 0; n < s.N; ++n) {
            sr[n] = decay * sr[n] + delta * xt * (double)Bt[n];
            acc += sr[n] * (double)Ct[n];
          }
          y[t * s.H * s.P + h * s.P + q] = (float)(acc + Dh * xt);
        }
      }
      for (int64_t i = 0; i < s.P * s.N; ++i) hr[i] = (float)st[i];
    }
  });
}

// --- depth_route -----------------------------------------------------------------

Shape infer_depth_route(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "x");
  check_f32(in, 1, "y");
  check_rows(in[0], "x", "[T, d]");
  check(in[1].shape == in[0].shape,
        [&] { return "y must have x's shape " + shape_str(in[0].shape) + ", got " + shape_str(in[1].shape); });
  const int64_t d = in[0].shape[1];
  check(in[2].shape.size() == 2 && in[2].shape[1] == d && in[2].shape[0] >= 1,
        [&] { return "router must be [nRec, d] with d = " + std::to_string(d) + ", got " + shape_str(in[2].shape); });
  const double step = p.num("step");
  check(std::isfinite(step), "step must be a finite number");
  const std::string gate = p.str("gate", "score");
  check(gate == "score" || gate == "none", [&] { return "gate must be \"score\" or \"none\", got \"" + gate + "\""; });
  return in[0].shape;
}

void run_depth_route(const OpInputs& in, const Params& p, Tensor& out) {
  const int64_t T = in[0]->shape[0], d = in[0]->shape[1];
  const Tensor router = f32_of(*in[2]);
  const int64_t R = router.shape[0];
  const double step = p.num("step");
  const bool score = p.str("gate", "score") == "score";
  const float *x = in[0]->f32(), *y = in[1]->f32(), *w = router.f32();
  float* o = out.f32();
  parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    std::vector<double> logit(R);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * d;
      const float* yt = y + t * d;
      float* ot = o + t * d;
      int64_t best = 0;
      for (int64_t r = 0; r < R; ++r) {
        double s = 0;
        for (int64_t i = 0; i < d; ++i) s += (double)xt[i] * (double)w[r * d + i];
        logit[r] = s;
        if (s > logit[best]) best = r;  // ties to the lowest index
      }
      double total = 0;
      for (int64_t r = 0; r < R; ++r) total += std::exp(logit[r] - logit[best]);
      const double g = score ? 1.0 / total : 1.0;  // p[best] = exp(0) / total
      if ((double)(best + 1) >= step) {
        for (int64_t i = 0; i < d; ++i) ot[i] = (float)((double)xt[i] + g * ((double)yt[i] - (double)xt[i]));
      } else {
        std::memcpy(ot, xt, d * sizeof(float));
      }
    }
  });
}

}  // namespace

void register_ext_scan_ops(std::vector<OpDef>& ops) {
  OpDef la;
  la.name = "linear_attention";
  la.min_inputs = la.max_inputs = 5;
  la.params = {{"heads", ParamType::Number, false},
               {"headDim", ParamType::Number, false},
               {"denFloor", ParamType::Number, true},
               {"featureMap", ParamType::String, true},
               {"causal", ParamType::Bool, true}};
  la.features = {ext_feature("ext.linear_attention")};
  la.infer = infer_linear_attention;
  la.run = run_linear_attention;
  la.writes_inputs = (1u << 3) | (1u << 4);
  ops.push_back(la);

  OpDef ssm;
  ssm.name = "ssm_scan";
  ssm.min_inputs = ssm.max_inputs = 6;
  ssm.features = {ext_feature("ext.ssm_scan")};
  ssm.infer = infer_ssm_scan;
  ssm.run = run_ssm_scan;
  ssm.writes_inputs = 1u << 5;
  ssm.packed_inputs = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4);
  ops.push_back(ssm);

  OpDef sel;
  sel.name = "selective_scan";
  sel.min_inputs = 6;
  sel.max_inputs = 7;
  sel.params = {{"dtSoftplus", ParamType::Bool, true}};
  sel.features = {ext_feature("ext.selective_scan")};
  sel.infer = infer_selective_scan;
  sel.run = run_selective_scan;
  // The state is the last input: 5 of 6, 6 of 7.
  sel.writes_inputs_of = [](const Params&, size_t n) -> uint64_t { return n ? uint64_t(1) << (n - 1) : 0; };
  sel.packed_inputs = (1u << 4) | (1u << 5);  // A_log, D (when 7 inputs; input 5 is the state otherwise)
  ops.push_back(sel);

  OpDef ssd;
  ssd.name = "ssd_scan";
  ssd.min_inputs = ssd.max_inputs = 8;
  ssd.params = {{"heads", ParamType::Number, false},
                {"headDim", ParamType::Number, false},
                {"groups", ParamType::Number, true},
                {"dState", ParamType::Number, false}};
  ssd.features = {ext_feature("ext.ssd_scan")};
  ssd.infer = infer_ssd_scan;
  ssd.run = run_ssd_scan;
  ssd.writes_inputs = 1u << 7;
  ssd.packed_inputs = (1u << 4) | (1u << 5) | (1u << 6);  // A_log, D, dtBias
  ops.push_back(ssd);

  OpDef dr;
  dr.name = "depth_route";
  dr.min_inputs = dr.max_inputs = 3;
  dr.params = {{"step", ParamType::Number, false}, {"gate", ParamType::String, true}};
  dr.features = {ext_feature("ext.depth_route")};
  dr.infer = infer_depth_route;
  dr.run = run_depth_route;
  dr.packed_inputs = 1u << 2;
  ops.push_back(dr);
}

}  // namespace bonfire
