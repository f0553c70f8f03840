// MoE routing (docs/spec/numerics.md §2) on the backend under test (tests/support/
// backend_under_test.h): the router on every precision path against the FP64 oracle's logits
// of the same inputs (exact on integer data, the derived bound on rounded data) and kernel
// mutant B14; top-k ties, NaN keys, M-TIE, hash clamping, the weights of every scoring function
// against the oracle's select_topk on the very logits the kernel read, the launch limits; and
// RapidCheck router → top-k chains and top-k runs on stored logits judged by the routing
// judges (u = the backend's GEMM roundoff). On a backend other than the CPU, ids are also
// compared with the CPU's where the answer is provable: on the same stored logits softmax keys
// are the logits themselves (one total order: identical ids), and in a chain a row whose oracle
// set is separated from the rest by more than every expert's bound must give both backends
// that set.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend_under_test.h"
#include "bf16_shorthands.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/pool_placement.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"
#include "moe_kernel_support.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::bf;
using testing::fl;
using testing::KernelTest;
using testing::moe_config;
using testing::MutantScope;
using testing::Rig;
using testing::small_ints;

using Bits = std::vector<uint16_t>;
using Ids = std::vector<uint32_t>;
using Floats = std::vector<float>;

class MoeRoutingKernel : public KernelTest {
 protected:
  static double gemm_u() { return testing::gemm_roundoff_for(on_cpu()); }
};

// ---- router ----

struct RouterRun {
  Bits logits_bf16;
  Floats logits_f32;
  oracle::StoredLogits stored() const { return {logits_bf16, logits_f32}; }
};

RouterRun run_router(Backend& backend, MoeRouterOp op, const Bits& x_bf16, const Floats& x_f32,
                     const Bits& w, Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.weight});
  Rig rig(backend, {op.accesses()}, pool);
  const MutantScope scope(backend, mutant);
  if (op.precision == RouterPrecision::fp32_routing)
    rig.put(op.input, x_f32);
  else
    rig.put(op.input, x_bf16);
  rig.put(op.weight, w);
  backend.execute(rig.ws, op);
  RouterRun r;
  if (op.precision == RouterPrecision::bf16)
    r.logits_bf16 = rig.get<uint16_t>(op.logits);
  else
    r.logits_f32 = rig.get<float>(op.logits);
  return r;
}

// 70 rows × 300 × 130 experts crosses every tile edge; integer data keeps every FP32 sum
// exact (|Σ| ≤ 300·2·2), so each path must store exactly the oracle's faithful logit (the
// exact logit rounded as the path stores it).
TEST_F(MoeRoutingKernel, RouterEveryPathStoresTheRoundedExactLogit) {
  const ModelConfig c = moe_config(300, 128, 2, /*zero=*/2);
  const uint64_t rows = 70, E = 130;
  const Bits x = small_ints(rows * 300, 1, 2), w = small_ints(E * 300, 2, 2);
  Floats x32(x.size());
  for (size_t i = 0; i < x.size(); ++i) x32[i] = fl(x[i]) + 0.25f;  // not what the BF16 x holds
  const auto op_b = MoeRouterOp::make(c, rows, RouterPrecision::bf16);
  const auto op_g = MoeRouterOp::make(c, rows, RouterPrecision::fp32_gate);
  const auto op_r = MoeRouterOp::make(c, rows, RouterPrecision::fp32_routing);
  const auto want = oracle::router_logits(op_b, {x, {}, w}, oracle::Mode::faithful);
  const auto want_g = oracle::router_logits(op_g, {x, {}, w}, oracle::Mode::faithful);
  const auto want_r = oracle::router_logits(op_r, {{}, x32, w}, oracle::Mode::faithful);

  const RouterRun b = run_router(backend(), op_b, x, {}, w);
  const RouterRun g = run_router(backend(), op_g, x, {}, w);
  const RouterRun r = run_router(backend(), op_r, {}, x32, w);
  for (uint64_t i = 0; i < rows * E; ++i) {
    ASSERT_EQ(b.logits_bf16[i], bf(static_cast<float>(want[i]))) << i;
    ASSERT_EQ(g.logits_f32[i], static_cast<float>(want_g[i])) << i;
    ASSERT_EQ(r.logits_f32[i], static_cast<float>(want_r[i])) << i;
  }
}

// Rounded data: the FP32 result lies within γ_K·Σ|x·w| of the exact logit (any order):
// judge_router's bound, u = the backend's GEMM roundoff.
TEST_F(MoeRoutingKernel, RouterFp32LogitsWithinTheDotProductBound) {
  const ModelConfig c = moe_config(257, 5, 2);
  const uint64_t rows = 3, K = 257, E = 5;
  Floats x(rows * K);
  Bits w(E * K);
  for (uint64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 1.3f;
  for (uint64_t i = 0; i < w.size(); ++i) w[i] = bf(std::cos(0.11f * static_cast<float>(i)));
  const auto op = MoeRouterOp::make(c, rows, RouterPrecision::fp32_routing);
  const RouterRun r = run_router(backend(), op, {}, x, w);
  const auto report =
      oracle::judge_router(op, {{}, x, w}, r.stored(), gemm_u(), backend().name(), 0);
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);
}

