#include "apps/kernel_commands.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "apps/cli_util.h"
#include "apps/compute_options.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/threads.h"
#include "graph/wire.h"
#include "kernels/case_dir.h"
#include "kernels/check.h"
#include "kernels/device.h"
#include "kernels/gpu_ops.h"
#include "kernels/gpu_plan.h"
#include "kernels/package.h"
#include "kernels/runtime.h"
#include "kernels/select.h"
#include "model/wgsl_renderer.h"

namespace bonfire {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string package, shapes, attrs = "{}", dtypes, device, case_dir, variant;
  std::string op, params = "{}", inputs;  // kernel plan-op
};

// Inline JSON, or @FILE.
json json_arg(const std::string& text, const std::string& what) {
  if (!text.empty() && text[0] == '@') return parse_json_file(text.substr(1));
  return parse_json(text, what);
}

kernels::Device device_of(const Options& o) {
  return o.device.empty() ? kernels::cpu_device() : kernels::load_device(o.device);
}

kernels::Problem problem_of_args(const Options& o) {
  kernels::Problem p;
  const json shapes = json_arg(o.shapes, "--shapes");
  if (!shapes.is_object()) throw Error(ErrorCode::BadGraph, "--shapes: an object of shapes by role");
  for (const auto& [role, s] : shapes.items()) {
    if (!s.is_array()) throw Error(ErrorCode::BadGraph, role + ": the shape must be a list of sizes");
    for (const auto& d : s)
      if (!d.is_number_integer()) throw Error(ErrorCode::BadGraph, role + ": shape " + s.dump() + " is not sizes");
    p.shapes[role] = s.get<std::vector<int64_t>>();
  }
  p.attrs = json_arg(o.attrs, "--attrs");
  if (!o.dtypes.empty()) {
    const json d = json_arg(o.dtypes, "--dtypes");
    if (!d.is_object()) throw Error(ErrorCode::BadGraph, "--dtypes: an object of dtype names by role");
    for (const auto& [role, v] : d.items()) {
      if (!v.is_string()) throw Error(ErrorCode::BadGraph, role + ": the dtype must be a string");
      p.dtypes[role] = v;
    }
  }
  return p;
}

int select_command(const Options& o) {
  int status = 1;
  const int failed = guarded([&] {
    const kernels::Package pkg = kernels::load_package(o.package);
    const kernels::Device device = device_of(o);
    const kernels::Bound bound = kernels::check_problem(pkg, problem_of_args(o), device);
    const kernels::Selection s = kernels::select_variant(pkg, bound, device);
    // The explanation with each variant's keys in reading order (id first).
    const json e = s.explain();
    nlohmann::ordered_json out = {{"variant", e["variant"]}, {"variants", nlohmann::ordered_json::array()}};
    for (const json& v : e["variants"]) {
      nlohmann::ordered_json o = {{"id", v["id"]}, {"priority", v["priority"]}, {"selected", v["selected"]}};
      if (v.contains("failed")) o["failed"] = v["failed"];
      out["variants"].push_back(o);
    }
    if (s.chosen < 0) out["error"] = "no variant of " + pkg.name + " applies on " + device.name;
    std::cout << out.dump(2) << "\n";
    status = s.chosen < 0 ? 1 : 0;
  });
  return failed ? 1 : status;
}

