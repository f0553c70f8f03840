// CpuBackend's fused residual add + RMSNorm against the faithful FP64 oracle (spec/numerics.md
// §1, §9): odd widths and every variant under the derived bounds, the storage semantics on a
// hand-computed case, poison and non-finite rows, workspace bounds — and planted bugs that
// the comparison must catch, so these tests can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using testing::rmsnorm_op;

using oracle::AgreementReport;
using oracle::RmsNormInputs;
using oracle::RmsNormOutputs;

constexpr RmsNormVariant kAdd{true, false, false};
constexpr RmsNormVariant kAddF32{true, true, false};
constexpr RmsNormVariant kUnit{true, false, true};
constexpr RmsNormVariant kNormOnly{false, false, false};

constexpr uint16_t kBf16One = 0x3F80;
constexpr uint16_t kBf16Half = 0x3F00;
constexpr uint16_t kBf16TwoPowMinus8 = 0x3B80;  // 2^-8: half a BF16 ULP of 1.0
constexpr uint16_t kBf16QuietNan = 0x7FC0;
constexpr uint16_t kBf16PlusInf = 0x7F80;

struct CpuRun {
  RmsNormInputs in;
  RmsNormOutputs out;
  AgreementReport report;
};

CpuRun run_cpu(const FusedAddRmsNormOp& op, const RmsNormInputs& in, uint64_t seed = 0) {
  auto backend = make_cpu_backend();
  const Workspace ws = backend->allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
  RmsNormOutputs out = oracle::run_fused_add_rmsnorm(*backend, ws, op, in);
  AgreementReport report = oracle::judge_fused_add_rmsnorm(op, in, out, "cpu", seed);
  return {in, std::move(out), std::move(report)};
}

CpuRun run_cpu_seeded(const FusedAddRmsNormOp& op, uint64_t seed) {
  return run_cpu(op, oracle::generate_rmsnorm_inputs(op, seed), seed);
}

bool is_nan_bits(uint16_t b) { return std::isnan(bf16_bits_to_f32(b)); }

// ---- agreement under the derived bounds ----

class CpuRmsNormAgreement : public ::testing::TestWithParam<std::tuple<uint64_t, uint64_t, int>> {};

TEST_P(CpuRmsNormAgreement, MatchesFaithfulOracleWithinDerivedBound) {
  const auto [rows, width, variant_index] = GetParam();
  const RmsNormVariant variants[] = {kAdd, kAddF32, kUnit, kNormOnly};
  const FusedAddRmsNormOp op = rmsnorm_op(rows, width, variants[variant_index]);
  const CpuRun run = run_cpu_seeded(op, 1000 + width);
  EXPECT_TRUE(run.report.passed()) << oracle::format_report(run.report);
  EXPECT_EQ(run.report.checks.size(), op.variant.write_f32 ? 3u : 2u);
}

INSTANTIATE_TEST_SUITE_P(OddWidthsAllVariants, CpuRmsNormAgreement,
                         ::testing::Combine(::testing::Values(1, 3, 17),
                                            ::testing::Values(1, 7, 33, 129, 1000),
                                            ::testing::Values(0, 1, 2, 3)));

TEST(CpuRmsNorm, WideDynamicRangeAndScalesAgree) {
  const FusedAddRmsNormOp op = rmsnorm_op(8, 257, kAddF32);
  for (double scale : {0x1p-20, 1.0, 0x1p20}) {
    oracle::RmsNormInputProfile profile;
    profile.scale = scale;
    profile.wide_row_every = 2;
    const CpuRun run = run_cpu(op, oracle::generate_rmsnorm_inputs(op, 7, profile), 7);
    EXPECT_TRUE(run.report.passed()) << "scale " << scale << "\n"
                                     << oracle::format_report(run.report);
  }
}

// ---- storage semantics ----

