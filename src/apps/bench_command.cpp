#include "apps/bench_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/bench_generate.h"
#include "apps/compute_options.h"
#include "core/error.h"
#include "model/safetensors.h"

namespace bonfire {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A safetensors file of `gib` GiB: 64 f16 tensors of equal size, random-ish
// data so no filesystem can keep it sparse. Written once and reused.
std::string make_big_file(const std::string& dir, double gib) {
  fs::create_directories(dir);
  const std::string path = (fs::path(dir) / "big.safetensors").string();
  const int64_t total = (int64_t)(gib * (1 << 30)), per = total / 64 / 4096 * 4096;
  if (fs::exists(path) && (int64_t)fs::file_size(path) > per * 64) return path;
  nlohmann::json header = nlohmann::json::object();
  for (int i = 0; i < 64; ++i)
    header["model.layers." + std::to_string(i) + ".mlp.weight"] = {
        {"dtype", "F16"}, {"shape", {per / 2 / 1024, 1024}}, {"data_offsets", {i * per, (i + 1) * per}}};
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary);
  const uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h;
  std::vector<uint16_t> chunk(1 << 20);
  uint32_t x = 12345;
  for (auto& v : chunk) v = (uint16_t)((x = x * 1664525u + 1013904223u) >> 16) & 0x3bff;  // finite halves
  for (int64_t written = 0; written < per * 64; written += (int64_t)chunk.size() * 2)
    f.write(reinterpret_cast<const char*>(chunk.data()), std::min<int64_t>(chunk.size() * 2, per * 64 - written));
  f.close();
  fs::rename(tmp, path);
  return path;
}

// Drops the file from the page cache so both sides start cold (best effort).
void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

int bench_load(const std::string& dir, double gib) {
  const std::string path = make_big_file(dir, gib);
  const double size_gb = (double)fs::file_size(path) / 1e9;

  evict(path);
  auto t = Clock::now();
  WeightStore store;
  load_safetensors_file(path, store);
  const double open_ms = ms_since(t);
  t = Clock::now();
  // Serving the first request touches one tensor, not the file.
  const Tensor* w = store.find("model.layers.0.mlp.weight");
  volatile uint16_t sink = 0;
  for (int64_t i = 0; i < w->nbytes() / 2; i += 2048) sink = sink + static_cast<const uint16_t*>(w->data)[i];
  const double first_ms = ms_since(t);

  evict(path);
  t = Clock::now();
  {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> buf(8 << 20);
    while (f.read(buf.data(), buf.size()) || f.gcount() > 0) {
    }
  }
  const double read_ms = ms_since(t);
  std::printf("file: %s (%.2f GB, %zu tensors)\n", path.c_str(), size_gb, store.size());
  std::printf("bonfire open (header + mmap):   %9.2f ms\n", open_ms);
  std::printf("bonfire first tensor touched:   %9.2f ms\n", first_ms);
  std::printf("reference: read whole file:     %9.2f ms   (%.2f GB/s)\n", read_ms, size_gb / (read_ms / 1e3));
  std::printf("ratio open / read-through:      %9.5f\n", open_ms / read_ms);
  return 0;
}

}  // namespace

std::function<int()> add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks, each beside its reference from the same run");
  bench->require_subcommand(1);  // as graph, ir and kernel: alone it would do nothing and exit 0
  auto* load = bench->add_subcommand("load", "open a large safetensors file vs reading it through");
  auto dir = std::make_shared<std::string>((fs::temp_directory_path() / "bonfire-bench").string());
  auto gib = std::make_shared<double>(1.0);
  load->add_option("--dir", *dir, "where the test file is written (and kept)");
  load->add_option("--gib", *gib, "file size in GiB");
  auto gen = bench->add_subcommand("generate", "prefill and decode tokens/s beside llama.cpp's on the same GGUF");
  auto go = std::make_shared<BenchGenerateOptions>();
  gen->add_option("--model", go->model, "a GGUF file (llama.cpp reads GGUF only)")->required();
  gen->add_option("--prefill", go->prefill, "prompt tokens (default 128)");
  gen->add_option("--decode", go->decode, "generated tokens (default 64)");
  gen->add_option("--reps", go->reps, "measured runs after a warm-up (default 2)");
  gen->add_flag("--json", go->json, "also print the figures as one JSON line");
  gen->add_option("--reference-script", go->reference_script, "default: scripts/bench_llama_cpp.py");
  gen->add_flag("!--no-reference", go->reference, "skip llama.cpp");
  gen->add_flag("--busy", go->busy,
                "with --network: decode again while another process keeps one core busy, in the normal "
                "and the background mode, and that process's own speed");
  add_compute_options(*gen, true);
  gen->add_flag("--network", go->network,
                "also generate through a coordinator and a worker on loopback (HTTP + WebSocket per step)");
  return [load, dir, gib, gen, go]() -> int {
    if (*gen) {
      try {
        return bench_generate(*go);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench generate: %s\n", e.what());
        return 1;
      }
    }
    if (*load) {
      try {
        return bench_load(*dir, *gib);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench load: %s\n", e.what());
        return 1;
      }
    }
    return -1;
  };
}

}  // namespace bonfire
