// The routing judges (oracle/routing_judge.h) and generators (properties/routing_generators.h)
// without a backend: a plain FP32 "kernel" written here (sequential dot products, max-
// subtracted softmax, expf / log1pf scores) stands in for one, so the judges are shown to pass
// a correct FP32 computation and to fail planted faults — a BF16 store on the FP32 path (B14),
// exact ties to the higher index (M-TIE), a weight off by more than its bound, a poisoned
// element, a wrong NaN count, a hash id that is not the table's.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"

namespace bufferlab {
namespace {

using gen::RoutingCase;
using gen::RoutingPattern;
using oracle::RouterInputs;
using oracle::StoredLogits;
using oracle::TopKHostInputs;
using oracle::TopKOutputs;

// ---- A plain FP32 routing computation (the stand-in kernel) ----

StoredLogits fp32_router(const MoeRouterOp& op, const RouterInputs& in, bool store_bf16) {
  const auto [rows, h, experts] = op.shape();
  StoredLogits out;
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t e = 0; e < experts; ++e) {
      float acc = 0.0f;
      for (uint64_t k = 0; k < h; ++k) {
        const float x = op.precision == RouterPrecision::fp32_routing
                            ? in.x_f32[t * h + k]
                            : bf16_bits_to_f32(in.x_bf16[t * h + k]);
        acc += x * bf16_bits_to_f32(in.weight[e * h + k]);
      }
      if (op.precision == RouterPrecision::bf16)
        out.bf16.push_back(f32_to_bf16_bits(acc));
      else
        out.f32.push_back(store_bf16 ? round_to_bf16(acc) : acc);
    }
  return out;
}

float score_f32(MoeScoring s, float l) {
  if (s == MoeScoring::sigmoid) return 1.0f / (1.0f + std::exp(-l));
  if (s == MoeScoring::sqrtsoftplus)
    return std::sqrt(std::max(l, 0.0f) + std::log1p(std::exp(-std::fabs(l))));
  return l;
}

// `literal_softmax_norm`: softmax + norm_topk_prob as the softmax over all E' then divided by
// the selected sum (0/0 when the selected weights underflow) instead of routing.h's form.
TopKOutputs fp32_topk(const MoeTopKOp& op, const StoredLogits& stored, const TopKHostInputs& in,
                      bool ties_high, bool literal_softmax_norm = false) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::vector<double> l64 = stored.values();
  TopKOutputs out;
  for (uint64_t t = 0; t < rows; ++t) {
    std::vector<float> l(l64.begin() + t * experts, l64.begin() + (t + 1) * experts);
    std::vector<float> key(experts), s(experts);
    for (uint64_t e = 0; e < experts; ++e) {
      s[e] = score_f32(op.scoring, l[e]);
      key[e] = op.scoring == MoeScoring::softmax ? l[e] : s[e] + (op.use_bias ? in.bias[e] : 0.f);
      out.diagnostics.nan_keys += std::isnan(key[e]) ? 1 : 0;
    }
    std::vector<uint32_t> ids(experts);
    std::iota(ids.begin(), ids.end(), 0u);
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t i, uint32_t j) {
      if (ties_high && key[i] == key[j]) return i > j;
      return oracle::ranks_before(key[i], i, key[j], j);
    });
    ids.resize(top_k);
    if (op.hash)
      for (uint64_t j = 0; j < top_k; ++j) {
        const auto id = static_cast<uint32_t>(in.tid2eid[in.token_ids[t] * top_k + j]);
        ids[j] = id >= routed ? 0u : id;
      }
    const bool renormalised = op.scoring == MoeScoring::softmax && op.norm_topk_prob;
    if (renormalised && !literal_softmax_norm) {
      // e^(l_i − m_sel) over the selected (a NaN in the row: NaN everywhere).
      const bool row_nan = std::any_of(l.begin(), l.end(), [](float v) { return std::isnan(v); });
      float m_sel = -INFINITY;
      for (uint32_t id : ids) m_sel = std::max(m_sel, l[id]);
      for (uint32_t id : ids) s[id] = row_nan ? NAN : std::exp(l[id] - m_sel);
    } else if (op.scoring == MoeScoring::softmax) {
      const float m = *std::max_element(l.begin(), l.end());
      float sum = 0.0f;
      for (uint64_t e = 0; e < experts; ++e) sum += s[e] = std::exp(l[e] - m);
      for (float& v : s) v /= sum;
    }
    std::vector<float> w;
    float sum = 0.0f;
    for (uint32_t id : ids) sum += s[id];
    for (uint32_t id : ids) {
      float v = s[id];
      if (op.norm_topk_prob && (op.scoring == MoeScoring::softmax || sum > 1e-20f)) v /= sum;
      w.push_back(v * static_cast<float>(op.routed_scaling_factor));
    }
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.weights.insert(out.weights.end(), w.begin(), w.end());
  }
  return out;
}