// Random data on every path (h = 64, E' = 10, 5 rows), each within judge_router's bound.
TEST_F(MoeRoutingKernel, RouterEveryPathWithinItsDerivedBound) {
  const ModelConfig c = moe_config(64, 8, 3, /*zero=*/2);
  const uint64_t rows = 5;
  const Bits x = testing::seeded_bf16_values(rows * 64, 1, 1.0f);
  const Bits w = testing::seeded_bf16_values(10 * 64, 2, 1.0f);
  const Floats x32 = testing::seeded_values(rows * 64, 3, 1.0f);
  for (RouterPrecision p :
       {RouterPrecision::bf16, RouterPrecision::fp32_gate, RouterPrecision::fp32_routing}) {
    const auto op = MoeRouterOp::make(c, rows, p);
    const oracle::RouterInputs in{p == RouterPrecision::fp32_routing ? Bits{} : x,
                                  p == RouterPrecision::fp32_routing ? x32 : Floats{}, w};
    const RouterRun r = run_router(backend(), op, in.x_bf16, in.x_f32, w);
    const auto report = oracle::judge_router(op, in, r.stored(), gemm_u(), backend().name(), 0);
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
  }
  // B14: the FP32 path stores BF16-representable logits.
  const auto op = MoeRouterOp::make(c, rows, RouterPrecision::fp32_routing);
  for (float v : run_router(backend(), op, {}, x32, w, Mutant::B14).logits_f32)
    EXPECT_EQ(v, round_to_bf16(v));
}

// x = [1, 1], Wg rows [1, 3·2^-9], [0.5, −0.25]: l0 = 1.005859375 is FP32-exact, and rounds to
// 1.0078125 in BF16 (0.75 ULP above 1). B14 stores that BF16 value on the FP32 paths.
TEST_F(MoeRoutingKernel, RouterMutantB14RoundsFp32LogitsThroughBf16) {
  const ModelConfig c = moe_config(2, 2, 1);
  const Bits w = {bf(1.0f), bf(3.0f / 512.0f), bf(0.5f), bf(-0.25f)};
  const Bits x = {bf(1.0f), bf(1.0f)};
  const Floats x32 = {1.0f, 1.0f};
  for (RouterPrecision p : {RouterPrecision::fp32_gate, RouterPrecision::fp32_routing}) {
    const MoeRouterOp op = MoeRouterOp::make(c, 1, p);
    EXPECT_EQ(run_router(backend(), op, x, x32, w).logits_f32, (Floats{1.005859375f, 0.25f}));
    EXPECT_EQ(run_router(backend(), op, x, x32, w, Mutant::B14).logits_f32,
              (Floats{1.0078125f, 0.25f}));
  }
  const MoeRouterOp op = MoeRouterOp::make(c, 1, RouterPrecision::bf16);
  EXPECT_EQ(run_router(backend(), op, x, {}, w).logits_bf16, (Bits{bf(1.0078125f), bf(0.25f)}));
}

// ---- top-k ----

struct TopKCase {
  Floats logits;                 // [rows, E'] FP32 (gate_logits_f32), or
  Bits logits_bf16;              // BF16 (gate_logits)
  Floats bias;                   // [E'] when use_bias
  std::vector<uint32_t> tokens;  // hash
  std::vector<int32_t> table;    // hash
};

struct TopKRun {
  Ids ids;
  Floats weights;
  TopKDiagnostics diag;
};

TopKRun run_topk(Backend& backend, MoeTopKOp op, const TopKCase& in, Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.bias, &op.tid2eid});
  Rig rig(backend, {op.accesses()}, pool);
  const MutantScope scope(backend, mutant);
  if (op.logits.dtype == DType::f32)
    rig.put(op.logits, in.logits);
  else
    rig.put(op.logits, in.logits_bf16);
  if (op.use_bias) rig.put(op.bias, in.bias);
  if (op.hash) {
    rig.put(op.token_ids, in.tokens);
    rig.put(op.tid2eid, in.table);
  }
  TopKRun r;
  r.diag = backend.moe_topk(rig.ws, op);
  r.ids = rig.get<uint32_t>(op.ids);
  r.weights = rig.get<float>(op.weights);
  return r;
}

MoeTopKOp topk_op(uint64_t rows, uint64_t experts, uint64_t top_k, const char* scoring,
                  bool hash = false, bool logits_f32 = true) {
  ModelConfig c = moe_config(8, experts, top_k);
  c.scoring_func = scoring;
  return MoeTopKOp::make(c, rows, logits_f32, hash);
}

oracle::TopKReference oracle_topk(const MoeTopKOp& op, const TopKCase& in) {
  oracle::TopKInputs oi;
  for (float v : in.logits) oi.logits.push_back(v);
  for (uint16_t b : in.logits_bf16) oi.logits.push_back(fl(b));
  oi.bias = in.bias;
  oi.token_ids = in.tokens;
  oi.tid2eid = in.table;
  return oracle::select_topk(op, oi);
}

