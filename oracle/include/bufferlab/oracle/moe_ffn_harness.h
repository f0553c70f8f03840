// Drives the non-routing MoE / FFN ops through any Backend with the core interface only — a
// layout holding the footprint (or the caller's), weight-pool operands placed with
// place_in_pool, the arena poisoned, inputs uploaded, the op executed and synchronized — and
// reads back what each stage consumed and stored, so every stage can be judged on the
// backend's own stored inputs (docs/spec/numerics.md §9). The oracle still links no backend.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/oracle/moe_ffn.h"

namespace bufferlab::oracle {

// A layout whose buffers hold exactly the arena tensors of `accesses` (tests need no real
// config), and the weight-pool bytes their pool tensors reach.
Layout ffn_footprint_layout(const std::vector<Access>& accesses);
uint64_t ffn_weight_pool_bytes(const std::vector<Access>& accesses);
// The chain: every stage's accesses.
Layout ffn_footprint_layout(const ExpertChain& chain);

// Each run poisons the arena, uploads `in`, reads the inputs back, executes, synchronizes and
// downloads the output. `ws` must hold the op's footprint and weight pool.
GatherRun run_moe_gather(Backend& backend, const Workspace& ws, const MoeGatherOp& op,
                         const GatherInputs& in);
ExpertGemmRun run_moe_expert_gemm(Backend& backend, const Workspace& ws, const MoeExpertGemmOp& op,
                                  const ExpertGemmInputs& in);
SwigluRun run_swiglu(Backend& backend, const Workspace& ws, const SwigluOp& op,
                     const SwigluInputs& in);
// x (in.input) is uploaded when the op reads it or combines in place of it (latent MoE).
CombineRun run_moe_combine(Backend& backend, const Workspace& ws, const MoeCombineOp& op,
                           const CombineInputs& in);
// in.out_old is uploaded into the output tensor for the swiglu / accumulate epilogues.
GemmRun run_gemm(Backend& backend, const Workspace& ws, const GemmOp& op, const GemmInputs& in);
LmHeadRun run_lm_head(Backend& backend, const Workspace& ws, const LmHeadOp& op,
                      const LmHeadInputs& in);

// gather → gate → up → swiglu → down → combine, one poison and one upload, every stage's
// inputs and output read back between the launches (swiglu overwrites the gate output, down
// the gathered rows, a latent combine its input).
ExpertChainRun run_expert_chain(Backend& backend, const Workspace& ws, const ExpertChain& chain,
                                const ExpertChainInputs& in);

// Convenience: allocate a footprint workspace on `backend` and run.
template <class Op>
Workspace allocate_footprint(Backend& backend, const Op& op) {
  const std::vector<Access> a = op.accesses();
  return backend.allocate(ffn_footprint_layout(a), ffn_weight_pool_bytes(a));
}
inline Workspace allocate_footprint(Backend& backend, const ExpertChain& chain) {
  return backend.allocate(ffn_footprint_layout(chain), chain.weight_pool_bytes);
}

}  // namespace bufferlab::oracle
