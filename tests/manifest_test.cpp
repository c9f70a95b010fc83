// The op table must match the manifest op for op, param for param, feature
// for feature; the vendored spec must match ../shared/spec.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/executor.h"
#include "ops/op.h"
#include "spec/manifest.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

std::string type_of(const ParamDef& p) {
  const char* base = p.type == ParamType::Number ? "number"
                     : p.type == ParamType::Bool ? "boolean"
                     : p.type == ParamType::String ? "string"
                     : p.type == ParamType::Array ? "array"
                                                  : "object";
  return std::string(base) + (p.optional ? "?" : "");
}

TEST(Manifest, RegistryMatchesManifest) {
  const json& m = spec::ops_manifest();
  std::set<std::string> manifest_ops;
  for (const auto& op : m["ops"]) {
    const std::string name = op["op"];
    manifest_ops.insert(name);
    const OpDef* def = find_op(name);
    ASSERT_NE(def, nullptr) << "op " << name << " is in the manifest but not the registry";
    EXPECT_EQ(def->min_inputs, op["minInputs"].get<int>()) << name;
    EXPECT_EQ(def->max_inputs, op["maxInputs"].get<int>()) << name;
    EXPECT_EQ(def->params.size(), op["params"].size()) << name;
    for (const auto& [pname, pdef] : op["params"].items()) {
      const ParamDef* p = def->param(pname);
      ASSERT_NE(p, nullptr) << name << "." << pname << " missing from the registry";
      EXPECT_EQ(type_of(*p), pdef["type"].get<std::string>()) << name << "." << pname;
    }
    std::set<std::string> want(op["features"].begin(), op["features"].end()), got;
    for (const auto& f : def->features) {
      // A param value that is a protocol extension (moe's layout "qmoe"):
      // an `ext.` feature beside the manifest's, checked below.
      if (f.name.rfind("ext.", 0) == 0) {
        EXPECT_FALSE(f.value.empty()) << name << ": extension feature " << f.name << " on a v3 op needs a value";
        continue;
      }
      got.insert(f.name);
      EXPECT_TRUE(m["features"].contains(f.name)) << f.name;
      for (const auto& p : f.params) EXPECT_NE(def->param(p), nullptr) << f.name << " names unknown param " << p;
      if (f.input >= 0) {
        EXPECT_LT(f.input, def->max_inputs) << f.name;
      }
    }
    EXPECT_EQ(got, want) << name;
    EXPECT_FALSE(def->extension) << name;
    EXPECT_EQ(def->mutates_input, op.value("mutatesInput", -1)) << name;
    const int wi = op.value("writesInput", -1);
    EXPECT_EQ(def->writes_inputs, wi >= 0 ? uint64_t(1) << wi : 0) << name;
    EXPECT_EQ(def->writes_inputs_of, nullptr) << name;
    EXPECT_NE(def->infer, nullptr) << name;
    EXPECT_NE(def->run, nullptr) << name;
  }
  // Protocol extension ops (docs/PROTOCOL-EXTENSIONS.md) are the only ops
  // beyond the manifest, and their features the only features beyond it.
  size_t v3_ops = 0;
  std::set<std::string> ext_features;
  for (const auto& def : op_registry()) {
    if (def.extension) {
      for (const auto& f : def.features) ext_features.insert(f.name);
      continue;
    }
    ++v3_ops;
    EXPECT_TRUE(manifest_ops.count(def.name)) << def.name << " is not in the manifest";
    for (const auto& f : def.features)
      if (f.name.rfind("ext.", 0) == 0) ext_features.insert(f.name);
  }
  EXPECT_EQ(v3_ops, m["ops"].size());
  std::set<std::string> all_features;
  for (const auto& [k, v] : m["features"].items()) all_features.insert(k);
  std::set<std::string> v3_features = implemented_features();
  for (const auto& f : ext_features) {
    EXPECT_FALSE(all_features.count(f)) << f << " is a manifest feature";
    v3_features.erase(f);
  }
  EXPECT_EQ(v3_features, all_features);
}

std::string slurp(const std::filesystem::path& p);

// Every extension op: not in the manifest, routed by `ext.` features the op
// always uses, and documented in docs/PROTOCOL-EXTENSIONS.md (a section
// "## `op`" naming its feature and every param).
TEST(Manifest, ExtensionOpsAreSeparateAndDocumented) {
  const json& m = spec::ops_manifest();
  const std::string doc = slurp(std::filesystem::path(BONFIRE_SOURCE_DIR) / "docs" / "PROTOCOL-EXTENSIONS.md");
  ASSERT_FALSE(doc.empty()) << "docs/PROTOCOL-EXTENSIONS.md is missing";
  size_t n = 0;
  for (const auto& def : op_registry()) {
    if (!def.extension) continue;
    ++n;
    for (const auto& op : m["ops"]) EXPECT_NE(op["op"].get<std::string>(), def.name) << "extension op in the manifest";
    ASSERT_FALSE(def.features.empty()) << def.name << " has no feature";
    bool always = false;
    for (const auto& f : def.features) {
      EXPECT_EQ(f.name.rfind("ext.", 0), 0u) << def.name << ": feature " << f.name << " lacks the ext. prefix";
      for (const auto& p : f.params) EXPECT_NE(def.param(p), nullptr) << f.name << " names unknown param " << p;
      always = always || f.always;
    }
    EXPECT_TRUE(always) << def.name << " needs a feature it always uses";
    const std::string head = "## `" + def.name + "`";
    const size_t at = doc.find(head);
    ASSERT_NE(at, std::string::npos) << "docs/PROTOCOL-EXTENSIONS.md has no section " << head;
    const size_t end = doc.find("\n## ", at + head.size());
    const std::string section = doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const auto& f : def.features)
      EXPECT_NE(section.find("`" + f.name + "`"), std::string::npos) << head << " does not name " << f.name;
    for (const auto& p : def.params)
      EXPECT_NE(section.find("`" + p.name + "`"), std::string::npos) << head << " does not document param " << p.name;
    EXPECT_NE(def.infer, nullptr) << def.name;
    EXPECT_NE(def.run, nullptr) << def.name;
  }
  EXPECT_GE(n, 6u);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Manifest, VendoredSpecEqualsShared) {
  namespace fs = std::filesystem;
  const fs::path mine = fs::path(BONFIRE_SOURCE_DIR) / "spec";
  const fs::path shared = fs::path(BONFIRE_SOURCE_DIR) / ".." / "shared" / "spec";
  if (!fs::exists(shared)) GTEST_SKIP() << "../shared/spec is not beside this checkout";
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(shared)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), shared);
    EXPECT_EQ(slurp(e.path()), slurp(mine / rel)) << "spec/" << rel.string() << " differs from ../shared/spec";
    ++files;
  }
  EXPECT_GT(files, 3u);
  for (const auto& e : fs::recursive_directory_iterator(mine))
    if (e.is_regular_file()) {
      EXPECT_TRUE(fs::exists(shared / fs::relative(e.path(), mine))) << e.path();
    }
}

TEST(Manifest, EmbeddedTextIsTheVendoredFile) {
  EXPECT_EQ(std::string(spec::ops_manifest_text()),
            slurp(std::filesystem::path(BONFIRE_SOURCE_DIR) / "spec" / "ops-v3.json"));
}

}  // namespace
}  // namespace bonfire
