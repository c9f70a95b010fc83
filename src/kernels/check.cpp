#include "kernels/check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "core/error.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::BadGraph, message); }

std::string join(const std::vector<json>& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : ", ") + v.dump();
  return s;
}

std::string join(const std::vector<std::string>& values, const char* sep = ", ") {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : sep) + v;
  return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

const char* kind_of(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "a list";
  return "an object";
}

void check_attributes(const Package& p, const json& given) {
  if (!given.is_object()) refuse("attributes must be a JSON object, got " + given.dump());
  for (const auto& [k, v] : given.items()) {
    if (!p.attribute_names.count(k)) {
      std::vector<std::string> known(p.attribute_names.begin(), p.attribute_names.end());
      refuse(k + ": not an attribute of " + p.name + " (attributes: " + join(known) + ")");
    }
    if (v.is_null() || v.is_object()) refuse(k + ": " + v.dump() + " is not an attribute value");
    if (p.defaults.contains(k)) {
      const json& d = p.defaults[k];
      const bool same = (d.is_number() && v.is_number()) || (d.is_string() && v.is_string()) ||
                        (d.is_boolean() && v.is_boolean()) || (d.is_array() && v.is_array());
      if (!same) refuse(k + ": " + v.dump() + " is not " + kind_of(d) + " (the default is " + d.dump() + ")");
    }
    if (auto it = p.allowed.find(k); it != p.allowed.end())
      if (std::find(it->second.begin(), it->second.end(), v) == it->second.end())
        refuse(k + ": " + v.dump() + " is not allowed (allowed: " + join(it->second) + ")");
  }
}

// Binds the dtypes of the tensors to the package's type names.
std::map<std::string, std::string> check_dtypes(const Package& p, const Problem& pr) {
  std::map<std::string, std::string> out;
  std::map<std::string, std::string> bound_by;  // type name -> the first role that bound it
  std::map<std::string, std::string> type_of;   // type name -> dtype
  auto check = [&](const TensorSpec& t, const std::string& dtype) {
    auto tc = p.type_constraints.find(t.dtype);
    if (tc == p.type_constraints.end()) {  // a literal dtype
      if (dtype != t.dtype) refuse(t.role + ": dtype " + dtype + ", the package needs " + t.dtype);
      return;
    }
    if (std::find(tc->second.begin(), tc->second.end(), dtype) == tc->second.end())
      refuse(t.role + ": dtype " + dtype + " is not allowed for " + t.dtype + " (allowed: " + join(tc->second) + ")");
    if (auto b = type_of.find(t.dtype); b != type_of.end() && b->second != dtype)
      refuse(t.role + ": dtype " + dtype + ", but " + t.dtype + " is " + b->second + " (from " + bound_by[t.dtype] +
             ")");
    type_of[t.dtype] = dtype;
    bound_by.emplace(t.dtype, t.role);
  };
  for (const auto& t : p.inputs) {
    auto it = pr.dtypes.find(t.role);
    std::string dtype;
    if (it != pr.dtypes.end()) dtype = it->second;
    else if (auto tc = p.type_constraints.find(t.dtype); tc != p.type_constraints.end()) dtype = tc->second.front();
    else dtype = t.dtype;
    if (dtype_size(dtype) == 0) refuse(t.role + ": \"" + dtype + "\" is not a dtype");
    check(t, dtype);
    out[t.role] = dtype;
  }
  for (const auto& t : p.outputs) {
    std::string dtype;
    if (auto it = pr.dtypes.find(t.role); it != pr.dtypes.end()) dtype = it->second;
    else if (auto b = type_of.find(t.dtype); b != type_of.end()) dtype = b->second;
    else if (auto tc = p.type_constraints.find(t.dtype); tc != p.type_constraints.end()) dtype = tc->second.front();
    else dtype = t.dtype;
    if (dtype_size(dtype) == 0) refuse(t.role + ": \"" + dtype + "\" is not a dtype");
    check(t, dtype);
    out[t.role] = dtype;
  }
  return out;
}

std::vector<int64_t> whole_shape(const json& v, const std::string& what) {
  if (!v.is_array()) refuse(what + ": the shape expression gave " + v.dump() + ", not a list");
  std::vector<int64_t> out;
  for (const auto& d : v) {
    const double x = d.is_number() ? d.get<double>() : -1;
    if (!(x >= 0) || x != std::floor(x) || x > 9.0e15) refuse(what + ": the shape expression gave " + v.dump());
    out.push_back((int64_t)x);
  }
  return out;
}

// The contract conditions are found once per package (the result depends on
// the package only).
struct ContractFinder {
  const Package& p;
  std::map<std::string, bool> device_dep = {};

  static std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace((unsigned char)s[b])) ++b;
    while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  // Derive names reachable from e through top-level `and` terms that are bare derive names.
  void close(const Expr& e, std::set<std::string>& out) {
    for (const std::string& term : e.and_terms()) {
      const std::string name = trim(term);
      auto it = p.derive.find(name);
      if (it == p.derive.end() || !out.insert(name).second) continue;
      close(it->second, out);
    }
  }
  bool reads_device(const std::string& name) {
    if (auto it = device_dep.find(name); it != device_dep.end()) return it->second;
    bool dep = false;
    for (const auto& path : reads_of(p, nullptr, p.derive.at(name)))
      if (path.rfind("device", 0) == 0 && (path.size() == 6 || path[6] == '.')) dep = true;
    return device_dep[name] = dep;
  }
  std::vector<std::string> find() {
    std::set<std::string> common;
    bool first = true;
    for (const Variant& v : p.variants) {
      std::set<std::string> mine;
      for (const Expr& w : v.when) close(w, mine);
      if (first) common = mine;
      else {
        std::set<std::string> both;
        std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
        common = both;
      }
      first = false;
    }
    std::set<std::string> independent;
    for (const auto& n : common)
      if (!reads_device(n)) independent.insert(n);
    // Keep the outermost: those no other contract condition contains.
    std::vector<std::string> out;
    for (const auto& n : independent) {
      bool inner = false;
      for (const auto& m : independent) {
        if (m == n) continue;
        std::set<std::string> c;
        close(p.derive.at(m), c);
        if (c.count(n)) inner = true;
      }
      if (!inner) out.push_back(n);
    }
    return out;
  }
};

