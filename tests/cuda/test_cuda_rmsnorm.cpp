// CudaBackend's fused residual add + RMSNorm against the faithful FP64 oracle and against the
// CPU backend, on odd widths (scalar path), widths that are multiples of 8 (16-byte vector
// path), rows whose start is deliberately misaligned, non-finite rows, and a RapidCheck
// property. Without a usable GPU every test is SKIPPED with cuda_unavailable_reason().
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using testing::rmsnorm_op;

using oracle::RmsNormInputs;
using oracle::RmsNormOutputs;

constexpr RmsNormVariant kVariants[] = {
    {true, false, false}, {true, true, false}, {true, false, true}, {false, false, false}};
constexpr const char* kVariantNames[] = {"add", "f32", "unit", "norm"};

// The same op with every row-major operand moved 2 bytes into its buffer: rows no longer
// start on 16 bytes, which forces the kernel's scalar path even when width % 8 == 0.
FusedAddRmsNormOp misaligned(FusedAddRmsNormOp op) {
  for (TensorRef* t : {&op.input, &op.residual, &op.output}) t->offset += 2;
  op.output_f32.offset += 4;
  return op;
}

// A layout holding `op` even when its operands were moved (one element of slack per buffer).
Layout layout_with_slack(const FusedAddRmsNormOp& op) {
  FusedAddRmsNormOp bigger = rmsnorm_op(op.shape().rows + 1, op.shape().width, op.variant, op.eps);
  return oracle::footprint_layout(bigger);
}

// CUDA vs CPU, both judged against the oracle above: each FP32 value lies within γ·|y| of y,
// so the two BF16 stores are at most 2 ULP apart (1 within a binade, 2 across a binade
// boundary); the FP32 outputs within 2γ/(1 − γ) of each other, relative to the CPU's value;
// the residual is exact on both (bitwise equal).
std::vector<oracle::TensorComparison> cuda_vs_cpu(const FusedAddRmsNormOp& op,
                                                  const RmsNormOutputs& gpu,
                                                  const RmsNormOutputs& cpu) {
  const uint64_t w = op.shape().width;
  const double g = oracle::fused_add_rmsnorm_tolerances(op).f32_rel;
  std::vector<double> cpu_res, cpu_out, cpu_f32;
  for (uint16_t b : cpu.residual) cpu_res.push_back(bf16_bits_to_f32(b));
  for (uint16_t b : cpu.output) cpu_out.push_back(bf16_bits_to_f32(b));
  for (float f : cpu.output_f32) cpu_f32.push_back(f);
  oracle::Tolerance exact;
  exact.max_ulp = 0;
  oracle::Tolerance two_ulp;
  two_ulp.abs = INFINITY;  // the ULP criterion alone decides
  two_ulp.max_ulp = 2;
  oracle::Tolerance f32;
  f32.rel = 2.0 * g / (1.0 - g);
  f32.abs = 0x1p-126;
  std::vector<oracle::TensorComparison> out{
      oracle::compare_bf16("residual cuda-cpu", gpu.residual, cpu_res, w, exact),
      oracle::compare_bf16("norm_output cuda-cpu", gpu.output, cpu_out, w, two_ulp)};
  if (op.variant.write_f32)
    out.push_back(
        oracle::compare_f32("moe_router_in_f32 cuda-cpu", gpu.output_f32, cpu_f32, w, f32));
  return out;
}

class CudaRmsNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu_ = make_cuda_backend();
    cpu_ = make_backend("cpu");
  }

  // Runs `op` on both backends over the same inputs; asserts CUDA against the oracle and
  // against the CPU.
  void check(const FusedAddRmsNormOp& op, const RmsNormInputs& in, uint64_t seed) {
    const Layout layout = layout_with_slack(op);
    const Workspace gws = gpu_->allocate(layout, op.weight_pool_bytes());
    const Workspace cws = cpu_->allocate(layout, op.weight_pool_bytes());
    const RmsNormOutputs gpu = oracle::run_fused_add_rmsnorm(*gpu_, gws, op, in);
    const RmsNormOutputs cpu = oracle::run_fused_add_rmsnorm(*cpu_, cws, op, in);
    const auto report = oracle::judge_fused_add_rmsnorm(op, in, gpu, "cuda", seed);
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
    for (const auto& c : cuda_vs_cpu(op, gpu, cpu))
      EXPECT_TRUE(c.passed()) << op.params() << " " << c.name << " max ULP "
                              << c.max_ulp.value_or(0) << " first bad "
                              << (c.first_bad ? c.first_bad->reason : "");
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

class CudaRmsNormShapes
    : public CudaRmsNorm,
      public ::testing::WithParamInterface<std::tuple<uint64_t, uint64_t, int>> {};

TEST_P(CudaRmsNormShapes, AgreesWithOracleAndCpu) {
  const auto [rows, width, variant] = GetParam();
  const FusedAddRmsNormOp op = rmsnorm_op(rows, width, kVariants[variant]);
  const uint64_t seed = 300 + width;
  check(op, oracle::generate_rmsnorm_inputs(op, seed), seed);
}

TEST_P(CudaRmsNormShapes, MisalignedRowsAgree) {
  const auto [rows, width, variant] = GetParam();
  const FusedAddRmsNormOp op = misaligned(rmsnorm_op(rows, width, kVariants[variant]));
  const uint64_t seed = 500 + width;
  check(op, oracle::generate_rmsnorm_inputs(op, seed), seed);
}

// "rows5_width4096_f32": readable, and filterable by scripts/gpu-check.sh.
std::string shape_name(const ::testing::TestParamInfo<std::tuple<uint64_t, uint64_t, int>>& info) {
  const auto [rows, width, variant] = info.param;
  return "rows" + std::to_string(rows) + "_width" + std::to_string(width) + "_" +
         kVariantNames[variant];
}

// Odd widths take the scalar path; 8, 1000, 4096 and 7168 the vector path (4096 and 7168
// with more 16-byte chunks than threads).
INSTANTIATE_TEST_SUITE_P(Widths, CudaRmsNormShapes,
                         ::testing::Combine(::testing::Values(1, 5, 67),
                                            ::testing::Values(1, 7, 8, 33, 129, 1000, 4095, 4096,
                                                              7168),
                                            ::testing::Values(0, 1, 2, 3)),
                         shape_name);

TEST_F(CudaRmsNorm, NonFiniteInputRowsGiveNanRowsOnly) {
  for (uint64_t width : {33, 64}) {
    const FusedAddRmsNormOp op = rmsnorm_op(4, width, kVariants[1]);
    RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 4);
    in.input[1 * width + 3] = 0x7FC0;     // NaN
    in.residual[2 * width + 0] = 0x7F80;  // +Inf
    check(op, in, 4);
  }
}

TEST_F(CudaRmsNorm, ManyRowsLargeWidth) {
  const FusedAddRmsNormOp op = rmsnorm_op(300, 5120, kVariants[1]);
  check(op, oracle::generate_rmsnorm_inputs(op, 77), 77);
}

TEST_F(CudaRmsNorm, PropertyAgreesWithOracleAndCpu) {
  const bool ok = rc::check("cuda rmsnorm agrees with the faithful oracle and the CPU", [this] {
    ModelConfig config;
    config.hidden_size = *rc::gen::inRange<uint64_t>(1, 4097);
    config.rms_norm_eps = *rc::gen::element(1e-12, 1e-6, 0.5);
    RmsNormVariant v{*rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(),
                     *rc::gen::arbitrary<bool>()};
    FusedAddRmsNormOp op = FusedAddRmsNormOp::make(config, *rc::gen::inRange<uint64_t>(1, 17), v);
    if (*rc::gen::arbitrary<bool>()) op = misaligned(op);
    oracle::RmsNormInputProfile profile;
    profile.scale = std::ldexp(1.0, *rc::gen::inRange(-20, 21));
    profile.wide_row_every = *rc::gen::inRange(0, 4);
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const auto in = oracle::generate_rmsnorm_inputs(op, seed, profile);
    const Layout layout = layout_with_slack(op);
    const Workspace gws = gpu_->allocate(layout, op.weight_pool_bytes());
    const Workspace cws = cpu_->allocate(layout, op.weight_pool_bytes());
    const auto gpu = oracle::run_fused_add_rmsnorm(*gpu_, gws, op, in);
    const auto cpu = oracle::run_fused_add_rmsnorm(*cpu_, cws, op, in);
    const auto report = oracle::judge_fused_add_rmsnorm(op, in, gpu, "cuda", seed);
    RC_LOG() << oracle::format_report(report);
    RC_ASSERT(report.passed());
    for (const auto& c : cuda_vs_cpu(op, gpu, cpu)) RC_ASSERT(c.passed());
  });
  EXPECT_TRUE(ok);
}

TEST(CudaAvailability, ReasonIsEmptyOrASentence) {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) {
    EXPECT_GT(reason.size(), 10u);
    EXPECT_THROW(make_cuda_backend(), BackendUnavailable);
    GTEST_SKIP() << reason;
  }
  EXPECT_NO_THROW(make_cuda_backend());
}

}  // namespace
}  // namespace bufferlab
