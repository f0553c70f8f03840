// mHC sub-steps (docs/spec/numerics.md §3–§4, docs/spec/buffers.md §4.7, §5): expand after the
// embedding, pre before each sub-block (writes norm_output "norm"), post after it (reads
// "@block_out", updates hc_streams in place), head before the final norm.
#include <algorithm>

#include "bufferlab/core/ops/mhc.h"
#include "builder.h"

namespace bufferlab::plan::detail {
namespace {

void emit_lowrank_pre(Builder& b, const Ctx& c) {
  if (MhcSplitCarve::takes_split_path(c.T)) {
    using Stage = MhcLowRankSplitOp::Stage;
    for (Stage s : {Stage::norm, Stage::down, Stage::collapse})
      b.add(MhcLowRankSplitOp::make(s, c.config, c.T));
    return;
  }
  // GEMM path: one step per stage per slab of ≤ 2048 tokens; every slab uses the carve the
  // layout was sized for (Ts = min(m, 2048), m from the sizing under test).
  using Stage = MhcLowRankSlabOp::Stage;
  for (const MhcSlab& slab : mhc_gemm_slabs(c.T))
    for (Stage s : {Stage::norm, Stage::down, Stage::inject, Stage::up, Stage::collapse})
      b.add(MhcLowRankSlabOp::make(s, c.config, c.lp.m, slab.row0, slab.rows));
}

}  // namespace

void emit_mhc_expand(Builder& b, const Ctx& c) { b.add(MhcExpandOp::make(c.config, c.T)); }

void emit_mhc_pre(Builder& b, const Ctx& c) {
  if (c.config.hc_lowrank > 0)
    emit_lowrank_pre(b, c);
  else
    b.add(MhcPreOp::make(c.config, c.T));
}

void emit_mhc_post(Builder& b, const Ctx& c) { b.add(MhcPostOp::make(c.config, c.T)); }

void emit_mhc_head(Builder& b, const Ctx& c) { b.add(MhcHeadOp::make(c.config, c.T)); }

}  // namespace bufferlab::plan::detail
