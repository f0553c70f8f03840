// Golden group-limited routing (docs/golden.md): transformers' DeepseekV3TopkRouter — σ(logit) +
// e_score_correction_bias as choice scores, 256 experts in n_group = 8 groups scored by their two
// best choice scores, topk_group = 4 groups kept, top-8 among their experts, weights σ / (Σ +
// 1e-20) · 2.5 — evaluated in FP64 on stored FP32 logits (gate weight = identity), against the
// FP64 top-k oracle and every backend's top-k (router_groups = 8, router_topk_groups = 4;
// docs/spec/numerics.md §2).
//
// The set check (the acceptance of issue 16): in every row whose group gap and expert gap
// exceed their bounds, every backend selects the set transformers selects. The gaps are taken
// on transformers' FP64 group scores and on the choice scores of the experts of its kept
// groups:
//   - group gap: S_(4) − S_(5) > eS_(4) + eS_(5) + 2·εS, eS the backend's group score bounds
//     (oracle::group_score_bounds, from the key bounds oracle::score_key_bounds with exact
//     logits) and εS = γ_6(2^-53)·(the group's two largest σ + |b|) each FP64 evaluation's error
//     of a group score (its two largest key errors — σ: exp, add, divide; + bias — and the sum);
//   - expert gap: c_(8) − c_(9) among the kept groups' experts > e_(8) + e_(9) + 2·εc,
//     εc = γ_5(2^-53)·(|σ| + |b|).
// Rows where either gap is within its bound are counted and judged by the project's own
// tie-stability check against the oracle (tie_stability_check with the group rule), not
// against transformers: there both sets are right. The oracle is held to the same rule
// against transformers with the FP64 terms alone. Weights of a selected id present in
// transformers' set: topk_weight_bounds (backends; 0 for the oracle) + 2·γ_(k+8)(2^-53)·w + the
// 1e-20 adapter term w·1e-20/Σ (transformers adds 1e-20 to the sum always; we divide by Σ when
// Σ > 1e-20). Two cases: FP32 logits (the FP32 top-k paths) and BF16 logits (the BF16 path).
// Planted bug: the kernel mutant M-GROUP on every backend.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"
#include "golden_case.h"

namespace bufferlab::golden {
namespace {

constexpr double kU64 = oracle::kFp64UnitRoundoff;

struct GroupedCase {
  GoldenCase g;
  uint64_t rows = g.param("rows"), experts = g.param("experts"), top_k = g.param("top_k");
  uint64_t groups = g.param("n_group"), kept = g.param("topk_group");
  RouterPrecision path = RouterPrecision::fp32_gate;  // bf16 when the case's logits are BF16
  oracle::RoutingOps ops;
  oracle::StoredLogits stored;  // the logits as the top-k reads them
  std::vector<float> bias;
  std::vector<double> keys;  // σ(l) + b, FP64

