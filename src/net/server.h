// `bonfire serve`: the coordinator's HTTP API (spec/PROTOCOL.md, docs/
// NETWORK.md) over the worker network, with a worker in this process unless
// told otherwise. Routes live in server.cpp (protocol endpoints),
// server_generate.cpp (generation: bonfire's and the OpenAI-compatible one)
// and server_web.cpp (static files: the page, the lend page, the browser
// worker's WebAssembly build).
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "net/coordinator.h"
#include "net/http_server.h"
#include "net/metrics.h"
#include "net/served_model.h"
#include "net/verifier.h"
#include "net/worker.h"

namespace bonfire::net {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> models;       // model folders or GGUF files to serve
  bool local_worker = true;
  std::string token;                     // workers must present it
  std::vector<std::string> api_keys;     // clients must present one ("" list: open)
  std::vector<std::string> cors_origins; // web origins whose pages may call the API ("*": any)
  ServeModelOptions model;
  VerifyOptions verify;                  // spot checks of workers (net/verifier.h)
  std::set<std::string> never_ban;       // addresses a ban leaves alone
  int64_t max_tokens = 4096;             // per request
  uint64_t max_body = 16u << 20;
  Limits graph_limits;                   // for /api/v3/graph
  double graph_timeout_s = 120;
  int64_t max_json_output_bytes = 16 << 20;   // /api/v3/graph outputs answered as JSON numbers
  int64_t max_b64_output_bytes = 256 << 20;   // ... and as base64
  int64_t local_worker_memory = 0;
  std::string web_dir;                   // static files for GET / ("": found by find_web_dir)
  std::string source_web_dir;            // the source tree's web/, the last place find_web_dir looks
  std::string wasm_dir;                  // the browser worker's build for GET /wasm/ ("": find_wasm_dir)
  std::string tls_cert, tls_key;         // PEM files: HTTPS and wss:// on the port (both or neither)
  bool quiet = false;
};

class Server {
 public:
  explicit Server(ServeOptions options);
  ~Server();
  int port() const { return http_->port(); }
  // Serves until SIGINT/SIGTERM (run) or stop().
  void start();
  void stop();
  int run();

  // Where GET / serves from when no --web-dir is given: the first of
  // <dir of the executable>/../web, <dir of the executable>/web and
  // `source_web_dir` (the build's source tree) that holds index.html; ""
  // when none does.
  static std::string find_web_dir(const std::string& source_web_dir);
  // Where GET /wasm/NAME serves from when no --wasm-dir is given: the first
  // of <dir of the executable>/wasm and <dir of the executable>/../wasm
  // that holds bonfire-worker.wasm (scripts/build_wasm.sh puts it in
  // build/wasm); "" when none does.
  static std::string find_wasm_dir();

 private:
  // A generation running now, as the web page shows it: its model, where
  // its stages run ("w1:0-11") and the tokens it has made so far.
  struct LiveGeneration {
    std::string model;
    std::vector<std::string> stages;
    int64_t tokens = 0;
    int64_t prompt_tokens = 0;
    std::chrono::steady_clock::time_point started;
  };
  // Registers a generation for its lifetime; token() is called from the
  // generation's own thread for every token (the trace is that thread's).
  class LiveScope {
   public:
    LiveScope(Server& s, const std::string& model, int64_t prompt_tokens);
    ~LiveScope();
    void token(const GenerationTrace& trace);

   private:
    Server& s_;
    uint64_t id_;
  };

  void handle(const HttpRequest& req, HttpResponder& res);
  struct Route;
  static const std::vector<Route>& routes();
  // The /metrics label of the route a path belongs to ("unknown" if none).
  static std::string endpoint_label(const std::string& path);
  void route(const HttpRequest& req, HttpResponder& res, std::string& endpoint);
  bool authorized(const HttpRequest& req) const;
  // The request's Origin when --cors lets its pages read the answer ("*"
  // for any), else "".
  std::string cors_origin(const HttpRequest& req) const;
  static void allow_origin(HttpResponder& res, const std::string& origin);  // its CORS headers
  ServedModel* model_for(const std::string& id);
  void offer_models(std::shared_ptr<RemoteWorker> w);

  // Endpoints.
  void graph(const HttpRequest& req, HttpResponder& res);
  void free_session(const std::string& id, HttpResponder& res);
  nlohmann::json workers_json() const;
  nlohmann::json models_json() const;
  void model_file(const std::string& model, const std::string& file, HttpResponder& res);
  void generate(const HttpRequest& req, HttpResponder& res);
  void openai(const HttpRequest& req, HttpResponder& res, bool chat);
  void web(const HttpRequest& req, HttpResponder& res);
  void wasm(const HttpRequest& req, HttpResponder& res);
  std::string metrics_text() const;
  nlohmann::json stats_json() const;
  double tokens_per_second() const;  // over the last kRateWindow buckets; needs live_mu_

  void log(const std::string& s) const;

  ServeOptions options_;
  Metrics metrics_;
  std::unique_ptr<Coordinator> net_;
  std::unique_ptr<Verifier> verifier_;  // after net_: stopped before it
  std::unique_ptr<HttpServer> http_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::unique_ptr<Worker> local_worker_;
  std::thread local_thread_;
  std::string local_secret_;
  std::atomic<int> active_generations_{0};
  std::mutex sessions_mu_;
  std::map<std::string, std::string> session_worker_;  // /api/v3/graph sessions: id -> worker id

  // Live view (GET /api/v3/stats, the stages of /api/v3/workers).
  static constexpr int kRateBuckets = 24;        // of kRateBucketMs each; the last 20 make the window
  static constexpr int kRateWindow = 20;
  static constexpr int64_t kRateBucketMs = 250;  // 20 x 250 ms: tokens/s over the last 5 s
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable std::mutex live_mu_;
  std::map<uint64_t, LiveGeneration> live_;
  uint64_t live_next_ = 0;
  int64_t live_tokens_ = 0;         // generated, counted as they come
  int64_t live_prompt_tokens_ = 0;
  std::array<int64_t, kRateBuckets> rate_count_{};
  std::array<int64_t, kRateBuckets> rate_slot_{};
};

}  // namespace bonfire::net
