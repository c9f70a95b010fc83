// The parsed template: one node type for statements and expressions, its
// fields used per kind as listed below. Nodes keep the line they start on so a
// render error can say where it happened.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace bonfire::chat_template {

enum class NodeKind {
  // Statements (a template body is a list of these and of expressions to print).
  Text,         // name: the text
  Comment,      //
  If,           // a: test, body, alt: else branch (an elif is a nested If)
  For,          // a: target (Identifier or TupleLit), b: iterable (may be Select), body, alt: else
  Set,          // a: target, b: value (null for a block set), body: block set body
  Macro,        // name, items: parameters (Identifier or KwArg), body
  CallBlock,    // a: the Call, items: caller parameters, body
  FilterBlock,  // a: filter (Identifier or Call), body
  Break,
  Continue,
  // Expressions.
  Identifier,   // name
  IntLit,       // num
  FloatLit,     // num
  StrLit,       // name: the value
  ArrayLit,     // items
  TupleLit,     // items
  ObjectLit,    // items: key, value, key, value...
  Member,       // a: object, b: property, flag: computed (`[]`)
  Slice,        // a, b, c: start, stop, step (each may be null)
  Call,         // a: callee, items: arguments
  Filter,       // a: operand, b: filter (Identifier or Call)
  Test,         // a: operand, name: test, flag: negated, items: arguments
  Unary,        // name: operator, a: operand
  Binary,       // name: operator, a, b
  Ternary,      // a: condition, b: if true, c: if false
  Select,       // a: value, b: condition (`x if c` without else)
  KwArg,        // name: key, a: value
  Spread,       // a  (*args)
  KwSpread,     // a  (**kwargs)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string name;
  double num = 0;
  bool flag = false;
  NodePtr a, b, c;
  NodeList items, body, alt;

  Node(NodeKind k, int line) : kind(k), line(line) {}
};

}  // namespace bonfire::chat_template
