#include "net/model_hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace bonfire::net {

namespace fs = std::filesystem;

namespace {

std::string hex(const unsigned char* d, unsigned n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += digits[d[i] >> 4];
    s += digits[d[i] & 15];
  }
  return s;
}

struct Digest {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  Digest() { EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr); }
  void update(const void* d, size_t n) { EVP_DigestUpdate(ctx.get(), d, n); }
  std::string finish() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx.get(), out, &n);
    return hex(out, n);
  }
};

}  // namespace

std::string sha256_hex(const void* data, size_t n) {
  Digest d;
  d.update(data, n);
  return d.finish();
}

std::string sha256_file(const std::string& path, Progress* progress) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Internal, "cannot read " + path);
  Digest d;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (f.gcount() > 0) d.update(buf.data(), static_cast<size_t>(f.gcount()));
    if (progress) progress->advance(f.gcount());
  }
  return d.finish();
}

ModelFingerprint fingerprint_model(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::string, std::string>> cache;  // path -> (size:mtime, sha)
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  ModelFingerprint fp;
  std::vector<fs::path> files;
  if (fs::is_directory(p)) {
    fp.id = p.filename().string();
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  } else if (fs::is_regular_file(p)) {
    fp.id = p.stem().string();
    files.push_back(p);
  } else {
    throw Error(ErrorCode::BadGraph, "no model at " + path);
  }
  if (fp.id.empty() || fp.id == "." ) fp.id = "model";
  std::sort(files.begin(), files.end());
  // Hashing a large model takes seconds; show it (on a TTY) when it does.
  std::unique_ptr<Progress> progress;
  int64_t total = 0;
  for (const auto& f : files) total += static_cast<int64_t>(fs::file_size(f));
  if (total > (int64_t{256} << 20)) progress = std::make_unique<Progress>("hashing " + fp.id, total, Progress::Unit::Bytes);
  std::string lines;
  for (const auto& f : files) {
    ModelFile mf;
    mf.name = f.filename().string();
    mf.path = f.string();
    mf.bytes = static_cast<int64_t>(fs::file_size(f));
    const std::string stamp =
        std::to_string(mf.bytes) + ":" + std::to_string(fs::last_write_time(f).time_since_epoch().count());
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = cache.find(mf.path);
      if (it != cache.end() && it->second.first == stamp) mf.sha256 = it->second.second;
    }
    if (progress && !mf.sha256.empty()) progress->advance(mf.bytes);
    if (mf.sha256.empty()) {
      mf.sha256 = sha256_file(mf.path, progress.get());
      std::lock_guard<std::mutex> lock(mu);
      cache[mf.path] = {stamp, mf.sha256};
    }
    lines += mf.name + " " + mf.sha256 + "\n";
    fp.files.push_back(mf);
  }
  fp.hash = sha256_hex(lines.data(), lines.size());
  return fp;
}

}  // namespace bonfire::net