// Row [1, 0.5] + [2^-8, 0], w = 0, eps = 1e-6, by hand:
//   1 + 2^-8 lies exactly between the BF16 neighbours 1 and 1 + 2^-7: ties-to-even stores 1.0,
//   so the stored residual is [1, 0.5] (0x3F80, 0x3F00).
//   Stored:    mean = (1 + 0.25) / 2 = 0.625, y = r / sqrt(0.625 + 1e-6) = [1.26491, 0.632455];
//              0.632455 / 2^-8 = 161.90 → 162·2^-8 = 0.6328125 (0x3F22); 1.26491 → 1.265625
//              (0x3FA2).
//   Unrounded: mean = (1.0078277587890625 + 0.25) / 2 = 0.628914, y1 = 0.5 / 0.793041 = 0.630484;
//              0.630484 / 2^-8 = 161.40 → 161·2^-8 = 0.62890625 (0x3F21) — a different BF16.
TEST(CpuRmsNorm, NormReadsTheStoredBf16Residual) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 2, kUnit);
  const RmsNormInputs in{{kBf16TwoPowMinus8, 0x0000}, {kBf16One, kBf16Half}, {}};
  const CpuRun run = run_cpu(op, in);
  EXPECT_EQ(run.out.residual, (std::vector<uint16_t>{kBf16One, kBf16Half}));
  EXPECT_EQ(run.out.output, (std::vector<uint16_t>{0x3FA2, 0x3F22}));
  EXPECT_TRUE(run.report.passed()) << oracle::format_report(run.report);

  // The case discriminates: normalising the unrounded sum lands on the other BF16.
  const auto exact = oracle::fused_add_rmsnorm(op, in, oracle::Mode::exact);
  EXPECT_EQ(round_to_bf16(static_cast<float>(exact.output[1])), bf16_bits_to_f32(0x3F21));
}

TEST(CpuRmsNorm, WithoutAddTheResidualIsReadOnly) {
  const FusedAddRmsNormOp op = rmsnorm_op(3, 33, kNormOnly);
  const CpuRun run = run_cpu_seeded(op, 5);
  EXPECT_EQ(run.out.residual, run.in.residual);
  EXPECT_TRUE(run.report.passed()) << oracle::format_report(run.report);
}

TEST(CpuRmsNorm, UnitWeightReadsNormUnitW) {
  const FusedAddRmsNormOp op = rmsnorm_op(2, 7, kUnit);
  auto backend = make_cpu_backend();
  const Workspace ws = backend->allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 11);
  const RmsNormOutputs zero_w = oracle::run_fused_add_rmsnorm(*backend, ws, op, in);

  // Writing 1.0 into norm_unit_w must double every output (scale 1 + 1): proof that the unit
  // variant reads that buffer and nothing else.
  backend->upload(ws, op.residual, in.residual.data());
  backend->upload(ws, op.input, in.input.data());
  const std::vector<uint16_t> ones(op.weight.elements(), kBf16One);
  backend->upload(ws, op.weight, ones.data());
  backend->execute(ws, op);
  std::vector<uint16_t> doubled(op.output.elements());
  backend->download(ws, op.output, doubled.data());
  for (size_t i = 0; i < doubled.size(); ++i)
    EXPECT_EQ(bf16_bits_to_f32(doubled[i]), 2.0f * bf16_bits_to_f32(zero_w.output[i])) << i;
}

// ---- poison, non-finite rows ----

TEST(CpuRmsNorm, PoisonedOutputFails) {
  const FusedAddRmsNormOp op = rmsnorm_op(2, 9, kAddF32);
  CpuRun run = run_cpu_seeded(op, 3);
  ASSERT_TRUE(run.report.passed());
  run.out.output[9 + 4] = 0xFFFF;  // the poison pattern: never written
  const auto report = oracle::judge_fused_add_rmsnorm(op, run.in, run.out, "cpu", 3);
  ASSERT_FALSE(report.passed());
  const auto* bad = report.first_failure();
  EXPECT_EQ(bad->name, "norm_output");
  EXPECT_EQ(bad->first_bad->row, 1u);
  EXPECT_EQ(bad->first_bad->col, 4u);
  EXPECT_NE(bad->first_bad->reason.find("poison"), std::string::npos);
}