  explicit GroupedCase(const std::string& name) : g(load_golden(name)) {
    if (g.params.value("bf16_logits", false)) {
      path = RouterPrecision::bf16;
      stored.bf16 = bf16_bits_of(g.values("logits"));
    } else {
      stored.f32 = g.at("logits").as_f32();
    }
    ModelConfig c;
    c.hidden_size = 64;
    c.num_experts = experts;
    c.num_experts_per_tok = top_k;
    c.scoring_func = "sigmoid";
    c.use_routing_bias = true;
    c.norm_topk_prob = true;
    c.routed_scaling_factor = g.real("routed_scaling_factor");
    c.router_groups = groups;
    c.router_topk_groups = kept;
    ops = oracle::make_routing_ops(c, rows, path, false);
    bias = g.at("bias").as_f32();
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t e = 0; e < experts; ++e)
        keys.push_back(oracle::routing_score(MoeScoring::sigmoid, logit(r, e)) + bias[e]);
  }
  double logit(uint64_t r, uint64_t e) const { return g.values("logits")[r * experts + e]; }
  double sigma(uint64_t r, uint64_t e) const {
    return oracle::routing_score(MoeScoring::sigmoid, logit(r, e));
  }
  double key_fp64(uint64_t r, uint64_t e) const {
    return oracle::gamma(5.0, kU64) * (sigma(r, e) + std::fabs(double{bias[e]}));
  }
  // One FP64 evaluation's error of group q's score in row r: the sum of the group's two largest
  // key errors γ_5·(σ + |b|) (whichever two experts it finds best, the perturbed top-2 sum lies
  // within them) plus the sum's rounding: γ_6·(the two largest σ + |b| of the group).
  double group_fp64(uint64_t r, uint64_t q) const {
    std::vector<double> in_group;
    for (uint64_t e = q * (experts / groups); e < (q + 1) * (experts / groups); ++e)
      in_group.push_back(sigma(r, e) + std::fabs(double{bias[e]}));
    std::sort(in_group.rbegin(), in_group.rend());
    return oracle::gamma(6.0, kU64) * (in_group[0] + in_group[1]);
  }
};

struct Verdict {
  BoundedCheck set{"set"}, weights{"weights"};
  uint64_t resolved = 0;
};

// `ids` [rows, top_k], `weights` of them; key_bounds [rows, E'] and group_bounds [rows, G] the
// judged side's (zeros for the oracle); weight_bound(r, j) its weight bound.
template <class WeightBound>
Verdict judge_grouped(const GroupedCase& c, const std::vector<uint32_t>& ids,
                      const std::vector<double>& weights, const std::vector<double>& key_bounds,
                      const std::vector<double>& group_bounds, WeightBound weight_bound,
                      const std::string& who) {
  Verdict v;
  v.set.name = who + " set vs DeepseekV3TopkRouter (rows with both gaps above their bounds)";
  v.weights.name = who + " weights vs DeepseekV3TopkRouter";
  const std::vector<double>& gid = c.g.values("ids");
  const std::vector<double>& gw = c.g.values("weights");
  const std::vector<double>& gs = c.g.values("group_scores");
  const uint64_t k = c.top_k, G = c.groups, E = c.experts;
  for (uint64_t r = 0; r < c.rows; ++r) {
    std::vector<uint32_t> golden(k), mine(ids.begin() + r * k, ids.begin() + (r + 1) * k);
    double sel_sum = 0.0;
    for (uint64_t j = 0; j < k; ++j) {
      golden[j] = static_cast<uint32_t>(gid[r * k + j]);
      sel_sum += c.sigma(r, golden[j]);
    }
    // Group gap on transformers' group scores, with each group's two best experts for εS.
    std::vector<uint32_t> gorder(G);
    for (uint32_t q = 0; q < G; ++q) gorder[q] = q;
    std::stable_sort(gorder.begin(), gorder.end(),
                     [&](uint32_t a, uint32_t b) { return gs[r * G + a] > gs[r * G + b]; });
    const uint32_t g_in = gorder[c.kept - 1], g_out = gorder[c.kept];
    const bool group_resolved = gs[r * G + g_in] - gs[r * G + g_out] >
                                group_bounds[r * G + g_in] + group_bounds[r * G + g_out] +
                                    2.0 * (c.group_fp64(r, g_in) + c.group_fp64(r, g_out));
    // Expert gap among the experts of transformers' kept groups.
    std::vector<uint32_t> eorder;
    for (uint64_t q = 0; q < c.kept; ++q)
      for (uint64_t e = gorder[q] * (E / G); e < (gorder[q] + 1) * (E / G); ++e)
        eorder.push_back(static_cast<uint32_t>(e));
    std::stable_sort(eorder.begin(), eorder.end(),
                     [&](uint32_t a, uint32_t b) { return c.keys[r * E + a] > c.keys[r * E + b]; });
    const uint32_t e_in = eorder[k - 1], e_out = eorder[k];
    const bool expert_resolved = c.keys[r * E + e_in] - c.keys[r * E + e_out] >
                                 key_bounds[r * E + e_in] + key_bounds[r * E + e_out] +
                                     2.0 * (c.key_fp64(r, e_in) + c.key_fp64(r, e_out));
    std::vector<uint32_t> a = golden, b = mine;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (group_resolved && expert_resolved) {
      ++v.resolved;
      v.set.require(a == b, fmt::format("row {}: selected {} but transformers selected {}", r,
                                        fmt::join(b, ","), fmt::join(a, ",")));
    }
    for (uint64_t j = 0; j < k; ++j) {
      const auto it = std::find(golden.begin(), golden.end(), mine[j]);
      if (it == golden.end()) continue;  // an id of an unresolved row outside transformers' set
      const double w = gw[r * k + static_cast<uint64_t>(it - golden.begin())];
      const double eps = 2.0 * oracle::gamma(static_cast<double>(k) + 8.0, kU64) * std::fabs(w) +
                         std::fabs(w) * 1e-20 / sel_sum;
      v.weights.add(weights[r * k + j], w, weight_bound(r, j) + eps,
                    fmt::format("row {} slot {} expert {}", r, j, mine[j]));
    }
  }
  fmt::print("golden: {} ({}): {} of {} rows with both gaps above their bounds\n", c.g.name, who,
             v.resolved, c.rows);
  return v;
}

const char* const kCases[] = {"routing_deepseek_v3", "routing_deepseek_v3_bf16_logits"};

TEST(GoldenGroupedRouting, OracleMatchesDeepseekV3TopkRouter) {
  for (const char* name : kCases) {
    const GroupedCase c(name);
    const oracle::TopKReference ref =
        oracle::select_topk(c.ops.topk, {c.g.values("logits"), c.bias, {}, {}});
    const std::vector<double> zeros_k(c.rows * c.experts, 0.0), zeros_g(c.rows * c.groups, 0.0);
    const Verdict v = judge_grouped(
        c, ref.ids, ref.weights, zeros_k, zeros_g, [](uint64_t, uint64_t) { return 0.0; },
        "oracle");
    expect_passed(v.set);
    expect_passed(v.weights);
    EXPECT_GT(v.resolved, c.rows / 2) << "too few rows resolved: the check would say little";
    // The oracle's group scores are transformers' (FP64 terms of both sides).
    BoundedCheck gs("oracle group scores vs DeepseekV3TopkRouter's");
    const std::vector<double>& want = c.g.values("group_scores");
    for (uint64_t i = 0; i < want.size(); ++i)
      gs.add(ref.group_scores[i], want[i], 2.0 * c.group_fp64(i / c.groups, i % c.groups),
             fmt::format("row {} group {}", i / c.groups, i % c.groups));
    expect_passed(gs);
  }
}

void backends_match(Mutant mutant, bool expect_failure) {
  for (const char* name : kCases) {
    const GroupedCase c(name);
    for (const GoldenBackend& b : golden_backends()) {
      SCOPED_TRACE(b.name);
      const Workspace ws =
          b.backend->allocate(oracle::routing_footprint_layout(c.ops), c.ops.pool_bytes);
      oracle::TopKOutputs out;
      {
        testing::MutantScope scope(*b.backend, mutant);
        out = oracle::run_topk(*b.backend, ws, c.ops.topk, c.stored, {c.bias, {}, {}});
      }
      const std::vector<double> zero_logit_bounds(c.rows * c.experts, 0.0);
      const std::vector<double> kb =
          oracle::score_key_bounds(c.ops.topk, c.g.values("logits"), zero_logit_bounds, c.bias);
      const std::vector<double> gb = oracle::group_score_bounds(c.ops.topk, c.keys, kb);
      const std::vector<double> wb =
          oracle::topk_weight_bounds(c.ops.topk, c.g.values("logits"), out.ids);
      const Verdict v = judge_grouped(
          c, out.ids, std::vector<double>(out.weights.begin(), out.weights.end()), kb, gb,
          [&](uint64_t r, uint64_t j) { return wb[r * c.top_k + j]; }, b.name);
      if (expect_failure) {
        expect_caught(v.set);
        continue;
      }
      expect_passed(v.set);
      expect_passed(v.weights);
      EXPECT_GT(v.resolved, c.rows / 2);
      // Every row, resolved or not, by the project's tie-stability check against the oracle.
      const oracle::TopKReference ref =
          oracle::select_topk(c.ops.topk, {c.g.values("logits"), c.bias, {}, {}});
      const oracle::TieCheck ties = oracle::tie_stability_check(
          ref.keys, kb, c.experts, c.top_k, out.ids, oracle::GroupRule::of(c.ops.topk));
      EXPECT_TRUE(ties.passed()) << "tie-stability check with groups failed";
    }
  }
}

TEST(GoldenGroupedRouting, BackendsMatchDeepseekV3TopkRouter) {
  backends_match(Mutant::none, false);
}

// Planted bug: M-GROUP (groups ranked by their single best expert instead of the top-2 sum),
// the kernel mutant of issue 16, on every backend.
TEST(GoldenGroupedRouting, PlantedMGroupIsCaught) { backends_match(Mutant::M_GROUP, true); }

// ---- `bufferlab compare --op topk --preset deepseek-v3.2 --tokens 64` on every path ----
//
// The cases routing_deepseek_v3_compare_x_{bf16,f32} hold transformers' selection on the FP64
// logits of the router inputs compare generates (seed 1: the bf16 and fp32-gate paths read the
// BF16 x, fp32-routing the FP32 x). Here compare's chain runs again on every backend, from the
// same inputs (gen::routing_tensors of compare's case, a pure function of it: the golden logits
// must equal the oracle's FP64 logits of them bit for bit, or the generator changed and the
// cases must be regenerated), and the chain's ids are judged as above, with the chain's bounds:
// key bounds from router_logit_bounds (u = the backend's GEMM roundoff; the BF16 path's half
// ULP included) through score_key_bounds, group bounds from them. Weights are judged by the
// stored-logit cases above (here they would carry the logit error too).
struct CompareRun {
  RouterPrecision path;
  const char* golden;
};

std::vector<uint32_t> run_compare_chain(Backend& b, const ModelConfig& config, RouterPrecision path,
                                        const gen::RoutingTensors& t, oracle::RoutingOps& ops,
                                        Mutant mutant) {
  ops = oracle::make_routing_ops(config, 64, path, false);
  const Workspace ws = b.allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
  testing::MutantScope scope(b, mutant);
  return oracle::run_routing_chain(b, ws, ops, {t.x_bf16, t.x_f32, t.weight},
                                   {t.bias, t.token_ids, t.tid2eid})
      .topk.ids;
}

void compare_chains_match(Mutant mutant, bool expect_failure) {
  const ModelConfig config = preset("deepseek-v3.2");
  ASSERT_EQ(config.router_groups, 8u);
  ASSERT_EQ(config.router_topk_groups, 4u);
  for (const CompareRun run :
       {CompareRun{RouterPrecision::bf16, "routing_deepseek_v3_compare_x_bf16"},
        CompareRun{RouterPrecision::fp32_gate, "routing_deepseek_v3_compare_x_bf16"},
        CompareRun{RouterPrecision::fp32_routing, "routing_deepseek_v3_compare_x_f32"}}) {
    SCOPED_TRACE(to_string(run.path));
    const GroupedCase c(run.golden);
    // compare's case (tools/compare/compare_routing.cpp, prepare()): pattern random, magnitude
    // 0, seed 1, not hashed.
    gen::RoutingCase rc;
    rc.config = config;
    rc.rows = 64;
    rc.precision = run.path;
    rc.pattern = gen::RoutingPattern::random;
    rc.magnitude = 0;
    rc.seed = 1;
    const gen::RoutingTensors t = gen::routing_tensors(rc);
    ASSERT_EQ(t.bias, c.bias) << "compare's bias changed: regenerate the golden cases";
    for (const GoldenBackend& b : golden_backends()) {
      SCOPED_TRACE(b.name);
      oracle::RoutingOps ops;
      const std::vector<uint32_t> ids =
          run_compare_chain(*b.backend, config, run.path, t, ops, mutant);
      const oracle::RouterInputs in{t.x_bf16, t.x_f32, t.weight};
      const std::vector<double> exact = oracle::router_logits(ops.router, in, oracle::Mode::exact);
      ASSERT_EQ(exact, c.g.values("logits"))
          << "compare's inputs changed: regenerate the golden cases";
      const std::vector<double> kb = oracle::score_key_bounds(
          ops.topk, exact, oracle::router_logit_bounds(ops.router, in, b.bm.gemm_u), t.bias);
      const std::vector<double> gb = oracle::group_score_bounds(ops.topk, c.keys, kb);
      const std::vector<double> no_weights(ids.size(), 0.0);
      Verdict v = judge_grouped(
          c, ids, no_weights, kb, gb, [](uint64_t, uint64_t) { return 0.0; },
          b.name + " compare chain (" + to_string(run.path) + ")");
      if (expect_failure) {
        expect_caught(v.set);
        continue;
      }
      expect_passed(v.set);
      EXPECT_GT(v.resolved, 0u) << "no row resolved: the check would say nothing";
    }
  }
}

// The acceptance of issue 16: compare's DeepSeek-V3.2 top-k on every path selects transformers'
// set in every row whose group and expert gaps clear the chain's bounds.
TEST(GoldenGroupedRouting, CompareChainOnEveryPathMatchesDeepseekV3TopkRouter) {
  compare_chains_match(Mutant::none, false);
}

TEST(GoldenGroupedRouting, CompareChainPlantedMGroupIsCaught) {
  compare_chains_match(Mutant::M_GROUP, true);
}

}  // namespace
}  // namespace bufferlab::golden
