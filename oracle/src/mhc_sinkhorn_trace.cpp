// mhc_sinkhorn_trace / sinkhorn_frontier: see sinkhorn_report.h. The stepper evaluates the spec's
// normalisations in sinkhorn's order (sums in index order, divide by eps + Σ), so one
// pass yields the result of every iteration count; each run is cross-checked against
// sinkhorn at a few counts, and a mismatch is an internal error, never a silent
// divergence from the oracle.
#include "bufferlab/oracle/mhc_sinkhorn_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::oracle {
namespace {

constexpr uint64_t kMaxMhc = 16;
constexpr uint64_t kMaxIters = 10000;
constexpr uint64_t kMaxTraceCases = 1000;
constexpr uint64_t kMaxFrontierCases = 100000;

// "0.01", "1e-06", "inf": the shortest text that reads as the value (no fmt: the unit tests
// compile this file without it).
std::string num(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

template <typename... Args>
std::string printf_string(const char* format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(out.size() - 1);
  return out;
}

std::string range_error(const std::string& what, uint64_t value, uint64_t hi) {
  return what + " = " + std::to_string(value) + ": must be in 1.." + std::to_string(hi);
}

// SplitMix64's output for state x (seeded_random.h, the project's one generator).
uint64_t splitmix64(uint64_t x) { return splitmix64_mix(x + kSplitMix64Step); }

// NaN sorts last (it is the worst error).
bool error_less(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// The ⌈n/2⌉-th smallest.
double lower_median(std::vector<double> v) {
  std::sort(v.begin(), v.end(), error_less);
  return v[(v.size() - 1) / 2];
}

double worst_of(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end(), error_less);
}

// error within bound; a NaN on either side is not.
bool within(double error, double bound) { return error <= bound; }

double ratio(double error, double bound) {
  if (std::isnan(error) || std::isnan(bound)) return std::numeric_limits<double>::quiet_NaN();
  if (bound > 0) return error / bound;
  return error > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

// The stepper against sinkhorn at iteration count t: the same operations in the same
// order agree exactly; the tolerance only allows a different summation order in the oracle.
void cross_check(const SinkhornStepper& s, std::span<const double> K, uint64_t hc, double eps,
                 uint64_t case_index) {
  const std::vector<double> mine = s.result();
  const std::vector<double> ref = sinkhorn(K, hc, s.iters(), eps);
  const double tol = 64.0 * static_cast<double>(hc * s.iters()) * 0x1p-53;
  for (size_t k = 0; k < mine.size(); ++k) {
    const double d = std::fabs(mine[k] - ref[k]);
    if (d > tol || (std::isnan(mine[k]) != std::isnan(ref[k])))
      throw std::logic_error("sinkhorn stepper disagrees with sinkhorn: case " +
                             std::to_string(case_index) + ", " + std::to_string(s.iters()) +
                             " iterations, entry " + std::to_string(k) + ": " + num(mine[k]) +
                             " vs " + num(ref[k]));
  }
}

// The spec's formula plus the FP64 slack the oracle derives (the judged bound less the
// exact-arithmetic one).
double spec_with_slack(const SinkhornBound& exact, double fp64_bound) {
  const double slack = fp64_bound - exact.row_bound;
  return exact.spec_bound + (std::isfinite(slack) ? std::max(slack, 0.0) : 0.0);
}

bool is_checkpoint(uint64_t t, uint64_t last) { return t == last || (t & (t - 1)) == 0; }

void check_common(uint64_t hc, uint64_t iters, const char* iters_option, double eps) {
  if (iters == 0 || iters > kMaxIters) throw Error(range_error(iters_option, iters, kMaxIters));
  if (hc == 0 || hc > kMaxMhc) throw Error(range_error("--hc", hc, kMaxMhc) + " (kMaxHcMult)");
  if (!std::isfinite(eps) || eps < 0)
    throw Error("--eps = " + num(eps) + ": must be a finite number >= 0");
}

void check_trace_range(double range) {
  if (!std::isfinite(range) || range <= 0)
    throw Error("--range = " + num(range) + ": must be a finite number > 0");
}

// Divides each of the hc lines a of m (elements a·line + b·step, b ascending) by eps + its sum:
// the rows with (line, step) = (hc, 1), the columns with (1, hc).
void normalise_lines(std::vector<double>& m, uint64_t hc, uint64_t line, uint64_t step,
                     double eps) {
  for (uint64_t a = 0; a < hc; ++a) {
    double sum = 0.0;
    for (uint64_t b = 0; b < hc; ++b) sum += m[a * line + b * step];
    const double d = eps + sum;
    for (uint64_t b = 0; b < hc; ++b) m[a * line + b * step] /= d;
  }
}

}  // namespace

std::vector<double> sinkhorn_case_logits(uint64_t seed, uint64_t index, uint64_t hc, double range) {
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(index)));
  std::vector<double> logits(hc * hc);
  for (double& l : logits) l = range * (static_cast<double>(gen() >> 11) * 0x1p-53);
  return logits;
}