int run_command(const Options& o) {
  int status = 1;
  const int failed = guarded([&] {
    const kernels::Package pkg = kernels::load_package(o.package);
    const kernels::Device device = device_of(o);
    kernels::CaseDir c = kernels::load_case(o.case_dir);
    if (!c.op.empty() && c.op != pkg.name)
      throw Error(ErrorCode::BadGraph, o.case_dir + ": the case is for op " + c.op + ", the package is " + pkg.name);
    std::map<std::string, kernels::Buffer> buffers = std::move(c.inputs);
    kernels::RunReport r;
    try {
      r = kernels::run_op(pkg, c.attrs, buffers, device);
    } catch (const Error& e) {
      if (!c.expected_error) throw;
      json j = error_to_json(e);
      j["expected_error"] = *c.expected_error;
      j["names_expected"] = std::string(e.what()).find(*c.expected_error) != std::string::npos;
      std::cout << j.dump(2) << "\n";
      return;  // refused, as expected or not: status stays 1
    }
    json out = {{"variant", r.variant}, {"seconds", r.seconds}, {"threads", num_threads()}, {"outputs", json::object()}};
    const fs::path out_dir = fs::path(o.case_dir) / "out";
    fs::create_directories(out_dir);
    for (const auto& t : pkg.outputs) {
      const std::string path = (out_dir / (t.role + ".bin")).string();
      kernels::write_buffer_file(path, buffers.at(t.role));
      out["outputs"][t.role] = path;
    }
    bool ok = true;
    for (const auto& [role, want] : c.expected_outputs) {
      if (!buffers.count(role)) throw Error(ErrorCode::BadGraph, "expected." + role + ": not an output of " + pkg.name);
      const auto cmp = kernels::compare(buffers.at(role), want, role, c.atol.value_or(-1), c.rtol.value_or(0));
      json jc = {{"max_abs", cmp.max_abs}, {"max_rel", cmp.max_rel}, {"numel", cmp.numel}};
      if (cmp.nan_mismatches) jc["nan_mismatches"] = cmp.nan_mismatches;
      if (c.atol) jc["over_tolerance"] = cmp.over_tolerance;
      if (c.atol && cmp.over_tolerance) ok = false;
      if (!c.atol && cmp.nan_mismatches) ok = false;
      out["compare"][role] = jc;
    }
    if (c.expected_error) {
      out["error"] = "the case expects a refusal naming " + *c.expected_error + ", but it ran";
      ok = false;
    }
    if (!c.expected_outputs.empty() || c.expected_error) out["ok"] = ok;
    std::cout << out.dump(2) << "\n";
    status = ok ? 0 : 1;
  });
  return failed ? 1 : status;
}

// The call of a plan: a case directory's, or --shapes/--attrs/--dtypes.
kernels::Problem plan_problem(const Options& o) {
  if (o.case_dir.empty()) return problem_of_args(o);
  kernels::CaseDir c = kernels::load_case(o.case_dir);
  kernels::Problem p;
  p.attrs = c.attrs;
  for (const auto& [role, b] : c.inputs) {
    p.shapes[role] = b.shape;
    p.dtypes[role] = b.dtype;
  }
  return p;
}

int plan_command(const Options& o) {
  int status = 1;
  const int failed = guarded([&] {
    const kernels::Package pkg = kernels::load_package(o.package);
    const kernels::Device device = device_of(o);
    const kernels::Bound bound = kernels::check_problem(pkg, plan_problem(o), device);
    const kernels::Selection s = kernels::select_variant(pkg, bound, device);
    int index = s.chosen;
    if (!o.variant.empty()) {
      index = -1;
      for (size_t i = 0; i < s.variants.size(); ++i)
        if (s.variants[i].id == o.variant) index = (int)i;
      if (index < 0) throw Error(ErrorCode::BadGraph, "--variant " + o.variant + ": " + pkg.name + " has no such variant");
      if (!s.variants[index].failed.is_null())
        throw Error(ErrorCode::UnsupportedFeature, "--variant " + o.variant + " does not apply on " + device.name +
                                                       ": " + s.variants[index].failed.dump());
    }
    if (index < 0)
      throw Error(ErrorCode::UnsupportedFeature,
                  "no variant of " + pkg.name + " applies on " + device.name + ": " + s.explain()["variants"].dump());
    const kernels::GpuPlan plan = kernels::plan_gpu(pkg, bound, device, index, render_wgsl);
    std::cout << plan.to_json().dump() << "\n";
    status = 0;
  });
  return failed ? 1 : status;
}

