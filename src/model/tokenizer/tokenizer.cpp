// Loading tokenizer.json / tokenizer_config.json, encode and decode.
#include "model/tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json_parse.h"
#include "model/tokenizer/added_vocab.h"
#include "model/tokenizer/model.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/unicode.h"

namespace bonfire {

using nlohmann::json;

namespace {

json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad_graph(path + ": cannot open tokenizer file (" + std::strerror(errno) + ")");
  f.close();
  // tokenizer.json of a 256k vocabulary is ~35 MB; the default bound is 64 MB.
  return parse_json_file(path);
}

// tokenizer_config.json spells tokens as strings or {"content": ...} objects.
std::string token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// Tokens that end a turn in common chat formats; eos_ids() lists the ones a
// vocabulary has as special tokens, as llama.cpp does for its EOG set.
const char* const kEndOfTurn[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|endoftext|>", "<end_of_turn>",
                                  "<|end|>", "<｜end▁of▁sentence｜>", "<|end_of_text|>", "</s>", "<eos>"};

}  // namespace

Tokenizer::Tokenizer() : token_to_id_(std::make_unique<tok::StrIdMap>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_files(const std::string& tokenizer_json,
                                                 const std::string& tokenizer_config_json) {
  json t = read_json_file(tokenizer_json);
  json c = tokenizer_config_json.empty() ? json::object() : read_json_file(tokenizer_config_json);
  if (!c.is_object()) bad_graph(tokenizer_config_json + ": tokenizer config must be a JSON object");
  return from_json(t, c, tokenizer_json);
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const json& t, const json& config, const std::string& where) {
  if (!t.is_object()) bad_graph(where + ": tokenizer.json must be a JSON object");
  if (!t.contains("model") || !t["model"].is_object()) bad_graph(where + ": no \"model\" object");
  std::unique_ptr<Tokenizer> tk(new Tokenizer());
  tk->where_ = where;
  const json cfg = config.is_object() ? config : json::object();
  try {
    tk->load_model(t["model"], t.value("pre_tokenizer", json()), t.value("added_tokens", json::array()));
    tk->normalizer_ = tok::make_normalizer(t.value("normalizer", json()), where);
    tk->decoder_ = tok::make_decoder(t.value("decoder", json()), where, &tk->added_contents_);
    tk->load_config(cfg);
    tk->load_post_processor(t.value("post_processor", json()), cfg);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    bad_graph(where + ": " + e.what());
  }
  return tk;
}

// Ids index a table: the largest vocabulary in use is ~262k; 2^24 leaves room.
constexpr int64_t kMaxTokenId = int64_t(1) << 24;

void Tokenizer::load_model(const json& m, const json& pre, const json& added) {
  std::string type = m.value("type", std::string(m.contains("merges") ? "BPE" : ""));
  if (type != "BPE" && type != "GgufSpm") bad_graph(where_ + ": unsupported model type \"" + type + "\"");
  if (!m.contains("vocab")) bad_graph(where_ + ": model has no \"vocab\"");
  const json& vocab = m["vocab"];
  int32_t max_id = -1;
  if (vocab.is_object()) {
    token_to_id_->reserve(vocab.size() + 1024);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
        bad_graph(where_ + ": vocab id of \"" + bounded_text(it.key(), 64) + "\" is not a non-negative integer");
      // The id table is sized by the largest id: a lying one must not size it.
      if (it.value().get<int64_t>() >= kMaxTokenId)
        bad_graph(where_ + ": vocab id " + std::to_string(it.value().get<int64_t>()) + " of \"" +
                  bounded_text(it.key(), 64) + "\" is over the limit of " + std::to_string(kMaxTokenId) + " tokens");
      int32_t id = it.value().get<int32_t>();
      token_to_id_->set(it.key(), id);
      max_id = std::max(max_id, id);
    }
    id_to_token_.assign(max_id + 1, std::string());
    token_to_id_->for_each([&](std::string_view k, int32_t id) { id_to_token_[id] = std::string(k); });
  } else if (vocab.is_array()) {  // GGUF: the token list, id = index
    token_to_id_->reserve(vocab.size() + 1024);
    for (const json& v : vocab) {
      if (!v.is_string()) bad_graph(where_ + ": token list holds a non-string");
      token_to_id_->set(v.get<std::string>(), static_cast<int32_t>(id_to_token_.size()));
      id_to_token_.push_back(v.get<std::string>());
    }
  } else {
    bad_graph(where_ + ": model \"vocab\" must be an object or a list");
  }
  load_added(added);

  if (m.contains("unk_token") && m["unk_token"].is_string()) unk_id_ = token_to_id_->find(m["unk_token"].get<std::string>());
  if (m.contains("unk_id") && m["unk_id"].is_number_integer()) unk_id_ = m["unk_id"].get<int32_t>();
  fuse_unk_ = m.value("fuse_unk", false) && unk_id_ >= 0;

  tok::BpeOptions o;
  auto str = [&](const char* k) { return m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : std::string(); };
  o.continuing_subword_prefix = str("continuing_subword_prefix");
  o.end_of_word_suffix = end_of_word_suffix_ = str("end_of_word_suffix");
  o.ignore_merges = m.value("ignore_merges", false);
  o.byte_fallback = m.value("byte_fallback", false);
  o.unk_id = unk_id_;

  tok::PreTokenizerOptions popts;
  popts.allow_raw = type == "BPE" && o.continuing_subword_prefix.empty() && o.end_of_word_suffix.empty();
  pre_tokenizer_ = tok::make_pre_tokenizer(pre, where_, &popts);
  o.raw_bytes = popts.raw_byte_level_tail;

  if (type == "GgufSpm") {
    std::vector<float> scores = m.value("scores", std::vector<float>());
    model_ = std::make_unique<tok::Spm>(*token_to_id_, std::move(scores), unk_id_, where_);
    return;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& mj = m.value("merges", json::array());
  if (!mj.is_array()) bad_graph(where_ + ": model \"merges\" must be a list");
  merges.reserve(mj.size());
  for (const json& x : mj) {
    if (x.is_string()) {
      const std::string& s = x.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) bad_graph(where_ + ": merge \"" + s + "\" is not two tokens");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
      merges.emplace_back(x[0].get<std::string>(), x[1].get<std::string>());
    } else {
      bad_graph(where_ + ": a merge must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  model_ = std::make_unique<tok::Bpe>(*token_to_id_, merges, std::move(o), where_);
}

void Tokenizer::load_added(const json& added) {
  if (!added.is_array()) bad_graph(where_ + ": \"added_tokens\" must be a list");
  std::vector<tok::AddedToken> tokens;
  for (const json& a : added) {
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id") ||
        !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0)
      bad_graph(where_ + ": an added token needs a string \"content\" and a non-negative \"id\"");
    if (a["id"].get<int64_t>() >= kMaxTokenId)
      bad_graph(where_ + ": added token id " + std::to_string(a["id"].get<int64_t>()) + " is over the limit of " +
                std::to_string(kMaxTokenId) + " tokens");
    tok::AddedToken t;
    t.content = a["content"].get<std::string>();
    t.id = a["id"].get<int32_t>();
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    t.normalized = a.value("normalized", false);
    if (t.id >= static_cast<int32_t>(id_to_token_.size())) id_to_token_.resize(t.id + 1);
    id_to_token_[t.id] = t.content;
    token_to_id_->set(t.content, t.id);
    added_contents_.insert(t.content);
    if (t.special) special_ids_.insert(t.id);
    tokens.push_back(std::move(t));
  }
  added_ = std::make_unique<tok::AddedVocab>(std::move(tokens));
}

int32_t Tokenizer::config_token_id(const json& config, const char* key) const {
  if (!config.contains(key)) return -1;
  std::string s = token_content(config[key]);
  return s.empty() ? -1 : token_to_id_->find(s);
}

void Tokenizer::load_config(const json& c) {
  cleanup_ = c.value("clean_up_tokenization_spaces", true);
  remove_space_ = c.contains("remove_space") && c["remove_space"].is_boolean() && c["remove_space"].get<bool>();
  bos_id_ = config_token_id(c, "bos_token");
  int32_t eos = config_token_id(c, "eos_token");
  pad_id_ = config_token_id(c, "pad_token");
  if (pad_id_ < 0) pad_id_ = eos;
  if (eos >= 0) eos_ids_.push_back(eos);
  for (const char* name : kEndOfTurn) {
    int32_t id = token_to_id_->find(name);
    if (id >= 0 && special_ids_.count(id) && std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end())
      eos_ids_.push_back(id);
  }
  // The reference skips, when asked to, every token spelled like a special
  // token: added special tokens and the config's additional_special_tokens.
  std::unordered_set<std::string> names;
  for (int32_t id : special_ids_) names.insert(id_to_token_[id]);
  if (c.contains("additional_special_tokens") && c["additional_special_tokens"].is_array())
    for (const json& v : c["additional_special_tokens"]) names.insert(token_content(v));
  for (size_t id = 0; id < id_to_token_.size(); ++id)
    if (names.count(id_to_token_[id])) special_ids_.insert(static_cast<int32_t>(id));
}

void Tokenizer::load_post_processor(const json& pp, const json& config) {
  // HF transformers' Llama/Gemma fast tokenizers replace the post-processor
  // with BOS/EOS per add_bos_token/add_eos_token (update_post_processor).
  std::string cls = config.value("tokenizer_class", std::string());
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  if (cls == "LlamaTokenizer" || cls == "GemmaTokenizer" || cls == "CodeLlamaTokenizer") {
    bool add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
                       ? config["add_bos_token"].get<bool>() : true;
    bool add_eos = config.contains("add_eos_token") && config["add_eos_token"].is_boolean()
                       ? config["add_eos_token"].get<bool>() : false;
    int32_t eos = config_token_id(config, "eos_token");
    if (add_bos && bos_id_ < 0) bad_graph(where_ + ": add_bos_token is set but the config has no known bos_token");
    if (add_eos && eos < 0) bad_graph(where_ + ": add_eos_token is set but the config has no known eos_token");
    if (add_bos) prefix_ids_.push_back(bos_id_);
    if (add_eos) suffix_ids_.push_back(eos);
    return;
  }
  template_from(pp, prefix_ids_, suffix_ids_);
}

void Tokenizer::template_from(const json& pp, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) const {
  if (pp.is_null()) return;
  if (!pp.is_object() || !pp.contains("type")) bad_graph(where_ + ": post_processor must be an object with a \"type\"");
  const std::string type = pp["type"];
  if (type == "ByteLevel") return;
  if (type == "Sequence") {  // each step wraps what the steps before it produced
    for (const json& sub : pp.value("processors", json::array())) {
      std::vector<int32_t> p, s;
      template_from(sub, p, s);
      prefix.insert(prefix.begin(), p.begin(), p.end());
      suffix.insert(suffix.end(), s.begin(), s.end());
    }
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix.push_back(pp.at("cls").at(1).get<int32_t>());
    suffix.push_back(pp.at("sep").at(1).get<int32_t>());
    return;
  }
  if (type != "TemplateProcessing") bad_graph(where_ + ": unsupported post_processor type \"" + type + "\"");
  if (!pp.contains("single") || !pp["single"].is_array())
    bad_graph(where_ + ": TemplateProcessing needs a \"single\" list");
  bool after = false;
  for (const json& item : pp["single"]) {
    if (item.contains("Sequence")) {
      after = true;
      continue;
    }
    if (!item.contains("SpecialToken")) bad_graph(where_ + ": TemplateProcessing item is neither Sequence nor SpecialToken");
    std::string name = item["SpecialToken"].value("id", std::string());
    std::vector<int32_t> ids;
    const json& table = pp.value("special_tokens", json::object());
    if (table.contains(name) && table[name].contains("ids")) {
      ids = table[name]["ids"].get<std::vector<int32_t>>();
    } else {
      int32_t id = token_to_id_->find(name);
      if (id < 0) bad_graph(where_ + ": post_processor token \"" + name + "\" is not in the vocab");
      ids.push_back(id);
    }
    auto& dst = after ? suffix : prefix;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  int32_t id = token_to_id_->find(token);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string& Tokenizer::token(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    bad_graph(where_ + ": token id " + std::to_string(id) + " is outside [0, " + std::to_string(vocab_size()) + ")");
  return id_to_token_[id];
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  size_t bad = tok::utf8_invalid_offset(text);
  if (bad != tok::kValid) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[bad]));
    bad_graph("tokenizer input is not valid UTF-8: byte " + std::string(hex) + " at offset " + std::to_string(bad));
  }
  std::vector<tok::Section> sections;
  added_->split(text, sections);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size() + 4);
  if (add_special) ids = prefix_ids_;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].added_id >= 0) ids.push_back(sections[i].added_id);
    else encode_section(sections[i].text, static_cast<int>(i), ids);
  }
  if (add_special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void Tokenizer::encode_section(std::string_view text, int section, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::string s;
  if (remove_space_) {  // the reference: trim, then runs of whitespace become one space
    std::string_view v = tok::js_trim_end(tok::js_trim_start(text));
    size_t i = 0;
    bool in_space = false;
    while (i < v.size()) {
      size_t b = i;
      bool sp = tok::is_js_space(tok::utf8_next(v, i));
      if (sp && !in_space) s += ' ';
      if (!sp) s.append(v.substr(b, i - b));
      in_space = sp;
    }
  } else {
    s.assign(text);
  }
  if (normalizer_) normalizer_->normalize(s);
  if (s.empty()) return;
  std::vector<std::string> words;
  words.push_back(std::move(s));
  if (pre_tokenizer_) pre_tokenizer_->split(words, section);
  size_t start = ids.size();
  for (const std::string& w : words) model_->encode_word(w, ids);
  if (fuse_unk_) {  // runs of unknown tokens become one
    size_t out = start;
    for (size_t i = start; i < ids.size(); ++i)
      if (!(ids[i] == unk_id_ && out > start && ids[out - 1] == unk_id_)) ids[out++] = ids[i];
    ids.resize(out);
  }
}

std::string Tokenizer::decode_raw(const int32_t* ids, size_t n, bool skip_special) const {
  std::vector<std::string> toks;
  toks.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = token(ids[i]);
    if (skip_special && special_ids_.count(ids[i])) continue;
    toks.push_back(t);
  }
  std::string text;
  if (decoder_) {
    decoder_->decode_chain(toks);
    for (const std::string& t : toks) text += t;
  } else {  // HF joins with spaces when there is no decoder
    for (size_t i = 0; i < toks.size(); ++i) text += (i ? " " : "") + toks[i];
  }
  if (decoder_ && !end_of_word_suffix_.empty()) {
    for (size_t at = 0; (at = text.find(end_of_word_suffix_, at)) != std::string::npos; ++at)
      text.replace(at, end_of_word_suffix_.size(), " ");
    if (skip_special) text = std::string(tok::js_trim_end(tok::js_trim_start(text)));
  }
  return text;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string raw = decode_raw(ids.data(), ids.size(), skip_special);
  return cleanup_ ? tok::clean_up_tokenization(std::move(raw)) : raw;
}

}  // namespace bonfire
