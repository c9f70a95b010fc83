// Runs the GGUF reader and the GGUF -> HF weight store over damaged copies of
// a golden file under AddressSanitizer and UBSan (the gguf_fuzz_asan target):
// every prefix of the header, and seeded random byte damage. Each input is an
// exact-size heap copy, so a read one byte past the end is a report. A run
// passes when every input is either refused with bonfire::Error or loads and
// every tensor dequantizes. Usage: gguf_fuzz_asan FILE.gguf [ROUNDS]
//
// The same file is the libFuzzer target fuzz_gguf (tests/fuzz/fuzz.cmake
// defines BONFIRE_LIBFUZZER): LLVMFuzzerTestOneInput runs run() on each input
// and main() is libFuzzer's.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/gguf.h"
#include "model/gguf_names.h"

namespace {

int accepted = 0, refused = 0;

void run(const std::string& bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  try {
    auto f = bonfire::GgufFile::parse(buf->data(), buf->size(), "fuzz.gguf", buf);
    bonfire::WeightStore store = bonfire::load_gguf_weights(*f);
    for (const std::string& name : store.names()) bonfire::to_f32(*store.find(name));
    ++accepted;
  } catch (const bonfire::Error& e) {
    // gguf.h promises every refusal starts with the file's name.
    if (std::string(e.what()).rfind("fuzz.gguf: ", 0) != 0) {
      std::fprintf(stderr, "error without the file name: %s\n", e.what());
      std::abort();
    }
    ++refused;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}

#ifndef BONFIRE_LIBFUZZER
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_asan FILE.gguf [ROUNDS]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 4000;
  auto f = bonfire::GgufFile::parse(reinterpret_cast<const uint8_t*>(file.data()), file.size(), argv[1], nullptr);
  const size_t header = f->data_offset();
  for (size_t len = 0; len <= header + 64 && len < file.size(); ++len) run(file.substr(0, len));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < rounds; ++i) {
    std::string b = file;
    const int flips = 1 + (int)((next() >> 60) % 6);
    for (int k = 0; k < flips; ++k) {
      const size_t at = (size_t)((next() >> 11) % header);
      const uint64_t how = next() >> 61;
      b[at] = how == 0 ? (char)0xff : how == 1 ? (char)0 : (char)(next() >> 33);
    }
    if ((next() >> 62) == 0) b.resize((size_t)((next() >> 11) % b.size()));
    run(b);
  }
  std::printf("gguf_fuzz_asan: %d accepted, %d refused\n", accepted, refused);
  return 0;
}
#endif  // BONFIRE_LIBFUZZER
