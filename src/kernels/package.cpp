#include "kernels/package.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {

// The names an expression may start with besides derive names.
const std::set<std::string> kNamespaces = {"attrs",  "shapes",    "ranks",     "tensorDtypes",
                                           "device", "tunables",  "constants", "repeat"};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!std::isalnum((unsigned char)c) && c != '_') return false;
  return true;
}

std::string idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }
std::string key(const std::string& path, const std::string& k) { return path.empty() ? k : path + "." + k; }

class Loader {
 public:
  explicit Loader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(ErrorCode::BadGraph, where_ + ": " + (path.empty() ? "(root)" : path) + ": " + what);
  }

  const json& need(const json& obj, const std::string& k, const std::string& path) const {
    if (!obj.contains(k)) fail(key(path, k), "missing");
    return obj[k];
  }
  const json& object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "must be an object, got " + v.dump());
    return v;
  }
  const json& array(const json& v, const std::string& path, bool nonempty = false) const {
    if (!v.is_array()) fail(path, "must be an array, got " + v.dump());
    if (nonempty && v.empty()) fail(path, "must not be empty");
    return v;
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string() || v.get<std::string>().empty()) fail(path, "must be a non-empty string, got " + v.dump());
    return v;
  }
  std::string ident(const json& v, const std::string& path) const {
    std::string s = string(v, path);
    if (!is_identifier(s)) fail(path, "\"" + s + "\" is not a name (letters, digits, _)");
    return s;
  }
  // Expressions are strings; a bare number or boolean is accepted as its text.
  Expr expr(const json& v, const std::string& path) const {
    std::string src;
    if (v.is_string()) src = v.get<std::string>();
    else if (v.is_number() || v.is_boolean()) src = v.dump();
    else fail(path, "must be an expression (a string), got " + v.dump());
    try {
      return Expr::parse(src);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }
  std::map<std::string, Expr> expr_map(const json& obj, const std::string& path) const {
    std::map<std::string, Expr> out;
    for (const auto& [k, v] : object(obj, path).items()) {
      if (!is_identifier(k)) fail(key(path, k), "\"" + k + "\" is not a name (letters, digits, _)");
      out.emplace(k, expr(v, key(path, k)));
    }
    return out;
  }

  TensorSpec tensor(const json& j, const std::string& path, bool output, const Package& p) const {
    object(j, path);
    TensorSpec t;
    t.role = ident(need(j, "role", path), key(path, "role"));
    t.dtype = string(need(j, "dtype", path), key(path, "dtype"));
    if (!p.type_constraints.count(t.dtype) && dtype_size(t.dtype) == 0)
      fail(key(path, "dtype"), "\"" + t.dtype + "\" is neither a typeConstraints name nor a dtype");
    if (j.contains("rank")) {
      const json& r = j["rank"];
      if (!r.is_number_integer() || r.get<int64_t>() < 0) fail(key(path, "rank"), "must be an integer >= 0");
      t.rank = r.get<int64_t>();
    }
    if (j.contains("shape")) {
      if (!output) fail(key(path, "shape"), "only outputs have a shape expression (inputs' shapes are given)");
      t.shape = expr(j["shape"], key(path, "shape"));
    }
    return t;
  }

  Pass pass(const json& j, const std::string& path, const Package& p, std::set<std::string>& ids) const {
    object(j, path);
    Pass s;
    s.path = path;
    s.id = string(need(j, "id", path), key(path, "id"));
    if (!ids.insert(s.id).second) fail(key(path, "id"), "\"" + s.id + "\" is used twice in this variant");
    if (j.contains("repeat")) {
      const std::string rp = key(path, "repeat");
      const json& r = object(j["repeat"], rp);
      s.repeat_count = expr(need(r, "count", rp), key(rp, "count"));
      s.repeat_index = ident(need(r, "index", rp), key(rp, "index"));
      if (j.contains("name") || j.contains("dispatch")) fail(path, "a repeat block has passes, not a name or dispatch");
      const json& inner = array(need(j, "passes", path), key(path, "passes"), true);
      for (size_t i = 0; i < inner.size(); ++i) s.passes.push_back(pass(inner[i], idx(key(path, "passes"), i), p, ids));
      return s;
    }
    s.name = string(need(j, "name", path), key(path, "name"));
    const std::string dp = key(path, "dispatch");
    const json& d = object(need(j, "dispatch", path), dp);
    if (d.contains("threads")) {
      if (d.contains("x") || d.contains("y") || d.contains("z")) fail(dp, "has both threads and x/y/z");
      s.threads = expr(d["threads"], key(dp, "threads"));
    } else {
      if (!d.contains("x")) fail(dp, "needs threads or x (and optionally y, z)");
      s.x = expr(d["x"], key(dp, "x"));
      if (d.contains("y")) s.y = expr(d["y"], key(dp, "y"));
      if (d.contains("z")) s.z = expr(d["z"], key(dp, "z"));
    }
    if (d.contains("workgroupSize")) s.workgroup_size = expr(d["workgroupSize"], key(dp, "workgroupSize"));
    if (j.contains("bindings")) {
      s.bindings = string(j["bindings"], key(path, "bindings"));
      if (!p.binding_sets.count(s.bindings)) fail(key(path, "bindings"), "no bindingSet \"" + s.bindings + "\"");
    }
    if (j.contains("shader")) s.shader = string(j["shader"], key(path, "shader"));
    if (j.contains("source") && j["source"].contains("shader"))
      s.shader = string(j["source"]["shader"], key(key(path, "source"), "shader"));
    if (j.contains("source") && j["source"].contains("inputs")) {
      const std::string sp = key(key(path, "source"), "inputs");
      for (const auto& [k, v] : object(j["source"]["inputs"], sp).items()) s.source_inputs.emplace_back(k, expr(v, key(sp, k)));
    }
    return s;
  }

  Requirements requirements(const json& j, const std::string& path) const {
    Requirements r;
    for (const auto& [k, v] : object(j, path).items()) {
      const std::string kp = key(path, k);
      if (k == "features") {
        for (size_t i = 0; i < array(v, kp).size(); ++i) r.features.push_back(string(v[i], idx(kp, i)));
      } else if (k == "limits") {
        for (const auto& [name, need] : object(v, kp).items()) {
          if (!need.is_number()) fail(key(kp, name), "must be a number");
          r.limits.emplace_back(name, need.get<double>());
        }
      } else if (k == "subgroupMatrixConfigs") {
        for (size_t i = 0; i < array(v, kp).size(); ++i) r.subgroup_matrix_configs.push_back(object(v[i], idx(kp, i)));
      } else {
        fail(kp, "unknown requirement (features, limits, subgroupMatrixConfigs)");
      }
    }
    return r;
  }

  Variant variant(const json& j, const std::string& path, const Package& p) const {
    object(j, path);
    Variant v;
    v.path = path;
    v.id = string(need(j, "id", path), key(path, "id"));
    const json& pr = need(j, "priority", path);
    if (!pr.is_number()) fail(key(path, "priority"), "must be a number");
    v.priority = pr.get<double>();
    const json& when = array(need(j, "when", path), key(path, "when"));
    for (size_t i = 0; i < when.size(); ++i) v.when.push_back(expr(when[i], idx(key(path, "when"), i)));
    if (j.contains("constants")) v.constants = expr_map(j["constants"], key(path, "constants"));
    std::set<std::string> names;
    if (j.contains("intermediates")) {
      const json& im = array(j["intermediates"], key(path, "intermediates"));
      for (size_t i = 0; i < im.size(); ++i) {
        const std::string ip = idx(key(path, "intermediates"), i);
        object(im[i], ip);
        const std::string id = ident(need(im[i], "id", ip), key(ip, "id"));
        if (p.find_tensor(id)) fail(key(ip, "id"), "\"" + id + "\" is also an input or output role");
        if (!names.insert(id).second) fail(key(ip, "id"), "\"" + id + "\" is used twice");
        const std::string dtype = string(need(im[i], "dtype", ip), key(ip, "dtype"));
        if (dtype_size(dtype) == 0) fail(key(ip, "dtype"), "\"" + dtype + "\" is not a dtype");
        v.intermediates.push_back({id, dtype, ip, expr(need(im[i], "shape", ip), key(ip, "shape"))});
      }
    }
    const json& passes = array(need(j, "passes", path), key(path, "passes"), true);
    std::set<std::string> ids;
    for (size_t i = 0; i < passes.size(); ++i) v.passes.push_back(pass(passes[i], idx(key(path, "passes"), i), p, ids));
    if (j.contains("requires")) v.needs = requirements(j["requires"], key(path, "requires"));
    return v;
  }

 private:
  std::string where_;
};

