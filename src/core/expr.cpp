#include "core/expr.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/expr_node.h"
#include "core/json_parse.h"

namespace bonfire {

using json = nlohmann::json;

using namespace expr_detail;

namespace {

struct Token {
  enum Type { Num, Str, Ident, Op, End } type;
  std::string text;
  double num = 0;
  size_t pos = 0;
  size_t end = 0;  // one past the token's last character
};

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace((unsigned char)c)) {
      ++i;
      continue;
    }
    Token t;
    t.pos = i;
    if (std::isdigit((unsigned char)c) || (c == '.' && i + 1 < s.size() && std::isdigit((unsigned char)s[i + 1]))) {
      size_t used = 0;
      try {
        t.num = std::stod(std::string(s.substr(i)), &used);
      } catch (...) {
        expr_error(s, i, "bad number");
      }
      t.type = Token::Num;
      i += used;
    } else if (std::isalpha((unsigned char)c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) ++j;
      t.type = Token::Ident;
      t.text = std::string(s.substr(i, j - i));
      i = j;
    } else if (c == '"' || c == '\'') {
      size_t j = i + 1;
      std::string v;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) ++j;
        v += s[j++];
      }
      if (j >= s.size()) expr_error(s, i, "unterminated string");
      t.type = Token::Str;
      t.text = v;
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "&&", "||"};
      t.type = Token::Op;
      for (const char* op : two)
        if (s.substr(i, 2) == op) t.text = op;
      if (t.text.empty()) {
        if (std::string_view("+-*/%<>()[],.!?:").find(c) == std::string_view::npos)
          expr_error(s, i, std::string("unexpected character '") + c + "'");
        t.text = std::string(1, c);
      }
      i += t.text.size();
    }
    t.end = i;
    out.push_back(t);
  }
  out.push_back({Token::End, "", 0, s.size(), s.size()});
  return out;
}

// How deep an expression may nest: parentheses, unary operators, and chains
// of binary operators all count. The parser, the evaluators and the tree's
// destructor recurse once per level, so an unbounded depth ("------...x",
// "((((...", "1+1+...+1") overflows the stack (found by fuzz_graph); real
// expressions nest a few levels.
constexpr int kMaxExprDepth = 200;

class Parser {
 public:
  Parser(std::string_view src) : src_(src), toks_(tokenize(src)) {}

  NodeP parse_all() {
    NodeP n = ternary();
    if (peek().type != Token::End) fail("unexpected '" + peek().text + "'");
    return n;
  }

