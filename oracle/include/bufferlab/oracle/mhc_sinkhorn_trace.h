// The convergence of the spec's FP64 Sinkhorn (docs/spec/numerics.md §3 step 4) on random comb
// logits against its Birkhoff–Hopf row bound, and the convergence frontier (iterations needed
// to reach a row-sum error of 1e-3 and 1e-6 per logit range): the computation behind
// `bufferlab sinkhorn` and tests/unit/test_sinkhorn_frontier.cpp. Reads no options and
// prints nothing; bad parameters throw bufferlab::Error naming the option.
//
// Cases: case c of seed S has hc×hc comb logits L·u with u uniform in [0, 1), drawn from
// (S, c) only, so the cases of every range are the same matrices scaled (a frontier row and
// `sinkhorn --range L --cases K --seed S` see the same cases).
//
// The row-sum error after t = hc_sinkhorn_iters iterations is max_i |Σ_j C_ij − 1| of
// sinkhorn(K, hc, t, eps). All t are computed in one pass (SinkhornStepper), checked
// against sinkhorn itself at t = 1, every power of two and the last t.
//
// The bound each error is judged against is sinkhorn_row_bound(K, hc, t, eps, u).row_bound
// with u = 2^-53 (the FP64 arithmetic slack the oracle derives: the error of an FP64 run cannot
// go below its rounding floor, ~1e-16, while the exact-arithmetic bound, u = 0, goes to zero).
// Reported beside it, never judged: how often the error exceeds the exact-arithmetic bound
// (u = 0: only at the rounding floor) and the spec's formula as written (`spec_bound`, which
// the oracle states holds for eps = 0 only) plus the same FP64 slack (spec_bound + bound(u =
// 2^-53) − bound(u = 0)), so that the rounding floor alone does not count against it.
// sinkhorn_row_bound costs O(t), so a trace of N iterations costs O(N²) bound steps (about 1 s per
// case at N = 10000).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/oracle/mhc.h"

namespace bufferlab::oracle {

// The unit roundoff the bound is judged with: FP64, 2^-53.
inline constexpr double kSinkhornFp64UnitRoundoff = kFp64UnitRoundoff;

// The hc×hc comb logits (row-major) of case `index` of `seed`, uniform in [0, range).
std::vector<double> sinkhorn_case_logits(uint64_t seed, uint64_t index, uint64_t hc, double range);

// The spec's Sinkhorn of K one iteration count at a time: after construction the state is the
// first (eps) column normalisation, iters() = 1; step() applies one more (row, column) round.
// result() = sinkhorn(K, hc, iters(), eps) (the final exact column normalisation of
// the state), evaluated in the same order.
class SinkhornStepper {
 public:
  SinkhornStepper(std::span<const double> K, uint64_t hc, double eps);
  uint64_t iters() const { return iters_; }
  void step();
  std::vector<double> result() const;
  double row_error() const;  // max_row_sum_error(result())

 private:
  void normalise_columns(double eps);
  void normalise_rows(double eps);

