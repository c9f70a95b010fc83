// The kernels layer's side of the QMoE graph ops (ops/moe_qmoe.h): moe's
// layout "qmoe" and the extension op `qmoe` run the QMoE package
// (spec/kernels/qmoe.json, compiled in) through check_problem and run_op on
// the built-in CPU device, exactly as `bonfire kernel run` does.
//
// Promises: install_graph_ops() is idempotent and runs before main in every
// binary that links the package runtime (a static initialiser in
// runtime.cpp calls it). Weights are read in place (Buffer views); only f16
// or bf16 scales are widened to f32 per call.
#pragma once
#include <string_view>

#include "kernels/package.h"

namespace bonfire::kernels {

void install_graph_ops();
const Package& qmoe_package();    // the compiled-in spec/kernels/qmoe.json
std::string_view qmoe_package_text();  // its text

}  // namespace bonfire::kernels
