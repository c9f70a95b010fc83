#include "model/chat_template/lexer.h"

#include "core/error.h"
#include "model/chat_template/text.h"

namespace bonfire::chat_template {
namespace {

// Preprocessed text and, per byte, its offset in the original source.
struct Mapped {
  std::string s;
  std::vector<size_t> at;
  void push(char c, size_t origin) {
    s += c;
    at.push_back(origin);
  }
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// A JavaScript line terminator ends at s[i-1]: `^` in multiline mode matches at i.
bool line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  const char c = s[i - 1];
  if (c == '\n' || c == '\r') return true;
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 && (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// transformers renders with trim_blocks and lstrip_blocks; the reference
// implements both (and the trailing-newline rule) as text rewrites before
// lexing, which this mirrors rewrite for rewrite.
Mapped preprocess(const std::string& source) {
  Mapped m;
  size_t n = source.size();
  if (n && source[n - 1] == '\n') --n;
  for (size_t i = 0; i < n; ++i) m.push(source[i], i);

  Mapped l;  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
  for (size_t i = 0; i < m.s.size(); ++i) {
    if (line_start(m.s, i)) {
      size_t q = i;
      while (q < m.s.size() && (m.s[q] == ' ' || m.s[q] == '\t')) ++q;
      if (q + 1 < m.s.size() && m.s[q] == '{' && (m.s[q + 1] == '#' || m.s[q + 1] == '%' || m.s[q + 1] == '-')) i = q;
    }
    l.push(m.s[i], m.at[i]);
  }

  Mapped t;  // trim_blocks: /([#%-]})\n/g -> "$1"
  for (size_t i = 0; i < l.s.size();) {
    const char c = l.s[i];
    if ((c == '#' || c == '%' || c == '-') && i + 2 < l.s.size() && l.s[i + 1] == '}' && l.s[i + 2] == '\n') {
      t.push(l.s[i], l.at[i]);
      t.push(l.s[i + 1], l.at[i + 1]);
      i += 3;
      continue;
    }
    t.push(c, l.at[i]);
    ++i;
  }

  // {% generation %} / {% endgeneration %} markers are dropped, honouring their dashes.
  Mapped g;
  const std::string& s = t.s;
  size_t last = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != '{' || s[i + 1] != '%') continue;
    size_t j = i + 2;
    const bool lstrip = j < s.size() && s[j] == '-';
    if (lstrip) ++j;
    while (size_t w = js_space_at(s, j)) j += w;
    if (s.compare(j, 3, "end") == 0 && s.compare(j + 3, 10, "generation") == 0) j += 3;
    if (s.compare(j, 10, "generation") != 0) continue;
    j += 10;
    while (size_t w = js_space_at(s, j)) j += w;
    const bool rstrip = j < s.size() && s[j] == '-';
    if (rstrip) ++j;
    if (s.compare(j, 2, "%}") != 0) continue;
    j += 2;
    const size_t after = j;
    while (size_t w = js_space_at(s, j)) j += w;
    size_t end = i;
    while (lstrip && end > last) {
      const size_t w = js_space_before(s, end);
      if (w == 0) break;
      end -= w;
    }
    for (size_t k = last; k < end; ++k) g.push(s[k], t.at[k]);
    if (!rstrip)
      for (size_t k = after; k < j; ++k) g.push(s[k], t.at[k]);
    last = j;
    i = j - 1;
  }
  for (size_t k = last; k < s.size(); ++k) g.push(s[k], t.at[k]);
  return g;
}

class Lexer {
 public:
  Lexer(const std::string& source, Mapped m) : source_(source), m_(std::move(m)), s_(m_.s), n_(s_.size()) {}

  std::vector<Token> run() {
    while (pos_ < n_) step();
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t p, const std::string& msg) const {
    const size_t origin = p < n_ ? m_.at[p] : source_.size();
    throw Error(ErrorCode::BadGraph, "chat template syntax error at " + location(source_, origin) + msg);
  }

  void push(Tok type, std::string value, size_t p) {
    Token t{type, std::move(value), 0, 0};
    const size_t origin = p < n_ ? m_.at[p] : source_.size();
    line_col(origin, &t.line, &t.column);
    tokens_.push_back(std::move(t));
  }

  void line_col(size_t offset, int* line, int* column) const {
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < offset && i < source_.size(); ++i) {
      if (source_[i] == '\n') {
        ++*line;
        *column = 1;
      } else if ((static_cast<unsigned char>(source_[i]) & 0xC0) != 0x80) {
        ++*column;
      }
    }
  }

  Tok last() const { return tokens_.empty() ? Tok::Text : tokens_.back().type; }
  bool after_tag_or_start() const {
    if (tokens_.empty()) return true;
    const Tok t = tokens_.back().type;
    return t == Tok::CloseStatement || t == Tok::CloseExpression || t == Tok::Comment;
  }

