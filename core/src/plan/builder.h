// Private to plan::build: the step builder and the context every family emitter receives.
// Emitters (emit_*.cpp, one file per op family) append the steps of their sub-block with
// the accesses the op descriptors declare.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/plan/pass_plan.h"

namespace bufferlab::plan::detail {

// Appends steps to a plan. Values (Access::value) not starting with '@' are prefixed with
// the current scope, so "qkv" of layer 3's mixer becomes "L3.mixer.qkv": a layer can only
// read what that layer wrote. '@' names are pass-wide (residual stream, metadata, block
// output handed from one sub-block to the next norm).
class Builder {
 public:
  explicit Builder(PassPlan& plan) : plan_(plan) {}

  // where: the layer label steps carry ("pre", "L3 gdn"); prefix: the value scope.
  void scope(std::string where, std::string value_prefix) {
    where_ = std::move(where);
    prefix_ = std::move(value_prefix);
  }

  uint32_t add(std::string op, std::string params, std::vector<Access> accesses,
               uint32_t stream = 0, std::vector<uint32_t> after = {});

  // Any op descriptor with name(), params() and accesses().
  template <class Op>
  uint32_t add(const Op& op, uint32_t stream = 0, std::vector<uint32_t> after = {}) {
    return add(op.name(), op.params(), op.accesses(), stream, std::move(after));
  }

  uint32_t next_index() const { return static_cast<uint32_t>(plan_.steps.size()); }

 private:
  PassPlan& plan_;
  std::string where_ = "pre";
  std::string prefix_ = "pre.";
};

// Adds `op` with its own accesses followed by `extra` (e.g. the metadata it reads).
template <class Op>
void add_with(Builder& b, const Op& op, const std::vector<Access>& extra) {
  std::vector<Access> accesses = op.accesses();
  accesses.insert(accesses.end(), extra.begin(), extra.end());
  b.add(op.name(), op.params(), std::move(accesses));
}

// What a family emitter needs. Footprints come from `config`, `pass` and `paths` (op
// semantics); `lp` (the sizing's sub-layout parameters) places sub-layouts; `sizes` is read
// only to see whether a buffer is null (fallback path), never for a byte count.
struct Ctx {
  const ModelConfig& config;
  const BufferSizes& sizes;
  const SubLayoutParams& lp;
  const Target& target;
  const RunShape& shape;
  const Pass& pass;
  const Paths& paths;
  uint64_t T = 0;  // pass.tokens(): rows every per-token op launches
  uint64_t layer = 0;
  MixerKind mixer = MixerKind::none;
  FfnKind ffn = FfnKind::none;

  bool is_null(BufferId id) const { return sizes.bytes(id) == 0; }
  bool mutant(Mutant m) const { return sizes.sizing.is(m); }
  bool fp8() const { return paths.projection == ProjectionPath::fp8; }
};

// An arena tensor at `offset` bytes into `buffer`.
inline TensorRef arena(BufferId buffer, uint64_t offset, std::vector<uint64_t> shape, DType t) {
  return arena_tensor(buffer, offset, std::move(shape), t);
}
// A weight-pool tensor (weights, KV cache and other state outside the per-pass arena).
inline TensorRef weights(std::vector<uint64_t> shape, DType t) {
  return pool_tensor(std::move(shape), t);
}
inline Access rd(TensorRef t, std::string value = {}) {
  return Access{std::move(t), AccessKind::read, std::move(value)};
}
inline Access wr(TensorRef t, std::string value = {}) {
  return Access{std::move(t), AccessKind::write, std::move(value)};
}
inline Access phantom(TensorRef t) { return Access{std::move(t), AccessKind::phantom_write, {}}; }

// Which projection a GEMM is, for the path axes that apply to it (docs/spec/buffers.md §5 "Paths").
enum class ProjRole {
  q,
  k,
  v,
  qkv,
  o,
  gate,
  up,
  down,
  gdn_in,
  gdn_out,
  mamba_in,
  mamba_out,
  other
};

// One projection y[T, N] = x[T, K] · Wᵀ with every path that applies to it: the FP8
// block-scaled path (activation → fp8_act/fp8_act_scale, output rows ceil16(T) with the
// padding rows phantom), Q2 dequant (weights → q2_dequant_scratch) or MMQ (activation →
// q2_act_q8), and LoRA (lora_xa, lora_delta, add in place). emit_projection appends the
// steps (quantize, dequant, GEMM, LoRA) in order.
struct ProjectionSpec {
  std::string name;  // "qkv_proj", "o_proj", ...
  ProjRole role = ProjRole::other;
  TensorRef input;  // [T, K] bf16 (arena)
  std::string input_value;
  BufferId out_buffer = BufferId::hidden_states;
  uint64_t out_offset = 0;
  uint64_t K = 0, N = 0;
  std::string output_value;
  bool fp8_path = false;  // the projection-path axis applies (attention QKV/O, GDN, Mamba-2)
  // A grouped (block-diagonal) GEMM: `groups` independent GEMMs, each N/groups outputs from
  // K/groups inputs. The weights (and a Q2 dequant) are groups × [N/groups, K/groups].
  uint64_t groups = 1;
  // Whether a LoRA adapter may attach here (its role permitting). The grouped O's first
  // GEMM carries none: the "o" adapter sits on the GEMM that produces the O output (N = h),
  // as lora_delta's formula (max(h, intermediate, q_proj_mul·nq·hd)) provides.
  bool lora = true;
};
void emit_projection(Builder& b, const Ctx& c, const ProjectionSpec& p);

// Family emitters. Each appends the steps of one sub-block. Contract (values in quotes):
// - mixer and FFN sub-blocks read their input from norm_output bf16 [T, h] "norm" (the
//   FFN also reads moe_router_in_f32 f32 [T, h] "norm_f32" on the FP32-routing path) and
//   leave their output in moe_output bf16 [T, h] "@block_out" (phantom rows up to
//   ceil16(T) when their last GEMM is on the FP8 path);
// - metadata uploaded before the first layer is read as "@meta.<region>", token ids as
//   "@token_ids", LoRA slots as "@lora_slot".
void emit_attention(Builder& b, const Ctx& c);  // full and sliding attention
void emit_mla(Builder& b, const Ctx& c);
void emit_gdn(Builder& b, const Ctx& c);
void emit_mamba2(Builder& b, const Ctx& c);
void emit_qsa(Builder& b, const Ctx& c);  // sparse-attention indexer (before attention)
void emit_moe(Builder& b, const Ctx& c);  // moe and hash_moe
void emit_dense_ffn(Builder& b, const Ctx& c);
// mHC: expand (after embedding), pre (replaces the norm before a sub-block; writes
// norm_output "norm"), post (after a sub-block; reads "@block_out"), head (before the
// final norm; writes hidden_states "@hc_head").
void emit_mhc_expand(Builder& b, const Ctx& c);
void emit_mhc_pre(Builder& b, const Ctx& c);
void emit_mhc_post(Builder& b, const Ctx& c);
void emit_mhc_head(Builder& b, const Ctx& c);

}  // namespace bufferlab::plan::detail
