#include "kernels/graph_ops.h"

#include "core/error.h"
#include "kernels/check.h"
#include "kernels/device.h"
#include "kernels/runtime.h"
#include "ops/moe_qmoe.h"
#include "spec/manifest.h"

namespace bonfire::kernels {

namespace {

bool is_scale(size_t i) { return i == 3 || i == 5; }

// The package's dtype name for graph input i. Scales may be stored f16/bf16
// in a checkpoint; the package's T2 is float32, so they are widened.
std::string dtype_for(const TensorDesc& d, size_t i) {
  if (is_scale(i) && (d.dtype == DType::F16 || d.dtype == DType::BF16)) return "float32";
  switch (d.dtype) {
    case DType::F32: return "float32";
    case DType::U8: return "uint8";
    case DType::I8: return "int8";
    case DType::I32: return "int32";
    default: return dtype_name(d.dtype);  // refused by the package, naming the role
  }
}

Problem problem_for(const nlohmann::json& attrs, const std::vector<TensorDesc>& in) {
  if (in.size() != 6) throw Error(ErrorCode::BadGraph, "QMoE takes 6 tensors, got " + std::to_string(in.size()));
  Problem p;
  p.attrs = attrs;
  for (size_t i = 0; i < in.size(); ++i) {
    p.shapes[kQmoeRoles[i]] = in[i].shape;
    p.dtypes[kQmoeRoles[i]] = dtype_for(in[i], i);
  }
  return p;
}

void check_call(const nlohmann::json& attrs, const std::vector<TensorDesc>& in) {
  check_problem(qmoe_package(), problem_for(attrs, in), cpu_device());
}

void run_call(const nlohmann::json& attrs, const std::vector<const Tensor*>& in, Tensor& out) {
  std::vector<TensorDesc> d;
  for (const Tensor* t : in) d.push_back(t->desc());
  problem_for(attrs, d);  // arity
  std::map<std::string, Buffer> buffers;
  std::vector<Tensor> widened;  // kept alive until the run ends
  widened.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor* t = in[i];
    if (is_scale(i) && (t->dtype == DType::F16 || t->dtype == DType::BF16)) {
      widened.push_back(to_f32(*t));
      t = &widened.back();
    }
    Buffer b;
    b.dtype = dtype_for(t->desc(), i);
    b.shape = t->shape;
    b.view = static_cast<const uint8_t*>(t->data);
    b.view_size = (size_t)t->nbytes();
    buffers.emplace(kQmoeRoles[i], std::move(b));
  }
  // The output is written where the graph wants it.
  Buffer o;
  o.dtype = "float32";
  o.shape = out.shape;
  o.view = static_cast<const uint8_t*>(out.data);
  o.view_size = (size_t)out.nbytes();
  buffers.emplace("output", std::move(o));
  static PlanCache plans(qmoe_package(), cpu_device());
  plans.run(attrs, buffers);
  const Buffer& written = buffers.at("output");
  if (written.view != out.data)
    throw Error(ErrorCode::Internal, "QMoE: the package's output is " + written.dtype + " of " +
                                         std::to_string(written.size_bytes()) + " bytes, the graph expects " +
                                         shape_str(out.shape) + " f32");
}

const QmoeBackend kBackend = {check_call, run_call};

}  // namespace

std::string_view qmoe_package_text() { return spec::qmoe_package_text(); }

const Package& qmoe_package() {
  static const Package p = parse_package(nlohmann::json::parse(spec::qmoe_package_text()), "spec/kernels/qmoe.json (built in)");
  return p;
}

void install_graph_ops() { set_qmoe_backend(&kBackend); }

}  // namespace bonfire::kernels