// One graph node's WebGPU plan (kernels/gpu_ops.h).
int plan_op_command(const Options& o) {
  return guarded([&] {
    const json inputs = json_arg(o.inputs, "--inputs");
    if (!inputs.is_array()) throw Error(ErrorCode::BadGraph, "--inputs: a list of {id, dtype, shape}");
    std::vector<kernels::GpuValue> values;
    for (const auto& v : inputs) {
      if (!v.is_object() || !v.contains("shape") || !v["shape"].is_array())
        throw Error(ErrorCode::BadGraph, "--inputs: each input is {id, dtype, shape}");
      values.push_back({v.value("id", "in" + std::to_string(values.size())), v.value("dtype", "float32"),
                        v["shape"].get<std::vector<int64_t>>()});
    }
    const kernels::Device device = device_of(o);
    const kernels::GpuPlan plan =
        kernels::plan_gpu_node(o.op, json_arg(o.params, "--params"), values, "y", device, render_wgsl);
    std::cout << plan.to_json().dump() << "\n";
  });
}

}  // namespace

std::function<int()> add_kernel_commands(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* kernel = app.add_subcommand("kernel", "kernel packages (docs/KERNELS.md): variant selection, running cases");
  kernel->require_subcommand(1);

  auto* select = kernel->add_subcommand("select", "which variant a package picks for these shapes on a device, and why");
  select->add_option("package", o->package, "the package (e.g. spec/kernels/qmoe.json)")->required();
  select->add_option("--shapes", o->shapes, "JSON (or @FILE): shapes by role; outputs may be omitted")->required();
  select->add_option("--attrs", o->attrs, "JSON (or @FILE): attributes (defaults from the package)");
  select->add_option("--dtypes", o->dtypes, "JSON (or @FILE): dtypes by role (default: the first allowed)");
  select->add_option("--device", o->device, "device file (default: the CPU worker, devices/cpu.json)");

  auto* run = kernel->add_subcommand("run", "run a case directory (DIR/case.json) through a package");
  run->add_option("package", o->package, "the package")->required();
  run->add_option("--case", o->case_dir, "the case directory; outputs go to DIR/out/<role>.bin")->required();
  run->add_option("--device", o->device, "device file (default: the CPU worker, devices/cpu.json)");
  add_compute_options(*run, false);

  auto* plan = kernel->add_subcommand(
      "plan", "the WebGPU plan of a call: buffers, rendered WGSL, dispatches (kernels/gpu_plan.h), as JSON");
  plan->add_option("package", o->package, "the package")->required();
  plan->add_option("--case", o->case_dir, "a case directory whose call is planned (instead of --shapes)");
  plan->add_option("--shapes", o->shapes, "JSON (or @FILE): shapes by role");
  plan->add_option("--attrs", o->attrs, "JSON (or @FILE): attributes");
  plan->add_option("--dtypes", o->dtypes, "JSON (or @FILE): dtypes by role");
  plan->add_option("--device", o->device, "device file (a GPU's, e.g. tests/kernels/devices/swiftshader.json)");
  plan->add_option("--variant", o->variant, "plan this variant (it must apply) instead of the chosen one");

  auto* plan_op = kernel->add_subcommand("plan-op", "the WebGPU plan of one graph op (kernels/gpu_ops.h), as JSON");
  plan_op->add_option("--op", o->op, "the op (add, mul, silu, rmsnorm, matmul, embedding)")->required();
  plan_op->add_option("--params", o->params, "JSON (or @FILE): the op's params, numbers only");
  plan_op->add_option("--inputs", o->inputs, "JSON (or @FILE): [{id, dtype, shape}] in the op's order")->required();
  plan_op->add_option("--device", o->device, "device file (a GPU's)");

  auto* device = kernel->add_subcommand("device", "print a device as packages see it (default: the CPU worker)");
  device->add_option("--device", o->device, "device file");

  return [o, kernel, select, run, plan, plan_op, device]() -> int {
    if (!*kernel) return -1;
    if (*plan_op) return plan_op_command(*o);
    if (*plan) {
      if (o->case_dir.empty() == o->shapes.empty()) {
        std::cerr << "kernel plan: give --case DIR or --shapes JSON (one of them)\n";
        return 2;
      }
      return plan_command(*o);
    }
    if (*select) return select_command(*o);
    if (*run) return run_command(*o);
    if (*device)
      return guarded([&] {
        device_of(*o);  // refuses a malformed file before printing it
        if (o->device.empty()) std::cout << kernels::cpu_device_text();
        else std::cout << parse_json_file(o->device).dump(2) << "\n";
      });
    return -1;
  };
}

}  // namespace bonfire
