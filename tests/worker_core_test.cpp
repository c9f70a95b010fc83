// The worker's protocol core (net/worker_core.h) driven with messages, as
// the coordinator's link would: here, a graph whose first appearance on a
// worker is in a batched call (`rows`), which a step scheduler may send
// after a failover. It once failed with '"s:L0.kv.k" needs the call to name
// a "session"' (the rows name the sessions, not the call), three times in a
// row, and the worker was dropped (net.verify caught it once).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "net/model_hash.h"
#include "net/worker_core.h"
#include "ops/gemm.h"

namespace bonfire::net {
namespace {

using json = nlohmann::json;

struct Replies {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, Message> by_req;

  Message wait(int req) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return by_req.count(req) > 0; });
    EXPECT_TRUE(by_req.count(req)) << "no reply to request " << req;
    return by_req.count(req) ? by_req[req] : Message();
  }
};

Tensor ids(const std::vector<float>& v) {
  Tensor t = Tensor::empty({(int64_t)v.size()});
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = v[i];
  return t;
}

// A worker core holding the demo model, on a link whose messages are
// collected by request id.
struct DemoWorker {
  const std::string path = std::string(BONFIRE_SOURCE_DIR) + "/models/demo";
  const ModelFingerprint fp = fingerprint_model(path);
  Replies replies;
  WorkerCore core{options(), {}};

  DemoWorker() {
    core.add_model(path, fp);
    core.link_opened([this](Message m) {
      std::lock_guard<std::mutex> lock(replies.mu);
      replies.by_req[m.header.value("req", -1)] = std::move(m);
      replies.cv.notify_all();
    });
  }
  static WorkerCoreOptions options() {
    WorkerCoreOptions o;
    o.quiet = true;
    o.fetch_models = false;
    return o;
  }
  // The demo model's step graph for `mode` and `tokens`, as the coordinator lowers it.
  json lowered(const std::string& mode, int64_t tokens) const {
    const auto model = ir::LocalModel::open(path, {});
    ir::LowerOptions lo;
    lo.mode = mode;
    lo.tokens = tokens;
    lo.ctx = 64;
    return ir::lower(model->ir(), lo, &model->weights());
  }
};

TEST(WorkerCore, GraphFirstSentInABatchedCall) {
  DemoWorker w;
  WorkerCore& core = w.core;
  Replies& replies = w.replies;
  const ModelFingerprint& fp = w.fp;
  auto lowered = [&](const std::string& mode, int64_t tokens) { return w.lowered(mode, tokens); };
  // Two sessions read a 3-token prompt, each in its own call.
  const json prefill = lowered("prefill", 3);
  for (int r = 0; r < 2; ++r) {
    Message m(json{{"type", "run"}, {"req", r + 1}, {"model", fp.id}, {"graph", "prefill-3"},
                   {"session", "s" + std::to_string(r)}, {"bind", {{"pos", 0}, {"step", 0}}}, {"call", prefill}});
    m.tensors["in:tokens"] = ids({1, 5, 9});
    core.on_message(std::move(m));
    const Message reply = replies.wait(r + 1);
    ASSERT_EQ(reply.type(), "result") << reply.header.dump();
  }
  // Their next step together: the decode graph comes with this call.
  json rows = json::array();
  for (const char* sid : {"s0", "s1"}) rows.push_back({{"session", sid}, {"bind", {{"pos", 3}, {"step", 1}}}});
  Message step(json{{"type", "run"}, {"req", 3}, {"model", fp.id}, {"graph", "decode"}, {"call", lowered("decode", 1)},
                    {"rows", rows}});
  step.tensors["in:tokens"] = ids({17, 23});
  core.on_message(std::move(step));
  const Message reply = replies.wait(3);
  EXPECT_EQ(reply.type(), "result") << reply.header.dump();
  // The graph is registered without a session: a later plain call names its own.
  Message solo(json{{"type", "run"}, {"req", 4}, {"model", fp.id}, {"graph", "decode"}, {"session", "s0"},
                    {"bind", {{"pos", 4}, {"step", 2}}}});
  solo.tensors["in:tokens"] = ids({7});
  core.on_message(std::move(solo));
  EXPECT_EQ(replies.wait(4).type(), "result");
  core.stop();
}

// A checker's rule for int8 activations ("int8Rows", docs/PROTOCOL-EXTENSIONS.md):
// the hello announces the worker's own; a run naming one of the three is
// run, anything else is refused with the field's name, and the refused call
// leaves no session behind.
TEST(WorkerCore, CheckersInt8RuleIsAnnouncedAndValidated) {
  DemoWorker w;
  const json hello = w.core.hello().header;
  EXPECT_EQ(hello.value("int8Rows", ""), int8_rows_name(int8_rows_rule())) << hello.dump();
  const json prefill = w.lowered("prefill", 3);
  auto run = [&](int req, const json& rule, const std::string& session) {
    Message m(json{{"type", "run"}, {"req", req}, {"model", w.fp.id}, {"session", session},
                   {"bind", {{"pos", 0}, {"step", 0}}}, {"call", prefill}, {"int8Rows", rule}});
    m.tensors["in:tokens"] = ids({1, 5, 9});
    w.core.on_message(std::move(m));
    return w.replies.wait(req);
  };
  int req = 10;
  for (const json& bad : {json("most"), json("ANY"), json(""), json(3)}) {
    const Message r = run(req++, bad, "refused");
    ASSERT_EQ(r.type(), "error") << bad;
    EXPECT_NE(r.header["error"].dump().find("int8Rows"), std::string::npos) << r.header.dump();
  }
  EXPECT_EQ(w.core.stats()["sessions"], 0) << "a refused call left a session";
  for (const char* rule : {"none", "few", "any"})
    EXPECT_EQ(run(req++, rule, std::string("s-") + rule).type(), "result") << rule;
  EXPECT_EQ(w.core.stats()["sessions"], 3);
  w.core.stop();
}

