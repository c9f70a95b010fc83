// A worker's cache of models fetched from coordinators:
// <cache_dir>/<hash>/<model>/<files>. A model folder's mtime is touched each
// time it is loaded, which orders eviction (least recently loaded first).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

namespace bonfire::net {

// Removes the leftovers of downloads cut short (*.part: a crash, a kill), so
// they are never loaded.
void clean_model_cache(const std::string& cache_dir);

// Makes room for `need` more bytes under `cache_max` (0: no cap) by removing
// the least recently loaded model folders other than `keep` and those in
// `held` (paths of models loaded now). Throws Error(TooLarge) when that is
// not enough. Each removal is reported through `log`.
void make_cache_room(const std::string& cache_dir, int64_t cache_max, int64_t need, const std::filesystem::path& keep,
                     const std::set<std::string>& held, const std::function<void(const std::string&)>& log);

}  // namespace bonfire::net
