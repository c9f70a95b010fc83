// What a Hugging Face config.json says, as transformers reads it, in the IR
// document a family module writes (found by an audit of `ir from-hf`): a
// setting that changes the model's math either lands in the document or is
// refused naming its key, never ignored. The expected readings are
// transformers' (cited per case), not this code's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ir/validate.h"
#include "model/config.h"
#include "model/family.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

json llama_config(const std::string& model_type = "llama") {
  return {{"model_type", model_type}, {"vocab_size", 64},       {"hidden_size", 32},
          {"num_hidden_layers", 4},   {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"intermediate_size", 48},  {"max_position_embeddings", 2048}};
}

json document(const json& config) { return family_document(parse_hf_config(config, "config.json")); }

std::string refusal(const json& config) {
  try {
    document(config);
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph) << e.what();
    return e.what();
  }
  return "(accepted)";
}

const json* node(const json& doc, const std::string& op, const std::string& out = "") {
  for (const auto& n : doc["block"]["nodes"])
    if (n["op"] == op && (out.empty() || n.value("out", json()) == out)) return &n;
  return nullptr;
}

// Qwen2/Qwen3(-MoE) configs: use_sliding_window defaults to false, and only
// layers from max_window_layers on slide (transformers' Qwen2Config builds
// layer_types so). Mistral's sliding_window applies to every layer.
TEST(FamilyConfig, QwenSlidesOnlyWhereUseSlidingWindowAndMaxWindowLayersSay) {
  json q = llama_config("qwen2");
  q["sliding_window"] = 512;
  EXPECT_EQ((*node(document(q), "attention"))["window"], 0) << "use_sliding_window absent means false";
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 3;
  EXPECT_EQ((*node(document(q), "attention"))["window"], json({{"per_layer", {0, 0, 0, 512}}}));
  q.erase("max_window_layers");  // transformers' default 28: no layer of 4 slides
  EXPECT_EQ((*node(document(q), "attention"))["window"], 0);
  json m = llama_config("mistral");
  m["sliding_window"] = 512;
  EXPECT_EQ((*node(document(m), "attention"))["window"], 512);
}

// LlamaAttention: q, k, v and o_proj all take bias=config.attention_bias;
// Qwen2's q/k/v biases leave o_proj without one.
TEST(FamilyConfig, AttentionBiasReachesTheOutputProjection) {
  json l = llama_config();
  l["attention_bias"] = true;
  const json doc = document(l);
  ASSERT_NE(node(doc, "linear", "o"), nullptr);
  EXPECT_EQ((*node(doc, "linear", "o"))["bias"], "model.layers.{i}.self_attn.o_proj.bias");
  EXPECT_EQ((*node(doc, "linear", "q"))["bias"], "model.layers.{i}.self_attn.q_proj.bias");
  const json qwen = document(llama_config("qwen2"));
  EXPECT_FALSE(node(qwen, "linear", "o")->contains("bias"));
  EXPECT_EQ((*node(qwen, "linear", "q"))["bias"], "model.layers.{i}.self_attn.q_proj.bias");
}

json gpt2_config() {
  return {{"model_type", "gpt2"}, {"vocab_size", 64}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 128}};
}

// GPT2Attention divides by sqrt(head_dim) only with scale_attn_weights, and
// GPT2MLP runs ACT2FN[activation_function].
TEST(FamilyConfig, Gpt2ScaleAndActivationAreRead) {
  json g = gpt2_config();
  EXPECT_DOUBLE_EQ((*node(document(g), "attention"))["scale"].get<double>(), 1 / std::sqrt(8.0));
  ASSERT_NE(node(document(g), "gelu"), nullptr);
  EXPECT_EQ((*node(document(g), "gelu"))["approx"], "tanh");  // gelu_new
  g["scale_attn_weights"] = false;
  EXPECT_EQ((*node(document(g), "attention"))["scale"], 1.0);
  g["activation_function"] = "relu";
  EXPECT_NE(node(document(g), "relu"), nullptr);
  EXPECT_EQ(node(document(g), "gelu"), nullptr);
  g["activation_function"] = "gelu";
  EXPECT_EQ((*node(document(g), "gelu"))["approx"], "none");
  g["activation_function"] = "mish";
  EXPECT_NE(refusal(g).find("activation_function \"mish\" is not supported"), std::string::npos) << refusal(g);
  g["activation_function"] = "gelu_new";
  g["scale_attn_by_inverse_layer_idx"] = true;
  EXPECT_NE(refusal(g).find("scale_attn_by_inverse_layer_idx"), std::string::npos) << refusal(g);
}