void add_pass_sites(const Pass& s, int variant, std::vector<std::string> repeat,
                    std::vector<Package::ExprSite>& out) {
  if (s.is_repeat()) {
    out.push_back({key(key(s.path, "repeat"), "count"), &*s.repeat_count, variant, repeat});
    repeat.push_back(s.repeat_index);
    for (const Pass& inner : s.passes) add_pass_sites(inner, variant, repeat, out);
    return;
  }
  const std::string dp = key(s.path, "dispatch");
  for (const auto& [name, e] : {std::pair{"threads", &s.threads}, std::pair{"x", &s.x}, std::pair{"y", &s.y},
                                std::pair{"z", &s.z}, std::pair{"workgroupSize", &s.workgroup_size}})
    if (*e) out.push_back({key(dp, name), &**e, variant, repeat});
  for (const auto& [k, e] : s.source_inputs) out.push_back({key(key(key(s.path, "source"), "inputs"), k), &e, variant, repeat});
}

void collect_repeat_indexes(const Pass& s, std::set<std::string>& out) {
  if (s.is_repeat()) out.insert(s.repeat_index);
  for (const Pass& inner : s.passes) collect_repeat_indexes(inner, out);
}

// Every name an expression reads must exist (see package.h).
void check_names(const Package& p, const Package::ExprSite& site, const Loader& l) {
  for (const auto& [path, at] : site.expr->paths()) {
    const size_t pos = at;  // a copy: Clang before 16 cannot capture a structured binding in a lambda
    const size_t dot = path.find('.');
    const std::string root = path.substr(0, dot);
    const std::string member = dot == std::string::npos ? "" : path.substr(dot + 1, path.find('.', dot + 1) - dot - 1);
    auto unknown = [&](const std::string& what) {
      l.fail(site.path, "expression \"" + site.expr->source() + "\": " + what + " at character " +
                            std::to_string(pos + 1));
    };
    if (p.derive.count(root)) continue;
    if (!kNamespaces.count(root)) unknown("unknown name '" + root + "'");
    if (member.empty()) continue;
    if (root == "attrs" && !p.attribute_names.count(member)) unknown("unknown attribute 'attrs." + member + "'");
    if ((root == "shapes" || root == "ranks" || root == "tensorDtypes") && !p.find_tensor(member))
      unknown("unknown role '" + root + "." + member + "'");
    if (root == "tunables" && !p.tunables.contains(member)) unknown("unknown tunable 'tunables." + member + "'");
    if (root == "repeat" && std::find(site.repeat.begin(), site.repeat.end(), member) == site.repeat.end())
      unknown("'repeat." + member + "' outside a repeat block with index " + member);
    if (root == "device" && member != "limits" && member != "features" && member != "adapterInfo")
      unknown("unknown name 'device." + member + "' (device.limits, device.features, device.adapterInfo)");
    if (root == "constants") {
      bool found = p.constants.count(member) > 0;
      for (size_t v = 0; v < p.variants.size() && !found; ++v)
        if (site.variant < 0 || (int)v == site.variant) found = p.variants[v].constants.count(member) > 0;
      if (!found) unknown("unknown constant 'constants." + member + "'");
    }
  }
}

}  // namespace

