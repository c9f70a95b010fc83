// A graph call (PROTOCOL.md) parsed once and run many times. Parsing checks
// everything that does not depend on the values bound at run time: op names,
// arity, param names and types, expressions, references to earlier names,
// and sizes. Shapes are checked when the call runs (graph/executor.h), since
// a bind may change them.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/expr.h"
#include "core/json_parse.h"
#include "core/tensor.h"
#include "graph/limits.h"
#include "ops/op.h"

namespace bonfire {

// A graph call's JSON: nested no deeper than core's default, of any size
// (inline tensors can be large; Limits bound what the call holds, and a
// server bounds its body before this).
inline constexpr JsonLimits kCallJsonLimits{64, SIZE_MAX};

// What a node input names: a call input, a weight ("w:"), a session tensor
// ("s:") or an earlier node.
struct Ref {
  enum Kind { Input, Weight, Session, Node } kind = Input;
  std::string name;
  int node = -1;  // index of the node, for Kind::Node
  std::string text() const;  // as written: "x", "w:x", "s:x"
  bool operator==(const Ref&) const = default;
};

struct GraphNode {
  std::string id;
  const OpDef* op = nullptr;
  std::vector<Ref> in;
  nlohmann::json params;                            // literal values
  std::vector<std::pair<std::string, Expr>> exprs;  // number params written as expressions
  Params literal;  // `params` as every call binds them when there are no exprs
};

struct Graph {
  std::vector<GraphNode> nodes;
  std::vector<Ref> outputs;
  std::map<std::string, Ref> retain;  // session name -> value kept after the call
  std::set<std::string> input_names;  // call inputs the nodes read
  std::set<std::string> bind_names;   // names the expressions read
  std::set<std::string> features;     // manifest features the nodes use
  // Each op and feature the nodes use -> the first node using it (what an
  // unsupported_feature refusal names).
  std::map<std::string, std::string> first_user;

  // Parses the graph part of a call ("nodes", "outputs", "retain"); `inputs`
  // are the names the call provides. Throws Error(BadGraph / TooLarge).
  static Graph parse(const nlohmann::json& call, const std::set<std::string>& inputs, const Limits& limits);
};

// A whole call: the graph plus the values that came with it.
struct Call {
  Graph graph;
  std::map<std::string, Tensor> inputs;
  std::map<std::string, Tensor> weights;  // inline weights
  nlohmann::json bind = nlohmann::json::object();
  std::string model;
  std::string session;
  bool b64 = false;  // "encoding": "b64"

  static Call parse(const nlohmann::json& call, const Limits& limits);
  // The same, with inputs and inline weights that arrived as binary tensors
  // (a worker link) instead of JSON; the JSON may still carry others.
  static Call parse(const nlohmann::json& call, const Limits& limits, std::map<std::string, Tensor> inputs,
                    std::map<std::string, Tensor> weights);
  static Call parse_text(const std::string& text, const Limits& limits);  // malformed JSON is bad_graph
};

}  // namespace bonfire
