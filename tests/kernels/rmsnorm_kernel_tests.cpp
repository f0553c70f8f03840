// The fused residual add + RMSNorm on the backend under test (tests/support/backend_under_test.h)
// against the faithful FP64 oracle (docs/spec/numerics.md §1, §9): odd widths (scalar path), widths
// that are multiples of 8 (CUDA's 16-byte vector path), rows whose start is deliberately
// misaligned, every variant under the derived bounds, the storage semantics on a hand-computed
// case, poison and non-finite rows, workspace bounds, a RapidCheck property; on a backend other
// than the CPU also against the CPU backend.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/rmsnorm_judge.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

using testing::KernelTest;
using testing::rmsnorm_op;

using oracle::AgreementReport;
using oracle::RmsNormInputs;
using oracle::RmsNormOutputs;

constexpr RmsNormVariant kAdd{true, false, false};
constexpr RmsNormVariant kAddF32{true, true, false};
constexpr RmsNormVariant kUnit{true, false, true};
constexpr RmsNormVariant kNormOnly{false, false, false};
constexpr RmsNormVariant kVariants[] = {kAdd, kAddF32, kUnit, kNormOnly};
constexpr const char* kVariantNames[] = {"add", "f32", "unit", "norm"};

constexpr uint16_t kBf16One = 0x3F80;
constexpr uint16_t kBf16Half = 0x3F00;
constexpr uint16_t kBf16TwoPowMinus8 = 0x3B80;  // 2^-8: half a BF16 ULP of 1.0
constexpr uint16_t kBf16QuietNan = 0x7FC0;
constexpr uint16_t kBf16PlusInf = 0x7F80;

bool is_nan_bits(uint16_t b) { return std::isnan(bf16_bits_to_f32(b)); }

// The same op with every row-major operand moved 2 bytes into its buffer: rows no longer
// start on 16 bytes, which forces CUDA's scalar path even when width % 8 == 0.
FusedAddRmsNormOp misaligned(FusedAddRmsNormOp op) {
  for (TensorRef* t : {&op.input, &op.residual, &op.output}) t->offset += 2;
  op.output_f32.offset += 4;
  return op;
}

// A layout holding `op` even when its operands were moved (one row of slack per buffer).
Layout layout_with_slack(const FusedAddRmsNormOp& op) {
  FusedAddRmsNormOp bigger = rmsnorm_op(op.shape().rows + 1, op.shape().width, op.variant, op.eps);
  return oracle::footprint_layout(bigger);
}

// Another backend vs the CPU, both judged against the oracle: each FP32 value lies within γ·|y|
// of y, so the two BF16 stores are at most 2 ULP apart (1 within a binade, 2 across a binade
// boundary); the FP32 outputs within 2γ/(1 − γ) of each other, relative to the CPU's value;
// the residual is exact on both (bitwise equal).
std::vector<oracle::TensorComparison> versus_cpu(const FusedAddRmsNormOp& op,
                                                 const RmsNormOutputs& got,
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
      oracle::compare_bf16("residual vs cpu", got.residual, cpu_res, w, exact),
      oracle::compare_bf16("norm_output vs cpu", got.output, cpu_out, w, two_ulp)};
  if (op.variant.write_f32)
    out.push_back(oracle::compare_f32("moe_router_in_f32 vs cpu", got.output_f32, cpu_f32, w, f32));
  return out;
}

struct RmsNormRun {
  RmsNormInputs in;
  RmsNormOutputs out;
  AgreementReport report;
  std::vector<oracle::TensorComparison> versus_cpu;  // empty on the CPU backend
};