SinkhornStepper::SinkhornStepper(std::span<const double> K, uint64_t hc, double eps)
    : hc_(hc), eps_(eps), state_(K.begin(), K.end()) {
  if (K.size() != hc * hc) throw std::logic_error("SinkhornStepper: K is not hc x hc");
  normalise_columns(eps_);
}

void SinkhornStepper::normalise_columns(double eps) { normalise_lines(state_, hc_, 1, hc_, eps); }

void SinkhornStepper::normalise_rows(double eps) { normalise_lines(state_, hc_, hc_, 1, eps); }

void SinkhornStepper::step() {
  normalise_rows(eps_);
  normalise_columns(eps_);
  ++iters_;
}

std::vector<double> SinkhornStepper::result() const {
  std::vector<double> c = state_;
  for (uint64_t j = 0; j < hc_; ++j) {
    double sum = 0.0;
    for (uint64_t i = 0; i < hc_; ++i) sum += c[i * hc_ + j];
    for (uint64_t i = 0; i < hc_; ++i) c[i * hc_ + j] /= sum;
  }
  return c;
}

double SinkhornStepper::row_error() const { return max_row_sum_error(result(), hc_); }

void check_sinkhorn_options(const SinkhornTraceOptions& o) {
  check_trace_range(o.range);
  check_common(o.hc, o.iters, "--iters", o.eps);
  if (o.cases == 0 || o.cases > kMaxTraceCases)
    throw Error(range_error("--cases", o.cases, kMaxTraceCases));
}

SinkhornTrace mhc_sinkhorn_trace(const SinkhornTraceOptions& options,
                                 const SinkhornProgress& progress) {
  check_sinkhorn_options(options);
  SinkhornTrace out;
  out.options = options;
  const uint64_t hc = options.hc, n = options.iters;
  for (uint64_t c = 0; c < options.cases; ++c) {
    SinkhornCaseTrace ct;
    ct.index = c;
    ct.logits = sinkhorn_case_logits(options.seed, c, hc, options.range);
    const std::vector<double> K = sinkhorn_kernel(ct.logits, hc, options.eps);
    ct.shape = sinkhorn_row_bound(K, hc, 1, options.eps);
    SinkhornStepper s(K, hc, options.eps);
    for (uint64_t t = 1; t <= n; ++t) {
      if (t > 1) s.step();
      if (is_checkpoint(t, n)) cross_check(s, K, hc, options.eps, c);
      const double e = s.row_error();
      const double b =
          sinkhorn_row_bound(K, hc, t, options.eps, kSinkhornFp64UnitRoundoff).row_bound;
      ct.error.push_back(e);
      ct.bound.push_back(b);
      const SinkhornBound exact = sinkhorn_row_bound(K, hc, t, options.eps);
      ct.exact_bound.push_back(exact.row_bound);
      ct.spec_bound.push_back(spec_with_slack(exact, b));
      if (!within(e, b) && !ct.first_violation) ct.first_violation = {c, t, e, b};
    }
    out.cases.push_back(std::move(ct));
    if (progress) progress(c + 1, options.cases);
  }
  for (uint64_t t = 1; t <= n; ++t) {
    SinkhornIterationSummary it;
    it.iter = t;
    std::vector<double> errors, bounds;
    for (const auto& ct : out.cases) {
      const double e = ct.error[t - 1], b = ct.bound[t - 1];
      errors.push_back(e);
      bounds.push_back(b);
      it.worst_ratio = std::max(it.worst_ratio, ratio(e, b), error_less);
      if (!within(e, b)) {
        ++it.violations;
        if (!out.first_violation) out.first_violation = SinkhornViolation{ct.index, t, e, b};
      }
      if (!within(e, ct.exact_bound[t - 1])) ++it.above_exact_bound;
      if (!within(e, ct.spec_bound[t - 1])) ++it.above_spec_bound;
    }
    it.median_error = lower_median(errors);
    it.worst_error = worst_of(errors);
    it.median_bound = lower_median(bounds);
    it.largest_bound = worst_of(bounds);
    out.violations += it.violations;
    out.iterations.push_back(it);
  }
  return out;
}

