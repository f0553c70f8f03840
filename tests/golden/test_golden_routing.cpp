// Golden softmax routing (docs/golden.md): transformers' Qwen3NextTopKRouter (softmax over all
// experts, top-k, with and without norm_topk_prob), evaluated in FP64 on stored FP32 logits
// (its gate weight set to the identity, so its logits are the stored ones), against the FP64
// top-k oracle and the top-k kernel of every backend (the FP32-logit path).
//
// Selected set. The logits are the values both sides rank, exactly: no bound separates them. In
// a row whose k-th and (k+1)-th largest logits differ, the set is determined and must equal
// transformers'. Where they are equal (the generator plants such exact ties), transformers
// breaks the tie its own way (torch.topk) and we by the lower index (docs/spec/numerics.md §2):
// the adapter accepts any set of valid distinct ids whose multiset of logits equals
// transformers' — the set is then correct up to the tie, never looser.
//
// Weights. Softmax weights, in FP64 on either side, pass through at most E + k + 8 roundings
// (the max subtraction, E exps of ≤ 2 roundings counted as E + 1, the Σ of E terms, the division;
// with norm_topk_prob the Σ of k weights and a division; transformers' and the oracle's forms
// differ only in where they divide), so each is within ε = γ_(E+k+8)(2^-53)·w of the exact w.
// Oracle vs golden: 2ε. A backend's FP32 weight of the same id lies within
// oracle::topk_weight_bounds (routing_judge.cpp's derivation) of the FP64 weight of the oracle,
// itself within ε of the exact one: bound = topk_weight_bounds + 2ε. A weight of an id that
// replaced a tied one is compared with transformers' weight of an id with the same logit: the
// same exact value.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "golden_case.h"

namespace bufferlab::golden {
namespace {

struct SoftmaxCase {
  GoldenCase g;
  uint64_t rows, routed, zero, experts, top_k;  // experts = routed + zero (E')
  bool norm;
  oracle::RoutingOps ops;
  RouterPrecision path = RouterPrecision::fp32_gate;  // bf16 when the case's logits are BF16
  oracle::StoredLogits stored;                        // the logits as the top-k reads them

