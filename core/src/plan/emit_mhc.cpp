// mHC sub-steps (spec/numerics.md §3–§4, spec/buffers.md §4.7, §5): expand after the
// embedding, pre before each sub-block (writes norm_output "norm"), post after it (reads
// "@block_out", updates hc_streams in place), head before the final norm.
#include <algorithm>

#include "bufferlab/core/ops/mhc.h"
#include "builder.h"

namespace bufferlab::plan::detail {
namespace {

void emit_lowrank_pre(Builder& b, const Ctx& c) {
  if (HcSplitCarve::takes_split_path(c.T)) {
    using Stage = HcLowRankSplitOp::Stage;
    for (Stage s : {Stage::norm, Stage::down, Stage::collapse})
      b.add(HcLowRankSplitOp::make(s, c.config, c.T));
    return;
  }
  // GEMM path: one step per stage per slab of ≤ 2048 tokens; every slab uses the carve the
  // layout was sized for (Ts = min(m, 2048), m from the sizing under test).
  using Stage = HcLowRankSlabOp::Stage;
  for (const HcSlab& slab : hc_gemm_slabs(c.T))
    for (Stage s : {Stage::norm, Stage::down, Stage::inject, Stage::up, Stage::collapse})
      b.add(HcLowRankSlabOp::make(s, c.config, c.lp.m, slab.row0, slab.rows));
}

}  // namespace

void emit_hc_expand(Builder& b, const Ctx& c) { b.add(HcExpandOp::make(c.config, c.T)); }

void emit_hc_pre(Builder& b, const Ctx& c) {
  if (c.config.hc_lowrank > 0)
    emit_lowrank_pre(b, c);
  else
    b.add(HcPreOp::make(c.config, c.T));
}

void emit_hc_post(Builder& b, const Ctx& c) { b.add(HcPostOp::make(c.config, c.T)); }

void emit_hc_head(Builder& b, const Ctx& c) { b.add(HcHeadOp::make(c.config, c.T)); }

}  // namespace bufferlab::plan::detail
