#include "model/chat_template/chat_template.h"

#include <fstream>

#include "core/error.h"
#include "core/json_parse.h"
#include "model/chat_template/ast.h"
#include "model/chat_template/interpreter.h"
#include "model/chat_template/lexer.h"
#include "model/chat_template/parser.h"

namespace bonfire {

using namespace chat_template;

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), program_(std::make_shared<const NodeList>(parse(tokenize(source_)))) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_vars) const {
  if (!extra_vars.is_null() && !extra_vars.is_object()) throw Error(ErrorCode::BadGraph, "chat template variables must be an object");
  // The context apply_chat_template builds, in its order.
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = messages;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (const char* key : {"tools", "documents"}) {
    const bool given = extra_vars.is_object() && extra_vars.contains(key);
    vars[key] = given ? extra_vars.at(key) : nullptr;
  }
  if (extra_vars.is_object())
    for (const auto& [key, value] : extra_vars.items())
      if (!vars.contains(key)) vars[key] = value;
  return render_vars(vars);
}

std::string ChatTemplate::render_vars(const nlohmann::ordered_json& vars) const {
  if (!vars.is_object()) throw Error(ErrorCode::BadGraph, "template variables must be an object");
  Interpreter in;
  try {
    EnvPtr env = Interpreter::global_env();
    for (const auto& [key, value] : vars.items()) env->declare(key, from_json(value));
    return in.render(*program_, env);
  } catch (const RaisedError& e) {
    throw Error(ErrorCode::BadGraph, e.what());
  } catch (const RenderError& e) {
    const std::string detail = e.detail.empty() ? "" : "; " + e.detail;
    throw Error(ErrorCode::BadGraph, std::string(e.what()) + " (line " + std::to_string(in.line()) + detail + ")");
  }
}

namespace {

std::string token_string(const nlohmann::ordered_json& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  if (v.is_null()) return {};
  throw Error(ErrorCode::BadGraph, "tokenizer_config.json: " + key + " is neither a string nor an object with content");
}

}  // namespace

ChatTemplate load_chat_template(const std::string& path, nlohmann::ordered_json* extra_vars_out) {
  const nlohmann::ordered_json config = parse_ordered_json_file(path);
  // The special-token strings first: a folder whose template lives in
  // chat_template.jinja still takes them from this file.
  if (extra_vars_out) {
    *extra_vars_out = nlohmann::ordered_json::object();
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
      if (!config.contains(key)) continue;
      const std::string s = token_string(config[key], key);
      if (!s.empty()) (*extra_vars_out)[key] = s;
    }
  }
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    throw Error(ErrorCode::BadGraph, path + " has no chat_template: this model has no chat format to render");
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    bool found = false;
    for (const auto& t : *it) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() || !t["template"].is_string())
        throw Error(ErrorCode::BadGraph, path + ": chat_template must be a list of objects with \"name\" and \"template\"");
      if (t["name"] == "default") {
        source = t["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) throw Error(ErrorCode::BadGraph, path + ": chat_template lists several templates but none named \"default\"");
  } else {
    throw Error(ErrorCode::BadGraph, path + ": chat_template must be a string or a list of {name, template}");
  }
  return ChatTemplate(std::move(source));
}

}  // namespace bonfire
