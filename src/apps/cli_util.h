// Small pieces every command shares: errors as PROTOCOL.md's error JSON with
// exit status 1, and the "1,2,3" id lists of --tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bonfire {

// Runs fn; an Error (or any exception) is printed as the error JSON on
// stdout and gives 1, else 0.
int guarded(const std::function<void()>& fn);

// "1, 2,3" → ids; anything else is bad_graph naming the item.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace bonfire
