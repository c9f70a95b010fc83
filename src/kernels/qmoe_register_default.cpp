// Placeholder until src/kernels/qmoe/ defines register_qmoe_passes(): no
// QMoE passes are registered, so running a QMoE variant is an error naming
// the missing pass. Delete this file when the real definition lands (a weak
// definition in a static library can hide a strong one that nothing else
// pulls in).
#include "kernels/pass.h"

namespace bonfire::kernels {

__attribute__((weak)) void register_qmoe_passes() {}

}  // namespace bonfire::kernels
