// IR → protocol graph (docs/IR.md, spec/PROTOCOL.md). One graph per step:
// a prefill of T tokens allocates the session's state (zeros + retain) and
// fills it; a decode step writes one row in place and is re-run with a new
// `bind` ({"pos": p, "step": s}). A pipeline stage lowers a range of layers
// only, with its own session (docs/IR.md §13). The document must have passed
// validation (validate.h); what the lowering cannot express is an Error
// naming the node.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/weights.h"

namespace bonfire::ir {

using nlohmann::json;

struct LowerOptions {
  std::string mode = "decode";  // "prefill" or "decode"
  int64_t tokens = 1;           // T, the tokens of the step (decode: 1)
  int64_t ctx = 0;              // the session's context length; 0 = model.ctx
  bool allocate = true;         // prefill creates the state (false: continue a session)
  bool all_logits = false;      // logits of every position, else the last one
  bool logits = true;           // output "logits"
  // Sampling on the worker: null for none; else the sample op's params
  // (temperature, topK, topP, seed, repetitionPenalty, presencePenalty,
  // penaltyWindow). The graph then outputs "token", with the RNG step bound
  // to `step`; penalties read a token history kept in the session.
  json sample;
  std::string model_id;  // the call's "model" field, when set
  // A pipeline stage (docs/IR.md §13): layers [first_layer, end_layer).
  // The first stage runs the embed section, the last the head (and the
  // logits/sample options above, which other stages ignore); the values
  // that cross a boundary are graph inputs/outputs (stage_carry).
  int64_t first_layer = 0;  // the stage's first layer
  int64_t end_layer = -1;   // one past its last layer; -1 = n_layers
};

// The graph call (without "inputs", "bind" and "session", which vary per
// step): {"model"?, "weights", "nodes", "outputs", "retain"?}. Weight shapes
// come from `weights` when given (needed by nodes whose widths the document
// does not fix, e.g. a split of a linear's output by groups); null lowers
// from the document alone.
json lower(const json& doc, const LowerOptions& options, const WeightStore* weights = nullptr);

// A value that crosses the boundary before layer `boundary`: an output of
// the stage that ends there and an input of the stage that starts there,
// under the same name, [T, width] f32 (T = the step's tokens). These are the
// values defined before the boundary (by embed or earlier layers) that a
// later layer or the head reads; a list value crosses item by item. The
// boundary is part of the name because a middle stage has both its input
// and its output of the same value, and a graph's names are unique.
struct CarryValue {
  std::string name;    // "carry.L<boundary>.<value>", for a list item "carry.L<boundary>.<value>.<item>"
  std::string value;   // the IR name ("x", "hs")
  int64_t item = -1;   // the entry of a list value; -1 for a plain value
  int64_t width = -1;  // -1 when neither the document nor the weights fix it
};

// What crosses the boundary before layer `boundary` (0 < boundary <
// n_layers), in the order of the stages' outputs. "tokens" is never carried:
// every stage may be given it (the embed and the head's penalties read it).
// Throws Error(BadGraph) when the model cannot be split there (a layer past
// the boundary reads another layer's KV cache before it: kv_from).
std::vector<CarryValue> stage_carry(const json& doc, int64_t boundary, const WeightStore* weights = nullptr);

// Session tensor names the lowering uses, e.g. "L3.kv.k".
std::string state_name(int64_t layer, const std::string& slot, const std::string& tensor);

}  // namespace bonfire::ir
