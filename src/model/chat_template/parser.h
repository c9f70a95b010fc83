// Tokens to a template tree, with the reference's grammar and precedence
// (loosest first): `a if c else b`, or, and, not, comparisons and `in`,
// + - ~, * / // %, **, `is` tests, `|` filters, unary signs, then calls,
// member access and literals. Beyond the reference it accepts a test with an
// argument (`x is in y`, `x is equalto(3)`), as Jinja does.
#pragma once
#include <vector>

#include "model/chat_template/ast.h"
#include "model/chat_template/lexer.h"

namespace bonfire::chat_template {

// Throws bonfire::Error naming the line and column on a syntax error.
NodeList parse(const std::vector<Token>& tokens);

}  // namespace bonfire::chat_template
