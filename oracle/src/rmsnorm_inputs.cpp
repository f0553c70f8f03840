// Seeded inputs for FusedAddRmsNormOp.
#include "bufferlab/oracle/rmsnorm_inputs.h"

#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/seeded_random.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// One row of values at `scale`; a wide row multiplies each element by its own power of two.
void fill_row(SplitMix64& rng, uint16_t* row, uint64_t width, double scale, bool wide,
              int wide_exponent) {
  for (uint64_t j = 0; j < width; ++j) {
    const int e = wide ? rng.integer(-wide_exponent, wide_exponent) : 0;
    row[j] = bf16_of(std::ldexp(rng.normalish() * scale, e));
  }
}

}  // namespace

RmsNormInputs generate_rmsnorm_inputs(const FusedAddRmsNormOp& op, uint64_t seed,
                                      const RmsNormInputProfile& p) {
  const uint64_t rows = op.shape().rows;
  const uint64_t width = op.shape().width;
  const uint64_t n = (Size(rows) * width).value();
  SplitMix64 rng(seed);
  RmsNormInputs in;
  in.residual.resize(n);
  if (op.variant.add_residual) in.input.resize(n);
  for (uint64_t t = 0; t < rows; ++t) {
    // Rows 1, 1 + every, 1 + 2·every, ... (every row when every = 1).
    const uint64_t every = p.wide_row_every > 0 ? static_cast<uint64_t>(p.wide_row_every) : 0;
    const bool wide = every > 0 && (t + every - 1) % every == 0;
    fill_row(rng, in.residual.data() + t * width, width, p.scale, wide, p.wide_exponent);
    if (op.variant.add_residual)
      fill_row(rng, in.input.data() + t * width, width, p.scale, wide, p.wide_exponent);
  }
  if (!op.variant.unit_weight) {
    in.weight.resize(width);
    for (auto& w : in.weight) w = bf16_of(rng.normalish() * p.weight_scale);
  }
  return in;
}

}  // namespace bufferlab::oracle
