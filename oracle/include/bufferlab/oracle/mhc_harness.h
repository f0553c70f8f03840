// Drives the mHC ops through any Backend with the core interface only — a layout holding the
// op's footprint (or the caller's real layout), weight-pool operands placed with place_in_pool,
// the arena poisoned, inputs uploaded, each op executed and synchronized — and reads back what
// each stage consumed and stored, so every stage can be judged on the backend's own stored
// inputs (docs/spec/numerics.md §9). The oracle still links no backend.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"

namespace bufferlab::oracle {

// --- placement and footprints ----------------------------------------------------------------

// Places the op's weight-pool operands one after another from offset 0 (fn, scale, bias);
// returns the pool bytes they need.
uint64_t place_mhc_weights(MhcPreOp& op);
uint64_t place_mhc_weights(MhcHeadOp& op);
// Points op.out at a weight-pool tensor of the streams' shape (out of place), at `start`;
// returns the pool bytes. bind() allows it: the pool never overlaps the arena.
uint64_t place_mhc_post_out_of_place(MhcPostOp& op, uint64_t start = 0);

// A layout whose buffers hold exactly the arena tensors of `accesses` (tests need no real
// config); real runs size the arena with BufferSizes::from_config.
Layout mhc_footprint_layout(const std::vector<Access>& accesses);

// Allocates a footprint workspace for one op with a weight pool of `pool_bytes`.
template <class Op>
Workspace allocate_mhc_footprint(Backend& backend, const Op& op, uint64_t pool_bytes) {
  return backend.allocate(mhc_footprint_layout(op.accesses()), pool_bytes);
}

// --- Sinkhorn form, post, head, expand ------------------------------------------------------
// Each run poisons the arena, uploads the inputs the op reads, executes, synchronizes and
// downloads every output. `ws` must hold the op's footprint and its placed pool operands.

MhcPreOutputs run_mhc_pre(Backend& backend, const Workspace& ws, const MhcPreOp& op,
                          const MhcPreInputs& in);
// In place (op.out = op.streams, as made) or out of place (op.out elsewhere, e.g.
// place_mhc_post_out_of_place): returns op.out after the op.
std::vector<float> run_mhc_post(Backend& backend, const Workspace& ws, const MhcPostOp& op,
                                const MhcPostInputs& in);

struct MhcHeadOutputs {
  std::vector<uint16_t> output;  // bf16 [rows, h]
  MhcDiagnostics diagnostics;
};
MhcHeadOutputs run_mhc_head(Backend& backend, const Workspace& ws, const MhcHeadOp& op,
                            const MhcHeadInputs& in);
// streams f32 [rows, hc, h].
std::vector<float> run_mhc_expand(Backend& backend, const Workspace& ws, const MhcExpandOp& op,
                                  std::span<const uint16_t> input);

// --- low-rank form ----------------------------------------------------------------------------

// The stage ops of one low-rank pre step over `rows` tokens: the split path's norm, down,
// collapse (rows ≤ 64), or the slab path's norm, down, inject, up, collapse for every slab of
// ≤ 2048 tokens carved for m (MhcLowRankSlabOp::make(stage, config, m, row0, rows)), their pool
// operands placed once and shared.
struct MhcLowRankPlan {
  MhcLowRankPath path = MhcLowRankPath::split;
  MhcLowRankDims dims;
  uint64_t m = 0;                        // the max_batch_tokens the layout was sized for
  std::vector<MhcLowRankSplitOp> split;  // norm, down, collapse
  std::vector<MhcLowRankSlabOp> slab;    // 5 per slab, slab by slab
  TensorRef streams;                     // hc_streams [rows, hc, h] (the upload)
  uint64_t pool_bytes = 0;

  std::vector<Access> accesses() const;  // every stage's
};
// m = 0 means m = rows. Error: hc_lowrank = 0, rows = 0, the split path with rows > 64, or
// m < rows.
MhcLowRankPlan plan_mhc_lowrank(const ModelConfig& config, uint64_t rows, MhcLowRankPath path,
                                uint64_t m = 0);
inline Workspace allocate_mhc_footprint(Backend& backend, const MhcLowRankPlan& plan) {
  return backend.allocate(mhc_footprint_layout(plan.accesses()), plan.pool_bytes);
}

// One scratch tensor as a stage stored or read it: FP32 on the split path, BF16 (raw bits) on
// the slab path; exactly one of the two is filled.
struct MhcScratch {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<double> values() const;  // FP64 copy (poison reads as NaN)
  bool empty() const { return f32.empty() && bf16.empty(); }
};

// Every stage's operands, read back right before it ran (inputs) and right after (outputs),
// assembled over the slabs into full [rows, ...] tensors in token order.
struct MhcLowRankRun {
  MhcLowRankPath path = MhcLowRankPath::split;
  MhcLowRankDims dims;
  struct Norm {
    std::vector<float> streams;  // in
    MhcScratch normed;           // out
  } norm;
  struct Down {
    MhcScratch normed;        // in
    MhcScratch low;           // out
    std::vector<float> post;  // out, split path only
  } down;
  struct Inject {  // slab path only
    MhcScratch normed, inj_pre;
  } inject;
  struct Up {  // slab path only
    MhcScratch low, up_pre;
  } up;
  struct Collapse {
    MhcScratch normed;               // in
    MhcScratch low;                  // in, split path
    MhcScratch up_pre, inj_pre;      // in, slab path
    std::vector<uint16_t> block_in;  // out
    std::vector<float> post;         // out, slab path only
  } collapse;
  MhcDiagnostics diagnostics;  // the norm stages' counts, summed
};

// Poisons the arena once, uploads the streams and the path's weights (FP32 on the split path,
// slab_weights() on the slab path), runs every stage in order. `ws` may be a footprint
// workspace or a real one (BufferSizes from a preset); its pool must hold plan.pool_bytes.
MhcLowRankRun run_mhc_lowrank(Backend& backend, const Workspace& ws, const MhcLowRankPlan& plan,
                              const MhcLowRankInputs& in);

}  // namespace bufferlab::oracle
