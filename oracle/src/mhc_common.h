// Helpers shared by the mHC oracle sources (private to oracle/src); the ones other families use
// too (require_size, sigmoid, silu, bf16_value, ...) are in oracle_common.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bufferlab/core/checked.h"
#include "bufferlab/oracle/mhc.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

bool all_finite(const float* x, uint64_t n);
// 1 / sqrt(Σ x² / n + eps) in FP64.
double rms_factor(const float* x, uint64_t n, double eps);

// The post inputs' sizes against the op's shape (comb only in the Sinkhorn form); throws naming
// the op (mhc_ops.cpp).
void require_post_inputs(const MhcPostOp& op, const MhcPostInputs& in);

// out[t, o] = Σ_k term(W[o, k]·in[t, k]) for W [outs, ins], k ascending: the identity gives the
// low-rank GEMMs (mhc_lowrank.cpp), std::fabs the Σ|products| their bounds scale (mhc_bounds.cpp).
template <class Term>
std::vector<double> row_products(uint64_t rows, uint64_t ins, uint64_t outs,
                                 std::span<const double> in, std::span<const double> w, Term term) {
  std::vector<double> out(mul(rows, outs));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t o = 0; o < outs; ++o) {
      double s = 0.0;
      for (uint64_t k = 0; k < ins; ++k) s += term(w[o * ins + k] * in[t * ins + k]);
      out[t * outs + o] = s;
    }
  return out;
}

}  // namespace bufferlab::oracle
