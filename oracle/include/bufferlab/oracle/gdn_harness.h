// Drives one GDN call through any Backend with the core interface only: conv1d, gates, the
// chunked stages (wu, state, output) or the recurrence, the gated norm — weight-pool operands
// placed with place_in_pool, the arena poisoned once, inputs uploaded, each op executed and
// synchronized — and reads back what each stage consumed (right before it ran) and stored, so
// every stage is judged on the backend's own stored inputs (docs/spec/numerics.md §9).
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/oracle/gdn.h"

namespace bufferlab::oracle {

enum class GdnPath { chunked, recurrent };

struct GdnPlan {
  GdnDims dims;
  GdnPath path = GdnPath::chunked;
  GdnConvOp conv;
  GdnGatesOp gates;
  std::vector<GdnChunkOp> chunk;  // wu, state, output (chunked path)
  GdnRecurrentOp recurrent;       // recurrent path
  GdnGatedNormOp norm;
  uint64_t pool_bytes = 0;

  std::vector<Access> accesses() const;  // every op's
};

// `nt` = the sizing's §4.5 chunk count (BufferSizes params.gdn_chunks) when the workspace is
// a real one; 0 = exactly sequences·cdiv(L, 64) (a footprint layout). Error: the chunked
// path without kd = vd = 128.
GdnPlan plan_gdn(const GdnDims& dims, GdnPath path, uint64_t nt = 0);
// A footprint layout holding exactly the plan's arena tensors, with its pool.
Workspace allocate_gdn_footprint(Backend& backend, const GdnPlan& plan);

// Every stage's operands as the backend stored them. Chunked-path arrays hold all
// sequences' regions (the op's span) in region order.
struct GdnRun {
  GdnPath path = GdnPath::chunked;
  std::vector<float> conv;           // f32 [rows, conv_dim] after conv1d
  std::vector<uint16_t> conv_state;  // bf16 [sequences, conv_dim, K − 1] after conv1d
  std::vector<float> gates;          // f32 [rows, nv, 2]
  std::vector<float> gc;             // f32 regions [64] (after wu)
  std::vector<uint16_t> W, U;        // bf16 regions (after wu)
  std::vector<uint16_t> S, uc;       // bf16 regions (after the state pass)
  std::vector<float> state_in;       // f32 [sequences, nv, kd, vd] as uploaded
  std::vector<float> state;          // after the call
  std::vector<uint16_t> core;        // bf16 [rows, nv·vd] before the gated norm
  std::vector<uint16_t> normed;      // bf16 [rows, nv·vd] after it
  // Scratch read back right before the state and output stages ran (must equal what wu /
  // state stored: judged as "<array> intact").
  std::vector<uint16_t> W_before_state, U_before_state, S_before_output, uc_before_output;
  std::vector<float> gc_before_state, gc_before_output;
};

// `ws` holds the plan's footprint (allocate_gdn_footprint) or a real layout with the plan's
// pool bytes. Errors of bind() (e.g. a carve span outside gdn_fla_scratch) propagate.
GdnRun run_gdn(Backend& backend, const Workspace& ws, const GdnPlan& plan, const GdnInputs& in);

}  // namespace bufferlab::oracle
