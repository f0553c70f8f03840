// The FP64 oracle of the non-routing MoE / FFN ops on hand-worked values: BF16 rounding
// without double rounding, THE gather order, expert GEMM slices, SwiGLU (clamp), combine with
// zero-expert identity terms, the GemmOp epilogues, the LM head's source rows; the derived
// bounds; the rules of the per-element bounded comparison; and the judges' coordinates.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_judge.h"

namespace bufferlab {
namespace {

using namespace oracle;  // NOLINT: test file

uint16_t bf(double v) { return f32_to_bf16_bits(static_cast<float>(v)); }
std::vector<uint16_t> bfs(std::initializer_list<double> v) {
  std::vector<uint16_t> out;
  for (double x : v) out.push_back(bf(x));
  return out;
}

ModelConfig moe_config(uint64_t hidden, uint64_t inter, uint64_t experts, uint64_t top_k,
                       uint64_t zero = 0, uint64_t latent = 0, double limit = 0.0) {
  return {.hidden_size = hidden,
          .num_experts = experts,
          .num_experts_per_tok = top_k,
          .moe_intermediate_size = inter,
          .zero_expert_num = zero,
          .moe_latent_size = latent,
          .swiglu_limit = limit};
}

constexpr double u24 = 0x1p-24, u53 = 0x1p-53;

TEST(OracleMoeFfnFormats, RoundBf16IsNearestEvenWithoutDoubleRounding) {
  EXPECT_EQ(round_bf16(1.0 + 0x1p-8), 1.0);                     // tie → even
  EXPECT_EQ(round_bf16(1.0 + 3 * 0x1p-8), 1.0 + 0x1p-6);        // tie → even (up)
  EXPECT_EQ(round_bf16(1.0 + 0x1p-8 + 0x1p-30), 1.0 + 0x1p-7);  // via FP32 this would be 1.0
  EXPECT_EQ(round_bf16(-1.0 - 0x1p-8 - 0x1p-30), -1.0 - 0x1p-7);
  EXPECT_EQ(round_bf16(0x1p128 - 0x1p119), INFINITY);  // overflow threshold: tie → 2^128
  EXPECT_EQ(round_bf16(0x1p128 - 0x1p119 - 0x1p100), 0x1p128 - 0x1p120);  // BF16 max
  EXPECT_EQ(round_bf16(0x1p-133 * 1.5), 0x1p-132);                        // subnormal tie → even
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
}

TEST(OracleMoeFfnFormats, UlpAndGamma) {
  EXPECT_EQ(bf16_ulp_at(1.0), 0x1p-7);
  EXPECT_EQ(bf16_ulp_at(-1.99), 0x1p-7);
  EXPECT_EQ(bf16_ulp_at(2.0), 0x1p-6);
  EXPECT_EQ(bf16_ulp_at(1e-40), 0x1p-133);
  EXPECT_DOUBLE_EQ(gamma(10, u24), 10 * u24 / (1 - 10 * u24));
  EXPECT_EQ(gamma(0x1p24, u24), INFINITY);
}

// ids (E = 4, zero = 2, top_k = 2): slots 0..5 = 3,1 | 1,5 | 0,3. offset(0)=0, offset(1)=1,
// offset(3)=3; slot 3 is a zero expert.
TEST(OracleMoeFfnGather, TheGatherOrderSortsByExpertThenSlot) {
  const std::vector<uint32_t> ids = {3, 1, 1, 5, 0, 3};
  EXPECT_EQ(gather_order(ids, 4, 2), (std::vector<int64_t>{3, 1, 2, -1, 0, 4}));
  EXPECT_EQ(routed_slots(ids, 4), 5u);
  EXPECT_THROW(gather_order(ids, 4, 1), Error);  // id 5 ≥ E' = 5: corrupt
}

TEST(OracleMoeFfnGather, CopiesRowsInGatherOrderAndMasksTheTail) {
  const MoeGatherOp op = MoeGatherOp::make(moe_config(2, 1, 4, 2, 2), 3);
  const GatherInputs in{bfs({1, 2, 3, 4, 5, 6}), {3, 1, 1, 5, 0, 3}};
  const OpReference r = moe_gather(op, in, 2);
  // rows: 0 ← token 2 (slot 4), 1 ← token 0, 2 ← token 1, 3 ← token 0, 4 ← token 2.
  EXPECT_EQ(r.value, (std::vector<double>{5, 6, 1, 2, 3, 4, 1, 2, 5, 6, 0, 0}));
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(r.bound, std::vector<double>(12, 0.0));
}

// One token, top_k 2, ids {1, 0}; x = [1, 2]; W_gate[0] = [3, 4] (11), W_gate[1] = [0.5, −1]
// (−1.5). Slices are token-major: out[0] = slot 0 (expert 1), out[1] = slot 1 (expert 0).
TEST(OracleMoeFfnExperts, GateSlicesAreTokenMajorWithTheDotBound) {
  const MoeExpertGemmOp op = MoeExpertGemmOp::make(moe_config(2, 1, 2, 2), 1, ExpertProj::gate);
  // gathered rows: row 0 = slot 1 (expert 0), row 1 = slot 0 (expert 1); both are token 0.
  const ExpertGemmInputs in{bfs({1, 2, 1, 2}), {1, 0}, bfs({3, 4, 0.5, -1})};
  const OpReference r = moe_expert_gemm(op, in, Mode::faithful, cpu_bounds(), 0);
  EXPECT_EQ(r.value, (std::vector<double>{-1.5, 11}));
  const double e11 = (gamma(2, u24) + gamma(2, u53)) * 11 + 2 * 0x1p-149;
  EXPECT_DOUBLE_EQ(r.bound[1], e11 + 0x1p-4);  // ulp_bf16(11) = 2^-4
  const double e15 = (gamma(2, u24) + gamma(2, u53)) * 2.5 + 2 * 0x1p-149;
  EXPECT_DOUBLE_EQ(r.bound[0], e15 + 0x1p-7);
}

TEST(OracleMoeFfnExperts, DownReadsSliceOfItsSlotAndSkipsZeroExperts) {
  // D = 1, I = 2, E = 1, zero = 1, top_k = 2, one token, ids {1 (zero), 0}.
  const MoeExpertGemmOp op = MoeExpertGemmOp::make(moe_config(1, 2, 1, 2, 1), 1, ExpertProj::down);
  const ExpertGemmInputs in{bfs({9, 9, 2, 3}), {1, 0}, bfs({1, -1})};
  const OpReference r = moe_expert_gemm(op, in, Mode::exact, cpu_bounds(), 1);
  EXPECT_EQ(r.value, (std::vector<double>{0, -1}));
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{0, 1}));
}

