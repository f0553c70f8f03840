// The Sinkhorn's elementwise forward error (derived in properties/src/mhc_deep_stack.cpp,
// "Sinkhorn elementwise forward error"): for the spec's iteration (docs/spec/numerics.md §3 step 4)
// evaluated with unit roundoff u on a kernel within k of the exact K in log, every entry of the
// result satisfies |log(Ĉ_ij / C_ij)| ≤ λ against the exact iteration on the exact K. Used by
// the deep-stack bound and by the golden mHC checks (tests/golden/).
#pragma once

#include <cstdint>
#include <span>

namespace bufferlab::gen {

// What λ needs of the exact K [hc, hc] (row-major): its Birkhoff–Hopf κ = tanh(Δ(K)/4), widened
// by `k_oracle` (the log error of the K handed in), and a-priori lower bounds on the sums.
struct SinkhornShape {
  uint64_t hc = 1, iters = 1;
  double eps = 0.0;
  double kappa = 0.0;  // tanh(Δ(K)/4) of the exact K
  double col_lb = 0.0, row_lb = 0.0;
};
SinkhornShape sinkhorn_shape(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                             double k_oracle);

// λ for unit roundoff u and kernel log error k (+Inf where the recursion does not close).
double sinkhorn_log_error(const SinkhornShape& s, double k, double u);

}  // namespace bufferlab::gen
