// Verifying a whole configuration: every launchable pass of a boundary grid (docs/spec/buffers.md
// §2) on every path combination (docs/spec/buffers.md §5), each plan checked against the layout of
// the sizing under test. Used by `bufferlab verify`, `bufferlab fuzz` and the property suite.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"
#include "bufferlab/core/verify/check.h"
#include "bufferlab/core/verify/high_water.h"

namespace bufferlab::verify {

// The boundary grid for a run shape: prefill t at and around multiples of 16 and 64, at m−1,
// m (and m+1, refused); every decode n in 1..max_batch_size (+1, refused); verify rows at
// the row boundaries up to 160 (and m−1, m when smaller); mixed steps for the largest n of
// every rung with t at 1, 16, 64, 65 and the largest t that fits; co-dispatch n = 2..8 with
// L at 1, 63, 64, 65 and the largest L that fits (and one more, refused).
std::vector<plan::Pass> pass_grid(const RunShape& shape);

// Two passes with the same key build the same plans: a decode pass depends only on its
// padded rows (rung(n)), so the walks of verify_config and high_water_marks build each key once.
std::string plan_key(const plan::Pass& pass);

struct KindSummary {
  plan::PassKind kind = plan::PassKind::prefill;
  uint64_t passes = 0;   // passes of the grid
  uint64_t refused = 0;  // refused by the engine (counted, not findings)
  // Pass × path checks: a decode pass whose padded rows (rung) an earlier decode pass already
  // had reuses that plan and its findings, and counts here once per pass.
  uint64_t plans = 0;
  uint64_t distinct_plans = 0;              // plans built and checked (plans − reused)
  uint64_t findings = 0;                    // findings reported
  uint64_t min_tokens = 0, max_tokens = 0;  // tokens of the launched passes
};

struct ConfigReport {
  std::vector<KindSummary> kinds;  // one per PassKind, in all_pass_kinds() order
  std::vector<Finding> findings;   // in grid order, then path, then step
  uint64_t plans = 0;              // distinct plans built and checked
  uint64_t paths = 0;              // path combinations checked per pass
  HighWaterMarks high_water;       // of every plan checked (the slack report)
  bool clean() const { return findings.empty(); }
};

struct VerifyOptions {
  std::vector<plan::Paths> paths;  // empty: plan::all_paths(config, target)
  size_t max_findings = 1000;      // stop collecting (not checking) beyond this
  std::string config_label;        // names the model in every finding (Finding::config)
  bool stop_at_first = false;      // fuzzing: stop at the first plan with a finding
};

ConfigReport verify_config(const ModelConfig& config, const BufferSizes& sizes,
                           const Target& target, const RunShape& shape,
                           const std::vector<plan::Pass>& passes, const VerifyOptions& opts = {});

// The smallest prefill chunk that overflows `buffer`: bisection over t in [1, m] for a t
// whose plan (on any of the path combinations) has a bounds finding on `buffer` while t − 1
// has none. Returns that plan's first such finding, or nothing when prefill(m) does not
// overflow it. (The grid samples boundaries; a short buffer's threshold usually lies between
// them.)
struct OverflowingPrefill {
  uint64_t t = 0;   // the chunk size
  Finding finding;  // its first bounds finding on the buffer
};
std::optional<OverflowingPrefill> smallest_overflowing_prefill(
    const ModelConfig& config, const BufferSizes& sizes, const Target& target,
    const RunShape& shape, const std::string& buffer, const VerifyOptions& opts = {});

}  // namespace bufferlab::verify
