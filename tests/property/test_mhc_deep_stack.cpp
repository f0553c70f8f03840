// The mHC deep-stack property (docs/spec/numerics.md §3, §9; bug-catalogue B13) on the CPU backend:
// 40 layers of mhc_pre → a diagonal linear host block (block outputs ≪ the streams, so the
// highway grows) → hc_post in place, FP32 streams from mhc_expand of an embedding, against the
// faithful FP64 oracle of the same stack under the per-element bound derived in
// properties/src/mhc_deep_stack.cpp (hc ≤ 4, h ≤ 32, rows ≤ 4; 100 cases).
//
// Its planted-bug twin: the same stack with kernel mutant B13 (hc_post stores every stream
// value through BF16) must fail the stream check — the BF16 highway drops a share of each
// layer's small update, far above the FP32 terms of the bound.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "bufferlab/core/backend.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/properties/mhc_deep_stack.h"
#include "cpu_backend.h"

namespace bufferlab {
namespace {

using gen::DeepStackCase;
using gen::DeepStackResult;
using testing::cpu_backend;

DeepStackResult run_deep_stack(const DeepStackCase& c, Mutant m = Mutant::none) {
  cpu_backend().set_kernel_mutant(m);
  DeepStackResult r = gen::run_mhc_deep_stack(cpu_backend(), c, oracle::cpu_bounds());
  cpu_backend().set_kernel_mutant(Mutant::none);
  return r;
}

// Fixed cases for the printed ratios and the B13 twin: the largest shape of the property's
// range, a small one, and hc = 1 (the comb is the 1×1 identity).
DeepStackCase fixed_case(uint64_t hc, uint64_t h, uint64_t rows, double L, uint64_t seed) {
  return {.hc = hc, .h = h, .rows = rows, .logit_range = L, .seed = seed};
}

TEST(MhcDeepStack, StackOracleMatchesOracleHcPre) {
  for (const DeepStackCase& c :
       {fixed_case(4, 32, 4, 2.0, 1), fixed_case(3, 5, 2, 0.5, 2), fixed_case(1, 7, 1, 1.0, 3)})
    EXPECT_EQ(gen::deep_stack_oracle_self_check(c), 0.0) << c.describe();
}

RC_GTEST_PROP(MhcDeepStack, BackendStreamsWithinTheDerivedBound, ()) {
  const DeepStackCase c = *gen::deep_stack_case();
  const DeepStackResult r = run_deep_stack(c);
  RC_ASSERT(r.passed());
  RC_ASSERT(r.worst_ratio <= 1.0);
  RC_ASSERT(r.rms_growth > 1.0);  // the highway grows
  RC_TAG(r.worst_ratio < 0.01  ? "ratio < 0.01"
         : r.worst_ratio < 0.1 ? "ratio < 0.1"
                               : "ratio <= 1");
}

// The twin as a property: every drawn case catches B13 (the BF16 highway freezes: each
// layer's update is below half a BF16 ULP of the stream).
RC_GTEST_PROP(MhcDeepStack, B13TwinFailsOnEveryCase, ()) {
  const DeepStackCase c = *gen::deep_stack_case();
  const DeepStackResult r = run_deep_stack(c, Mutant::B13);
  RC_ASSERT(!r.passed());
  RC_ASSERT(r.report.first_failure()->name == std::string(gen::kDeepStackCheck));
  RC_TAG(r.worst_ratio > 50   ? "B13 ratio > 50"
         : r.worst_ratio > 10 ? "B13 ratio > 10"
                              : "B13 ratio > 1");
}

// The ratio error / bound on fixed cases, clean and under B13 (printed for the record).
TEST(MhcDeepStack, ReportsTheRatioOnFixedCases) {
  for (const DeepStackCase& c : {fixed_case(4, 32, 4, 2.0, 11), fixed_case(4, 16, 2, 1.0, 12),
                                 fixed_case(2, 8, 3, 0.25, 13), fixed_case(1, 16, 2, 1.0, 14)}) {
    const DeepStackResult clean = run_deep_stack(c);
    const DeepStackResult b13 = run_deep_stack(c, Mutant::B13);
    std::printf("deep stack %s\n  clean: %s\n  B13:   %s\n", c.describe().c_str(),
                gen::summarize(clean).c_str(), gen::summarize(b13).c_str());
    EXPECT_TRUE(clean.passed()) << oracle::format_report(clean.report);
    EXPECT_FALSE(b13.passed()) << gen::summarize(b13);
  }
}

// The planted-bug twin: B13 fails the deep-stack stream check on a fixed case.
TEST(MhcDeepStack, B13TwinFailsTheStreamCheck) {
  const DeepStackCase c = fixed_case(4, 32, 4, 2.0, 7);
  const DeepStackResult b13 = run_deep_stack(c, Mutant::B13);
  ASSERT_FALSE(b13.passed()) << gen::summarize(b13);
  const oracle::TensorComparison* bad = b13.report.first_failure();
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->name, gen::kDeepStackCheck);
  EXPECT_GT(b13.worst_ratio, 1.0);
  std::printf("B13 twin: %s\n", gen::summarize(b13).c_str());
  EXPECT_TRUE(run_deep_stack(c).passed());
}

}  // namespace
}  // namespace bufferlab
