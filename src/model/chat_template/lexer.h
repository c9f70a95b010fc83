// Template source to tokens, the way the reference lexes: the source is first
// preprocessed as transformers sets Jinja up (one trailing newline dropped,
// lstrip_blocks, trim_blocks, {% generation %} markers removed), then split
// into text and tag tokens, applying `-` whitespace control. Every token keeps
// its line and column in the original source for error messages.
#pragma once
#include <string>
#include <vector>

namespace bonfire::chat_template {

enum class Tok {
  Text,
  NumericLiteral,
  StringLiteral,
  Identifier,
  Equals,
  OpenParen,
  CloseParen,
  OpenStatement,
  CloseStatement,
  OpenExpression,
  CloseExpression,
  OpenSquareBracket,
  CloseSquareBracket,
  OpenCurlyBracket,
  CloseCurlyBracket,
  Comma,
  Dot,
  Colon,
  Pipe,
  AdditiveBinaryOperator,        // + - ~
  MultiplicativeBinaryOperator,  // * / // %
  ExponentiationBinaryOperator,  // **
  ComparisonBinaryOperator,      // < > <= >= == !=
  UnaryOperator,                 // a sign that is not part of a number
  Comment,
};

struct Token {
  Tok type;
  std::string value;
  int line = 0, column = 0;
};

const char* tok_name(Tok t);

// Throws bonfire::Error naming the line and column on a lexical error.
std::vector<Token> tokenize(const std::string& source);

// "line L, column C: " prefix for errors at a byte offset of `source`.
std::string location(const std::string& source, size_t offset);

}  // namespace bonfire::chat_template
