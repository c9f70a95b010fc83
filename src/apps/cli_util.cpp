#include "apps/cli_util.h"

#include <iostream>
#include <sstream>

#include "core/error.h"
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

}  // namespace bonfire
