// The static verifier's checks, each shown firing on a hand-built plan (and staying silent
// on its correct twin), so none of them can pass vacuously.
#include <gtest/gtest.h>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/verify/check.h"

namespace bufferlab {
namespace {

using plan::PassPlan;
using plan::Step;
using verify::CheckKind;

TensorRef ref(BufferId b, uint64_t offset, uint64_t bytes) {
  return TensorRef{Space::arena, b, offset, {bytes}, DType::u8};
}
Access R(BufferId b, uint64_t off, uint64_t n, std::string v = {}) {
  return {ref(b, off, n), AccessKind::read, std::move(v)};
}
Access W(BufferId b, uint64_t off, uint64_t n, std::string v = {}) {
  return {ref(b, off, n), AccessKind::write, std::move(v)};
}
Access P(BufferId b, uint64_t off, uint64_t n) {
  return {ref(b, off, n), AccessKind::phantom_write, {}};
}

// A layout with scratch = 1000 bytes, residual = 512, ssm_gates = 0 (null), the rest 256.
Layout small_layout() {
  BufferSizes s;
  for (const auto& info : kBufferRegistry) s.bytes(info.id) = 256;
  s.scratch = 1000;
  s.residual = 512;
  s.ssm_gates = 0;
  return Layout::build(s);
}

PassPlan plan_of(std::vector<Step> steps) {
  PassPlan p;
  p.pass = plan::Pass::prefill(4);
  p.steps = std::move(steps);
  return p;
}

Step step(std::vector<Access> a, uint32_t stream = 0, std::vector<uint32_t> after = {}) {
  return Step{"op", "op(params)", "L0", std::move(a), stream, std::move(after)};
}

std::vector<verify::Finding> run(std::vector<Step> steps) {
  const Layout layout = small_layout();
  return verify::check(plan_of(std::move(steps)), layout);
}

bool has(const std::vector<verify::Finding>& f, CheckKind k, const std::string& buffer) {
  for (const auto& x : f)
    if (x.check == k && x.buffer == buffer) return true;
  return false;
}

TEST(VerifierChecks, BoundsPastTheEndAndNullBuffer) {
  EXPECT_TRUE(run({step({W(BufferId::scratch, 0, 1000, "a")})}).empty());
  const auto f = run({step({W(BufferId::scratch, 900, 101, "a")})});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, CheckKind::bounds);
  EXPECT_EQ(f[0].begin, 900u);
  EXPECT_EQ(f[0].end, 1001u);
  EXPECT_EQ(f[0].buffer_bytes, 1000u);
  // A finding names the pass, the op's parameters and the run shape.
  EXPECT_EQ(f[0].pass, "prefill(t=4)");
  EXPECT_EQ(f[0].params, "op(params)");
  EXPECT_EQ(f[0].shape, "m=8192,seq=32768,block=16,bs=32");
  EXPECT_TRUE(
      has(run({step({W(BufferId::ssm_gates, 0, 1, "a")})}), CheckKind::bounds, "ssm_gates"));
}

TEST(VerifierChecks, OverlapInsideAStepUnlessDeclaredInPlace) {
  // Two outputs sharing bytes.
  EXPECT_TRUE(
      has(run({step({W(BufferId::scratch, 0, 100, "a"), W(BufferId::scratch, 96, 8, "b")})}),
          CheckKind::overlap, "scratch"));
  // A read and a write of the identical tensor: in place, allowed.
  EXPECT_TRUE(run({step({W(BufferId::scratch, 0, 64, "a")}),
                   step({R(BufferId::scratch, 0, 64, "a"), W(BufferId::scratch, 0, 64, "a")})})
                  .empty());
  // A partial in-place overlap is not declared.
  EXPECT_TRUE(
      has(run({step({W(BufferId::scratch, 0, 64, "a")}),
               step({R(BufferId::scratch, 0, 64, "a"), W(BufferId::scratch, 32, 64, "b")})}),
          CheckKind::overlap, "scratch"));
  // Reads may share bytes; disjoint writes may sit back to back.
  EXPECT_TRUE(run({step({W(BufferId::scratch, 0, 64, "a"), W(BufferId::scratch, 64, 64, "b")}),
                   step({R(BufferId::scratch, 0, 64, "a"), R(BufferId::scratch, 0, 64, "a")})})
                  .empty());
}

TEST(VerifierChecks, LivenessWhenAValueIsOverwrittenBeforeItsRead) {
  const auto f =
      run({step({W(BufferId::scratch, 0, 64, "a")}), step({W(BufferId::scratch, 60, 8, "b")}),
           step({R(BufferId::scratch, 0, 64, "a")})});
  ASSERT_TRUE(has(f, CheckKind::liveness, "scratch"));
  EXPECT_EQ(f[0].begin, 60u);
  EXPECT_EQ(f[0].end, 64u);
  EXPECT_EQ(f[0].step, 2u);
  // Rewriting the same value in between is fine.
  EXPECT_TRUE(
      run({step({W(BufferId::scratch, 0, 64, "a")}), step({W(BufferId::scratch, 0, 64, "a")}),
           step({R(BufferId::scratch, 0, 64, "a")})})
          .empty());
}

TEST(VerifierChecks, ReadBeforeWriteExceptPersistentInputs) {
  EXPECT_TRUE(
      has(run({step({R(BufferId::scratch, 0, 8, "a")})}), CheckKind::read_before_write, "scratch"));
  // Bytes partly written: the gap is reported.
  const auto f =
      run({step({W(BufferId::scratch, 0, 8, "a")}), step({R(BufferId::scratch, 0, 16, "a")})});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, CheckKind::read_before_write);
  EXPECT_EQ(f[0].begin, 8u);
  EXPECT_EQ(f[0].end, 16u);
  // norm_unit_w is zero-filled at allocation; weights live outside the arena.
  EXPECT_TRUE(run({step({R(BufferId::norm_unit_w, 0, 256)})}).empty());
  EXPECT_TRUE(run({step({{TensorRef{Space::weights, BufferId::hidden_states, 0, {8}, DType::u8},
                          AccessKind::read,
                          {}}})})
                  .empty());
}

