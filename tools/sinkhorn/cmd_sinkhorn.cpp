// `bufferlab sinkhorn`: how fast the spec's FP64 Sinkhorn (docs/spec/numerics.md §3) converges on
// random comb logits, against the Birkhoff–Hopf row bound — per iteration for one logit range
// (table, --json, --svg), or the convergence frontier over the standard ranges (--frontier).
// Exit 0 every error within its bound, 1 a violation (the first is named), 2 bad input.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/mhc_sinkhorn_trace.h"
#include "common/commands.h"
#include "common/parse_number.h"
#include "common/stopwatch.h"
#include "svg/svg_sinkhorn.h"
#include "svg/svg_util.h"

namespace bufferlab::cli {
namespace {

using oracle::check_frontier_options;
using oracle::check_sinkhorn_options;
using oracle::Frontier;
using oracle::FrontierOptions;
using oracle::kSinkhornFp64UnitRoundoff;
using oracle::mhc_sinkhorn_trace;
using oracle::sinkhorn_frontier;
using oracle::SinkhornCaseTrace;
using oracle::SinkhornIterationSummary;
using oracle::SinkhornTrace;
using oracle::SinkhornTraceOptions;
using oracle::SinkhornViolation;

struct SinkhornCommand {
  std::string range, iters, hc = "4", cases, seed = "1", eps = "1e-6", svg;
  bool json = false;
  bool frontier = false;
  CLI::App* app = nullptr;
};

bool given(const SinkhornCommand& cmd, const char* option) {
  return cmd.app->get_option(option)->count() > 0;
}

// A decimal or exponent number as strtod reads it, the whole text; range checks are the
// report's (check_sinkhorn_options), so "inf" parses here and is refused there by name.
double parse_double(const std::string& option, const std::string& text) {
  const std::string where = option + " = '" + text + "'";
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())))
    throw Error(where + ": expected a number");
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) throw Error(where + ": expected a number");
  return value;
}

// A progress line on stderr once a run has taken 2 s (cases done): rewritten in place on a
// terminal, then one line every 5 s otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(fileno(stderr)) != 0) {}

  void update(const char* what, uint64_t done, uint64_t total) {
    const double t = elapsed();
    if (t < 2.0 || (last_ > 0 && t < last_ + (tty_ ? 0.25 : 5.0))) return;
    last_ = t;
    const std::string line =
        fmt::format("sinkhorn{}: {} of {} cases, {:.1f} s", what, done, total, t);
    if (tty_) {
      fmt::print(stderr, "\r{}", line);
      std::fflush(stderr);
      shown_ = true;
    } else {
      fmt::print(stderr, "{}\n", line);
    }
  }
  void finish() {
    if (shown_) fmt::print(stderr, "\n");
  }
  double elapsed() const { return stopwatch_.seconds(); }

 private:
  bool tty_;
  bool shown_ = false;
  Stopwatch stopwatch_;
  double last_ = 0.0;
};

nlohmann::json violation_json(const std::optional<SinkhornViolation>& v) {
  if (!v) return nullptr;
  return {{"case", v->case_index}, {"iter", v->iter}, {"error", v->error}, {"bound", v->bound}};
}

std::string violation_text(const SinkhornViolation& v) {
  if (std::isnan(v.error))
    return fmt::format("case {}, iteration {}: row-sum error is NaN (bound {:.6g})", v.case_index,
                       v.iter, v.bound);
  return fmt::format("case {}, iteration {}: row-sum error {:.6g} > bound {:.6g}", v.case_index,
                     v.iter, v.error, v.bound);
}

// --- the per-range trace ---------------------------------------------------------------------

// Every iteration up to 30; beyond, 1..10 and a 1.2-1.5-2-2.5-3-4-5-6-8 series, the last
// iteration and the first violation.
std::vector<uint64_t> shown_iterations(const SinkhornTrace& tr) {
  const uint64_t n = tr.options.iters;
  std::set<uint64_t> s;
  if (n <= 30) {
    for (uint64_t t = 1; t <= n; ++t) s.insert(t);
  } else {
    for (uint64_t t = 1; t <= 10; ++t) s.insert(t);
    for (uint64_t d = 1; d <= n; d *= 10)
      for (uint64_t m : {12, 15, 20, 25, 30, 40, 50, 60, 80, 100})
        if (m * d <= n) s.insert(m * d);
    s.insert(n);
  }
  if (tr.first_violation) s.insert(tr.first_violation->iter);
  return {s.begin(), s.end()};
}

