// Full and sliding attention sub-block (docs/spec/buffers.md §5, docs/spec/numerics.md §8): QKV
// projection; decode part (split-K + merge, or direct); prefill part (Q copy, K then V scratch,
// then the varlen core, per QSA slab when the indexer selects); the output gate; the O projection.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/target.h"
#include "builder.h"
#include "emit_attention_parts.h"
#include "metadata.h"

namespace bufferlab::plan::detail {
namespace {

// The KV cache of the run shape (docs/spec/attention.md §3): max_batch_size sequences of
// max_blocks blocks; an unpaged cache is one block of max_seq_len tokens per sequence.
KvCacheGeometry run_cache(const Ctx& c) {
  KvCacheGeometry g;
  const bool paged = c.shape.kv_block_size > 0;
  g.block_size = paged ? c.shape.kv_block_size : c.shape.max_seq_len;
  g.max_blocks = paged ? block_table_entries(c.shape) : 1;
  g.num_blocks = (Size(c.shape.max_batch_size) * g.max_blocks).value();
  return g;
}

// Decode, verify and the decode rows of a mixed step: rows [0, decode_rows).
void emit_decode_part(Builder& b, const Ctx& c, bool sliding) {
  const uint64_t rows = c.pass.decode_rows();
  if (rows == 0) return;
  const bool verify = c.pass.kind == PassKind::verify;
  const uint64_t live = verify ? rows : c.pass.n;
  const KvCacheGeometry cache = run_cache(c);
  // The decode rows' keys enter the cache (through the stage function) before any query of
  // the step attends (docs/spec/attention.md §3).
  b.add(AttnCacheWriteOp::make(c.config, AttnCacheWriteOp::Source::qkv, 0, rows, 0, cache,
                               attn_meta(c, {"positions", "slots"})));
  // The split count is the launch's own pure function of (target, nq, R) — never the live
  // batch, never the sizing's copy (bug B5 is the two disagreeing).
  const uint64_t splits = splitk_splits(c.target, c.config.num_attention_heads, c.lp.R);
  const AttnDecodeOp op =
      AttnDecodeOp::make(c.config, sliding, rows, live, splits, verify, cache,
                         attn_meta(c, {"positions", "seq_slot", "seq_lens", "block_table"}));
  b.add(op);
  if (op.split_k()) b.add(SplitKMergeOp::make(c.config, rows, live, op.dims.splits));
}

// The prefill part: rows [decode_rows, decode_rows + t) of qkv_output.
void emit_prefill_part(Builder& b, const Ctx& c, bool sliding) {
  const uint64_t d = c.pass.decode_rows(), t = c.pass.prefill_tokens();
  if (t == 0) return;
  using Part = AttnStageOp::Part;
  // K first, then V at the sizing's row m, in separate steps (§5 ssm_qkvz): on the FP8 path
  // K's phantom rows may reach row m when t = m, and V then overwrites them.
  b.add(AttnStageOp::make(c.config, Part::q_copy, d, t, false, 0, attn_meta(c, {"positions"})));
  b.add(
      AttnStageOp::make(c.config, Part::k_scratch, d, t, c.fp8(), 0, attn_meta(c, {"positions"})));
  b.add(AttnStageOp::make(c.config, Part::v_scratch, d, t, c.fp8(), c.lp.m));
  // The chunk's keys enter the cache before its queries attend (docs/spec/attention.md §3); the
  // core still reads them from the scratch.
  const KvCacheGeometry cache = run_cache(c);
  b.add(AttnCacheWriteOp::make(c.config, AttnCacheWriteOp::Source::scratch, d, t, c.lp.m, cache,
                               attn_meta(c, {"slots"})));
  for (const PrefillLaunch& launch : prefill_launches(c)) {
    std::optional<TensorRef> lists;
    if (qsa_selects(c)) lists = emit_qsa_slab(b, c, launch);
    b.add(AttnPrefillOp::make(
        c.config, sliding, launch, c.lp.m, cache, std::move(lists),
        attn_meta(c, {"block_table", "seq_lens", "ptr_tables", "cu_seqlens", "kv_lens"}, true)));
  }
}

}  // namespace

std::vector<Access> attn_meta(const Ctx& c, std::vector<std::string> names, bool stream_blocks) {
  if (stream_blocks && c.pass.kind == PassKind::codispatch)
    for (uint64_t s = 0; s < c.pass.prefill_streams(); ++s)
      names.push_back("stream_meta." + std::to_string(s));
  return metadata_reads(c, names);
}

void emit_o_projection(Builder& b, const Ctx& c, const TensorRef& in, const std::string& value) {
  const ModelConfig& m = c.config;
  ProjectionSpec p;
  p.role = ProjRole::o;
  p.fp8_path = true;
  p.input = in;
  p.input_value = value;
  p.K = in.shape.at(1);
  if (m.o_groups > 0 && m.o_lora_rank > 0) {
    // Grouped low-rank O (docs/spec/numerics.md §7): per group heads → o_latent, then o_latent → h.
    const uint64_t r = (Size(m.o_groups) * m.o_lora_rank).value();
    p.name = "o_a_proj";
    p.out_buffer = BufferId::o_latent;
    p.N = r;
    p.groups = m.o_groups;
    p.lora = false;
    p.output_value = "o_latent";
    emit_projection(b, c, p);
    p.groups = 1;
    p.lora = true;
    p.input = arena(BufferId::o_latent, 0, {c.T, r}, DType::bf16);
    p.input_value = "o_latent";
    p.K = r;
  }
  p.name = p.out_buffer == BufferId::o_latent ? "o_b_proj" : "o_proj";
  p.out_buffer = BufferId::moe_output;
  p.N = m.hidden_size;
  p.output_value = "@block_out";
  emit_projection(b, c, p);
}

void emit_attention(Builder& b, const Ctx& c) {
  const ModelConfig& m = c.config;
  const bool sliding = c.mixer == MixerKind::sliding;
  ProjectionSpec qkv;
  qkv.name = "qkv_proj";
  qkv.role = ProjRole::qkv;
  qkv.fp8_path = true;
  qkv.input = arena(BufferId::norm_output, 0, {c.T, m.hidden_size}, DType::bf16);
  qkv.input_value = attn_value::norm;
  qkv.out_buffer = BufferId::qkv_output;
  qkv.K = m.hidden_size;
  qkv.N = m.qkv_dim().value();
  qkv.output_value = attn_value::qkv;
  emit_projection(b, c, qkv);

  emit_decode_part(b, c, sliding);
  emit_prefill_part(b, c, sliding);

  const uint64_t width = (Size(m.num_attention_heads) * m.head_dim).value();
  std::string value = attn_value::attn;
  if (m.attn_gated) {
    b.add(AttnGateOp::make(m, c.T));
    value = attn_value::attn_gated;
  }
  emit_o_projection(b, c, arena(BufferId::attn_output, 0, {c.T, width}, DType::bf16), value);
}

}  // namespace bufferlab::plan::detail
