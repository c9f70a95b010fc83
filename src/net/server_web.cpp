// The coordinator's static files: the page (GET /, /web/NAME), the lend page
// (GET /lend) and the browser worker's WebAssembly build (GET /wasm/NAME).
// None needs an API key: a volunteer lending a tab presents the network's
// token to the worker link, not a client's key.
#include <filesystem>

#include "core/file.h"
#include "net/model_hash.h"
#include "net/server.h"

namespace bonfire::net {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWasmNotBuilt = "the browser worker is not built: run scripts/build_wasm.sh";

// The web page's files: what a browser needs to render each.
std::string web_content_type(const std::string& ext) {
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".json") return "application/json";
  if (ext == ".txt") return "text/plain; charset=utf-8";
  if (ext == ".wasm") return "application/wasm";  // WebAssembly.instantiateStreaming insists on it
  return "application/octet-stream";
}

// Headers of every static file. The lend page runs the worker's WASM on
// threads, which need SharedArrayBuffer, which a browser grants only to a
// cross-origin isolated page (COOP + COEP); the page and every script it
// starts (its Web Worker, the WASM's pthread workers) must carry them, and
// CORP lets the page's own COEP accept them. The page changes with the
// binary: never cached, so an upgrade shows at once.
std::map<std::string, std::string> static_headers(const std::string& cache = "no-store") {
  return {{"Cache-Control", cache},
          {"X-Content-Type-Options", "nosniff"},
          {"Cross-Origin-Opener-Policy", "same-origin"},
          {"Cross-Origin-Embedder-Policy", "require-corp"},
          {"Cross-Origin-Resource-Policy", "same-origin"}};
}

// The first candidate folder that holds `probe`, canonical; "" when none does.
std::string first_holding(const std::vector<fs::path>& candidates, const std::string& probe) {
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_regular_file(c / probe, ec)) return fs::weakly_canonical(c, ec).string();
  return "";
}

fs::path exe_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// `dir`/`name` as a regular file, or an empty path (no folder, an unsafe
// name: safe_name allows one plain file name, so nothing outside the folder).
fs::path file_in(const std::string& dir, const std::string& name) {
  if (dir.empty() || !safe_name(name)) return {};
  const fs::path file = fs::path(dir) / name;
  std::error_code ec;
  return fs::is_regular_file(file, ec) ? file : fs::path();
}

// A strong validator that changes when the build rewrites the file.
std::string file_etag(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  const auto time = fs::last_write_time(file, ec).time_since_epoch().count();
  return "\"" + std::to_string(size) + "-" + std::to_string(time) + "\"";
}

}  // namespace

std::string Server::find_web_dir(const std::string& source_web_dir) {
  std::vector<fs::path> candidates;
  const fs::path exe = exe_dir();
  if (!exe.empty()) {
    candidates.push_back(exe.parent_path() / "web");
    candidates.push_back(exe / "web");
  }
  if (!source_web_dir.empty()) candidates.push_back(source_web_dir);
  return first_holding(candidates, "index.html");
}

std::string Server::find_wasm_dir() {
  const fs::path exe = exe_dir();
  if (exe.empty()) return "";
  return first_holding({exe / "wasm", exe.parent_path() / "wasm"}, "bonfire-worker.wasm");
}

void Server::web(const HttpRequest& req, HttpResponder& res) {
  const auto headers = static_headers();
  std::string rel;
  if (req.path == "/") rel = "index.html";
  else if (req.path == "/lend") rel = "lend.html";
  else rel = req.path.substr(std::string("/web/").size());
  if (const fs::path file = file_in(options_.web_dir, rel); !file.empty())
    return res.send(200, read_file(file.string()), web_content_type(file.extension().string()), headers);
  if (req.path != "/")
    return res.send(404, "no such file: " + bounded_text(req.path, 256) + "\n", "text/plain; charset=utf-8", headers);
  res.send(200,
           "<!doctype html><title>bonfire</title><h1>bonfire</h1><p>The coordinator is up; its web page was not "
           "found (start it with --web-dir DIR). "
           "<a href=\"/api/v3/workers\">workers</a> · <a href=\"/api/v3/models\">models</a> · "
           "<a href=\"/api/v3/stats\">stats</a> · <a href=\"/metrics\">metrics</a></p>",
           "text/html; charset=utf-8", headers);
}

void Server::wasm(const HttpRequest& req, HttpResponder& res) {
  // Looked up per request when not given: the build may land after serve started.
  const std::string dir = options_.wasm_dir.empty() ? find_wasm_dir() : options_.wasm_dir;
  const std::string name = req.path.substr(std::string("/wasm/").size());
  const fs::path file = file_in(dir, name);
  if (file.empty()) {
    const std::string why = dir.empty() ? "no browser worker build beside the binary" : "no such file: " + bounded_text(req.path, 256);
    return res.send(404, why + " (" + kWasmNotBuilt + ")\n", "text/plain; charset=utf-8", static_headers());
  }
  const std::string ext = file.extension().string();
  if (ext != ".wasm") return res.send(200, read_file(file.string()), web_content_type(ext), static_headers());
  // The .wasm is megabytes: revalidated (its size and time as the ETag)
  // rather than fetched again on each visit.
  auto headers = static_headers("no-cache");
  headers["ETag"] = file_etag(file);
  if (req.header("If-None-Match") == headers["ETag"]) return res.send(304, "", web_content_type(ext), headers);
  res.send(200, read_file(file.string()), web_content_type(ext), headers);
}

}  // namespace bonfire::net
