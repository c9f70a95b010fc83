// The coordinator's HTTP front: one table of routes (method, path, who may
// call it, its /metrics label), the refusals made before any endpoint runs
// (404, 405, 401, in the shape the path's clients read), API keys and CORS.
// The endpoints themselves are Server's other files.
#include <chrono>

#include "core/error.h"
#include "core/json_parse.h"
#include "graph/wire.h"
#include "net/openai.h"
#include "net/server.h"
#include "spec/manifest.h"

namespace bonfire::net {

namespace {

void send_error(HttpResponder& res, const Error& e) { res.send_json(error_http_status(e.code), error_to_json(e)); }

}  // namespace

bool Server::authorized(const HttpRequest& req) const {
  if (options_.api_keys.empty()) return true;
  const std::string auth = req.header("Authorization");
  bool ok = false;
  for (const auto& k : options_.api_keys) ok |= same_secret(auth, "Bearer " + k);  // every key, in constant time
  return ok;
}

std::string Server::cors_origin(const HttpRequest& req) const {
  const std::string origin = req.header("Origin");
  if (origin.empty()) return "";
  for (const auto& o : options_.cors_origins)
    if (o == "*" || o == origin) return o;
  return "";
}

void Server::allow_origin(HttpResponder& res, const std::string& origin) {
  res.add_header("Access-Control-Allow-Origin", origin);
  if (origin != "*") res.add_header("Vary", "Origin");
}

void Server::handle(const HttpRequest& req, HttpResponder& res) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string endpoint = "other";
  if (const std::string origin = cors_origin(req); !origin.empty()) allow_origin(res, origin);
  try {
    route(req, res, endpoint);
  } catch (const Error& e) {
    // OpenAI clients read {"error": {"message", ...}}; bonfire's own API
    // answers as PROTOCOL.md writes errors.
    if (endpoint.rfind("/v1/", 0) == 0) res.send_json(error_http_status(e.code), openai_error(e));
    else send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, Error(ErrorCode::Internal, std::string("internal error: ") + e.what()));
  }
  metrics_.count_request(endpoint, res.status());
  metrics_.observe_request_seconds(
      endpoint, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The coordinator's endpoints, one row each: a request runs the first row
// whose method and path match (the whole path, or its start for a prefix
// row); HEAD runs a GET row without sending the body. `label` names the
// endpoint in /metrics.
struct Server::Route {
  enum Access {
    kOpen,        // no API key: the page and its files, the manifest, /metrics, /health
    kKey,         // serve --api-key's keys, when it has any
    kKeyOrToken,  // or the network's worker token: a worker fetching a model's files
  };
  const char* method;
  const char* path;
  bool prefix;
  Access access;
  const char* label;
  void (*run)(Server& s, const HttpRequest& req, HttpResponder& res);
  bool matches(const std::string& p) const { return prefix ? p.rfind(path, 0) == 0 : p == path; }
};

const std::vector<Server::Route>& Server::routes() {
  using enum Route::Access;
  static const std::vector<Route> kRoutes = {
      {"GET", "/", false, kOpen, "/", [](Server& s, auto& q, auto& r) { s.web(q, r); }},
      {"GET", "/web/", true, kOpen, "/web/", [](Server& s, auto& q, auto& r) { s.web(q, r); }},
      {"GET", "/lend", false, kOpen, "/lend", [](Server& s, auto& q, auto& r) { s.web(q, r); }},
      {"GET", "/wasm/", true, kOpen, "/wasm/", [](Server& s, auto& q, auto& r) { s.wasm(q, r); }},
      {"GET", "/metrics", false, kOpen, "/metrics",
       [](Server& s, auto&, auto& r) { r.send(200, s.metrics_text(), "text/plain; version=0.0.4"); }},
      {"GET", "/health", false, kOpen, "/health",
       [](Server& s, auto&, auto& r) {
         // For load balancers and probes: 503 while no worker could run a step.
         size_t n = 0;
         for (const auto& w : s.net_->workers()) n += w->alive();
         r.send_json(n > 0 ? 200 : 503,
                     {{"status", n > 0 ? "ok" : "no_worker"}, {"workers", n}, {"models", s.models_.size()}});
       }},
      {"GET", "/api/v3/ops", false, kOpen, "/api/v3/ops",
       [](Server&, auto&, auto& r) { r.send(200, std::string(spec::ops_manifest_text())); }},
      {"POST", "/api/v3/graph", false, kKey, "/api/v3/graph", [](Server& s, auto& q, auto& r) { s.graph(q, r); }},
      {"GET", "/api/v3/workers", false, kKey, "/api/v3/workers",
       [](Server& s, auto&, auto& r) { r.send_json(200, s.workers_json()); }},
      {"GET", "/api/v3/models", false, kKey, "/api/v3/models",
       [](Server& s, auto&, auto& r) { r.send_json(200, s.models_json()); }},
      {"GET", "/api/v3/stats", false, kKey, "/api/v3/stats",
       [](Server& s, auto&, auto& r) { r.send_json(200, s.stats_json()); }},
      {"POST", "/api/v3/generate", false, kKey, "/api/v3/generate",
       [](Server& s, auto& q, auto& r) { s.generate(q, r); }},
      {"GET", "/v1/models", false, kKey, "/v1/models",
       [](Server& s, auto&, auto& r) {
         std::vector<std::string> ids;
         for (const auto& m : s.models_) ids.push_back(m->id());
         r.send_json(200, openai_models(ids, static_cast<int64_t>(unix_now())));
       }},
      {"GET", "/v1/models/", true, kKey, "/v1/models/ID",
       [](Server& s, auto& q, auto& r) {
         const std::string id = q.path.substr(std::string("/v1/models/").size());
         for (const auto& m : s.models_)
           if (m->id() == id) return r.send_json(200, openai_model(id, static_cast<int64_t>(unix_now())));
         r.send_json(404, openai_error("no model \"" + bounded_text(id, 256) + "\" is served here; GET /v1/models lists them",
                                       "model_not_found", 404, "model"));
       }},
      {"POST", "/v1/completions", false, kKey, "/v1/completions",
       [](Server& s, auto& q, auto& r) { s.openai(q, r, false); }},
      {"POST", "/v1/chat/completions", false, kKey, "/v1/chat/completions",
       [](Server& s, auto& q, auto& r) { s.openai(q, r, true); }},
      {"DELETE", "/api/v3/sessions/", true, kKey, "/api/v3/sessions",
       [](Server& s, auto& q, auto& r) { s.free_session(q.path.substr(std::string("/api/v3/sessions/").size()), r); }},
      {"GET", "/api/v3/models/", true, kKeyOrToken, "/api/v3/models/files",
       [](Server& s, auto& q, auto& r) {
         const std::string rest = q.path.substr(std::string("/api/v3/models/").size());
         const size_t at = rest.find("/files/");
         if (at == std::string::npos)
           throw Error(ErrorCode::BadGraph, "no endpoint GET " + bounded_text(q.path, 256) +
                                                " (model files are at /api/v3/models/ID/files/NAME)");
         s.model_file(rest.substr(0, at), rest.substr(at + 7), r);
       }},
  };
  return kRoutes;
}

std::string Server::endpoint_label(const std::string& path) {
  for (const Route& r : routes())
    if (r.matches(path)) return r.label;
  return path.rfind("/v1/", 0) == 0 ? "/v1/" : "unknown";
}

void Server::route(const HttpRequest& req, HttpResponder& res, std::string& endpoint) {
  const std::string& p = req.path;
  const std::string m = req.method == "HEAD" ? "GET" : req.method;
  const Route* found = nullptr;
  std::string allowed;  // the methods of rows whose path matches
  for (const Route& r : routes()) {
    if (!r.matches(p)) continue;
    if (m == r.method) {
      found = &r;
      break;
    }
    if (allowed.find(r.method) == std::string::npos) allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
  }
  const bool v1 = p.rfind("/v1/", 0) == 0;
  // Refusals before any endpoint runs, in the shape the path's clients read.
  auto refuse = [&](int status, const char* code, const std::string& why, std::map<std::string, std::string> headers) {
    const nlohmann::json body = v1 ? openai_error(why, code, status) : nlohmann::json{{"error", why}, {"code", code}};
    res.send(status, dump_json(body) + "\n", "application/json", headers);
  };
  if (!found && !allowed.empty()) {
    endpoint = "other";
    if (allowed.find("GET") != std::string::npos) allowed += ", HEAD";
    // A browser's CORS preflight, for an origin --cors lets in.
    if (req.method == "OPTIONS" && !req.header("Access-Control-Request-Method").empty() && !cors_origin(req).empty()) {
      endpoint = endpoint_label(p);
      return res.send(204, "", "text/plain",
                      {{"Access-Control-Allow-Methods", allowed},
                       {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                       {"Access-Control-Max-Age", "600"}});
    }
    return refuse(405, "method_not_allowed",
                  bounded_text(req.method, 16) + " is not allowed on " + bounded_text(p, 256) + "; it takes " + allowed,
                  {{"Allow", allowed}});
  }
  if (!found) {
    endpoint = "unknown";
    return refuse(404, "not_found", "no endpoint " + bounded_text(req.method + " " + p, 256) + " (see spec/PROTOCOL.md)",
                  {});
  }
  endpoint = found->label;
  // Workers fetching weights present the network's token instead of an API key.
  const bool worker_ok = found->access == Route::kKeyOrToken && !options_.token.empty() &&
                         same_secret(req.header("Authorization"), "Bearer " + options_.token);
  if (found->access != Route::kOpen && !authorized(req) && !worker_ok) {
    endpoint = v1 ? "/v1/" : "auth";
    return refuse(401, "unauthorized", "this coordinator needs an API key: send Authorization: Bearer KEY",
                  {{"WWW-Authenticate", "Bearer"}});
  }
  found->run(*this, req, res);
}

}  // namespace bonfire::net
