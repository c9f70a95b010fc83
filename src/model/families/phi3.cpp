// Phi-3: fused qkv_proj and gate_up_proj; LongRoPE frequency factors (the
// loader gives a folder the GGUF's rope_factors_* tensors).
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  s.fused = {"self_attn.qkv_proj.weight", "", 1,
             {s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim}};
  s.mlp = "fused_swiglu";
  s.gate = "mlp.gate_up_proj";
  s.ffn = c.intermediate_size;
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_phi3_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"phi3"};
  f.gguf = {{"phi3", "phi3",
             {"model.layers.",
              gguf_fix::decoder_global(),
              {{"attn_norm", "input_layernorm"},
               {"attn_qkv", "self_attn.qkv_proj"},
               {"attn_output", "self_attn.o_proj"},
               {"ffn_norm", "post_attention_layernorm"},
               {"ffn_up", "mlp.gate_up_proj"},
               {"ffn_down", "mlp.down_proj"}}}}};
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