void check_frontier_options(const FrontierOptions& o) {
  if (o.ranges.empty() || o.eps.empty() || o.targets.empty())
    throw Error("the frontier needs at least one range, one eps and one target");
  for (double e : o.eps) check_common(o.hc, o.max_iters, "--iters", e);
  for (double r : o.ranges) check_trace_range(r);
  if (o.cases == 0 || o.cases > kMaxFrontierCases)
    throw Error(range_error("--cases", o.cases, kMaxFrontierCases));
  for (double t : o.targets)
    if (!(t > 0)) throw Error("frontier target " + num(t) + ": must be > 0");
}

Frontier sinkhorn_frontier(const FrontierOptions& options, const SinkhornProgress& progress) {
  check_frontier_options(options);
  Frontier out;
  out.options = options;
  const uint64_t hc = options.hc, n = options.max_iters;
  const uint64_t model = std::min(options.model_iters, n);
  const uint64_t total = options.eps.size() * options.ranges.size() * options.cases;
  const uint64_t not_reached = n + 1;
  uint64_t done = 0;
  for (double eps : options.eps) {
    for (double range : options.ranges) {
      FrontierRow row;
      row.range = range;
      row.eps = eps;
      row.cases = options.cases;
      std::vector<std::vector<uint64_t>> reached(options.targets.size());
      std::vector<double> at_model;
      for (uint64_t c = 0; c < options.cases; ++c) {
        const std::vector<double> logits = sinkhorn_case_logits(options.seed, c, hc, range);
        const std::vector<double> K = sinkhorn_kernel(logits, hc, eps);
        SinkhornStepper s(K, hc, eps);
        std::vector<uint64_t> first(options.targets.size(), not_reached);
        for (uint64_t t = 1; t <= n; ++t) {
          if (t > 1) s.step();
          if (t == 1) cross_check(s, K, hc, eps, c);
          const double e = s.row_error();
          const SinkhornBound fp64 = sinkhorn_row_bound(K, hc, t, eps, kSinkhornFp64UnitRoundoff);
          const double b = fp64.row_bound;
          ++row.checked;
          if (!within(e, b)) {
            ++row.violations;
            if (!row.first_violation) row.first_violation = SinkhornViolation{c, t, e, b};
          }
          // spec_bound does not depend on u; the exact-arithmetic bound (another O(t) call)
          // is needed for the slack only when the error exceeds the formula itself.
          if (!within(e, fp64.spec_bound) &&
              !within(e, spec_with_slack(sinkhorn_row_bound(K, hc, t, eps), b)))
            ++row.above_spec_bound;
          bool all = true;
          for (size_t k = 0; k < options.targets.size(); ++k) {
            if (first[k] == not_reached && e <= options.targets[k]) first[k] = t;
            all = all && first[k] != not_reached;
          }
          if (t == model) at_model.push_back(e);
          if (all && t >= model) break;
        }
        cross_check(s, K, hc, eps, c);
        for (size_t k = 0; k < options.targets.size(); ++k) reached[k].push_back(first[k]);
        if (progress) progress(++done, total);
      }
      for (size_t k = 0; k < options.targets.size(); ++k) {
        FrontierTarget ft;
        ft.target = options.targets[k];
        std::vector<uint64_t>& v = reached[k];
        std::sort(v.begin(), v.end());
        const uint64_t med = v[(v.size() - 1) / 2], worst = v.back();
        if (med != not_reached) ft.median_iters = med;
        if (worst != not_reached) ft.worst_iters = worst;
        ft.not_reached = static_cast<uint64_t>(std::count(v.begin(), v.end(), not_reached));
        ft.reached_at_model = static_cast<uint64_t>(std::count_if(
            at_model.begin(), at_model.end(), [&](double e) { return e <= ft.target; }));
        row.targets.push_back(ft);
      }
      row.median_error_at_model = lower_median(at_model);
      row.worst_error_at_model = worst_of(at_model);
      out.violations += row.violations;
      out.rows.push_back(std::move(row));
    }
  }
  return out;
}

