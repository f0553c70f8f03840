// The mHC properties of tests/property/test_mhc_*_properties.cpp over their FULL ranges (label
// slow): hidden up to 7168, hc up to 16, r up to 512, and the low-rank GEMM path across the slab
// boundary — T = 2048 (one full slab), 2049 (a second slab of one row) and 4097 (three slabs),
// with NaN / ±Inf planted on both sides of a slab edge. Oracle work is capped at 2^28
// multiply-adds per case (gen::full_mhc_ranges; the judges evaluate it a few times over) and
// each property runs kMhcCases cases (RC_PARAMS="seed=..." still picks the seed); the file runs in
// about three minutes on two cores. Deeper: `bufferlab fuzz --numeric mhc`.
// Built into bufferlab_slow_numeric_tests (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/properties/mhc_generators.h"
#include "cpu_backend.h"
#include "mhc_property_support.h"
#include "rapidcheck_cases.h"
#include "report_checks.h"

namespace bufferlab {
namespace {

using gen::MhcCase;
using gen::MhcOpKind;
using oracle::MhcLowRankPath;
using testing::cpu_backend;
using testing::require_passed;
using testing::mhc::draw;
using U = uint64_t;

constexpr int kMhcCases = 50;  // successes per property unless told (testing::check_many)
constexpr U kSplitMaxRows = MhcSplitCarve::kMaxRows;  // docs/spec/numerics.md §4 (core ops/mhc.h)

gen::MhcRanges ranges() { return gen::full_mhc_ranges(); }

// Half the cases at hidden ≥ 2048 (the generator's log-uniform draw reaches the top octave only
// in the last cases of a run).
gen::MhcRanges maybe_large_hidden() {
  gen::MhcRanges r = ranges();
  if (*rc::gen::arbitrary<bool>()) r.min_hidden = 2048;
  return r;
}

// Pre: agreement, and the Sinkhorn checks of docs/spec/numerics.md §3 inside the judge (entries,
// column sums, the Birkhoff–Hopf row bound, the Sinkhorn class, every entry against the FP64
// Sinkhorn under the scaling-vector bound).
TEST(MhcFullRange, PreAgreesAndConverges) {
  testing::check_many(
      [] {
        const MhcCase c = draw(MhcOpKind::pre, maybe_large_hidden());
        MhcPreOp op = MhcPreOp::make(c.config, c.rows);
        const U pool = oracle::place_mhc_weights(op);
        const Workspace ws = oracle::allocate_mhc_footprint(cpu_backend(), op, pool);
        const auto in = gen::mhc_pre_inputs(c);
        require_passed(oracle::judge_mhc_pre(op, in, oracle::run_mhc_pre(cpu_backend(), ws, op, in),
                                             "cpu", c.seed));
      },
      kMhcCases);
}

TEST(MhcFullRange, HeadAndPostAgree) {
  testing::check_many(
      [] {
        const bool head = *rc::gen::arbitrary<bool>();
        const MhcCase c = draw(head ? MhcOpKind::head : MhcOpKind::post, maybe_large_hidden());
        if (head) {
          MhcHeadOp op = MhcHeadOp::make(c.config, c.rows);
          const U pool = oracle::place_mhc_weights(op);
          const Workspace ws = oracle::allocate_mhc_footprint(cpu_backend(), op, pool);
          const auto in = gen::mhc_head_inputs(c);
          require_passed(oracle::judge_mhc_head(
              op, in, oracle::run_mhc_head(cpu_backend(), ws, op, in), "cpu", c.seed));
          return;
        }
        MhcPostOp op = MhcPostOp::make(c.config, c.rows);
        const bool in_place = *rc::gen::arbitrary<bool>();
        const U pool = in_place ? 0 : oracle::place_mhc_post_out_of_place(op);
        const Workspace ws = oracle::allocate_mhc_footprint(cpu_backend(), op, pool);
        const auto in = gen::mhc_post_inputs(c);
        require_passed(oracle::judge_mhc_post(
            op, in, oracle::run_mhc_post(cpu_backend(), ws, op, in), "cpu", c.seed));
      },
      kMhcCases);
}

oracle::MhcLowRankRun run_lowrank(const MhcCase& c, MhcLowRankPath path,
                                  const oracle::MhcLowRankInputs& in, U m = 0) {
  const auto plan = oracle::plan_mhc_lowrank(c.config, c.rows, path, m);
  const Workspace ws = oracle::allocate_mhc_footprint(cpu_backend(), plan);
  return oracle::run_mhc_lowrank(cpu_backend(), ws, plan, in);
}

// T ≤ 64 at large hidden / r: each path against its own oracle, and the two within the BF16
// bound of each other.
TEST(MhcFullRange, LowRankPathsAgreeAtLargeHidden) {
  testing::check_many(
      [] {
        gen::MhcRanges r = ranges();
        r.min_hidden = 2048;
        r.max_rows = kSplitMaxRows;
        MhcCase c = draw(MhcOpKind::lowrank, r);
        const auto in = gen::mhc_lowrank_inputs(c);
        const auto split = run_lowrank(c, MhcLowRankPath::split, in);
        const auto slab = run_lowrank(c, MhcLowRankPath::slab, in);
        require_passed(oracle::judge_mhc_lowrank(split, in, "cpu", c.seed));
        require_passed(oracle::judge_mhc_lowrank(slab, in, "cpu", c.seed));
        require_passed(oracle::compare_mhc_lowrank_paths(
            c.lowrank_dims(), in, split.collapse.block_in, slab.collapse.block_in));
      },
      kMhcCases);
}

// The GEMM path across the slab boundary: T = 2048, 2049, 4097 (r / h halved to fit the cap),
// and a NaN / ±Inf often planted on the last row of a slab and the first of the next.
TEST(MhcFullRange, GemmPathAcrossTheSlabBoundary) {
  testing::check_many(
      [] {
        gen::MhcRanges r = ranges();
        const U rows = *rc::gen::element(U{2049}, U{2048}, U{4097});
        r.min_rows = r.max_rows = rows;
        MhcCase c = draw(MhcOpKind::lowrank, r);
        c.path = MhcLowRankPath::slab;
        if (*rc::gen::arbitrary<bool>()) {
          const U edge = MhcGemmCarve::kSlabRows;  // tokens 2047 | 2048
          c.profile.nonfinite.push_back({edge - 1, *rc::gen::inRange<U>(0, c.hc()),
                                         *rc::gen::inRange<U>(0, c.h()), INFINITY});
          if (rows > edge)
            c.profile.nonfinite.push_back(
                {edge, *rc::gen::inRange<U>(0, c.hc()), *rc::gen::inRange<U>(0, c.h()), NAN});
        }
        RC_TAG(rows, c.profile.nonfinite.empty() ? "finite" : "non-finite at the slab edge");
        const auto in = gen::mhc_lowrank_inputs(c);
        require_passed(
            oracle::judge_mhc_lowrank(run_lowrank(c, MhcLowRankPath::slab, in), in, "cpu", c.seed));
      },
      30);
}

}  // namespace
}  // namespace bufferlab
