#include "apps/net_commands.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "apps/cli_util.h"
#include "apps/compute_options.h"
#include "core/error.h"
#include "net/server.h"
#include "net/worker.h"

namespace bonfire {

namespace {

// "8G", "512M", "1500000" → bytes.
int64_t parse_bytes(const std::string& s) {
  if (s.empty()) return 0;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw Error(ErrorCode::BadGraph, "\"" + s + "\" is not a size (e.g. 8G, 512M)");
  }
  const std::string unit = s.substr(used);
  double scale = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") scale = 1024.0;
  else if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw Error(ErrorCode::BadGraph, "\"" + s + "\": unknown unit (K, M or G)");
  return static_cast<int64_t>(v * scale);
}

struct Options {
  net::ServeOptions serve;
  std::string local_memory;
  net::WorkerOptions worker;
  std::string worker_memory;
  std::string cache_max;
  bool no_model = false;
};

}  // namespace

std::function<int()> add_net_commands(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* serve = app.add_subcommand("serve", "the coordinator: HTTP API, OpenAI-compatible API, worker network");
  serve->add_option("--model", o->serve.models,
                    "model folder or GGUF file to serve (repeatable; default: the bundled demo model)");
  serve->add_flag("--no-model", o->no_model, "serve no model, not even the demo (graph calls only)");
  serve->add_option("--host", o->serve.host, "address to listen on")->capture_default_str();
  serve->add_option("--port", o->serve.port, "port (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_flag("!--no-local-worker", o->serve.local_worker, "do not run a worker in this process");
  serve->add_option("--token", o->serve.token, "shared secret workers must present to join");
  serve->add_option("--api-key", o->serve.api_keys, "API key clients must send as a Bearer token (repeatable)");
  serve->add_option("--cors", o->serve.cors_origins,
                    "a web origin (https://app.example) whose pages may call the API, or * for any (repeatable; "
                    "default: none, so only serve's own page)");
  serve->add_option("--ctx", o->serve.model.ctx, "context length of each generation's session")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--stages", o->serve.model.stages,
                    "split each generation into this many pipeline stages (0: only as needed by workers' memory)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  serve->add_option("--max-tokens", o->serve.max_tokens, "most tokens one request may generate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-body", o->serve.max_body, "largest request body in bytes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--graph-timeout", o->serve.graph_timeout_s,
                    "seconds a /api/v3/graph call may run on a worker (then 504; the worker stops it too)")
      ->capture_default_str()
      ->check(finite_range(1e-3, 1e7));
  serve->add_option("--max-batch", o->serve.model.scheduler.max_batch,
                    "most sequences in one batched decode call on a worker (1 turns batching off)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  serve->add_option("--prefill-chunk", o->serve.model.scheduler.max_chunk,
                    "most prompt tokens in one prefill call (a prompt is cut into chunks while others decode)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 20));
  serve->add_option("--step-timeout", o->serve.model.call_timeout_s, "seconds a worker may take for one step")
      ->capture_default_str()
      ->check(finite_range(1e-3, 1e7));
  serve->add_option("--verify-rate", o->serve.verify.rate,
                    "fraction of generation steps that start a spot check: the steps since the generation's last "
                    "check are recomputed on another worker (docs/NETWORK.md \"Checking workers\")")
      ->capture_default_str()
      ->check(finite_range(0, 1));
  serve->add_option("--verify-seed", o->serve.verify.seed,
                    "seed of the spot checks' coin, for tests (default: a secret one; a seed makes checks predictable)");
  serve->add_option("--ban-time", o->serve.verify.ban_s, "seconds a worker caught returning wrong results stays banned")
      ->capture_default_str()
      ->check(finite_range(0, 1e9));
  serve->add_option("--never-ban", o->serve.never_ban,
                    "an address whose workers are banned by id only, never by address (repeatable; loopback always is)");
  serve->add_option("--local-worker-memory", o->local_memory, "memory the in-process worker lends (e.g. 8G)");
  serve->add_option("--web-dir", o->serve.web_dir,
                    "static files for GET / (default: ../web or web beside the binary, else the source tree's web/)");
  serve->add_option("--wasm-dir", o->serve.wasm_dir,
                    "the browser worker's WebAssembly build for GET /lend and /wasm/ (default: wasm or ../wasm "
                    "beside the binary, where scripts/build_wasm.sh puts it)");
#ifdef BONFIRE_SOURCE_DIR
  o->serve.source_web_dir = BONFIRE_SOURCE_DIR "/web";
#endif
  serve->add_option("--tls-cert", o->serve.tls_cert,
                    "PEM certificate (chain) to serve HTTPS and wss:// with; needs --tls-key");
  serve->add_option("--tls-key", o->serve.tls_key, "PEM private key of --tls-cert (unencrypted)");
  serve->add_flag("--quiet", o->serve.quiet, "no log lines on stderr");
  add_compute_options(*serve, true);

  auto* worker = app.add_subcommand("worker", "a volunteer worker: joins a coordinator and runs what it is sent");
  worker->add_option("--join", o->worker.join, "the coordinator's URL (http://host:port, or https://host:port)")
      ->required();
  worker->add_option("--ca", o->worker.ca_file,
                     "PEM file of the CA(s) to trust for an https:// coordinator (default: the system's CAs)");
  worker->add_option("--model", o->worker.models, "model folder or GGUF file held on this machine (repeatable)");
  worker->add_option("--token", o->worker.token, "the network's shared secret");
  worker->add_option("--id", o->worker.id, "this worker's name (default: the coordinator assigns one)");
  worker->add_option("--memory", o->worker_memory, "memory this worker lends (e.g. 8G; default: what is free now)");
  worker->add_option("--read-gbs", o->worker.read_gbs,
                     "the read bandwidth to announce, GB/s: placement's guess at this worker's speed until its steps "
                     "are timed (default: measured at start; 0: announce none)")
      ->check(finite_range(0, 10000));
  worker->add_option("--disable-feature", o->worker.disabled_features, "announce and run without this feature");
  worker->add_option("--cache-dir", o->worker.cache_dir, "where models fetched from the coordinator are kept");
  worker->add_option("--cache-max", o->cache_max,
                     "most the model cache may hold (e.g. 20G); the least recently used models go first");
  worker->add_flag("!--no-fetch", o->worker.fetch_models, "never download models from the coordinator");
  worker->add_flag("!--no-reconnect", o->worker.reconnect, "exit when the coordinator goes away");
  worker->add_flag("--quiet", o->worker.quiet, "no log lines on stderr");
  worker->add_option("--fault", o->worker.fault,
                     "test aids, comma-separated: lie=P returns a plausibly wrong result to a fraction P of calls "
                     "(the second-best token, or a hidden state moved by 1% of its norm); slow=MS holds every "
                     "graph call MS milliseconds");
  worker->add_option("--fault-seed", o->worker.fault_seed, "seed of --fault's coin (default: random)");
  add_compute_options(*worker, true);

  return [o, serve, worker]() -> int {
    if (*serve)
      return guarded([&] {
        o->serve.local_worker_memory = parse_bytes(o->local_memory);
        if (o->serve.models.empty() && !o->no_model) {
          try {
            o->serve.models.push_back(model_or_default(""));
          } catch (const Error& e) {
            std::cerr << "bonfire serve: " << e.what() << "; serving graph calls only\n";
          }
        }
        net::Server server(o->serve);
        const int status = server.run();
        if (status) throw Error(ErrorCode::Internal, "the server stopped with status " + std::to_string(status));
      });
    if (*worker) {
      int status = 0;
      const int guard = guarded([&] {
        std::signal(SIGPIPE, SIG_IGN);
        o->worker.memory = parse_bytes(o->worker_memory);
        if (!o->cache_max.empty()) o->worker.cache_max = parse_bytes(o->cache_max);
        net::Worker w(o->worker);
        // The handler only sets a flag: Worker::stop() takes a mutex and
        // allocates, which a signal landing inside malloc or inside that
        // mutex (the link's thread) would deadlock. A watcher calls it.
        static std::atomic<bool> signalled{false};
        std::signal(SIGINT, [](int) { signalled = true; });
        std::signal(SIGTERM, [](int) { signalled = true; });
        std::atomic<bool> done{false};
        std::thread watcher([&] {
          while (!done && !signalled) std::this_thread::sleep_for(std::chrono::milliseconds(50));
          if (signalled) w.stop();
        });
        try {
          status = w.run();
        } catch (...) {
          // A model that cannot be opened ends the worker with its message,
          // after the watcher (a joinable thread may not be destroyed).
          done = true;
          watcher.join();
          throw;
        }
        done = true;
        watcher.join();
      });
      return guard ? guard : status;
    }
    return -1;
  };
}

}  // namespace bonfire