// The FP64 oracle on the very logits the kernel read: ids equal, weights within FP32 rounding
// (a few ULPs of every step: 1e-6 relative).
void expect_matches_oracle(const MoeTopKOp& op, const TopKCase& in, const TopKRun& r) {
  const oracle::TopKReference ref = oracle_topk(op, in);
  EXPECT_EQ(r.ids, ref.ids) << op.params();
  EXPECT_EQ(r.diag.nan_keys, ref.nan_keys) << op.params();
  ASSERT_EQ(r.weights.size(), ref.weights.size());
  for (size_t i = 0; i < r.weights.size(); ++i)
    EXPECT_NEAR(r.weights[i], ref.weights[i], 1e-6 * std::fabs(ref.weights[i]) + 1e-30)
        << op.params() << " weight " << i;
}

// Row [1, 3, 3, 0, 3, −1], top 2: the three 3s tie; the lower indices win, in index order.
// M-TIE sends exact ties to the HIGHER index: [4, 2].
TEST_F(MoeRoutingKernel, TopKExactTiesGoToTheLowerIndexAndMutantFlipsThem) {
  const MoeTopKOp op = topk_op(1, 6, 2, "softmax");
  const TopKCase in{{1, 3, 3, 0, 3, -1}, {}, {}, {}, {}};
  EXPECT_EQ(run_topk(backend(), op, in).ids, (Ids{1, 2}));
  EXPECT_EQ(run_topk(backend(), op, in, Mutant::M_TIE).ids, (Ids{4, 2}));
  expect_matches_oracle(op, in, run_topk(backend(), op, in));
}

// NaN keys rank after every number (−Inf included), among themselves by index, and are
// counted over all rows: row 0 [NaN, −Inf, 0.5, NaN] → 2, 1, 0; row 1 [NaN ×4] → 0, 1, 2.
// M-TIE leaves the NaN rule alone.
TEST_F(MoeRoutingKernel, TopKNanKeysRankLastAndAreCounted) {
  const float nan = std::nanf(""), inf = INFINITY;
  const MoeTopKOp op = topk_op(2, 4, 3, "softmax");
  const TopKCase in{{nan, -inf, 0.5f, nan, nan, nan, nan, nan}, {}, {}, {}, {}};
  for (Mutant m : {Mutant::none, Mutant::M_TIE}) {
    const TopKRun r = run_topk(backend(), op, in, m);
    EXPECT_EQ(r.ids, (Ids{2, 1, 0, 0, 1, 2}));
    EXPECT_EQ(r.diag.nan_keys, 6u);
    for (float w : r.weights) EXPECT_TRUE(std::isnan(w));  // softmax of a NaN row
  }
  // sigmoid: a NaN bias makes a NaN key too; the weight stays s (finite).
  MoeTopKOp sig = topk_op(1, 4, 2, "sigmoid");
  sig.use_bias = true;
  const TopKCase b{{2.0f, 1.0f, 0.0f, -1.0f}, {}, {nan, 0.0f, 0.0f, 0.0f}, {}, {}};
  const TopKRun r = run_topk(backend(), sig, b);
  EXPECT_EQ(r.ids, (Ids{1, 2}));
  EXPECT_EQ(r.diag.nan_keys, 1u);
  expect_matches_oracle(sig, b, r);
}

// E' = 10 (8 routed + 2 zero), top 3, FP32 logits. Row 0: all equal → 0, 1, 2 (M-TIE: 9, 8, 7).
// Row 1: NaN at 0 and 4, the others equal → 1, 2, 3; its softmax weights are NaN.
TEST_F(MoeRoutingKernel, TopKAllEqualRowAndNanRowAndTheTieMutant) {
  ModelConfig c = moe_config(8, 8, 3, /*zero=*/2);
  const MoeTopKOp op = MoeTopKOp::make(c, 2, /*logits_f32=*/true, /*hash=*/false);
  TopKCase in;
  in.logits.assign(2 * 10, 0.5f);
  in.logits[10 + 0] = in.logits[10 + 4] = NAN;
  const TopKRun r = run_topk(backend(), op, in);
  EXPECT_EQ(r.diag.nan_keys, 2u);
  EXPECT_EQ(r.ids, (Ids{0, 1, 2, 1, 2, 3}));
  EXPECT_TRUE(std::isnan(r.weights[3]));  // a softmax row holding a NaN is NaN everywhere
  EXPECT_EQ(r.ids, oracle_topk(op, in).ids);
  const TopKRun m = run_topk(backend(), op, in, Mutant::M_TIE);
  EXPECT_EQ(Ids(m.ids.begin(), m.ids.begin() + 3), (Ids{9, 8, 7}));
}