json falcon_config() {
  return {{"model_type", "falcon"}, {"vocab_size", 64},  {"hidden_size", 32}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"bias", false}, {"parallel_attn", true}};
}

// FalconAttention._split_heads: without multi_query and the new
// architecture, query_key_value holds each head's q, k and v together;
// Falcon 2 (num_ln_in_parallel_attn 1) keeps one input_layernorm.
TEST(FamilyConfig, FalconLayoutsAndNorms) {
  json f = falcon_config();
  f["multi_query"] = false;
  const json old_layout = document(f);
  const json* split = node(old_layout, "split");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ((*split)["groups"], 4);
  EXPECT_EQ((*split)["sizes"], json({8, 8, 8}));
  f["multi_query"] = true;  // Falcon-7B: all q heads, then the one k and v
  EXPECT_FALSE(node(document(f), "split")->contains("groups"));
  f["new_decoder_architecture"] = true;
  f["num_kv_heads"] = 2;
  EXPECT_NE(document(f).dump().find("ln_attn"), std::string::npos);
  f["num_ln_in_parallel_attn"] = 1;
  const std::string falcon2 = document(f).dump();
  EXPECT_EQ(falcon2.find("ln_attn"), std::string::npos);
  EXPECT_NE(falcon2.find("input_layernorm"), std::string::npos);
  f["new_decoder_architecture"] = 1;  // Python's truthiness
  EXPECT_EQ(document(f).dump(), falcon2);
  f["alibi"] = true;
  EXPECT_NE(refusal(f).find("alibi"), std::string::npos) << refusal(f);
}

// Settings no IR node expresses are refused naming their key.
TEST(FamilyConfig, WhatCannotBeExpressedIsRefused) {
  json o = llama_config("olmoe");
  o["num_experts"] = 4;
  o["num_experts_per_tok"] = 2;
  o["clip_qkv"] = 8.0;
  EXPECT_NE(refusal(o).find("clip_qkv = 8.0"), std::string::npos) << refusal(o);
  o["clip_qkv"] = nullptr;  // OLMoE-1B-7B's own config
  EXPECT_EQ(refusal(o), "(accepted)");
}

// An odd head_dim under full rope has no rotary pairs: the document says
// it, and its rules refuse it (rule R11) before `ir from-hf` prints it.
TEST(FamilyConfig, OddHeadDimUnderFullRopeIsInvalid) {
  json l = llama_config();
  l["head_dim"] = 15;
  const auto problems = ir::validate_ir(document(l));
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].rule, 11);
  EXPECT_NE(problems[0].message.find("head_dim 15 is odd"), std::string::npos) << problems[0].message;
}

// rope_scaling is checked as the rope op checks it, with the context
// lengths transformers reads beside it.
TEST(FamilyConfig, RopeScalingIsCheckedAndItsDefaultsFilled) {
  json l = llama_config();
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"rope_type", "su_mystery"}, {"factor", 2}}, "unknown rope_type \"su_mystery\""},
      {{{"type", "linear"}, {"factor", 0}}, "factor must be positive"},
      {{{"type", "linear"}, {"factor", -2}}, "factor must be positive"},
      {{{"type", "linear"}, {"factor", "2"}}, "factor must be a finite number"},
  };
  for (const auto& [rs, want] : bad) {
    l["rope_scaling"] = rs;
    EXPECT_NE(refusal(l).find(want), std::string::npos) << rs.dump() << ": " << refusal(l);
  }
  l["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}};  // original = max_position_embeddings
  EXPECT_EQ(refusal(l), "(accepted)");
  l["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", "1e4"}};
  EXPECT_NE(refusal(l).find("rope_theta must be a number"), std::string::npos) << refusal(l);
  // Phi3Config's original_max_position_embeddings defaults to 4096.
  json p = llama_config("phi3");
  p["max_position_embeddings"] = 131072;
  p["rope_scaling"] = {{"type", "longrope"}, {"long_factor", std::vector<double>(4, 2.0)},
                       {"short_factor", std::vector<double>(4, 1.0)}};
  const json phi3 = document(p);
  const json* rope = node(phi3, "rope");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ((*rope)["freq_factors"]["original_ctx"], 4096);
  EXPECT_NEAR((*rope)["attn_factor"].get<double>(), std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-12);
}

}  // namespace
}  // namespace bonfire
