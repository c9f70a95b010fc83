#include "net/served_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"
#include "ir/kv_memory.h"
#include "ir/lower.h"

namespace bonfire::net {

namespace {

// The layer a lowered node belongs to: "L12.attn..." -> 12; -1 for the
// embedding, the head and anything else.
int64_t node_layer(const std::string& id) {
  if (id.size() < 3 || id[0] != 'L' || !isdigit(static_cast<unsigned char>(id[1]))) return -1;
  return std::strtoll(id.c_str() + 1, nullptr, 10);
}

}  // namespace

std::unique_ptr<ServedModel> ServedModel::open(const std::string& path, const ServeModelOptions& options) {
  std::unique_ptr<ServedModel> m(new ServedModel());
  m->options_ = options;
  m->scheduler_ = std::make_unique<StepScheduler>(options.scheduler);
  m->fingerprint_ = fingerprint_model(path);
  ir::LocalModel::Options lo;
  lo.ctx = options.ctx;
  lo.compute = false;  // the workers run the steps; this copy lowers them
  m->local_ = ir::LocalModel::open(path, lo);
  m->n_layers_ = m->local_->ir()["model"]["n_layers"].get<int64_t>();
  try {
    m->chat_template_ = m->local_->files().chat_template(&m->template_vars_);
  } catch (const Error&) {
    // A template that does not parse is reported when a chat request needs it.
  }
  m->measure_layers();
  return m;
}

// Bytes per layer from the lowered graphs themselves: the weights a layer's
// nodes read, plus the state its prefill allocates for the whole context.
void ServedModel::measure_layers() {
  layer_bytes_.assign(n_layers_, 0);
  layer_weight_bytes_.assign(n_layers_, 0);
  std::set<std::string> seen;
  auto count = [&](const json& call) {
    for (const auto& n : call["nodes"]) {
      const int64_t l = node_layer(n["id"].get<std::string>());
      int64_t bytes = 0;
      for (const auto& r : n["in"]) {
        const std::string ref = r.get<std::string>();
        if (ref.rfind("w:", 0) != 0 || !seen.insert(ref).second) continue;
        if (const Tensor* t = local_->weights().find(ref.substr(2))) bytes += t->nbytes();
      }
      if (l >= 0 && l < n_layers_) layer_weight_bytes_[l] += bytes;
      if (n["op"] == "zeros" && n.contains("params") && n["params"].contains("shape")) {
        int64_t e = 4;
        for (const auto& d : n["params"]["shape"]) e *= d.is_number() ? d.get<int64_t>() : 1;
        bytes += e;
      }
      if (l >= 0 && l < n_layers_) layer_bytes_[l] += bytes;
      else edge_bytes_ += bytes;
    }
  };
  ir::LowerOptions o;
  o.mode = "prefill";
  o.tokens = 1;
  o.ctx = local_->ctx();
  const json prefill = ir::lower(local_->ir(), o, &local_->weights());
  count(prefill);
  kv_ = ir::kv_memory_of(local_->ir(), prefill, o.ctx).to_json();
}

int64_t ServedModel::total_bytes() const {
  int64_t t = edge_bytes_;
  for (int64_t b : layer_bytes_) t += b;
  return t;
}

std::string ServedModel::apply_chat_template(const json& messages) const {
  if (!chat_template_) throw Error(ErrorCode::BadGraph, "model " + id() + " has no chat template; use /v1/completions");
  return chat_template_->render(nlohmann::ordered_json::parse(messages.dump()), true, template_vars_);
}

json ServedModel::describe() const {
  const json& m = local_->ir()["model"];
  return {{"id", id()},
          {"hash", fingerprint_.hash},
          {"layers", n_layers_},
          {"vocab", m["vocab"]},
          {"ctx", local_->ctx()},
          {"bytes", total_bytes()},
          {"kv", kv_},
          {"chatTemplate", chat_template_.has_value()},
          {"files", fingerprint_.to_json()["files"]}};
}

int64_t ServedModel::stage_bytes(int64_t first, int64_t end, bool weights_only) const {
  const std::vector<int64_t>& layers = weights_only ? layer_weight_bytes_ : layer_bytes_;
  int64_t t = end >= n_layers_ ? edge_bytes_ : 0;
  for (int64_t l = std::max<int64_t>(0, first); l < std::min(end, n_layers_); ++l) t += layers[l];
  return t;
}

std::vector<std::pair<int64_t, int64_t>> ServedModel::plan_stages(const std::vector<StageSlot>& workers) const {
  if (workers.empty()) throw Error(ErrorCode::NoWorker, "no connected worker holds model " + id());
  std::vector<StageSlot> slots;
  if (options_.stages > 0) {
    // As asked; each worker refuses what it cannot hold.
    for (int64_t i = 0; i < std::min<int64_t>(options_.stages, n_layers_); ++i)
      slots.push_back({workers[i % workers.size()].speed, -1});
  } else {
    // As few of the best workers as hold the model.
    const int64_t need = total_bytes();
    int64_t have = 0;
    for (const auto& w : workers) {
      if (have >= need) break;
      const int64_t room = w.capacity * 9 / 10;
      slots.push_back({w.speed, room});
      have += room;
    }
    if (have < need)
      throw Error(ErrorCode::TooLarge, "model " + id() + " needs " + std::to_string(need >> 20) +
                                           " MiB; the workers holding it lend " + std::to_string(have >> 20) +
                                           " MiB together");
  }
  return cut_layers(layer_bytes_, edge_bytes_, slots);
}

json ServedModel::sample_bind(const json& sample) {
  json bind = json::object();
  for (const auto& [name, v] : sample.items())
    if (v.is_number()) bind[sample_bind_name(name)] = v;
  return bind;
}

std::string ServedModel::sample_bind_name(const std::string& param) {
  std::string n = "sample" + param;
  n[6] = static_cast<char>(std::toupper(static_cast<unsigned char>(n[6])));
  return n;
}

std::shared_ptr<const ServedModel::StepGraph> ServedModel::step_graph(int64_t first, int64_t end,
                                                                      const std::string& mode, int64_t tokens,
                                                                      const json& sample) {
  // The sampling values are bind values (sample_bind), so sequences with
  // other settings share one graph (and one batched call); only which
  // settings are on (penalties add the token history) shapes the graph.
  json shape = json::array();
  for (const auto& [name, v] : sample.items()) shape.push_back(name);
  const std::string key = std::to_string(first) + "-" + std::to_string(end) + "/" + mode + "/" +
                          std::to_string(tokens) + "/" + shape.dump();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return it->second;
  if (graphs_.size() > 256) graphs_.clear();  // generations running keep theirs (shared_ptr)
  // "verify-*": a checker's teacher-forced chunk (net/verifier.h): logits
  // and no draw; of every position, or of the last ("verify-last-*", as a
  // prompt's last chunk computes them).
  const bool verify = mode.rfind("verify-", 0) == 0;
  const auto ends_with = [&](const std::string& s) {
    return mode.size() >= s.size() && mode.compare(mode.size() - s.size(), s.size(), s) == 0;
  };
  ir::LowerOptions o;
  o.mode = mode == "decode" ? mode : "prefill";
  o.allocate = ends_with("prefill");  // else a later chunk writes on into the session's caches
  o.tokens = tokens;
  o.ctx = local_->ctx();
  o.logits = verify;
  o.all_logits = verify && mode.rfind("verify-last-", 0) != 0;
  o.sample = end == n_layers_ && !verify ? sample : json();
  o.first_layer = first;
  o.end_layer = end;
  o.model_id = id();
  StepGraph g;
  g.call = ir::lower(local_->ir(), o, &local_->weights());
  for (auto& n : g.call["nodes"])
    if (n["op"] == "sample")
      for (const auto& [name, v] : sample.items())
        if (v.is_number() && n["params"].contains(name)) n["params"][name] = sample_bind_name(name);
  std::set<std::string> inputs = {"tokens"};
  for (const auto& n : g.call["nodes"]) {
    g.ops.insert(n["op"].get<std::string>());
    for (const auto& r : n["in"]) {
      const std::string ref = r.get<std::string>();
      if (ref.rfind("carry.", 0) == 0) inputs.insert(ref);
    }
  }
  json probe = g.call;
  probe["session"] = "probe";  // the real one is set per run
  g.features = Graph::parse(probe, inputs, Limits{}).features;
  for (const auto& o2 : g.call["outputs"]) g.outputs.insert(o2.get<std::string>());
  if (end < n_layers_) g.carry_out.assign(g.outputs.begin(), g.outputs.end());
  if (mode == "decode") g.key = fingerprint_.hash.substr(0, 16) + "/" + key;
  return graphs_.emplace(key, std::make_shared<const StepGraph>(std::move(g))).first->second;
}

}  // namespace bonfire::net
