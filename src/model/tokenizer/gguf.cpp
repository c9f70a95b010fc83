// Tokenizers from GGUF metadata (the tokenizer.ggml.* keys), translated into
// the tokenizer.json pipeline that does the same thing:
//   "gpt2":  byte-level BPE with merges; tokenizer.ggml.pre names llama.cpp's
//            regex set (llama3 family, qwen2, deepseek-v3, gpt-2).
//   "llama": SentencePiece pieces with scores, merged as llama.cpp's SPM
//            tokenizer does; spaces become U+2581, one is prepended to each
//            text run when add_space_prefix (default true).
// Control (type 3) and user-defined (type 4) tokens are matched in the text
// like HF's added tokens; control tokens count as special.
#include <algorithm>

#include "core/error.h"
#include "model/tokenizer/tokenizer.h"

namespace bonfire {
namespace {

using nlohmann::json;

constexpr const char* kWhere = "GGUF tokenizer metadata";

const char* const kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char* const kDeepseek3[] = {
    "\\p{N}{1,3}",
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",  // 一-龥 ぀-ゟ ゠-ヿ
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+"
    "[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};

// The regexes of a tokenizer.ggml.pre value, and whether merges are skipped
// for words already in the vocabulary (llama.cpp does so for Llama 3).
bool pre_regexes(const std::string& pre, std::vector<std::string>& out, bool& ignore_merges) {
  ignore_merges = false;
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3") {
    out = {kLlama3};
    ignore_merges = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    out = {kQwen2};
  } else if (pre == "deepseek-v3") {
    out.assign(std::begin(kDeepseek3), std::end(kDeepseek3));
  } else if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
    out = {kGpt2};
  } else {
    return false;
  }
  return true;
}

json step(const char* type) { return json{{"type", type}}; }

json template_for(bool add_bos, int64_t bos, bool add_eos, int64_t eos) {
  json single = json::array(), table = json::object();
  if (add_bos) {
    single.push_back({{"SpecialToken", {{"id", "bos"}, {"type_id", 0}}}});
    table["bos"] = {{"ids", {bos}}};
  }
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos) {
    single.push_back({{"SpecialToken", {{"id", "eos"}, {"type_id", 0}}}});
    table["eos"] = {{"ids", {eos}}};
  }
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", table}};
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf_metadata(const json& kv) {
  auto need = [&](const char* key) -> const json& {
    if (!kv.is_object() || !kv.contains(key)) bad_graph(std::string(kWhere) + ": missing " + key);
    return kv[key];
  };
  auto num = [&](const char* key, int64_t dflt) {
    return kv.contains(key) && kv[key].is_number_integer() ? kv[key].get<int64_t>() : dflt;
  };
  auto flag = [&](const char* key, bool dflt) {
    return kv.contains(key) && kv[key].is_boolean() ? kv[key].get<bool>() : dflt;
  };
  const json& model = need("tokenizer.ggml.model");
  const json& tokens = need("tokenizer.ggml.tokens");
  if (!model.is_string() || !tokens.is_array()) bad_graph(std::string(kWhere) + ": model must be a string, tokens a list");
  const std::string type = model.get<std::string>();
  const json types = kv.value("tokenizer.ggml.token_type", json::array());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t bos = num("tokenizer.ggml.bos_token_id", -1), eos = num("tokenizer.ggml.eos_token_id", -1);

  json t = {{"version", "1.0"}, {"added_tokens", json::array()}};
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(types.size()); ++i) {
    int64_t ty = types[i].is_number_integer() ? types[i].get<int64_t>() : 1;
    if (ty == 3 || ty == 4) t["added_tokens"].push_back({{"id", i}, {"content", tokens[i]}, {"special", ty == 3}});
  }
  bool add_bos, add_eos = flag("tokenizer.ggml.add_eos_token", false);
  if (type == "gpt2") {
    std::vector<std::string> regexes;
    bool ignore_merges;
    std::string pre = kv.value("tokenizer.ggml.pre", std::string("default"));
    if (!pre_regexes(pre, regexes, ignore_merges))
      throw Error(ErrorCode::UnsupportedFeature, std::string(kWhere) + ": unsupported tokenizer.ggml.pre \"" + pre + "\"",
                  "", "tokenizer.pre." + pre);
    t["model"] = {{"type", "BPE"}, {"vocab", tokens}, {"merges", need("tokenizer.ggml.merges")},
                  {"ignore_merges", ignore_merges}};
    json seq = json::array();
    for (const std::string& r : regexes)
      seq.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
    seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
    t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", seq}};
    t["decoder"] = step("ByteLevel");
    add_bos = flag("tokenizer.ggml.add_bos_token", false);
  } else if (type == "llama") {
    const json& scores = need("tokenizer.ggml.scores");
    if (!scores.is_array() || static_cast<int64_t>(scores.size()) != n)
      bad_graph(std::string(kWhere) + ": tokenizer.ggml.scores must list one score per token");
    bool space_prefix = flag("tokenizer.ggml.add_space_prefix", true);
    t["model"] = {{"type", "GgufSpm"}, {"vocab", tokens}, {"scores", scores},
                  {"unk_id", num("tokenizer.ggml.unknown_token_id", -1)}};
    json norm = json::array();
    if (space_prefix) norm.push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}});
    t["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    json dec = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                            step("ByteFallback"), step("Fuse")});
    if (space_prefix) dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    t["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
    add_bos = flag("tokenizer.ggml.add_bos_token", true);
  } else {
    throw Error(ErrorCode::UnsupportedFeature, std::string(kWhere) + ": unsupported tokenizer.ggml.model \"" + type + "\"",
                "", "tokenizer.model." + type);
  }
  if ((add_bos && (bos < 0 || bos >= n)) || (add_eos && (eos < 0 || eos >= n)))
    bad_graph(std::string(kWhere) + ": add_bos/add_eos is set but the bos/eos token id is missing or out of range");
  t["post_processor"] = template_for(add_bos, bos, add_eos, eos);

  auto tk = from_json(t, json{{"clean_up_tokenization_spaces", false}}, kWhere);
  tk->bos_id_ = bos >= 0 && bos < n ? static_cast<int32_t>(bos) : -1;
  // The metadata's end tokens first, then the end-of-turn tokens found by name.
  std::vector<int32_t> eos_ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int64_t id = num(key, -1);
    if (id >= 0 && id < n) eos_ids.push_back(static_cast<int32_t>(id));
  }
  eos_ids.insert(eos_ids.end(), tk->eos_ids_.begin(), tk->eos_ids_.end());
  tk->eos_ids_.clear();
  for (int32_t id : eos_ids)
    if (std::find(tk->eos_ids_.begin(), tk->eos_ids_.end(), id) == tk->eos_ids_.end()) tk->eos_ids_.push_back(id);
  int64_t pad = num("tokenizer.ggml.padding_token_id", -1);
  tk->pad_id_ = pad >= 0 && pad < n ? static_cast<int32_t>(pad) : -1;
  return tk;
}

}  // namespace bonfire
