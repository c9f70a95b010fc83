#include "model/model_files.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "core/progress.h"
#include "model/family.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "model/safetensors.h"

namespace bonfire {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string in_dir(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

// A checkpoint's tensors as the IR reads them (docs/IR.md §3), for what a
// safetensors folder stores differently from its GGUF conversion (and
// what each family adds: Family::adapt_weights):
//  - Phi-3's LongRoPE factors live in config.json; GGUF carries them as the
//    tensors rope_factors_{short,long}.weight, so the folder gets the same.
void adapt_hf_weights(const ModelConfig& c, WeightStore& store) {
  // Norm weights and biases are vectors the ops read as f32; they are tiny.
  for (const std::string& name : store.names()) {
    const Tensor& t = *store.find(name);
    if (t.shape.size() == 1 && t.dtype != DType::F32) store.put(name, to_f32(t), c.source + " (as f32)");
  }
  const json& rs = c.rope_scaling;
  if (rs.is_object() && (rs.value("rope_type", rs.value("type", std::string())) == "longrope" ||
                         rs.value("rope_type", rs.value("type", std::string())) == "su")) {
    for (const char* which : {"short", "long"}) {
      const std::string key = std::string(which) + "_factor";
      if (!rs.contains(key) || !rs[key].is_array()) continue;
      const std::vector<float> f = rs[key].get<std::vector<float>>();
      Tensor t = Tensor::empty({(int64_t)f.size()});
      std::copy(f.begin(), f.end(), t.f32());
      store.put(std::string("rope_factors_") + which + ".weight", t, c.source + " rope_scaling." + key);
    }
  }
}


}  // namespace

std::unique_ptr<ModelFiles> ModelFiles::open(const std::string& path) {
  std::unique_ptr<ModelFiles> m(new ModelFiles());
  m->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return m;
  // A folder's config.json names the folder (as transformers' from_pretrained
  // takes either).
  if (fs::path(path).filename() == "config.json" && fs::is_regular_file(path, ec)) {
    m->path_ = fs::path(path).parent_path().string();
    if (m->path_.empty()) m->path_ = ".";
    return m;
  }
  if (!fs::is_regular_file(path, ec))
    throw Error(ErrorCode::BadGraph, path + ": no such model folder or GGUF file");
  m->gguf_ = GgufFile::open(path);
  return m;
}

// The checkpoint's tensor names and shapes (headers only) for the config's
// size checks. A folder whose safetensors do not open gets an empty
// census: weights() then says what is wrong with them.
TensorCensus ModelFiles::census() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> list;
  if (gguf_) {
    for (const GgufTensorInfo& t : gguf_->tensors()) list.emplace_back(t.name, t.shape);
    return census_of(list);
  }
  try {
    WeightStore store;
    load_safetensors_folder(path_, store);
    for (const std::string& name : store.names()) list.emplace_back(name, store.find(name)->shape);
  } catch (const std::exception&) {
    return {};
  }
  return census_of(list);
}

ModelConfig ModelFiles::config() const {
  const TensorCensus have = census();
  if (gguf_) {
    ModelConfig c = parse_gguf_config(gguf_->metadata(), path_, &have);
    // llama.cpp's converter drops output.weight when it equals the embedding.
    c.tie_word_embeddings = gguf_->find("output.weight") == nullptr;
    // Llama 3's rope scaling survives conversion only as this tensor (the
    // IR then names it; docs/IR.md §14).
    if (gguf_->find("rope_freqs.weight") && c.rope_scaling.is_null()) c.rope_scaling = {{"rope_type", "llama3"}};
    // LongRoPE (Phi-3 128k, Phi-3.5): the converter writes the factors as
    // rope_factors_{long,short}.weight, rope.scaling.attn_factor and
    // rope.scaling.original_context_length, but no rope.scaling.type. The
    // tensors are what llama.cpp goes by: it takes the long factors when the
    // context exceeds the original one (context_length when the key is
    // missing) and scales cos/sin by attn_factor (1 when missing).
    if (gguf_->find("rope_factors_long.weight") && gguf_->find("rope_factors_short.weight") &&
        (c.rope_scaling.is_null() || c.rope_scaling.value("rope_type", std::string()) == "longrope" ||
         c.rope_scaling.value("rope_type", std::string()) == "su")) {
      const json& kv = gguf_->metadata();
      const std::string arch = kv["general.architecture"].get<std::string>();
      auto number = [&](const std::string& key, double dflt) {
        const auto it = kv.find(arch + "." + key);
        return it != kv.end() && it->is_number() ? it->get<double>() : dflt;
      };
      const double orig = number("rope.scaling.original_context_length", double(c.max_position_embeddings));
      if (!(orig >= 1 && orig <= double(int64_t{1} << 40)))
        throw Error(ErrorCode::BadGraph, path_ + ": " + arch + ".rope.scaling.original_context_length = " +
                                             std::to_string(orig) + " is not a context length");
      const double attn = number("rope.scaling.attn_factor", 1.0);
      if (!(attn > 0 && attn < 1e6))
        throw Error(ErrorCode::BadGraph, path_ + ": " + arch + ".rope.scaling.attn_factor = " +
                                             std::to_string(attn) + " is not a usable factor");
      c.rope_scaling = {{"rope_type", "longrope"},
                        {"original_max_position_embeddings", int64_t(orig)},
                        {"attention_factor", attn}};
    }
    // Biases are whatever the converter found in the checkpoint.
    c.attention_bias = gguf_->find("blk.0.attn_q.bias") || gguf_->find("blk.0.attn_qkv.bias");
    c.mlp_bias = gguf_->find("blk.0.ffn_up.bias") != nullptr;
    return c;
  }
  return load_hf_config(in_dir(path_, "config.json"), &have);
}

