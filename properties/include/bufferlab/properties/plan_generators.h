// RapidCheck generators for the plan verifier: launchable passes of a run shape (biased to
// the row boundaries where sizing bugs live: multiples of 16 and 64, m and m−1, the decode
// rungs, the verify cap, the largest co-dispatch L), execution paths of plan::all_paths, and
// whole fuzz cases (family, config, run shape, target, pass, paths). Shrinking goes towards
// small values; a generated pass is always launchable for the shape it was drawn for.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/plan/pass.h"
#include "bufferlab/core/plan/paths.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"
#include "bufferlab/properties/fuzz_engine.h"

namespace bufferlab {
namespace plan {
// Printed by RapidCheck for a counterexample (found by argument-dependent lookup).
void showValue(const Pass& pass, std::ostream& os);
void showValue(const Paths& paths, std::ostream& os);
}  // namespace plan
namespace fuzz {
// The case as case_to_json (corrected sizing): loadable with case_from_json.
void showValue(const FuzzCase& c, std::ostream& os);
}  // namespace fuzz

namespace gen {

// gen::run_shape, with m also drawn as 16·k + r (r = 1..15, k small) and max_batch_size
// between decode rungs, so that m % 16 ≠ 0 and rung(n) > max_batch_size are common.
rc::Gen<RunShape> plan_run_shape();

// Whether a pass of `kind` can launch at all under `shape` (decode needs rung(1) = 2 ≤ m,
// mixed rung(1) + 1 ≤ m, co-dispatch 2 ≤ m).
bool can_launch(plan::PassKind kind, const RunShape& shape);

// Launchable passes of one kind. Precondition: can_launch(kind, shape).
rc::Gen<plan::Pass> prefill_pass(const RunShape& shape);     // t ≤ m
rc::Gen<plan::Pass> decode_pass(const RunShape& shape);      // n ≤ bs, rung(n) ≤ m
rc::Gen<plan::Pass> verify_pass(const RunShape& shape);      // rows ≤ min(160, m)
rc::Gen<plan::Pass> mixed_pass(const RunShape& shape);       // rung(n) + t ≤ m
rc::Gen<plan::Pass> codispatch_pass(const RunShape& shape);  // n = 2..8, n·L ≤ m
rc::Gen<plan::Pass> pass_of_kind(plan::PassKind kind, const RunShape& shape);

// A launchable pass of one of `kinds` (empty: every kind) for `shape`; kinds that cannot
// launch under the shape are skipped, and when none can, a prefill chunk is drawn.
rc::Gen<plan::Pass> launchable_pass(const RunShape& shape,
                                    const std::vector<plan::PassKind>& kinds = {});

// One element of plan::all_paths(config, target).
rc::Gen<plan::Paths> paths(const ModelConfig& config, const Target& target);

// What a fuzz case is drawn from (see fuzz::FuzzOptions).
struct CaseSpace {
  std::vector<std::string> families;       // empty: every family
  std::vector<plan::PassKind> pass_kinds;  // empty: every kind
  Target target;                           // base target
  bool vary_target = true;                 // also draw named targets, split-K, Q2 flags
};

// A whole fuzz case: family, config of that family, run shape, target, launchable pass,
// paths. Throws Error on an unknown family name.
rc::Gen<fuzz::FuzzCase> fuzz_case(const CaseSpace& space);

}  // namespace gen
}  // namespace bufferlab
