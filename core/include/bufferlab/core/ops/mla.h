// Op descriptors of multi-head latent attention (MLA, kv_lora_rank > 0) in its absorbed form
// (docs/spec/buffers.md §5): the per-token stages between the projections and the latent
// attention core. The projections (q_a, q_b, kv_a, O) are plan::emit_projection's.
//
// Homes (§5 "ssm_ba", "ssm_deinterleaved", "ssm_conv_out_f32"; §5 gives none for the KV
// latent and the V up-projection, chosen here and recorded in docs/architecture.md):
//   q_latent [T, q_lora_rank]             ssm_ba (then k_rope [T, rope], once q_b consumed it)
//   q (q_b output) [T, nq·(nope+rope)]    qkv_output
//   kv_latent [T, kvl+rope]               attn_output — §3 row 5 holds m·nq·(kvl+rope) ≥
//                                         T·(kvl+rope) at every T ≤ m; consumed (k_rope, cache
//                                         write) before the core writes attn_output
//   q_rope bf16 [T, nq·rope]              ssm_conv_out_f32
//   q_absorbed [T, nq·(kvl+rope)]         ssm_deinterleaved
//   attention core output [T, nq·kvl]     attn_output
//   V up-projection [T, nq·v_head_dim]    ssm_deinterleaved (q_absorbed is dead after the
//                                         core): held by §3 row 13 only while v_head_dim ≤
//                                         kvl+rope or ≤ head_dim — not provable for every config
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

namespace mla_value {
inline constexpr const char* q_latent_raw = "q_latent_raw";  // q_a output, before its norm
inline constexpr const char* q_latent = "q_latent";
inline constexpr const char* q = "mla_q";  // q_b output
inline constexpr const char* kv_latent = "kv_latent";
inline constexpr const char* k_rope = "k_rope";
inline constexpr const char* q_rope = "q_rope";
inline constexpr const char* q_absorbed = "q_absorbed";
inline constexpr const char* attn = "attn_latent";  // latent core output
inline constexpr const char* attn_v = "attn_v";     // V up-projection output
}  // namespace mla_value

struct MlaDims {
  uint64_t nq = 0, q_lora_rank = 0, kv_lora_rank = 0, rope = 0, nope = 0, v_head_dim = 0;

  static MlaDims of(const ModelConfig& config);
  uint64_t q_head() const;          // nope + rope: one head of the q_b output
  uint64_t q_width() const;         // nq·(nope + rope)
  uint64_t latent_width() const;    // kv_lora_rank + rope: the kv_a output per token
  uint64_t absorbed_width() const;  // nq·(kv_lora_rank + rope)
  uint64_t attn_width() const;      // nq·kv_lora_rank
  uint64_t v_width() const;         // nq·v_head_dim
};

// One per-token MLA stage over the T rows of the pass.
struct MlaStageOp {
  enum class Stage {
    q_latent_norm,   // ssm_ba q_latent [T, q_lora_rank]: RMSNorm in place
    k_rope,          // attn_output kv_latent → ssm_ba k_rope [T, rope] (RoPE of the rope part)
    kv_cache_write,  // kv_latent (kvl part normed) + k_rope → the latent cache (outside)
    q_rope,          // qkv_output q → ssm_conv_out_f32 q_rope bf16 [T, nq·rope] (RoPE)
    q_absorb,        // q nope part · W_UK per head, with q_rope → ssm_deinterleaved
    v_up,            // attn_output [T, nq·kvl] · W_UV per head → ssm_deinterleaved
  };
  struct Shape {
    Stage stage = Stage::q_latent_norm;
    uint64_t rows = 0;
    MlaDims mla;
  };

  Shape dims;
  TensorRef in;
  std::optional<TensorRef> in2;     // kv_cache_write: k_rope; q_absorb: q_rope
  std::optional<TensorRef> out;     // none for kv_cache_write (its output is the cache)
  std::optional<TensorRef> weight;  // q_latent_norm: norm weight; q_absorb: W_UK; v_up: W_UV
  std::vector<Access> meta;         // positions (RoPE), slots (cache write)

  static MlaStageOp make(const ModelConfig& config, Stage stage, uint64_t rows,
                         std::vector<Access> meta = {});

  const Shape& shape() const { return dims; }
  std::string name() const;  // mla_q_latent_norm | mla_k_rope | ...
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The latent attention core on rows [row0, row0 + rows) of the pass: absorbed queries against
// the latent cache (the chunk's own latents were written to it by kv_cache_write), output
// [rows, nq·kvl]. Decode rows do not use split-K: a slot of §3 row 20 holds hd + 2 floats,
// the latent output of a head is kv_lora_rank wide.
struct MlaAttnOp {
  struct Shape {
    bool decode = false;
    uint64_t row0 = 0, rows = 0;
    uint64_t list_width = 0;  // QSA blocks per row (prefill slabs only)
    MlaDims mla;
  };

  Shape dims;
  TensorRef q;         // ssm_deinterleaved bf16 [rows, nq·(kvl+rope)] at row0
  TensorRef kv_cache;  // weight pool
  std::optional<TensorRef> lists;
  TensorRef out;  // attn_output bf16 [rows, nq·kvl] at row0
  std::vector<Access> meta;

  static MlaAttnOp make(const ModelConfig& config, bool decode, uint64_t row0, uint64_t rows,
                        std::optional<TensorRef> lists = std::nullopt,
                        std::vector<Access> meta = {});

  const Shape& shape() const { return dims; }
  std::string name() const { return dims.decode ? "mla_attn_decode" : "mla_attn_prefill"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
