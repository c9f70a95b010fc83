// A model's hyperparameters in one shape, whichever file they came from:
// config.json of the common Hugging Face families (each spells them its own
// way: n_embd, d_model, hidden_size...) or a GGUF file's `<arch>.*` keys.
// What comes after the readers (a family's IR document, the lowering) reads this struct.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bonfire {

struct ModelConfig {
  std::string family;  // HF model_type: "llama", "qwen2", "gemma2", ...
  std::string source;  // the file it was read from, for errors

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;

  // Positions.
  double rope_theta = 10000;
  nlohmann::json rope_scaling;  // null, or the config's rope_scaling object as is
  double partial_rotary_factor = 1.0;
  bool rope_interleaved = false;  // GPT-J style pairs
  double rope_local_theta = 0;    // Gemma 3 sliding layers
  bool alibi = false;
  double alibi_max = 8;  // MPT alibi_bias_max

  // Normalisation and activations.
  std::string norm = "rmsnorm";  // or "layernorm"
  double norm_eps = 1e-6;
  bool norm_weight_offset = false;  // Gemma: weight stored as offset from 1
  std::string hidden_act = "silu";
  bool qk_norm = false;

  // Block structure.
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  bool parallel_residual = false;  // attention and MLP read the same input (NeoX, Falcon, Phi-2)
  int64_t sliding_window = 0;
  std::vector<std::string> layer_types;  // per layer: "full_attention", "sliding_attention", "conv"

  // Scales (Gemma 2/3, Granite).
  double attn_logit_softcap = 0;
  double final_logit_softcap = 0;
  double query_pre_attn_scalar = 0;
  double attention_multiplier = 0;
  double embedding_multiplier = 0;
  double residual_multiplier = 0;
  double logits_scaling = 0;

  // Mixture of experts.
  int64_t n_experts = 0;
  int64_t n_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t n_shared_experts = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::string moe_scoring = "softmax";
  double routed_scaling_factor = 1.0;
  int64_t n_group = 0;
  int64_t topk_group = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;  // decoder_sparse_step
  std::vector<int64_t> mlp_only_layers;
  // Experts stored in ONNX Runtime's QMoE layout (config.json
  // "quantization_config": {"quant_method": "qmoe", "bits", "block_size"};
  // docs/QMOE.md): "qmoe", else empty. block 0 = column-wise scales.
  std::string expert_quant;
  int64_t expert_quant_bits = 0;
  int64_t expert_quant_block = 0;

  // DeepSeek multi-head latent attention.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t v_head_dim = 0;

  // LFM2 short convolutions; Mamba's causal conv (mamba_d_conv).
  int64_t conv_kernel = 0;

  // Mamba (selective-scan) layers: Jamba's, where layer_types says "mamba".
  int64_t ssm_inner = 0;    // d_inner = mamba_expand * hidden_size
  int64_t ssm_state = 0;    // d_state
  int64_t ssm_dt_rank = 0;  // the time step's low rank (Mamba-2: its heads)
  int64_t ssm_groups = 1;   // Mamba-2: groups of heads sharing B and C

  // Special tokens (generation_config.json adds to these).
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;

  nlohmann::json raw;  // the original keys, for what this struct does not name
  // The key each size was read from ("num_hidden_layers", "n_layer",
  // "llama.block_count", ...), by field name ("n_layers"), for errors.
  std::map<std::string, std::string> keys;
};

// What a checkpoint's tensor names and shapes say about the sizes a config
// claims (HF names or GGUF names), gathered from headers only. -1 / empty:
// the checkpoint has no such tensor, so that size is held to bounds only.
struct TensorCensus {
  int64_t layers = -1;   // highest layer index among the tensors + 1
  int64_t experts = -1;  // experts per layer (indices in names, or GGUF's *_exps rows)
  struct Named {
    std::string name;
    std::vector<int64_t> shape;  // row-major ([out, in] for a linear weight)
    bool found() const { return !name.empty(); }
  };
  Named embed, output, positions, q, k, up;
  bool has_gate = false;  // a separate gate projection (else up may be a fused gate_up)
  std::vector<int64_t> router_layers;  // layers with a MoE router (GGUF ffn_gate_inp), in order
};
TensorCensus census_of(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors);

// Default sampling and stop ids from generation_config.json.
struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  int64_t max_new_tokens = 0;
};

// Parses config.json (a file, or a folder holding one). Unknown model_type is
// an error naming it and the families that are known.
//
// Every size (layers, widths, heads, head_dim, intermediate sizes, vocab,
// experts, positions, ...) is checked before anything sized by it exists:
// against bounds no model reaches, and, given the checkpoint's census,
// against the tensors actually present. A violation is an Error naming the
// key, e.g. "config.json: num_hidden_layers = 1000000000 but the checkpoint
// has tensors for 4 layers".
ModelConfig load_hf_config(const std::string& path, const TensorCensus* have = nullptr);
ModelConfig parse_hf_config(const nlohmann::json& j, const std::string& source, const TensorCensus* have = nullptr);

// GGUF metadata (as the GGUF reader gives it) into the same struct, with
// the same checks.
ModelConfig parse_gguf_config(const nlohmann::json& kv, const std::string& source,
                              const TensorCensus* have = nullptr);

// The checks above on a parsed config (parse_* call it; exposed for tests).
void check_config_sizes(const ModelConfig& c, const TensorCensus* have);

// generation_config.json; a missing file gives the defaults.
GenerationConfig load_generation_config(const std::string& path);

// The model_type values parse_hf_config knows (model/family.h).
const std::vector<std::string>& known_families();

}  // namespace bonfire