// softmax (norm + scale 2.5), over BF16 and FP32 logits; E' = 300 > a tile, 37 rows.
TEST_F(MoeRoutingKernel, TopKSoftmaxWeightsMatchTheOracle) {
  for (bool f32 : {true, false}) {
    MoeTopKOp op = topk_op(37, 300, 8, "softmax", false, f32);
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    for (uint64_t i = 0; i < 37 * 300; ++i) {
      const float v = 4.0f * std::sin(0.731f * static_cast<float>(i) + 0.3f);
      if (f32)
        in.logits.push_back(v);
      else
        in.logits_bf16.push_back(bf(v));
    }
    expect_matches_oracle(op, in, run_topk(backend(), op, in));
    op.norm_topk_prob = false;
    expect_matches_oracle(op, in, run_topk(backend(), op, in));
  }
}

// sigmoid and sqrtsoftplus with bias, norm and scale; logits up to ±100 (softplus(100) in FP32
// overflows unless computed stably: √100 = 10).
TEST_F(MoeRoutingKernel, TopKSigmoidAndSqrtSoftplusWeightsMatchTheOracle) {
  for (const char* scoring : {"sigmoid", "sqrtsoftplus"}) {
    MoeTopKOp op = topk_op(9, 64, 6, scoring);
    op.use_bias = true;
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    for (uint64_t i = 0; i < 9 * 64; ++i)
      in.logits.push_back((i % 17 == 0 ? 25.0f : 3.0f) * std::sin(1.37f * static_cast<float>(i)));
    in.logits[5] = 100.0f;
    in.logits[70] = -100.0f;
    for (uint64_t e = 0; e < 64; ++e) in.bias.push_back(0.01f * static_cast<float>(e % 7));
    const TopKRun r = run_topk(backend(), op, in);
    expect_matches_oracle(op, in, r);
    if (std::string(scoring) == "sqrtsoftplus") {
      EXPECT_EQ(r.ids[0], 5u);  // key √100 + bias beats everything in row 0
      for (float w : r.weights) EXPECT_TRUE(std::isfinite(w));
    }
    op.norm_topk_prob = false;
    expect_matches_oracle(op, in, run_topk(backend(), op, in));
  }
}

// Well-separated logits (multiples of 1/8, BF16-exact) on a 5-row, E' = 10 config: softmax on
// BF16 logits and sigmoid with bias on FP32 logits select the oracle's ids, no NaN keys, and
// pass judge_topk.
TEST_F(MoeRoutingKernel, TopKSoftmaxAndSigmoidWithBiasPassTheJudge) {
  ModelConfig c = moe_config(64, 8, 3, /*zero=*/2);
  c.routed_scaling_factor = 1.5;
  c.norm_topk_prob = true;
  TopKCase in;
  for (uint64_t i = 0; i < 5 * 10; ++i) {
    const float v = static_cast<float>(static_cast<int>((i * 7919) % 61) - 30) / 8.0f;
    in.logits.push_back(v);
    in.logits_bf16.push_back(bf(v));
  }
  for (uint64_t e = 0; e < 10; ++e) in.bias.push_back(0.01f * static_cast<float>(e));
  MoeTopKOp soft = MoeTopKOp::make(c, 5, /*logits_f32=*/false, /*hash=*/false);
  MoeTopKOp sig = MoeTopKOp::make(c, 5, /*logits_f32=*/true, /*hash=*/false);
  sig.scoring = MoeScoring::sigmoid;
  sig.use_bias = true;
  for (const MoeTopKOp* op : {&soft, &sig}) {
    oracle::StoredLogits l;  // the op reads one of the two copies
    TopKCase one = in;
    if (op->logits.dtype == DType::f32) {
      l.f32 = in.logits;
      one.logits_bf16.clear();
    } else {
      l.bf16 = in.logits_bf16;
      one.logits.clear();
    }
    const TopKRun r = run_topk(backend(), *op, one);
    EXPECT_EQ(r.diag.nan_keys, 0u);
    EXPECT_EQ(r.ids, oracle_topk(*op, one).ids) << op->params();
    const auto v = oracle::judge_topk(*op, l, {in.bias, {}, {}}, {r.ids, r.weights, r.diag},
                                      backend().name(), 0);
    EXPECT_TRUE(v.passed()) << oracle::format_verdict(v);
  }
}

// Hash: tid2eid read as unsigned, ids ≥ routed (8) clamped to 0 — 9, 200 and −1 become 0;
// the weights come from the scoring of the selected logits. A token id ≥ vocab is an Error.
TEST_F(MoeRoutingKernel, TopKHashClampsIdsAndRefusesTokensPastVocab) {
  for (const char* scoring : {"softmax", "sigmoid"}) {
    MoeTopKOp op = topk_op(2, 8, 3, scoring, /*hash=*/true);
    op.norm_topk_prob = true;
    TopKCase in;
    for (uint64_t i = 0; i < 16; ++i) in.logits.push_back(0.25f * static_cast<float>(i % 5));
    in.tokens = {3, 15};
    in.table.assign(16 * 3, 1);
    in.table[3 * 3 + 0] = 7;
    in.table[3 * 3 + 1] = 9;
    in.table[3 * 3 + 2] = 5;
    in.table[15 * 3 + 0] = 200;
    in.table[15 * 3 + 1] = -1;
    in.table[15 * 3 + 2] = 2;
    const TopKRun r = run_topk(backend(), op, in);
    EXPECT_EQ(r.ids, (Ids{7, 0, 5, 0, 0, 2}));
    expect_matches_oracle(op, in, r);
    in.tokens[1] = 16;
    EXPECT_THROW(run_topk(backend(), op, in), Error);
  }
}