TEST(OracleMoeFfnSwiglu, SiluTimesUpRoundedAndClamped) {
  const SwigluOp plain = SwigluOp::make(1, 2, 0.0, "g", "u", "a");
  const SwigluInputs in{bfs({1, 3}), bfs({2, -5})};
  const double s1 = 1.0 / (1.0 + std::exp(-1.0)), s3 = 3.0 / (1.0 + std::exp(-3.0));
  const OpReference exact = swiglu(plain, in, Mode::exact, cpu_bounds());
  EXPECT_DOUBLE_EQ(exact.value[0], 2 * s1);  // 1.46211715...
  EXPECT_DOUBLE_EQ(exact.value[1], -5 * s3);
  const OpReference faithful = swiglu(plain, in, Mode::faithful, cpu_bounds());
  EXPECT_EQ(faithful.value[0], 187.0 / 128);  // 1.4621 · 128 = 187.15
  // Bound: γ_(2·2+4)(2^-24)·|y| + γ_6(2^-53)|y| + 2^-148 + ulp_bf16(|y| + e).
  const double e = (gamma(8, u24) + gamma(6, u53)) * 2 * s1 + 0x1p-148;
  EXPECT_DOUBLE_EQ(faithful.bound[0], e + 0x1p-7);

  const SwigluOp clamped = SwigluOp::make(1, 2, 1.0, "g", "u", "a");
  const OpReference c = swiglu(clamped, in, Mode::faithful, cpu_bounds());
  EXPECT_EQ(c.value[0], 187.0 / 256);  // g = 1 ≤ limit, u = 2 → 1: silu(1) = 0.7310 → 187/256
  EXPECT_EQ(c.value[1], -187.0 / 256);  // g = 3 → 1, u = −5 → −1: −silu(1)
}

