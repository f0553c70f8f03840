// Gated DeltaNet sub-block (docs/spec/numerics.md §5, docs/spec/buffers.md §4.5, §5): in_proj_qkvz
// and in_proj_ba, de-interleave, conv1d, gates, the core (chunked over the prefill part when
// gdn_fla_scratch exists, the recurrence otherwise and for decode rows), the gated norm in
// place on attn_output, and out_proj into moe_output "@block_out".
#include <string>
#include <vector>

#include "bufferlab/core/ops/gdn.h"
#include "builder.h"
#include "metadata.h"

namespace bufferlab::plan::detail {
namespace {

void emit_core(Builder& b, const Ctx& c, const GdnGeometry& g) {
  // Chunked path: only with the scratch AND 128-wide heads (docs/spec/numerics.md §5); a null
  // scratch selects the recurrence for every row.
  const bool chunked = !c.is_null(BufferId::gdn_fla_scratch) && g.kd == 128 && g.vd == 128;
  if (!chunked) {
    add_with(b, GdnRecurrentOp::make(g, 0, c.T), state_metadata(c));
    return;
  }
  // Decode rows come first (a mixed step parks its prefill chunk after rung(n) rows).
  const uint64_t d = c.pass.decode_rows();
  if (d > 0) add_with(b, GdnRecurrentOp::make(g, 0, d), state_metadata(c));
  if (c.pass.prefill_tokens() == 0) return;
  const uint64_t streams = c.pass.prefill_streams(), L = c.pass.stream_tokens();
  const uint64_t nt = c.lp.gdn_chunks;  // the sizing's nt places the §4.5 arrays
  b.add(GdnChunkOp::make(GdnChunkOp::Stage::wu, g, d, streams, L, nt));
  add_with(b, GdnChunkOp::make(GdnChunkOp::Stage::state, g, d, streams, L, nt), state_metadata(c));
  b.add(GdnChunkOp::make(GdnChunkOp::Stage::output, g, d, streams, L, nt));
}

}  // namespace

void emit_gdn(Builder& b, const Ctx& c) {
  const GdnGeometry g = GdnGeometry::of(c.config);
  const uint64_t T = c.T, h = c.config.hidden_size;
  const TensorRef norm = arena(BufferId::norm_output, 0, {T, h}, DType::bf16);

  // Both input projections read the sub-block's norm rows [T, h].
  auto from_norm = [&](ProjectionSpec p) {
    p.input = norm;
    p.input_value = "norm";
    p.K = h;
    emit_projection(b, c, p);
  };
  from_norm({.name = "in_proj_qkvz",
             .role = ProjRole::gdn_in,
             .out_buffer = BufferId::ssm_qkvz,
             .N = g.qkvz,
             .output_value = "qkvz",
             .fp8_path = true});
  // β/α projection: BF16 always (not on the docs/spec/buffers.md §5 projection-path list).
  from_norm({.name = "in_proj_ba",
             .role = ProjRole::other,
             .out_buffer = BufferId::ssm_ba,
             .N = (Size(2) * g.nv).value(),
             .output_value = "ba",
             .fp8_path = false});
  // De-interleave before conv1d: conv output (f32) and [Q|K|V|Z] have separate homes
  // (docs/spec/buffers.md §5), and conv1d runs over the contiguous Q|K|V prefix of the
  // de-interleaved row.
  b.add(GdnDeinterleaveOp::make(g, T));
  add_with(b, GdnConvOp::make(g, T), state_metadata(c));
  b.add(GdnGatesOp::make(g, T));
  emit_core(b, c, g);
  // In place on attn_output: norm_output (m·max(h, d_inner)) need not hold nv·vd columns.
  b.add(GdnGatedNormOp::make(g, T, c.config.rms_norm_eps));
  emit_projection(
      b, c,
      ProjectionSpec{.name = "out_proj",
                     .role = ProjRole::gdn_out,
                     .input = arena(BufferId::attn_output, 0, {T, g.value_dim}, DType::bf16),
                     .input_value = "gdn_normed",
                     .out_buffer = BufferId::moe_output,
                     .K = g.value_dim,
                     .N = h,
                     .output_value = "@block_out",
                     .fp8_path = true});
}

}  // namespace bufferlab::plan::detail
