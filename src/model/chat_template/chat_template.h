// Chat templates: the Jinja program in a model's tokenizer_config.json that
// turns a conversation into the model's prompt text.
//
// What it promises: the rendered text is byte-identical to what transformers.js
// produces (PreTrainedTokenizer.apply_chat_template with tokenize=false, whose
// engine is @huggingface/jinja; goldens/templates/ holds its renders and
// scripts/gen_template_goldens.mjs regenerates them). That engine runs Jinja
// with trim_blocks and lstrip_blocks like transformers, and with JavaScript
// values: `{{ true }}` prints "true", `{{ 2.0 }}` prints "2.0" but `'a' ~ 2.0`
// gives "a2", tojson separates with ", " and ": " and leaves non-ASCII as is.
// Where it fails (a missing filter, `none + 'x'`, raise_exception, ...) render
// throws bonfire::Error(BadGraph) with the reference's message followed by
// " (line N...)", except raise_exception, whose message is passed unchanged.
// A template never renders silently wrong: an unknown tag, filter, test or
// method is an error naming it.
//
// Beyond the reference, as Jinja: the filters `d`, `count`, `escape`/`e` and
// `default` without parentheses, tests with an argument (`x is in y`,
// `x is equalto 3`), and iterating an undefined value as empty.
// Known differences: upper/lower use simple (one-to-one) case mapping, so
// "ß"|upper stays "ß"; tojson(sort_keys=true) approximates JavaScript's
// localeCompare (punctuation, digits, then letters ignoring case).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire {
namespace chat_template {
struct Node;
}

class ChatTemplate {
 public:
  // Parses; throws Error naming the line and column on a syntax error.
  // Copies share the parsed program; render may run on several threads at once.
  explicit ChatTemplate(std::string source);

  // messages: [{role, content, ...}, ...]. extra_vars: bos_token, eos_token,
  // tools, documents, enable_thinking, ... as template variables; tools and
  // documents are none unless given, as transformers passes them.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_vars) const;

  // The same engine on any template (the GPU passes' .wgsl.jinja files):
  // `vars` are the template's variables, nothing else is declared.
  std::string render_vars(const nlohmann::ordered_json& vars) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<chat_template::Node>>> program_;
};

// Reads tokenizer_config.json: chat_template is a string, or a list of
// {name, template} of which "default" is used. extra_vars_out (if not null)
// receives the special-token strings the template may read (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token), each a
// string or an AddedToken object {content: ...} in the file.
ChatTemplate load_chat_template(const std::string& tokenizer_config_path, nlohmann::ordered_json* extra_vars_out);

}  // namespace bonfire
