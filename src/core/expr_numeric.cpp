// The numeric program of the expression language: an expression compiled
// once to a small stack program over doubles, for elementwise evaluation
// (the `expr` and `recurrence` extension ops run it per element).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/expr_node.h"
#include "core/json_parse.h"

namespace bonfire {

using json = nlohmann::json;
using namespace expr_detail;

namespace {

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
        not_numeric(n, "the value " + dump_json(n.value));  // may be invalid UTF-8: see Evaluator::number
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

}  // namespace bonfire
