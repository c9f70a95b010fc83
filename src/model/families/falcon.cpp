// Falcon: fused query_key_value grouped per kv head (q heads of the group,
// then k, then v), parallel attention (Falcon-40B: ln_attn and ln_mlp; 7B:
// one input_layernorm), exact GELU, tied output.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_epsilon"}, 1e-5, c.source);
  c.hidden_act = get_str(j, {"activation"}, "gelu");
  const bool new_arch = get_bool(j, {"new_decoder_architecture"}, false);
  const bool mqa = get_bool(j, {"multi_query"}, true);
  c.n_kv_heads = new_arch ? get_int(j, {"num_kv_heads", "n_head_kv"}, c.n_heads, c.source) : mqa ? 1 : c.n_heads;
  c.parallel_residual = new_arch || get_bool(j, {"parallel_attn"}, true);
  c.alibi = get_bool(j, {"alibi"}, false);
  // Falcon-RW adds ALiBi to the scores before they are scaled (BLOOM after):
  // its slopes come out divided by sqrt(head_dim), which no IR field says.
  if (c.alibi) fail(c.source, "alibi: Falcon's ALiBi (Falcon-RW), scaled with the scores, is not supported");
  c.attention_bias = c.mlp_bias = get_bool(j, {"bias"}, false);
  if (c.intermediate_size == 0) c.intermediate_size = get_int(j, {"ffn_hidden_size"}, 4 * c.hidden_size, c.source);
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.hidden_act = "gelu"; }

// Falcon-40B's two norms per layer: attn_norm is ln_mlp where attn_norm_2
// (ln_attn) exists. The converter moved the query_key_value rows of each kv
// group ([g][q_0..q_{n-1}, k, v][hd]) to all q heads, then k, then v.
void fix_tensor(const GgufTensorFix& in, std::string& hf, Tensor& t) {
  if ((in.rest == "attn_norm.weight" || in.rest == "attn_norm.bias") &&
      in.file.find("blk." + std::to_string(in.layer) + ".attn_norm_2.weight"))
    hf = "transformer.h." + std::to_string(in.layer) + ".ln_mlp" + in.rest.substr(in.rest.find('.'));
  if (!in.options.hf_layout || (in.rest != "attn_qkv.weight" && in.rest != "attn_qkv.bias")) return;
  const int64_t heads = gguf_fix::layer_count(in.file, in.arch + ".attention.head_count", in.layer, 0);
  const int64_t kv = gguf_fix::layer_count(in.file, in.arch + ".attention.head_count_kv", in.layer, 1);
  const int64_t rows = t.shape.size() == 1 ? t.numel() : t.rows();
  if (heads % kv != 0 || rows % (heads + 2 * kv) != 0)
    gguf_fix::fail(in.file, "tensor \"" + in.gguf_name + "\" has " + std::to_string(rows) +
                                " rows, which do not split into " + std::to_string(heads) + " query and 2 x " +
                                std::to_string(kv) + " kv heads");
  const int64_t hd = rows / (heads + 2 * kv), per = heads / kv, group = (per + 2) * hd;
  t = gguf_fix::reorder_rows(in, t, [=](int64_t r) {
    const int64_t g = r / group, j = (r % group) / hd, i = r % hd;
    if (j < per) return (g * per + j) * hd + i;
    if (j == per) return heads * hd + g * hd + i;
    return heads * hd + kv * hd + g * hd + i;
  });
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  // GGUF metadata does not say; Falcon-7B (the old layout) has one kv head.
  const bool new_arch = c.raw.is_object() && c.raw.contains("new_decoder_architecture")
                            ? cfg::get_bool(c.raw, {"new_decoder_architecture"}, false)
                            : c.n_kv_heads > 1;
  // transformers: the new architecture has ln_attn and ln_mlp unless
  // num_ln_in_parallel_attn is 1 (Falcon 2), which keeps input_layernorm.
  const bool two_norms = new_arch && cfg::get_int(c.raw, {"num_ln_in_parallel_attn"}, 2, c.source) == 2;
  s.embed = "transformer.word_embeddings.weight";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  const int64_t per_group = s.heads / s.kv_heads;
  const std::string bias = c.attention_bias ? "self_attention.query_key_value.bias" : "";
  // The new layout groups q heads with their kv head; the old one without
  // multi_query packs each head's q, k and v together, the same grouping
  // with as many kv heads as heads.
  if (new_arch || s.kv_heads == s.heads)
    s.fused = {"self_attention.query_key_value.weight", bias, s.kv_heads,
               {per_group * s.head_dim, s.head_dim, s.head_dim}};
  else
    s.fused = {"self_attention.query_key_value.weight", bias, 1,
               {s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim}};
  s.o = "self_attention.dense";
  s.o_bias = c.attention_bias;
  if (two_norms) {
    s.parallel = "two_norms";
    s.attn_norm = "ln_attn";
    s.ffn_norm = "ln_mlp";
  } else {
    s.parallel = c.parallel_residual ? "shared" : "";
  }
  s.mlp = c.hidden_act == "gelu" ? "gelu_exact" : "gelu";
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = c.mlp_bias;
  s.final_norm = "transformer.ln_f";
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_falcon_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"falcon"};
  f.gguf = {{"falcon", "falcon",
             {"transformer.h.",
              {{"token_embd", "transformer.word_embeddings"}, {"output_norm", "transformer.ln_f"}, {"output", "lm_head"}},
              {{"attn_norm", "input_layernorm"},
               {"attn_norm_2", "ln_attn"},
               {"attn_qkv", "self_attention.query_key_value"},
               {"attn_output", "self_attention.dense"},
               {"ffn_up", "mlp.dense_h_to_4h"},
               {"ffn_down", "mlp.dense_4h_to_h"}}},
             fix_tensor}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