struct RoutingRun {
  RoutingCase c;
  oracle::RoutingOps ops;
  RouterInputs router_in;
  TopKHostInputs topk_in;
};

RoutingRun prepare(const RoutingCase& c) {
  RoutingRun r{c, oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash), {}, {}};
  const gen::RoutingTensors t = gen::routing_tensors(c);
  r.router_in = {t.x_bf16, t.x_f32, t.weight};
  r.topk_in = {t.bias, t.token_ids, t.tid2eid};
  return r;
}

RoutingCase near_tie_case(RouterPrecision p, const char* scoring, uint64_t seed) {
  RoutingCase c;
  c.config.hidden_size = 8;
  c.config.num_experts = 16;
  c.config.num_experts_per_tok = 4;
  c.config.scoring_func = scoring;
  c.config.vocab_size = 4;
  c.rows = 16;
  c.precision = p;
  c.pattern = RoutingPattern::near_ties;
  c.magnitude = 0;
  c.seed = seed;
  return c;
}

oracle::RoutingVerdict chain_verdict(const RoutingRun& r, bool b14, bool ties_high) {
  oracle::ChainOutputs out;
  out.logits = fp32_router(r.ops.router, r.router_in, b14);
  out.topk = fp32_topk(r.ops.topk, out.logits, r.topk_in, ties_high);
  return oracle::judge_routing_chain(r.ops, r.router_in, r.topk_in, out, oracle::kUnitRoundoffCpu,
                                     "fp32-reference", r.c.seed);
}

TEST(RoutingJudge, PlainFp32ComputationPassesEveryPatternAndScoring) {
  for (const char* scoring : {"softmax", "sigmoid", "sqrtsoftplus"})
    for (RoutingPattern pat : gen::kRoutingPatterns)
      for (RouterPrecision p :
           {RouterPrecision::bf16, RouterPrecision::fp32_gate, RouterPrecision::fp32_routing})
        for (int mag : {-100, -3, 0, 5, 100}) {
          RoutingCase c = near_tie_case(p, scoring, 1234 + static_cast<uint64_t>(mag));
          c.pattern = pat;
          c.magnitude = mag;
          c.config.norm_topk_prob = mag != 0;
          c.config.use_routing_bias = std::string(scoring) != "softmax" && mag > 0;
          c.config.routed_scaling_factor = mag == 5 ? 6.0 : 2.5;
          const auto v = chain_verdict(prepare(c), false, false);
          ASSERT_TRUE(v.passed()) << c.describe() << "\n" << oracle::format_verdict(v);
        }
}

