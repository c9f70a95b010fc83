// Incremental decoding. The ids whose text is not final stay in a window that
// starts with the ids of the last emitted piece (their text is `prefix_`), so
// decoders that look at the start of their input (Strip) or join bytes across
// tokens (ByteLevel, ByteFallback) see the same context as a whole decode.
// Text is final once it does not end in U+FFFD, HF's test for a character
// still missing bytes.
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/tokenizer.h"

namespace bonfire {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

Tokenizer::Stream Tokenizer::stream(bool skip_special) const { return Stream(this, skip_special); }

std::string Tokenizer::Stream::push(int32_t id) {
  tok_->token(id);  // refuses ids outside the vocabulary
  window_.push_back(id);
  std::string text = tok_->decode_raw(window_.data(), window_.size(), skip_special_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return "";
  std::string fresh = text.substr(prefix_.size());
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(context_));
  context_ = window_.size();
  prefix_ = tok_->decode_raw(window_.data(), window_.size(), skip_special_);
  return release(std::move(fresh), false);
}

std::string Tokenizer::Stream::flush() {
  std::string text = tok_->decode_raw(window_.data(), window_.size(), skip_special_);
  std::string fresh = text.size() > prefix_.size() ? text.substr(prefix_.size()) : "";
  window_.clear();
  context_ = 0;
  prefix_.clear();
  return release(std::move(fresh), true);
}

// clean_up_tokenization only rewrites patterns that start with a space and
// are at most 4 bytes long, and only ever deletes spaces. So text can be
// cleaned and released up to any point not preceded by a space within 3
// bytes: no pattern can straddle that point, now or after more text comes.
std::string Tokenizer::Stream::release(std::string text, bool final) {
  if (!tok_->cleanup_) return text;
  held_ += text;
  size_t cut = held_.size();
  while (!final) {
    size_t lo = cut >= 3 ? cut - 3 : 0;
    size_t sp = held_.find(' ', lo);
    if (sp == std::string::npos || sp >= cut) break;
    cut = sp;
  }
  std::string out = tok::clean_up_tokenization(held_.substr(0, cut));
  held_.erase(0, cut);
  return out;
}

}  // namespace bonfire
