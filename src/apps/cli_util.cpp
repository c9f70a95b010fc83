#include "apps/cli_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "graph/wire.h"

namespace bonfire {

using json = nlohmann::json;

int guarded(const std::function<void()>& fn) {
  try {
    fn();
    return 0;
  } catch (const Error& e) {
    std::cout << error_to_json(e).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } catch (const std::exception& e) {
    std::cout << error_to_json(Error(ErrorCode::Internal, e.what())).dump(-1, ' ', false, json::error_handler_t::replace)
              << "\n";
  }
  return 1;
}

CLI::Validator finite_range(double lo, double hi) {
  std::ostringstream range;
  range << "[" << lo << " - " << hi << "]";
  return CLI::Validator(
      [lo, hi, range = range.str()](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "value " + text + " is not a number";
        if (!(v >= lo && v <= hi)) return "value " + text + " not in range " + range;
        return {};
      },
      "NUMBER in " + range.str());
}

json read_json_input(const std::string& file, const JsonLimits& limits) {
  if (file != "-") return parse_json_file(file, limits);
  return parse_json(read_stream(std::cin, "stdin", limits.max_bytes), "stdin", limits);
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (item.find_first_not_of(" \t", used) != std::string::npos) throw std::invalid_argument("trailing");
      if (v < INT32_MIN || v > INT32_MAX) throw std::out_of_range("id");
      ids.push_back((int32_t)v);
    } catch (const std::exception&) {
      throw Error(ErrorCode::BadGraph, what + ": \"" + item + "\" is not an integer id");
    }
  }
  return ids;
}

std::string default_model_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("BONFIRE_MODEL"); env && *env) return env;
  std::vector<fs::path> places;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    places.push_back(exe.parent_path() / "models" / "demo");
    places.push_back(exe.parent_path().parent_path() / "models" / "demo");
    places.push_back(exe.parent_path().parent_path() / "share" / "bonfire" / "models" / "demo");
  }
#ifdef BONFIRE_SOURCE_DIR
  places.push_back(fs::path(BONFIRE_SOURCE_DIR) / "models" / "demo");
#endif
  std::string looked;
  for (const fs::path& p : places) {
    if (fs::is_regular_file(p / "config.json", ec)) return fs::weakly_canonical(p, ec).string();
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  throw Error(ErrorCode::BadGraph, "no --model given and no demo model found (looked in " + looked +
                                       "; tools/train_demo.py makes it)");
}

std::string model_or_default(const std::string& model) {
  if (!model.empty()) return model;
  const std::string path = default_model_path();
  std::cerr << "using the demo model at " << path << " (--model PATH for another)\n";
  return path;
}

}  // namespace bonfire
