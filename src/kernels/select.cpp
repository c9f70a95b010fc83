#include "kernels/select.h"

#include "core/error.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {
json num(double x) { return x == (double)(int64_t)x ? json((int64_t)x) : json(x); }
}  // namespace

json unmet_requirement(const Variant& v, const Device& d) {
  for (const std::string& f : v.needs.features)
    if (!d.has_feature(f)) return {{"feature", f}};
  for (const auto& [name, need] : v.needs.limits) {
    const auto have = d.limit(name);
    const bool lower_is_better = name.rfind("min", 0) == 0;
    if (!have || (lower_is_better ? *have > need : *have < need))
      return {{"limit", name}, {"need", num(need)}, {"have", have ? num(*have) : json()}};
  }
  const json& info = d.view["adapterInfo"];
  const json offered = info.contains("subgroupMatrixConfigs") ? info["subgroupMatrixConfigs"] : json::array();
  for (const json& want : v.needs.subgroup_matrix_configs) {
    bool found = false;
    for (const json& c : offered) {
      bool all = true;
      for (const auto& [k, val] : want.items())
        if (!c.contains(k) || c[k] != val) all = false;
      found = found || all;
    }
    if (!found) return {{"subgroupMatrixConfig", want}};
  }
  return nullptr;
}

Selection select_variant(const Package& p, const Bound& b, const Device& d) {
  Selection s;
  Scope scope(p, b, d);
  for (size_t i = 0; i < p.variants.size(); ++i) {
    const Variant& v = p.variants[i];
    VariantReport r{v.id, v.priority, false, unmet_requirement(v, d)};
    scope.set_variant(&v);
    for (size_t w = 0; w < v.when.size() && r.failed.is_null(); ++w) {
      const Expr& cond = v.when[w];
      try {
        if (scope.holds(cond)) continue;
        json failed = {{"condition", cond.source()}, {"value", scope.eval(cond)}};
        const Failure f = explain_false(scope, cond);
        json because = json::array();
        for (const auto& n : f.chain)
          if (n != cond.source()) because.push_back(n);
        if (!f.leaf.empty() && f.leaf != cond.source()) because.push_back(f.leaf);
        if (!because.empty()) failed["because"] = because;
        r.failed = failed;
      } catch (const Error& e) {
        r.failed = {{"condition", cond.source()}, {"error", e.what()}};
      }
    }
    if (r.failed.is_null() && (s.chosen < 0 || v.priority > p.variants[s.chosen].priority)) s.chosen = (int)i;
    s.variants.push_back(std::move(r));
  }
  if (s.chosen >= 0) s.variants[s.chosen].selected = true;
  return s;
}

json Selection::explain() const {
  json out = {{"variant", chosen >= 0 ? json(variants[chosen].id) : json()}, {"variants", json::array()}};
  for (const auto& r : variants) {
    json v = {{"id", r.id}, {"priority", num(r.priority)}, {"selected", r.selected}};
    if (!r.failed.is_null()) v["failed"] = r.failed;
    out["variants"].push_back(v);
  }
  return out;
}

}  // namespace bonfire::kernels