 private:
  const Token& peek() const { return toks_[at_]; }
  void advance() { last_end_ = toks_[at_++].end; }
  bool is_op(const char* op) const { return peek().type == Token::Op && peek().text == op; }
  bool is_word(const char* w) const { return peek().type == Token::Ident && peek().text == w; }
  [[noreturn]] void fail(const std::string& what) const {
    expr_error(src_, peek().pos, peek().type == Token::End ? "unexpected end" : what);
  }
  void expect(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    advance();
  }
  NodeP make(Node::Kind k, size_t pos, std::string text, std::vector<NodeP> kids) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->pos = pos;
    n->text = std::move(text);
    n->kids = std::move(kids);
    n->begin = pos;
    for (const auto& k : n->kids) n->begin = std::min(n->begin, k->begin);
    n->end = last_end_;
    for (const auto& k : n->kids) n->depth = std::max(n->depth, k->depth + 1);
    if (n->depth > kMaxExprDepth) expr_error(src_, pos, "nested more than " + std::to_string(kMaxExprDepth) + " deep");
    return n;
  }
  // Counts the parser's own recursion (ternary, not, unary), which may go
  // deeper than any node yet made: "((((((" makes none. A level of
  // parentheses passes all three.
  struct Nest {
    explicit Nest(Parser* p) : p(p) {
      if (++p->nest_ > 3 * kMaxExprDepth) p->fail("nested more than " + std::to_string(kMaxExprDepth) + " deep");
    }
    ~Nest() { --p->nest_; }
    Parser* p;
  };

  NodeP ternary() {
    const Nest nest(this);
    NodeP a = or_();
    if (is_word("if")) {
      const size_t pos = peek().pos;
      advance();
      NodeP cond = or_();
      if (!is_word("else")) fail("expected 'else'");
      advance();
      NodeP b = ternary();
      return make(Node::Ternary, pos, "", {cond, a, b});
    }
    if (is_op("?")) {  // C-style too: C ? A : B
      const size_t pos = peek().pos;
      advance();
      NodeP x = ternary();
      expect(":");
      NodeP y = ternary();
      return make(Node::Ternary, pos, "", {a, x, y});
    }
    return a;
  }
  NodeP or_() {
    NodeP a = and_();
    while (is_word("or") || is_op("||")) {
      const size_t pos = peek().pos;
      advance();
      a = make(Node::Binary, pos, "or", {a, and_()});
    }
    return a;
  }
  NodeP and_() {
    NodeP a = not_();
    while (is_word("and") || is_op("&&")) {
      const size_t pos = peek().pos;
      advance();
      a = make(Node::Binary, pos, "and", {a, not_()});
    }
    return a;
  }
  NodeP not_() {
    const Nest nest(this);
    if (is_word("not") || is_op("!")) {
      const size_t pos = peek().pos;
      advance();
      return make(Node::Unary, pos, "not", {not_()});
    }
    return cmp();
  }
  NodeP cmp() {
    NodeP a = add();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (is_op(op)) {
        const size_t pos = peek().pos;
        advance();
        NodeP b = add();
        a = make(Node::Binary, pos, op, {a, b});
        return a;  // comparisons do not chain
      }
    }
    return a;
  }
  NodeP add() {
    NodeP a = mul();
    while (is_op("+") || is_op("-")) {
      const Token t = peek();
      advance();
      a = make(Node::Binary, t.pos, t.text, {a, mul()});
    }
    return a;
  }
  NodeP mul() {
    NodeP a = unary();
    while (is_op("*") || is_op("/") || is_op("%")) {
      const Token t = peek();
      advance();
      a = make(Node::Binary, t.pos, t.text, {a, unary()});
    }
    return a;
  }
  NodeP unary() {
    const Nest nest(this);
    if (is_op("-") || is_op("+")) {
      const Token t = peek();
      advance();
      return make(Node::Unary, t.pos, t.text, {unary()});
    }
    return postfix();
  }
  NodeP postfix() {
    NodeP a = primary();
    for (;;) {
      const size_t pos = peek().pos;
      if (is_op(".")) {
        advance();
        if (peek().type != Token::Ident) fail("expected a name after '.'");
        const std::string member = peek().text;
        advance();
        a = make(Node::Member, pos, member, {a});
      } else if (is_op("[")) {
        advance();
        NodeP i = ternary();
        expect("]");
        a = make(Node::Index, pos, "", {a, i});
      } else if (is_op("(")) {
        if (a->kind != Node::Name && a->kind != Node::Member) fail("only functions can be called");
        advance();
        std::vector<NodeP> kids{a};
        if (!is_op(")")) {
          kids.push_back(ternary());
          while (is_op(",")) {
            advance();
            kids.push_back(ternary());
          }
        }
        expect(")");
        a = make(Node::Call, pos, "", kids);
      } else {
        return a;
      }
    }
  }
  NodeP primary() {
    const Token t = peek();
    if (t.type == Token::Num || t.type == Token::Str) {
      advance();
      auto n = make(Node::Literal, t.pos, "", {});
      const_cast<Node&>(*n).value = t.type == Token::Num ? json(t.num) : json(t.text);
      return n;
    }
    if (t.type == Token::Ident) {
      advance();
      if (t.text == "true" || t.text == "false" || t.text == "null") {
        auto n = make(Node::Literal, t.pos, "", {});
        const_cast<Node&>(*n).value = t.text == "null" ? json() : json(t.text == "true");
        return n;
      }
      return make(Node::Name, t.pos, t.text, {});
    }
    if (is_op("(")) {
      advance();
      NodeP n = ternary();
      expect(")");
      auto& m = const_cast<Node&>(*n);  // the span includes the parentheses
      m.begin = t.pos;
      m.end = last_end_;
      return n;
    }
    if (is_op("[")) {
      advance();
      std::vector<NodeP> kids;
      if (!is_op("]")) {
        kids.push_back(ternary());
        while (is_op(",")) {
          advance();
          kids.push_back(ternary());
        }
      }
      expect("]");
      return make(Node::List, t.pos, "", kids);
    }
    fail("unexpected '" + t.text + "'");
  }

  std::string_view src_;
  std::vector<Token> toks_;
  size_t at_ = 0;
  size_t last_end_ = 0;
  int nest_ = 0;
};

class Evaluator {
 public:
  Evaluator(std::string_view src, const Expr::Lookup& lookup) : src_(src), lookup_(lookup) {}

