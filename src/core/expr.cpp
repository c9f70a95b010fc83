#include "core/expr.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace bonfire {

using json = nlohmann::json;

struct Expr::Node {
  enum Kind { Literal, Name, Member, Index, Call, List, Unary, Binary, Ternary } kind;
  json value;           // Literal
  std::string text;     // Name, Member (member name), Unary/Binary (operator)
  std::vector<std::shared_ptr<const Node>> kids;
  size_t pos = 0;       // character offset, for errors
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;
using Node = Expr::Node;

// The elementwise functions both evaluators share (IR §10).
double fn_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double fn_silu(double x) { return x / (1.0 + std::exp(-x)); }
double fn_softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }  // torch: threshold 20
double fn_relu(double x) { return x < 0 ? 0.0 : x; }                            // NaN stays NaN
double fn_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double fn_pow2ceil(double x) {
  double p = 1;
  while (p < x) p *= 2;
  return p;
}
double fn_mod(double x, double y) { return x - std::floor(x / y) * y; }  // follows the divisor's sign

[[noreturn]] void expr_error(std::string_view src, size_t pos, const std::string& what) {
  throw Error(ErrorCode::BadGraph,
              "expression \"" + std::string(src) + "\": " + what + " at character " + std::to_string(pos + 1));
}