// Hooks::device_call (the browser worker's GPU steps): a call handed over
// is answered when the runner says so, from another thread; a call that
// fails there forgets the session it created; a session tensor the device
// holds is never read by the CPU engine.
TEST(WorkerCore, DeviceCallsAnswerLaterAndFailCleanly) {
  const std::string path = std::string(BONFIRE_SOURCE_DIR) + "/models/demo";
  const ModelFingerprint fp = fingerprint_model(path);
  const auto model = ir::LocalModel::open(path, {});
  ir::LowerOptions lo;
  lo.mode = "prefill";
  lo.tokens = 3;
  lo.ctx = 64;
  const json prefill = ir::lower(model->ir(), lo, &model->weights());

  std::mutex mu;
  std::string mode = "run";  // what the runner does with the next call
  std::vector<std::thread> runners;
  WorkerCore::Hooks hooks;
  hooks.device_call = [&](DeviceCall& c) {
    std::lock_guard<std::mutex> lock(mu);
    if (mode == "cpu") return false;
    runners.emplace_back([c = std::move(c), m = mode]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // answered after the hook returned
      if (m == "fail") return c.fail(Error(ErrorCode::Internal, "the GPU device was lost"));
      RunResult r = run_graph(c.call->graph, c.inputs, c.bind, c.weights, c.session.get(), c.limits);
      if (m == "hold")  // the device keeps the caches: shape, no data
        for (auto& [name, t] : c.session->tensors) {
          Tensor held;
          held.shape = t.shape;
          t = held;
        }
      c.done(std::move(r));
    });
    return true;
  };
  WorkerCoreOptions o;
  o.quiet = true;
  o.fetch_models = false;
  WorkerCore core(o, hooks), plain(o, {});
  core.add_model(path, fp);
  plain.add_model(path, fp);
  Replies replies, reference;
  core.link_opened([&](Message m) {
    std::lock_guard<std::mutex> lock(replies.mu);
    replies.by_req[m.header.value("req", -1)] = std::move(m);
    replies.cv.notify_all();
  });
  plain.link_opened([&](Message m) {
    std::lock_guard<std::mutex> lock(reference.mu);
    reference.by_req[m.header.value("req", -1)] = std::move(m);
    reference.cv.notify_all();
  });
  auto call = [&](WorkerCore& w, int req, const std::string& session) {
    Message m(json{{"type", "run"}, {"req", req}, {"model", fp.id}, {"session", session},
                   {"bind", {{"pos", 0}, {"step", 0}}}, {"call", prefill}});
    m.tensors["in:tokens"] = ids({1, 5, 9});
    w.on_message(std::move(m));
  };

  call(core, 1, "a");
  call(plain, 1, "a");
  const Message got = replies.wait(1), want = reference.wait(1);
  ASSERT_EQ(got.type(), "result") << got.header.dump();
  const Tensor& logits = got.tensors.at("logits");
  ASSERT_EQ(logits.shape, want.tensors.at("logits").shape);
  EXPECT_EQ(std::memcmp(logits.data, want.tensors.at("logits").data, logits.nbytes()), 0);

  { std::lock_guard<std::mutex> lock(mu); mode = "fail"; }
  call(core, 2, "b");
  const Message failed = replies.wait(2);
  EXPECT_EQ(failed.type(), "error");
  EXPECT_NE(failed.header.dump().find("the GPU device was lost"), std::string::npos) << failed.header.dump();
  EXPECT_EQ(core.stats()["sessions"], 1) << "the failed call's new session is forgotten";

  { std::lock_guard<std::mutex> lock(mu); mode = "hold"; }
  call(core, 3, "c");
  ASSERT_EQ(replies.wait(3).type(), "result");
  // a's caches in memory and c's on the device count alike: 8 caches of 64 rows of 128 f32 each.
  EXPECT_EQ(core.stats()["sessionBytes"], 2 * 8 * 64 * 128 * 4) << "device-held tensors count by their shape";
  { std::lock_guard<std::mutex> lock(mu); mode = "cpu"; }
  lo.mode = "decode";
  lo.tokens = 1;
  Message next(json{{"type", "run"}, {"req", 4}, {"model", fp.id}, {"session", "c"}, {"bind", {{"pos", 3}, {"step", 1}}},
                    {"call", ir::lower(model->ir(), lo, &model->weights())}});
  next.tensors["in:tokens"] = ids({7});
  core.on_message(std::move(next));
  const Message refused = replies.wait(4);
  EXPECT_EQ(refused.type(), "error");
  EXPECT_NE(refused.header.dump().find("held by this worker's GPU"), std::string::npos) << refused.header.dump();
  for (auto& t : runners) t.join();
  core.stop();
  plain.stop();
}

}  // namespace
}  // namespace bonfire::net