TEST(RoutingJudge, Fp32PathStoringBf16FailsTieStabilityAndTheLogitBound) {
  const RoutingRun r = prepare(near_tie_case(RouterPrecision::fp32_gate, "softmax", 7));
  const auto v = chain_verdict(r, /*b14=*/true, false);
  ASSERT_FALSE(v.passed());
  ASSERT_TRUE(v.ties && !v.ties->passed());
  const std::string reason = v.ties->first_bad->reason;
  EXPECT_TRUE(reason == "set" || reason == "order") << reason;
  EXPECT_EQ(v.report.checks.front().name, "gate_logits_f32");
  EXPECT_FALSE(v.report.checks.front().passed());
  // The top-k judged on its own (BF16-valued) stored logits is consistent: only the chain and
  // the router judge see the store.
  EXPECT_TRUE(v.stored_ties->passed());
}

TEST(RoutingJudge, ExactTiesToTheHigherIndexFailTheExactTieRule) {
  for (const char* scoring : {"softmax", "sigmoid"}) {
    RoutingCase c = near_tie_case(RouterPrecision::fp32_gate, scoring, 11);
    c.config.num_experts = 40;
    c.config.num_experts_per_tok = 5;
    const RoutingRun r = prepare(c);
    const StoredLogits logits{{}, gen::topk_logits(c, false)};
    const TopKOutputs good = fp32_topk(r.ops.topk, logits, r.topk_in, false);
    EXPECT_TRUE(oracle::judge_topk(r.ops.topk, logits, r.topk_in, good, "ref", 11).passed());
    const TopKOutputs bad = fp32_topk(r.ops.topk, logits, r.topk_in, true);
    const auto v = oracle::judge_topk(r.ops.topk, logits, r.topk_in, bad, "m-tie", 11);
    ASSERT_FALSE(v.passed()) << scoring;
    ASSERT_TRUE(v.exact_ties && v.exact_ties->first_bad);
    EXPECT_EQ(v.exact_ties->first_bad->reason.rfind("exact tie", 0), 0u);
    EXPECT_LT(v.exact_ties->first_bad->before, v.exact_ties->first_bad->after);
    EXPECT_EQ(v.exact_ties->first_bad->before_key, v.exact_ties->first_bad->after_key);
  }
}

TEST(RoutingJudge, WeightsPoisonNanCountAndHashIdsAreJudged) {
  RoutingCase c = near_tie_case(RouterPrecision::fp32_gate, "sigmoid", 3);
  c.config.norm_topk_prob = true;
  c.config.routed_scaling_factor = 2.5;
  RoutingRun r = prepare(c);
  const StoredLogits logits{{}, gen::topk_logits(c, true)};
  const TopKOutputs good = fp32_topk(r.ops.topk, logits, r.topk_in, false);
  ASSERT_GT(good.diagnostics.nan_keys, 0u);
  EXPECT_TRUE(oracle::judge_topk(r.ops.topk, logits, r.topk_in, good, "ref", 3).passed());

  const auto failing = [&](TopKOutputs out) {
    const auto v = oracle::judge_topk(r.ops.topk, logits, r.topk_in, out, "planted", 3);
    return v.report.first_failure() ? v.report.first_failure()->name : std::string("none");
  };
  TopKOutputs w = good;
  const auto bounds = oracle::topk_weight_bounds(r.ops.topk, logits.values(), good.ids);
  const size_t i = 5;  // row 1, slot 1
  ASSERT_FALSE(std::isnan(w.weights[i]));
  w.weights[i] += static_cast<float>(4.0 * bounds[i] + 1e-6);
  EXPECT_EQ(failing(w), "topk_weights");
  w = good;
  w.weights[i] = std::bit_cast<float>(0xFFFFFFFFu);
  EXPECT_EQ(failing(w), "topk_weights");
  w = good;
  w.diagnostics.nan_keys += 1;
  EXPECT_EQ(failing(w), "nan_keys (diagnostic)");

  c.hash = true;
  r = prepare(c);
  const TopKOutputs table = fp32_topk(r.ops.topk, logits, r.topk_in, false);
  EXPECT_TRUE(oracle::judge_topk(r.ops.topk, logits, r.topk_in, table, "ref", 3).passed());
  w = table;
  w.ids[0] = (w.ids[0] + 1) % static_cast<uint32_t>(c.config.num_experts);
  EXPECT_EQ(failing(w), "topk_ids = clamped tid2eid");
}

