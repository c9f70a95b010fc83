// Small helpers for tests that run one op directly: tensors from values,
// random values, and infer-allocate-run as the graph executor does it.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ops/op.h"

namespace bonfire {
namespace {

Tensor make(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(shape);
  EXPECT_EQ((int64_t)v.size(), t.numel());
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

std::vector<float> randn(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// infer, allocate, run: the graph executor's job in miniature.
Tensor run_op(const char* name, std::vector<Tensor> in, const json& params) {
  const OpDef* op = find_op(name);
  EXPECT_NE(op, nullptr);
  std::vector<TensorDesc> desc;
  OpInputs ptrs;
  for (auto& t : in) desc.push_back(t.desc()), ptrs.push_back(&t);
  const Params p(params);
  Tensor out = Tensor::empty(op->infer(desc, p));
  op->run(ptrs, p, out);
  return out;
}

// infer must refuse with BadGraph, saying something that contains `what`.
void expect_bad_graph(const char* name, const std::vector<TensorDesc>& in, const json& params,
                      const std::string& what) {
  try {
    find_op(name)->infer(in, Params(params));
    ADD_FAILURE() << name << " accepted " << params.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace
}  // namespace bonfire
