// The mHC ops on a backend, through the core interface only.
#include "bufferlab/oracle/mhc_harness.h"
#include "harness_io.h"
#include "oracle_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab::oracle {
namespace {

using detail::grow_to_hold;
using detail::read_back;
using detail::upload_exact;

void append_scratch(Backend& b, const Workspace& ws, const TensorRef& t, MhcScratch& to) {
  if (t.dtype == DType::bf16)
    append(to.bf16, read_back<uint16_t>(b, ws, t));
  else
    append(to.f32, read_back<float>(b, ws, t));
}

void require_pool(const Workspace& ws, uint64_t bytes, const std::string& what) {
  if (ws.weights_bytes() < bytes)
    throw Error(
        fmt::format("{}: the workspace's weight pool holds {} bytes, the placed operands "
                    "need {}",
                    what, ws.weights_bytes(), bytes));
}

}  // namespace

uint64_t place_mhc_weights(MhcPreOp& op) { return place_in_pool({&op.fn, &op.scale, &op.bias}); }
uint64_t place_mhc_weights(MhcHeadOp& op) { return place_in_pool({&op.fn, &op.scale, &op.bias}); }

uint64_t place_mhc_post_out_of_place(MhcPostOp& op, uint64_t start) {
  op.out = pool_tensor(op.streams.shape, DType::f32);
  return place_in_pool({&op.out}, start);
}

Layout mhc_footprint_layout(const std::vector<Access>& accesses) {
  return detail::footprint_of(accesses);
}

namespace {
// Poisons the workspace, then uploads the streams and the mixer's fn, scale and bias: the inputs
// of the pre and head calls.
template <class Op, class Inputs>
void upload_mixer(Backend& backend, const Workspace& ws, const Op& op, const Inputs& in) {
  backend.poison(ws);
  upload_exact(backend, ws, op.streams, in.streams);
  upload_exact(backend, ws, op.fn, in.fn);
  upload_exact(backend, ws, op.scale, in.scale);
  upload_exact(backend, ws, op.bias, in.bias);
}
}  // namespace

MhcPreOutputs run_mhc_pre(Backend& backend, const Workspace& ws, const MhcPreOp& op,
                          const MhcPreInputs& in) {
  upload_mixer(backend, ws, op, in);
  MhcPreOutputs out;
  out.diagnostics = backend.mhc_pre(ws, op);
  backend.synchronize();
  out.post = read_back<float>(backend, ws, op.post);
  out.comb = read_back<float>(backend, ws, op.comb);
  out.block_in = read_back<uint16_t>(backend, ws, op.block_in);
  return out;
}

std::vector<float> run_mhc_post(Backend& backend, const Workspace& ws, const MhcPostOp& op,
                                const MhcPostInputs& in) {
  backend.poison(ws);
  if (op.out.space == Space::weights) backend.fill(ws, op.out, kPoisonByte);
  upload_exact(backend, ws, op.post, in.post);
  if (!op.shape().lowrank) upload_exact(backend, ws, op.comb, in.comb);
  upload_exact(backend, ws, op.block_out, in.block_out);
  upload_exact(backend, ws, op.streams, in.streams);
  backend.mhc_post(ws, op);
  backend.synchronize();
  return read_back<float>(backend, ws, op.out);
}

MhcHeadOutputs run_mhc_head(Backend& backend, const Workspace& ws, const MhcHeadOp& op,
                            const MhcHeadInputs& in) {
  upload_mixer(backend, ws, op, in);
  MhcHeadOutputs out;
  out.diagnostics = backend.mhc_head(ws, op);
  backend.synchronize();
  out.output = read_back<uint16_t>(backend, ws, op.output);
  return out;
}

std::vector<float> run_mhc_expand(Backend& backend, const Workspace& ws, const MhcExpandOp& op,
                                  std::span<const uint16_t> input) {
  backend.poison(ws);
  upload_exact(backend, ws, op.input, std::vector<uint16_t>(input.begin(), input.end()));
  backend.mhc_expand(ws, op);
  backend.synchronize();
  return read_back<float>(backend, ws, op.streams);
}

