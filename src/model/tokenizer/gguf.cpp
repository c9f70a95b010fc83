// Tokenizers from GGUF metadata (the tokenizer.ggml.* keys), translated into
// the tokenizer.json pipeline that does the same thing:
//   "gpt2":  byte-level BPE with merges; tokenizer.ggml.pre names llama.cpp's
//            regex set (llama3 family, qwen2, deepseek, falcon, starcoder,
//            bloom, tekken, gpt-4o and the names that share theirs).
//   "llama": SentencePiece pieces with scores, merged as llama.cpp's SPM
//            tokenizer does; spaces become U+2581, one is prepended to each
//            text run when add_space_prefix (default true).
// Control (type 3) and user-defined (type 4) tokens are matched in the text
// like HF's added tokens; control tokens count as special.
#include <algorithm>
#include <initializer_list>
#include <iterator>

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
// GPT-2's pattern without the final \s+, as llama.cpp lists it for most
// older families (text no alternative matches still becomes its own piece).
const char* const kGpt2Words = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kDeepseek3[] = {
    "\\p{N}{1,3}",
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",  // 一-龥 ぀-ゟ ゠-ヿ
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+"
    "[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
const char* const kFalcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Words, "[0-9][0-9][0-9]"};
const char* const kStarcoder[] = {"\\p{N}", kGpt2Words};
// BLOOM-style: a run of anything but whitespace and a few sentence marks.
const char* const kBloom = " ?[^(\\s|.,!?…。，、।۔،)]+";
const char* const kViking[] = {kBloom, "\\p{N}"};
// llama.cpp runs regexes without \p{..} on text whose non-ASCII spaces were
// replaced by U+000B, so a range never takes a space (U+0800-U+4E00 holds some).
const char* const kCjkHangul = "(?:(?!\\s)[一-龥ࠀ-一가-퟿])+";
const char* const kDeepseekLlm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF"
    "\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57"
    "\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3"
    "\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D"
    "\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
    "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787"
    "\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~！-／：-～‘-‟、-。]+",  // U+3000 is a space: only \s may take it
    "\\s+$",
    kCjkHangul,
    "\\p{N}+"};
const char* const kDeepseekCoder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkHangul, "\\p{N}"};
// Tekken and GPT-4o split words at lower-to-upper case changes. llama.cpp's
// regex engine cannot tell the case of a non-ASCII letter, so it runs these
// as "a letter that is not a-z" / "... not A-Z"; written the same way here
// so the splits (and ids) agree with llama.cpp's.
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

template <size_t N>
void assign(std::vector<std::string>& out, const char* const (&list)[N]) {
  out.assign(std::begin(list), std::end(list));
}

// llama.cpp's \s is the Unicode White_Space set: JavaScript's \s (which the
// Split step follows, as the reference tokenizers do) plus U+0085, less
// U+FEFF. The pre types matched against llama.cpp's own ids spell it out.
std::string with_llama_spaces(const std::string& re) {
  const std::string ws = "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char e = re[++i];
      if (e == 's') out += in_class ? ws : "[" + ws + "]";
      else if (e == 'S' && !in_class) out += "[^" + ws + "]";
      else out += {'\\', e};
      continue;
    }
    if (in_class && c == ']') in_class = false;
    else if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < re.size() && re[i + 1] == '^') out += re[++i];
      if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];  // a leading ] is literal
      continue;
    }
    out += c;
  }
  return out;
}

// The regexes of a tokenizer.ggml.pre value (applied one after another, each
// to the pieces the previous ones left, as llama.cpp does), and whether merges
// are skipped for words already in the vocabulary; both as llama.cpp's
// llama-vocab.cpp sets them.
bool pre_regexes(const std::string& pre, std::vector<std::string>& out, bool& ignore_merges) {
  auto is = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return pre == n; });
  };
  ignore_merges = false;
  bool llama_spaces = true;
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    out = {kLlama3};
    ignore_merges = true;
    llama_spaces = false;  // kept as the HF-reference tests expect
  } else if (is({"dbrx", "smaug-bpe", "chatglm-bpe"})) {
    out = {kLlama3};
  } else if (is({"qwen2", "deepseek-r1-qwen"})) {
    out = {kQwen2};
    llama_spaces = false;
  } else if (is({"stablelm2", "hunyuan"})) {
    out = {kQwen2};
  } else if (pre == "deepseek-v3") {
    assign(out, kDeepseek3);
    llama_spaces = false;
  } else if (is({"default", "gpt2", "gpt-2"})) {
    out = {kGpt2};
    llama_spaces = false;
  } else if (is({"mpt", "olmo", "jais", "trillion"})) {
    out = {kGpt2Words};
  } else if (pre == "falcon") {
    assign(out, kFalcon);
  } else if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    assign(out, kStarcoder);
  } else if (is({"bloom", "poro-chat", "gpt3-finnish"})) {
    out = {kBloom};
  } else if (pre == "viking") {
    assign(out, kViking);
  } else if (pre == "deepseek-llm") {
    assign(out, kDeepseekLlm);
  } else if (pre == "deepseek-coder") {
    assign(out, kDeepseekCoder);
  } else if (pre == "tekken") {
    out = {kTekken};
    ignore_merges = true;
  } else if (pre == "gpt-4o") {
    out = {kGpt4o};
  } else {
    return false;
  }
  if (llama_spaces)
    for (std::string& r : out) r = with_llama_spaces(r);
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