// Hash on 5 rows of BF16 logits, E' = 10 (8 routed), a table with entries −1..9 (≥ 8 and −1
// clamp to 0): the ids are the oracle's (the clamped table); token 100 ≥ vocab is an Error.
TEST_F(MoeRoutingKernel, TopKHashTableOverManyTokens) {
  ModelConfig c = moe_config(64, 8, 3, /*zero=*/2);
  c.vocab_size = 100;
  c.norm_topk_prob = true;
  const MoeTopKOp op = MoeTopKOp::make(c, 5, /*logits_f32=*/false, /*hash=*/true);
  TopKCase in;
  for (uint64_t i = 0; i < 5 * 10; ++i) in.logits_bf16.push_back(bf(static_cast<float>(i % 5) / 4));
  for (uint64_t i = 0; i < 100 * 3; ++i) in.table.push_back(static_cast<int32_t>(i % 11) - 1);
  in.tokens = {0, 7, 42, 99, 13};
  EXPECT_EQ(run_topk(backend(), op, in).ids, oracle_topk(op, in).ids);
  in.tokens = {0, 7, 100, 99, 13};
  EXPECT_THROW(run_topk(backend(), op, in), Error);
}

// Hash + softmax + norm_topk_prob with the selected experts far below the row maximum
// (docs/findings.md, "softmax renormalisation of hash-selected experts"). Row 0 [0, −120],
// token 0 → expert 1, top_k 1: the literal softmax-then-renormalise gives e^-120 = 0 in FP32
// and 0/0 = NaN; the renormalised form e^(l − m_sel)/Σ_sel is e⁰/e⁰ = 1 exactly, × 2.5.
// Row 1 [0, −1e30]: the same in FP64 too. Row 2 [0, −120, −121], experts 1 and 2: 1/(1 + e^-1)
// and e^-1/(1 + e^-1) (the gap to the row max does not enter).
TEST_F(MoeRoutingKernel, TopKHashSoftmaxRenormalisesExpertsFarBelowTheMax) {
  for (bool f32 : {true, false}) {
    MoeTopKOp op = topk_op(1, 2, 1, "softmax", /*hash=*/true, f32);
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    in.tokens = {0};
    in.table.assign(16, 0);
    in.table[0] = 1;
    const Floats row = {0.0f, -120.0f};
    if (f32)
      in.logits = row;
    else
      for (float v : row) in.logits_bf16.push_back(bf(v));
    TopKRun r = run_topk(backend(), op, in);
    EXPECT_EQ(r.ids, (Ids{1}));
    EXPECT_EQ(r.weights[0], 2.5f) << "f32 logits " << f32;
    expect_matches_oracle(op, in, r);
    if (f32) {
      in.logits = {0.0f, -1e30f};
      r = run_topk(backend(), op, in);
      EXPECT_EQ(r.weights[0], 2.5f);
      expect_matches_oracle(op, in, r);
    }
  }
  MoeTopKOp op = topk_op(1, 3, 2, "softmax", /*hash=*/true);
  op.norm_topk_prob = true;
  TopKCase in{{0.0f, -120.0f, -121.0f}, {}, {}, {0}, std::vector<int32_t>(32, 0)};
  in.table[0] = 1;
  in.table[1] = 2;
  const TopKRun r = run_topk(backend(), op, in);
  EXPECT_EQ(r.ids, (Ids{1, 2}));
  EXPECT_NEAR(r.weights[0], 0.7310585786300049, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.2689414213699951, 1e-7);
  expect_matches_oracle(op, in, r);
  // Without norm_topk_prob the weight stays the softmax over all E' logits: e^-120 underflows
  // to 0 in FP32 (a defined result); no NaN.
  op.norm_topk_prob = false;
  for (float w : run_topk(backend(), op, in).weights) EXPECT_EQ(w, 0.0f);
  // A NaN anywhere in the row still makes every softmax weight NaN.
  op.norm_topk_prob = true;
  in.logits[0] = std::nanf("");
  for (float w : run_topk(backend(), op, in).weights) EXPECT_TRUE(std::isnan(w));
}

// One row of E' logits: E' > kMaxScoredExperts (1024), top_k > kMaxTopK (32) and top_k > E'
// are refused before any read, on one row and on two; the limits themselves run.
// ---- group-limited routing (docs/spec/numerics.md §2) ----