// E = 2, zero = 1, top_k = 2, width 2, one token, ids {0, 2 (zero)}, w = {0.5, 0.25};
// down row 0 = [2, 4], x = [8, −8]: out = [0.5·2 + 0.25·8, 0.5·4 − 0.25·8] = [3, 0].
TEST(OracleMoeFfnCombine, ZeroExpertAddsTheTokensInput) {
  const MoeCombineOp op = MoeCombineOp::make(moe_config(2, 1, 2, 2, 1), 1, false);
  ASSERT_TRUE(op.reads_input);
  const CombineInputs in{{0, 2}, {0.5f, 0.25f}, bfs({2, 4, 99, 99}), bfs({8, -8})};
  const OpReference r = moe_combine(op, in, Mode::faithful, cpu_bounds());
  EXPECT_EQ(r.value, (std::vector<double>{3, 0}));
  const double e1 = (gamma(2, u24) + gamma(2, u53)) * 4 + 2 * 0x1p-149;  // Σ|w·v| = 2 + 2
  EXPECT_DOUBLE_EQ(r.bound[1], e1 + bf16_ulp_at(e1));
  const double e3 = (gamma(2, u24) + gamma(2, u53)) * 3 + 2 * 0x1p-149;  // Σ|w·v| = 1 + 2
  EXPECT_DOUBLE_EQ(r.bound[0], e3 + 0x1p-6);
  // A hash layer never reads x: a zero-expert id there is corrupt.
  const MoeCombineOp hash = MoeCombineOp::make(moe_config(2, 1, 2, 2, 1), 1, true);
  EXPECT_THROW(moe_combine(hash, in, Mode::faithful, cpu_bounds()), Error);
}

GemmOp gemm_op(const char* kind, uint64_t rows, uint64_t K, uint64_t N) {
  const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
  const TensorRef out = arena_tensor(BufferId::moe_output, 0, {rows, N}, DType::bf16);
  std::vector<Access> inputs = {{x, AccessKind::read, "norm"}};
  if (std::string(kind) != "bf16") inputs.push_back({out, AccessKind::read, "old"});
  return GemmOp::make("g", kind, inputs, rows, rows, K, N, BufferId::moe_output, 0, DType::bf16,
                      "out");
}

// x = [1, 1], W = [[1, 2]]: acc = 3.
TEST(OracleMoeFfnGemm, EveryEpilogue) {
  const GemmInputs in{bfs({1, 1}), bfs({1, 2}), bfs({2})};
  EXPECT_EQ(gemm(gemm_op("bf16", 1, 2, 1), in, Mode::faithful, cpu_bounds()).value[0], 3.0);
  EXPECT_EQ(gemm(gemm_op("bf16+accumulate", 1, 2, 1), in, Mode::exact, cpu_bounds()).value[0], 5.0);
  const double sw = 3.0 / (1.0 + std::exp(-3.0)) * 2.0;  // 5.7154...
  const OpReference s =
      gemm(gemm_op("bf16+swiglu-epilogue", 1, 2, 1), in, Mode::exact, cpu_bounds());
  EXPECT_DOUBLE_EQ(s.value[0], sw);
  EXPECT_EQ(
      gemm(gemm_op("bf16+swiglu-epilogue", 1, 2, 1), in, Mode::faithful, cpu_bounds()).value[0],
      round_bf16(sw));
  // accumulate: e = e_a + u·(|y| + e_a), e_a = (γ_2(u) + γ_2(2^-53))·3 + 2·2^-149.
  const double ea = (gamma(2, u24) + gamma(2, u53)) * 3 + 2 * 0x1p-149;
  const double e = ea + u24 * (5 + ea);
  EXPECT_DOUBLE_EQ(
      gemm(gemm_op("bf16+accumulate", 1, 2, 1), in, Mode::exact, cpu_bounds()).bound[0],
      e + 0x1p-5);
  // The device GEMM roundoff doubles the accumulation term.
  const double store_dev =
      gemm(gemm_op("bf16", 1, 2, 1), in, Mode::exact, device_bounds()).bound[0];
  EXPECT_DOUBLE_EQ(store_dev, (gamma(2, 0x1p-23) + gamma(2, u53)) * 3 + 2 * 0x1p-149 + 0x1p-6);
}

// decode-like rows 0..direct−1, then tail_base + i·tail_stride: rows 0, 3, 5 of x = [r + 1].
TEST(OracleMoeFfnLmHead, ReadsTheSourceRowOfEveryLogitsRow) {
  const LmHeadOp op = LmHeadOp::make(6, 3, 1, 2, "mixed", LmHeadRows{1, 3, 2});
  const LmHeadInputs in{bfs({1, 2, 3, 4, 5, 6}), bfs({1, -1})};
  EXPECT_EQ(lm_head(op, in, Mode::faithful, cpu_bounds()).value,
            (std::vector<double>{1, -1, 4, -4, 6, -6}));
}

// ---- The bounded comparison's rules ----

