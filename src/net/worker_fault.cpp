#include "net/worker_fault.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "graph/executor.h"
#include "net/token_check.h"

namespace bonfire::net {

namespace {

// The best token a check can tell from the drawn one, under the call's
// sampling `params`, or -1: one that token_check.h forgives as a near tie
// would be no lie to catch (a fresh clone's net.verify once released such a
// "lie", 318 -> 714, and failed on it). Runners-up within twice the bound
// are never tried, and at most 8 others, best first (each check may draw
// many times).
int64_t provable_lie(const float* row, int64_t V, int64_t drawn, const nlohmann::json& params) {
  const double below = drawn >= 0 && drawn < V ? double(row[drawn]) - 2 * logit_tolerance(row, V) : HUGE_VAL;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < V; ++i)
    if (i != drawn && !std::isnan(row[i]) && double(row[i]) < below) order.push_back(i);
  const size_t tried = std::min<size_t>(order.size(), 8);
  std::partial_sort(order.begin(), order.begin() + tried, order.end(),
                    [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  const auto step = static_cast<uint64_t>(params.value("step", 0.0));
  for (size_t k = 0; k < tried; ++k)
    if (check_token(row, V, params, step, {}, static_cast<int32_t>(order[k])).agreement == TokenAgreement::Differs)
      return order[k];
  return -1;
}

}  // namespace

WorkerFault::WorkerFault(const std::string& spec, uint64_t seed) : rng_(seed ? seed : std::random_device{}()) {
  size_t at = 0;
  while (at < spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(at, comma - at);
    at = comma + 1;
    const auto eq = item.find('=');
    const std::string kind = item.substr(0, eq);
    if ((kind != "lie" && kind != "slow") || eq == std::string::npos)
      throw Error(ErrorCode::BadGraph, "--fault: unknown fault \"" + item.substr(0, 32) + "\" (known: lie=P, slow=MS)");
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      throw Error(ErrorCode::BadGraph, "--fault " + kind + ": its value must be a number, got \"" +
                                           item.substr(eq + 1, 32) + "\"");
    }
    if (kind == "lie") {
      if (!(v >= 0 && v <= 1)) throw Error(ErrorCode::BadGraph, "--fault lie=P: P must be in [0, 1]");
      p_ = v;
    } else {
      if (!(v >= 0 && v <= 60000)) throw Error(ErrorCode::BadGraph, "--fault slow=MS: MS must be in [0, 60000]");
      slow_ms_ = v;
    }
  }
}

std::vector<int64_t> WorkerFault::lie_now(int64_t sequences) {
  std::vector<int64_t> lying;
  if (p_ <= 0) return lying;
  std::lock_guard<std::mutex> lock(mu_);
  for (int64_t q = 0; q < sequences; ++q)
    if (std::uniform_real_distribution<double>(0, 1)(rng_) < p_) lying.push_back(q);
  return lying;
}

Graph WorkerFault::with_sample_logits(const Graph& g, std::vector<Sampled>* sampled) {
  Graph out = g;
  for (const Ref& r : g.outputs) {
    if (r.kind != Ref::Node || g.nodes[r.node].op->name != "sample") continue;
    const Ref& logits = g.nodes[r.node].in.at(0);
    bool listed = false;
    for (const Ref& o : out.outputs) listed = listed || o.text() == logits.text();
    if (!listed) out.outputs.push_back(logits);
    sampled->push_back({r.text(), logits.text(), !listed, g.nodes[r.node]});
  }
  return out;
}

std::vector<std::string> WorkerFault::tell(std::map<std::string, Tensor>& outputs, const std::vector<Sampled>& sampled,
                                           const std::vector<nlohmann::json>& binds,
                                           const std::vector<int64_t>& lying) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t sequences = std::max<int64_t>(1, static_cast<int64_t>(binds.size()));
  std::vector<std::string> told;
  for (const Sampled& s : sampled) {
    auto t = outputs.find(s.token);
    auto l = outputs.find(s.logits);
    if (t == outputs.end() || l == outputs.end()) continue;
    Tensor& tokens = t->second;
    const Tensor& logits = l->second;
    const int64_t V = logits.cols(), rows = std::min<int64_t>(tokens.numel(), logits.rows());
    for (const int64_t q : lying) {
      if (rows <= 0 || V <= 1) break;
      // The sequence's token: one per sequence in a batched call; in a
      // call of one sequence with a row per position, the last counts.
      const int64_t r = rows == sequences ? q : rows - 1;
      const float* row = logits.f32() + (logits.rows() - rows + r) * V;
      const int64_t drawn = static_cast<int64_t>(tokens.f32()[r]);
      const nlohmann::json bind = binds.empty() ? nlohmann::json::object() : binds[std::min<size_t>(q, binds.size() - 1)];
      const int64_t second = provable_lie(row, V, drawn, bind_params(s.node, bind).all());
      if (second >= 0) {
        tokens.f32()[r] = static_cast<float>(second);
        told.push_back("token " + std::to_string(drawn) + " -> " + std::to_string(second) + " (row " +
                       std::to_string(r) + ")");
      }
    }
    if (s.added) outputs.erase(l);
  }
  if (!told.empty()) return told;
  // No token: move the lying sequences' rows of every f32 output by 1% of
  // their norm (all rows when an output's rows do not divide by sequence).
  std::normal_distribution<double> normal(0, 1);
  for (const int64_t q : lying) {
    std::string what;
    for (auto& [name, t] : outputs) {
      if (t.dtype != DType::F32 || t.numel() == 0) continue;
      const int64_t C = t.cols(), all = t.rows();
      const bool apart = all % sequences == 0;
      const int64_t first = apart ? q * (all / sequences) : 0, end = apart ? first + all / sequences : all;
      std::vector<double> dir(C);
      for (int64_t r = first; r < end; ++r) {
        float* x = t.f32() + r * C;
        double norm = 0, dnorm = 0;
        for (int64_t i = 0; i < C; ++i) {
          norm += double(x[i]) * x[i];
          dir[i] = normal(rng_);
          dnorm += dir[i] * dir[i];
        }
        const double scale = 0.01 * std::sqrt(norm) / std::max(std::sqrt(dnorm), 1e-30);
        for (int64_t i = 0; i < C; ++i) x[i] += static_cast<float>(scale * dir[i]);
      }
      what += (what.empty() ? "" : ", ") + name + " moved by 1% of its norm";
    }
    if (!what.empty()) told.push_back(what + (sequences > 1 ? " (sequence " + std::to_string(q) + ")" : ""));
  }
  return told;
}

}  // namespace bonfire::net
