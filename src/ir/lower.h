// IR → protocol graph (docs/IR.md, spec/PROTOCOL.md). One graph per step:
// a prefill of T tokens allocates the session's state (zeros + retain) and
// fills it; a decode step writes one row in place and is re-run with a new
// `bind` ({"pos": p, "step": s}). The document must have passed validation
// (validate.h); what the lowering cannot express is an Error naming the node.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

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
};

// The graph call (without "inputs", "bind" and "session", which vary per
// step): {"model"?, "weights", "nodes", "outputs", "retain"?}. Weight shapes
// come from `weights` when given (needed by nodes whose widths the document
// does not fix, e.g. a split of a linear's output by groups); null lowers
// from the document alone.
json lower(const json& doc, const LowerOptions& options, const WeightStore* weights = nullptr);

// Session tensor names the lowering uses, e.g. "L3.kv.k".
std::string state_name(int64_t layer, const std::string& slot, const std::string& tensor);

}  // namespace bonfire::ir
