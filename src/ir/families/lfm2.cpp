// LFM2 mixes gated short-convolution layers with attention layers. IR v1
// cannot say that: `apply` (the per-layer switch) is not allowed on the
// stateful ops (attention, conv1d_causal) by spec/ir.schema.json, and no
// other field turns a stateful node off on some layers. So there is no
// document for it; the error says so instead of emitting one that fails
// validation. (The ops engine runs LFM2 blocks: short_conv.)
#include "core/error.h"
#include "ir/families/families.h"

namespace bonfire::ir {

nlohmann::json lfm2_ir(const ModelConfig& c) {
  throw Error(ErrorCode::BadGraph,
              c.source + ": LFM2 alternates convolution and attention layers, which IR v1 cannot express (the schema "
                         "allows no per-layer \"apply\" on attention or conv1d_causal); no IR document for it");
}

}  // namespace bonfire::ir
