// The common shape of decoder-only transformers, as data. A family module
// (families/<family>.cpp) fills a DecoderSpec from a ModelConfig: which
// tensors exist under which names, which norm, which MLP, where the
// residuals go; build_decoder_ir turns it into an IR document
// (docs/IR.md). Nothing here is specific to one family.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace bonfire::families {

using nlohmann::json;

// A fused projection cut into q, k, v: `groups` groups of `sizes` each (see
// the IR's split).
struct FusedQkv {
  std::string weight, bias;  // names under the layer prefix; bias may be empty
  int64_t groups = 1;
  std::vector<int64_t> sizes;
};

struct DecoderSpec {
  std::string family;
  int64_t vocab = 0, d = 0, n_layers = 0, ctx = 0;

  // Embedding.
  std::string embed = "model.embed_tokens.weight";
  std::string pos_embed;                    // learned positions (GPT-2)
  std::string embed_norm;                   // a LayerNorm after the embedding (BLOOM): name prefix
  double embed_scale = 1;                   // Gemma sqrt(d), Granite embedding_multiplier

  // Norms. Names below are prefixes ("input_layernorm" → .weight / .bias).
  std::string norm = "rmsnorm";             // or "layernorm"
  double eps = 1e-6;
  double norm_offset = 0;                   // Gemma: weight stored as w - 1
  std::string layer = "model.layers.{i}.";  // prefix of every per-layer name
  std::string attn_norm = "input_layernorm";   // "": no norm before attention (OLMo 2)
  std::string ffn_norm = "post_attention_layernorm";  // "": no norm before the MLP
  std::string post_attn_norm, post_ffn_norm;  // Gemma 2/3 sandwich norms
  // "" (sequential), "shared" (attention and MLP read one norm of x),
  // "two_norms" (each its own norm of x; NeoX, Falcon-40B).
  std::string parallel;

  // Attention.
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj", o = "self_attn.o_proj";
  bool qkv_bias = false, o_bias = false;
  FusedQkv fused;                           // used when fused.weight is set
  std::string q_norm, k_norm;               // per-head (or whole-width) RMSNorm names
  bool qk_norm_per_head = true;
  double scale = 0;                         // 0: 1/sqrt(head_dim)
  double softcap = 0;
  bool alibi = false;
  std::vector<int64_t> window;              // per layer, 0 = full
  // Rope (n_rot 0: no rope).
  int64_t n_rot = 0;
  std::vector<double> theta;                // per layer
  std::string pairing = "neox";
  json freq_factors;                        // null, array, name or {short, long, original_ctx}
  std::vector<double> freq_scale;           // per layer (linear scaling: 1/factor); empty = 1
  double attn_factor = 1;

  // MLP: "swiglu" (gate, up, down), "geglu", "gelu" / "gelu_exact" / "relu" / "silu" (up, down),
  // "fused_swiglu" (gate_up, down).
  std::string mlp = "swiglu";
  std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
  bool mlp_bias = false;
  int64_t ffn = 0;  // intermediate size (fused_swiglu splits by it)

  // Mixture of experts on the layers where moe_layer[l] holds.
  std::vector<bool> moe_layer;
  std::string router, expert_gate, expert_up, expert_down;  // expert names hold {e}
  // Experts packed in ONNX Runtime's QMoE layout: expert_gate = expert_up
  // names the fc1 tensor, expert_down the fc2 tensor, full names (no {e},
  // no ".weight"); the lowering emits moe layout "qmoe" (docs/QMOE.md).
  bool experts_qmoe = false;
  int64_t n_experts = 0, top_k = 0;
  bool renorm = false;
  std::string scoring = "softmax", selection_bias;
  int64_t groups = 0, top_groups = 0;
  double routed_scale = 1;
  std::string shared_gate, shared_up, shared_down, shared_expert_gate;  // shared experts, if any

  // Layers that mix tokens with a gated short convolution instead of
  // attention (LFM2), where conv_layer[l] holds: in_proj → B, C, x;
  // conv1d_causal(B ⊙ x); C ⊙ conv → out_proj. Names under the layer prefix.
  // A model with both kinds of layer uses the IR extension layer_apply.
  std::vector<bool> conv_layer;
  std::string conv_in = "conv.in_proj", conv = "conv.conv", conv_out = "conv.out_proj";
  int64_t conv_kernel = 0;

  // Mamba layers instead of attention where mamba_layer[l] holds (Jamba):
  // in_proj → x, z; x = silu(conv1d_causal(x) + bias); x_proj → dt, B, C
  // (each RMS-normed with mamba_norms); dt = dt_proj(dt); y =
  // selective_scan(x, dt, B, C; A_log, D) ⊙ silu(z) → out_proj. Names under
  // the layer prefix + mamba.
  std::vector<bool> mamba_layer;
  std::string mamba = "mamba.";
  int64_t ssm_inner = 0, ssm_state = 0, ssm_dt_rank = 0, ssm_conv = 0;
  bool mamba_norms = false;

  // DeepSeek multi-head latent attention instead of q/k/v projections.
  bool mla = false;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope = 0, qk_rope = 0, v_head_dim = 0;


  double residual_scale = 1;  // Granite residual_multiplier
  // Head.
  std::string final_norm = "model.norm";
  std::string lm_head = "lm_head.weight";
  bool tied = false;
  double logit_scale = 1;     // Granite: 1 / logits_scaling
  double final_softcap = 0;   // Gemma 2
};

// Defaults every llama-like family shares, from the config: sizes, rope
// (with rope_scaling), sliding windows from sliding_window/layer_types.
DecoderSpec llama_like(const ModelConfig& c);
void set_rope_scaling(DecoderSpec& s, const ModelConfig& c);

json build_decoder_ir(const DecoderSpec& s, const ModelConfig& c);

// The MLP kind ("gelu", "gelu_exact", "relu" or "silu") of a plain
// up → activation → down MLP whose activation transformers names `act`
// (its ACT2FN keys); an activation the IR cannot express is refused naming
// the key, never replaced by another.
std::string plain_mlp(const ModelConfig& c, const std::string& act, const char* key);

// The document's "tokenizer": tokenizer.json beside it, bos and specials from the config.
json tokenizer_block(const ModelConfig& c);

}  // namespace bonfire::families
