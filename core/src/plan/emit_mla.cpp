// MLA sub-block, absorbed form (docs/spec/buffers.md §5; homes of every intermediate in
// ops/mla.h): q_a → q_latent (ssm_ba) → norm → q_b (qkv_output); kv_a → kv_latent
// (attn_output); k_rope into ssm_ba once q_b consumed q_latent; latent cache write; q_rope
// (ssm_conv_out_f32); absorbed Q (ssm_deinterleaved); latent core (attn_output); V
// up-projection (ssm_deinterleaved); O projection. The FP8 path applies to q_b and O only
// (§5 "Paths"); q_a and kv_a are BF16 latent projections outside the LoRA/Q2 roles.
#include <optional>
#include <utility>

#include "bufferlab/core/ops/mla.h"
#include "builder.h"
#include "emit_attention_parts.h"

namespace bufferlab::plan::detail {
namespace {

ProjectionSpec projection(std::string name, ProjRole role, TensorRef in, std::string in_value,
                          BufferId out, uint64_t N, std::string out_value, bool fp8_path) {
  ProjectionSpec p;
  p.name = std::move(name);
  p.role = role;
  p.K = in.shape.at(1);
  p.input = std::move(in);
  p.input_value = std::move(in_value);
  p.out_buffer = out;
  p.N = N;
  p.output_value = std::move(out_value);
  p.fp8_path = fp8_path;
  return p;
}

void emit_q(Builder& b, const Ctx& c, const MlaDims& d, const TensorRef& norm) {
  if (d.q_lora_rank == 0) {
    emit_projection(b, c,
                    projection("q_proj", ProjRole::q, norm, attn_value::norm, BufferId::qkv_output,
                               d.q_width(), mla_value::q, true));
    return;
  }
  emit_projection(b, c,
                  projection("q_a_proj", ProjRole::other, norm, attn_value::norm, BufferId::ssm_ba,
                             d.q_lora_rank, mla_value::q_latent_raw, false));
  b.add(MlaStageOp::make(c.config, MlaStageOp::Stage::q_latent_norm, c.T));
  emit_projection(
      b, c,
      projection("q_b_proj", ProjRole::q,
                 arena(BufferId::ssm_ba, 0, {c.T, d.q_lora_rank}, DType::bf16), mla_value::q_latent,
                 BufferId::qkv_output, d.q_width(), mla_value::q, true));
}

void emit_cores(Builder& b, const Ctx& c) {
  const uint64_t decode_rows = c.pass.decode_rows();
  if (decode_rows > 0)
    b.add(MlaAttnOp::make(c.config, true, 0, decode_rows, std::nullopt,
                          attn_meta(c, {"positions", "seq_slot", "seq_lens", "block_table"})));
  for (const PrefillLaunch& launch : prefill_launches(c)) {
    std::optional<TensorRef> lists;
    if (qsa_selects(c)) lists = emit_qsa_slab(b, c, launch);
    b.add(MlaAttnOp::make(
        c.config, false, decode_rows + launch.row0, launch.rows, std::move(lists),
        attn_meta(c, {"block_table", "seq_lens", "ptr_tables", "cu_seqlens", "kv_lens"}, true)));
  }
}

}  // namespace

void emit_mla(Builder& b, const Ctx& c) {
  using Stage = MlaStageOp::Stage;
  const ModelConfig& m = c.config;
  const MlaDims d = MlaDims::of(m);
  const TensorRef norm = arena(BufferId::norm_output, 0, {c.T, m.hidden_size}, DType::bf16);
  emit_q(b, c, d, norm);
  emit_projection(b, c,
                  projection("kv_a_proj", ProjRole::other, norm, attn_value::norm,
                             BufferId::attn_output, d.latent_width(), mla_value::kv_latent, false));
  // q_b has consumed q_latent: k_rope may take ssm_ba (§5 "ssm_ba").
  b.add(MlaStageOp::make(m, Stage::k_rope, c.T, attn_meta(c, {"positions"})));
  b.add(MlaStageOp::make(m, Stage::kv_cache_write, c.T, attn_meta(c, {"slots"})));
  b.add(MlaStageOp::make(m, Stage::q_rope, c.T, attn_meta(c, {"positions"})));
  b.add(MlaStageOp::make(m, Stage::q_absorb, c.T));
  emit_cores(b, c);
  b.add(MlaStageOp::make(m, Stage::v_up, c.T));
  emit_o_projection(b, c, arena(BufferId::ssm_deinterleaved, 0, {c.T, d.v_width()}, DType::bf16),
                    mla_value::attn_v);
}

}  // namespace bufferlab::plan::detail
