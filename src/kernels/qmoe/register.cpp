// Every pass name of spec/kernels/qmoe.json, bound to its CPU function.
#include "kernels/qmoe/qmoe.h"

namespace bonfire::kernels {

void register_qmoe_passes() {
  register_pass("QMoE.RouteStage", qmoe::route_stage);
  register_pass("QMoE.GroupStage", qmoe::group_stage);
  register_pass("QMoE.MixStage", qmoe::mix_stage);
  register_pass("QMoE.OutputStageZeroInter", qmoe::output_zero_inter);
  qmoe::register_stage_passes(
      [](const std::string& name, PassFn fn) { register_pass(name, fn); });
}

}  // namespace bonfire::kernels