  explicit SoftmaxCase(const std::string& name)
      : g(load_golden(name)),
        rows(g.param("rows")),
        routed(g.param("experts")),
        zero(g.params.value("zero_expert_num", uint64_t{0})),
        experts(routed + zero),
        top_k(g.param("top_k")),
        norm(g.params.at("norm_topk_prob").get<bool>()) {
    if (g.params.value("bf16_logits", false)) {
      path = RouterPrecision::bf16;
      stored.bf16 = bf16_bits_of(g.values("logits"));
    } else {
      stored.f32 = g.at("logits").as_f32();
    }
    ops = oracle::make_routing_ops(config(norm), rows, path, false);
  }
  ModelConfig config(bool norm_topk_prob) const {
    ModelConfig c;
    c.hidden_size = 64;
    c.num_experts = routed;
    c.zero_expert_num = zero;
    c.num_experts_per_tok = top_k;
    c.norm_topk_prob = norm_topk_prob;
    c.scoring_func = "softmax";
    c.routed_scaling_factor = g.real("routed_scaling_factor");
    return c;
  }
  const std::vector<double>& logits() const { return g.values("logits"); }
  double logit(uint64_t r, uint64_t e) const { return logits()[r * experts + e]; }
  double fp64_err(double w) const {
    const double n = static_cast<double>(experts + top_k + 8);
    return oracle::gamma(n, oracle::kFp64UnitRoundoff) * std::fabs(w);
  }
};

struct RoutingChecks {
  BoundedCheck set{"selected set"}, weights{"weights"};
};

// `ids` [rows, top_k] and their weights; `weight_bound(r, j)` the bound of slot j of row r
// against the exact weight (the golden's own ε is added here).
template <class WeightBound>
RoutingChecks judge_softmax(const SoftmaxCase& c, const std::vector<uint32_t>& ids,
                            const std::vector<double>& weights, WeightBound weight_bound,
                            const std::string& who) {
  RoutingChecks out;
  out.set.name = who + " selected set vs " + c.g.name;
  out.weights.name = who + " weights vs " + c.g.name;
  const std::vector<double>& gid = c.g.values("ids");
  const std::vector<double>& gw = c.g.values("weights");
  const uint64_t k = c.top_k, E = c.experts;
  uint64_t tie_rows = 0, tie_broken_otherwise = 0;
  for (uint64_t r = 0; r < c.rows; ++r) {
    std::vector<uint32_t> golden(k), mine(ids.begin() + r * k, ids.begin() + (r + 1) * k);
    std::map<double, double> golden_weight_of_logit;
    for (uint64_t j = 0; j < k; ++j) {
      golden[j] = static_cast<uint32_t>(gid[r * k + j]);
      golden_weight_of_logit[c.logit(r, golden[j])] = gw[r * k + j];
    }
    // The cut: the smallest selected and the largest unselected logit of transformers' set.
    double lowest_in = INFINITY, highest_out = -INFINITY;
    for (uint64_t e = 0; e < E; ++e) {
      if (std::find(golden.begin(), golden.end(), e) != golden.end())
        lowest_in = std::min(lowest_in, c.logit(r, e));
      else
        highest_out = std::max(highest_out, c.logit(r, e));
    }
    out.set.require(lowest_in >= highest_out,
                    fmt::format("row {}: transformers' set is not a top-k by logit", r));
    const bool tie_at_cut = lowest_in == highest_out;
    tie_rows += tie_at_cut;
    std::vector<uint32_t> a = golden, b = mine;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    const bool distinct_valid =
        std::adjacent_find(b.begin(), b.end()) == b.end() && (b.empty() || b.back() < E);
    bool same = a == b;
    if (!same && tie_at_cut && distinct_valid) {
      std::vector<double> la, lb;
      for (uint32_t e : a) la.push_back(c.logit(r, e));
      for (uint32_t e : b) lb.push_back(c.logit(r, e));
      std::sort(la.begin(), la.end());
      std::sort(lb.begin(), lb.end());
      same = la == lb;  // the same set up to the exact tie at the cut
      tie_broken_otherwise += same;
    }
    out.set.require(
        same && distinct_valid,
        fmt::format("row {}: selected {} but transformers selected {}{}", r, fmt::join(mine, ","),
                    fmt::join(golden, ","), tie_at_cut ? " (exact tie at the cut)" : ""));
    for (uint64_t j = 0; j < k; ++j) {
      const uint32_t e = mine[j] < E ? mine[j] : 0;
      const auto it = golden_weight_of_logit.find(c.logit(r, e));
      const double want = it == golden_weight_of_logit.end() ? NAN : it->second;
      out.weights.add(weights[r * k + j], want, weight_bound(r, j) + c.fp64_err(want),
                      fmt::format("row {} slot {} expert {}", r, j, e));
    }
  }
  fmt::print(
      "golden: {} ({}): {} of {} rows have an exact tie at the cut, {} broken the other way\n",
      c.g.name, who, tie_rows, c.rows, tie_broken_otherwise);
  return out;
}

void oracle_matches(const std::string& name) {
  const SoftmaxCase c(name);
  const oracle::TopKReference ref = oracle::select_topk(c.ops.topk, {c.logits(), {}, {}, {}});
  const RoutingChecks r = judge_softmax(
      c, ref.ids, ref.weights,
      [&](uint64_t row, uint64_t j) { return c.fp64_err(ref.weights[row * c.top_k + j]); },
      "oracle");
  expect_passed(r.set);
  expect_passed(r.weights);
}

void backends_match(const std::string& name) {
  const SoftmaxCase c(name);
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    const Workspace ws =
        b.backend->allocate(oracle::routing_footprint_layout(c.ops), c.ops.pool_bytes);
    const oracle::TopKOutputs out = oracle::run_topk(*b.backend, ws, c.ops.topk, c.stored, {});
    const std::vector<double> bounds = oracle::topk_weight_bounds(c.ops.topk, c.logits(), out.ids);
    const oracle::TopKReference mine = oracle::select_topk(c.ops.topk, {c.logits(), {}, {}, {}});
    const std::vector<double> w(out.weights.begin(), out.weights.end());
    const RoutingChecks r = judge_softmax(
        c, out.ids, w,
        [&](uint64_t row, uint64_t j) {
          return bounds[row * c.top_k + j] + c.fp64_err(mine.weights[row * c.top_k + j]);
        },
        b.name);
    expect_passed(r.set);
    expect_passed(r.weights);
  }
}

TEST(GoldenRouting, OracleMatchesQwen3NextRouterNormalised) {
  oracle_matches("routing_qwen3_next");
}
TEST(GoldenRouting, OracleMatchesQwen3NextRouterUnnormalised) {
  oracle_matches("routing_qwen3_next_unnormalised");
}
TEST(GoldenRouting, BackendsMatchQwen3NextRouterNormalised) {
  backends_match("routing_qwen3_next");
}
TEST(GoldenRouting, BackendsMatchQwen3NextRouterUnnormalised) {
  backends_match("routing_qwen3_next_unnormalised");
}

// The BF16 router path: the top-k reads BF16 logits (more exact ties: the adapter's case).
TEST(GoldenRouting, OracleMatchesQwen3NextRouterBf16Logits) {
  oracle_matches("routing_qwen3_next_bf16_logits");
}
TEST(GoldenRouting, BackendsMatchQwen3NextRouterBf16Logits) {
  backends_match("routing_qwen3_next_bf16_logits");
}

TEST(GoldenRouting, OracleMatchesLongcatZeroExperts) {
  oracle_matches("routing_longcat_zero_experts");
}
TEST(GoldenRouting, BackendsMatchLongcatZeroExperts) {
  backends_match("routing_longcat_zero_experts");
}

// Planted bug: the zero experts left out of the selection (top-k over the routed experts only).
TEST(GoldenRouting, PlantedZeroExpertsDroppedAreCaught) {
  const SoftmaxCase c("routing_longcat_zero_experts");
  const oracle::TopKReference ref = oracle::select_topk(c.ops.topk, {c.logits(), {}, {}, {}});
  std::vector<uint32_t> ids;
  for (uint64_t r = 0; r < c.rows; ++r) {
    std::vector<uint32_t> order(c.routed);
    for (uint32_t e = 0; e < c.routed; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return c.logit(r, a) > c.logit(r, b); });
    ids.insert(ids.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(c.top_k));
  }
  const auto exact = [&](uint64_t row, uint64_t j) {
    return c.fp64_err(ref.weights[row * c.top_k + j]);
  };
  expect_caught(judge_softmax(c, ids, ref.weights, exact, "planted zero experts dropped").set);
}

