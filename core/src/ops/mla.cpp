// MLA descriptors: operands from the MLA dimensions and the pass rows — never from
// BufferSizes. The homes of the intermediates are listed in ops/mla.h.
#include "bufferlab/core/ops/mla.h"

#include <string>
#include <utility>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/ops/attention.h"
#include "params_text.h"

namespace bufferlab {
namespace {

TensorRef pool(std::vector<uint64_t> shape) {
  return TensorRef{Space::weights, BufferId::hidden_states, 0, std::move(shape), DType::bf16};
}
// bf16 [rows, width] at row 0 of `id`.
TensorRef rows_of(BufferId id, uint64_t rows, uint64_t width) {
  return arena_tensor(id, 0, {rows, width}, DType::bf16);
}

using detail::kv;

std::string dims_string(const MlaDims& d) {
  return kv("nq", d.nq) + "," + kv("q_lora_rank", d.q_lora_rank) + "," +
         kv("kv_lora_rank", d.kv_lora_rank) + "," + kv("rope", d.rope) + "," + kv("nope", d.nope) +
         "," + kv("v_head_dim", d.v_head_dim);
}

}  // namespace

MlaDims MlaDims::of(const ModelConfig& c) {
  return {c.num_attention_heads, c.q_lora_rank,      c.kv_lora_rank,
          c.qk_rope_head_dim,    c.qk_nope_head_dim, c.v_head_dim};
}
uint64_t MlaDims::q_head() const { return (Size(nope) + rope).value(); }
uint64_t MlaDims::q_width() const { return (Size(nq) * q_head()).value(); }
uint64_t MlaDims::latent_width() const { return (Size(kv_lora_rank) + rope).value(); }
uint64_t MlaDims::absorbed_width() const { return (Size(nq) * latent_width()).value(); }
uint64_t MlaDims::attn_width() const { return (Size(nq) * kv_lora_rank).value(); }
uint64_t MlaDims::v_width() const { return (Size(nq) * v_head_dim).value(); }

// ---- MlaStageOp --------------------------------------------------------------------------

MlaStageOp MlaStageOp::make(const ModelConfig& config, Stage stage, uint64_t rows,
                            std::vector<Access> meta) {
  const MlaDims d = MlaDims::of(config);
  MlaStageOp op;
  op.dims = Shape{stage, rows, d};
  op.meta = std::move(meta);
  const TensorRef kv_latent = rows_of(BufferId::attn_output, rows, d.latent_width());
  const TensorRef k_rope = rows_of(BufferId::ssm_ba, rows, d.rope);
  const TensorRef q = rows_of(BufferId::qkv_output, rows, d.q_width());
  const TensorRef q_rope = rows_of(BufferId::ssm_conv_out_f32, rows, (Size(d.nq) * d.rope).value());
  switch (stage) {
    case Stage::q_latent_norm:
      op.in = rows_of(BufferId::ssm_ba, rows, d.q_lora_rank);
      op.out = op.in;  // in place: the identical TensorRef
      op.weight = pool({d.q_lora_rank});
      break;
    case Stage::k_rope:
      op.in = kv_latent;
      op.out = k_rope;
      break;
    case Stage::kv_cache_write:
      op.in = kv_latent;
      op.in2 = k_rope;
      break;
    case Stage::q_rope:
      op.in = q;
      op.out = q_rope;
      break;
    case Stage::q_absorb:
      op.in = q;
      op.in2 = q_rope;
      op.out = rows_of(BufferId::ssm_deinterleaved, rows, d.absorbed_width());
      op.weight = pool({d.nq, d.nope, d.kv_lora_rank});
      break;
    case Stage::v_up:
      op.in = rows_of(BufferId::attn_output, rows, d.attn_width());
      op.out = rows_of(BufferId::ssm_deinterleaved, rows, d.v_width());
      op.weight = pool({d.nq, d.kv_lora_rank, d.v_head_dim});
      break;
  }
  return op;
}

std::string MlaStageOp::name() const {
  switch (dims.stage) {
    case Stage::q_latent_norm:
      return "mla_q_latent_norm";
    case Stage::k_rope:
      return "mla_k_rope";
    case Stage::kv_cache_write:
      return "mla_kv_cache_write";
    case Stage::q_rope:
      return "mla_q_rope";
    case Stage::q_absorb:
      return "mla_q_absorb";
    case Stage::v_up:
      return "mla_v_up";
  }
  return "mla_stage";
}

std::string MlaStageOp::params() const {
  return name() + "(" + kv("rows", dims.rows) + "," + dims_string(dims.mla) + ")";
}

std::vector<Access> MlaStageOp::accesses() const {
  // (in, in2, out) values per stage.
  struct Values {
    const char *in, *in2, *out;
  };
  static constexpr Values kValues[] = {
      {mla_value::q_latent_raw, nullptr, mla_value::q_latent},   // q_latent_norm
      {mla_value::kv_latent, nullptr, mla_value::k_rope},        // k_rope
      {mla_value::kv_latent, mla_value::k_rope, nullptr},        // kv_cache_write
      {mla_value::q, nullptr, mla_value::q_rope},                // q_rope
      {mla_value::q, mla_value::q_rope, mla_value::q_absorbed},  // q_absorb
      {mla_value::attn, nullptr, mla_value::attn_v},             // v_up
  };
  const Values& v = kValues[static_cast<size_t>(dims.stage)];
  std::vector<Access> acc{{in, AccessKind::read, v.in}};
  if (in2) acc.push_back({*in2, AccessKind::read, v.in2});
  if (weight) acc.push_back({*weight, AccessKind::read});
  acc.insert(acc.end(), meta.begin(), meta.end());
  if (out) acc.push_back({*out, AccessKind::write, v.out});
  return acc;
}

// ---- MlaAttnOp ---------------------------------------------------------------------------

MlaAttnOp MlaAttnOp::make(const ModelConfig& config, bool decode, uint64_t row0, uint64_t rows,
                          std::optional<TensorRef> lists, std::vector<Access> meta) {
  const MlaDims d = MlaDims::of(config);
  MlaAttnOp op;
  op.dims = Shape{decode, row0, rows, lists ? lists->shape.at(1) : 0, d};
  op.lists = std::move(lists);
  op.meta = std::move(meta);
  const uint64_t qw = d.absorbed_width(), ow = d.attn_width();
  op.q = arena_tensor(BufferId::ssm_deinterleaved, (Size(row0) * qw * 2).value(), {rows, qw},
                      DType::bf16);
  op.kv_cache = pool({rows, d.latent_width()});
  op.out =
      arena_tensor(BufferId::attn_output, (Size(row0) * ow * 2).value(), {rows, ow}, DType::bf16);
  return op;
}

std::string MlaAttnOp::params() const {
  return name() + "(" + kv("row0", dims.row0) + "," + kv("rows", dims.rows) + "," +
         kv("list_width", dims.list_width) + "," + dims_string(dims.mla) + ")";
}

std::vector<Access> MlaAttnOp::accesses() const {
  std::vector<Access> acc{{q, AccessKind::read, mla_value::q_absorbed},
                          {kv_cache, AccessKind::read}};
  if (lists) acc.push_back({*lists, AccessKind::read, attn_value::qsa_lists});
  acc.insert(acc.end(), meta.begin(), meta.end());
  acc.push_back({out, AccessKind::write, mla_value::attn});
  return acc;
}

}  // namespace bufferlab
