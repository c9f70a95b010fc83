// `bonfire serve`: the coordinator's HTTP API (spec/PROTOCOL.md, docs/
// NETWORK.md) over the worker network, with a worker in this process unless
// told otherwise. Routes live in server.cpp (protocol endpoints) and
// server_generate.cpp (generation: bonfire's and the OpenAI-compatible one).
#pragma once
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "net/coordinator.h"
#include "net/http_server.h"
#include "net/metrics.h"
#include "net/served_model.h"
#include "net/worker.h"

namespace bonfire::net {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> models;       // model folders or GGUF files to serve
  bool local_worker = true;
  std::string token;                     // workers must present it
  std::vector<std::string> api_keys;     // clients must present one ("" list: open)
  ServeModelOptions model;
  int64_t max_tokens = 4096;             // per request
  uint64_t max_body = 16u << 20;
  Limits graph_limits;                   // for /api/v3/graph
  double graph_timeout_s = 120;
  int64_t local_worker_memory = 0;
  std::string web_dir;                   // static files for GET /
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

 private:
  void handle(const HttpRequest& req, HttpResponder& res);
  void route(const HttpRequest& req, HttpResponder& res, std::string& endpoint);
  bool authorized(const HttpRequest& req) const;
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
  std::string metrics_text() const;

  void log(const std::string& s) const;

  ServeOptions options_;
  Metrics metrics_;
  std::unique_ptr<Coordinator> net_;
  std::unique_ptr<HttpServer> http_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  std::unique_ptr<Worker> local_worker_;
  std::thread local_thread_;
  std::atomic<int> active_generations_{0};
  std::mutex sessions_mu_;
  std::map<std::string, std::string> session_worker_;  // /api/v3/graph sessions: id -> worker id
};

}  // namespace bonfire::net
