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
  uint64_t rows, experts, top_k;
  bool norm;
  oracle::RoutingOps ops;
  std::vector<float> logits_f32;

  explicit SoftmaxCase(const std::string& name)
      : g(load_golden(name)),
        rows(g.param("rows")),
        experts(g.param("experts")),
        top_k(g.param("top_k")),
        norm(g.params.at("norm_topk_prob").get<bool>()) {
    ops = oracle::make_routing_ops(config(norm), rows, RouterPrecision::fp32_gate, false);
    logits_f32 = g.at("logits").as_f32();
  }
  ModelConfig config(bool norm_topk_prob) const {
    ModelConfig c;
    c.hidden_size = 64;
    c.num_experts = experts;
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
  out.set.name = who + " selected set vs Qwen3NextTopKRouter";
  out.weights.name = who + " weights vs Qwen3NextTopKRouter";
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
    oracle::StoredLogits stored;
    stored.f32 = c.logits_f32;
    const oracle::TopKOutputs out = oracle::run_topk(*b.backend, ws, c.ops.topk, stored, {});
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

  const oracle::RoutingOps raw =
      oracle::make_routing_ops(c.config(false), c.rows, RouterPrecision::fp32_gate, false);
  const oracle::TopKReference unnorm = oracle::select_topk(raw.topk, {c.logits(), {}, {}, {}});
  const std::vector<double> bounds = oracle::topk_weight_bounds(c.ops.topk, c.logits(), unnorm.ids);
  expect_caught(judge_softmax(
                    c, unnorm.ids, unnorm.weights,
                    [&](uint64_t row, uint64_t j) { return bounds[row * c.top_k + j]; },
                    "planted unnormalised weights")
                    .weights);
}

}  // namespace
}  // namespace bufferlab::golden