// LongCat-Flash ranks softmax PROBABILITY + e_score_correction_bias; docs/spec/numerics.md §2
// ranks softmax by logit and applies no bias (docs/findings.md, "LongCat-Flash selects by
// softmax probability plus a bias"). Asserted: transformers' set is exactly the top-k by
// p + bias wherever the cut gap exceeds the FP64 error of the keys (p within γ_(E'+4)(2^-53)·p,
// the add one rounding more); reported: the rows where our oracle's set (bias ignored, as the
// spec says) differs.
TEST(GoldenRouting, LongcatBiasedSelectionIsProbabilityPlusBias) {
  const SoftmaxCase c("routing_longcat_zero_experts_biased");
  const std::vector<double>& bias = c.g.values("bias");
  const std::vector<double>& gid = c.g.values("ids");
  const oracle::TopKReference ours = oracle::select_topk(c.ops.topk, {c.logits(), {}, {}, {}});
  BoundedCheck check("LongCat set = top-k by softmax probability + bias");
  uint64_t differ = 0;
  for (uint64_t r = 0; r < c.rows; ++r) {
    double m = -INFINITY, sum = 0.0;
    for (uint64_t e = 0; e < c.experts; ++e) m = std::max(m, c.logit(r, e));
    for (uint64_t e = 0; e < c.experts; ++e) sum += std::exp(c.logit(r, e) - m);
    std::vector<double> key(c.experts), err(c.experts);
    const double gam =
        oracle::gamma(static_cast<double>(c.experts) + 6.0, oracle::kFp64UnitRoundoff);
    for (uint64_t e = 0; e < c.experts; ++e) {
      const double p = std::exp(c.logit(r, e) - m) / sum;
      key[e] = p + bias[e];
      err[e] = gam * (p + std::fabs(bias[e]));  // both evaluations: 2·that below
    }
    std::vector<uint32_t> order(c.experts);
    for (uint32_t e = 0; e < c.experts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return key[a] > key[b]; });
    const uint32_t kth = order[c.top_k - 1], next = order[c.top_k];
    const bool resolved = key[kth] - key[next] > 2.0 * (err[kth] + err[next]);
    std::vector<uint32_t> want(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(c.top_k)),
        golden,
        mine(ours.ids.begin() + static_cast<std::ptrdiff_t>(r * c.top_k),
             ours.ids.begin() + static_cast<std::ptrdiff_t>((r + 1) * c.top_k));
    for (uint64_t j = 0; j < c.top_k; ++j)
      golden.push_back(static_cast<uint32_t>(gid[r * c.top_k + j]));
    std::sort(want.begin(), want.end());
    std::sort(golden.begin(), golden.end());
    std::sort(mine.begin(), mine.end());
    check.require(!resolved || want == golden,
                  fmt::format("row {}: transformers selected {}, top-k by p + bias is {}", r,
                              fmt::join(golden, ","), fmt::join(want, ",")));
    differ += mine != golden;
  }
  expect_passed(check);
  fmt::print(
      "golden (reported): {} of {} rows: our softmax selection (by logit, no bias) differs "
      "from LongcatFlashTopkRouter's (bias std {})\n",
      differ, c.rows, c.g.real("bias_scale"));
}

