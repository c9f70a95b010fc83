#include "model/chat_template/parser.h"

#include <cstdlib>
#include <initializer_list>
#include <set>

#include "core/error.h"

namespace bonfire::chat_template {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  NodeList program() {
    NodeList body;
    while (i_ < t_.size()) body.push_back(any());
    return body;
  }

 private:
  [[noreturn]] void fail_at(int line, int column, const std::string& msg) const {
    throw Error(ErrorCode::BadGraph, "chat template syntax error at line " + std::to_string(line) + ", column " +
                                         std::to_string(column) + ": " + msg);
  }
  [[noreturn]] void fail(const std::string& msg) const {
    if (i_ < t_.size()) fail_at(t_[i_].line, t_[i_].column, msg);
    const Token& last = t_.back();
    fail_at(last.line, last.column, msg + " (at the end of the template)");
  }
  // A block that never closes: name the line that opened it.
  [[noreturn]] void unclosed(const Token& open, const std::string& what, const std::string& end) const {
    fail_at(open.line, open.column, "'" + what + "' is never closed: expected {% " + end + " %}");
  }

  bool at_end() const { return i_ >= t_.size(); }
  const Token& peek() const {
    if (at_end()) fail("unexpected end of template");
    return t_[i_];
  }
  bool is(Tok type, size_t ahead = 0) const { return i_ + ahead < t_.size() && t_[i_ + ahead].type == type; }
  bool is_ident(const char* name, size_t ahead = 0) const {
    return is(Tok::Identifier, ahead) && t_[i_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::OpenStatement) || !is(Tok::Identifier, 1)) return false;
    for (const char* n : names)
      if (t_[i_ + 1].value == n) return true;
    return false;
  }
  const Token& expect(Tok type, const std::string& what) {
    if (at_end()) fail("expected " + what);
    if (t_[i_].type != type) fail("expected " + what + ", got " + describe(t_[i_]));
    return t_[i_++];
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) fail(std::string("expected '") + name + "'");
    ++i_;
  }
  static std::string describe(const Token& t) {
    if (t.type == Tok::Identifier || t.type == Tok::NumericLiteral) return "'" + t.value + "'";
    return tok_name(t.type);
  }
  NodePtr node(NodeKind k, const Token& at) { return std::make_unique<Node>(k, at.line); }

  // Parses a block body until one of `ends` ({% name ... %}); `open` names the
  // block in the error when the template ends first.
  NodeList block_until(std::initializer_list<const char*> ends, const Token& open, const std::string& what,
                       const std::string& end_tag) {
    NodeList body;
    while (!is_statement(ends)) {
      if (at_end()) unclosed(open, what, end_tag);
      body.push_back(any());
    }
    return body;
  }

  // Bounds recursion so a hostile template cannot overflow the stack.
  struct Nest {
    Parser* p;
    explicit Nest(Parser* p) : p(p) {
      if (++p->depth_ > 200) p->fail("template nested too deeply");
    }
    ~Nest() { --p->depth_; }
  };

  NodePtr any() {
    Nest nest(this);
    const Token& t = peek();
    switch (t.type) {
      case Tok::Comment: {
        ++i_;
        auto n = node(NodeKind::Comment, t);
        n->name = t.value;
        return n;
      }
      case Tok::Text: {
        ++i_;
        auto n = node(NodeKind::Text, t);
        n->name = t.value;
        return n;
      }
      case Tok::OpenStatement: return statement();
      case Tok::OpenExpression: {
        ++i_;
        auto e = expression();
        expect(Tok::CloseExpression, "'}}'");
        return e;
      }
      default: fail(std::string("Unexpected token type: ") + tok_name(t.type));
    }
  }

  void end_tag(const char* name) {
    expect(Tok::OpenStatement, "'{%'");
    expect_ident(name);
    expect(Tok::CloseStatement, "'%}'");
  }

  NodePtr statement() {
    const Token& open = t_[i_++];
    if (at_end()) fail("unexpected end of template");
    if (!is(Tok::Identifier)) fail(std::string("Unknown statement, got ") + tok_name(peek().type));
    const std::string name = t_[i_].value;
    if (name == "set") {
      ++i_;
      return set_statement(open);
    }
    if (name == "if") {
      ++i_;
      auto n = if_statement(open);
      end_tag("endif");
      return n;
    }
    if (name == "for") {
      ++i_;
      return for_statement(open);
    }
    if (name == "macro") {
      ++i_;
      auto n = node(NodeKind::Macro, open);
      auto id = primary();
      if (id->kind != NodeKind::Identifier) fail("expected an identifier after 'macro'");
      n->name = id->name;
      n->items = args(true);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endmacro"}, open, "macro", "endmacro");
      end_tag("endmacro");
      return n;
    }
    if (name == "call") {
      ++i_;
      auto n = node(NodeKind::CallBlock, open);
      if (is(Tok::OpenParen)) n->items = args(true);
      const Token& at = peek();
      auto callee = primary();
      if (callee->kind != NodeKind::Identifier) fail("expected an identifier after 'call'");
      auto call = node(NodeKind::Call, at);
      call->a = std::move(callee);
      call->items = args(false);
      n->a = std::move(call);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endcall"}, open, "call", "endcall");
      end_tag("endcall");
      return n;
    }
    if (name == "break" || name == "continue") {
      ++i_;
      expect(Tok::CloseStatement, "'%}'");
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, open);
    }
    if (name == "filter") {
      ++i_;
      auto n = node(NodeKind::FilterBlock, open);
      const Token& at = peek();
      auto f = primary();
      if (f->kind == NodeKind::Identifier && is(Tok::OpenParen)) f = call(std::move(f), at);
      n->a = std::move(f);
      expect(Tok::CloseStatement, "'%}'");
      n->body = block_until({"endfilter"}, open, "filter", "endfilter");
      end_tag("endfilter");
      return n;
    }
    fail("Unknown statement type: " + name);
  }

  NodePtr set_statement(const Token& open) {
    auto n = node(NodeKind::Set, open);
    n->a = sequence(false);
    if (is(Tok::Equals)) {
      ++i_;
      n->b = sequence(false);
    } else {
      expect(Tok::CloseStatement, "'=' or '%}'");
      n->body = block_until({"endset"}, open, "set", "endset");
      expect(Tok::OpenStatement, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::CloseStatement, "'%}'");
    return n;
  }

  NodePtr if_statement(const Token& open) {
    auto n = node(NodeKind::If, open);
    n->a = expression();
    expect(Tok::CloseStatement, "'%}'");
    n->body = block_until({"elif", "else", "endif"}, open, "if", "endif");
    if (is_statement({"elif"})) {
      const Token& elif = t_[i_];
      i_ += 2;
      n->alt.push_back(if_statement(elif));
    } else if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = block_until({"endif"}, open, "if", "endif");
    }
    return n;
  }

  NodePtr for_statement(const Token& open) {
    auto n = node(NodeKind::For, open);
    n->a = sequence(true);
    if (n->a->kind != NodeKind::Identifier && n->a->kind != NodeKind::TupleLit)
      fail("Expected identifier/tuple for the loop variable");
    if (!is_ident("in")) fail("Expected `in` keyword following loop variable");
    ++i_;
    n->b = expression();
    expect(Tok::CloseStatement, "'%}'");
    n->body = block_until({"endfor", "else"}, open, "for", "endfor");
    if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = block_until({"endfor"}, open, "for", "endfor");
    }
    end_tag("endfor");
    return n;
  }

  // `a, b, c` as a tuple, or a single expression.
  NodePtr sequence(bool primary_only) {
    const Token& at = peek();
    auto first = primary_only ? primary() : expression();
    if (!is(Tok::Comma)) return first;
    auto tuple = node(NodeKind::TupleLit, at);
    tuple->items.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++i_;
      tuple->items.push_back(primary_only ? primary() : expression());
    }
    return tuple;
  }

  NodePtr expression() {
    Nest nest(this);
    const Token& at = peek();
    auto a = logical_or();
    if (!is_ident("if")) return a;
    ++i_;
    auto test = logical_or();
    if (is_ident("else")) {
      ++i_;
      auto n = node(NodeKind::Ternary, at);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = expression();
      return n;
    }
    auto n = node(NodeKind::Select, at);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }

  NodePtr binary(const Token& at, std::string op, NodePtr a, NodePtr b) {
    auto n = node(NodeKind::Binary, at);
    n->name = std::move(op);
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }

  NodePtr logical_or() {
    auto left = logical_and();
    while (is_ident("or")) {
      const Token& at = t_[i_++];
      left = binary(at, "or", std::move(left), logical_and());
    }
    return left;
  }
  NodePtr logical_and() {
    auto left = logical_not();
    while (is_ident("and")) {
      const Token& at = t_[i_++];
      left = binary(at, "and", std::move(left), logical_not());
    }
    return left;
  }
  NodePtr logical_not() {
    if (!is_ident("not")) return comparison();
    const Token& at = t_[i_++];
    auto n = node(NodeKind::Unary, at);
    n->name = "not";
    n->a = logical_not();
    return n;
  }
  NodePtr comparison() {
    auto left = additive();
    for (;;) {
      std::string op;
      const Token* at = i_ < t_.size() ? &t_[i_] : nullptr;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_ident("in") || is(Tok::ComparisonBinaryOperator)) {
        op = t_[i_++].value;
      } else {
        return left;
      }
      left = binary(*at, op, std::move(left), additive());
    }
  }
  NodePtr additive() {
    auto left = multiplicative();
    while (is(Tok::AdditiveBinaryOperator)) {
      const Token& at = t_[i_++];
      left = binary(at, at.value, std::move(left), multiplicative());
    }
    return left;
  }
  NodePtr multiplicative() {
    auto left = power();
    while (is(Tok::MultiplicativeBinaryOperator)) {
      const Token& at = t_[i_++];
      left = binary(at, at.value, std::move(left), power());
    }
    return left;
  }
  NodePtr power() {
    auto left = test();
    while (is(Tok::ExponentiationBinaryOperator)) {
      const Token& at = t_[i_++];
      left = binary(at, "**", std::move(left), test());
    }
    return left;
  }

  // Whether the token after a test name starts its argument (`x is in y`).
  // The reference takes no argument there, so any template it accepts has a
  // keyword, a closing bracket or the end of the tag next.
  bool starts_test_argument() const {
    if (at_end()) return false;
    const Token& t = t_[i_];
    static const std::set<std::string> keywords = {"and", "or", "else", "if", "is", "not", "in"};
    switch (t.type) {
      case Tok::NumericLiteral:
      case Tok::StringLiteral:
      case Tok::OpenSquareBracket:
      case Tok::OpenCurlyBracket: return true;
      case Tok::Identifier: return !keywords.count(t.value);
      default: return false;
    }
  }

  NodePtr test() {
    auto operand = filter();
    while (is_ident("is")) {
      const Token& at = t_[i_++];
      auto n = node(NodeKind::Test, at);
      n->flag = is_ident("not");
      if (n->flag) ++i_;
      auto name = primary();
      if (name->kind != NodeKind::Identifier) fail("Expected identifier for the test");
      n->name = name->name;
      if (is(Tok::OpenParen)) {
        n->items = args(false);
      } else if (starts_test_argument()) {
        const Token& arg_at = t_[i_];
        n->items.push_back(member(primary(), arg_at));
      }
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr filter() {
    auto operand = unary_sign();
    while (is(Tok::Pipe)) {
      const Token& at = t_[i_++];
      const Token& name_at = peek();
      auto f = primary();
      if (f->kind != NodeKind::Identifier) fail("Expected identifier for the filter");
      if (is(Tok::OpenParen)) f = call(std::move(f), name_at);
      auto n = node(NodeKind::Filter, at);
      n->a = std::move(operand);
      n->b = std::move(f);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr unary_sign() {
    Nest nest(this);
    if ((is(Tok::UnaryOperator) || is(Tok::AdditiveBinaryOperator)) && (t_[i_].value == "-" || t_[i_].value == "+")) {
      const Token& at = t_[i_++];
      auto n = node(NodeKind::Unary, at);
      n->name = at.value;
      n->a = unary_sign();
      return n;
    }
    const Token& at = peek();
    auto m = member(primary(), at);
    if (is(Tok::OpenParen)) return call(std::move(m), at);
    return m;
  }

  NodePtr call(NodePtr callee, const Token& at) {
    auto n = node(NodeKind::Call, at);
    n->a = std::move(callee);
    n->items = args(false);
    auto m = member(std::move(n), at);
    if (is(Tok::OpenParen)) return call(std::move(m), at);
    return m;
  }

  // A call's arguments, or (parameters=true) a macro's parameter list.
  NodeList args(bool parameters) {
    expect(Tok::OpenParen, "'('");
    NodeList out;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::CloseParen)) {
      if (at_end()) fail("expected ')'");
      const Token& at = t_[i_];
      const bool kw_spread = is(Tok::ExponentiationBinaryOperator);
      const bool spread = is(Tok::MultiplicativeBinaryOperator) && at.value == "*";
      if (parameters && (kw_spread || spread)) fail("Argument unpacking is not allowed in parameter declarations");
      if (kw_spread) {
        ++i_;
        auto n = node(NodeKind::KwSpread, at);
        n->a = expression();
        out.push_back(std::move(n));
        if (is(Tok::Comma)) ++i_;
        if (!is(Tok::CloseParen)) fail("Expected closing parenthesis: `**` must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (spread) {
        if (saw_spread) fail("Only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++i_;
        arg = node(NodeKind::Spread, at);
        arg->a = expression();
      } else {
        arg = expression();
        if (is(Tok::Equals)) {
          ++i_;
          if (arg->kind != NodeKind::Identifier)
            fail(parameters ? "Expected identifier for parameter declaration" : "Expected identifier for keyword argument");
          auto kw = node(NodeKind::KwArg, at);
          kw->name = arg->name;
          kw->a = expression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::Identifier && arg->kind != NodeKind::KwArg)
            fail("Expected identifier for parameter declaration");
          if (!names.insert(arg->name).second) fail("Duplicate parameter name: " + arg->name);
        }
        if (arg->kind == NodeKind::KwArg)
          saw_keyword = true;
        else if (saw_keyword)
          fail(parameters ? "Non-default argument follows default argument"
                          : "Positional arguments must come before keyword arguments");
        else if (saw_spread)
          fail("Positional arguments must not follow `*` argument unpacking");
      }
      out.push_back(std::move(arg));
      if (is(Tok::Comma)) ++i_;
    }
    ++i_;
    return out;
  }

  NodePtr member(NodePtr object, const Token& at) {
    while (is(Tok::Dot) || is(Tok::OpenSquareBracket)) {
      const bool computed = t_[i_++].type == Tok::OpenSquareBracket;
      auto n = node(NodeKind::Member, at);
      n->flag = computed;
      if (computed) {
        n->b = subscript();
        expect(Tok::CloseSquareBracket, "']'");
      } else {
        n->b = primary();
        if (n->b->kind != NodeKind::Identifier && n->b->kind != NodeKind::IntLit)
          fail("Expected identifier or integer following dot operator");
      }
      n->a = std::move(object);
      object = std::move(n);
    }
    return object;
  }

  // What sits between [ and ]: an index or a slice a:b:c.
  NodePtr subscript() {
    const Token& at = peek();
    NodeList parts;
    std::vector<bool> present;
    bool is_slice = false;
    while (!is(Tok::CloseSquareBracket)) {
      if (at_end()) fail("expected ']'");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++i_;
        is_slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::Colon)) {
          ++i_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) fail("Expected at least one argument for member/slice expression");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) fail("Expected 0-3 arguments for slice expression");
    auto n = node(NodeKind::Slice, at);
    n->a = std::move(parts[0]);
    if (parts.size() > 1) n->b = std::move(parts[1]);
    if (parts.size() > 2) n->c = std::move(parts[2]);
    return n;
  }

  NodePtr primary() {
    const Token& t = peek();
    ++i_;
    switch (t.type) {
      case Tok::NumericLiteral: {
        auto n = node(t.value.find('.') != std::string::npos ? NodeKind::FloatLit : NodeKind::IntLit, t);
        n->num = std::strtod(t.value.c_str(), nullptr);
        return n;
      }
      case Tok::StringLiteral: {
        auto n = node(NodeKind::StrLit, t);
        n->name = t.value;
        while (is(Tok::StringLiteral)) n->name += t_[i_++].value;  // 'a' 'b' is 'ab'
        return n;
      }
      case Tok::Identifier: {
        auto n = node(NodeKind::Identifier, t);
        n->name = t.value;
        return n;
      }
      case Tok::OpenParen: {
        auto e = sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenSquareBracket: {
        auto n = node(NodeKind::ArrayLit, t);
        while (!is(Tok::CloseSquareBracket)) {
          if (at_end()) fail("expected ']'");
          n->items.push_back(expression());
          if (is(Tok::Comma)) ++i_;
        }
        ++i_;
        return n;
      }
      case Tok::OpenCurlyBracket: {
        auto n = node(NodeKind::ObjectLit, t);
        while (!is(Tok::CloseCurlyBracket)) {
          if (at_end()) fail("expected '}'");
          n->items.push_back(expression());
          expect(Tok::Colon, "':' between key and value in object literal");
          n->items.push_back(expression());
          if (is(Tok::Comma)) ++i_;
        }
        ++i_;
        return n;
      }
      default: --i_; fail(std::string("Unexpected token: ") + tok_name(t.type));
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

NodeList parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace bonfire::chat_template