GenerationConfig ModelFiles::generation_config() const {
  if (!gguf_) return load_generation_config(in_dir(path_, "generation_config.json"));
  GenerationConfig g;
  const ModelConfig c = config();
  g.eos_token_ids = c.eos_token_ids;
  g.bos_token_id = c.bos_token_id;
  return g;
}

WeightStore ModelFiles::weights(bool lowering_only) const {
  WeightStore store;
  if (gguf_)
    store = load_gguf_weights(*gguf_, GgufLoadOptions{.lowering_only = lowering_only});
  else
    load_safetensors_folder(path_, store);
  if (gguf_ || fs::exists(in_dir(path_, "config.json"))) {
    const ModelConfig c = config();
    if (!gguf_) adapt_hf_weights(c, store);
    if (const Family* f = find_family(c.family); f && f->adapt_weights)
      f->adapt_weights(c, gguf_ != nullptr, lowering_only, store);
  }
  return store;
}

std::vector<std::string> ModelFiles::weight_files() const {
  if (gguf_) return {path_};
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path_))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

bool ModelFiles::warm() const {
  const std::vector<std::string> files = weight_files();
  int64_t total = 0;
  for (const auto& f : files) total += static_cast<int64_t>(fs::file_size(f));
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (total == 0 || static_cast<double>(total) > ram / 2) return false;
  // Small models load in a blink; a bar only where there is something to watch.
  std::unique_ptr<Progress> progress;
  if (total > (int64_t{64} << 20))
    progress = std::make_unique<Progress>("loading " + fs::path(path_).filename().string(), total, Progress::Unit::Bytes);
  std::vector<char> buf(size_t{4} << 20);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (progress) progress->advance(in.gcount());
    }
  }
  return true;
}

std::unique_ptr<Tokenizer> ModelFiles::tokenizer() const {
  if (gguf_) return Tokenizer::from_gguf_metadata(gguf_->metadata());
  const std::string tj = in_dir(path_, "tokenizer.json");
  if (!fs::exists(tj)) throw Error(ErrorCode::BadGraph, tj + ": missing (the model folder needs its tokenizer.json)");
  const std::string tc = in_dir(path_, "tokenizer_config.json");
  return Tokenizer::from_files(tj, fs::exists(tc) ? tc : "");
}

std::optional<ChatTemplate> ModelFiles::chat_template(nlohmann::ordered_json* vars) const {
  if (gguf_) {
    const json& kv = gguf_->metadata();
    if (!kv.contains("tokenizer.chat_template") || !kv["tokenizer.chat_template"].is_string()) return std::nullopt;
    if (vars) {
      *vars = nlohmann::ordered_json::object();
      const json& tokens = kv.value("tokenizer.ggml.tokens", json::array());
      for (const char* which : {"bos", "eos", "unk", "padding"}) {
        const std::string key = std::string("tokenizer.ggml.") + which + "_token_id";
        if (!kv.contains(key) || !kv[key].is_number_unsigned()) continue;
        const uint64_t id = kv[key].get<uint64_t>();
        if (id < tokens.size() && tokens[id].is_string())
          (*vars)[std::string(which == std::string("padding") ? "pad" : which) + "_token"] = tokens[id];
      }
    }
    return ChatTemplate(kv["tokenizer.chat_template"].get<std::string>());
  }
  // Newer transformers write the template beside the config as a file.
  const std::string tc = in_dir(path_, "tokenizer_config.json");
  const std::string jinja = in_dir(path_, "chat_template.jinja");
  std::optional<ChatTemplate> from_config;
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  if (fs::exists(tc)) {
    try {
      from_config = load_chat_template(tc, &v);
    } catch (const Error&) {
      if (!fs::exists(jinja)) throw;  // no template anywhere: say why
    }
  }
  if (vars) *vars = v;
  if (fs::exists(jinja)) return ChatTemplate(read_file(jinja));
  return from_config;
}

}  // namespace bonfire