class RmsNormKernel : public KernelTest {
 protected:
  // Runs `op` on the backend under test and judges it against the oracle; on another backend
  // also runs the CPU on the same inputs and compares.
  static RmsNormRun run(const FusedAddRmsNormOp& op, const RmsNormInputs& in, uint64_t seed = 0) {
    const Layout layout = layout_with_slack(op);
    const Workspace ws = backend().allocate(layout, op.weight_pool_bytes());
    RmsNormOutputs out = oracle::run_fused_add_rmsnorm(backend(), ws, op, in);
    RmsNormRun r{in, out, oracle::judge_fused_add_rmsnorm(op, in, out, backend().name(), seed), {}};
    if (!on_cpu()) {
      const Workspace cws = testing::cpu_backend().allocate(layout, op.weight_pool_bytes());
      r.versus_cpu =
          versus_cpu(op, out, oracle::run_fused_add_rmsnorm(testing::cpu_backend(), cws, op, in));
    }
    return r;
  }
  static RmsNormRun run_seeded(const FusedAddRmsNormOp& op, uint64_t seed) {
    return run(op, oracle::generate_rmsnorm_inputs(op, seed), seed);
  }
  static void expect_agrees(const RmsNormRun& r, const FusedAddRmsNormOp& op) {
    EXPECT_TRUE(r.report.passed()) << oracle::format_report(r.report);
    for (const auto& c : r.versus_cpu)
      EXPECT_TRUE(c.passed()) << op.params() << " " << c.name << " max ULP "
                              << c.max_ulp.value_or(0) << " first bad "
                              << (c.first_bad ? c.first_bad->reason : "");
  }
};

// ---- agreement under the derived bounds ----

class RmsNormKernelShapes
    : public RmsNormKernel,
      public ::testing::WithParamInterface<std::tuple<uint64_t, uint64_t, int>> {};

TEST_P(RmsNormKernelShapes, AgreesWithOracle) {
  const auto [rows, width, variant] = GetParam();
  const FusedAddRmsNormOp op = rmsnorm_op(rows, width, kVariants[variant]);
  const RmsNormRun r = run_seeded(op, 300 + width);
  expect_agrees(r, op);
  EXPECT_EQ(r.report.checks.size(), op.variant.write_f32 ? 3u : 2u);
}

TEST_P(RmsNormKernelShapes, MisalignedRowsAgree) {
  const auto [rows, width, variant] = GetParam();
  const FusedAddRmsNormOp op = misaligned(rmsnorm_op(rows, width, kVariants[variant]));
  expect_agrees(run_seeded(op, 500 + width), op);
}

// "rows5_width4096_f32": readable, and filterable by scripts/gpu-check.sh.
std::string shape_name(const ::testing::TestParamInfo<std::tuple<uint64_t, uint64_t, int>>& info) {
  const auto [rows, width, variant] = info.param;
  return "rows" + std::to_string(rows) + "_width" + std::to_string(width) + "_" +
         kVariantNames[variant];
}

// Odd widths take CUDA's scalar path; 8, 1000, 4096 and 7168 its vector path (4096 and 7168
// with more 16-byte chunks than threads).
INSTANTIATE_TEST_SUITE_P(Widths, RmsNormKernelShapes,
                         ::testing::Combine(::testing::Values(1, 5, 17, 67),
                                            ::testing::Values(1, 7, 8, 33, 129, 1000, 4095, 4096,
                                                              7168),
                                            ::testing::Values(0, 1, 2, 3)),
                         shape_name);

TEST_F(RmsNormKernel, WideDynamicRangeAndScalesAgree) {
  const FusedAddRmsNormOp op = rmsnorm_op(8, 257, kAddF32);
  for (double scale : {0x1p-20, 1.0, 0x1p20}) {
    oracle::RmsNormInputProfile profile;
    profile.scale = scale;
    profile.wide_row_every = 2;
    const RmsNormRun r = run(op, oracle::generate_rmsnorm_inputs(op, 7, profile), 7);
    SCOPED_TRACE("scale " + std::to_string(scale));
    expect_agrees(r, op);
  }
}

