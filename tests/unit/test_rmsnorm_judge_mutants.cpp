// The RMSNorm judge catches planted bugs (docs/spec/numerics.md §1, §9): deliberately wrong FP32
// kernels written here (not references: each is the right formula with one bug) must fail the
// faithful oracle's comparison, so the kernel tests that rely on that comparison can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using testing::rmsnorm_op;

using oracle::RmsNormInputs;
using oracle::RmsNormOutputs;

constexpr RmsNormVariant kAdd{true, false, false};
constexpr RmsNormVariant kAddF32{true, true, false};

constexpr uint16_t kBf16One = 0x3F80;
constexpr uint16_t kBf16Half = 0x3F00;
constexpr uint16_t kBf16TwoPowMinus8 = 0x3B80;  // 2^-8: half a BF16 ULP of 1.0

// ---- planted bugs the comparison must catch ----

// Named apart from bufferlab::Mutant (the kernel mutants of the op registry).
enum class RmsNormBug {
  weight_not_offset,
  unrounded_residual,
  residual_not_stored,
  mean_over_n_minus_1
};

// A deliberately wrong fused add + RMSNorm, in FP32 like a real kernel.
RmsNormOutputs buggy_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in, RmsNormBug m) {
  const uint64_t rows = op.shape().rows, n = op.shape().width;
  RmsNormOutputs out{in.residual, std::vector<uint16_t>(rows * n), std::vector<float>(rows * n)};
  for (uint64_t t = 0; t < rows; ++t) {
    std::vector<float> r(n);
    float sum_sq = 0.0f;
    for (uint64_t j = 0; j < n; ++j) {
      const float sum =
          bf16_bits_to_f32(in.residual[t * n + j]) + bf16_bits_to_f32(in.input[t * n + j]);
      if (m != RmsNormBug::residual_not_stored) out.residual[t * n + j] = f32_to_bf16_bits(sum);
      r[j] = m == RmsNormBug::unrounded_residual ? sum : round_to_bf16(sum);
      sum_sq += r[j] * r[j];
    }
    const float divisor = m == RmsNormBug::mean_over_n_minus_1 ? static_cast<float>(n - 1) : n;
    const float inv = 1.0f / std::sqrt(sum_sq / divisor + static_cast<float>(op.eps));
    for (uint64_t j = 0; j < n; ++j) {
      const float w = bf16_bits_to_f32(in.weight[j]);
      const float y = r[j] * inv * (m == RmsNormBug::weight_not_offset ? w : 1.0f + w);
      out.output[t * n + j] = f32_to_bf16_bits(y);
      out.output_f32[t * n + j] = y;
    }
  }
  return out;
}

class RmsNormJudgeMutant : public ::testing::TestWithParam<RmsNormBug> {};

TEST_P(RmsNormJudgeMutant, IsCaught) {
  const FusedAddRmsNormOp op = rmsnorm_op(6, 129, kAddF32);
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 17);
  const auto report =
      oracle::judge_fused_add_rmsnorm(op, in, buggy_rmsnorm(op, in, GetParam()), "mutant", 17);
  EXPECT_FALSE(report.passed()) << oracle::format_report(report);
}

INSTANTIATE_TEST_SUITE_P(PlantedBugs, RmsNormJudgeMutant,
                         ::testing::Values(RmsNormBug::weight_not_offset,
                                           RmsNormBug::unrounded_residual,
                                           RmsNormBug::residual_not_stored,
                                           RmsNormBug::mean_over_n_minus_1));

// The hand case of RmsNormKernel.NormReadsTheStoredBf16Residual (tests/kernels) catches the
// unrounded residual even in the BF16 output alone.
TEST(RmsNormJudge, UnroundedResidualCaughtInBf16OutputOfHandCase) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 2, kAdd);
  const RmsNormInputs in{{kBf16TwoPowMinus8, 0x0000}, {kBf16One, kBf16Half}, {0x0000, 0x0000}};
  RmsNormOutputs out = buggy_rmsnorm(op, in, RmsNormBug::unrounded_residual);
  EXPECT_EQ(out.output[1], 0x3F21);
  out.output_f32.clear();
  FusedAddRmsNormOp bf16_only = op;
  bf16_only.variant.write_f32 = false;
  const auto report = oracle::judge_fused_add_rmsnorm(bf16_only, in, out, "mutant", 0);
  EXPECT_FALSE(report.passed()) << oracle::format_report(report);
}

}  // namespace
}  // namespace bufferlab
