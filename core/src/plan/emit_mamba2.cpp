// Mamba-2 sub-block (docs/spec/numerics.md §6, docs/spec/buffers.md §4.6, §5): in_proj into
// ssm_qkvz, conv1d into ssm_deinterleaved, SSD into attn_output (chunked per prefill sequence when
// ssd_scratch exists, the recurrence for decode rows), gated norm into norm_output, and
// out_proj into moe_output "@block_out".
#include <string>
#include <vector>

#include "bufferlab/core/ops/mamba2.h"
#include "builder.h"
#include "metadata.h"

namespace bufferlab::plan::detail {
namespace {

void emit_mamba2(Builder& b, const Ctx& c, const Mamba2Geometry& g) {
  if (c.is_null(BufferId::ssd_scratch)) {
    add_with(b, Mamba2RecurrentOp::make(g, 0, c.T), state_metadata(c));
    return;
  }
  // Decode rows first; the prefill part follows them (mixed step, docs/spec/buffers.md §2).
  const uint64_t d = c.pass.decode_rows();
  if (d > 0) add_with(b, Mamba2RecurrentOp::make(g, 0, d), state_metadata(c));
  // §4.6: the scratch is carved for ONE sequence, so a co-dispatched pass runs its streams
  // one after another, each carving from the start of ssd_scratch.
  const uint64_t streams = c.pass.prefill_streams(), L = c.pass.stream_tokens();
  const uint64_t nc = c.lp.mamba2_chunks;
  for (uint64_t s = 0; s < streams; ++s) {
    const uint64_t row0 = (Size(d) + Size(s) * L).value();
    using Stage = Mamba2ChunkOp::Stage;
    b.add(Mamba2ChunkOp::make(Stage::cumsum, g, row0, L, nc, s, streams));
    b.add(Mamba2ChunkOp::make(Stage::bmm, g, row0, L, nc, s, streams));
    add_with(b, Mamba2ChunkOp::make(Stage::scan, g, row0, L, nc, s, streams),
             state_metadata(c, {"stream_meta." + std::to_string(s)}));
  }
}

}  // namespace

void emit_mamba2(Builder& b, const Ctx& c) {
  const Mamba2Geometry g = Mamba2Geometry::of(c.config);
  const uint64_t T = c.T, h = c.config.hidden_size;
  emit_projection(b, c,
                  ProjectionSpec{.name = "in_proj",
                                 .role = ProjRole::mamba_in,
                                 .input = arena(BufferId::norm_output, 0, {T, h}, DType::bf16),
                                 .input_value = "norm",
                                 .out_buffer = BufferId::ssm_qkvz,
                                 .K = h,
                                 .N = g.in_proj,
                                 .output_value = "zxbcdt",
                                 .fp8_path = true});
  add_with(b, Mamba2ConvOp::make(g, T), state_metadata(c));
  emit_mamba2(b, c, g);
  b.add(Mamba2GatedNormOp::make(g, T, c.config.rms_norm_eps));
  emit_projection(
      b, c,
      ProjectionSpec{.name = "out_proj",
                     .role = ProjRole::mamba_out,
                     .input = arena(BufferId::norm_output, 0, {T, g.d_inner}, DType::bf16),
                     .input_value = "mamba_normed",
                     .out_buffer = BufferId::moe_output,
                     .K = g.d_inner,
                     .N = h,
                     .output_value = "@block_out",
                     .fp8_path = true});
}

}  // namespace bufferlab::plan::detail