TEST(BoundedCompare, PoisonNanInfAndTheBound) {
  const std::vector<double> want = {1.0, NAN, INFINITY, 2.0, 1.0, 5.0};
  const std::vector<double> bound = {0.0, 0.0, 0.0, 0.25, 0.0, 0.0};
  std::vector<uint16_t> got = {bf(1.0), bf(NAN), bf(INFINITY), bf(2.25), 0xFFFF, 0xFFFF};
  const std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 0};
  auto c = compare_bf16_bounded("t", got, want, 3, {bound, mask, "f"});
  EXPECT_TRUE(c.passed()) << c.first_bad->reason;  // |Δ| = bound passes; masked poison ignored
  EXPECT_EQ(c.max_abs, 0.25);
  EXPECT_EQ(c.nonfinite, 2u);

  got[3] = bf(2.5);  // |Δ| 0.5 > 0.25 at (1, 0)
  c = compare_bf16_bounded("t", got, want, 3, {bound, mask, "f"});
  ASSERT_FALSE(c.passed());
  EXPECT_EQ(c.first_bad->row, 1u);
  EXPECT_EQ(c.first_bad->col, 0u);
  EXPECT_NE(c.first_bad->reason.find("> bound"), std::string::npos);

  c = compare_bf16_bounded("t", got, want, 3, {bound, {}, "f"});  // no mask: poison fails
  EXPECT_EQ(c.failures, 3u);

  std::vector<uint16_t> bad = {bf(NAN), bf(1.0), bf(-INFINITY), bf(2.0), 0, 0};
  c = compare_bf16_bounded("t", bad, want, 3, {bound, mask, "f"});
  EXPECT_EQ(c.failures, 3u);  // NaN vs 1, 1 vs NaN, −Inf vs +Inf
  EXPECT_EQ(c.first_bad->reason, "NaN mismatch");

  std::vector<uint16_t> poisoned = {0xFFFF, bf(NAN), bf(INFINITY), bf(2.0), 0, 0};
  c = compare_bf16_bounded("t", poisoned, want, 3, {bound, mask, "f"});
  EXPECT_NE(c.first_bad->reason.find("unwritten"), std::string::npos);

  const std::vector<float> f32 = {1.0f, NAN, INFINITY, 2.2f, 0.0f, 0.0f};
  EXPECT_TRUE(compare_f32_bounded("t", f32, want, 3, {bound, mask, "f"}).passed());
  const std::vector<double> nan_bound(6, NAN);  // a NaN bound never passes a finite pair
  EXPECT_FALSE(compare_f32_bounded("t", f32, want, 3, {nan_bound, mask, "f"}).passed());
  EXPECT_THROW(compare_bf16_bounded("t", got, want, 4, {bound, mask, "f"}), Error);
}

// ---- The judges name the coordinates of a planted bug ----

TEST(OracleMoeFfnJudge, PerfectOutputsPassAndPlantedBugsFailAtTheirCoordinates) {
  const MoeExpertGemmOp op = MoeExpertGemmOp::make(moe_config(2, 1, 2, 2), 1, ExpertProj::gate);
  ExpertGemmRun run{{bfs({1, 2, 1, 2}), {1, 0}, bfs({3, 4, 0.5, -1})}, {}};
  const OpReference ref = moe_expert_gemm(op, run.stored, Mode::faithful, cpu_bounds(), 0);
  run.out = perfect_bf16_output(ref);
  EXPECT_TRUE(judge_moe_expert_gemm(op, run, 0, "test", 1).passed());
  run.out[1] = 0xFFFF;  // the routed slot 1 (expert 0) left unwritten
  const auto report = judge_moe_expert_gemm(op, run, 0, "test", 1);
  ASSERT_FALSE(report.passed());
  const auto& bad = *report.first_failure()->first_bad;
  EXPECT_NE(bad.reason.find("unwritten"), std::string::npos);
  EXPECT_NE(bad.reason.find("token 0, slot 1, expert 0, dim 0"), std::string::npos) << bad.reason;
}

TEST(OracleMoeFfnJudge, SwappedGatherOrderFails) {
  const MoeGatherOp op = MoeGatherOp::make(moe_config(2, 1, 4, 2, 2), 3);
  GatherRun run{{bfs({1, 2, 3, 4, 5, 6}), {3, 1, 1, 5, 0, 3}}, {}};
  run.out = perfect_bf16_output(moe_gather(op, run.stored, 2));
  EXPECT_TRUE(judge_moe_gather(op, run, 2, "test", 7).passed());
  // Token-major order instead of expert-major: row 0 holds token 0.
  std::swap(run.out[0], run.out[2]);
  std::swap(run.out[1], run.out[3]);
  const auto report = judge_moe_gather(op, run, 2, "test", 7);
  ASSERT_FALSE(report.passed());
  const auto& bad = *report.first_failure()->first_bad;
  EXPECT_EQ(bad.row, 0u);
  EXPECT_NE(bad.reason.find("token 2, slot 0, expert 0"), std::string::npos) << bad.reason;
  EXPECT_NE(format_report(report).find("seed"), std::string::npos);
}

}  // namespace
}  // namespace bufferlab