TEST_F(RmsNormKernel, ManyRowsLargeWidth) {
  const FusedAddRmsNormOp op = rmsnorm_op(300, 5120, kAddF32);
  expect_agrees(run_seeded(op, 77), op);
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
TEST_F(RmsNormKernel, NormReadsTheStoredBf16Residual) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 2, kUnit);
  const RmsNormInputs in{{kBf16TwoPowMinus8, 0x0000}, {kBf16One, kBf16Half}, {}};
  const RmsNormRun r = run(op, in);
  EXPECT_EQ(r.out.residual, (std::vector<uint16_t>{kBf16One, kBf16Half}));
  EXPECT_EQ(r.out.output, (std::vector<uint16_t>{0x3FA2, 0x3F22}));
  expect_agrees(r, op);

  // The case discriminates: normalising the unrounded sum lands on the other BF16.
  const auto exact = oracle::fused_add_rmsnorm(op, in, oracle::Mode::exact);
  EXPECT_EQ(round_to_bf16(static_cast<float>(exact.output[1])), bf16_bits_to_f32(0x3F21));
}

TEST_F(RmsNormKernel, WithoutAddTheResidualIsReadOnly) {
  const FusedAddRmsNormOp op = rmsnorm_op(3, 33, kNormOnly);
  const RmsNormRun r = run_seeded(op, 5);
  EXPECT_EQ(r.out.residual, r.in.residual);
  expect_agrees(r, op);
}

TEST_F(RmsNormKernel, UnitWeightReadsNormUnitW) {
  const FusedAddRmsNormOp op = rmsnorm_op(2, 7, kUnit);
  Backend& b = backend();
  const Workspace ws = b.allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 11);
  const RmsNormOutputs zero_w = oracle::run_fused_add_rmsnorm(b, ws, op, in);

  // Writing 1.0 into norm_unit_w must double every output (scale 1 + 1): proof that the unit
  // variant reads that buffer and nothing else.
  b.upload(ws, op.residual, in.residual.data());
  b.upload(ws, op.input, in.input.data());
  const std::vector<uint16_t> ones(op.weight.elements(), kBf16One);
  b.upload(ws, op.weight, ones.data());
  b.execute(ws, op);
  b.synchronize();
  std::vector<uint16_t> doubled(op.output.elements());
  b.download(ws, op.output, doubled.data());
  for (size_t i = 0; i < doubled.size(); ++i)
    EXPECT_EQ(bf16_bits_to_f32(doubled[i]), 2.0f * bf16_bits_to_f32(zero_w.output[i])) << i;
}

// ---- poison, non-finite rows ----

TEST_F(RmsNormKernel, PoisonedOutputFails) {
  const FusedAddRmsNormOp op = rmsnorm_op(2, 9, kAddF32);
  RmsNormRun r = run_seeded(op, 3);
  ASSERT_TRUE(r.report.passed());
  r.out.output[9 + 4] = 0xFFFF;  // the poison pattern: never written
  const auto report = oracle::judge_fused_add_rmsnorm(op, r.in, r.out, backend().name(), 3);
  ASSERT_FALSE(report.passed());
  const auto* bad = report.first_failure();
  EXPECT_EQ(bad->name, "norm_output");
  EXPECT_EQ(bad->first_bad->row, 1u);
  EXPECT_EQ(bad->first_bad->col, 4u);
  EXPECT_NE(bad->first_bad->reason.find("poison"), std::string::npos);
}

