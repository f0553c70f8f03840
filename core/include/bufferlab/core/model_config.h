// ModelConfig: the model dimensions that size the workspace (docs/spec/buffers.md §1), with the
// spec's defaults, derived quantities and validation. One X-macro list per field type is
// the single source for the struct, the defaults, the normalized JSON form and the docs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/checked.h"

namespace bufferlab {

// X(name, default)
#define BUFFERLAB_CONFIG_INT_FIELDS(X)  \
  X(hidden_size, 0)                     \
  X(intermediate_size, 0)               \
  X(vocab_size, 0)                      \
  X(num_attention_heads, 0)             \
  X(num_key_value_heads, 0)             \
  X(head_dim, 0)                        \
  X(num_hidden_layers, 0)               \
  X(full_attention_interval, 1)         \
  X(first_k_dense, 0)                   \
  X(moe_layer_freq, 1)                  \
  X(linear_num_key_heads, 0)            \
  X(linear_key_head_dim, 0)             \
  X(linear_num_value_heads, 0)          \
  X(linear_value_head_dim, 0)           \
  X(linear_conv_kernel_dim, 4)          \
  X(num_experts, 0)                     \
  X(num_experts_per_tok, 1)             \
  X(moe_intermediate_size, 0)           \
  X(shared_expert_intermediate_size, 0) \
  X(zero_expert_num, 0)                 \
  X(moe_latent_size, 0)                 \
  X(num_hash_layers, 0)                 \
  X(router_groups, 1)                   \
  X(router_topk_groups, 1)              \
  X(mamba_num_heads, 0)                 \
  X(mamba_head_dim, 0)                  \
  X(ssm_state_size, 0)                  \
  X(n_groups, 0)                        \
  X(conv_kernel, 4)                     \
  X(kv_lora_rank, 0)                    \
  X(q_lora_rank, 0)                     \
  X(qk_rope_head_dim, 0)                \
  X(qk_nope_head_dim, 0)                \
  X(v_head_dim, 0)                      \
  X(o_groups, 0)                        \
  X(o_lora_rank, 0)                     \
  X(hc_mult, 0)                         \
  X(hc_sinkhorn_iters, 20)              \
  X(hc_lowrank, 0)                      \
  X(index_n_heads, 0)                   \
  X(index_head_dim, 0)                  \
  X(index_topk, 0)                      \
  X(index_compress_ratio, 0)            \
  X(adapter_max_rank, 0)                \
  X(sliding_window, 0)                  \
  X(rope_original_max_position, 0)

#define BUFFERLAB_CONFIG_BOOL_FIELDS(X) \
  X(attn_gated, false)                  \
  X(norm_topk_prob, false)              \
  X(use_routing_bias, false)            \
  X(mrope_interleaved, false)           \
  X(rope_interleaved, false)            \
  X(rope_truncate, true)                \
  X(qk_norm, false)                     \
  X(attn_sinks, false)

#define BUFFERLAB_CONFIG_FLOAT_FIELDS(X) \
  X(swiglu_limit, 0.0)                   \
  X(routed_scaling_factor, 1.0)          \
  X(hc_eps, 1e-6)                        \
  X(rms_norm_eps, 1e-6)                  \
  X(rope_theta, 10000.0)                 \
  X(partial_rotary_factor, 1.0)          \
  X(rope_factor, 1.0)                    \
  X(rope_low_freq_factor, 1.0)           \
  X(rope_high_freq_factor, 4.0)          \
  X(rope_beta_fast, 32.0)                \
  X(rope_beta_slow, 1.0)                 \
  X(rope_mscale, 0.0)                    \
  X(rope_mscale_all_dim, 0.0)            \
  X(rope_attention_factor, 0.0)

// Layer kinds of `layer_types` (docs/spec/buffers.md §1). `mlp`/`moe` are FFN-only layers
// (hybrid_override_pattern '-' and 'E').
enum class LayerType { full_attention, sliding_attention, linear_attention, mamba, mla, mlp, moe };
const char* to_string(LayerType t);
LayerType layer_type_from_string(const std::string& s);  // throws Error on unknown names

// Mixer and FFN kinds of one decoder layer, as the pass planner sees them (docs/spec/buffers.md §5
// "Layers").
enum class MixerKind { full, sliding, mla, gdn, mamba2, none };
enum class FfnKind { dense, moe, hash_moe, none };
const char* to_string(MixerKind k);
const char* to_string(FfnKind k);

struct ModelConfig {
#define BUFFERLAB_DECLARE_INT(name, def) uint64_t name = def;
  BUFFERLAB_CONFIG_INT_FIELDS(BUFFERLAB_DECLARE_INT)
#undef BUFFERLAB_DECLARE_INT
#define BUFFERLAB_DECLARE_BOOL(name, def) bool name = def;
  BUFFERLAB_CONFIG_BOOL_FIELDS(BUFFERLAB_DECLARE_BOOL)
#undef BUFFERLAB_DECLARE_BOOL
#define BUFFERLAB_DECLARE_FLOAT(name, def) double name = def;
  BUFFERLAB_CONFIG_FLOAT_FIELDS(BUFFERLAB_DECLARE_FLOAT)
#undef BUFFERLAB_DECLARE_FLOAT
  std::string scoring_func = "softmax";  // softmax | sigmoid | sqrtsoftplus
  std::string rope_type =
      "default";  // default | linear | llama3 | yarn (docs/spec/attention.md §1)
  std::vector<LayerType> layer_types;  // empty: derived from full_attention_interval
  std::vector<uint64_t> mlp_only_layers;
  std::array<uint64_t, 3> mrope_section{0, 0, 0};

  // Derived quantities (docs/spec/buffers.md §1), all overflow-checked.
  Size ssm_qkvz_size() const;        // 2·nk·kd + 2·nv·vd
  Size ssm_ba_size() const;          // 2·nv
  Size mamba2_d_inner() const;       // mamba_num_heads · mamba_head_dim
  Size mamba2_d_xbc() const;         // d_inner + 2·n_groups·ssm_state_size (0 without Mamba)
  Size mamba2_in_proj_size() const;  // d_inner + d_xbc + mamba_num_heads (0 without Mamba)
  Size moe_input_size() const;       // moe_latent_size if > 0 else h
  bool uses_mrope() const;
  uint64_t q_proj_mul() const { return attn_gated ? 2 : 1; }
  Size qkv_dim() const;  // (nq·q_proj_mul + 2·nkv)·hd
  // int(head_dim · partial_rotary_factor), as transformers truncates (docs/spec/attention.md §1).
  uint64_t rotary_dim() const;

  // Layer pattern (docs/spec/buffers.md §1 "layer pattern" and §5 "Layers").
  MixerKind mixer_kind(uint64_t layer) const;
  FfnKind ffn_kind(uint64_t layer) const;

  // Throws bufferlab::Error naming the first rule broken, the field and its value.
  void validate() const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

}  // namespace bufferlab
