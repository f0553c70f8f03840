// High-water marks (verify/high_water.h): what a hand-built plan's accesses reach, the tight
// floor, the slack table's order and arenas, and on real presets that the marks verify_config
// keeps are those of the same walk without checks, and that the tight sizing is clean.
#include <gtest/gtest.h>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/verify/driver.h"
#include "bufferlab/core/verify/high_water.h"

namespace bufferlab {
namespace {

using plan::PassPlan;
using plan::Step;
using verify::HighWaterMarks;

Access access(BufferId b, uint64_t off, uint64_t n, AccessKind k = AccessKind::write) {
  return {TensorRef{Space::arena, b, off, {n}, DType::u8}, k, {}};
}

PassPlan plan_of(plan::Pass pass, std::vector<Step> steps) {
  PassPlan p;
  p.pass = pass;
  p.steps = std::move(steps);
  return p;
}

Step step(std::string op, std::vector<Access> a) {
  return Step{std::move(op), "", "L0", std::move(a), 0, {}};
}

TEST(HighWater, TheHighestEndAndTheFirstStepReachingIt) {
  HighWaterMarks m;
  m.record(plan_of(plan::Pass::prefill(4),
                   {step("a", {access(BufferId::residual, 0, 100)}),
                    step("b", {access(BufferId::residual, 50, 150, AccessKind::read)}),
                    step("c", {access(BufferId::residual, 0, 200)})}));
  const auto& r = m.of(BufferId::residual);
  EXPECT_TRUE(r.touched);
  EXPECT_EQ(r.end, 200u);
  EXPECT_EQ(r.step, 1u);  // b reached 200 first; c only equals it
  EXPECT_EQ(r.op, "b");
  EXPECT_EQ(r.pass, "prefill(t=4)");
  // A later plan reaching higher takes over.
  m.record(plan_of(plan::Pass::prefill(5), {step("d", {access(BufferId::residual, 64, 137)})}));
  EXPECT_EQ(m.of(BufferId::residual).end, 201u);
  EXPECT_EQ(m.of(BufferId::residual).pass, "prefill(t=5)");
  EXPECT_EQ(m.plans(), 2u);
}

TEST(HighWater, ZeroByteWeightAndRefusedAccessesTouchNothing) {
  HighWaterMarks m;
  Access weights = access(BufferId::norm_output, 0, 4096);
  weights.tensor.space = Space::weights;
  m.record(
      plan_of(plan::Pass::prefill(4), {step("a", {access(BufferId::residual, 512, 0), weights})}));
  PassPlan refused =
      plan_of(plan::Pass::prefill(9), {step("x", {access(BufferId::scratch, 0, 8)})});
  refused.refused = "too long";
  m.record(refused);
  EXPECT_FALSE(m.of(BufferId::residual).touched);
  EXPECT_FALSE(m.of(BufferId::norm_output).touched);
  EXPECT_FALSE(m.of(BufferId::scratch).touched);
  EXPECT_EQ(m.plans(), 1u);
}

TEST(HighWater, CodispatchEligibilityReachesScratch) {
  HighWaterMarks m;
  PassPlan p =
      plan_of(plan::Pass::codispatch(2, 3), {step("a", {access(BufferId::scratch, 0, 64)})});
  p.eligibility_bytes = 4096;
  m.record(p);
  EXPECT_EQ(m.of(BufferId::scratch).end, 4096u);
  EXPECT_TRUE(m.of(BufferId::scratch).by_eligibility);
}

TEST(HighWater, TightBytesFloorAndNull) {
  verify::HighWater untouched, small, big;
  small.touched = big.touched = true;
  small.end = 17;
  big.end = 1000;
  EXPECT_EQ(verify::tight_bytes(0, untouched), 0u);      // null stays null
  EXPECT_EQ(verify::tight_bytes(512, untouched), 256u);  // non-null keeps the floor
  EXPECT_EQ(verify::tight_bytes(512, small), 256u);
  EXPECT_EQ(verify::tight_bytes(4096, big), 1000u);
  EXPECT_EQ(verify::tight_bytes(100, big), 1000u);  // short: the mark, not the bytes
}

TEST(HighWater, SlackReportSortsByWastedAndLaysOutBothArenas) {
  BufferSizes s;
  s.residual = 10000;
  s.scratch = 3000;
  s.norm_output = 500;  // never touched
  HighWaterMarks m;
  m.record(plan_of(plan::Pass::prefill(4), {step("a", {access(BufferId::residual, 0, 1000),
                                                       access(BufferId::scratch, 0, 2990)})}));
  const verify::SlackReport r = verify::slack_report(s, m);
  ASSERT_EQ(r.buffers.size(), kNumBuffers);
  EXPECT_EQ(r.buffers[0].id, BufferId::residual);     // 9000 wasted
  EXPECT_EQ(r.buffers[1].id, BufferId::norm_output);  // 500
  EXPECT_EQ(r.buffers[2].id, BufferId::scratch);      // 10
  EXPECT_EQ(r.buffers[0].wasted(), 9000);
  EXPECT_EQ(r.allocated_bytes, 13500u);
  EXPECT_EQ(r.touched_bytes, 3990u);
  EXPECT_EQ(r.allocated_arena, Layout::build(s).arena_bytes());
  // residual 1000 → [0, 1000), norm_output 256 at 1024, scratch 2990 at 1280.
  EXPECT_EQ(r.needed_arena, 1280u + 2990u);
}

// verify_config keeps the marks of the plans it checks: the same as the unchecked walk.
TEST(HighWater, VerifyConfigKeepsTheMarksOfTheSameWalk) {
  const ModelConfig c = preset("tiny-gdn");
  RunShape shape;
  shape.max_batch_tokens = 64;
  const Target t;
  const BufferSizes s = BufferSizes::from_config(c, shape, t, Sizing::corrected());
  const auto grid = verify::pass_grid(shape);
  const verify::ConfigReport r = verify::verify_config(c, s, t, shape, grid);
  const HighWaterMarks m = verify::high_water_marks(c, s, t, shape, grid);
  EXPECT_EQ(r.high_water.plans(), r.plans);
  EXPECT_EQ(m.plans(), r.plans);
  for (const auto& info : kBufferRegistry) {
    EXPECT_EQ(r.high_water.of(info.id).end, m.of(info.id).end) << info.name;
    EXPECT_EQ(r.high_water.of(info.id).pass, m.of(info.id).pass) << info.name;
    // Under a clean sizing every mark fits its buffer.
    EXPECT_LE(m.of(info.id).end, s.bytes(info.id)) << info.name;
  }
}

// By construction: the tight sizing verifies clean over the same grid, on every tiny preset,
// and is never larger than corrected.
TEST(HighWater, TightSizingIsCleanOnTheTinyPresets) {
  for (const std::string name : {"tiny-dense", "tiny-moe", "tiny-gdn", "tiny-mamba", "tiny-mla",
                                 "tiny-mhc", "tiny-mhc-lowrank", "tiny-qsa", "tiny-lora"}) {
    const ModelConfig c = preset(name);
    RunShape shape;
    shape.max_batch_tokens = 100;
    shape.max_seq_len = 4096;
    const Target t;
    uint64_t plans = 0;
    const BufferSizes tight = verify::tight_sizing(c, shape, t, &plans);
    const BufferSizes corrected = BufferSizes::from_config(c, shape, t, Sizing::corrected());
    EXPECT_EQ(tight.params, corrected.params) << name;
    const verify::ConfigReport r =
        verify::verify_config(c, tight, t, shape, verify::pass_grid(shape));
    EXPECT_TRUE(r.clean()) << name << ": " << (r.findings.empty() ? "" : r.findings[0].to_string());
    EXPECT_EQ(r.plans, plans) << name;
    for (const auto& info : kBufferRegistry) {
      EXPECT_LE(tight.bytes(info.id), std::max(corrected.bytes(info.id), verify::kTightFloor))
          << name << " " << info.name;
      EXPECT_EQ(tight.bytes(info.id) == 0, corrected.bytes(info.id) == 0)
          << name << " " << info.name;
    }
  }
}

// The grid samples boundaries. Checked here: at a small run shape, tight (marks from the grid)
// is also clean over EVERY launchable prefill, decode, verify and co-dispatch pass and every
// mixed step of each rung's largest n — no pass between grid points reaches further.
TEST(HighWater, TightFromTheGridIsCleanOffTheGridAtASmallShape) {
  RunShape shape;
  shape.max_batch_tokens = 40;
  shape.max_seq_len = 1024;
  shape.max_batch_size = 8;
  std::vector<plan::Pass> every;
  for (uint64_t t = 1; t <= shape.max_batch_tokens; ++t) every.push_back(plan::Pass::prefill(t));
  for (uint64_t n = 1; n <= shape.max_batch_size; ++n) every.push_back(plan::Pass::decode(n));
  for (uint64_t r = 1; r <= shape.max_batch_tokens; ++r) every.push_back(plan::Pass::verify(r));
  for (uint64_t n = 1; n <= shape.max_batch_size; ++n)
    for (uint64_t t = 1; t + padded_batch_rung(n) <= shape.max_batch_tokens; ++t)
      every.push_back(plan::Pass::mixed(n, t));
  for (uint64_t n = 2; n <= 8; ++n)
    for (uint64_t L = 1; n * L <= shape.max_batch_tokens; ++L)
      every.push_back(plan::Pass::codispatch(n, L));
  for (const std::string name : {"tiny-dense", "tiny-moe", "tiny-gdn", "tiny-mamba", "tiny-mla",
                                 "tiny-mhc", "tiny-mhc-lowrank", "tiny-qsa", "tiny-lora"}) {
    const ModelConfig c = preset(name);
    const Target t;
    const BufferSizes tight = verify::tight_sizing(c, shape, t);
    const verify::ConfigReport r = verify::verify_config(c, tight, t, shape, every);
    EXPECT_TRUE(r.clean()) << name << ": " << r.findings.size() << " findings, first "
                           << (r.findings.empty() ? "" : r.findings[0].to_string());
  }
}

}  // namespace
}  // namespace bufferlab