std::string format_frontier_table(const Frontier& f) {
  const FrontierOptions& o = f.options;
  const unsigned long long model = o.model_iters, max_iters = o.max_iters;
  std::string out = printf_string(
      "sinkhorn --frontier: hc %llu, %llu cases per row (seed %llu), comb logits uniform in "
      "[0, range], up to %llu iterations\n",
      static_cast<unsigned long long>(o.hc), static_cast<unsigned long long>(o.cases),
      static_cast<unsigned long long>(o.seed), max_iters);
  out += printf_string(
      "iterations = hc_sinkhorn_iters until max_i |row sum_i - 1| <= target: median (the "
      "ceil(K/2)-th smallest) and max, '>%llu' = not reached;\n'at %llu' = cases within the "
      "target at %llu iterations (the real models' setting); checked = (case, iteration) pairs "
      "judged\nagainst the bound (u = 2^-53), each case run until both targets and %llu "
      "iterations are reached; '> spec' = of them, above the spec's formula + the FP64 "
      "slack\n\n",
      max_iters, model, model, model);
  out += printf_string("%6s  %6s", "eps", "range");
  for (double t : o.targets)
    out += printf_string("  %9s  %9s  %9s", (num(t) + " med").c_str(), (num(t) + " max").c_str(),
                         ("at " + std::to_string(model)).c_str());
  out += printf_string(
      "  %11s  %11s  %8s  %10s  %7s\n", ("err@" + std::to_string(model) + " med").c_str(),
      ("err@" + std::to_string(model) + " max").c_str(), "checked", "violations", "> spec");
  for (const auto& r : f.rows) {
    out += printf_string("%6s  %6s", num(r.eps).c_str(), num(r.range).c_str());
    for (const auto& t : r.targets)
      out += printf_string(
          "  %9s  %9s  %9s", format_iters(t.median_iters, o.max_iters).c_str(),
          format_iters(t.worst_iters, o.max_iters).c_str(),
          (std::to_string(t.reached_at_model) + "/" + std::to_string(r.cases)).c_str());
    out += printf_string("  %11.2e  %11.2e  %8llu  %10llu  %7llu\n", r.median_error_at_model,
                         r.worst_error_at_model, static_cast<unsigned long long>(r.checked),
                         static_cast<unsigned long long>(r.violations),
                         static_cast<unsigned long long>(r.above_spec_bound));
  }
  return out;
}

std::string format_iters(const std::optional<uint64_t>& iters, uint64_t max_iters) {
  if (iters) return std::to_string(*iters);
  std::string out = ">";  // (not ">" + ...: GCC 12 warns -Wrestrict there, a false positive)
  out += std::to_string(max_iters);
  return out;
}

}  // namespace bufferlab::oracle
