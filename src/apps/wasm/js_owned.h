// Text handed from the browser worker's C++ to the page's JS, which reads it
// and frees it with _free.
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>

namespace bonfire::wasm {

// A heap copy of `s`, NUL-terminated, that JS frees once it has used it.
inline char* js_owned(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = 0;
  return p;
}

}  // namespace bonfire::wasm
