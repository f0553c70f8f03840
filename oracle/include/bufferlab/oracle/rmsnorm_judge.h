// Judges one FusedAddRmsNormOp run per stage (docs/spec/numerics.md §9): the stored residual
// against the faithful oracle of the inputs, then norm_output (and moe_router_in_f32) against
// the oracle fed the backend's OWN stored residual, each under its derived bound (rmsnorm.cpp).
// The exact-vs-faithful difference of the oracle itself is reported, not asserted.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/rmsnorm.h"

namespace bufferlab::oracle {

AgreementReport judge_fused_add_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in,
                                        const RmsNormOutputs& out, const std::string& backend,
                                        uint64_t seed);

}  // namespace bufferlab::oracle