// Hash + softmax + norm_topk_prob, selected experts far below the row maximum: [0, −120],
// token 0 → expert 1. The literal "softmax over all E', then renormalise" is 0/0 = NaN in FP32
// and fails (NaN mismatch against routing.h's weight 1·scale); routing.h's form passes within a
// bound of a few u.
TEST(RoutingJudge, HashSoftmaxFarBelowTheMaxIsJudgedByTheRenormalisedForm) {
  RoutingCase c = near_tie_case(RouterPrecision::fp32_gate, "softmax", 17);
  c.config.num_experts = 2;
  c.config.num_experts_per_tok = 1;
  c.config.vocab_size = 1;
  c.config.norm_topk_prob = true;
  c.config.routed_scaling_factor = 2.5;
  c.rows = 1;
  c.hash = true;
  RoutingRun r = prepare(c);
  r.topk_in.token_ids = {0};
  r.topk_in.tid2eid = {1};
  const StoredLogits logits{{}, {0.0f, -120.0f}};
  const TopKOutputs good = fp32_topk(r.ops.topk, logits, r.topk_in, false);
  ASSERT_EQ(good.weights[0], 2.5f);
  const auto v = oracle::judge_topk(r.ops.topk, logits, r.topk_in, good, "ref", 17);
  EXPECT_TRUE(v.passed()) << oracle::format_verdict(v);
  const auto b = oracle::topk_weight_bounds(r.ops.topk, logits.values(), good.ids);
  EXPECT_GT(b[0], 0.0);
  EXPECT_LT(b[0], 64 * 0x1p-24 * 2.5);
  const TopKOutputs literal = fp32_topk(r.ops.topk, logits, r.topk_in, false, true);
  ASSERT_TRUE(std::isnan(literal.weights[0]));
  const auto bad = oracle::judge_topk(r.ops.topk, logits, r.topk_in, literal, "literal", 17);
  ASSERT_FALSE(bad.passed());
  ASSERT_TRUE(bad.report.first_failure());
  EXPECT_EQ(bad.report.first_failure()->name, "topk_weights");
}

// The renormalised-softmax bound (routing_judge.cpp) on a generic row is a few u per weight:
// q_i·(Π + α_i/q_i) with Π ≈ (k·4u + γ_k), plus the division and γ_3 scaling.
TEST(RoutingJudge, RenormalisedSoftmaxBoundFollowsItsFormula) {
  MoeTopKOp op;
  op.dims = {1, 4, 4, 2, 0};
  op.scoring = MoeScoring::softmax;
  op.norm_topk_prob = true;
  // [0, ln 2 (as the FP64 value), −5, 1]: ids 3, 1 (row max 1 selected: m_sel = 1).
  const double l1 = std::log(2.0);
  const std::vector<double> l = {0.0, l1, -5.0, 1.0};
  const auto b = oracle::topk_weight_bounds(op, l, {3, 1});
  // By hand: u = 2^-24, d = [0, l1 − 1]; e = [1, e^(l1−1)]; α_0 = 4u + kTiny;
  // α_1 = β(1 + 4u) + 4u·e_1, β = e^((l1−1)(1−u)) − e^(l1−1); P = 1 + e_1; Π = A + γ_2(P + A);
  // Δq = (α + qΠ)/(P − Π) + u(q + ·) + kTiny; w-bound = Δq + γ_3(q + Δq) + kTiny.
  const double u = 0x1p-24, tiny = 0x1p-148;
  const double g2 = 2 * u / (1 - 2 * u), g3 = 3 * u / (1 - 3 * u);
  const double d1 = l1 - 1.0, e1 = std::exp(d1);
  const double beta = std::exp(d1 * (1 - u)) - e1;
  const double a0 = 4 * u + tiny, a1 = beta * (1 + 4 * u) + 4 * u * e1 + tiny;
  const double P = 1 + e1, A = a0 + a1, Pi = A + g2 * (P + A);
  const auto want = [&](double q, double a) {
    const double d = (a + q * Pi) / (P - Pi);
    const double dq = d + u * (q + d) + tiny;
    return dq + g3 * (q + dq) + tiny;
  };
  EXPECT_DOUBLE_EQ(b[0], want(1 / P, a0));
  EXPECT_DOUBLE_EQ(b[1], want(e1 / P, a1));
  EXPECT_LT(b[0], 20 * u);
}