struct Token {
  enum Type { Num, Str, Ident, Op, End } type;
  std::string text;
  double num = 0;
  size_t pos = 0;
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
    out.push_back(t);
  }
  out.push_back({Token::End, "", 0, s.size()});
  return out;
}

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
  bool is_op(const char* op) const { return peek().type == Token::Op && peek().text == op; }
  bool is_word(const char* w) const { return peek().type == Token::Ident && peek().text == w; }
  [[noreturn]] void fail(const std::string& what) const {
    expr_error(src_, peek().pos, peek().type == Token::End ? "unexpected end" : what);
  }
  void expect(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    ++at_;
  }
  NodeP make(Node::Kind k, size_t pos, std::string text, std::vector<NodeP> kids) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->pos = pos;
    n->text = std::move(text);
    n->kids = std::move(kids);
    return n;
  }

  NodeP ternary() {
    NodeP a = or_();
    if (is_word("if")) {
      const size_t pos = peek().pos;
      ++at_;
      NodeP cond = or_();
      if (!is_word("else")) fail("expected 'else'");
      ++at_;
      NodeP b = ternary();
      return make(Node::Ternary, pos, "", {cond, a, b});
    }
    if (is_op("?")) {  // C-style too: C ? A : B
      const size_t pos = peek().pos;
      ++at_;
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
      ++at_;
      a = make(Node::Binary, pos, "or", {a, and_()});
    }
    return a;
  }
  NodeP and_() {
    NodeP a = not_();
    while (is_word("and") || is_op("&&")) {
      const size_t pos = peek().pos;
      ++at_;
      a = make(Node::Binary, pos, "and", {a, not_()});
    }
    return a;
  }
  NodeP not_() {
    if (is_word("not") || is_op("!")) {
      const size_t pos = peek().pos;
      ++at_;
      return make(Node::Unary, pos, "not", {not_()});
    }
    return cmp();
  }
  NodeP cmp() {
    NodeP a = add();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (is_op(op)) {
        const size_t pos = peek().pos;
        ++at_;
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
      ++at_;
      a = make(Node::Binary, t.pos, t.text, {a, mul()});
    }
    return a;
  }
  NodeP mul() {
    NodeP a = unary();
    while (is_op("*") || is_op("/") || is_op("%")) {
      const Token t = peek();
      ++at_;
      a = make(Node::Binary, t.pos, t.text, {a, unary()});
    }
    return a;
  }
  NodeP unary() {
    if (is_op("-") || is_op("+")) {
      const Token t = peek();
      ++at_;
      return make(Node::Unary, t.pos, t.text, {unary()});
    }
    return postfix();
  }
  NodeP postfix() {
    NodeP a = primary();
    for (;;) {
      const size_t pos = peek().pos;
      if (is_op(".")) {
        ++at_;
        if (peek().type != Token::Ident) fail("expected a name after '.'");
        a = make(Node::Member, pos, peek().text, {a});
        ++at_;
      } else if (is_op("[")) {
        ++at_;
        NodeP i = ternary();
        expect("]");
        a = make(Node::Index, pos, "", {a, i});
      } else if (is_op("(")) {
        if (a->kind != Node::Name && a->kind != Node::Member) fail("only functions can be called");
        ++at_;
        std::vector<NodeP> kids{a};
        if (!is_op(")")) {
          kids.push_back(ternary());
          while (is_op(",")) {
            ++at_;
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
      ++at_;
      auto n = make(Node::Literal, t.pos, "", {});
      const_cast<Node&>(*n).value = t.type == Token::Num ? json(t.num) : json(t.text);
      return n;
    }
    if (t.type == Token::Ident) {
      ++at_;
      if (t.text == "true" || t.text == "false" || t.text == "null") {
        auto n = make(Node::Literal, t.pos, "", {});
        const_cast<Node&>(*n).value = t.text == "null" ? json() : json(t.text == "true");
        return n;
      }
      return make(Node::Name, t.pos, t.text, {});
    }
    if (is_op("(")) {
      ++at_;
      NodeP n = ternary();
      expect(")");
      return n;
    }
    if (is_op("[")) {
      ++at_;
      std::vector<NodeP> kids;
      if (!is_op("]")) {
        kids.push_back(ternary());
        while (is_op(",")) {
          ++at_;
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
        json obj = eval(*n.kids[0]);
        if (!obj.is_object() || !obj.contains(n.text))
          expr_error(src_, n.pos, "no member '" + n.text + "'");
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
    expr_error(src_, pos, "expected a number, got " + v.dump());
  }

 private:
  bool truthy(const json& v, size_t pos) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_null()) return false;
    expr_error(src_, pos, "expected a condition, got " + v.dump());
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

// --- the numeric program -----------------------------------------------------

enum NumOp : uint8_t {
  kConst, kVar, kNeg, kNot,
  // unary functions
  kFloor, kCeil, kRound, kAbs, kSqrt, kExp, kLog, kRsqrt, kTanh, kSigmoid, kSilu, kSoftplus, kRelu, kPow2ceil,
  // binary
  kAdd, kSub, kMul, kDiv, kMod, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr, kMin, kMax, kPow, kCeilDiv,
  kSelect,  // cond, a, b -> a if cond else b
};

struct NumericCompiler {
  std::string_view src;
  const std::vector<std::string>& vars;
  std::vector<NumericExpr::Ins>& code;
  int depth = 0, max_depth = 0;

  void emit(uint8_t op, int pops, int pushes, int32_t arg = 0, double k = 0) {
    code.push_back({op, arg, k});
    depth += pushes - pops;
    max_depth = std::max(max_depth, depth);
  }
  [[noreturn]] void not_numeric(const Node& n, const std::string& what) {
    expr_error(src, n.pos, what + " is not available in an elementwise expression");
  }

  void compile(const Node& n) {
    switch (n.kind) {
      case Node::Literal:
        if (n.value.is_number()) return emit(kConst, 0, 1, 0, n.value.get<double>());
        if (n.value.is_boolean()) return emit(kConst, 0, 1, 0, n.value.get<bool>() ? 1.0 : 0.0);
        not_numeric(n, "the value " + n.value.dump());
      case Node::Name: {
        for (size_t i = 0; i < vars.size(); ++i)
          if (vars[i] == n.text) return emit(kVar, 0, 1, (int32_t)i);
        expr_error(src, n.pos, "unknown name '" + n.text + "'");
      }
      case Node::Member: not_numeric(n, "a member ('." + n.text + "')");
      case Node::Index: not_numeric(n, "indexing");
      case Node::List: not_numeric(n, "a list");
      case Node::Unary:
        compile(*n.kids[0]);
        if (n.text == "-") emit(kNeg, 1, 1);
        if (n.text == "not") emit(kNot, 1, 1);
        return;
      case Node::Binary: {
        static const std::pair<const char*, NumOp> ops[] = {
            {"+", kAdd}, {"-", kSub}, {"*", kMul}, {"/", kDiv}, {"%", kMod}, {"==", kEq}, {"!=", kNe},
            {"<", kLt}, {"<=", kLe}, {">", kGt}, {">=", kGe}, {"and", kAnd}, {"or", kOr}};
        compile(*n.kids[0]);
        compile(*n.kids[1]);
        for (const auto& [name, op] : ops)
          if (n.text == name) return emit(op, 2, 1);
        expr_error(src, n.pos, "unknown operator '" + n.text + "'");
      }
      case Node::Ternary:
        compile(*n.kids[0]);
        compile(*n.kids[1]);
        compile(*n.kids[2]);
        return emit(kSelect, 3, 1);
      case Node::Call: return call(n);
    }
  }

  void call(const Node& n) {
    const Node& callee = *n.kids[0];
    if (callee.kind != Node::Name) not_numeric(n, "a method call ('." + callee.text + "()')");
    const std::string& f = callee.text;
    const size_t argc = n.kids.size() - 1;
    auto want = [&](size_t k) {
      if (argc != k)
        expr_error(src, n.pos, f + "() takes " + std::to_string(k) + " arguments, got " + std::to_string(argc));
    };
    static const std::pair<const char*, NumOp> unary[] = {
        {"floor", kFloor}, {"ceil", kCeil},   {"round", kRound},     {"abs", kAbs},   {"sqrt", kSqrt},
        {"exp", kExp},     {"log", kLog},     {"rsqrt", kRsqrt},     {"tanh", kTanh}, {"sigmoid", kSigmoid},
        {"silu", kSilu},   {"softplus", kSoftplus}, {"relu", kRelu}, {"pow2ceil", kPow2ceil}};
    for (const auto& [name, op] : unary)
      if (f == name) {
        want(1);
        compile(*n.kids[1]);
        return emit(op, 1, 1);
      }
    if (f == "pow" || f == "ceilDiv") {
      want(2);
      compile(*n.kids[1]);
      compile(*n.kids[2]);
      return emit(f == "pow" ? kPow : kCeilDiv, 2, 1);
    }
    if (f == "min" || f == "max") {
      if (argc == 0) expr_error(src, n.pos, f + "() needs arguments");
      compile(*n.kids[1]);
      for (size_t i = 2; i <= argc; ++i) {
        compile(*n.kids[i]);
        emit(f == "min" ? kMin : kMax, 2, 1);
      }
      return;
    }
    if (f == "has" || f == "dim" || f == "numel" || f == "len") not_numeric(n, f + "()");
    expr_error(src, n.pos, "unknown function '" + f + "'");
  }
};

}  // namespace

NumericExpr Expr::compile_numeric(const std::vector<std::string>& vars) const {
  NumericExpr out;
  NumericCompiler c{source_, vars, out.code_};
  c.compile(*root_);
  out.depth_ = c.max_depth;
  return out;
}

// Runs the program over n points; get(v, j) is variable v at point j. Each
// stack slot holds n values.
template <typename Get>
void NumericExpr::exec(int64_t n, double* stack, const Get& get) const {
  int sp = 0;  // slots in use
  for (const Ins& ins : code_) {
    switch (ins.op) {
      case kConst: {
        double* d = stack + (int64_t)sp++ * n;
        for (int64_t j = 0; j < n; ++j) d[j] = ins.k;
        continue;
      }
      case kVar: {
        double* d = stack + (int64_t)sp++ * n;
        for (int64_t j = 0; j < n; ++j) d[j] = get(ins.arg, j);
        continue;
      }
      case kSelect: {
        double* c = stack + (int64_t)(sp - 3) * n;
        const double* a = c + n;
        const double* b = a + n;
        for (int64_t j = 0; j < n; ++j) c[j] = c[j] != 0 ? a[j] : b[j];
        sp -= 2;
        continue;
      }
      default: break;
    }
    double* top = stack + (int64_t)(sp - 1) * n;  // the last slot
    if (ins.op < kAdd) {  // unary, in place on the top slot
#define BONFIRE_UN(OP, EXPR)                                 \
  case OP:                                                   \
    for (int64_t j = 0; j < n; ++j) {                        \
      const double x = top[j];                               \
      top[j] = (EXPR);                                       \
    }                                                        \
    break;
      switch (ins.op) {
        BONFIRE_UN(kNeg, -x)
        BONFIRE_UN(kNot, x != 0 ? 0.0 : 1.0)
        BONFIRE_UN(kFloor, std::floor(x))
        BONFIRE_UN(kCeil, std::ceil(x))
        BONFIRE_UN(kRound, std::round(x))
        BONFIRE_UN(kAbs, std::fabs(x))
        BONFIRE_UN(kSqrt, std::sqrt(x))
        BONFIRE_UN(kExp, std::exp(x))
        BONFIRE_UN(kLog, std::log(x))
        BONFIRE_UN(kRsqrt, fn_rsqrt(x))
        BONFIRE_UN(kTanh, std::tanh(x))
        BONFIRE_UN(kSigmoid, fn_sigmoid(x))
        BONFIRE_UN(kSilu, fn_silu(x))
        BONFIRE_UN(kSoftplus, fn_softplus(x))
        BONFIRE_UN(kRelu, fn_relu(x))
        BONFIRE_UN(kPow2ceil, fn_pow2ceil(x))
        default: break;
      }
#undef BONFIRE_UN
      continue;
    }
    // binary: the two top slots -> the lower one
    double* a = top - n;
    const double* b = top;
#define BONFIRE_BIN(OP, EXPR)                                \
  case OP:                                                   \
    for (int64_t j = 0; j < n; ++j) {                        \
      const double x = a[j], y = b[j];                       \
      a[j] = (EXPR);                                         \
    }                                                        \
    break;
    switch (ins.op) {
      BONFIRE_BIN(kAdd, x + y)
      BONFIRE_BIN(kSub, x - y)
      BONFIRE_BIN(kMul, x * y)
      BONFIRE_BIN(kDiv, x / y)
      BONFIRE_BIN(kMod, fn_mod(x, y))
      BONFIRE_BIN(kEq, x == y ? 1.0 : 0.0)
      BONFIRE_BIN(kNe, x != y ? 1.0 : 0.0)
      BONFIRE_BIN(kLt, x < y ? 1.0 : 0.0)
      BONFIRE_BIN(kLe, x <= y ? 1.0 : 0.0)
      BONFIRE_BIN(kGt, x > y ? 1.0 : 0.0)
      BONFIRE_BIN(kGe, x >= y ? 1.0 : 0.0)
      BONFIRE_BIN(kAnd, (x != 0 && y != 0) ? 1.0 : 0.0)
      BONFIRE_BIN(kOr, (x != 0 || y != 0) ? 1.0 : 0.0)
      BONFIRE_BIN(kMin, std::fmin(x, y))
      BONFIRE_BIN(kMax, std::fmax(x, y))
      BONFIRE_BIN(kPow, std::pow(x, y))
      BONFIRE_BIN(kCeilDiv, std::ceil(x / y))
      default: break;
    }
#undef BONFIRE_BIN
    --sp;
  }
}

double NumericExpr::eval(const double* vars) const {
  double small[16] = {};
  std::vector<double> big;
  double* stack = small;
  if (depth_ > 16) {
    big.resize(depth_);
    stack = big.data();
  }
  exec(1, stack, [&](int32_t v, int64_t) { return vars[v]; });
  return stack[0];
}

void NumericExpr::eval_batch(const double* const* vars, int64_t n, double* out) const {
  if (n <= 0) return;
  thread_local std::vector<double> scratch;
  if (scratch.size() < (size_t)(depth_ * n)) scratch.resize((size_t)(depth_ * n));
  exec(n, scratch.data(), [&](int32_t v, int64_t j) { return vars[v][j]; });
  std::copy(scratch.data(), scratch.data() + n, out);
}

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

std::set<std::string> Expr::names() const {
  std::set<std::string> out;
  collect_names(*root_, out);
  return out;
}

}  // namespace bonfire