// --- low-rank ---------------------------------------------------------------------------------

std::vector<Access> MhcLowRankPlan::accesses() const {
  std::vector<Access> all = {{streams, AccessKind::read, "@hc"}};
  for (const auto& op : split) append(all, op.accesses());
  for (const auto& op : slab) append(all, op.accesses());
  return all;
}

MhcLowRankPlan plan_mhc_lowrank(const ModelConfig& c, uint64_t rows, MhcLowRankPath path,
                                uint64_t m) {
  if (c.hc_lowrank == 0) throw Error("plan_hc_lowrank: the config has hc_lowrank = 0");
  if (rows == 0) throw Error("plan_hc_lowrank: rows = 0");
  if (m == 0) m = rows;
  if (m < rows)
    throw Error(fmt::format("plan_hc_lowrank: m = {} below the pass's {} rows", m, rows));
  if (path == MhcLowRankPath::split && !MhcSplitCarve::takes_split_path(rows))
    throw Error(fmt::format("plan_hc_lowrank: the split path runs T <= {} rows, not {}",
                            MhcSplitCarve::kMaxRows, rows));
  MhcLowRankPlan p;
  p.path = path;
  p.dims = {rows, c.hc_mult, c.hidden_size, c.hc_lowrank, c.rms_norm_eps};
  p.m = m;
  p.streams = arena_tensor(BufferId::hc_streams, 0, {rows, c.hc_mult, c.hidden_size}, DType::f32);
  if (path == MhcLowRankPath::split) {
    using S = MhcLowRankSplitOp::Stage;
    for (S s : {S::norm, S::down, S::collapse})
      p.split.push_back(MhcLowRankSplitOp::make(s, c, rows));
    p.pool_bytes = place_in_pool({&p.split[0].norm_w, &p.split[1].w_down_inject, &p.split[2].w_up});
    for (auto& op : p.split) {
      op.norm_w = p.split[0].norm_w;
      op.w_down_inject = p.split[1].w_down_inject;
      op.w_up = p.split[2].w_up;
    }
    return p;
  }
  using S = MhcLowRankSlabOp::Stage;
  for (const MhcSlab& slab : mhc_gemm_slabs(rows))  // the plans' slabs (core ops/mhc.h)
    for (S s : {S::norm, S::down, S::inject, S::up, S::collapse})
      p.slab.push_back(MhcLowRankSlabOp::make(s, c, m, slab.row0, slab.rows));
  MhcLowRankSlabOp& first = p.slab[0];
  p.pool_bytes = place_in_pool({&first.norm_w, &first.w_down, &first.w_inject, &first.w_up});
  for (auto& op : p.slab) {
    op.norm_w = first.norm_w;
    op.w_down = first.w_down;
    op.w_inject = first.w_inject;
    op.w_up = first.w_up;
  }
  return p;
}

std::vector<double> MhcScratch::values() const {
  return f32.empty() ? widen_bf16(bf16) : widen(f32);
}