// Planted bugs: the k-th expert replaced by the (k+1)-th (a selection off by one at the cut),
// and the weights left unnormalised where the model renormalises.
TEST(GoldenRouting, PlantedWrongSetAndMissingRenormalisationAreCaught) {
  const SoftmaxCase c("routing_qwen3_next");
  const oracle::TopKReference ref = oracle::select_topk(c.ops.topk, {c.logits(), {}, {}, {}});
  std::vector<uint32_t> ids = ref.ids;
  for (uint64_t r = 0; r < c.rows; ++r) {
    std::vector<uint32_t> order(c.experts);
    for (uint32_t e = 0; e < c.experts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return c.logit(r, a) > c.logit(r, b); });
    ids[r * c.top_k + c.top_k - 1] = order[c.top_k];
  }
  const auto exact = [&](uint64_t row, uint64_t j) {
    return c.fp64_err(ref.weights[row * c.top_k + j]);
  };
  expect_caught(judge_softmax(c, ids, ref.weights, exact, "planted off-by-one cut").set);

  const oracle::RoutingOps raw = oracle::make_routing_ops(c.config(false), c.rows, c.path, false);
  const oracle::TopKReference unnorm = oracle::select_topk(raw.topk, {c.logits(), {}, {}, {}});
  const std::vector<double> bounds = oracle::topk_weight_bounds(c.ops.topk, c.logits(), unnorm.ids);
  expect_caught(judge_softmax(
                    c, unnorm.ids, unnorm.weights,
                    [&](uint64_t row, uint64_t j) { return bounds[row * c.top_k + j]; },
                    "planted unnormalised weights")
                    .weights);
}

// ---- hash routing: transformers' DeepseekV4HashRouter ----------------------------------------
//
// ids = tid2eid[token id]: a table lookup, compared exactly (the table holds valid ids only, so
// our clamp of ids ≥ E to 0 never acts). Weights: sqrtsoftplus of the selected logits, divided by
// their sum, times the scale. Conventions: transformers divides by Σ + 1e-20, we by Σ (when
// Σ > 1e-20): the two differ by w·1e-20/(Σ + 1e-20) ≤ w·1e-20/Σ, a derived adapter term; torch's
// softplus is x above 20, ours max(x, 0) + log1p(e^-|x|): equal below 20, where every logit
// lies (asserted). FP64 error per side: γ_(k+12)(2^-53)·w (softplus: exp, log1p, max/add ≤ 4
// roundings; sqrt 1; Σ of k; division 1; scale 1; the rest slack).
struct HashCase {
  GoldenCase g = load_golden("routing_deepseek_v4_hash");
  uint64_t rows = g.param("rows"), experts = g.param("experts"), top_k = g.param("top_k");
  oracle::RoutingOps ops;
  oracle::TopKHostInputs host;

  HashCase() {
    ModelConfig c;
    c.hidden_size = 64;
    c.vocab_size = g.param("vocab");
    c.num_experts = experts;
    c.num_experts_per_tok = top_k;
    c.norm_topk_prob = true;
    c.scoring_func = "sqrtsoftplus";
    c.routed_scaling_factor = g.real("routed_scaling_factor");
    ops = oracle::make_routing_ops(c, rows, RouterPrecision::fp32_gate, true);
    for (double v : g.values("token_ids")) host.token_ids.push_back(static_cast<uint32_t>(v));
    for (double v : g.values("tid2eid")) host.tid2eid.push_back(static_cast<int32_t>(v));
  }
  const std::vector<double>& logits() const { return g.values("logits"); }
  // FP64 term of one evaluation plus the 1e-20 adapter term of golden weight w in row r.
  double fp64_err(uint64_t r, double w) const {
    const std::vector<double>& ids = g.values("ids");
    double sum = 0.0;
    for (uint64_t j = 0; j < top_k; ++j)
      sum += std::sqrt(
          std::log1p(std::exp(logits()[r * experts + static_cast<uint64_t>(ids[r * top_k + j])])));
    return oracle::gamma(static_cast<double>(top_k) + 12.0, oracle::kFp64UnitRoundoff) *
               std::fabs(w) +
           std::fabs(w) * 1e-20 / sum;
  }
};

