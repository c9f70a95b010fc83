#include "apps/graph_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "apps/cli_util.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "graph/executor.h"
#include "graph/wire.h"

namespace bonfire {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json parse_binds(const std::vector<std::string>& binds) {
  json out = json::object();
  for (const auto& b : binds) {
    const auto eq = b.find('=');
    if (eq == std::string::npos || eq == 0) bad_graph("--bind takes k=v, got \"" + b + "\"");
    const std::string k = b.substr(0, eq), v = b.substr(eq + 1);
    try {  // a JSON value (5, 2.5, true), else the text as a string
      out[k] = parse_json(v, "--bind " + k, kCallJsonLimits);
    } catch (const Error&) {
      out[k] = v;
    }
  }
  return out;
}

// A session's tensors on disk: one JSON file, replaced atomically (written to
// NAME.tmp, then renamed) so a failed run never leaves a partial file.
constexpr const char* kSessionSuffix = ".session.json";
constexpr const char* kTmpSuffix = ".tmp";

fs::path session_path(const std::string& dir, const std::string& id) {
  for (char c : id)
    if (!(std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.'))
      bad_graph("session id \"" + id + "\" cannot name a file (use letters, digits, - _ .)");
  return fs::path(dir) / (id + kSessionSuffix);
}

void load_session(const std::string& dir, const std::string& id, Session* s, const Limits& limits) {
  const fs::path p = session_path(dir, id);
  if (!fs::exists(p)) return;
  const json j = parse_json_file(p.string(), kCallJsonLimits);
  for (const auto& [k, v] : j.items()) s->tensors[k] = tensor_from_json(v, "session tensor " + k, limits);
}

void save_session(const std::string& dir, const std::string& id, const Session& s) {
  fs::create_directories(dir);
  const fs::path p = session_path(dir, id);
  json j = json::object();
  for (const auto& [k, t] : s.tensors) j[k] = tensor_to_json(t, /*b64=*/true);
  const fs::path tmp = p.string() + kTmpSuffix;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << j.dump();
    if (!f) throw Error(ErrorCode::Internal, "cannot write " + tmp.string());
  }
  fs::rename(tmp, p);
}

// Sessions idle longer than this are deleted (PROTOCOL.md: sessions expire).
constexpr auto kSessionIdle = std::chrono::minutes(30);

// Only the files save_session writes: the folder may be one the user keeps
// other things in (--session-dir .), and those are not ours to delete.
bool is_session_file(const fs::directory_entry& e) {
  std::error_code ec;
  if (!e.is_regular_file(ec)) return false;
  const std::string name = e.path().filename().string();
  return name.ends_with(kSessionSuffix) || name.ends_with(std::string(kSessionSuffix) + kTmpSuffix);
}

void expire_sessions(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!is_session_file(e)) continue;
    const auto age = now - e.last_write_time(ec);
    if (!ec && age > kSessionIdle) fs::remove(e.path(), ec);
  }
}

json run_one(const json& jcall, const json& cli_bind, SessionStore& store, const GraphRunOptions& opts) {
  const Limits limits;
  Call call = Call::parse(jcall, limits);
  std::set<std::string> features = implemented_features();
  for (const auto& f : opts.disabled_features) features.erase(f);
  require_features(call.graph, features);
  for (const auto& [k, v] : cli_bind.items()) call.bind[k] = v;
  std::shared_ptr<Session> session;
  if (!call.session.empty()) {
    session = store.get(call.session, false);
    if (!session) {
      session = store.get(call.session, true);
      if (!opts.session_dir.empty()) load_session(opts.session_dir, call.session, session.get(), limits);
    }
  }
  // A refused call throws before touching the session (see executor.h).
  RunResult r = run_call(call, session.get(), limits);
  if (session && !opts.session_dir.empty()) save_session(opts.session_dir, call.session, *session);
  json out = {{"outputs", json::object()}, {"worker", "local"}, {"ms", r.ms}};
  for (const auto& [k, t] : r.outputs) out["outputs"][k] = tensor_to_json(t, call.b64 || opts.b64);
  return out;
}

}  // namespace

std::string default_session_dir() {
  if (const char* d = std::getenv("BONFIRE_SESSION_DIR")) return d;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/bonfire-sessions-" + std::to_string(::getuid());
}

int graph_run_command(const GraphRunOptions& opts) {
  int status = 0;
  if (!opts.session_dir.empty()) expire_sessions(opts.session_dir);
  json result;
  try {
    const json j = read_json_input(opts.file, kCallJsonLimits);
    const json binds = parse_binds(opts.binds);
    SessionStore store;
    if (j.is_array()) {  // a sequence of calls sharing sessions
      result = json::array();
      for (const auto& c : j) {
        try {
          result.push_back(run_one(c, binds, store, opts));
        } catch (const Error& e) {
          result.push_back(error_to_json(e));
          status = 1;
        }
      }
    } else {
      result = run_one(j, binds, store, opts);
    }
  } catch (const Error& e) {
    result = error_to_json(e);
    status = 1;
  } catch (const std::exception& e) {
    result = error_to_json(Error(ErrorCode::Internal, e.what()));
    status = 1;
  }
  std::cout << result.dump() << "\n";
  return status;
}

}  // namespace bonfire