TEST_F(RmsNormKernel, AnOpThatSkipsARowFails) {
  const FusedAddRmsNormOp full = rmsnorm_op(4, 33, kAddF32);
  const FusedAddRmsNormOp short_op = rmsnorm_op(3, 33, kAddF32);  // the mutant: one row short
  Backend& b = backend();
  const Workspace ws = b.allocate(oracle::footprint_layout(full), full.weight_pool_bytes());
  const RmsNormInputs in = oracle::generate_rmsnorm_inputs(full, 21);
  b.poison(ws);
  b.upload(ws, full.input, in.input.data());
  b.upload(ws, full.residual, in.residual.data());
  b.upload(ws, full.weight, in.weight.data());
  b.execute(ws, short_op);
  b.synchronize();
  RmsNormOutputs out;
  out.residual.resize(full.residual.elements());
  out.output.resize(full.output.elements());
  out.output_f32.resize(full.output_f32.elements());
  b.download(ws, full.residual, out.residual.data());
  b.download(ws, full.output, out.output.data());
  b.download(ws, full.output_f32, out.output_f32.data());

  const auto report = oracle::judge_fused_add_rmsnorm(full, in, out, b.name(), 21);
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
// rows are untouched. Width 33 takes CUDA's scalar path, 64 its vector path.
TEST_F(RmsNormKernel, NonFiniteInputRowsGiveNanRowsOnly) {
  for (const uint64_t width : {33, 64}) {
    const uint64_t rows = 4;
    const FusedAddRmsNormOp op = rmsnorm_op(rows, width, kAddF32);
    RmsNormInputs in = oracle::generate_rmsnorm_inputs(op, 4);
    in.input[1 * width + 3] = kBf16QuietNan;
    in.residual[2 * width + 0] = kBf16PlusInf;
    const RmsNormRun r = run(op, in, 4);
    SCOPED_TRACE("width " + std::to_string(width));
    expect_agrees(r, op);
    for (uint64_t t = 0; t < rows; ++t) {
      const bool poisoned_row = t == 1 || t == 2;
      for (uint64_t j = 0; j < width; ++j) {
        EXPECT_EQ(is_nan_bits(r.out.output[t * width + j]), poisoned_row) << t << "," << j;
        EXPECT_EQ(std::isnan(r.out.output_f32[t * width + j]), poisoned_row) << t << "," << j;
      }
    }
    EXPECT_EQ(r.out.residual[2 * width], kBf16PlusInf);
    EXPECT_TRUE(is_nan_bits(r.out.residual[1 * width + 3]));
  }
}

TEST_F(RmsNormKernel, NanInTheOracleOnlyFails) {
  const FusedAddRmsNormOp op = rmsnorm_op(1, 4, kAdd);
  const RmsNormRun r = run_seeded(op, 8);
  RmsNormInputs in = r.in;
  in.input[2] = kBf16QuietNan;  // the oracle now expects a NaN row; the backend's is finite
  const auto report = oracle::judge_fused_add_rmsnorm(op, in, r.out, backend().name(), 8);
  EXPECT_FALSE(report.passed());
}

// ---- workspace bounds and single source of extents ----

TEST_F(RmsNormKernel, TensorPastItsBufferThrows) {
  const FusedAddRmsNormOp small = rmsnorm_op(5, 16, kAdd);
  const FusedAddRmsNormOp big = rmsnorm_op(6, 16, kAdd);
  Backend& b = backend();
  const Workspace ws = b.allocate(oracle::footprint_layout(small), small.weight_pool_bytes());
  EXPECT_THROW(b.execute(ws, big), Error);
  TensorRef shifted = small.output;
  shifted.offset = 2;  // one element past the end of norm_output
  std::vector<uint16_t> host(small.output.elements());
  EXPECT_THROW(b.download(ws, shifted, host.data()), Error);
  EXPECT_THROW(ws.resolve(shifted), Error);
}

TEST_F(RmsNormKernel, OperandDisagreeingWithTheShapeThrows) {
  FusedAddRmsNormOp op = rmsnorm_op(4, 8, kAdd);
  Backend& b = backend();
  const Workspace ws = b.allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
  op.output.shape = {3, 8};  // fits its buffer, but the shape says 4 rows
  EXPECT_THROW(b.execute(ws, op), Error);
}

// ---- a property over widths, eps, variants, alignment and scales ----

TEST_F(RmsNormKernel, PropertyAgreesWithOracle) {
  const bool ok = rc::check("rmsnorm agrees with the faithful oracle (and the CPU)", [] {
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
    const RmsNormRun r = run(op, oracle::generate_rmsnorm_inputs(op, seed, profile), seed);
    RC_LOG() << oracle::format_report(r.report);
    RC_ASSERT(r.report.passed());
    for (const auto& c : r.versus_cpu) RC_ASSERT(c.passed());
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace bufferlab
