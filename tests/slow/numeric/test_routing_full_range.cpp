// The routing properties of tests/property/test_routing_properties.cpp over their FULL ranges
// (label slow): E' up to kMaxScoredExperts (1024), top_k up to kMaxTopK (32), hidden up to
// 7168, up to 64 rows, oracle work capped at 2^30 multiply-adds per case instead of CI's 2^24,
// and 500 cases per property (RC_PARAMS="seed=..." still picks the seed).
// Built into bufferlab_slow_numeric_tests (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"
#include "cpu_backend.h"
#include "rapidcheck_cases.h"

namespace bufferlab {
namespace {

using gen::RoutingCase;
using testing::cpu_backend;

constexpr int kRoutingCases = 500;  // successes per property (testing::check_many)

oracle::RoutingVerdict run_chain(const RoutingCase& c) {
  const auto ops = oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash);
  const gen::RoutingTensors t = gen::routing_tensors(c);
  const oracle::RouterInputs rin{t.x_bf16, t.x_f32, t.weight};
  const oracle::TopKHostInputs tin{t.bias, t.token_ids, t.tid2eid};
  const Workspace ws =
      cpu_backend().allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
  const auto out = oracle::run_routing_chain(cpu_backend(), ws, ops, rin, tin);
  return oracle::judge_routing_chain(ops, rin, tin, out, oracle::kUnitRoundoffCpu, "cpu", c.seed);
}

oracle::RoutingVerdict run_topk(const RoutingCase& c, bool nonfinite) {
  const auto ops = oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash);
  const gen::RoutingTensors t = gen::routing_tensors(c);
  const oracle::TopKHostInputs tin{t.bias, t.token_ids, t.tid2eid};
  oracle::StoredLogits logits;
  for (float v : gen::topk_logits(c, nonfinite)) {
    if (c.precision == RouterPrecision::bf16)
      logits.bf16.push_back(f32_to_bf16_bits(v));
    else
      logits.f32.push_back(v);
  }
  const Workspace ws =
      cpu_backend().allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
  const auto out = oracle::run_topk(cpu_backend(), ws, ops.topk, logits, tin);
  return oracle::judge_topk(ops.topk, logits, tin, out, "cpu", c.seed);
}

void assert_chain(RouterPrecision p) {
  RoutingCase c = *gen::routing_case(gen::full_routing_ranges());
  c.precision = p;
  RC_TAG(to_string(c.pattern));
  RC_LOG() << c.describe() << "\n";
  const auto v = run_chain(c);
  RC_LOG() << oracle::format_verdict(v);
  RC_ASSERT(v.passed());
}

TEST(RoutingFullRange, Fp32GatePathIsTieStable) {
  testing::check_many([] { assert_chain(RouterPrecision::fp32_gate); }, kRoutingCases);
}

TEST(RoutingFullRange, Fp32RoutingPathIsTieStable) {
  testing::check_many([] { assert_chain(RouterPrecision::fp32_routing); }, kRoutingCases);
}

TEST(RoutingFullRange, Bf16PathAgreesAboveItsLargerBound) {
  testing::check_many([] { assert_chain(RouterPrecision::bf16); }, kRoutingCases);
}

TEST(RoutingFullRange, TopKOnStoredLogitsWithNanAndInf) {
  testing::check_many(
      [] {
        const RoutingCase c = *gen::routing_case(gen::full_routing_ranges());
        const bool nonfinite = *rc::gen::arbitrary<bool>();
        RC_LOG() << c.describe() << " nonfinite=" << nonfinite << "\n";
        const auto v = run_topk(c, nonfinite);
        RC_LOG() << oracle::format_verdict(v);
        RC_ASSERT(v.passed());
      },
      kRoutingCases);
}

}  // namespace
}  // namespace bufferlab
