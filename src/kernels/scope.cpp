#include "kernels/scope.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace((unsigned char)s[b])) ++b;
  while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
  return s.substr(b, e - b);
}

// "(a or b)" → "a or b"; "(a) or (b)" stays (its first parenthesis closes early).
std::string strip_parens(std::string s) {
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    int depth = 0;
    char quote = 0;
    size_t close = std::string::npos;
    for (size_t i = 0; i < s.size() && close == std::string::npos; ++i) {
      const char c = s[i];
      if (quote) {
        if (c == '\\') ++i;
        else if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')' && --depth == 0) {
        close = i;
      }
    }
    if (close != s.size() - 1) break;
    s = trim(s.substr(1, s.size() - 2));
  }
  return s;
}

const Expr* constant_expr(const Package& p, const Variant* v, const std::string& name) {
  if (v) {
    auto it = v->constants.find(name);
    if (it != v->constants.end()) return &it->second;
  }
  auto it = p.constants.find(name);
  return it == p.constants.end() ? nullptr : &it->second;
}

void follow_reads(const Package& p, const Variant* v, const Expr& e, std::vector<std::string>& out,
                  std::set<std::string>& seen) {
  std::vector<std::pair<size_t, std::string>> in_order;
  for (const auto& [path, pos] : e.paths()) in_order.emplace_back(pos, path);
  std::sort(in_order.begin(), in_order.end());
  for (const auto& [pos, path] : in_order) {
    const std::string root = path.substr(0, path.find('.'));
    if (auto it = p.derive.find(root); it != p.derive.end()) {
      if (seen.insert(root).second) follow_reads(p, v, it->second, out, seen);
      continue;
    }
    if (root == "constants" && path.size() > 10) {
      const std::string name = path.substr(10, path.find('.', 10) - 10);
      if (const Expr* c = constant_expr(p, v, name); c && seen.insert(path).second) follow_reads(p, v, *c, out, seen);
      continue;
    }
    if (seen.insert(path).second) out.push_back(path);
  }
}

}  // namespace

Scope::Scope(const Package& package, const Bound& bound, const Device& device)
    : package_(package), bound_(bound), device_(device) {
  attrs_ = bound.attrs;
  shapes_ = json::object();
  ranks_ = json::object();
  dtypes_ = json::object();
  for (const auto& [role, shape] : bound.shapes) {
    shapes_[role] = shape;
    ranks_[role] = shape.size();
  }
  for (const auto& [role, dtype] : bound.dtypes) dtypes_[role] = dtype;
}

void Scope::set_variant(const Variant* variant) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (variant == variant_) return;
  variant_ = variant;
  memo_.clear();
}

void Scope::set_repeat(const std::map<std::string, int64_t>& indexes) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  json r = json::object();
  for (const auto& [k, v] : indexes) r[k] = v;
  if (r == repeat_) return;
  repeat_ = std::move(r);
  memo_.clear();  // a derive may read repeat.X
}

template <class F>
auto Scope::guarded(F&& f) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (stack_.empty()) labelled_ = false;
  return f();
}

json Scope::eval(const Expr& e) {
  return guarded([&] { return e.eval([this](const std::string& n) { return lookup(n); }); });
}

double Scope::number(const Expr& e) {
  return guarded([&] { return e.eval_number([this](const std::string& n) { return lookup(n); }); });
}

bool Scope::holds(const Expr& e) {
  const json v = eval(e);
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_null()) return false;
  throw Error(ErrorCode::BadGraph, "expression \"" + e.source() + "\": expected a condition, got " + v.dump());
}

json Scope::value(const std::string& name) {
  return guarded([&]() -> json {
    if (auto v = lookup(name)) return *v;
    throw Error(ErrorCode::BadGraph, "unknown name '" + name + "'");
  });
}

json Scope::compute(const std::string& label, const std::string& cycle_name, const Expr& e) {
  if (auto it = memo_.find(label); it != memo_.end()) return it->second;
  for (size_t i = 0; i < stack_.size(); ++i)
    if (stack_[i] == cycle_name) {
      std::string chain;
      for (size_t j = i; j < stack_.size(); ++j) chain += stack_[j] + " -> ";
      labelled_ = true;
      throw Error(ErrorCode::BadGraph, "derive cycle: " + chain + cycle_name);
    }
  stack_.push_back(cycle_name);
  json v;
  try {
    v = e.eval([this](const std::string& n) { return lookup(n); });
  } catch (const Error& err) {
    stack_.pop_back();
    if (labelled_) throw;
    labelled_ = true;
    throw Error(err.code, label + ": " + err.what(), err.node, err.feature);
  } catch (...) {
    stack_.pop_back();
    throw;
  }
  stack_.pop_back();
  memo_[label] = v;
  return v;
}

std::optional<json> Scope::lookup(const std::string& name) {
  if (auto it = package_.derive.find(name); it != package_.derive.end())
    return compute("derive." + name, name, it->second);
  if (name.rfind("constants.", 0) == 0 && name.find('.', 10) == std::string::npos) {
    const std::string c = name.substr(10);
    if (const Expr* e = constant_expr(package_, variant_, c)) return compute(name, name, *e);
    return std::nullopt;
  }
  if (name == "attrs") return attrs_;
  if (name == "shapes") return shapes_;
  if (name == "ranks") return ranks_;
  if (name == "tensorDtypes") return dtypes_;
  if (name == "device") return device_.view;
  if (name == "tunables") return package_.tunables;
  if (name == "repeat") return repeat_;
  if (name == "constants") {  // the visible constants' names (for has()); their values are computed one by one
    json names = json::object();
    for (const auto& [k, e] : package_.constants) names[k] = nullptr;
    if (variant_)
      for (const auto& [k, e] : variant_->constants) names[k] = nullptr;
    return names;
  }
  return std::nullopt;
}

std::vector<std::string> reads_of(const Package& package, const Variant* variant, const Expr& e) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  follow_reads(package, variant, e, out, seen);
  return out;
}

Failure explain_false(Scope& scope, const Expr& condition) {
  const Package& p = scope.package();
  Failure f;
  const Expr* current = &condition;
  std::set<std::string> visited;
  for (int depth = 0; depth < 64; ++depth) {
    const std::vector<std::string> terms = current->and_terms();
    // A condition that is one derive name: look inside it.
    if (terms.size() == 1) {
      const std::string name = strip_parens(trim(terms[0]));
      auto it = p.derive.find(name);
      if (it != p.derive.end() && visited.insert(name).second) {
        f.chain.push_back(name);
        current = &it->second;
        continue;
      }
      f.leaf = strip_parens(trim(current->source()));
      break;
    }
    const Expr* next = nullptr;
    std::string leaf;
    for (const std::string& term : terms) {
      const Expr t = Expr::parse(term);
      bool ok = true;
      try {
        ok = scope.holds(t);
      } catch (const Error&) {
        ok = false;  // an error is as good as false here: it is the term to report
      }
      if (ok) continue;
      const std::string name = strip_parens(trim(term));
      auto it = p.derive.find(name);
      if (it != p.derive.end() && visited.insert(name).second) {
        f.chain.push_back(name);
        next = &it->second;
      } else {
        leaf = strip_parens(trim(term));
      }
      break;
    }
    if (next) {
      current = next;
      continue;
    }
    f.leaf = leaf.empty() ? strip_parens(trim(current->source())) : leaf;
    break;
  }
  f.reads = reads_of(p, scope.variant(), Expr::parse(f.leaf));
  return f;
}

}  // namespace bonfire::kernels