  uint64_t hc_;
  double eps_;
  uint64_t iters_ = 1;
  std::vector<double> state_;
};

// --- the per-range trace (`bufferlab sinkhorn --range L --iters N`) -----------------------------

struct SinkhornTraceOptions {
  double range = 1.0;   // comb logits uniform in [0, range]; > 0, finite
  uint64_t iters = 20;  // 1..N iterations, N in [1, 10000]
  uint64_t hc = 4;      // [1, 16]
  uint64_t cases = 8;   // [1, 1000]
  uint64_t seed = 1;
  double eps = 1e-6;  // ≥ 0, finite (hc_eps)
};
// Throws bufferlab::Error naming the option (--range, --iters, --hc, --cases, --eps).
void check_sinkhorn_options(const SinkhornTraceOptions& options);

struct SinkhornViolation {
  uint64_t case_index = 0;
  uint64_t iter = 0;
  double error = 0.0;
  double bound = 0.0;  // the FP64 bound (u = 2^-53) it exceeds
};

struct SinkhornCaseTrace {
  uint64_t index = 0;
  std::vector<double> logits;       // hc×hc
  SinkhornBound shape;              // Δ, κ, log(max ρ₀ / min ρ₀) (and the bound at t = 1)
  std::vector<double> error;        // [t − 1]: row-sum error after t iterations
  std::vector<double> bound;        // [t − 1]: the FP64 bound (u = 2^-53), judged
  std::vector<double> exact_bound;  // [t − 1]: the exact-arithmetic bound (u = 0)
  std::vector<double> spec_bound;   // [t − 1]: the spec's formula as written, + FP64 slack
  std::optional<SinkhornViolation> first_violation;
};

struct SinkhornIterationSummary {
  uint64_t iter = 0;
  double median_error = 0.0;  // the ⌈K/2⌉-th smallest of the K cases
  double worst_error = 0.0;   // a NaN error counts as worst
  double median_bound = 0.0;
  double largest_bound = 0.0;
  double worst_ratio = 0.0;        // max over cases of error / bound (FP64 bound)
  uint64_t violations = 0;         // cases with error > bound (or NaN) at this iteration
  uint64_t above_exact_bound = 0;  // cases with error > the u = 0 bound
  uint64_t above_spec_bound = 0;   // cases with error > the spec's formula + FP64 slack
};

struct SinkhornTrace {
  SinkhornTraceOptions options;
  std::vector<SinkhornCaseTrace> cases;
  std::vector<SinkhornIterationSummary> iterations;  // [t − 1]
  std::optional<SinkhornViolation> first_violation;  // lowest iteration, then lowest case
  uint64_t violations = 0;                           // (case, iteration) pairs
  bool holds() const { return violations == 0; }
};

// Called after each case with (cases done, cases in all).
using SinkhornProgress = std::function<void(uint64_t done, uint64_t total)>;

SinkhornTrace mhc_sinkhorn_trace(const SinkhornTraceOptions& options,
                                 const SinkhornProgress& progress = {});

// --- the convergence frontier (`bufferlab sinkhorn --frontier`) --------------------------------

struct FrontierOptions {
  std::vector<double> ranges = {0.01, 0.1, 1, 4, 8, 16, 30, 60};
  std::vector<double> eps = {1e-6, 0.0};
  std::vector<double> targets = {1e-3, 1e-6};
  uint64_t hc = 4;
  uint64_t cases = 200;  // per (range, eps); [1, 100000]
  uint64_t seed = 1;
  uint64_t max_iters = 500;   // [1, 10000]
  uint64_t model_iters = 20;  // the real models' hc_sinkhorn_iters
};
void check_frontier_options(const FrontierOptions& options);

struct FrontierTarget {
  double target = 0.0;
  // Iterations (hc_sinkhorn_iters) until the row-sum error is first ≤ target; nullopt: not
  // within max_iters. The median is the ⌈K/2⌉-th smallest (not reached counts as largest).
  std::optional<uint64_t> median_iters;
  std::optional<uint64_t> worst_iters;
  uint64_t not_reached = 0;       // cases not within max_iters
  uint64_t reached_at_model = 0;  // cases whose error at model_iters is ≤ target
};

struct FrontierRow {
  double range = 0.0;
  double eps = 0.0;
  uint64_t cases = 0;
  std::vector<FrontierTarget> targets;
  double median_error_at_model = 0.0;
  double worst_error_at_model = 0.0;
  uint64_t checked = 0;           // (case, iteration) pairs judged against the bound
  uint64_t violations = 0;        // of them, error > FP64 bound
  uint64_t above_spec_bound = 0;  // of them, error > the spec's formula + FP64 slack
  std::optional<SinkhornViolation> first_violation;
};

struct Frontier {
  FrontierOptions options;
  std::vector<FrontierRow> rows;  // eps-major: for each eps, every range in order
  uint64_t violations = 0;
  bool holds() const { return violations == 0; }
};

// Each case runs until every target is reached and model_iters is passed, or max_iters; every
// iteration it runs is judged against the bound. Progress counts cases over all rows.
Frontier sinkhorn_frontier(const FrontierOptions& options, const SinkhornProgress& progress = {});

// The frontier as the fixed-width table `sinkhorn --frontier` prints (a header that says what
// the columns mean, one line per row).
std::string format_frontier_table(const Frontier& f);

// "12", or ">500" for nullopt.
std::string format_iters(const std::optional<uint64_t>& iters, uint64_t max_iters);

}  // namespace bufferlab::oracle
