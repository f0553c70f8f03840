// Derived quantities of ModelConfig (docs/spec/buffers.md §1), all overflow-checked.
#include "bufferlab/core/model_config.h"

namespace bufferlab {

Size ModelConfig::ssm_qkvz_size() const {
  return Size(2) * linear_num_key_heads * linear_key_head_dim +
         Size(2) * linear_num_value_heads * linear_value_head_dim;
}

Size ModelConfig::ssm_ba_size() const { return Size(2) * linear_num_value_heads; }

Size ModelConfig::mamba2_d_inner() const {
  if (mamba_num_heads == 0) return 0;
  return Size(mamba_num_heads) * mamba_head_dim;
}

Size ModelConfig::mamba2_d_xbc() const {
  if (mamba_num_heads == 0) return 0;
  return mamba2_d_inner() + Size(2) * n_groups * ssm_state_size;
}

Size ModelConfig::mamba2_in_proj_size() const {
  if (mamba_num_heads == 0) return 0;
  return mamba2_d_inner() + mamba2_d_xbc() + mamba_num_heads;
}

Size ModelConfig::moe_input_size() const {
  return moe_latent_size > 0 ? Size(moe_latent_size) : Size(hidden_size);
}

bool ModelConfig::uses_mrope() const {
  return mrope_interleaved || mrope_section[0] > 0 || mrope_section[1] > 0 || mrope_section[2] > 0;
}

Size ModelConfig::qkv_dim() const {
  return (Size(num_attention_heads) * q_proj_mul() + Size(2) * num_key_value_heads) * head_dim;
}

uint64_t ModelConfig::rotary_dim() const {
  const double d = static_cast<double>(head_dim) * partial_rotary_factor;
  // A factor outside [0, 1] or not a number is validate()'s error; here it clamps so the
  // derived value stays defined.
  if (!(d > 0)) return 0;
  if (d >= static_cast<double>(head_dim)) return head_dim;
  return static_cast<uint64_t>(d);
}

}  // namespace bufferlab