size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float64", 8}, {"uint8", 1}, {"int8", 1},
      {"uint16", 2},  {"int16", 2},   {"uint32", 4},   {"int32", 4},   {"uint64", 8}, {"int64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

const TensorSpec* Package::find_tensor(const std::string& role) const {
  for (const auto* list : {&inputs, &outputs})
    for (const auto& t : *list)
      if (t.role == role) return &t;
  return nullptr;
}

std::vector<Package::ExprSite> Package::expressions() const {
  std::vector<ExprSite> out;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].shape) out.push_back({"outputs[" + std::to_string(i) + "].shape", &*outputs[i].shape});
  for (const auto& [k, e] : derive) out.push_back({"derive." + k, &e});
  for (const auto& [k, e] : constants) out.push_back({"constants." + k, &e});
  const std::vector<std::string> all_repeat(repeat_indexes.begin(), repeat_indexes.end());
  for (const auto& [name, slots] : binding_sets)
    for (size_t i = 0; i < slots.size(); ++i)
      for (size_t f = 0; f < slots[i].fields.size(); ++f)
        out.push_back({"bindingSets." + name + "[" + std::to_string(i) + "].struct.fields[" + std::to_string(f) +
                           "].value",
                       &slots[i].fields[f].value, -1, all_repeat});
  for (size_t v = 0; v < variants.size(); ++v) {
    const Variant& var = variants[v];
    for (const auto& [k, e] : var.constants) out.push_back({var.path + ".constants." + k, &e, (int)v});
    for (size_t i = 0; i < var.when.size(); ++i) out.push_back({idx(var.path + ".when", i), &var.when[i], (int)v});
    for (const auto& im : var.intermediates) out.push_back({im.path + ".shape", &im.shape, (int)v});
    for (const Pass& s : var.passes) add_pass_sites(s, (int)v, {}, out);
  }
  return out;
}