TEST(CpuRmsNorm, AnOpThatSkipsARowFails) {
  const FusedAddRmsNormOp full = rmsnorm_op(4, 33, kAddF32);
  const FusedAddRmsNormOp short_op = rmsnorm_op(3, 33, kAddF32);  // the mutant: one row short
  auto backend = make_cpu_backend();
  const Workspace ws = backend->allocate(oracle::footprint_layout(full), full.weight_pool_bytes());
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(full, 21);
  backend->poison(ws);
  backend->upload(ws, full.input, in.input.data());
  backend->upload(ws, full.residual, in.residual.data());
  backend->upload(ws, full.weight, in.weight.data());
  backend->execute(ws, short_op);
  RmsNormOutputs out;
  out.residual.resize(full.residual.elements());
  out.output.resize(full.output.elements());
  out.output_f32.resize(full.output_f32.elements());
  backend->download(ws, full.residual, out.residual.data());
  backend->download(ws, full.output, out.output.data());
  backend->download(ws, full.output_f32, out.output_f32.data());

  const auto report = oracle::judge_fused_add_rmsnorm(full, in, out, "cpu", 21);
  ASSERT_FALSE(report.passed());
  for (const auto& c : report.checks) {
    if (c.name == "residual") continue;  // the skipped row's residual was never added
    ASSERT_FALSE(c.passed()) << c.name;
    EXPECT_EQ(c.first_bad->row, 3u) << c.name;
    EXPECT_NE(c.first_bad->reason.find("poison"), std::string::npos) << c.name;
  }
}

// Defined result: a NaN or ±Inf in a row makes that row's sum of squares non-finite and the
// whole normed row NaN (BF16 and FP32); the stored residual keeps the non-finite sum; other
// rows are untouched.
TEST(CpuRmsNorm, NonFiniteInputRowsGiveNanRowsOnly) {
  const uint64_t rows = 4, width = 33;
  const FusedAddRmsNormOp op = rmsnorm_op(rows, width, kAddF32);
  RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 4);
  in.input[1 * width + 3] = kBf16QuietNan;
  in.residual[2 * width + 0] = kBf16PlusInf;
  const CpuRun run = run_cpu(op, in, 4);
  EXPECT_TRUE(run.report.passed()) << oracle::format_report(run.report);
  for (uint64_t t = 0; t < rows; ++t) {
    const bool poisoned_row = t == 1 || t == 2;
    for (uint64_t j = 0; j < width; ++j) {
      EXPECT_EQ(is_nan_bits(run.out.output[t * width + j]), poisoned_row) << t << "," << j;
      EXPECT_EQ(std::isnan(run.out.output_f32[t * width + j]), poisoned_row) << t << "," << j;
    }
  }
  EXPECT_EQ(run.out.residual[2 * width], kBf16PlusInf);
  EXPECT_TRUE(is_nan_bits(run.out.residual[1 * width + 3]));
}

TEST(CpuRmsNorm, NanInTheOracleOnlyFails) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 4, kAdd);
  CpuRun run = run_cpu_seeded(op, 8);
  RmsNormInputs in = run.in;
  in.input[2] = kBf16QuietNan;  // the oracle now expects a NaN row; the backend's is finite
  const auto report = oracle::judge_fused_add_rmsnorm(op, in, run.out, "cpu", 8);
  EXPECT_FALSE(report.passed());
}

// ---- workspace bounds and single source of extents ----

TEST(CpuRmsNorm, TensorPastItsBufferThrows) {
  const FusedAddRmsNormOp small = rmsnorm_op(5, 16, kAdd);
  const FusedAddRmsNormOp big = rmsnorm_op(6, 16, kAdd);
  auto backend = make_cpu_backend();
  const Workspace ws =
      backend->allocate(oracle::footprint_layout(small), small.weight_pool_bytes());
  EXPECT_THROW(backend->execute(ws, big), Error);
  TensorRef shifted = small.output;
  shifted.offset = 2;  // one element past the end of norm_output
  std::vector<uint16_t> host(small.output.elements());
  EXPECT_THROW(backend->download(ws, shifted, host.data()), Error);
  EXPECT_THROW(ws.resolve(shifted), Error);
}