  // The reference's consumeWhile: running into the end of the source is an error.
  template <typename P>
  std::string consume_while(P pred) {
    const size_t start = pos_;
    while (pos_ < n_ && pred(s_[pos_]))
      if (++pos_ >= n_) fail(pos_, "Unexpected end of input");
    return s_.substr(start, pos_ - start);
  }

  void strip_trailing_text() {
    if (tokens_.empty() || tokens_.back().type != Tok::Text) return;
    tokens_.back().value = js_trim_end(tokens_.back().value);
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
  void skip_leading_space() {
    while (size_t w = js_space_at(s_, pos_)) pos_ += w;
  }

  void step() {
    if (after_tag_or_start()) {
      size_t end = pos_;
      for (;;) {
        end = s_.find('{', end);
        if (end == std::string::npos) {
          end = n_;
          break;
        }
        const char next = end + 1 < n_ ? s_[end + 1] : '\0';
        if (next == '%' || next == '{' || next == '#') break;
        ++end;
      }
      if (end > pos_) {
        push(Tok::Text, s_.substr(pos_, end - pos_), pos_);
        pos_ = end;
        return;
      }
    }
    if (s_[pos_] == '{') {
      const char next = pos_ + 1 < n_ ? s_[pos_ + 1] : '\0';
      if (next == '#') return comment();
      if (pos_ + 2 < n_ && s_[pos_ + 2] == '-' && (next == '%' || next == '{')) {
        strip_trailing_text();
        push(next == '%' ? Tok::OpenStatement : Tok::OpenExpression, next == '%' ? "{%" : "{{", pos_);
        if (next == '{') depth_ = 0;
        pos_ += 3;
        return;
      }
    }
    while (size_t w = js_space_at(s_, pos_))
      if ((pos_ += w) >= n_) fail(pos_, "Unexpected end of input");
    const char c = s_[pos_];
    if (c == '-' && pos_ + 2 < n_ && s_[pos_ + 2] == '}' && (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '}')) {
      const bool stmt = s_[pos_ + 1] == '%';
      push(stmt ? Tok::CloseStatement : Tok::CloseExpression, stmt ? "%}" : "}}", pos_);
      pos_ += 3;
      skip_leading_space();
      return;
    }
    if (c == '-' || c == '+') {
      const Tok lt = last();
      if (tokens_.empty() || lt == Tok::Text) fail(pos_, std::string("Unexpected character: ") + c);
      if (lt != Tok::Identifier && lt != Tok::NumericLiteral && lt != Tok::StringLiteral && lt != Tok::CloseParen &&
          lt != Tok::CloseSquareBracket) {
        const size_t start = pos_++;
        std::string num = consume_while(is_digit);
        if (!num.empty() && pos_ + 1 < n_ && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
          ++pos_;
          num += "." + consume_while(is_digit);
        }
        push(num.empty() ? Tok::UnaryOperator : Tok::NumericLiteral, std::string(1, c) + num, start);
        return;
      }
    }
    if (symbol()) return;
    if (c == '\'' || c == '"') {
      const size_t start = pos_++;
      std::string str = string_body(c);
      ++pos_;
      push(Tok::StringLiteral, std::move(str), start);
      return;
    }
    if (is_digit(c)) {
      const size_t start = pos_;
      std::string num = consume_while(is_digit);
      if (last() != Tok::Dot && pos_ + 1 < n_ && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
        ++pos_;
        num += "." + consume_while(is_digit);
      }
      push(Tok::NumericLiteral, std::move(num), start);
      return;
    }
    if (is_word(c)) {
      const size_t start = pos_;
      push(Tok::Identifier, consume_while(is_word), start);
      return;
    }
    std::string ch;
    utf16_at(std::string_view(s_).substr(pos_), 0, &ch);
    fail(pos_, "Unexpected character: " + ch);
  }

  bool symbol() {
    struct Rule {
      const char* seq;
      Tok type;
    };
    static const Rule rules[] = {
        {"{%", Tok::OpenStatement}, {"%}", Tok::CloseStatement}, {"{{", Tok::OpenExpression},
        {"}}", Tok::CloseExpression}, {"(", Tok::OpenParen}, {")", Tok::CloseParen},
        {"{", Tok::OpenCurlyBracket}, {"}", Tok::CloseCurlyBracket}, {"[", Tok::OpenSquareBracket},
        {"]", Tok::CloseSquareBracket}, {",", Tok::Comma}, {".", Tok::Dot},
        {":", Tok::Colon}, {"|", Tok::Pipe}, {"<=", Tok::ComparisonBinaryOperator},
        {">=", Tok::ComparisonBinaryOperator}, {"==", Tok::ComparisonBinaryOperator},
        {"!=", Tok::ComparisonBinaryOperator}, {"<", Tok::ComparisonBinaryOperator},
        {">", Tok::ComparisonBinaryOperator}, {"+", Tok::AdditiveBinaryOperator},
        {"-", Tok::AdditiveBinaryOperator}, {"~", Tok::AdditiveBinaryOperator},
        {"**", Tok::ExponentiationBinaryOperator}, {"*", Tok::MultiplicativeBinaryOperator},
        {"//", Tok::MultiplicativeBinaryOperator}, {"/", Tok::MultiplicativeBinaryOperator},
        {"%", Tok::MultiplicativeBinaryOperator}, {"=", Tok::Equals},
    };
    for (const Rule& r : rules) {
      const std::string seq = r.seq;
      if (seq == "}}" && depth_ > 0) continue;  // closes a dict literal, not the expression
      if (s_.compare(pos_, seq.size(), seq) != 0) continue;
      push(r.type, seq, pos_);
      if (r.type == Tok::OpenExpression) depth_ = 0;
      if (r.type == Tok::OpenCurlyBracket) ++depth_;
      if (r.type == Tok::CloseCurlyBracket) --depth_;
      pos_ += seq.size();
      return true;
    }
    return false;
  }

  std::string string_body(char quote) {
    std::string out;
    unsigned pending_high = 0;  // a \uD8xx waiting for its low surrogate
    auto flush = [&] {
      if (pending_high) utf8_append(out, pending_high);
      pending_high = 0;
    };
    size_t start = pos_;
    for (;;) {
      if (pos_ >= n_) fail(pos_, "Unexpected end of input");
      const char c = s_[pos_];
      if (c == quote) break;
      ++pos_;
      if (c != '\\') continue;
      if (pos_ - 1 > start) flush();
      out += s_.substr(start, pos_ - 1 - start);
      if (pos_ >= n_) fail(pos_, "Unexpected end of input");
      const char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        const size_t len = e == 'x' ? 2 : 4;
        const std::string hex = s_.substr(pos_, len);
        bool ok = hex.size() == len;
        for (char h : hex) ok = ok && std::isxdigit(static_cast<unsigned char>(h));
        if (!ok) fail(pos_, std::string("Invalid hexadecimal escape sequence: \\") + e + hex);
        const unsigned unit = std::stoul(hex, nullptr, 16);
        pos_ += len;
        if (unit >= 0xDC00 && unit <= 0xDFFF && pending_high) {
          utf8_append(out, 0x10000 + ((pending_high - 0xD800) << 10) + (unit - 0xDC00));
          pending_high = 0;
        } else {
          flush();
          if (unit >= 0xD800 && unit <= 0xDBFF)
            pending_high = unit;
          else
            utf8_append(out, unit);
        }
      } else {
        flush();
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          default: fail(pos_ - 1, std::string("Unexpected escaped character: ") + e);
        }
      }
      start = pos_;
    }
    flush();
    return out + s_.substr(start, pos_ - start);
  }