MoeTopKOp grouped_op(uint64_t rows, uint64_t groups, uint64_t size, uint64_t kept, uint64_t top_k) {
  ModelConfig c = moe_config(8, groups * size, top_k);
  c.scoring_func = "softmax";  // keys = the logits: exact arithmetic on small integers
  c.router_groups = groups;
  c.router_topk_groups = kept;
  return MoeTopKOp::make(c, rows, true, false);
}

// Four groups of two, keep 2, top 2. Row 0: group sums 10, 11, 11.5, 2 keep groups 2 and 1, so
// expert 0 (the row's best, 10) is out and the ids are [4, 2]; ranking groups by their single
// best key (mutant M-GROUP) keeps groups 0 and 2: [0, 4], the ungrouped answer.
TEST_F(MoeRoutingKernel, TopKGroupsRankByTheirTwoBestAndTheMutantByTheBestAlone) {
  const MoeTopKOp op = grouped_op(1, 4, 2, 2, 2);
  const TopKCase in{{10, 0, 6, 5, 7, 4.5f, 1, 1}, {}, {}, {}, {}};
  EXPECT_EQ(run_topk(backend(), op, in).ids, (Ids{4, 2}));
  EXPECT_EQ(run_topk(backend(), op, in, Mutant::M_GROUP).ids, (Ids{0, 4}));
  expect_matches_oracle(op, in, run_topk(backend(), op, in));
}

// Exactly tied group scores go to the lower group index: groups 1 and 2 both sum to 11, one is
// kept — group 1: [2, 3]. Groups are consecutive: 3 groups of 4 over 12 experts, keep 1.
TEST_F(MoeRoutingKernel, TopKTiedGroupScoresKeepTheLowerGroup) {
  const MoeTopKOp op = grouped_op(2, 4, 2, 1, 2);
  const TopKCase in{{3, 3, 6, 5, 5, 6, 0, 0, /* row 1 */ 1, 1, 1, 1, 1, 1, 1, 1}, {}, {}, {}, {}};
  const TopKRun r = run_topk(backend(), op, in);
  EXPECT_EQ(r.ids, (Ids{2, 3, 0, 1}));
  expect_matches_oracle(op, in, r);
  const MoeTopKOp wide = grouped_op(1, 3, 4, 1, 3);
  const TopKCase w{{0, 9, 0, 9, 9, 0, 9, 0, 5, 5, 5, 5}, {}, {}, {}, {}};
  EXPECT_EQ(run_topk(backend(), wide, w).ids, (Ids{1, 3, 0}));
  expect_matches_oracle(wide, w, run_topk(backend(), wide, w));
}

