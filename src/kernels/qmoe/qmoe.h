// QMoE on the CPU: the pass functions of spec/kernels/qmoe.json, exact to
// ONNX Runtime's CPU QMoE (com.microsoft, opset 1) as of onnxruntime 1.30.
//
// The package's intermediates are the contract between the passes:
//   routeExpert u32 [numTokens * topK]   slot s = token * topK + j, j-th best
//                                        expert; kNoExpert when the slot is
//                                        skipped (its weight is not > 1e-8f,
//                                        NaN included), as ORT skips it
//   routeMix    f32 [numTokens * topK]   the slot's routing weight; 0 when
//                                        skipped
//   hiddenAct   f32 [hiddenChunkTokens * topK * interSize]
//                                        the activated FC1 output of local
//                                        slot (token - tokenOffset) * topK + j;
//                                        rows of skipped slots are not written
//   slotList    u32 [max(1, groupSlots)] the chunk's active local slots, by
//                                        expert, in slot order within one
//   tileMeta    u32 [1 + 3 * groupMaxTiles]
//                                        [0] tile count, then per tile
//                                        (expert, first index into slotList,
//                                        slot count <= groupTileM)
//   slotOut     f32 [max(1, hiddenChunkTokens * topK * hiddenSize)]
//                                        the FC2 output of each active local
//                                        slot, before its routing weight
// A repeat block covers tokens [chunk * hiddenChunkTokens, +tokenCount).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/pass.h"

namespace bonfire::kernels::qmoe {

constexpr uint32_t kNoExpert = 0xFFFFFFFFu;
// ORT adds a slot to its expert only when its weight is above this.
constexpr float kMinRouteWeight = 1e-8f;

// One expert's quantized matrix [rows, cols]: `bits` 4 (two columns a byte,
// the even column in the low nibble) or 8, symmetric around `midpoint`, with
// `scale_blocks` f32 scales per row (1: column-wise).
struct QMatrix {
  int bits = 4;
  int midpoint = 8;
  const uint8_t* data = nullptr;  // row r at data + r * row_bytes
  const float* scales = nullptr;  // row r's at scales + r * scale_blocks
  int64_t rows = 0, cols = 0, row_bytes = 0, scale_blocks = 1;
};

// Everything a pass needs, read from its arguments once.
struct Problem {
  int64_t tokens = 0, hidden = 0, experts = 0, topk = 0, inter = 0, fc1_rows = 0;
  int bits = 4, midpoint = 8;
  bool swiglu = false;
  float alpha = 1.0f, beta = 0.0f, limit = 0.0f;  // limit: +inf when absent
  // The current repeat chunk (the whole call outside one).
  int64_t chunk_tokens = 0, token_offset = 0, token_count = 0;

  const float* input = nullptr;   // [tokens, hidden]
  const float* router = nullptr;  // [tokens, experts]
  const uint8_t* fc1 = nullptr;   // [experts, fc1_rows, hidden / pack]
  const float* fc1_scales = nullptr;
  const uint8_t* fc2 = nullptr;   // [experts, hidden, inter / pack]
  const float* fc2_scales = nullptr;
  int64_t fc1_blocks = 1, fc2_blocks = 1;  // scales per row

  QMatrix fc1_of(int64_t e) const;
  QMatrix fc2_of(int64_t e) const;
};

// Reads the attributes, the shapes of the bound tensors and the chunk.
// `need_weights`: the pass reads the expert weights (checks their sizes).
Problem problem_of(PassArgs& a, bool need_weights);

// The buffer bound as `name`, checked for its dtype and for holding at
// least `min_elems` elements; an Internal error otherwise.
Buffer& bound(PassArgs& a, const std::string& name, const char* dtype, int64_t min_elems);
template <class T>
T* buffer(PassArgs& a, const std::string& name, const char* dtype, int64_t min_elems) {
  return bound(a, name, dtype, min_elems).template as<T>();
}

// ---- the passes -------------------------------------------------------------

void route_stage(PassArgs& a);        // QMoE.RouteStage
void group_stage(PassArgs& a);        // QMoE.GroupStage
void mix_stage(PassArgs& a);          // QMoE.MixStage
void output_zero_inter(PassArgs& a);  // QMoE.OutputStageZeroInter
// The FC1 and output stages of the split, GEMV and grouped forms (stages.cpp).
void register_stage_passes(void (*add)(const std::string&, PassFn));

// The chunk's output rows: 0, then each active slot's row of slot_out
// (local slot order) times its routing weight.
void mix_rows(const Problem& p, const float* mix, const float* slot_out, float* output);

// The parallel_for grain when one item costs `work` multiply-adds: items
// enough for about 2^16 of them, so that a small call stays on one thread
// (waking the others would cost more than the work).
inline int64_t grain_for(int64_t work) { return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, work)); }

// ---- activations (ORT's float formulas) -------------------------------------

// FC1 rows [r0, r0 + n) of one slot (fc1_out[i] is row r0 + i) through the
// activation into hidden (the slot's inter-size row). r0 and n are even for
// SwiGLU, whose gate is the even row and linear part the odd one.
void activate(const Problem& p, const float* fc1_out, int64_t r0, int64_t n, float* hidden);

// ---- expert matrix products (experts.cpp) -----------------------------------

// A group of slots that use one expert: rows of x (`x_rows[i]`) in, rows of
// y (`y_rows[i]`) out.
struct SlotGroup {
  int64_t expert = 0;
  std::vector<const float*> x_rows;
  std::vector<float*> y_rows;
};

// y[i][r] = act(W1_e · x[i]) for rows r of FC1 (activated to inter size), or
// y[i][r] = W2_e · x[i] for FC2, over all groups, split over the threads.
// `batch_limit`: most slots of a group that share one pass over the weight
// (1: every slot streams the weight alone; larger groups go through a GEMM).
enum class Layer { FC1, FC2 };
void run_groups(const Problem& p, Layer layer, const std::vector<SlotGroup>& groups, int64_t batch_limit);

// ---- SIMD kernels (simd.cpp, Highway with run-time dispatch) ---------------

// x (w.cols values) as the dot kernels want it for matrices of w's shape
// (every expert of a layer shares it), in prepared_x_size(w) floats: for 4
// bits its even columns then its odd ones (the low and high nibbles of a
// byte meet them side by side), or on AVX2 the word layout of
// gemv_avx2-inl.h; for 8 bits a plain copy. The layout is the SIMD target's,
// so x must be prepared and multiplied under one target (Highway keeps one a
// process; only a test that forces another between the calls could split
// them).
int64_t prepared_x_size(const QMatrix& w);
void prepare_x(const QMatrix& w, const float* x, float* out);
// out[m * ldo + i] = W[r0 + i] · x_m for i < nr and m < nx (nx <= 4), where
// x_m = xs + m * ldx is prepared for w's shape (ldx >= prepared_x_size(w)).
void qgemv(const QMatrix& w, int64_t r0, int64_t nr, const float* xs, int64_t ldx, int nx, float* out,
           int64_t ldo);
// c [m, i] = a [m, :] . W[r0 + i] for i < r and m < M, W's rows dequantized
// to f32 exactly as ORT does, scale * (q - midpoint) rounded to f32 (as ORT
// multiplies its dequantized experts with MLAS SGEMM): the grouped form's
// GEMM over one tile of an expert's rows, each output a sum over the columns
// in order.
void expert_tile_gemm(const QMatrix& w, int64_t r0, int64_t r, const float* a, int64_t m, int64_t lda, float* c,
                      int64_t ldc);

}  // namespace bonfire::kernels::qmoe
