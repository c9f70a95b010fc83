// R15 for the ops expr and recurrence (ir/ops/programs.cpp): their expressions parse (with the project's one
// expression language, core/expr.h) and use only known names: the inputs,
// index names, weights, state tensors, earlier `let` names and the
// elementwise functions of docs/IR.md §10.
#include <cctype>

#include "core/error.h"
#include "core/expr.h"
#include "ir/ir_doc.h"
#include "ir/validate_internal.h"

namespace bonfire::ir::detail {

namespace {

// docs/IR.md §10. Known here whether or not core/expr.h evaluates them yet.
constexpr size_t kMaxExprChars = 4096;

const std::set<std::string> kFunctions = {"exp",      "log",  "sqrt", "rsqrt", "tanh", "sigmoid", "silu",
                                          "softplus", "relu", "abs",  "min",   "max",  "pow"};

bool is_ident(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char ch : s)
    if (!(std::isalnum((unsigned char)ch) || ch == '_')) return false;
  return true;
}

// Names called as functions: an identifier followed by "(" and not after "."
// (a method call). Skips string literals.
std::vector<std::pair<std::string, size_t>> calls(const std::string& s) {
  std::vector<std::pair<std::string, size_t>> out;
  size_t i = 0;
  char prev = 0;  // the last non-space character before the current token
  while (i < s.size()) {
    const char ch = s[i];
    if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != ch) j += s[j] == '\\' ? 2 : 1;
      i = j + 1;
      prev = ch;
    } else if (std::isdigit((unsigned char)ch)) {
      while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '.' ||
                              ((s[i] == '+' || s[i] == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
        ++i;
      prev = '0';
    } else if (std::isalpha((unsigned char)ch) || ch == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) ++j;
      size_t k = j;
      while (k < s.size() && std::isspace((unsigned char)s[k])) ++k;
      if (k < s.size() && s[k] == '(' && prev != '.') out.push_back({s.substr(i, j - i), i});
      prev = 'a';
      i = j;
    } else {
      if (!std::isspace((unsigned char)ch)) prev = ch;
      ++i;
    }
  }
  return out;
}

struct Statement {
  std::string target;  // "" for a bare expression (readout, expr)
  std::string rhs;
  size_t offset = 0;  // where rhs starts in the statement
};

// "name = expr" (not ==, <=, >=, !=).
std::optional<Statement> split_statement(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '=') continue;
    if (i + 1 < s.size() && s[i + 1] == '=') return std::nullopt;
    if (i > 0 && (s[i - 1] == '=' || s[i - 1] == '!' || s[i - 1] == '<' || s[i - 1] == '>')) return std::nullopt;
    std::string lhs = s.substr(0, i);
    lhs.erase(0, lhs.find_first_not_of(" \t"));
    lhs.erase(lhs.find_last_not_of(" \t") + 1);
    return Statement{lhs, s.substr(i + 1), i + 1};
  }
  return std::nullopt;
}

class ExprCheck {
 public:
  ExprCheck(Checker& c, std::string path) : c_(c), path_(std::move(path)) {}

  // Parses `rhs` (at `offset` of the text at `where`) and checks its names
  // against `known` (unless `names_known` is false). False when it did not parse.
  bool check(const std::string& where, const std::string& text, const std::string& rhs, size_t offset,
             const std::set<std::string>& known, bool names_known, const std::string& known_desc) {
    std::set<std::string> names;
    // The parser recurses per nesting level; real expressions are short.
    if (rhs.size() > kMaxExprChars) {
      c_.report(path_ + where, quoted(text.substr(0, 40) + "...") + " is longer than " + std::to_string(kMaxExprChars) +
                                   " characters; not parsed",
                15);
      return false;
    }
    try {
      names = Expr::parse(rhs).names();
    } catch (const std::exception& e) {
      std::string what = e.what();
      const std::string prefix = "expression \"" + rhs + "\": ";
      if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
      const std::string marker = " at character ";
      if (const size_t at = what.rfind(marker); at != std::string::npos) {
        try {
          const size_t pos = std::stoul(what.substr(at + marker.size()));
          what = what.substr(0, at) + marker + std::to_string(pos + offset);
        } catch (...) {
        }
      }
      c_.report(path_ + where, quoted(text) + " does not parse: " + what, 15);
      return false;
    }
    for (const auto& [f, pos] : calls(rhs))
      if (!kFunctions.count(f))
        c_.report(path_ + where,
                  quoted(text) + " calls " + f + " (character " + std::to_string(pos + offset + 1) +
                      "), which is not a function of docs/IR.md §10 (exp log sqrt rsqrt tanh sigmoid silu softplus relu "
                      "abs min max pow)",
                  15);
    if (names_known)
      for (const auto& n : names)
        if (!known.count(n))
          c_.report(path_ + where, quoted(text) + " reads " + quoted(n) + ", which is not known here (" + known_desc + ")", 15);
    return true;
  }

