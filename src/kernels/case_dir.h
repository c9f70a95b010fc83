// Case directories for `bonfire kernel run PACKAGE --case DIR`
// (docs/KERNELS.md): DIR/case.json names the op, its attributes and its
// input tensors (raw little-endian files beside it, or inline "data"), and
// may carry the expected outputs or the attribute an error must name.
//
// Promises: every tensor file is exactly numel * dtype size bytes, or the
// error names the role and both sizes; write_buffer_file never leaves a
// partial file (a temporary file renamed into place).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernels/pass.h"

namespace bonfire::kernels {

struct CaseDir {
  std::string dir;
  std::string op;                       // "op", may be empty
  nlohmann::json attrs = nlohmann::json::object();
  std::map<std::string, Buffer> inputs;  // by role
  // "expected": {"error": "ATTR"} → expected_error; {"<role>": {"file", ...}}
  // → expected_outputs (loaded), with optional "atol"/"rtol" beside them.
  std::optional<std::string> expected_error;
  std::map<std::string, Buffer> expected_outputs;
  std::optional<double> atol, rtol;
};

CaseDir load_case(const std::string& dir);

// A tensor from {"file": "x.bin", "dtype", "shape"} or {"data": [...], "dtype", "shape"};
// files are relative to `dir`. `what` names it in errors.
Buffer read_tensor(const nlohmann::json& spec, const std::string& dir, const std::string& what);

// Writes the raw bytes to `path` via a temporary file and a rename.
void write_buffer_file(const std::string& path, const Buffer& b);

struct Comparison {
  int64_t numel = 0;
  double max_abs = 0;  // max |got - want|
  double max_rel = 0;  // max |got - want| / max(|want|, 1e-6)
  int64_t nan_mismatches = 0;  // NaN in one and not the other (or inf of other sign)
  int64_t over_tolerance = 0;  // elements with |got - want| > atol + rtol |want| (when given)
};
// Both float32 with equal element counts, else Error naming `what`.
Comparison compare(const Buffer& got, const Buffer& want, const std::string& what, double atol = -1,
                   double rtol = 0);

}  // namespace bonfire::kernels
