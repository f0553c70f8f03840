// The written chain bound of a whole Mamba-2 SSD core (either path) against the FP64 definition
// (oracle::mamba2_recurrence_fp64), shared by the kernel tests (tests/kernels/mamba2_*) and the
// golden checks (tests/golden/), for an evaluation with unit roundoff u.
//
// Relative to the magnitudes y_abs = Σ_n |h|·|C| + |D·x|, |h| carried as exp(dt·A)·|h| +
// dt·|x|·|B| (the same recurrence on |xBC|, |D|, |state|): dt's relative error u(R + 4)
// (R = max |dt_raw + bias|); every exponent (a stored cumsum of ≤ 64 products or a product of
// per-token exps) off by at most 3·S_dA·(u(R + 4) + γ_67) in all (S_dA = max over heads of
// Σ_t |dt_t·A|), plus 2u per exp; the products and sums of one chunk γ_(N + 80), compounded
// over the chunks (and γ_(5L) for the token-by-token path). ρ·magnitude, times 1.01 for the
// products of first-order terms; a BF16-stored y adds its store (the caller's).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_stages.h"

namespace bufferlab::testing {

struct Mamba2ChainBound {
  oracle::Mamba2CoreResult ref;  // the FP64 definition
  oracle::Mamba2CoreResult mag;  // the magnitudes
  double rho = 0.0;              // |evaluation − ref| ≤ rho·mag, element by element
};

// One sequence (dims.sequences = 1): in.zxbcdt's dt columns, dt_bias, a_log, D and state;
// xbc [L, d_xbc] the values the core reads.
inline Mamba2ChainBound mamba2_chain_bound(const oracle::Mamba2Dims& d,
                                           const oracle::Mamba2Inputs& in,
                                           const std::vector<double>& xbc, double u) {
  constexpr double kSecondOrder = 1.01;  // covers the products of first-order terms
  constexpr uint64_t kChunk = oracle::mamba2_detail::kChunk;
  const auto gamma = [u](double n) { return n * u / (1.0 - n * u); };
  const std::vector<double> arg = oracle::mamba2_detail::dt_argument(d, in.zxbcdt, in.dt_bias);
  const std::vector<double> dt = oracle::mamba2_detail::dt_fp64(d, arg);
  const std::vector<double> A = oracle::mamba2_detail::a_fp64(in.a_log);
  const std::vector<double> D(in.D.begin(), in.D.end()), st(in.state.begin(), in.state.end());
  Mamba2ChainBound b;
  b.ref = oracle::mamba2_recurrence_fp64(d, xbc, dt, A, D, st);
  auto abs_of = [](std::vector<double> v) {
    for (double& e : v) e = std::fabs(e);
    return v;
  };
  b.mag = oracle::mamba2_recurrence_fp64(d, abs_of(xbc), dt, A, abs_of(D), abs_of(st));
  double max_v = 0.0, sum_da = 0.0;
  for (double v : arg) max_v = std::max(max_v, std::fabs(v));
  for (uint64_t h = 0; h < d.geom.H; ++h) {
    double s = 0.0;
    for (uint64_t t = 0; t < d.L; ++t) s += std::fabs(dt[t * d.geom.H + h] * A[h]);
    sum_da = std::max(sum_da, s);
  }
  const double chunks = static_cast<double>((d.L + kChunk - 1) / kChunk);
  const double dt_rel = u * (max_v + 4.0);
  b.rho = kSecondOrder * (dt_rel + 3.0 * sum_da * (dt_rel + gamma(67)) +
                          gamma(chunks * (static_cast<double>(d.geom.N) + 80.0) +
                                5.0 * static_cast<double>(d.L) + static_cast<double>(d.geom.N)));
  return b;
}

}  // namespace bufferlab::testing