std::string describe_reads(const Package& p, const Problem& pr, const Bound& b, const std::vector<std::string>& reads) {
  std::vector<std::string> set_attrs, default_attrs, tensors;
  std::set<std::string> seen;
  for (const auto& path : reads) {
    const size_t dot = path.find('.');
    if (dot == std::string::npos) continue;
    const std::string root = path.substr(0, dot);
    const std::string member = path.substr(dot + 1, path.find('.', dot + 1) - dot - 1);
    if (!seen.insert(root + "." + member).second) continue;
    if (root == "attrs" && b.attrs.contains(member)) {
      (pr.attrs.contains(member) ? set_attrs : default_attrs).push_back(member + " = " + b.attrs[member].dump());
    } else if ((root == "shapes" || root == "ranks") && b.shapes.count(member) && !seen.count("t." + member)) {
      seen.insert("t." + member);
      tensors.push_back(member + " " + shape_text(b.shapes.at(member)));
    } else if (root == "tensorDtypes" && b.dtypes.count(member)) {
      tensors.push_back(member + " dtype " + b.dtypes.at(member));
    }
  }
  std::vector<std::string> all = set_attrs;
  all.insert(all.end(), default_attrs.begin(), default_attrs.end());
  all.insert(all.end(), tensors.begin(), tensors.end());
  return all.empty() ? p.name : join(all);
}

}  // namespace

std::vector<std::string> contract_conditions(const Package& package) { return ContractFinder{package}.find(); }

Bound check_problem(const Package& p, const Problem& pr, const Device& device) {
  check_attributes(p, pr.attrs);
  Bound b;
  b.attrs = p.defaults;
  for (const auto& [k, v] : pr.attrs.items()) b.attrs[k] = v;

  for (const auto& [role, shape] : pr.shapes) {
    if (!p.find_tensor(role)) {
      std::vector<std::string> roles;
      for (const auto& t : p.inputs) roles.push_back(t.role);
      for (const auto& t : p.outputs) roles.push_back(t.role);
      refuse(role + ": not a tensor of " + p.name + " (tensors: " + join(roles) + ")");
    }
    for (int64_t d : shape)
      if (d < 0) refuse(role + ": shape " + shape_text(shape) + " has a negative dimension");
  }
  for (const auto& [role, dtype] : pr.dtypes)
    if (!p.find_tensor(role)) refuse(role + ": not a tensor of " + p.name);
  for (const auto& t : p.inputs) {
    auto it = pr.shapes.find(t.role);
    if (it == pr.shapes.end()) refuse(t.role + ": missing (an input of " + p.name + ")");
    if (t.rank && (int64_t)it->second.size() != *t.rank)
      refuse(t.role + ": rank " + std::to_string(it->second.size()) + " (shape " + shape_text(it->second) +
             "), the package needs rank " + std::to_string(*t.rank));
    b.shapes[t.role] = it->second;
  }
  b.dtypes = check_dtypes(p, pr);

  // Outputs' shapes: given, or from the package's expressions over the inputs.
  {
    Scope inputs_only(p, b, device);
    std::map<std::string, std::vector<int64_t>> outs;
    for (const auto& t : p.outputs) {
      if (auto it = pr.shapes.find(t.role); it != pr.shapes.end()) {
        outs[t.role] = it->second;
      } else if (t.shape) {
        json v;
        try {
          v = inputs_only.eval(*t.shape);
        } catch (const Error& e) {
          refuse(t.role + ": its shape \"" + t.shape->source() + "\" cannot be computed: " + e.what());
        }
        outs[t.role] = whole_shape(v, t.role);
      } else {
        refuse(t.role + ": the package gives no shape expression for this output; pass its shape");
      }
      if (t.rank && (int64_t)outs[t.role].size() != *t.rank)
        refuse(t.role + ": rank " + std::to_string(outs[t.role].size()) + ", the package needs rank " +
               std::to_string(*t.rank));
    }
    for (auto& [role, s] : outs) b.shapes[role] = s;
  }

  // The contract.
  Scope scope(p, b, device);
  for (const std::string& name : contract_conditions(p)) {
    bool ok = false;
    std::string error;
    try {
      ok = scope.holds(Expr::parse(name));  // by name, so a cycle is reported from here
    } catch (const Error& e) {
      error = e.what();
    }
    if (ok) continue;
    const Failure f = explain_false(scope, Expr::parse(name));
    const std::string subject = describe_reads(p, pr, b, f.reads) + ": refused by " + p.name + "'s contract: ";
    std::string msg = subject + join(f.chain, " -> ") + ": \"" + f.leaf + "\" is false";
    if (!error.empty()) msg = subject + name + " cannot be evaluated: " + error;
    refuse(msg);
  }
  return b;
}

}  // namespace bonfire::kernels
