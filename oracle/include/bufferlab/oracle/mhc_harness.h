// Drives the mHC ops through any Backend with the core interface only — a layout holding the
// op's footprint (or the caller's real layout), weight-pool operands placed with place_in_pool,
// the arena poisoned, inputs uploaded, each op executed and synchronized — and reads back what
// each stage consumed and stored, so every stage can be judged on the backend's own stored
// inputs (numerics §9). The oracle still links no backend.
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
uint64_t place_hc_weights(HcPreOp& op);
uint64_t place_hc_weights(HcHeadOp& op);
// Points op.out at a weight-pool tensor of the streams' shape (out of place), at `start`;
// returns the pool bytes. bind() allows it: the pool never overlaps the arena.
uint64_t place_hc_post_out_of_place(HcPostOp& op, uint64_t start = 0);

// A layout whose buffers hold exactly the arena tensors of `accesses` (tests need no real
// config); real runs size the arena with BufferSizes::from_config.
Layout hc_footprint_layout(const std::vector<Access>& accesses);

// Allocates a footprint workspace for one op with a weight pool of `pool_bytes`.
template <class Op>
Workspace allocate_hc_footprint(Backend& backend, const Op& op, uint64_t pool_bytes) {
  return backend.allocate(hc_footprint_layout(op.accesses()), pool_bytes);
}

// --- Sinkhorn form, post, head, expand ------------------------------------------------------
// Each run poisons the arena, uploads the inputs the op reads, executes, synchronizes and
// downloads every output. `ws` must hold the op's footprint and its placed pool operands.

HcPreOutputs run_hc_pre(Backend& backend, const Workspace& ws, const HcPreOp& op,
                        const HcPreInputs& in);
// In place (op.out = op.streams, as made) or out of place (op.out elsewhere, e.g.
// place_hc_post_out_of_place): returns op.out after the op.
std::vector<float> run_hc_post(Backend& backend, const Workspace& ws, const HcPostOp& op,
                               const HcPostInputs& in);

struct HcHeadOutputs {
  std::vector<uint16_t> output;  // bf16 [rows, h]
  HcDiagnostics diagnostics;
};
HcHeadOutputs run_hc_head(Backend& backend, const Workspace& ws, const HcHeadOp& op,
                          const HcHeadInputs& in);
// streams f32 [rows, hc, h].
std::vector<float> run_hc_expand(Backend& backend, const Workspace& ws, const HcExpandOp& op,
                                 std::span<const uint16_t> input);

// --- low-rank form ----------------------------------------------------------------------------

// The stage ops of one low-rank pre step over `rows` tokens: the split path's norm, down,
// collapse (rows ≤ 64), or the slab path's norm, down, inject, up, collapse for every slab of
// ≤ 2048 tokens carved for m (HcLowRankSlabOp::make(stage, config, m, row0, rows)), their pool
// operands placed once and shared.
struct HcLowRankPlan {
  HcLowRankPath path = HcLowRankPath::split;
  HcLowRankDims dims;
  uint64_t m = 0;                       // the max_batch_tokens the layout was sized for
  std::vector<HcLowRankSplitOp> split;  // norm, down, collapse
  std::vector<HcLowRankSlabOp> slab;    // 5 per slab, slab by slab
  TensorRef streams;                    // hc_streams [rows, hc, h] (the upload)
  uint64_t pool_bytes = 0;

  std::vector<Access> accesses() const;  // every stage's
};
// m = 0 means m = rows. Error: hc_lowrank = 0, rows = 0, the split path with rows > 64, or
// m < rows.
HcLowRankPlan plan_hc_lowrank(const ModelConfig& config, uint64_t rows, HcLowRankPath path,
                              uint64_t m = 0);
inline Workspace allocate_hc_footprint(Backend& backend, const HcLowRankPlan& plan) {
  return backend.allocate(hc_footprint_layout(plan.accesses()), plan.pool_bytes);
}

// One scratch tensor as a stage stored or read it: FP32 on the split path, BF16 (raw bits) on
// the slab path; exactly one of the two is filled.
struct HcScratch {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<double> values() const;  // FP64 copy (poison reads as NaN)
  bool empty() const { return f32.empty() && bf16.empty(); }
};

// Every stage's operands, read back right before it ran (inputs) and right after (outputs),
// assembled over the slabs into full [rows, ...] tensors in token order.
struct HcLowRankRun {
  HcLowRankPath path = HcLowRankPath::split;
  HcLowRankDims dims;
  struct Norm {
    std::vector<float> streams;  // in
    HcScratch normed;            // out
  } norm;
  struct Down {
    HcScratch normed;         // in
    HcScratch low;            // out
    std::vector<float> post;  // out, split path only
  } down;
  struct Inject {  // slab path only
    HcScratch normed, inj_pre;
  } inject;
  struct Up {  // slab path only
    HcScratch low, up_pre;
  } up;
  struct Collapse {
    HcScratch normed;                // in
    HcScratch low;                   // in, split path
    HcScratch up_pre, inj_pre;       // in, slab path
    std::vector<uint16_t> block_in;  // out
    std::vector<float> post;         // out, slab path only
  } collapse;
  HcDiagnostics diagnostics;  // the norm stages' counts, summed
};

// Poisons the arena once, uploads the streams and the path's weights (FP32 on the split path,
// slab_weights() on the slab path), runs every stage in order. `ws` may be a footprint
// workspace or a real one (BufferSizes from a preset); its pool must hold plan.pool_bytes.
HcLowRankRun run_hc_lowrank(Backend& backend, const Workspace& ws, const HcLowRankPlan& plan,
                            const HcLowRankInputs& in);

}  // namespace bufferlab::oracle
