#include "net/model_cache.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace bonfire::net {

namespace fs = std::filesystem;

namespace {

int64_t folder_bytes(const fs::path& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) n += static_cast<int64_t>(it->file_size(ec));
  return n;
}

}  // namespace

void clean_model_cache(const std::string& cache_dir) {
  std::error_code ec;
  if (!fs::exists(cache_dir, ec)) return;
  for (auto it = fs::recursive_directory_iterator(cache_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".part") fs::remove(it->path(), ec);
}

void make_cache_room(const std::string& cache_dir, int64_t cache_max, int64_t need, const fs::path& keep,
                     const std::set<std::string>& held, const std::function<void(const std::string&)>& log) {
  if (cache_max <= 0) return;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;  // <hash>/<model> folders
  int64_t used = 0;
  for (const auto& h : fs::directory_iterator(cache_dir, ec))
    for (const auto& d : fs::directory_iterator(h.path(), ec)) {
      used += folder_bytes(d.path());
      entries.push_back({fs::last_write_time(d.path(), ec), d.path()});
    }
  std::sort(entries.begin(), entries.end());
  std::set<std::string> held_canonical;
  for (const auto& p : held) held_canonical.insert(fs::weakly_canonical(p, ec).string());
  for (const auto& [t, dir] : entries) {
    if (used + need <= cache_max) break;
    if (dir == keep || held_canonical.count(fs::weakly_canonical(dir, ec).string())) continue;
    const int64_t bytes = folder_bytes(dir);
    log("cache: removing " + dir.string() + " (" + std::to_string(bytes >> 20) + " MiB, least recently used)");
    fs::remove_all(dir, ec);
    if (fs::is_empty(dir.parent_path(), ec)) fs::remove(dir.parent_path(), ec);
    used -= bytes;
  }
  if (used + need > cache_max)
    throw Error(ErrorCode::TooLarge, "the model cache (--cache-max " + std::to_string(cache_max) +
                                         " bytes) cannot make room for " + std::to_string(need) + " bytes");
}

}  // namespace bonfire::net
