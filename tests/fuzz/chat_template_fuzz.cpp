// libFuzzer target: chat templates (model/chat_template/chat_template.h).
// The input is the template's source: it is parsed, then rendered for a
// fixed conversation (system, user, assistant, user) with the generation
// prompt and the usual special-token variables, and once more without the
// system message and without the prompt. A refusal is bonfire::Error (a
// syntax error, or a render failure, raise_exception included); anything
// else (another exception, a sanitizer report, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "model/chat_template/chat_template.h"

using nlohmann::ordered_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<bonfire::ChatTemplate> t;
  try {
    t.emplace(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const bonfire::Error&) {
    return 0;
  }
  static const ordered_json messages = ordered_json::array({
      {{"role", "system"}, {"content", "You are terse."}},
      {{"role", "user"}, {"content", "Hi there, caf\u00e9? 1+1"}},
      {{"role", "assistant"}, {"content", "Hello! <think>2</think>"}},
      {{"role", "user"}, {"content", "Again\n\twith \"quotes\" and {{ braces }}"}},
  });
  static const ordered_json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"},
                                     {"enable_thinking", false}};
  try {
    (void)t->render(messages, true, extra);
  } catch (const bonfire::Error&) {
  }
  try {
    ordered_json short_chat = ordered_json::array({messages[1]});
    (void)t->render(short_chat, false, ordered_json::object());
  } catch (const bonfire::Error&) {
  }
  return 0;
}
