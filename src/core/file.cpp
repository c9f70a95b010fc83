#include "core/file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace bonfire {

namespace fs = std::filesystem;

namespace {

// Reads `in` in chunks, so a stream that never ends costs max_bytes at most.
std::string read_all(std::istream& in, const std::string& what, size_t max_bytes, size_t expected) {
  std::string s;
  s.reserve(std::min(expected, max_bytes));
  std::vector<char> chunk(size_t{1} << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    if (n > max_bytes - s.size()) too_large(what + ": over the limit of " + std::to_string(max_bytes) + " bytes");
    s.append(chunk.data(), n);
  }
  if (in.bad()) bad_graph(what + ": cannot be read");
  return s;
}

}  // namespace

std::string read_file(const std::string& path, size_t max_bytes) {
  // An ifstream opens a directory without complaint: say what it is.
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) bad_graph(path + " is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) bad_graph(path + ": cannot be read (" + std::strerror(errno) + ")");
  size_t expected = 0;
  if (fs::is_regular_file(st)) {  // refused unread when its size says so
    const uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > max_bytes)
      too_large(path + ": " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
    if (!ec) expected = static_cast<size_t>(size);
  }
  return read_all(f, path, max_bytes, expected);
}

std::string read_stream(std::istream& in, const std::string& what, size_t max_bytes) {
  return read_all(in, what, max_bytes, 0);
}

}  // namespace bonfire
