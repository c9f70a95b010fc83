// `bonfire bench generate`: prefill and decode tokens/s of bonfire's local
// generation beside llama.cpp's on the same GGUF (scripts/bench_llama_cpp.py,
// node-llama-cpp's prebuilt libllama, run right after in the same command),
// and the decode ceiling the machine's read bandwidth sets for that file.
#include "apps/bench_generate.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "core/bandwidth.h"
#include "core/error.h"
#include "core/threads.h"
#include "ir/generation.h"
#include "net/server.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace bonfire {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// scripts/bench_llama_cpp.py beside the build directory the binary is in.
std::string default_reference_script() {
  std::array<char, 4096> exe{};
  const ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n <= 0) return "";
  const fs::path root = fs::path(std::string(exe.data(), n)).parent_path().parent_path();
  return (root / "scripts" / "bench_llama_cpp.py").string();
}

json run_reference(const BenchGenerateOptions& o) {
  const std::string script = o.reference_script.empty() ? default_reference_script() : o.reference_script;
  if (!fs::exists(script)) return {{"error", "reference script not found: " + script}};
  const std::string cmd = "/usr/bin/python3 '" + script + "' --model '" + o.model + "' --prefill " +
                          std::to_string(o.prefill) + " --decode " + std::to_string(o.decode) + " --threads " +
                          std::to_string(num_threads()) + " --reps " + std::to_string(o.reps) + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {{"error", "could not start " + script}};
  std::string out;
  char buf[4096];
  while (size_t got = std::fread(buf, 1, sizeof buf, p)) out.append(buf, got);
  const int status = ::pclose(p);
  // The result is the last line that is a JSON object (its values may hold objects too).
  size_t brace = out.rfind("\n{");
  if (brace != std::string::npos) ++brace;
  else if (!out.empty() && out[0] == '{') brace = 0;
  if (status != 0 || brace == std::string::npos)
    return {{"error", "llama.cpp reference failed (scripts/fetch_llama_cpp.sh installs it)"}};
  try {
    return json::parse(out.substr(brace));
  } catch (const std::exception&) {
    return {{"error", "reference printed no JSON"}};
  }
}

// Bytes one decode step reads: every weight once, except an embedding
// table that is not also the output matrix (one row of it is read).
double decode_bytes(const ir::LocalModel& m) {
  double total = 0;
  for (const auto& name : m.weights().names()) total += static_cast<double>(m.weights().find(name)->nbytes());
  const json& embed = m.ir()["embed"]["nodes"];
  bool tied = false;
  for (const auto& n : m.ir()["head"]["nodes"])
    if (n.contains("tied_to")) tied = true;
  if (!tied && !embed.empty() && embed[0].contains("weight"))
    if (const Tensor* t = m.weights().find(embed[0]["weight"].get<std::string>())) total -= t->nbytes();
  return total;
}

// One POST on loopback; the JSON answer.
json post_json(int port, const std::string& path, const json& body) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  stream.connect(resolver.resolve("127.0.0.1", std::to_string(port)));
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body.dump();
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return json::parse(res.body());
}

// Another program on the volunteer's machine: a child process that keeps one
// core busy and counts its loops in shared memory, so its speed can be read
// while the worker runs beside it. (A process, not a thread: background mode
// tells other programs' load from this one's.)
class BusyProcess {
 public:
  BusyProcess() {
    void* p = mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error(ErrorCode::Internal, "bench: cannot map a shared counter");
    loops_ = new (p) std::atomic<uint64_t>(0);
    pid_ = fork();
    if (pid_ < 0) {
      munmap(loops_, sizeof(std::atomic<uint64_t>));
      throw Error(ErrorCode::Internal, "bench: cannot start the busy process");
    }
    if (pid_ == 0) {
      // Only arithmetic and a relaxed store: nothing a forked copy of a
      // threaded process may not do.
      volatile double x = 1;
      for (uint64_t n = 1;; ++n) {
        for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
        loops_->store(n, std::memory_order_relaxed);
      }
    }
  }
  ~BusyProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    munmap(loops_, sizeof(std::atomic<uint64_t>));
  }
  // Its loops per second while `during` runs.
  double rate_during(const std::function<void()>& during) {
    const uint64_t before = loops_->load();
    const auto t0 = std::chrono::steady_clock::now();
    during();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(loops_->load() - before) / s;
  }

 private:
  pid_t pid_ = -1;
  std::atomic<uint64_t>* loops_ = nullptr;
};