void print_trace_table(const SinkhornTrace& tr) {
  const SinkhornTraceOptions& o = tr.options;
  fmt::print(
      "sinkhorn: {} cases of seed {}, hc {}, comb logits uniform in [0, {}], eps {}, 1..{} "
      "iterations (FP64 Sinkhorn of docs/spec/numerics.md §3)\n",
      o.cases, o.seed, o.hc, o.range, o.eps, o.iters);
  fmt::print(
      "error = max_i |row sum_i - 1| after t iterations; bound = oracle::sinkhorn_row_bound "
      "(Birkhoff-Hopf, kappa = tanh(Delta/4),\ncontraction per half step, eps-corrected) with "
      "the FP64 arithmetic slack u = 2^-53: every error is judged against it\n\n");
  fmt::print("{:>5}  {:>10}  {:>8}  {:>17}  {:>12}  {:>12}\n", "case", "Delta", "kappa",
             "log(rho0 max/min)", fmt::format("error@{}", o.iters),
             fmt::format("bound@{}", o.iters));
  const size_t listed = std::min<size_t>(tr.cases.size(), 16);
  for (size_t c = 0; c < listed; ++c) {
    const SinkhornCaseTrace& ct = tr.cases[c];
    fmt::print("{:>5}  {:>10.4g}  {:>8.5f}  {:>17.4g}  {:>12.3e}  {:>12.3e}\n", ct.index,
               ct.shape.delta, ct.shape.kappa, ct.shape.log_rho0, ct.error.back(), ct.bound.back());
  }
  if (listed < tr.cases.size())
    fmt::print("  ... {} more cases (--json lists all)\n", tr.cases.size() - listed);
  fmt::print("\n{:>5}  {:>12}  {:>12}  {:>12}  {:>13}  {:>10}  {:>8}  {:>8}  {}\n", "iter",
             "median error", "worst error", "median bound", "largest bound", "worst e/b", "> exact",
             "> spec", "holds");
  const std::vector<uint64_t> rows = shown_iterations(tr);
  const size_t k = tr.cases.size();
  for (uint64_t t : rows) {
    const SinkhornIterationSummary& it = tr.iterations[t - 1];
    fmt::print("{:>5}  {:>12.3e}  {:>12.3e}  {:>12.3e}  {:>13.3e}  {:>10.3g}  {:>8}  {:>8}  {}\n",
               t, it.median_error, it.worst_error, it.median_bound, it.largest_bound,
               it.worst_ratio, fmt::format("{}/{}", it.above_exact_bound, k),
               fmt::format("{}/{}", it.above_spec_bound, k),
               it.violations == 0 ? "yes" : fmt::format("NO ({} cases)", it.violations));
  }
  if (rows.size() < o.iters) fmt::print("(rows thinned: --json has every iteration)\n");
  fmt::print(
      "worst e/b: the largest error/bound of the cases; '> exact': cases above the bound for "
      "exact arithmetic (u = 0), i.e. at the\nFP64 rounding floor; '> spec': cases above "
      "the spec's formula exp(kappa^(2t) log(max rho0/min rho0)) - 1 plus the same FP64 "
      "slack\n(the formula is stated for eps = 0; reported, not judged)\n\n");
}