Package parse_package(const json& j, const std::string& where) {
  const Loader l(where);
  l.object(j, "");
  Package p;
  p.where = where;
  p.name = l.string(l.need(j, "name", ""), "name");
  if (j.contains("domain")) p.domain = l.string(j["domain"], "domain");

  if (j.contains("typeConstraints"))
    for (const auto& [k, v] : l.object(j["typeConstraints"], "typeConstraints").items()) {
      const std::string kp = key("typeConstraints", k);
      for (size_t i = 0; i < l.array(v, kp, true).size(); ++i) {
        const std::string d = l.string(v[i], idx(kp, i));
        if (dtype_size(d) == 0) l.fail(idx(kp, i), "\"" + d + "\" is not a dtype");
        p.type_constraints[k].push_back(d);
      }
    }
  const json& inputs = l.array(l.need(j, "inputs", ""), "inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorSpec t = l.tensor(inputs[i], idx("inputs", i), false, p);
    if (p.find_tensor(t.role)) l.fail(idx("inputs", i) + ".role", "\"" + t.role + "\" is used twice");
    p.inputs.push_back(std::move(t));
  }
  const json& outputs = l.array(l.need(j, "outputs", ""), "outputs", true);
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorSpec t = l.tensor(outputs[i], idx("outputs", i), true, p);
    if (p.find_tensor(t.role)) l.fail(idx("outputs", i) + ".role", "\"" + t.role + "\" is used twice");
    p.outputs.push_back(std::move(t));
  }

  if (j.contains("attributes")) p.defaults = l.object(j["attributes"], "attributes");
  for (const auto& [k, v] : p.defaults.items()) {
    if (v.is_null()) l.fail(key("attributes", k), "a default cannot be null");
    p.attribute_names.insert(k);
  }
  if (j.contains("attributeDescriptions"))
    for (const auto& [k, v] : l.object(j["attributeDescriptions"], "attributeDescriptions").items()) {
      l.string(v, key("attributeDescriptions", k));
      p.attribute_names.insert(k);
    }
  if (j.contains("attributeConstraints"))
    for (const auto& [k, v] : l.object(j["attributeConstraints"], "attributeConstraints").items()) {
      const std::string kp = key("attributeConstraints", k);
      const json& values = l.array(l.need(l.object(v, kp), "values", kp), key(kp, "values"), true);
      p.allowed[k] = std::vector<json>(values.begin(), values.end());
      p.attribute_names.insert(k);
      if (p.defaults.contains(k) && std::find(values.begin(), values.end(), p.defaults[k]) == values.end())
        l.fail(kp, "the default " + p.defaults[k].dump() + " is not one of the allowed values");
    }
  for (const auto& name : p.attribute_names)
    if (!is_identifier(name)) l.fail("attributes", "\"" + name + "\" is not a name (letters, digits, _)");

  if (j.contains("tunables"))
    for (const auto& [k, v] : l.object(j["tunables"], "tunables").items()) {
      if (!v.is_primitive() || v.is_null()) l.fail(key("tunables", k), "must be a number, string or boolean");
      p.tunables[k] = v;
    }
  if (j.contains("derive")) p.derive = l.expr_map(j["derive"], "derive");
  for (const auto& [k, e] : p.derive)
    if (kNamespaces.count(k)) l.fail("derive." + k, "\"" + k + "\" is a reserved name (" + k + ".X)");
  if (j.contains("constants")) p.constants = l.expr_map(j["constants"], "constants");

  if (j.contains("bindingSets"))
    for (const auto& [k, set] : l.object(j["bindingSets"], "bindingSets").items()) {
      std::vector<BindingSlot>& slots = p.binding_sets[k];
      const std::string sp = key("bindingSets", k);
      for (size_t i = 0; i < l.array(set, sp).size(); ++i) {
        const std::string bp = idx(sp, i);
        const json& b = l.object(set[i], bp);
        BindingSlot slot;
        slot.name = l.string(l.need(b, "name", bp), key(bp, "name"));
        slot.semantic = l.string(l.need(b, "semantic", bp), key(bp, "semantic"));
        if (b.contains("buffer") && b["buffer"].contains("type"))
          slot.type = l.string(b["buffer"]["type"], key(key(bp, "buffer"), "type"));
        if (slot.type != "storage" && slot.type != "read-only-storage" && slot.type != "uniform")
          l.fail(key(key(bp, "buffer"), "type"), "must be \"storage\", \"read-only-storage\" or \"uniform\"");
        if (b.contains("elementType")) slot.element_type = l.string(b["elementType"], key(bp, "elementType"));
        if (b.contains("struct")) {
          const std::string fp = key(key(bp, "struct"), "fields");
          slot.struct_name = b["struct"].contains("name") ? l.string(b["struct"]["name"], key(key(bp, "struct"), "name"))
                                                          : std::string("Params");
          const json& fields = l.array(l.need(l.object(b["struct"], key(bp, "struct")), "fields", key(bp, "struct")), fp);
          for (size_t f = 0; f < fields.size(); ++f) {
            const json& field = l.object(fields[f], idx(fp, f));
            BindingSlot::Field out{l.string(l.need(field, "name", idx(fp, f)), key(idx(fp, f), "name")),
                                   l.string(l.need(field, "type", idx(fp, f)), key(idx(fp, f), "type")),
                                   l.expr(l.need(field, "value", idx(fp, f)), key(idx(fp, f), "value"))};
            if (out.type != "u32" && out.type != "i32" && out.type != "f32")
              l.fail(key(idx(fp, f), "type"), "must be u32, i32 or f32");
            slot.fields.push_back(std::move(out));
          }
        }
        slots.push_back(std::move(slot));
      }
    }

  const json& variants = l.array(l.need(j, "variants", ""), "variants", true);
  std::set<std::string> ids;
  for (size_t i = 0; i < variants.size(); ++i) {
    Variant v = l.variant(variants[i], idx("variants", i), p);
    if (!ids.insert(v.id).second) l.fail(idx("variants", i) + ".id", "\"" + v.id + "\" is used twice");
    for (const Pass& s : v.passes) collect_repeat_indexes(s, p.repeat_indexes);
    p.variants.push_back(std::move(v));
  }
  for (const auto& site : p.expressions()) check_names(p, site, l);
  return p;
}

Package load_package(const std::string& path) {
  const json j = parse_json_file(path);
  return parse_package(j, path);
}

}  // namespace bonfire::kernels