// The same generation through `bonfire serve` with its local worker: the
// coordinator lowers and routes, the worker runs, one HTTP request in and
// one WebSocket round trip per step. With --busy, decode again beside a
// BusyProcess, normally and in background mode.
struct NetworkFigures {
  double prefill_tps = 0, decode_tps = 0;
  double overhead_ms = 0;  // per decode step: decode time less the worker's own (timings.overheadMsPerStep)
  double busy_decode_tps = 0, background_decode_tps = 0;   // beside the busy process
  double busy_alone = 0, busy_beside = 0, busy_beside_background = 0;  // its loops/s
};
NetworkFigures bench_network(const BenchGenerateOptions& o, const ir::GenerateRequest& req) {
  net::ServeOptions so;
  so.port = 0;
  so.models = {o.model};
  so.model.ctx = o.prefill + o.decode + 8;
  so.quiet = true;
  net::Server server(so);
  server.start();
  const json body = {{"tokens", req.prompt}, {"maxTokens", req.max_tokens}, {"temperature", 0}};
  // Wait for the local worker to join, then warm up.
  json r;
  for (int i = 0; i < 600; ++i) {
    r = post_json(server.port(), "/api/v3/generate", body);
    if (r.contains("tokens")) break;
    usleep(100 * 1000);
  }
  if (!r.contains("tokens")) throw Error(ErrorCode::Internal, "the network run failed: " + r.dump());
  NetworkFigures f;
  // Mean decode tokens/s over the reps (and the prefill's, into *prefill).
  const auto measure = [&](double* prefill) {
    double decode = 0;
    for (int k = 0; k < o.reps; ++k) {
      r = post_json(server.port(), "/api/v3/generate", body);
      const json& t = r.at("timings");
      if (prefill) *prefill += o.prefill * 1000.0 / t["prefillMs"].get<double>() / o.reps;
      decode += (r["tokens"].size() - 1) * 1000.0 / t["decodeMs"].get<double>() / o.reps;
      if (prefill) f.overhead_ms += t.value("overheadMsPerStep", 0.0) / o.reps;
    }
    return decode;
  };
  f.decode_tps = measure(&f.prefill_tps);
  if (o.busy) {
    BusyProcess busy;
    f.busy_alone = busy.rate_during([] { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); });
    f.busy_beside = busy.rate_during([&] { f.busy_decode_tps = measure(nullptr); });
    std::string why;
    if (!set_background(true, &why)) throw Error(ErrorCode::Internal, "bench --busy: " + why);
    f.busy_beside_background = busy.rate_during([&] { f.background_decode_tps = measure(nullptr); });
    set_background(false);
  }
  server.stop();
  return f;
}

}  // namespace