namespace {

void upload_weights(Backend& b, const Workspace& ws, const MhcLowRankPlan& p,
                    const MhcLowRankWeights& w) {
  if (p.path == MhcLowRankPath::split) {
    const MhcLowRankSplitOp& op = p.split[0];
    std::vector<float> down_inject = w.w_down;
    append(down_inject, w.w_inject);
    upload_exact(b, ws, op.norm_w, w.norm_w);
    upload_exact(b, ws, op.w_down_inject, down_inject);
    upload_exact(b, ws, op.w_up, w.w_up);
    return;
  }
  const MhcLowRankSlabOp& op = p.slab[0];
  const MhcLowRankSlabWeights sw = slab_weights(w);
  upload_exact(b, ws, op.norm_w, w.norm_w);
  upload_exact(b, ws, op.w_down, sw.w_down);
  upload_exact(b, ws, op.w_inject, sw.w_inject);
  upload_exact(b, ws, op.w_up, sw.w_up);
}

void run_split_stage(Backend& b, const Workspace& ws, const MhcLowRankSplitOp& op,
                     MhcLowRankRun& r) {
  using S = MhcLowRankSplitOp::Stage;
  switch (op.stage) {
    case S::norm:
      r.norm.streams = read_back<float>(b, ws, op.streams);
      r.diagnostics.nonfinite_tokens += b.mhc_lowrank_split(ws, op).nonfinite_tokens;
      b.synchronize();
      append_scratch(b, ws, op.normed, r.norm.normed);
      return;
    case S::down:
      append_scratch(b, ws, op.normed, r.down.normed);
      b.mhc_lowrank_split(ws, op);
      b.synchronize();
      append_scratch(b, ws, op.low, r.down.low);
      r.down.post = read_back<float>(b, ws, op.post);
      return;
    case S::collapse:
      append_scratch(b, ws, op.normed, r.collapse.normed);
      append_scratch(b, ws, op.low, r.collapse.low);
      b.mhc_lowrank_split(ws, op);
      b.synchronize();
      r.collapse.block_in = read_back<uint16_t>(b, ws, op.block_in);
      return;
  }
}

// A scratch tensor of a slab stage and where the run records its contents.
struct Recorded {
  const TensorRef& t;
  MhcScratch& to;
};

// The down, inject and up slab stages: record the input, launch, record the output.
void run_slab_gemm(Backend& b, const Workspace& ws, const MhcLowRankSlabOp& op, Recorded in,
                   Recorded out) {
  append_scratch(b, ws, in.t, in.to);
  b.mhc_lowrank_slab(ws, op);
  b.synchronize();
  append_scratch(b, ws, out.t, out.to);
}

void run_slab_stage(Backend& b, const Workspace& ws, const MhcLowRankSlabOp& op, MhcLowRankRun& r) {
  using S = MhcLowRankSlabOp::Stage;
  switch (op.stage) {
    case S::norm: {
      append(r.norm.streams, read_back<float>(b, ws, op.streams));
      r.diagnostics.nonfinite_tokens += b.mhc_lowrank_slab(ws, op).nonfinite_tokens;
      b.synchronize();
      append_scratch(b, ws, op.normed, r.norm.normed);
      return;
    }
    case S::down:
      return run_slab_gemm(b, ws, op, {op.normed, r.down.normed}, {op.low, r.down.low});
    case S::inject:
      return run_slab_gemm(b, ws, op, {op.normed, r.inject.normed}, {op.inj_pre, r.inject.inj_pre});
    case S::up:
      return run_slab_gemm(b, ws, op, {op.low, r.up.low}, {op.up_pre, r.up.up_pre});
    case S::collapse:
      append_scratch(b, ws, op.normed, r.collapse.normed);
      append_scratch(b, ws, op.up_pre, r.collapse.up_pre);
      append_scratch(b, ws, op.inj_pre, r.collapse.inj_pre);
      b.mhc_lowrank_slab(ws, op);
      b.synchronize();
      append(r.collapse.block_in, read_back<uint16_t>(b, ws, op.block_in));
      append(r.collapse.post, read_back<float>(b, ws, op.post));
      return;
  }
}

}  // namespace

MhcLowRankRun run_mhc_lowrank(Backend& backend, const Workspace& ws, const MhcLowRankPlan& plan,
                              const MhcLowRankInputs& in) {
  require_pool(ws, plan.pool_bytes, "run_hc_lowrank");
  backend.poison(ws);
  upload_exact(backend, ws, plan.streams, in.streams);
  upload_weights(backend, ws, plan, in.weights);
  MhcLowRankRun r;
  r.path = plan.path;
  r.dims = plan.dims;
  for (const auto& op : plan.split) run_split_stage(backend, ws, op, r);
  for (const auto& op : plan.slab) run_slab_stage(backend, ws, op, r);
  return r;
}

}  // namespace bufferlab::oracle