  void comment() {
    const size_t open = pos_;
    pos_ += 2;
    const bool strip_before = pos_ < n_ && s_[pos_] == '-';
    if (strip_before) ++pos_;
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail(open, "Missing end of comment tag");
    std::string text = s_.substr(pos_, end - pos_);
    const bool strip_after = !text.empty() && text.back() == '-';
    if (strip_after) text.pop_back();
    if (strip_before) strip_trailing_text();
    push(Tok::Comment, std::move(text), open);
    pos_ = end + 2;
    if (strip_after) skip_leading_space();
  }

  const std::string& source_;
  Mapped m_;
  const std::string& s_;
  size_t n_;
  size_t pos_ = 0;
  int depth_ = 0;  // open curly brackets inside the current {{ }}
  std::vector<Token> tokens_;
};

}  // namespace

const char* tok_name(Tok t) {
  static const char* names[] = {"Text", "NumericLiteral", "StringLiteral", "Identifier", "Equals", "OpenParen",
                                "CloseParen", "OpenStatement", "CloseStatement", "OpenExpression", "CloseExpression",
                                "OpenSquareBracket", "CloseSquareBracket", "OpenCurlyBracket", "CloseCurlyBracket",
                                "Comma", "Dot", "Colon", "Pipe", "AdditiveBinaryOperator",
                                "MultiplicativeBinaryOperator", "ExponentiationBinaryOperator",
                                "ComparisonBinaryOperator", "UnaryOperator", "Comment"};
  return names[static_cast<int>(t)];
}

std::string location(const std::string& source, size_t offset) {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
}

std::vector<Token> tokenize(const std::string& source) { return Lexer(source, preprocess(source)).run(); }

}  // namespace bonfire::chat_template