nlohmann::json trace_json(const SinkhornTrace& tr) {
  const SinkhornTraceOptions& o = tr.options;
  nlohmann::json iterations = nlohmann::json::array();
  for (const auto& it : tr.iterations)
    iterations.push_back({{"iter", it.iter},
                          {"median_error", it.median_error},
                          {"worst_error", it.worst_error},
                          {"median_bound", it.median_bound},
                          {"largest_bound", it.largest_bound},
                          {"worst_ratio", it.worst_ratio},
                          {"violations", it.violations},
                          {"above_exact_bound", it.above_exact_bound},
                          {"above_spec_bound", it.above_spec_bound},
                          {"holds", it.violations == 0}});
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& ct : tr.cases)
    cases.push_back({{"case", ct.index},
                     {"logits", ct.logits},
                     {"delta", ct.shape.delta},
                     {"kappa", ct.shape.kappa},
                     {"log_rho0", ct.shape.log_rho0},
                     {"error", ct.error},
                     {"bound", ct.bound},
                     {"exact_bound", ct.exact_bound},
                     {"spec_formula_with_fp64_slack", ct.spec_bound},
                     {"first_violation", violation_json(ct.first_violation)}});
  return {{"mode", "trace"},
          {"range", o.range},
          {"iters", o.iters},
          {"hc", o.hc},
          {"cases", o.cases},
          {"seed", o.seed},
          {"eps", o.eps},
          {"unit_roundoff", kSinkhornFp64UnitRoundoff},
          {"holds", tr.holds()},
          {"violations", tr.violations},
          {"first_violation", violation_json(tr.first_violation)},
          {"iterations", std::move(iterations)},
          {"case_traces", std::move(cases)}};
}

int run_trace(const SinkhornCommand& cmd) {
  if (!given(cmd, "--range"))
    throw Error(
        "--range is required: the comb logits are drawn uniform in [0, L] (or use "
        "--frontier)");
  if (!given(cmd, "--iters")) throw Error("--iters is required: iterations 1..N are traced");
  SinkhornTraceOptions o;
  o.range = parse_double("--range", cmd.range);
  o.iters = parse_u64("--iters", cmd.iters);
  o.hc = parse_u64("--hc", cmd.hc);
  if (given(cmd, "--cases")) o.cases = parse_u64("--cases", cmd.cases);
  o.seed = parse_u64("--seed", cmd.seed);
  o.eps = parse_double("--eps", cmd.eps);
  check_sinkhorn_options(o);

  Progress progress;
  const SinkhornTrace tr = mhc_sinkhorn_trace(
      o, [&progress](uint64_t done, uint64_t total) { progress.update("", done, total); });
  progress.finish();
  if (!cmd.svg.empty()) write_text_file(cmd.svg, sinkhorn_svg(tr));
  if (cmd.json) {
    fmt::print("{}\n", trace_json(tr).dump(2));
  } else {
    print_trace_table(tr);
    if (!cmd.svg.empty()) fmt::print("wrote {}\n", cmd.svg);
  }
  if (!tr.holds()) {
    // The JSON stays parseable on stdout; the verdict goes to stderr there.
    const std::string msg =
        fmt::format("FAIL: {} ({} (case, iteration) pairs above the bound in all)",
                    violation_text(*tr.first_violation), tr.violations);
    fmt::print(cmd.json ? stderr : stdout, "{}\n", msg);
    return 1;
  }
  if (!cmd.json)
    fmt::print(
        "PASS: every case within its Birkhoff-Hopf bound at every iteration ({} cases x "
        "{} iterations)\n",
        o.cases, o.iters);
  return 0;
}

// --- the frontier ----------------------------------------------------------------------------

nlohmann::json frontier_json(const Frontier& f) {
  const FrontierOptions& o = f.options;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : f.rows) {
    nlohmann::json targets = nlohmann::json::array();
    for (const auto& t : r.targets)
      targets.push_back(
          {{"target", t.target},
           {"median_iters", t.median_iters ? nlohmann::json(*t.median_iters) : nullptr},
           {"worst_iters", t.worst_iters ? nlohmann::json(*t.worst_iters) : nullptr},
           {"not_reached", t.not_reached},
           {"reached_at_model_iters", t.reached_at_model}});
    rows.push_back({{"eps", r.eps},
                    {"range", r.range},
                    {"cases", r.cases},
                    {"targets", std::move(targets)},
                    {"median_error_at_model_iters", r.median_error_at_model},
                    {"worst_error_at_model_iters", r.worst_error_at_model},
                    {"checked", r.checked},
                    {"violations", r.violations},
                    {"above_spec_bound", r.above_spec_bound},
                    {"first_violation", violation_json(r.first_violation)}});
  }
  return {{"mode", "frontier"},
          {"hc", o.hc},
          {"cases", o.cases},
          {"seed", o.seed},
          {"max_iters", o.max_iters},
          {"model_iters", o.model_iters},
          {"unit_roundoff", kSinkhornFp64UnitRoundoff},
          {"holds", f.holds()},
          {"violations", f.violations},
          {"rows", std::move(rows)}};
}

