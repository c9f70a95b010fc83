// libFuzzer target: safetensors files (model/safetensors.h). The loader
// reads from a path (it maps the file), so each input is written to one
// scratch file per process and loaded; every tensor it accepts is then
// converted to f32, which reads all of its bytes through the mapping. A
// refusal is bonfire::Error; anything else is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace {

std::string scratch_path() {
  const char* dir = std::getenv("TMPDIR");
  std::string d = dir && *dir ? dir : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  return d + "/bonfire-fuzz-" + std::to_string(getpid()) + ".safetensors";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path();
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  try {
    bonfire::WeightStore store;
    bonfire::load_safetensors_file(path, store);
    for (const std::string& name : store.names()) (void)bonfire::to_f32(*store.find(name));
  } catch (const bonfire::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