 private:
  Checker& c_;
  std::string path_;
};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "none" : out;
}

}  // namespace

void check_expr_node(Checker& c, const std::string& path, const json& node) {
  const size_t n = node["in"].size();
  std::set<std::string> known;
  for (size_t j = 0; j < n; ++j) {
    if (j < 26) known.insert(std::string(1, static_cast<char>('a' + j)));
    known.insert("x" + std::to_string(j));
  }
  const std::string desc = n == 0 ? "the node has no inputs"
                                  : "the inputs are " + std::string(1, 'a') + (n > 1 ? ".." + std::string(1, static_cast<char>('a' + std::min<size_t>(n, 26) - 1)) : "") +
                                        " or x0" + (n > 1 ? "..x" + std::to_string(n - 1) : "");
  const std::string src = node["expr"].get<std::string>();
  ExprCheck(c, path).check(".expr", src, src, 0, known, true, desc);
}

void check_recurrence(Checker& c, const std::string& path, const json& node) {
  ExprCheck check(c, path);
  std::set<std::string> index, inputs, weights, state;
  for (const auto& [k, v] : node["index"].items()) index.insert(k);
  for (const auto& s : node["inputs"])
    if (s.is_string()) inputs.insert(s.get<std::string>());
  if (node.contains("weights"))
    for (const auto& [k, v] : node["weights"].items()) weights.insert(k);
  const json* slot = find_slot(c.doc, node["state"].get<std::string>());
  const bool state_known = slot && (*slot)["kind"] == "recurrent";
  if (state_known)
    for (const auto& t : (*slot)["tensors"]) state.insert(t["name"].get<std::string>());

  if (node["inputs"].size() != node["in"].size())
    c.report(path + ".inputs",
             "recurrence.inputs names " + std::to_string(node["inputs"].size()) + " inputs but in lists " +
                 std::to_string(node["in"].size()) + " (one name per in)",
             15);

  std::set<std::string> base = index;
  base.insert(inputs.begin(), inputs.end());
  base.insert(weights.begin(), weights.end());
  base.insert(state.begin(), state.end());
  auto describe = [&](const std::set<std::string>& lets) {
    std::string s = "inputs: " + join(inputs) + "; index: " + join(index) + "; weights: " + join(weights) +
                    "; state: " + (state_known ? join(state) : "?");
    if (!lets.empty()) s += "; let: " + join(lets);
    return s;
  };

  auto statement = [&](const char* list, size_t k, const std::string& text, const std::set<std::string>& known,
                       bool target_is_state, std::set<std::string>* defines, const std::string& desc) {
    const std::string where = std::string(".") + list + "[" + std::to_string(k) + "]";
    const auto st = split_statement(text);
    if (!st || !is_ident(st->target)) {
      c.report(path + where, quoted(text) + " is not a statement \"name = expression\"", 15);
      return;
    }
    if (target_is_state && state_known && !state.count(st->target))
      c.report(path + where,
               quoted(text) + " assigns " + quoted(st->target) + ", which is not a tensor of the state slot (" +
                   join(state) + ")",
               15);
    check.check(where, text, st->rhs, st->offset, known, state_known, desc);
    if (defines) defines->insert(st->target);
  };

  std::set<std::string> lets;
  if (node.contains("let"))
    for (size_t k = 0; k < node["let"].size(); ++k) {
      std::set<std::string> known = base;
      known.insert(lets.begin(), lets.end());
      statement("let", k, node["let"][k].get<std::string>(), known, false, &lets, describe(lets));
    }
  std::set<std::string> all = base;
  all.insert(lets.begin(), lets.end());
  for (size_t k = 0; k < node["update"].size(); ++k)
    statement("update", k, node["update"][k].get<std::string>(), all, true, nullptr, describe(lets));
  if (node.contains("init")) {
    std::set<std::string> known = index;
    known.insert(weights.begin(), weights.end());
    known.insert(state.begin(), state.end());
    const std::string desc =
        "init runs before any token: index: " + join(index) + "; weights: " + join(weights) + "; state: " + join(state);
    for (size_t k = 0; k < node["init"].size(); ++k)
      statement("init", k, node["init"][k].get<std::string>(), known, true, nullptr, desc);
  }
  const std::string readout = node["readout"].get<std::string>();
  check.check(".readout", readout, readout, 0, all, state_known, describe(lets));
}

}  // namespace bonfire::ir::detail
