// libFuzzer target: worker-link frames (net/frame.h): the bytes of one
// WebSocket binary message decoded with the default Limits. A frame that
// decodes is encoded again and decoded once more (it must; a second refusal
// is a bug). A refusal is bonfire::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "net/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bonfire::Limits limits;
  bonfire::net::Message m;
  try {
    m = bonfire::net::decode_message(std::string(reinterpret_cast<const char*>(data), size), limits);
  } catch (const bonfire::Error&) {
    return 0;
  }
  (void)m.type();
  std::string again;
  try {
    again = bonfire::net::encode_message(m);
  } catch (const bonfire::Error&) {
    return 0;  // e.g. a header whose strings are not UTF-8 cannot be written back
  }
  (void)bonfire::net::decode_message(again, limits);
  return 0;
}