RoutingChecks judge_hash(const HashCase& c, const std::vector<uint32_t>& ids,
                         const std::vector<double>& weights,
                         const std::vector<double>& weight_bounds, const std::string& who) {
  RoutingChecks out;
  out.set.name = who + " ids vs DeepseekV4HashRouter";
  out.weights.name = who + " weights vs DeepseekV4HashRouter";
  const std::vector<double>& gid = c.g.values("ids");
  const std::vector<double>& gw = c.g.values("weights");
  for (uint64_t i = 0; i < gid.size(); ++i) {
    const uint64_t r = i / c.top_k;
    out.set.require(
        ids[i] == static_cast<uint32_t>(gid[i]),
        fmt::format("row {} slot {}: id {}, transformers {}", r, i % c.top_k, ids[i], gid[i]));
    out.weights.add(weights[i], gw[i], weight_bounds[i] + 2.0 * c.fp64_err(r, gw[i]),
                    fmt::format("row {} slot {}", r, i % c.top_k));
  }
  return out;
}

TEST(GoldenRouting, HashLogitsBelowTheSoftplusThreshold) {
  const HashCase c;
  BoundedCheck check("hash logits below 20 (torch's softplus threshold)");
  for (double l : c.logits()) check.require(std::fabs(l) < 20.0, fmt::format("logit {}", l));
  expect_passed(check);
}

TEST(GoldenRouting, OracleMatchesDeepseekV4HashRouter) {
  const HashCase c;
  const oracle::TopKReference ref =
      oracle::select_topk(c.ops.topk, {c.logits(), {}, c.host.token_ids, c.host.tid2eid});
  const RoutingChecks r =
      judge_hash(c, ref.ids, ref.weights, std::vector<double>(ref.ids.size(), 0.0), "oracle");
  expect_passed(r.set);
  expect_passed(r.weights);
}

TEST(GoldenRouting, BackendsMatchDeepseekV4HashRouter) {
  const HashCase c;
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    const Workspace ws =
        b.backend->allocate(oracle::routing_footprint_layout(c.ops), c.ops.pool_bytes);
    oracle::StoredLogits stored;
    stored.f32 = c.g.at("logits").as_f32();
    const oracle::TopKOutputs out = oracle::run_topk(*b.backend, ws, c.ops.topk, stored, c.host);
    const std::vector<double> bounds = oracle::topk_weight_bounds(c.ops.topk, c.logits(), out.ids);
    const RoutingChecks r = judge_hash(
        c, out.ids, std::vector<double>(out.weights.begin(), out.weights.end()), bounds, b.name);
    expect_passed(r.set);
    expect_passed(r.weights);
  }
}

// Planted bug: the hash weights taken from the softmax instead of the scoring function.
TEST(GoldenRouting, PlantedHashSoftmaxWeightsAreCaught) {
  const HashCase c;
  ModelConfig cfg;
  cfg.hidden_size = 64;
  cfg.vocab_size = c.g.param("vocab");
  cfg.num_experts = c.experts;
  cfg.num_experts_per_tok = c.top_k;
  cfg.norm_topk_prob = true;
  cfg.scoring_func = "softmax";
  cfg.routed_scaling_factor = c.g.real("routed_scaling_factor");
  const oracle::RoutingOps wrong_ops =
      oracle::make_routing_ops(cfg, c.rows, RouterPrecision::fp32_gate, true);
  const oracle::TopKReference wrong =
      oracle::select_topk(wrong_ops.topk, {c.logits(), {}, c.host.token_ids, c.host.tid2eid});
  const std::vector<double> bounds = oracle::topk_weight_bounds(c.ops.topk, c.logits(), wrong.ids);
  expect_caught(
      judge_hash(c, wrong.ids, wrong.weights, bounds, "planted softmax hash weights").weights);
}

}  // namespace
}  // namespace bufferlab::golden