TEST(CpuRmsNorm, OperandDisagreeingWithTheShapeThrows) {
  FusedAddRmsNormOp op = rmsnorm_op(4, 8, kAdd);
  auto backend = make_cpu_backend();
  const Workspace ws = backend->allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
  op.output.shape = {3, 8};  // fits its buffer, but the shape says 4 rows
  EXPECT_THROW(backend->execute(ws, op), Error);
}

// ---- planted bugs the comparison must catch ----

enum class Mutant {
  weight_not_offset,
  unrounded_residual,
  residual_not_stored,
  mean_over_n_minus_1
};

// A deliberately wrong fused add + RMSNorm, in FP32 like a real kernel.
RmsNormOutputs buggy_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in, Mutant m) {
  const uint64_t rows = op.shape().rows, n = op.shape().width;
  RmsNormOutputs out{in.residual, std::vector<uint16_t>(rows * n), std::vector<float>(rows * n)};
  for (uint64_t t = 0; t < rows; ++t) {
    std::vector<float> r(n);
    float sum_sq = 0.0f;
    for (uint64_t j = 0; j < n; ++j) {
      const float sum =
          bf16_bits_to_f32(in.residual[t * n + j]) + bf16_bits_to_f32(in.input[t * n + j]);
      if (m != Mutant::residual_not_stored) out.residual[t * n + j] = f32_to_bf16_bits(sum);
      r[j] = m == Mutant::unrounded_residual ? sum : round_to_bf16(sum);
      sum_sq += r[j] * r[j];
    }
    const float divisor = m == Mutant::mean_over_n_minus_1 ? static_cast<float>(n - 1) : n;
    const float inv = 1.0f / std::sqrt(sum_sq / divisor + static_cast<float>(op.eps));
    for (uint64_t j = 0; j < n; ++j) {
      const float w = bf16_bits_to_f32(in.weight[j]);
      const float y = r[j] * inv * (m == Mutant::weight_not_offset ? w : 1.0f + w);
      out.output[t * n + j] = f32_to_bf16_bits(y);
      out.output_f32[t * n + j] = y;
    }
  }
  return out;
}

class CpuRmsNormMutant : public ::testing::TestWithParam<Mutant> {};

TEST_P(CpuRmsNormMutant, IsCaught) {
  const FusedAddRmsNormOp op = rmsnorm_op(6, 129, kAddF32);
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 17);
  const auto report =
      oracle::judge_fused_add_rmsnorm(op, in, buggy_rmsnorm(op, in, GetParam()), "mutant", 17);
  EXPECT_FALSE(report.passed()) << oracle::format_report(report);
}

INSTANTIATE_TEST_SUITE_P(PlantedBugs, CpuRmsNormMutant,
                         ::testing::Values(Mutant::weight_not_offset, Mutant::unrounded_residual,
                                           Mutant::residual_not_stored,
                                           Mutant::mean_over_n_minus_1));

// The hand case of NormReadsTheStoredBf16Residual catches the unrounded residual even in the
// BF16 output alone.
TEST(CpuRmsNorm, UnroundedResidualCaughtInBf16OutputOfHandCase) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 2, kAdd);
  const RmsNormInputs in{{kBf16TwoPowMinus8, 0x0000}, {kBf16One, kBf16Half}, {0x0000, 0x0000}};
  RmsNormOutputs out = buggy_rmsnorm(op, in, Mutant::unrounded_residual);
  EXPECT_EQ(out.output[1], 0x3F21);
  out.output_f32.clear();
  FusedAddRmsNormOp bf16_only = op;
  bf16_only.variant.write_f32 = false;
  const auto report = oracle::judge_fused_add_rmsnorm(bf16_only, in, out, "mutant", 0);
  EXPECT_FALSE(report.passed()) << oracle::format_report(report);
}

}  // namespace
}  // namespace bufferlab
