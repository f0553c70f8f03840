// Golden RMSNorm (docs/golden.md): transformers' Qwen3NextRMSNorm — the weight as an offset from 1,
// y = x·rsqrt(mean(x²) + eps)·(1 + w), docs/spec/numerics.md §1 — evaluated in FP64 on stored BF16
// rows, against the FP64 oracle (exact mode) and every backend present.
//
// Bounds. n = width, u64 = 2^-53. Both FP64 evaluations (transformers' and the oracle's) follow
// the derivation of oracle/src/rmsnorm.cpp with u64 for u: x² (1), Σ in any order (n − 1), / n
// (1), + eps (1), rsqrt as 1/sqrt (2), ·x (1), 1 + w (1), ·(1 + w) (1): at most n + 9 roundings,
// so each is within ε = γ_(n+9)(u64)·|y| of the exact y, and |oracle − golden| ≤ 2ε. A backend's
// stored value is within the derived tolerance of oracle/src/rmsnorm.cpp
// (fused_add_rmsnorm_tolerances: γ_(n+9)(2^-24) relative for the FP32 output, plus 2^-8·(1 + γ)
// for the BF16 store, plus 2^-126 absolute) of the exact y, and |y| ≤ |golden| + ε; so
//   |backend − golden| ≤ rel·(|golden| + ε) + abs + ε.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "golden_case.h"

namespace bufferlab::golden {
namespace {

struct RmsCase {
  GoldenCase g = load_golden("rmsnorm_qwen3_next");
  uint64_t rows = g.param("rows"), width = g.param("width");
  FusedAddRmsNormOp op;
  oracle::RmsNormInputs in;
  std::vector<double> fp64_err;  // ε per element

  RmsCase() {
    ModelConfig config;
    config.hidden_size = width;
    config.rms_norm_eps = g.real("eps");
    op = FusedAddRmsNormOp::make(config, rows,
                                 {.add_residual = false, .write_f32 = true, .unit_weight = false});
    for (double v : g.values("x")) in.residual.push_back(f32_to_bf16_bits(static_cast<float>(v)));
    for (double v : g.values("weight"))
      in.weight.push_back(f32_to_bf16_bits(static_cast<float>(v)));
    const double gam = oracle::gamma(static_cast<double>(width) + 9.0, oracle::kFp64UnitRoundoff);
    for (double y : g.values("y")) fp64_err.push_back(gam * std::fabs(y));
  }
};

// The oracle-side judge: FP64 values against the golden y within 2ε.
BoundedCheck judge_fp64(const RmsCase& c, const std::vector<double>& got, const std::string& name) {
  BoundedCheck check(name);
  const std::vector<double>& y = c.g.values("y");
  for (uint64_t i = 0; i < y.size(); ++i)
    check.add(got[i], y[i], 2.0 * c.fp64_err[i],
              fmt::format("row {} col {}", i / c.width, i % c.width));
  return check;
}

// The backend-side judge: stored values against the golden y within the derived tolerance.
BoundedCheck judge_stored(const RmsCase& c, const std::vector<double>& got, double rel, double abs,
                          const std::string& name) {
  BoundedCheck check(name);
  const std::vector<double>& y = c.g.values("y");
  for (uint64_t i = 0; i < y.size(); ++i) {
    const double e = c.fp64_err[i];
    check.add(got[i], y[i], rel * (std::fabs(y[i]) + e) + abs + e,
              fmt::format("row {} col {}", i / c.width, i % c.width));
  }
  return check;
}

TEST(GoldenRmsNorm, OracleExactMatchesQwen3NextRmsNorm) {
  const RmsCase c;
  const oracle::RmsNormReference ref = oracle::fused_add_rmsnorm(c.op, c.in, oracle::Mode::exact);
  expect_passed(judge_fp64(c, ref.output, "rmsnorm oracle (exact) vs Qwen3NextRMSNorm"));
}

TEST(GoldenRmsNorm, BackendsMatchQwen3NextRmsNorm) {
  const RmsCase c;
  const oracle::RmsNormTolerances tol = oracle::fused_add_rmsnorm_tolerances(c.op);
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    const Workspace ws = b.backend->allocate(oracle::footprint_layout(c.op), c.width * 2);
    const oracle::RmsNormOutputs out = oracle::run_fused_add_rmsnorm(*b.backend, ws, c.op, c.in);
    std::vector<double> bf16_out, f32_out;
    for (uint16_t v : out.output) bf16_out.push_back(bf16_bits_to_f32(v));
    for (float v : out.output_f32) f32_out.push_back(v);
    expect_passed(judge_stored(c, bf16_out, tol.output.rel, tol.output.abs,
                               b.name + " norm_output (BF16) vs Qwen3NextRMSNorm"));
    expect_passed(judge_stored(c, f32_out, tol.output_f32.rel, tol.output_f32.abs,
                               b.name + " moe_router_in_f32 vs Qwen3NextRMSNorm"));
  }
}

// Planted bug: the plain-weight convention y·w (Llama's) instead of y·(1 + w). The FP32 judge
// must see it too, on a backend-sized tolerance.
TEST(GoldenRmsNorm, PlantedPlainWeightIsCaught) {
  const RmsCase c;
  const oracle::RmsNormReference ref = oracle::fused_add_rmsnorm(c.op, c.in, oracle::Mode::exact);
  std::vector<double> wrong = ref.output;
  const std::vector<double>& w = c.g.values("weight");
  for (uint64_t i = 0; i < wrong.size(); ++i)
    wrong[i] = wrong[i] / (1.0 + w[i % c.width]) * w[i % c.width];
  expect_caught(judge_fp64(c, wrong, "planted y*w (oracle side)"));
  const oracle::RmsNormTolerances tol = oracle::fused_add_rmsnorm_tolerances(c.op);
  expect_caught(
      judge_stored(c, wrong, tol.output.rel, tol.output.abs, "planted y*w (backend side)"));
}

}  // namespace
}  // namespace bufferlab::golden
