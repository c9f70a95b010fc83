#include "apps/model_commands.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/cli_util.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"
#include "graph/wire.h"
#include "model/model_files.h"

namespace bonfire {

using json = nlohmann::json;

namespace {

struct Options {
  std::string model, text, file, tokens, messages;
  bool lines = false, no_special = false, generation_prompt = false, skip_special = false;
};


// has_text, has_file: whether each was given (--text "" is a text, the empty one).
int tokenize(const Options& o, bool has_text, bool has_file) {
  return guarded([&] {
    if (has_text == has_file) throw Error(ErrorCode::BadGraph, "give --text TEXT or --file F (one of them)");
    const std::string input = has_file ? read_file(o.file, kMaxTextFile) : o.text;
    auto tok = ModelFiles::open(o.model)->tokenizer();
    if (!o.lines) {
      std::cout << json(tok->encode(input, !o.no_special)).dump() << "\n";
      return;
    }
    std::stringstream ss(input);
    std::string line;
    while (std::getline(ss, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::cout << json(tok->encode(line, !o.no_special)).dump() << "\n";
    }
  });
}

int detokenize(const Options& o) {
  return guarded([&] {
    std::vector<int32_t> ids;
    ids = parse_id_list(o.tokens, "--tokens");
    auto tok = ModelFiles::open(o.model)->tokenizer();
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size())
        throw Error(ErrorCode::BadGraph, "--tokens: id " + std::to_string(id) + " is outside the vocabulary of " +
                                             std::to_string(tok->vocab_size()));
    // Decoded text can end mid-character only if the ids do; replace, never emit invalid JSON.
    std::cout << json(tok->decode(ids, o.skip_special)).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  });
}

// A list of objects with a string role and a content: a string, or the null
// of an assistant turn that only calls tools, or a list of parts (templates
// that take them iterate over it); other keys, such as tool_calls, pass on to
// the template. Checked first so that a missing field is named here, not met
// by the template as "+ on undefined values".
void check_messages(const nlohmann::ordered_json& messages, const std::string& file) {
  if (!messages.is_array()) throw Error(ErrorCode::BadGraph, file + ": must be a JSON list of messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = file + ": messages[" + std::to_string(i) + "]";
    const auto& m = messages[i];
    if (!m.is_object()) throw Error(ErrorCode::BadGraph, at + " must be an object {role, content}");
    if (!m.contains("role")) throw Error(ErrorCode::BadGraph, at + ".role is missing");
    if (!m["role"].is_string()) throw Error(ErrorCode::BadGraph, at + ".role must be a string");
    if (!m.contains("content")) throw Error(ErrorCode::BadGraph, at + ".content is missing");
    const auto& content = m["content"];
    if (!content.is_string() && !content.is_null() && !content.is_array())
      throw Error(ErrorCode::BadGraph, at + ".content must be a string, null or a list of parts");
  }
}

int render_template(const Options& o) {
  return guarded([&] {
    const nlohmann::ordered_json messages = parse_ordered_json_file(o.messages);
    check_messages(messages, o.messages);
    nlohmann::ordered_json vars;
    auto tmpl = ModelFiles::open(o.model)->chat_template(&vars);
    if (!tmpl) throw Error(ErrorCode::BadGraph, o.model + ": the model has no chat template");
    std::cout << tmpl->render(messages, o.generation_prompt, vars);
  });
}

}  // namespace

std::function<int()> add_model_commands(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* tok = app.add_subcommand("tokenize", "token ids of a text, as a JSON array");
  tok->add_option("--model", o->model, "model folder (tokenizer files suffice) or GGUF file")->required();
  auto* text = tok->add_option("--text", o->text, "the text");
  auto* file = tok->add_option("--file", o->file, "read the text from a file");
  tok->add_flag("--lines", o->lines, "one array per input line");
  tok->add_flag("--no-special", o->no_special, "without the special tokens the post-processor adds");

  auto* detok = app.add_subcommand("detokenize", "the text of token ids, as a JSON string");
  detok->add_option("--model", o->model, "model folder or GGUF file")->required();
  detok->add_option("--tokens", o->tokens, "comma-separated ids")->required();
  detok->add_flag("--skip-special", o->skip_special, "leave special tokens out");

  auto* tmpl = app.add_subcommand("template", "the chat template applied to a list of messages");
  tmpl->add_option("--model", o->model, "model folder or GGUF file")->required();
  tmpl->add_option("--messages", o->messages, "JSON file: [{\"role\", \"content\"}, ...]")->required();
  tmpl->add_flag("--generation-prompt", o->generation_prompt, "end with the assistant's turn opening");

  return [o, tok, text, file, detok, tmpl]() -> int {
    if (*tok) return tokenize(*o, text->count() > 0, file->count() > 0);
    if (*detok) return detokenize(*o);
    if (*tmpl) return render_template(*o);
    return -1;
  };
}

}  // namespace bonfire