  json eval(const Node& n) {
    switch (n.kind) {
      case Node::Literal: return n.value;
      case Node::Name: {
        auto v = lookup_ ? lookup_(n.text) : std::nullopt;
        if (!v) expr_error(src_, n.pos, "unknown name '" + n.text + "'");
        return *v;
      }
      case Node::Member: {
        // A dotted name ("constants.workgroupSize") is offered to the lookup
        // whole first, so the caller can compute it lazily.
        const std::string path = path_of(n);
        if (!path.empty() && lookup_)
          if (auto v = lookup_(path)) return *v;
        json obj = eval(*n.kids[0]);
        if (!obj.is_object() || !obj.contains(n.text))
          expr_error(src_, path.empty() ? n.pos : n.begin,
                     path.empty() ? "no member '" + n.text + "'" : "unknown name '" + path + "'");
        return obj[n.text];
      }
      case Node::Index: {
        json obj = eval(*n.kids[0]);
        json idx = eval(*n.kids[1]);
        if (obj.is_array() && idx.is_number()) {
          double i = idx.get<double>();
          if (i < 0) i += (double)obj.size();
          if (i >= 0 && i < (double)obj.size() && i == std::floor(i)) return obj[(size_t)i];
          expr_error(src_, n.pos, "index out of range");
        }
        if (obj.is_object() && idx.is_string() && obj.contains(idx.get<std::string>()))
          return obj[idx.get<std::string>()];
        expr_error(src_, n.pos, "cannot index this value");
      }
      case Node::List: {
        json out = json::array();
        for (const auto& k : n.kids) out.push_back(eval(*k));
        return out;
      }
      case Node::Call: return call(n);
      case Node::Unary: {
        json v = eval(*n.kids[0]);
        if (n.text == "not") return !truthy(v, n.pos);
        const double x = number(v, n.pos);
        return n.text == "-" ? -x : x;
      }
      case Node::Binary: return binary(n);
      case Node::Ternary: return truthy(eval(*n.kids[0]), n.pos) ? eval(*n.kids[1]) : eval(*n.kids[2]);
    }
    return json();
  }

  double number(const json& v, size_t pos) {
    if (v.is_number()) return v.get<double>();
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    // dump_json, not dump(): a string from the source or a bind value may be
    // invalid UTF-8, and dump() throws json::type_error on it, escaping the
    // promised Error(BadGraph) (found by fuzz_graph).
    expr_error(src_, pos, "expected a number, got " + dump_json(v));
  }

 private:
  bool truthy(const json& v, size_t pos) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_null()) return false;
    expr_error(src_, pos, "expected a condition, got " + dump_json(v));
  }

  json binary(const Node& n) {
    const std::string& op = n.text;
    if (op == "and") return truthy(eval(*n.kids[0]), n.pos) && truthy(eval(*n.kids[1]), n.pos);
    if (op == "or") return truthy(eval(*n.kids[0]), n.pos) || truthy(eval(*n.kids[1]), n.pos);
    json a = eval(*n.kids[0]);
    json b = eval(*n.kids[1]);
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "+" && a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
    if ((op == "<" || op == "<=" || op == ">" || op == ">=") && a.is_string() && b.is_string()) {
      const int c = a.get<std::string>().compare(b.get<std::string>());
      return op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    const double x = number(a, n.pos), y = number(b, n.pos);
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/" || op == "%") {
      if (y == 0) expr_error(src_, n.pos, "division by zero");
      return op == "/" ? x / y : fn_mod(x, y);
    }
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  }

  json call(const Node& n) {
    const Node& callee = *n.kids[0];
    std::vector<json> args;
    if (callee.kind == Node::Member) args.push_back(eval(*callee.kids[0]));  // obj.f(x) is f(obj, x)
    for (size_t i = 1; i < n.kids.size(); ++i) args.push_back(eval(*n.kids[i]));
    const std::string& f = callee.text;
    auto want = [&](size_t k) {
      if (args.size() != k)
        expr_error(src_, n.pos, f + "() takes " + std::to_string(k) + " arguments, got " + std::to_string(args.size()));
    };
    auto num = [&](size_t i) { return number(args[i], n.pos); };
    auto shape_of = [&](const json& v) {
      if (!v.is_array()) expr_error(src_, n.pos, f + "() needs a shape (a list of numbers)");
      return v;
    };
    if (f == "min" || f == "max") {
      std::vector<json> xs = args.size() == 1 && args[0].is_array() ? std::vector<json>(args[0].begin(), args[0].end()) : args;
      if (xs.empty()) expr_error(src_, n.pos, f + "() needs arguments");
      double r = number(xs[0], n.pos);
      for (const auto& x : xs) r = f == "min" ? std::fmin(r, number(x, n.pos)) : std::fmax(r, number(x, n.pos));
      return r;
    }
    if (f == "floor") return want(1), std::floor(num(0));
    if (f == "ceil") return want(1), std::ceil(num(0));
    if (f == "round") return want(1), std::round(num(0));
    if (f == "abs") return want(1), std::fabs(num(0));
    if (f == "sqrt") return want(1), std::sqrt(num(0));
    if (f == "exp") return want(1), std::exp(num(0));
    if (f == "log") return want(1), std::log(num(0));
    if (f == "pow") return want(2), std::pow(num(0), num(1));
    if (f == "rsqrt") return want(1), fn_rsqrt(num(0));
    if (f == "tanh") return want(1), std::tanh(num(0));
    if (f == "sigmoid") return want(1), fn_sigmoid(num(0));
    if (f == "silu") return want(1), fn_silu(num(0));
    if (f == "softplus") return want(1), fn_softplus(num(0));
    if (f == "relu") return want(1), fn_relu(num(0));
    if (f == "ceilDiv") {
      want(2);
      if (num(1) == 0) expr_error(src_, n.pos, "division by zero");
      return std::ceil(num(0) / num(1));
    }
    if (f == "pow2ceil") return want(1), fn_pow2ceil(num(0));
    if (f == "has") {
      want(2);
      if (args[0].is_object()) return args[1].is_string() && args[0].contains(args[1].get<std::string>());
      if (args[0].is_array()) return std::find(args[0].begin(), args[0].end(), args[1]) != args[0].end();
      return false;
    }
    if (f == "dim") {
      want(2);
      json s = shape_of(args[0]);
      double i = num(1);
      if (i < 0) i += (double)s.size();
      if (i < 0 || i >= (double)s.size()) expr_error(src_, n.pos, "dim() index out of range");
      return s[(size_t)i];
    }
    if (f == "numel") {
      want(1);
      double p = 1;
      for (const auto& d : shape_of(args[0])) p *= number(d, n.pos);
      return p;
    }
    if (f == "len") {
      want(1);
      if (args[0].is_string()) return (double)args[0].get<std::string>().size();
      return (double)args[0].size();
    }
    expr_error(src_, n.pos, "unknown function '" + f + "'");
  }

  std::string_view src_;
  const Expr::Lookup& lookup_;
};

