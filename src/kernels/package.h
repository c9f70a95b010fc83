// A kernel package (docs/KERNELS.md): an op described as data — its inputs,
// outputs and attributes with defaults and allowed values, type
// constraints, derived sizes (`derive`), constants, tunables, and variants
// chosen by `when` expressions and device requirements, each a list of
// passes (with `repeat` blocks) that C++ functions implement (pass.h).
//
// Promises: a loaded Package is structurally valid — every field the
// runtime reads has its type, ids are unique, every expression (derive,
// constants, when, shapes, dispatch sizes, repeat counts, binding values)
// parses with core/expr, and every name an expression reads exists (a
// derive name, or attrs.X / shapes.ROLE / ranks.ROLE / tensorDtypes.ROLE /
// tunables.X / constants.X / repeat.I / device.*, with X, ROLE, I known to
// the package). Anything else is Error(BadGraph) naming the file and the
// JSON path ("qmoe.json: variants[1].passes[1].repeat.count: ...").
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/expr.h"

namespace bonfire::kernels {

// Bytes per element of a dtype name ("float32" 4, "uint8" 1, "uint32" 4,
// ...); 0 when the name is not a dtype packages use.
size_t dtype_size(const std::string& dtype);

struct TensorSpec {
  std::string role;
  std::string dtype;           // a typeConstraints name ("T") or a dtype ("float32")
  std::optional<int64_t> rank;
  std::optional<Expr> shape;   // outputs: the shape expression ("shapes.input")
};

struct Pass {
  std::string id;
  std::string path;  // JSON path, for errors ("variants[1].passes[1]")
  // A pass: the registered function's name and the dispatch size, either
  // `threads` or x/y/z (absent axes are 1).
  std::string name;
  std::optional<Expr> threads, x, y, z, workgroup_size;
  // A repeat block: `count` times the inner passes, with repeat.<index>.
  std::optional<Expr> repeat_count;
  std::string repeat_index;
  std::vector<Pass> passes;
  std::vector<std::pair<std::string, Expr>> source_inputs;  // "source": {"inputs": {...}} (shader inputs)
  // GPU passes: the binding set the pass uses ("" when none) and its shader
  // template ("qmoe-route-stage.wgsl.jinja", from "shader" or
  // "source.shader"; "" when none). CPU passes ignore both.
  std::string bindings, shader;
  bool is_repeat() const { return repeat_count.has_value(); }
};

// One binding of a bindingSet: a buffer the GPU pass reads or writes.
// `semantic` names what is bound: a tensor's role ("router_probs"), an
// intermediate's id ("routeExpert"), or "kernel.params" for the uniform
// struct whose fields are expressions evaluated for each dispatch.
struct BindingSlot {
  struct Field {
    std::string name, type;  // type: "u32", "i32" or "f32"
    Expr value;
  };
  std::string name, semantic;
  std::string type;          // "storage", "read-only-storage" or "uniform"
  std::string element_type;  // "f32", "u32", ... (storage buffers)
  std::string struct_name;    // uniform structs: the WGSL struct's name ("Params")
  std::vector<Field> fields;
};

struct Intermediate {
  std::string id, dtype, path;
  Expr shape;
};

struct Requirements {
  std::vector<std::string> features;
  std::vector<std::pair<std::string, double>> limits;  // "max*": the device's must be >= ; "min*": <=
  std::vector<nlohmann::json> subgroup_matrix_configs;  // each must match one of the device's
};

struct Variant {
  std::string id, path;
  double priority = 0;
  std::vector<Expr> when;
  std::map<std::string, Expr> constants;
  std::vector<Intermediate> intermediates;
  std::vector<Pass> passes;
  Requirements needs;
};

struct Package {
  std::string where;  // the file, for errors
  std::string name, domain;
  std::vector<TensorSpec> inputs, outputs;
  nlohmann::json defaults = nlohmann::json::object();  // "attributes"
  std::set<std::string> attribute_names;  // defaults, descriptions and constraints together
  std::map<std::string, std::vector<nlohmann::json>> allowed;  // attributeConstraints.X.values
  std::map<std::string, std::vector<std::string>> type_constraints;
  nlohmann::json tunables = nlohmann::json::object();
  std::map<std::string, Expr> derive;
  std::map<std::string, Expr> constants;
  std::vector<Variant> variants;
  // Every expression in the package with its JSON path, in document order of
  // the sections (for tools and the tests that walk them all). `repeat` holds
  // the repeat indexes in scope; `variant` is -1 outside a variant.
  struct ExprSite {
    std::string path;
    const Expr* expr;
    int variant = -1;
    std::vector<std::string> repeat = {};
  };
  std::vector<ExprSite> expressions() const;

  const TensorSpec* find_tensor(const std::string& role) const;  // inputs, then outputs
  // bindingSets by name (passes may name one in "bindings"). The CPU
  // passes do not read them; the GPU plan (gpu_plan.h) binds by them, and
  // their struct field values are parsed and checked like every other
  // expression.
  std::map<std::string, std::vector<BindingSlot>> binding_sets;
  std::set<std::string> repeat_indexes;  // every repeat block's index name
};

Package parse_package(const nlohmann::json& j, const std::string& where);
Package load_package(const std::string& path);  // throws Error(BadGraph)

}  // namespace bonfire::kernels