int run_frontier(const SinkhornCommand& cmd) {
  for (const char* option : {"--range", "--svg"})
    if (given(cmd, option))
      throw Error(std::string(option) +
                  " applies to the per-range trace, not to --frontier "
                  "(which runs the ranges 0.01 ... 60)");
  FrontierOptions o;
  if (given(cmd, "--iters")) o.max_iters = parse_u64("--iters", cmd.iters);
  o.hc = parse_u64("--hc", cmd.hc);
  if (given(cmd, "--cases")) o.cases = parse_u64("--cases", cmd.cases);
  o.seed = parse_u64("--seed", cmd.seed);
  if (given(cmd, "--eps")) o.eps = {parse_double("--eps", cmd.eps)};
  check_frontier_options(o);

  Progress progress;
  const Frontier f = sinkhorn_frontier(o, [&progress](uint64_t done, uint64_t total) {
    progress.update(" --frontier", done, total);
  });
  progress.finish();
  if (cmd.json)
    fmt::print("{}\n", frontier_json(f).dump(2));
  else
    fmt::print("{}\n", format_frontier_table(f));
  if (!f.holds()) {
    for (const auto& r : f.rows)
      if (r.first_violation) {
        fmt::print(cmd.json ? stderr : stdout, "FAIL: range {:g}, eps {:g}: {}\n", r.range, r.eps,
                   violation_text(*r.first_violation));
        break;
      }
    return 1;
  }
  if (!cmd.json)
    fmt::print("PASS: every case within its Birkhoff-Hopf bound at every iteration run\n");
  return 0;
}

}  // namespace

void register_sinkhorn_command(CLI::App& app) {
  auto cmd = std::make_shared<SinkhornCommand>();
  CLI::App* sub = app.add_subcommand(
      "sinkhorn",
      "mHC Sinkhorn row-sum error vs the Birkhoff-Hopf bound on random comb logits (exit 1 on a "
      "violation); --frontier: iterations to reach 1e-3 / 1e-6 per logit range");
  sub->add_option("--range", cmd->range, "comb logits uniform in [0, L]; L > 0")->type_name("L");
  sub->add_option("--iters", cmd->iters,
                  "trace iterations 1..N (1..10000); with --frontier the most run per case "
                  "(default 500)")
      ->type_name("N");
  sub->add_option("--hc", cmd->hc, "streams: the comb matrix is hc x hc (1..16)")
      ->type_name("N")
      ->capture_default_str();
  sub->add_option("--cases", cmd->cases,
                  "random cases (default 8; with --frontier 200 per range and eps)")
      ->type_name("K");
  sub->add_option("--seed", cmd->seed, "seed of the cases")->type_name("S")->capture_default_str();
  sub->add_option("--eps", cmd->eps,
                  "hc_eps (>= 0; default 1e-6; --frontier runs 1e-6 and 0 unless given)")
      ->type_name("E");
  sub->add_option("--svg", cmd->svg, "write a log-scale plot of error and bound vs iteration")
      ->type_name("FILE");
  sub->add_flag("--json", cmd->json, "print the result as JSON");
  sub->add_flag("--frontier", cmd->frontier,
                "the convergence frontier over the ranges 0.01, 0.1, 1, 4, 8, 16, 30, 60");
  cmd->app = sub;
  sub->callback([cmd] { exit_code() = cmd->frontier ? run_frontier(*cmd) : run_trace(*cmd); });
}

}  // namespace bufferlab::cli
