// Drives one FusedAddRmsNormOp through any Backend — poison, upload, execute, download — using
// only the core Backend interface, so the oracle still links no backend. Used by the CLI's
// `compare`, the tests and the benches.
#pragma once

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/rmsnorm.h"

namespace bufferlab::oracle {

// A layout whose buffers hold exactly the op's footprint (every tensor of op.accesses() plus
// moe_router_in_f32), for tests that need no real config. Real runs size the arena with
// BufferSizes::from_config instead.
Layout footprint_layout(const FusedAddRmsNormOp& op);

// Poisons the arena, uploads the inputs the op reads (the weight only when it is not the unit
// weight), executes the op, synchronizes and downloads every output.
RmsNormOutputs run_fused_add_rmsnorm(Backend& backend, const Workspace& ws,
                                     const FusedAddRmsNormOp& op, const RmsNormInputs& in);

}  // namespace bufferlab::oracle
