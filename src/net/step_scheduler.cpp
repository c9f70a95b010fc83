#include "net/step_scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "core/hop_trace.h"
#include "graph/batch.h"

namespace bonfire::net {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

std::string StepScheduler::stage_key(const RemoteWorker& w, const std::string& model, int64_t first, int64_t end) {
  return w.id() + "\n" + model + "\n" + std::to_string(first) + "-" + std::to_string(end);
}

StepScheduler::Member::Member(StepScheduler* s, std::string stage) : s_(s), stage_(std::move(stage)) {
  std::lock_guard<std::mutex> lock(s_->mu_);
  ++s_->stages_[stage_].members;
}
StepScheduler::Member::Member(Member&& o) noexcept : s_(o.s_), stage_(std::move(o.stage_)) { o.s_ = nullptr; }
StepScheduler::Member& StepScheduler::Member::operator=(Member&& o) noexcept {
  if (this != &o) {
    leave();
    s_ = o.s_;
    stage_ = std::move(o.stage_);
    o.s_ = nullptr;
  }
  return *this;
}
StepScheduler::Member::~Member() { leave(); }
void StepScheduler::Member::leave() {
  if (!s_) return;
  {
    std::lock_guard<std::mutex> lock(s_->mu_);
    --s_->stages_[stage_].members;
  }
  s_->cv_.notify_all();  // the batch need not wait for this sequence any more
  s_ = nullptr;
}

std::vector<StepScheduler::Pending*> StepScheduler::next_call(Stage& st, Clock::time_point now,
                                                              Clock::time_point* wake) {
  std::vector<Pending*> rows;
  if (st.in_flight || (st.decode.empty() && st.other.empty())) return rows;
  // Decode rows are ready when every sequence decoding here has sent its
  // step (or a full batch has), or the oldest has waited gather_ms.
  bool decode_ready = false;
  if (!st.decode.empty()) {
    // From when the row came or the stage's last call ended, whichever is
    // later: rows left over from that call must not go ahead alone while
    // the call's own rows are on their way back.
    const auto due = std::max(st.decode.front()->since, st.idle_since) +
                     std::chrono::microseconds(static_cast<int64_t>(options_.gather_ms * 1000));
    const size_t want = static_cast<size_t>(std::min(std::max(st.members, 1), options_.max_batch));
    decode_ready = st.decode.size() >= want || now >= due;
    if (!decode_ready) *wake = std::min(*wake, due);
  }
  // Prefill chunks and decode batches take turns.
  const bool other_first = !st.other.empty() && (!decode_ready || !st.last_was_other);
  if (other_first) {
    rows.push_back(st.other.front());
    st.other.pop_front();
    st.last_was_other = true;
    return rows;
  }
  if (!decode_ready) return rows;
  // The oldest row's graph; rows of another graph (other sampling
  // settings) wait for a later call.
  const std::string key = st.decode.front()->step->graph_key;
  for (auto it = st.decode.begin(); it != st.decode.end() && rows.size() < static_cast<size_t>(options_.max_batch);) {
    if ((*it)->step->graph_key == key) {
      rows.push_back(*it);
      it = st.decode.erase(it);
    } else {
      ++it;
    }
  }
  st.last_was_other = false;
  return rows;
}

// The run message for these rows: a batched call (docs/PROTOCOL-EXTENSIONS.md)
// when there are several, else the step's own call.
Message StepScheduler::call_message(const std::vector<Pending*>& rows) {
  StepCall& first = *rows[0]->step;
  Message msg(json{{"type", "run"}, {"model", first.model}});
  if (!first.graph_key.empty()) msg.header["graph"] = first.graph_key;
  if (first.graph_key.empty() || !first.worker->has_graph(first.graph_key)) msg.header["call"] = *first.call;
  if (first.step_numerics) msg.header["stepNumerics"] = true;
  if (!first.int8_rows.empty()) msg.header["int8Rows"] = first.int8_rows;
  if (rows.size() == 1) {
    msg.header["session"] = first.session;
    msg.header["bind"] = first.bind;
    msg.tensors = first.inputs;
    return msg;
  }
  json list = json::array();
  for (const auto* p : rows) list.push_back({{"session", p->step->session}, {"bind", p->step->bind}});
  msg.header["rows"] = std::move(list);
  for (const auto& [name, t] : first.inputs) {
    std::vector<const Tensor*> parts;
    for (const auto* p : rows) {
      auto it = p->step->inputs.find(name);
      if (it == p->step->inputs.end()) throw Error(ErrorCode::Internal, "a batched row lacks input " + name);
      parts.push_back(&it->second);
    }
    msg.tensors[name] = stack_axis0(parts);
  }
  return msg;
}

// Never throws: whatever goes wrong is every row's error (a thread waiting
// for its row must always be woken).
void StepScheduler::send(Stage& st, const std::vector<Pending*>& rows, double timeout_s) {
  StepCall& first = *rows[0]->step;
  const bool batched = rows.size() > 1;
  const auto t0 = Clock::now();
  const int strikes_before = first.worker->strikes();
  Message reply;
  std::exception_ptr error;
  try {
    reply = first.worker->call(call_message(rows), timeout_s, CallKind::Step, first.outputs);
    first.worker->note_steps(static_cast<int64_t>(rows.size()));
    if (!first.graph_key.empty()) first.worker->note_graph(first.graph_key);
    if (batched)
      for (const auto& [name, t] : reply.tensors)
        if (t.shape.empty() || t.shape[0] % static_cast<int64_t>(rows.size()) != 0) {
          first.worker->strike("its batched reply's \"" + name + "\" does not hold one part per row");
          throw Error(ErrorCode::NoWorker, "worker " + first.worker->id() + " sent a batched reply of the wrong shape");
        }
  } catch (const Error& e) {
    error = std::current_exception();
    // A fault (not a capacity refusal) answering a batched call failed
    // every row's step: it counts once per row, as separate calls would.
    if (batched && first.worker->strikes() > strikes_before)
      for (size_t r = 1; r < rows.size(); ++r) first.worker->strike(std::string("a batched call failed: ") + e.what());
  } catch (...) {
    error = std::current_exception();
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  auto average = [](double& avg, double v) { avg = avg == 0 ? v : 0.7 * avg + 0.3 * v; };
  if (!error) {
    if (first.batchable) {
      average(st.decode_ms, ms);
      average(st.gap_ms, std::chrono::duration<double, std::milli>(t0 - st.idle_since).count());
      average(st.worker_ms, reply.header.value("ms", 0.0));
      // A worker's speed from its one-row steps: a batched call's time also
      // grows with its rows, and counting that would count its load twice.
      if (!batched) first.worker->note_speed(first.bytes, ms);
    } else if (first.tokens > 0 && first.tokens == st.chunk && st.members > 0) {
      st.chunk = next_chunk(st.chunk, ms, st.decode_ms, options_.max_chunk);  // a chunk this stage sized
    }
  }
  if (first.batchable) {
    st.last_batch = static_cast<int>(rows.size());
    ++st.batches;
    st.rows += static_cast<int64_t>(rows.size());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    Pending& p = *rows[r];
    try {
      if (error) {
        p.error = error;
      } else if (!batched) {
        p.reply = std::move(reply);
      } else {
        p.reply.header = reply.header;
        for (const auto& [name, t] : reply.tensors) p.reply.tensors[name] = axis0_part(t, static_cast<int64_t>(r), static_cast<int64_t>(rows.size()));
      }
    } catch (...) {
      p.error = std::current_exception();
    }
    p.done = true;
  }
}

Message StepScheduler::run(const std::string& stage, StepCall& step, double timeout_s) {
  Pending me;
  me.step = &step;
  me.since = Clock::now();
  // A worker without batched calls gets every step alone.
  const bool batch = step.batchable && !step.alone && step.worker->info().features.count(kBatchedCalls);
  std::unique_lock<std::mutex> lock(mu_);
  Stage& st = stages_[stage];
  (batch ? st.decode : st.other).push_back(&me);
  // No one else is woken: this thread looks for a call to send itself
  // below, and a row can only make a call ready, never another thread's
  // own. Waking every waiting sequence on each arrival cost a batch of 8
  // dozens of context switches between two calls.
  while (!me.done) {
    Clock::time_point wake = Clock::now() + std::chrono::milliseconds(50);
    const std::vector<Pending*> rows = next_call(st, Clock::now(), &wake);
    if (rows.empty()) {
      cv_.wait_until(lock, wake);
      continue;
    }
    // This thread sends the call for every row in it, then wakes them.
    st.in_flight = true;
    hop_trace(rows.size() > 1 ? "sched.batch_send" : "sched.one_send");
    lock.unlock();
    send(st, rows, timeout_s);  // takes mu_ to hand out the results
    lock.lock();
    st.in_flight = false;
    st.idle_since = Clock::now();
    hop_trace("sched.call_end");
    cv_.notify_all();
  }
  if (me.error) std::rethrow_exception(me.error);
  return std::move(me.reply);
}

int64_t StepScheduler::next_chunk(int64_t chunk, double chunk_ms, double decode_ms, int64_t max_chunk) {
  constexpr int64_t kSmallest = 8;
  if (decode_ms <= 0) return std::max(kSmallest, std::min(chunk, max_chunk));
  if (chunk_ms < 0.75 * decode_ms && chunk * 2 <= max_chunk) return chunk * 2;
  if (chunk_ms > 1.25 * decode_ms && chunk / 2 >= kSmallest) return chunk / 2;
  return chunk;
}

int64_t StepScheduler::prefill_chunk(const std::string& stage) {
  std::lock_guard<std::mutex> lock(mu_);
  const Stage& st = stages_[stage];
  if (st.members == 0 || st.decode_ms <= 0) return options_.max_chunk;
  return std::min(st.chunk, options_.max_chunk);
}

int StepScheduler::load(const std::string& worker_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  const std::string prefix = worker_id + "\n";
  for (auto it = stages_.lower_bound(prefix); it != stages_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    n += it->second.members + static_cast<int>(it->second.decode.size() + it->second.other.size());
  return n;
}

json StepScheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (const auto& [key, st] : stages_) {
    const auto a = key.find('\n'), b = key.rfind('\n');
    out.push_back({{"worker", key.substr(0, a)},
                   {"model", key.substr(a + 1, b - a - 1)},
                   {"layers", key.substr(b + 1)},
                   {"sequences", st.members},
                   {"queued", st.decode.size() + st.other.size()},
                   {"lastBatch", st.last_batch},
                   {"batches", st.batches},
                   {"rows", st.rows},
                   {"decodeMs", st.decode_ms},
                   {"gapMs", st.gap_ms},
                   {"prefillChunk", st.chunk},
                   {"workerMs", st.worker_ms}});
  }
  return out;
}

}  // namespace bonfire::net
