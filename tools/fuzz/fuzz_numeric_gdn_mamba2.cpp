// One case of `bufferlab fuzz --numeric gdn|ssd` (fuzz_numeric_gdn_mamba2.h): the case from the SSM
// generators, the run through the oracle's harness over a footprint layout, its judge.
#include "fuzz/fuzz_numeric_gdn_mamba2.h"

#include <fmt/format.h>
#include <rapidcheck.h>

#include <exception>
#include <string>
#include <utility>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "bufferlab/properties/gdn_mamba2_generators.h"
#include "common/backend_bounds.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {
namespace {

constexpr uint64_t kChunk = 64;
// Draws tried under a mutant before giving up (a chunked GDN case comes up 3 times in 8, a
// chunked multi-chunk SSD case about 2 in 3: 64 misses in a row do not happen).
constexpr uint64_t kMutantDraws = 64;

// The case of `cs`, or under a mutant the first of cs, splitmix64_hash(cs + 1), ... that `runs_it`.
template <class Case, class Gen, class Pred>
Case draw(const Gen& gen, uint64_t cs, int size, bool mutant, Pred runs_it) {
  for (uint64_t k = 0; k < (mutant ? kMutantDraws : 1); ++k) {
    const rc::Random random(k == 0 ? cs : oracle::splitmix64_hash(cs + k));
    Case c = gen(random, size).value();
    if (!mutant || runs_it(c)) return c;
  }
  throw Error(
      fmt::format("no case of seed {} runs the mutant's kernel in {} draws", cs, kMutantDraws));
}

void fail_with(GdnMamba2FuzzOutcome& o, const std::exception& e) {
  o.passed = false;
  o.what = o.check + ": error";
  o.report = std::string("error: ") + e.what() + "\n";
}

// The outcome of case `c`: what it is, then `judge()` — the case planned, run on the backend
// and judged; an exception from it is the case's failure.
template <class Case, class Judge>
GdnMamba2FuzzOutcome judged_outcome(const Case& c, std::string check, std::string check_description,
                                    std::string compare_options, Judge judge) {
  GdnMamba2FuzzOutcome o;
  o.description = c.describe();
  o.check = std::move(check);
  o.check_description = std::move(check_description);
  o.config = to_normalized_json(c.config);
  o.compare_options = std::move(compare_options);
  try {
    o.finish(judge());
  } catch (const std::exception& e) {
    fail_with(o, e);
  }
  return o;
}

// `plan` of case `c` run on `backend` over the plan's footprint and judged, by the family's
// harness functions: footprint(backend, plan), inputs(c), run(backend, ws, plan, in) and
// judge(plan, in, run, backend name, seed, bounds) (judge_* is overloaded: a lambda).
template <class Case, class Plan, class Footprint, class Inputs, class Run, class Judge>
oracle::AgreementReport run_on_footprint(Backend& backend, const Case& c, const Plan& plan,
                                         Footprint footprint, Inputs inputs, Run run, Judge judge) {
  const Workspace ws = footprint(backend, plan);
  const auto in = inputs(c);
  const auto result = run(backend, ws, plan, in);
  return judge(plan, in, result, backend.name(), c.seed, bounds_of(backend));
}

std::string gdn_compare_options(const gen::GdnCase& c) {
  if (c.profile.value_scale != 1.0) return {};
  std::string o =
      fmt::format("--op gdn --tokens {} --streams {} --seed {} --path {} --alpha {} --beta {}", c.L,
                  c.sequences, c.seed, gen::to_string(c.path), cli::to_string(c.profile.alpha),
                  cli::to_string(c.profile.beta));
  if (c.profile.parallel_keys) o += " --parallel-keys";
  if (c.profile.zero_state) o += " --zero-state";
  return o;
}

std::string mamba2_compare_options(const gen::Mamba2Case& c) {
  if (c.profile.x_scale != 1.0) return {};
  std::string o =
      fmt::format("--op ssd --tokens {} --streams {} --seed {} --path {} --dt {}", c.L, c.sequences,
                  c.seed, gen::to_string(c.path), gen::to_string(c.profile.dt));
  if (c.profile.zero_state) o += " --zero-state";
  return o;
}

}  // namespace

GdnMamba2FuzzOutcome run_gdn_fuzz_case(Backend& backend, uint64_t cs, int size, Mutant mutant) {
  const gen::GdnCase c = draw<gen::GdnCase>(
      gen::gdn_case(gen::full_gdn_ranges()), cs, size, mutant == Mutant::M_GDNCARRY,
      [](const gen::GdnCase& x) { return x.path == oracle::GdnPath::chunked; });
  const char* what =
      c.path == oracle::GdnPath::chunked
          ? "GDN conv1d -> gates -> chunked core (wu, state, output) -> gated norm, judge_gdn"
          : "GDN conv1d -> gates -> token recurrence -> gated norm, judge_gdn";
  return judged_outcome(
      c, std::string("gdn-") + gen::to_string(c.path), what, gdn_compare_options(c), [&] {
        return run_on_footprint(backend, c, oracle::plan_gdn(c.dims(), c.path),
                                oracle::allocate_gdn_footprint, gen::gdn_inputs, oracle::run_gdn,
                                [](const auto&... a) { return oracle::judge_gdn(a...); });
      });
}

GdnMamba2FuzzOutcome run_mamba2_fuzz_case(Backend& backend, uint64_t cs, int size, Mutant mutant) {
  // M-SSDSTATE drops the state between chunks: it needs a sequence of more than one chunk, and
  // a state that survives to the next chunk — large dt decays it to nothing within a chunk
  // (exp(dt·A) underflows), tiny dt leaves a zero starting state near zero.
  const gen::Mamba2Case c =
      draw<gen::Mamba2Case>(gen::mamba2_case(gen::full_mamba2_ranges()), cs, size,
                            mutant == Mutant::M_SSDSTATE, [](const gen::Mamba2Case& x) {
                              return x.path == oracle::Mamba2Path::chunked && x.L > kChunk &&
                                     x.profile.dt == oracle::Mamba2DtRegime::typical;
                            });
  const char* what =
      c.path == oracle::Mamba2Path::chunked
          ? "Mamba-2 conv1d -> chunked SSD (cumsum, bmm, scan) per sequence -> gated norm, "
            "judge_ssd"
          : "Mamba-2 conv1d -> recurrence -> gated norm, judge_ssd";
  return judged_outcome(
      c, std::string("ssd-") + gen::to_string(c.path), what, mamba2_compare_options(c), [&] {
        return run_on_footprint(backend, c, oracle::plan_mamba2(c.dims(), c.path),
                                oracle::allocate_mamba2_footprint, gen::mamba2_inputs,
                                oracle::run_mamba2,
                                [](const auto&... a) { return oracle::judge_mamba2(a...); });
      });
}

}  // namespace bufferlab::cli
