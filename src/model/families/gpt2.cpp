// GPT-2: learned positions, LayerNorm with biases, one fused c_attn
// ([q; k; v]), tanh GELU, tied output. Its Conv1D weights are [in, out] in
// a folder; the loader gives them as [out, in] (nn.Linear's layout, which
// the GGUF converter also wrote; docs/IR.md §3).
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"

namespace bonfire {

namespace {

using namespace cfg;

void read_config(const nlohmann::json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_epsilon"}, 1e-5, c.source);
  c.hidden_act = get_str(j, {"activation_function"}, "gelu_new");
  if (c.intermediate_size == 0) c.intermediate_size = 4 * c.hidden_size;
  c.attention_bias = c.mlp_bias = true;
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
  c.partial_rotary_factor = 0;  // learned absolute positions
  if (get_bool(j, {"scale_attn_by_inverse_layer_idx"}, false))
    fail(c.source, "scale_attn_by_inverse_layer_idx (scores scaled by 1/(layer + 1)) is not supported");
}

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.hidden_act = "gelu_new"; }

// Conv1D weights are [in, out]; nn.Linear's [out, in] in f32. A store that
// only lowers graphs gets zeros of that shape, whose pages are never
// touched, instead of the copies.
void transpose_conv1d(const ModelConfig& c, bool from_gguf, bool lowering_only, WeightStore& store) {
  if (from_gguf) return;
  for (const std::string& name : store.names()) {
    if (!name.ends_with("attn.c_attn.weight") && !name.ends_with("attn.c_proj.weight") &&
        !name.ends_with("mlp.c_fc.weight") && !name.ends_with("mlp.c_proj.weight"))
      continue;
    const Shape shape = store.find(name)->shape;
    if (shape.size() != 2) continue;
    if (lowering_only) {
      store.put(name, Tensor::zeros({shape[1], shape[0]}), c.source + " (Conv1D's shape, for lowering)");
      continue;
    }
    const Tensor w = to_f32(*store.find(name));
    Tensor t = Tensor::empty({w.shape[1], w.shape[0]});
    for (int64_t i = 0; i < w.shape[0]; ++i)
      for (int64_t j = 0; j < w.shape[1]; ++j) t.f32()[j * w.shape[0] + i] = w.f32()[i * w.shape[1] + j];
    store.put(name, t, c.source + " (Conv1D transposed)");
  }
}

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.embed = "transformer.wte.weight";
  s.pos_embed = "transformer.wpe.weight";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  s.attn_norm = "ln_1";
  s.ffn_norm = "ln_2";
  s.fused = {"attn.c_attn.weight", "attn.c_attn.bias", 1, {s.d, s.d, s.d}};
  s.o = "attn.c_proj";
  s.o_bias = true;
  s.n_rot = 0;
  s.mlp = families::plain_mlp(c, c.hidden_act, "activation_function");
  // transformers: scores are divided by sqrt(head_dim) only when scale_attn_weights.
  if (!cfg::get_bool(c.raw, {"scale_attn_weights"}, true)) s.scale = 1;
  s.up = "mlp.c_fc";
  s.down = "mlp.c_proj";
  s.mlp_bias = true;
  s.final_norm = "transformer.ln_f";
  s.tied = true;
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_gpt2_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"gpt2"};
  f.gguf = {{"gpt2", "gpt2",
             {"transformer.h.",
              {{"token_embd", "transformer.wte"},
               {"position_embd", "transformer.wpe"},
               {"output_norm", "transformer.ln_f"},
               {"output", "lm_head"}},
              {{"attn_norm", "ln_1"},
               {"attn_qkv", "attn.c_attn"},
               {"attn_output", "attn.c_proj"},
               {"ffn_norm", "ln_2"},
               {"ffn_up", "mlp.c_fc"},
               {"ffn_down", "mlp.c_proj"}}}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.adapt_weights = transpose_conv1d;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
