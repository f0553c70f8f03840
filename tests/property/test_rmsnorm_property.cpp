// Properties of the CPU fused residual add + RMSNorm over random shapes, eps, variants and
// value scales: it agrees with the faithful FP64 oracle within the derived bound
// (oracle/src/rmsnorm.cpp), and any element left unwritten fails the comparison at its
// coordinates. Cases stay small (≤ 8 × 2048 elements: far below 2^26 oracle multiply-adds).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "cpu_backend.h"

namespace bufferlab {
namespace {

using testing::cpu_backend;
struct RmsNormCase {
  FusedAddRmsNormOp op;
  oracle::RmsNormInputProfile profile;
  uint64_t seed = 0;
};

// Value scales 2^-20 .. 2^20 with wide rows up to 2^±12 keep Σr² < 2^100 ≪ FLT_MAX and every
// square in the FP32 normal range: the bound's domain.
RmsNormCase gen_case() {
  ModelConfig config;
  config.hidden_size = *rc::gen::inRange<uint64_t>(1, 2049);
  config.rms_norm_eps = *rc::gen::element(1e-12, 1e-6, 1e-5, 0.5);
  const auto rows = *rc::gen::inRange<uint64_t>(1, 9);
  RmsNormVariant v;
  v.add_residual = *rc::gen::arbitrary<bool>();
  v.write_f32 = *rc::gen::arbitrary<bool>();
  v.unit_weight = *rc::gen::arbitrary<bool>();
  RmsNormCase c{FusedAddRmsNormOp::make(config, rows, v), {}, *rc::gen::arbitrary<uint64_t>()};
  c.profile.scale = std::ldexp(1.0, *rc::gen::inRange(-20, 21));
  c.profile.wide_row_every = *rc::gen::inRange(0, 4);
  c.profile.weight_scale = *rc::gen::element(0.0, 0.25, 1.0);
  return c;
}

RC_GTEST_PROP(RmsNormProperty, CpuAgreesWithFaithfulOracleWithinDerivedBound, ()) {
  const RmsNormCase c = gen_case();
  const Workspace ws =
      cpu_backend().allocate(oracle::footprint_layout(c.op), c.op.weight_pool_bytes());
  const auto in = oracle::generate_rmsnorm_inputs(c.op, c.seed, c.profile);
  const auto out = oracle::run_fused_add_rmsnorm(cpu_backend(), ws, c.op, in);
  const auto report = oracle::judge_fused_add_rmsnorm(c.op, in, out, "cpu", c.seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(report.passed());
}

RC_GTEST_PROP(RmsNormProperty, AnyUnwrittenElementFailsAtItsCoordinates, ()) {
  const RmsNormCase c = gen_case();
  const Workspace ws =
      cpu_backend().allocate(oracle::footprint_layout(c.op), c.op.weight_pool_bytes());
  const auto in = oracle::generate_rmsnorm_inputs(c.op, c.seed, c.profile);
  auto out = oracle::run_fused_add_rmsnorm(cpu_backend(), ws, c.op, in);
  const uint64_t width = c.op.shape().width;
  const uint64_t i = *rc::gen::inRange<uint64_t>(0, out.output.size());
  out.output[i] = 0xFFFF;  // the poison pattern
  const auto report = oracle::judge_fused_add_rmsnorm(c.op, in, out, "cpu", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == "norm_output");
  RC_ASSERT(bad->first_bad->row == i / width);
  RC_ASSERT(bad->first_bad->col == i % width);
}

}  // namespace
}  // namespace bufferlab
