// Seeded inputs for FusedAddRmsNormOp, identical on every platform (integer hashing and exact
// arithmetic only, no <random> distributions): normal-ish values (Irwin–Hall of four uniforms),
// and on every `wide_row_every`-th row elements scaled by 2^k, k uniform in ±wide_exponent, so
// rows with a large dynamic range are always present.
#pragma once

#include <cstdint>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/rmsnorm.h"

namespace bufferlab::oracle {

struct RmsNormInputProfile {
  double scale = 1.0;      // multiplies every residual and input value
  int wide_row_every = 4;  // 0: no wide rows
  int wide_exponent = 12;  // keep Σr² far below FLT_MAX: |values| ≤ 4·scale·2^wide_exponent
  double weight_scale = 0.25;
};

RmsNormInputs generate_rmsnorm_inputs(const FusedAddRmsNormOp& op, uint64_t seed,
                                      const RmsNormInputProfile& profile = {});

}  // namespace bufferlab::oracle