TEST(VerifierChecks, ReadingPhantomRowsIsAFinding) {
  const auto f = run({step({W(BufferId::scratch, 0, 32, "a"), P(BufferId::scratch, 32, 32)}),
                      step({R(BufferId::scratch, 0, 64, "a")})});
  ASSERT_TRUE(has(f, CheckKind::phantom_read, "scratch"));
  EXPECT_TRUE(run({step({W(BufferId::scratch, 0, 32, "a"), P(BufferId::scratch, 32, 32)}),
                   step({R(BufferId::scratch, 0, 32, "a")})})
                  .empty());
}

TEST(VerifierChecks, RacesBetweenUnorderedStreams) {
  // Steps 1 and 2 on different streams, both after step 0, unordered with each other.
  const auto f =
      run({step({W(BufferId::residual, 0, 8, "x")}),
           step({R(BufferId::residual, 0, 8, "x"), W(BufferId::scratch, 0, 64, "a")}, 1, {0}),
           step({R(BufferId::residual, 0, 8, "x"), W(BufferId::scratch, 0, 64, "a")}, 2, {0})});
  EXPECT_TRUE(has(f, CheckKind::race, "scratch"));
  EXPECT_FALSE(has(f, CheckKind::race, "residual"));  // reads only
  // Ordering step 2 after step 1 removes the race.
  EXPECT_FALSE(
      has(run({step({W(BufferId::residual, 0, 8, "x")}),
               step({R(BufferId::residual, 0, 8, "x"), W(BufferId::scratch, 0, 64, "a")}, 1, {0}),
               step({R(BufferId::residual, 0, 8, "x"), W(BufferId::scratch, 0, 64, "a")}, 2, {1})}),
          CheckKind::race, "scratch"));
}

TEST(VerifierChecks, RefusedPlansHaveNoFindingsAndIneligibleOnesOne) {
  PassPlan p = plan_of({step({W(BufferId::scratch, 0, 2000, "a")})});
  p.refused = "t > m";
  EXPECT_TRUE(verify::check(p, small_layout()).empty());
  PassPlan q;
  q.pass = plan::Pass::codispatch(4, 100);
  q.ineligible = "q12 > scratch";
  q.eligibility_bytes = 5000;
  const auto f = verify::check(q, small_layout());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, CheckKind::ineligible);
  EXPECT_EQ(f[0].buffer, "scratch");
}

}  // namespace
}  // namespace bufferlab
