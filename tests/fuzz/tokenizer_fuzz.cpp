// libFuzzer target: tokenizer.json (model/tokenizer/tokenizer.h). The input
// is parsed with the bounded JSON parser and loaded with Tokenizer::from_json
// (the in-memory twin of from_files); a tokenizer that loads then encodes a
// short text (ASCII, digits, accents, CJK, an emoji, spaces and newlines),
// decodes the ids (with and without special tokens) and streams them back.
// A refusal is bonfire::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_parse.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<bonfire::Tokenizer> tk;
  try {
    const nlohmann::json j =
        bonfire::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
    tk = bonfire::Tokenizer::from_json(j, nlohmann::json::object(), "tokenizer.json");
  } catch (const bonfire::Error&) {
    return 0;
  }
  static const char* const kTexts[] = {"Hello, world! 123  4567\n\tcafé naïve — 日本語 🙂 <s> </s>", "", " "};
  for (const char* text : kTexts) {
    std::vector<int32_t> ids;
    try {
      ids = tk->encode(text, true);
    } catch (const bonfire::Error&) {
      continue;
    }
    try {
      (void)tk->decode(ids, false);
      (void)tk->decode(ids, true);
      bonfire::Tokenizer::Stream st = tk->stream(false);
      for (int32_t id : ids) (void)st.push(id);
      (void)st.flush();
    } catch (const bonfire::Error&) {
    }
  }
  // Ids the text did not produce: the first few and one past anything sane.
  try {
    (void)tk->decode({0, 1, 2, 3, 255, 256}, false);
  } catch (const bonfire::Error&) {
  }
  try {
    (void)tk->decode({-1, 1 << 30}, false);
  } catch (const bonfire::Error&) {
  }
  return 0;
}
