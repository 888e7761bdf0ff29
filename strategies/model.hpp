// The Transformer being trained: shape, attention and MLP kind, vocabulary. Presets are Hugging Face
// `config.json` files under strategies/models/; `--model FILE` reads any decoder config of the
// Llama family (hidden_size, num_attention_heads, num_key_value_heads, intermediate_size, ...) or of
// the GPT-2 family (n_embd, n_head, n_layer, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "program/norm_kind.hpp"

namespace paradyse {

enum class MlpKind { gelu, swiglu };  // GELU: h → f → h; SwiGLU: h → 2f (gate, up) → f → h

// The kernel that computes attention where a strategy runs it over whole rows of its heads
// (MegatronTS, UlyssesZ). flash: FlashAttention-2, fused, nothing of size s² in memory, attention
// dropout inside the kernel (its mask regenerated from the seed in backward). unfused: what Megatron-LM
// ran before FlashAttention (and transformers' "eager"): QKᵀ as a batched GEMM over all s² pairs (a
// causal mask saves no work), a scale-mask-softmax, dropout on the probabilities, probabilities × V;
// the probabilities, the dropout mask and the dropped probabilities are kept for backward
// (Korthikanti et al. 2022's 5·a·s²·b bytes per layer). Ring strategies merge blocks by their
// log-sum-exp and run flash whatever the model says (Megatron's context parallelism requires the fused
// kernel); ColossalZ's ring self-attention is unfused by construction.
enum class AttentionKernel { flash, unfused };
std::string_view to_string(AttentionKernel kernel);  // "flash", "unfused"
std::optional<AttentionKernel> attention_kernel_named(std::string_view name);

// The cross-entropy over the output head's logits. fused: one kernel reads the bf16 logits and writes
// their gradient (Megatron-LM's cross_entropy_loss_fusion, Liger's, torchtune's), over chunks of the
// tokens so that no chunk's logits grow with the sequence. unfused: Megatron-LM's default
// (tensor_parallel/cross_entropy.py): the whole sequence's logits cast to fp32, their maximum
// subtracted, exponentiated, summed and divided out in place, the fp32 softmax kept for backward,
// which scales it in place and casts the gradient back to bf16.
enum class LossKernel { fused, unfused };
std::string_view to_string(LossKernel kernel);  // "fused", "unfused"
std::optional<LossKernel> loss_kernel_named(std::string_view name);

struct ModelSpec {
  std::string name;
  std::string source;      // preset name or file path
  int64_t hidden = 0;      // h
  int64_t heads = 0;       // a, query heads
  int64_t kv_heads = 0;    // a_kv (== heads for MHA)
  int64_t ffn_hidden = 0;  // f: 4h for the GELU MLP; intermediate_size for SwiGLU
  int64_t num_layers = 0;  // L
  int64_t vocab = 0;       // V
  bool causal = true;
  MlpKind mlp = MlpKind::gelu;
  NormKind norm = NormKind::layer_norm;
  bool tied_embeddings = false;  // output head shares the embedding table
  double hidden_dropout = 0;     // probability, after attention and after the MLP
  double attention_dropout = 0;  // probability, on the attention probabilities
  AttentionKernel attention_kernel = AttentionKernel::flash;
  LossKernel loss_kernel = LossKernel::fused;
  // Rotary position embedding (RoPE) of q and k before attention, as the Llama family applies it: the
  // pair (i, i + d/2) of each head rotated by position · rope_theta^(−2i/d), the position counted
  // from the start of the token's document. GPT-2 and BERT blocks add absolute positions to the
  // embedding instead, which paradyse does not model.
  bool rotary = false;
  double rope_theta = 10000;  // LlamaConfig's default

  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_hidden() const { return kv_heads * head_dim(); }  // h_kv
  int64_t mlp_in_rows() const { return mlp == MlpKind::swiglu ? 2 * ffn_hidden : ffn_hidden; }
  int64_t norm_parameters() const {
    return norm == NormKind::layer_norm ? 2 * hidden : hidden;
  }  // gamma [, beta]
  // Parameters of one Transformer layer (no biases on linear layers; norms have gamma [, beta]).
  int64_t layer_parameters() const;
  int64_t embedding_parameters() const;  // embedding table + output head (unless tied) + final norm
  int64_t total_parameters() const { return num_layers * layer_parameters() + embedding_parameters(); }
};

// What a command line may override in a model's file.
struct ModelOverrides {
  std::optional<bool> causal;
  std::optional<AttentionKernel> attention_kernel;
  std::optional<LossKernel> loss_kernel;
};

// `name_or_path`: a preset (see model_preset_names) or a path to a config.json, with `overrides`
// applied. Throws InputError naming the file and field on bad input.
ModelSpec load_model(const std::string& name_or_path, const ModelOverrides& overrides = {});
// A model from the text of a config.json held elsewhere (a table that defines its own models), named
// `name`; `where` names it in errors, as a file would be.
ModelSpec model_from_config(std::string_view config_text, const std::string& name, const std::string& where,
                            const ModelOverrides& overrides = {});
std::vector<std::string> model_preset_names();

}  // namespace paradyse