void collect_names(const Node& n, std::set<std::string>& out) {
  if (n.kind == Node::Name) out.insert(n.text);
  for (size_t i = 0; i < n.kids.size(); ++i) {
    // A called function's name is not a value the expression reads.
    if (n.kind == Node::Call && i == 0 && n.kids[0]->kind == Node::Name) continue;
    collect_names(*n.kids[i], out);
  }
}

void collect_paths(const Node& n, std::map<std::string, size_t>& out) {
  if (const std::string p = path_of(n); !p.empty()) {
    out.emplace(p, n.begin);
    return;
  }
  for (size_t i = 0; i < n.kids.size(); ++i) {
    if (n.kind == Node::Call && i == 0) {  // f(x) reads no f; obj.f(x) reads obj
      if (n.kids[0]->kind == Node::Member) collect_paths(*n.kids[0]->kids[0], out);
      continue;
    }
    collect_paths(*n.kids[i], out);
  }
}

void collect_and_terms(const Node& n, const std::string& src, std::vector<std::string>& out) {
  if (n.kind == Node::Binary && n.text == "and") {
    collect_and_terms(*n.kids[0], src, out);
    collect_and_terms(*n.kids[1], src, out);
  } else {
    out.push_back(src.substr(n.begin, n.end - n.begin));
  }
}

}  // namespace

Expr Expr::parse(std::string_view source) {
  Expr e;
  e.source_ = std::string(source);
  e.root_ = Parser(e.source_).parse_all();
  return e;
}

json Expr::eval(const Lookup& lookup) const { return Evaluator(source_, lookup).eval(*root_); }

double Expr::eval_number(const Lookup& lookup) const {
  Evaluator ev(source_, lookup);
  const double v = ev.number(ev.eval(*root_), 0);
  if (!std::isfinite(v)) expr_error(source_, 0, "the value is not finite");
  return v;
}

std::map<std::string, size_t> Expr::paths() const {
  std::map<std::string, size_t> out;
  collect_paths(*root_, out);
  return out;
}

std::vector<std::string> Expr::and_terms() const {
  std::vector<std::string> out;
  collect_and_terms(*root_, source_, out);
  return out;
}

std::set<std::string> Expr::names() const {
  std::set<std::string> out;
  collect_names(*root_, out);
  return out;
}

}  // namespace bonfire
