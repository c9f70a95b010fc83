// Helpers the golden tests share: reading golden files and comparing tensors
// with a tolerance (|got - want| <= atol + rtol * |want|, NaN only matches NaN).
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/tensor.h"
#include "core/error.h"
#include "graph/executor.h"
#include "graph/limits.h"
#include "graph/wire.h"

namespace bonfire::testing {

inline std::filesystem::path source_dir() { return BONFIRE_SOURCE_DIR; }

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  return nlohmann::json::parse(f);
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compares `got` to a wire tensor; reports at most a few mismatches.
inline ::testing::AssertionResult near(const Tensor& got, const nlohmann::json& want_json, double atol, double rtol) {
  const Tensor want = tensor_from_json(want_json, "expected", Limits{});
  const Tensor g = got.packed() ? to_f32(got) : got;
  if (g.shape != want.shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(g.shape) << ", want " << shape_str(want.shape);
  int bad = 0;
  double worst = 0;
  std::ostringstream msg;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = g.f32()[i], b = want.f32()[i];
    bool ok;
    if (std::isnan(b) || std::isnan(a))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(b) || std::isinf(a))
      ok = a == b;
    else
      ok = std::fabs(a - b) <= atol + rtol * std::fabs(b);
    if (!ok) {
      if (bad < 5) msg << " [" << i << "] got " << a << " want " << b << ";";
      ++bad;
    }
    if (std::isfinite(a) && std::isfinite(b)) worst = std::max(worst, std::fabs(a - b));
  }
  if (bad) return ::testing::AssertionFailure() << bad << " of " << want.numel() << " values off:" << msg.str();
  return ::testing::AssertionSuccess() << "max abs diff " << worst;
}

// A graph call's result or its refusal (code, node, message), for tests of
// the protocol's errors.
struct Outcome {
  bool ok = false;
  std::string code, node, message;
  RunResult result;
};

inline Outcome run_text(const std::string& text, Session* session = nullptr, const Limits& limits = {}) {
  Outcome o;
  try {
    Call c = Call::parse_text(text, limits);
    o.result = run_call(c, session, limits);
    o.ok = true;
  } catch (const Error& e) {
    o.code = error_code_name(e.code);
    o.node = e.node;
    o.message = e.what();
  }
  return o;
}

// Runs a shell command; its stdout and exit status.
inline std::pair<std::string, int> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {"", -1};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {out, WEXITSTATUS(status)};
}

}  // namespace bonfire::testing