int bench_generate(const BenchGenerateOptions& o) {
  ir::LocalModel::Options mo;
  mo.ctx = o.prefill + o.decode + 8;
  auto model = ir::LocalModel::open(o.model, mo);
  const int64_t vocab = model->ir()["model"]["vocab"].get<int64_t>();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(100, static_cast<int32_t>(std::min<int64_t>(vocab, 30000)) - 1);
  ir::GenerateRequest req;
  for (int64_t i = 0; i < o.prefill; ++i) req.prompt.push_back(pick(rng));
  req.max_tokens = o.decode + 1;  // the first token comes with the prefill
  req.ignore_eos = true;

  // The first call against steady state, on an 8-token prompt: whatever a
  // first call pays that later ones do not (lowering, page faults, buffers).
  ir::GenerateRequest short_req;
  short_req.prompt.assign(req.prompt.begin(), req.prompt.begin() + std::min<size_t>(8, req.prompt.size()));
  short_req.max_tokens = 1;
  const double first_prefill_ms = model->generate(short_req).prefill_ms;
  std::vector<double> steady;
  for (int i = 0; i < 5; ++i) steady.push_back(model->generate(short_req).prefill_ms);
  std::sort(steady.begin(), steady.end());
  const double steady_prefill_ms = steady[steady.size() / 2];

  model->generate(req);  // warm-up: page the weights in, lower the graphs
  double prefill_tps = 0, decode_tps = 0;
  for (int r = 0; r < o.reps; ++r) {
    const ir::GenerateResult g = model->generate(req);
    prefill_tps += o.prefill * 1000.0 / g.prefill_ms / o.reps;
    decode_tps += (g.tokens.size() - 1) * 1000.0 / g.decode_ms / o.reps;
  }
  const double bytes = decode_bytes(*model);
  // Serve opens the model again: the in-process copy (its repacked panels,
  // its caches) goes first, so the two paths do not share the memory.
  model.reset();
  NetworkFigures network;
  if (o.network) network = bench_network(o, req);
  const double bandwidth = measure_read_bandwidth();
  json ref = o.reference ? run_reference(o) : json{{"error", "not run (--no-reference)"}};

  const bool have_ref = ref.contains("decode_tps");
  std::printf("model %s: %.2f GB read per decode step, %d threads, prefill %lld tokens, decode %lld tokens, "
              "mean of %d runs\n",
              o.model.c_str(), bytes / 1e9, num_threads(), (long long)o.prefill, (long long)o.decode, o.reps);
  std::printf("%-28s %14s %14s\n", "", "prefill tok/s", "decode tok/s");
  std::printf("%-28s %14.2f %14.2f\n", "bonfire", prefill_tps, decode_tps);
  if (o.network) {
    std::printf("%-28s %14.2f %14.2f\n", "bonfire via serve + worker", network.prefill_tps, network.decode_tps);
    std::printf("%-28s %14s %14.3f   (ms per decode step: decode time less the worker's own run time)\n",
                "network overhead", "", network.overhead_ms);
    if (o.busy) {
      std::printf("%-28s %14s %14.2f   (%.0f%% of quiet; the busy process keeps %.0f%% of its speed)\n",
                  "  beside a busy process", "", network.busy_decode_tps,
                  100.0 * network.busy_decode_tps / network.decode_tps,
                  100.0 * network.busy_beside / network.busy_alone);
      std::printf("%-28s %14s %14.2f   (%.0f%% of quiet; the busy process keeps %.0f%% of its speed)\n",
                  "  the same, --background", "", network.background_decode_tps,
                  100.0 * network.background_decode_tps / network.decode_tps,
                  100.0 * network.busy_beside_background / network.busy_alone);
    }
  }
  std::printf("%-28s %14.2f ms first call, %.2f ms steady (%.2fx)\n", "prefill of 8 tokens", first_prefill_ms,
              steady_prefill_ms, first_prefill_ms / steady_prefill_ms);
  if (have_ref) {
    std::printf("%-28s %14.2f %14.2f\n", "llama.cpp (libllama 3.21.1)", ref["prefill_tps"].get<double>(),
                ref["decode_tps"].get<double>());
    std::printf("%-28s %14.2f %14.2f\n", "ratio bonfire / llama.cpp", prefill_tps / ref["prefill_tps"].get<double>(),
                decode_tps / ref["decode_tps"].get<double>());
    if (o.network)
      std::printf("%-28s %14.2f %14.2f\n", "ratio via serve / llama.cpp",
                  network.prefill_tps / ref["prefill_tps"].get<double>(),
                  network.decode_tps / ref["decode_tps"].get<double>());
  } else {
    std::printf("llama.cpp: %s\n", ref.value("error", std::string("?")).c_str());
  }
  std::printf("%-28s %14s %14.2f   (read bandwidth %.1f GB/s)\n", "bandwidth limit", "", bandwidth / bytes,
              bandwidth / 1e9);
  if (o.json) {
    json j = {{"model", o.model},
              {"threads", num_threads()},
              {"bonfire", {{"prefill_tps", prefill_tps}, {"decode_tps", decode_tps}}},
              {"network", o.network ? json{{"prefill_tps", network.prefill_tps},
                                           {"decode_tps", network.decode_tps},
                                           {"overhead_ms_per_step", network.overhead_ms},
                                           {"busy_decode_tps", network.busy_decode_tps},
                                           {"background_decode_tps", network.background_decode_tps},
                                           {"busy_alone_rate", network.busy_alone},
                                           {"busy_beside_rate", network.busy_beside},
                                           {"busy_beside_background_rate", network.busy_beside_background}}
                                    : json()},
              {"first_prefill8_ms", first_prefill_ms},
              {"steady_prefill8_ms", steady_prefill_ms},
              {"llama_cpp", ref},
              {"bandwidth_gbps", bandwidth / 1e9},
              {"decode_bytes", bytes},
              {"decode_limit_tps", bandwidth / bytes}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace bonfire