// Group fields that do not fit the shape are refused with an Error naming the problem.
TEST_F(MoeRoutingKernel, TopKRefusesGroupsThatDoNotFit) {
  const TopKCase in{{1, 2, 3, 4, 5, 6}, {}, {}, {}, {}};
  const auto refuses = [&](uint64_t groups, uint64_t kept, uint64_t top_k, const char* why) {
    MoeTopKOp op = topk_op(1, 6, top_k, "softmax");
    op.groups = groups;
    op.topk_groups = kept;
    try {
      run_topk(backend(), op, in);
      ADD_FAILURE() << groups << "/" << kept << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refuses(4, 1, 1, "do not divide");
  refuses(6, 1, 1, "groups of 1 expert");
  refuses(3, 4, 1, "kept groups 4 not in [1, 3]");
  refuses(3, 1, 3, "top_k 3 exceeds the 2 experts of the kept groups");
}

TEST_F(MoeRoutingKernel, TopKRefusesShapesBeyondItsLimits) {
  auto run = [](uint64_t rows, uint64_t experts, uint64_t top_k) {
    const MoeTopKOp op = topk_op(rows, experts, top_k, "softmax");
    TopKCase in;
    for (uint64_t i = 0; i < rows * experts; ++i)
      in.logits.push_back(static_cast<float>(i % experts % 13));
    return run_topk(backend(), op, in);
  };
  EXPECT_THROW(run(1, kMaxScoredExperts + 1, 2), Error);
  EXPECT_THROW(run(1, 64, kMaxTopK + 1), Error);
  EXPECT_THROW(run(1, 4, 5), Error);
  EXPECT_THROW(run(2, kMaxScoredExperts + 1, 8), Error);
  EXPECT_THROW(run(2, 64, kMaxTopK + 1), Error);
  const TopKRun r = run(1, kMaxScoredExperts, kMaxTopK);  // the limits themselves run
  EXPECT_EQ(r.ids[0], 12u);
  EXPECT_EQ(r.ids[1], 25u);
}

// ---- router → top-k properties ----

struct Prepared {
  oracle::RoutingOps ops;
  oracle::RouterInputs router_in;
  oracle::TopKHostInputs topk_in;
};

Prepared prepare(const gen::RoutingCase& c) {
  Prepared p{oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash), {}, {}};
  const gen::RoutingTensors t = gen::routing_tensors(c);
  p.router_in = {t.x_bf16, t.x_f32, t.weight};
  p.topk_in = {t.bias, t.token_ids, t.tid2eid};
  return p;
}

oracle::StoredLogits stored_logits(const gen::RoutingCase& c, bool nonfinite) {
  oracle::StoredLogits l;
  for (float v : gen::topk_logits(c, nonfinite)) {
    if (c.precision == RouterPrecision::bf16)
      l.bf16.push_back(f32_to_bf16_bits(v));
    else
      l.f32.push_back(v);
  }
  return l;
}

oracle::ChainOutputs run_chain(Backend& b, const Prepared& p) {
  const Workspace ws = b.allocate(oracle::routing_footprint_layout(p.ops), p.ops.pool_bytes);
  return oracle::run_routing_chain(b, ws, p.ops, p.router_in, p.topk_in);
}

oracle::TopKOutputs run_stored_topk(Backend& b, const Prepared& p, const oracle::StoredLogits& l) {
  const Workspace ws = b.allocate(oracle::routing_footprint_layout(p.ops), p.ops.pool_bytes);
  return oracle::run_topk(b, ws, p.ops.topk, l, p.topk_in);
}

// Rows whose oracle set is provable under the bounds of GEMM roundoff u: the lowest selected
// key minus its bound exceeds the highest unselected key plus its bound.
std::vector<bool> provable_sets(const Prepared& p, double u) {
  const auto& op = p.ops.topk;
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const auto exact = oracle::router_logits(p.ops.router, p.router_in, oracle::Mode::exact);
  const auto ref = oracle::select_topk(op, {exact, p.topk_in.bias, {}, {}});
  const auto bounds = oracle::score_key_bounds(
      op, exact, oracle::router_logit_bounds(p.ops.router, p.router_in, u), p.topk_in.bias);
  std::vector<bool> out(rows, false);
  for (uint64_t t = 0; t < rows && top_k < experts; ++t) {
    double low_sel = INFINITY, high_rest = -INFINITY;
    const auto first = ref.ids.begin() + t * top_k, last = first + top_k;
    for (uint64_t e = 0; e < experts; ++e) {
      const double k = ref.keys[t * experts + e], b = bounds[t * experts + e];
      if (std::find(first, last, e) != last)
        low_sel = std::min(low_sel, k - b);
      else
        high_rest = std::max(high_rest, k + b);
    }
    out[t] = low_sel > high_rest;
  }
  return out;
}

TEST_F(MoeRoutingKernel, ChainsAreTieStableAndAgreeWithTheCpuWhereProvable) {
  uint64_t provable_rows = 0, rows = 0;
  const bool ok = rc::check("routing chain: tie stability, = cpu ids where provable", [&] {
    const gen::RoutingCase c = *gen::routing_case(gen::RoutingRanges{});
    RC_LOG() << c.describe() << "\n";
    const Prepared p = prepare(c);
    const auto got = run_chain(backend(), p);
    const auto v = oracle::judge_routing_chain(p.ops, p.router_in, p.topk_in, got, gemm_u(),
                                               backend().name(), c.seed);
    RC_LOG() << oracle::format_verdict(v);
    RC_ASSERT(v.passed());
    if (c.hash || on_cpu()) return;
    const auto cpu = run_chain(testing::cpu_backend(), p);
    const uint64_t k = p.ops.topk.shape().top_k;
    const std::vector<bool> provable = provable_sets(p, gemm_u());
    for (uint64_t t = 0; t < c.rows; ++t) {
      ++rows;
      if (!provable[t]) continue;
      ++provable_rows;
      RC_ASSERT(std::is_permutation(got.topk.ids.begin() + t * k,
                                    got.topk.ids.begin() + (t + 1) * k,
                                    cpu.topk.ids.begin() + t * k));
    }
  });
  if (!on_cpu())
    std::printf("%s vs cpu ids: %llu of %llu rows provable and equal as sets\n",
                backend().name().c_str(), static_cast<unsigned long long>(provable_rows),
                static_cast<unsigned long long>(rows));
  EXPECT_TRUE(ok);
}

// Grouped chains with adversarial group scores (group_ties: whole groups copied, reversed or
// moved below a BF16 ULP): the judge passes (group step included), and — the group-step
// property of docs/spec/numerics.md §2, checked here apart from the judge — in every row where
// each oracle-kept group provably outranks every other group (group scores and bounds of the
// exact logits of the stored inputs), the backend selects only from the oracle's kept groups.
TEST_F(MoeRoutingKernel, GroupedChainsKeepTheOraclesGroupsWhereProvable) {
  uint64_t resolved = 0, rows = 0;
  const bool ok = rc::check("grouped routing chain: kept groups where provable", [&] {
    gen::RoutingCase c = *gen::routing_case(gen::RoutingRanges{});
    c.hash = false;
    gen::draw_router_groups(c, kMaxScoredExperts, kMaxTopK);
    const uint64_t groups = c.config.router_groups, kept = c.config.router_topk_groups;
    const uint64_t size = c.config.num_experts / groups, top_k = c.config.num_experts_per_tok;
    c.pattern = *rc::gen::element(gen::RoutingPattern::group_ties, gen::RoutingPattern::group_ties,
                                  gen::RoutingPattern::near_ties, gen::RoutingPattern::random);
    c.config.hidden_size = std::min<uint64_t>(c.config.hidden_size, 256);
    if (c.pattern == gen::RoutingPattern::near_ties)
      c.config.hidden_size = std::max<uint64_t>(c.config.hidden_size, 3);
    RC_LOG() << c.describe() << "\n";
    const Prepared p = prepare(c);
    const auto got = run_chain(backend(), p);
    const auto v = oracle::judge_routing_chain(p.ops, p.router_in, p.topk_in, got, gemm_u(),
                                               backend().name(), c.seed);
    RC_LOG() << oracle::format_verdict(v);
    RC_ASSERT(v.passed());
    const MoeTopKOp& op = p.ops.topk;
    const auto exact = oracle::router_logits(p.ops.router, p.router_in, oracle::Mode::exact);
    const auto ref = oracle::select_topk(op, {exact, p.topk_in.bias, {}, {}});
    const auto key_bounds = oracle::score_key_bounds(
        op, exact, oracle::router_logit_bounds(p.ops.router, p.router_in, gemm_u()),
        p.topk_in.bias);
    const auto score = oracle::group_scores(op, ref.keys);
    const auto bound = oracle::group_score_bounds(op, ref.keys, key_bounds);
    for (uint64_t t = 0; t < c.rows; ++t) {
      ++rows;
      const auto first = ref.kept_groups.begin() + static_cast<std::ptrdiff_t>(t * kept);
      const auto last = first + static_cast<std::ptrdiff_t>(kept);
      bool provable = true;
      for (uint64_t a = 0; a < groups && provable; ++a) {
        if (std::find(first, last, a) == last) continue;
        for (uint64_t b = 0; b < groups && provable; ++b)
          if (std::find(first, last, b) == last)
            provable = score[t * groups + a] - score[t * groups + b] >
                       bound[t * groups + a] + bound[t * groups + b];
      }
      if (!provable) continue;
      ++resolved;
      for (uint64_t j = 0; j < top_k; ++j)
        RC_ASSERT(std::find(first, last, got.topk.ids[t * top_k + j] / size) != last);
    }
  });
  std::printf("%s: grouped chains, %llu of %llu rows with a provable group cut\n",
              backend().name().c_str(), static_cast<unsigned long long>(resolved),
              static_cast<unsigned long long>(rows));
  EXPECT_TRUE(ok);
}

// M-GROUP (groups ranked by their single best key) on DeepSeek-V3's routing shape (256 experts,
// 8 groups, keep 4, top 8, sigmoid + bias): the group step's check fails, naming a group.
TEST_F(MoeRoutingKernel, MutantGroupIsCaughtByTheGroupStep) {
  const gen::RoutingCase c = gen::deepseek_v3_routing(32, 64, 16);
  const Prepared p = prepare(c);
  const auto judge = [&](Mutant m) {
    const MutantScope scope(backend(), m);
    return oracle::judge_routing_chain(p.ops, p.router_in, p.topk_in, run_chain(backend(), p),
                                       gemm_u(), backend().name(), c.seed);
  };
  const auto good = judge(Mutant::none);
  EXPECT_TRUE(good.passed()) << oracle::format_verdict(good);
  const auto bad = judge(Mutant::M_GROUP);
  ASSERT_TRUE(bad.ties && bad.ties->first_group_bad) << oracle::format_verdict(bad);
  EXPECT_GT(bad.ties->group_failures, 0u);
  EXPECT_EQ(bad.ties->first_group_bad->reason.rfind("group: ", 0), 0u);
  std::printf("M-GROUP on %s: %llu of %llu rows fail the group step: %s\n",
              backend().name().c_str(), static_cast<unsigned long long>(bad.ties->group_failures),
              static_cast<unsigned long long>(c.rows), bad.ties->first_group_bad->reason.c_str());
}

TEST_F(MoeRoutingKernel, TopKOnStoredLogitsWithTiesNanAndInf) {
  const bool ok = rc::check("top-k on stored logits", [&] {
    const gen::RoutingCase c = *gen::routing_case(gen::RoutingRanges{});
    const bool nonfinite = *rc::gen::arbitrary<bool>();
    RC_LOG() << c.describe() << " nonfinite=" << nonfinite << "\n";
    const Prepared p = prepare(c);
    const oracle::StoredLogits l = stored_logits(c, nonfinite);
    const auto got = run_stored_topk(backend(), p, l);
    const auto v = oracle::judge_topk(p.ops.topk, l, p.topk_in, got, backend().name(), c.seed);
    RC_LOG() << oracle::format_verdict(v);
    RC_ASSERT(v.passed());
    // Softmax ranks the stored values themselves: one total order, identical ids.
    if (!on_cpu() && (p.ops.topk.scoring == MoeScoring::softmax || c.hash))
      RC_ASSERT(got.ids == run_stored_topk(testing::cpu_backend(), p, l).ids);
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace bufferlab
