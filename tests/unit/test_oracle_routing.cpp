// The FP64 oracle of MoE routing (docs/spec/numerics.md §2) on cases worked out by hand: router
// logits and their bounds on every precision path, the one total order (ties to the lower
// index, NaN last), each scoring function's selection and weights, hash tables, zero experts,
// and the tie-stability check on near-ties just below and just above the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_judge.h"

namespace bufferlab {
namespace {

using oracle::Mode;
using oracle::RouterInputs;
using oracle::select_topk;
using oracle::tie_stability_check;
using oracle::TopKInputs;

using Ids = std::vector<uint32_t>;

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn3 = 1.09861228866810969140;
constexpr double kLn4 = 1.38629436111989061883;

uint16_t bf(float v) { return f32_to_bf16_bits(v); }

MoeRouterOp router(uint64_t rows, uint64_t hidden, uint64_t experts, RouterPrecision p) {
  MoeRouterOp op;
  op.dims = {rows, hidden, experts};
  op.precision = p;
  return op;
}

MoeTopKOp topk(uint64_t rows, uint64_t experts, uint64_t top_k, MoeScoring scoring,
               uint64_t routed = 0) {
  MoeTopKOp op;
  op.dims = {rows, experts, routed == 0 ? experts : routed, top_k, 0};
  op.scoring = scoring;
  return op;
}

Ids ids_of(const MoeTopKOp& op, std::vector<double> logits) {
  return select_topk(op, TopKInputs{std::move(logits), {}, {}, {}}).ids;
}

// x = [1, 1]; Wg rows [1, 3·2^-9] and [0.5, −0.25].
// l0 = 1 + 3·2^-9 = 1.005859375: FP32 holds it; in BF16 (ULP 2^-7 on [1, 2)) it is 0.75 ULP
// above 1, so it rounds up to 1 + 2^-7 = 1.0078125. l1 = 0.5 − 0.25 = 0.25, exact everywhere.
RouterInputs two_by_two(RouterPrecision p) {
  RouterInputs in;
  in.weight = {bf(1.0f), bf(3.0f / 512.0f), bf(0.5f), bf(-0.25f)};
  if (p == RouterPrecision::fp32_routing) {
    in.x_f32 = {1.0f + 0x1p-20f, 1.0f};  // not a BF16 value: the path reads FP32
  } else {
    in.x_bf16 = {bf(1.0f), bf(1.0f)};
  }
  return in;
}

TEST(OracleRouting, RouterLogitsRoundAsEachPathStores) {
  const auto bf16 = router(1, 2, 2, RouterPrecision::bf16);
  const auto gate = router(1, 2, 2, RouterPrecision::fp32_gate);
  const auto f32 = router(1, 2, 2, RouterPrecision::fp32_routing);
  EXPECT_EQ(oracle::router_logits(bf16, two_by_two(bf16.precision), Mode::exact),
            (std::vector<double>{1.005859375, 0.25}));
  EXPECT_EQ(oracle::router_logits(bf16, two_by_two(bf16.precision), Mode::faithful),
            (std::vector<double>{1.0078125, 0.25}));
  EXPECT_EQ(oracle::router_logits(gate, two_by_two(gate.precision), Mode::faithful),
            (std::vector<double>{1.005859375, 0.25}));
  // FP32 x: l0 = 1 + 2^-20 + 3·2^-9 (21 significant bits, FP32-exact);
  // l1 = 0.5·(1 + 2^-20) − 0.25 = 0.25 + 2^-21.
  EXPECT_EQ(oracle::router_logits(f32, two_by_two(f32.precision), Mode::faithful),
            (std::vector<double>{1.0 + 0x1p-20 + 3.0 / 512.0, 0.25 + 0x1p-21}));
  // Each path needs its own x.
  EXPECT_THROW(oracle::router_logits(f32, two_by_two(bf16.precision), Mode::exact), Error);
  EXPECT_THROW(oracle::router_logits(bf16, two_by_two(f32.precision), Mode::exact), Error);
}

TEST(OracleRouting, RouterBoundsAreGammaKTimesAbsSumPlusHalfBf16Ulp) {
  // K = 2, u = 2^-24: γ_2 = 2^-23/(1 − 2^-23) ≈ 1.1920930e-7.
  // row 0: Σ|x·w| = 1 + 3·2^-9 = 1.005859375 → e = 1.19907796e-7; BF16 store: |l| + e in
  //   [1, 2), half ULP 2^-8 → 0.00390625 + 1.199e-7 = 0.0039063699.
  // row 1: Σ|x·w| = 0.5 + 0.25 = 0.75 (not |0.25|) → e = 8.94e-8; |l| + e in [0.25, 0.5),
  //   half ULP 2^-10 → 0.0009766519.
  const auto bf16 = router(1, 2, 2, RouterPrecision::bf16);
  const auto b = oracle::router_logit_bounds(bf16, two_by_two(bf16.precision), 0x1p-24);
  EXPECT_NEAR(b[0], 0.0039063699077958, 1e-16);
  EXPECT_NEAR(b[1], 0.00097665190697782, 1e-17);
  const auto gate = router(1, 2, 2, RouterPrecision::fp32_gate);
  const auto g = oracle::router_logit_bounds(gate, two_by_two(gate.precision), 0x1p-24);
  EXPECT_NEAR(g[0], 1.19907795775866e-7, 1e-20);  // no store rounding on the FP32 paths
  // Device GEMMs, u = 2^-23: γ_2 = 2^-22/(1 − 2^-22) = 2.3841864e-7, × 1.005859375.
  const auto d = oracle::router_logit_bounds(gate, two_by_two(gate.precision), 0x1p-23);
  EXPECT_NEAR(d[0], 2.3981562e-7, 1e-14);
}

TEST(OracleRouting, ExactTiesGoToTheLowerIndex) {
  // [1, 3, 3, 2]: experts 1 and 2 tie at 3 → 1 first; then 3 (2), then 0 (1).
  EXPECT_EQ(ids_of(topk(1, 4, 2, MoeScoring::softmax), {1, 3, 3, 2}), (Ids{1, 2}));
  EXPECT_EQ(ids_of(topk(1, 4, 3, MoeScoring::softmax), {1, 3, 3, 2}), (Ids{1, 2, 3}));
  EXPECT_EQ(ids_of(topk(1, 4, 2, MoeScoring::softmax), {0, 0, 0, 0}), (Ids{0, 1}));
  EXPECT_EQ(ids_of(topk(1, 2, 1, MoeScoring::softmax), {-0.0, 0.0}), (Ids{0}));  // −0 = +0
  // sigmoid: equal logits give equal scores → the lower index.
  EXPECT_EQ(ids_of(topk(1, 3, 1, MoeScoring::sigmoid), {-1, 2, 2}), (Ids{1}));
  EXPECT_TRUE(oracle::ranks_before(3.0, 1, 3.0, 2));
  EXPECT_FALSE(oracle::ranks_before(3.0, 2, 3.0, 1));
}

TEST(OracleRouting, SoftmaxWeighsOverAllExpertsThenRenormalises) {
  // logits ln1..ln4: e^l = 1, 2, 3, 4, Σ = 10 → softmax 0.1, 0.2, 0.3, 0.4.
  // top 2 = experts 3, 2 with weights 0.4, 0.3 (a softmax over the two alone would give 4/7, 3/7).
  auto op = topk(1, 4, 2, MoeScoring::softmax);
  const std::vector<double> l = {0.0, kLn2, kLn3, kLn4};
  auto ref = select_topk(op, {l, {}, {}, {}});
  EXPECT_EQ(ref.ids, (Ids{3, 2}));
  EXPECT_NEAR(ref.weights[0], 0.4, 1e-15);
  EXPECT_NEAR(ref.weights[1], 0.3, 1e-15);
  op.norm_topk_prob = true;  // 0.4/0.7, 0.3/0.7
  ref = select_topk(op, {l, {}, {}, {}});
  EXPECT_NEAR(ref.weights[0], 4.0 / 7.0, 1e-15);
  EXPECT_NEAR(ref.weights[1], 3.0 / 7.0, 1e-15);
  op.norm_topk_prob = false;
  op.routed_scaling_factor = 2.5;  // 0.4·2.5, 0.3·2.5
  ref = select_topk(op, {l, {}, {}, {}});
  EXPECT_NEAR(ref.weights[0], 1.0, 1e-15);
  EXPECT_NEAR(ref.weights[1], 0.75, 1e-15);
}

TEST(OracleRouting, SigmoidSelectsByScorePlusBiasButWeighsByScore) {
  // logits [0, 2, −2]: s = [0.5, 0.8807971, 0.1192029] (σ(−2) = 1/(1 + e²) = 1/8.389056).
  // bias [0, −1, 0.5]: keys [0.5, −0.1192029, 0.6192029] → experts 2, 0.
  // weights s = [0.1192029, 0.5], Σ = 0.6192029 → [0.1925103, 0.8074897], ×2.
  auto op = topk(1, 3, 2, MoeScoring::sigmoid);
  op.use_bias = op.norm_topk_prob = true;
  op.routed_scaling_factor = 2.0;
  const TopKInputs in{{0.0, 2.0, -2.0}, {0.0f, -1.0f, 0.5f}, {}, {}};
  auto ref = select_topk(op, in);
  EXPECT_EQ(ref.ids, (Ids{2, 0}));
  EXPECT_NEAR(ref.weights[0], 0.3850205410, 1e-9);
  EXPECT_NEAR(ref.weights[1], 1.6149794590, 1e-9);
  EXPECT_NEAR(ref.keys[1], -0.1192029220, 1e-9);
  op.use_bias = false;  // keys = s: experts 1 (0.881), 0 (0.5)
  EXPECT_EQ(select_topk(op, in).ids, (Ids{1, 0}));

  // Σ ≤ 1e-20: s(−50) ≈ e^-50 = 1.92875e-22, s(−60) ≈ 8.8e-27 — not renormalised.
  auto tiny = topk(1, 2, 2, MoeScoring::sigmoid);
  tiny.norm_topk_prob = true;
  ref = select_topk(tiny, {{-50.0, -60.0}, {}, {}, {}});
  EXPECT_NEAR(ref.weights[0], 1.9287498479639178e-22, 1e-35);
}

TEST(OracleRouting, SqrtSoftplusStaysFiniteAtLargeLogits) {
  // softplus(1000) = 1000 + log1p(e^-1000) = 1000 (the naive log(1 + e^1000) is Inf):
  // s = √1000 = 31.6227766, √800 = 28.2842712, √ln2 = 0.8325546, s(−1000) = 0.
  // top 2 = experts 1, 2; normalised: 1/(1 + √0.8) = 0.5278640, √0.8/(1 + √0.8) = 0.4721360.
  auto op = topk(1, 4, 2, MoeScoring::sqrtsoftplus);
  op.norm_topk_prob = true;
  const auto ref = select_topk(op, {{0.0, 1000.0, 800.0, -1000.0}, {}, {}, {}});
  EXPECT_EQ(ref.ids, (Ids{1, 2}));
  EXPECT_NEAR(ref.keys[0], 0.8325546111576977, 1e-15);
  EXPECT_NEAR(ref.keys[1], 31.622776601683793, 1e-13);
  EXPECT_EQ(ref.keys[3], 0.0);
  EXPECT_NEAR(ref.weights[0], 0.5278640450004206, 1e-15);
  EXPECT_NEAR(ref.weights[1], 0.4721359549995794, 1e-15);
  EXPECT_EQ(oracle::routing_score(MoeScoring::sqrtsoftplus, 1e300), 1e150);
}

TEST(OracleRouting, HashLayersClampTableIdsAtTheRoutedCount) {
  // E = 4 routed + 2 zero experts; tid2eid [3 tokens, 2]. Row 0 reads token 1 → [5, 2] → [0, 2];
  // row 1 reads token 2 → [−1 (0xFFFFFFFF), 4] → [0, 0]. The zero experts' logits (9) are the
  // largest, yet never selected. s = σ: σ(0) = 0.5, σ(−ln3) = 1/(1 + 3) = 0.25.
  // Row 0 normalised: 0.5/0.75, 0.25/0.75 = 2/3, 1/3. Row 1: 0.5/1, 0.5/1.
  auto op = topk(2, 6, 2, MoeScoring::sigmoid, 4);
  op.hash = op.norm_topk_prob = true;
  op.dims.vocab = 3;
  const std::vector<double> row = {0.0, kLn3, -kLn3, 0.0, 9.0, 9.0};
  std::vector<double> l = row;
  l.insert(l.end(), row.begin(), row.end());
  TopKInputs in{l, {}, {1, 2}, {1, 3, 5, 2, -1, 4}};
  const auto ref = select_topk(op, in);
  EXPECT_EQ(ref.ids, (Ids{0, 2, 0, 0}));
  EXPECT_NEAR(ref.weights[0], 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(ref.weights[1], 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(ref.weights[2], 0.5, 1e-15);
  EXPECT_NEAR(ref.weights[3], 0.5, 1e-15);
  in.token_ids = {1, 3};  // token 3 is past the vocab
  EXPECT_THROW(select_topk(op, in), Error);
}

// Softmax + norm_topk_prob weighs the selected experts as e^(l_i − m_sel)/Σ_sel e^(l_j − m_sel),
// m_sel = the largest selected logit — the softmax over all E' renormalised, in the form whose
// largest term is 1. A hash layer's selection can sit far below the row maximum: [0, −120] with
// token 0 → expert 1 gives exactly 1 (× 2.5); the literal form would give e^-120/(1 + e^-120)
// renormalised — fine in FP64, 0/0 in FP32 — and [0, −1e30] would be 0/0 in FP64 too.
TEST(OracleRouting, HashSoftmaxRenormalisesExpertsFarBelowTheMax) {
  auto op = topk(1, 2, 1, MoeScoring::softmax);
  op.hash = op.norm_topk_prob = true;
  op.dims.vocab = 1;
  op.routed_scaling_factor = 2.5;
  for (double far : {-120.0, -1000.0, -1e30}) {
    const auto ref = select_topk(op, {{0.0, far}, {}, {0}, {1}});
    EXPECT_EQ(ref.ids, (Ids{1}));
    EXPECT_EQ(ref.weights[0], 2.5) << far;
  }
  // Two selected, [0, −120, −121] → experts 1, 2: 1/(1 + e^-1), e^-1/(1 + e^-1).
  auto two = topk(1, 3, 2, MoeScoring::softmax);
  two.hash = two.norm_topk_prob = true;
  two.dims.vocab = 1;
  auto ref = select_topk(two, {{0.0, -120.0, -121.0}, {}, {0}, {1, 2}});
  EXPECT_NEAR(ref.weights[0], 0.7310585786300049, 1e-15);
  EXPECT_NEAR(ref.weights[1], 0.2689414213699951, 1e-15);
  // The same set at a gap of 1e30: unchanged (only the selected logits' differences enter).
  ref = select_topk(two, {{1e30, 0.0, -1.0}, {}, {0}, {1, 2}});
  EXPECT_NEAR(ref.weights[0], 0.7310585786300049, 1e-15);
  // Without norm_topk_prob: the softmax over all E' logits, gathered (e^-120/(1 + ...)).
  two.norm_topk_prob = false;
  ref = select_topk(two, {{0.0, -120.0, -121.0}, {}, {0}, {1, 2}});
  EXPECT_NEAR(ref.weights[0], std::exp(-120.0), 1e-66);
  // NaN anywhere in the row: NaN weights; a selection of only −Inf logits: (−Inf) − (−Inf).
  two.norm_topk_prob = true;
  ref = select_topk(two, {{NAN, -120.0, -121.0}, {}, {0}, {1, 2}});
  for (double w : ref.weights) EXPECT_TRUE(std::isnan(w));
  ref = select_topk(two, {{0.0, -INFINITY, -INFINITY}, {}, {0}, {1, 2}});
  for (double w : ref.weights) EXPECT_TRUE(std::isnan(w));
  // A −Inf next to a finite selected logit weighs 0.
  ref = select_topk(two, {{0.0, -INFINITY, -3.0}, {}, {0}, {1, 2}});
  EXPECT_EQ(ref.weights[0], 0.0);
  EXPECT_EQ(ref.weights[1], 1.0);
}

// Top-k by logit selects the row maximum, so m_sel = max and the renormalised form equals the
// softmax over all E' followed by the renormalisation (4/7, 3/7 above) on random rows.
TEST(OracleRouting, RenormalisedSoftmaxEqualsSoftmaxThenRenormalisation) {
  auto op = topk(1, 9, 3, MoeScoring::softmax);
  op.norm_topk_prob = true;
  for (int r = 0; r < 20; ++r) {
    std::vector<double> l(9);
    for (int e = 0; e < 9; ++e) l[e] = 6.0 * std::sin(1.7 * (9 * r + e) + 0.4);
    const auto ref = select_topk(op, {l, {}, {}, {}});
    const double m = *std::max_element(l.begin(), l.end());
    double all = 0.0, sel = 0.0;
    for (double v : l) all += std::exp(v - m);
    for (uint32_t id : ref.ids) sel += std::exp(l[id] - m) / all;
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(ref.weights[j], std::exp(l[ref.ids[j]] - m) / all / sel, 1e-15);
  }
}

TEST(OracleRouting, ZeroExpertsAreOrdinaryColumnsOfTheSelection) {
  // E = 2 routed + 1 zero expert; logits ln1, ln2, ln3: softmax over all three = 1/6, 2/6, 3/6.
  // The zero expert (id 2) has the largest logit: selected first, weight 0.5; then expert 1, 1/3.
  auto op = topk(1, 3, 2, MoeScoring::softmax, 2);
  auto ref = select_topk(op, {{0.0, kLn2, kLn3}, {}, {}, {}});
  EXPECT_EQ(ref.ids, (Ids{2, 1}));
  EXPECT_NEAR(ref.weights[0], 0.5, 1e-15);
  EXPECT_NEAR(ref.weights[1], 1.0 / 3.0, 1e-15);
  op.dims.top_k = 1;
  op.norm_topk_prob = true;  // 0.5 / 0.5
  ref = select_topk(op, {{0.0, kLn2, kLn3}, {}, {}, {}});
  EXPECT_EQ(ref.ids, (Ids{2}));
  EXPECT_NEAR(ref.weights[0], 1.0, 1e-15);
}

TEST(OracleRouting, NanRanksBelowEveryNumberAndIsCounted) {
  // [NaN, −Inf, 1, NaN]: 1 > −Inf > NaN(0) > NaN(3).
  const std::vector<double> l = {NAN, -INFINITY, 1.0, NAN};
  auto soft = select_topk(topk(1, 4, 3, MoeScoring::softmax), {l, {}, {}, {}});
  EXPECT_EQ(soft.ids, (Ids{2, 1, 0}));
  EXPECT_EQ(soft.nan_keys, 2u);
  for (double w : soft.weights) EXPECT_TRUE(std::isnan(w));  // a NaN row has NaN softmax
  // sigmoid: keys [NaN, 0, σ(1) = 0.7310586, NaN]; weights s, NaN only where s is.
  auto sig = select_topk(topk(1, 4, 4, MoeScoring::sigmoid), {l, {}, {}, {}});
  EXPECT_EQ(sig.ids, (Ids{2, 1, 0, 3}));
  EXPECT_NEAR(sig.weights[0], 0.7310585786300049, 1e-15);
  EXPECT_EQ(sig.weights[1], 0.0);
  EXPECT_TRUE(std::isnan(sig.weights[2]));
  EXPECT_TRUE(oracle::ranks_before(-INFINITY, 5, NAN, 0));
  EXPECT_FALSE(oracle::ranks_before(NAN, 0, -INFINITY, 5));
  EXPECT_TRUE(oracle::ranks_before(NAN, 0, NAN, 1));
}

TEST(OracleRouting, ScoreKeyBoundsCarryTheLogitBoundIntoScoreSpace) {
  // u = 2^-24, γ_10 = 10u/(1 − 10u) = 5.9604648e-7.
  // sigmoid, l = 0, e = 1e-3: sup σ′ on [−1e-3, 1e-3] = σ′(0) = 1/4 → d = 2.5e-4; s = 0.5;
  //   eval = γ_10·0.50025 = 2.98172e-7; s + b rounding u·(0.50025 + 3e-7) = 2.98172e-8;
  //   total 2.5e-4 + 2.98172e-7 + 2.98172e-8 = 2.5032799e-4.
  // sigmoid, l = 10, e = 1: sup σ′ on [9, 11] = σ′(9) = σ(9)(1 − σ(9)) = 1.2337935e-4 = d;
  //   s = σ(10) = 0.9999546; eval = γ_10·1.0000780 = 5.96093e-7; u·(1.0000786) = 5.9609e-8;
  //   total 1.2403505e-4.
  auto op = topk(1, 2, 1, MoeScoring::sigmoid);
  const auto b = oracle::score_key_bounds(op, {0.0, 10.0}, {1e-3, 1.0}, {});
  EXPECT_NEAR(b[0], 2.5032799e-4, 1e-11);
  EXPECT_NEAR(b[1], 1.2403505e-4, 1e-11);
  // sqrtsoftplus, l = 0, e = 2: [−2, 2] holds the peak of (√softplus)′, 0.3190863 at
  // l* ≈ 0.92142 → d = 0.6381727; the rest is below 1e-6.
  op.scoring = MoeScoring::sqrtsoftplus;
  const auto q = oracle::score_key_bounds(op, {0.0, 0.0}, {2.0, 0.0}, {});
  EXPECT_NEAR(q[0], 0.6381727, 2e-6);
  EXPECT_NEAR(q[1], 0.0, 1e-6);      // e = 0 leaves the FP32 evaluation only: ~γ_10·0.83
  op.scoring = MoeScoring::softmax;  // softmax ranks logits: the logit bounds as they are
  EXPECT_EQ(oracle::score_key_bounds(op, {0.0, 10.0}, {1e-3, 1.0}, {}),
            (std::vector<double>{1e-3, 1.0}));
}

// FP32 underflow of the score functions is part of the key bound itself (score_underflow_slack):
// sigmoid(l ≤ −88.7) is 0 in FP32 (e^-l overflows) and between −103 and −87 the quotient is
// subnormal; sqrtsoftplus(l < −87) reads a subnormal e^l (or 0 below −103.9, where the true
// value e^(l/2) < 2^-74). The FP32 evaluation the CPU kernel uses (std::exp, std::log1p) stays
// within the bound with an exact logit (e = 0), where the relative γ_10·|s| alone does not.
TEST(OracleRouting, ScoreKeyBoundsCoverFp32Underflow) {
  EXPECT_EQ(oracle::score_underflow_slack(MoeScoring::sigmoid), 0x1p-126);
  EXPECT_EQ(oracle::score_underflow_slack(MoeScoring::sqrtsoftplus), 0x1p-74);
  EXPECT_EQ(oracle::score_underflow_slack(MoeScoring::softmax), 0.0);
  const std::vector<double> logits = {-60,  -80,  -87.5, -88.5, -89, -95,
                                      -100, -103, -104,  -110,  -200};
  const std::vector<double> zero(logits.size(), 0.0);
  for (MoeScoring scoring : {MoeScoring::sigmoid, MoeScoring::sqrtsoftplus}) {
    auto op = topk(1, logits.size(), 1, scoring);
    const auto b = oracle::score_key_bounds(op, logits, zero, {});
    for (size_t i = 0; i < logits.size(); ++i) {
      const auto l = static_cast<float>(logits[i]);
      const float fp32 = scoring == MoeScoring::sigmoid
                             ? 1.0f / (1.0f + std::exp(-l))
                             : std::sqrt(std::max(l, 0.0f) + std::log1p(std::exp(-std::fabs(l))));
      const double s = oracle::routing_score(scoring, logits[i]);
      EXPECT_LE(std::fabs(double{fp32} - s), b[i]) << logits[i];
      EXPECT_LE(b[i], 2.0 * oracle::score_underflow_slack(scoring) + 1e-6 * s) << logits[i];
    }
  }
  // sigmoid(−200) = e^-200 ≈ 1.4e-87 is 0 in FP32: the bound is the slack (2^-126), not γ_10·s.
  auto op = topk(1, 1, 1, MoeScoring::sigmoid);
  EXPECT_GE(oracle::score_key_bounds(op, {-200.0}, {0.0}, {})[0], 0x1p-126);
}

// routing.cpp's sup of (√softplus)′ clamps its peak into the interval: that needs the
// derivative to rise up to l* ≈ 0.92142 and fall after it. Differences of s on a grid stand
// in for the derivative.
TEST(OracleRouting, SqrtSoftplusDerivativeIsUnimodalAroundItsPeak) {
  const auto s = [](double l) { return oracle::routing_score(MoeScoring::sqrtsoftplus, l); };
  constexpr double h = 1e-3;
  double prev = s(-20.0 + h) - s(-20.0);
  for (double l = -20.0 + h; l < 40.0; l += h) {
    const double diff = s(l + h) - s(l);
    if (l + h < 0.92) {
      EXPECT_GE(diff, prev - 1e-15) << "l = " << l;
    }
    if (l > 0.923) {
      EXPECT_LE(diff, prev + 1e-15) << "l = " << l;
    }
    prev = diff;
  }
}

// keys [1, 1 + 2^-30, 0], every bound 2^-26: experts 0 and 1 differ by 2^-30 < 2^-25 (the sum
// of their bounds) — either may win; expert 2 is 1 below both, far past 2^-25.
TEST(OracleRouting, TieCheckAcceptsEitherOrderBelowTheBound) {
  const std::vector<double> keys = {1.0, 1.0 + 0x1p-30, 0.0};
  const std::vector<double> bounds(3, 0x1p-26);
  auto c = tie_stability_check(keys, bounds, 3, 1, {0});
  EXPECT_TRUE(c.passed());
  EXPECT_EQ(c.sets_differ, 1u);     // the oracle picks 1: measured, allowed
  EXPECT_EQ(c.cut_unresolved, 1u);  // cut gap 2^-30 ≤ 2^-25
  EXPECT_TRUE(tie_stability_check(keys, bounds, 3, 1, {1}).passed());
  EXPECT_TRUE(tie_stability_check(keys, bounds, 3, 2, {0, 1}).passed());
  EXPECT_TRUE(tie_stability_check(keys, bounds, 3, 2, {1, 0}).passed());
  c = tie_stability_check(keys, bounds, 3, 1, {2});  // 1 − 0 > 2^-25: expert 0 beats 2
  ASSERT_FALSE(c.passed());
  EXPECT_EQ(c.first_bad->reason, "set");
  EXPECT_EQ(c.first_bad->before, 0u);
  EXPECT_EQ(c.first_bad->after, 2u);
}

// keys [1, 1 + 2^-20, 0], bounds 2^-26: the gap 2^-20 exceeds 2^-25, so expert 1 must be
// selected first.
TEST(OracleRouting, TieCheckDemandsTheOracleAboveTheBound) {
  const std::vector<double> keys = {1.0, 1.0 + 0x1p-20, 0.0};
  const std::vector<double> bounds(3, 0x1p-26);
  EXPECT_TRUE(tie_stability_check(keys, bounds, 3, 1, {1}).passed());
  EXPECT_TRUE(tie_stability_check(keys, bounds, 3, 2, {1, 0}).passed());
  auto c = tie_stability_check(keys, bounds, 3, 1, {0});
  ASSERT_FALSE(c.passed());
  EXPECT_FALSE(c.rows[0].set_ok);
  EXPECT_EQ(c.first_bad->before, 1u);
  EXPECT_EQ(c.first_bad->after, 0u);
  EXPECT_EQ(c.first_bad->before_key, 1.0 + 0x1p-20);
  EXPECT_EQ(c.first_bad->after_bound, 0x1p-26);
  c = tie_stability_check(keys, bounds, 3, 2, {0, 1});  // right set, wrong order
  ASSERT_FALSE(c.passed());
  EXPECT_TRUE(c.rows[0].set_ok);
  EXPECT_FALSE(c.rows[0].order_ok);
  EXPECT_EQ(c.first_bad->reason, "order");
  // Two rows, the second one bad: the report names row 1.
  std::vector<double> two = keys;
  two.insert(two.end(), keys.begin(), keys.end());
  c = tie_stability_check(two, std::vector<double>(6, 0x1p-26), 3, 1, {1, 0});
  EXPECT_EQ(c.failures, 1u);
  EXPECT_EQ(c.first_bad->row, 1u);
}

TEST(OracleRouting, TieCheckWithZeroBoundsIsTheTotalOrder) {
  // The backend ranked these exact values: the tie at 2 goes to expert 0.
  const std::vector<double> keys = {2.0, 2.0, 0.0};
  const std::vector<double> zero(3, 0.0);
  EXPECT_TRUE(tie_stability_check(keys, zero, 3, 1, {0}).passed());
  EXPECT_FALSE(tie_stability_check(keys, zero, 3, 1, {1}).passed());
  // A number ranks before a NaN whatever the bounds.
  EXPECT_TRUE(tie_stability_check({NAN, 1.0}, {1.0, 1.0}, 2, 1, {1}).passed());
  EXPECT_FALSE(tie_stability_check({NAN, 1.0}, {1.0, 1.0}, 2, 1, {0}).passed());
  // Invalid ids fail.
  EXPECT_EQ(tie_stability_check(keys, zero, 3, 1, {3}).first_bad->reason, "id out of range");
  EXPECT_EQ(tie_stability_check(keys, zero, 3, 2, {0, 0}).first_bad->reason, "duplicate id");
}

// End to end on the bf16 path: two identical gate rows give exactly tied logits; the oracle
// takes the lower index, and a backend taking the other is within the bound.
TEST(OracleRouting, DuplicatedGateRowsTieAndEitherChoicePasses) {
  const auto r = router(1, 2, 3, RouterPrecision::bf16);
  RouterInputs in;
  in.x_bf16 = {bf(1.0f), bf(0.5f)};
  in.weight = {bf(0.25f), bf(1.0f), bf(0.25f), bf(1.0f), bf(-1.0f), bf(0.0f)};
  // logits 0.25 + 0.5 = 0.75, 0.75, −1.
  const auto logits = oracle::router_logits(r, in, Mode::exact);
  const auto bounds = oracle::router_logit_bounds(r, in, oracle::kUnitRoundoffDeviceGemm);
  const auto op = topk(1, 3, 1, MoeScoring::softmax);
  const auto ref = select_topk(op, {logits, {}, {}, {}});
  EXPECT_EQ(ref.ids, (Ids{0}));
  const auto keys = oracle::score_key_bounds(op, logits, bounds, {});
  EXPECT_TRUE(tie_stability_check(ref.keys, keys, 3, 1, {1}).passed());
  EXPECT_FALSE(tie_stability_check(ref.keys, keys, 3, 1, {2}).passed());
}

}  // namespace
}  // namespace bufferlab