TEST(RoutingJudge, WeightBoundsAreTightEnoughToMean) {
  // The bounds are a few hundred u relative for moderate E' (not "anything passes").
  RoutingCase c = near_tie_case(RouterPrecision::fp32_gate, "softmax", 5);
  c.config.norm_topk_prob = true;
  const RoutingRun r = prepare(c);
  const StoredLogits logits{{}, gen::topk_logits(c, false)};
  const TopKOutputs out = fp32_topk(r.ops.topk, logits, r.topk_in, false);
  const auto b = oracle::topk_weight_bounds(r.ops.topk, logits.values(), out.ids);
  for (size_t i = 0; i < b.size(); ++i)
    EXPECT_LT(b[i], 1e-4 * std::max(1.0, std::fabs(double{out.weights[i]})) + 1e-30) << i;
}

TEST(RoutingGenerators, TensorsAreAPureFunctionOfTheCase) {
  RoutingCase c = near_tie_case(RouterPrecision::fp32_routing, "sigmoid", 99);
  c.config.use_routing_bias = true;
  c.hash = true;
  const auto a = gen::routing_tensors(c), b = gen::routing_tensors(c);
  EXPECT_EQ(a.x_bf16, b.x_bf16);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(a.tid2eid, b.tid2eid);
  c.seed = 100;
  EXPECT_NE(gen::routing_tensors(c).x_f32, a.x_f32);
  // Hash tables hold negative entries and ids ≥ E.
  EXPECT_TRUE(std::any_of(a.tid2eid.begin(), a.tid2eid.end(), [](int32_t v) { return v < 0; }));
  // Pinned hash values: identical on every platform.
  EXPECT_EQ(gen::routing_hash(0, 0, 0), 0xE220A8397B1DCDAFull);
}

TEST(RoutingGenerators, NearTiesShareTheirBf16ValueButNotTheirFp32One) {
  for (int mag : {-4, 0, 5}) {
    RoutingCase c = near_tie_case(RouterPrecision::fp32_gate, "softmax", 42);
    c.magnitude = mag;
    const RoutingRun r = prepare(c);
    const auto exact = oracle::router_logits(r.ops.router, r.router_in, oracle::Mode::exact);
    uint64_t ties_in_bf16 = 0, distinct_in_fp32 = 0;
    for (uint64_t t = 0; t < c.rows; ++t)
      for (uint64_t e = 1; e < c.experts(); ++e) {
        const double a = exact[t * c.experts()], b = exact[t * c.experts() + e];
        EXPECT_EQ(static_cast<double>(static_cast<float>(b)), b);  // FP32 holds it
        EXPECT_GE(std::fabs(b), std::ldexp(1.0, mag));
        EXPECT_LT(std::fabs(b), std::ldexp(1.0, mag + 1));
        if (round_to_bf16(static_cast<float>(a)) == round_to_bf16(static_cast<float>(b))) {
          ++ties_in_bf16;
          distinct_in_fp32 += a != b ? 1 : 0;
        }
      }
    EXPECT_GT(distinct_in_fp32, c.rows);
    EXPECT_GE(ties_in_bf16, distinct_in_fp32);
  }
}

}  // namespace
}  // namespace bufferlab
