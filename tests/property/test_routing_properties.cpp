// Properties of MoE routing on the CPU backend (docs/spec/numerics.md §2 "Tie stability property",
// §9), each judged by oracle/routing_judge.h on the backend's own stored inputs, over random
// routing configs and adversarial inputs (properties/routing_generators.h): duplicated and
// perturbed gate rows, all-equal logits, logits one BF16 ULP apart, near-ties inside one BF16
// rounding interval, ~1e30 and ~1e-30 magnitudes. Cases are capped at 2^24 oracle
// multiply-adds (routing_case_cost); 100 cases each take a few seconds.
//
// Defined behaviour for NaN / ±Inf logits (oracle/routing.h, for the docs): a NaN key — a NaN
// logit, or a NaN bias — ranks below every number, −Inf included; NaN keys rank among
// themselves by index. Every top-k launch reports the NaN keys it met in
// TopKDiagnostics::nan_keys, equal to the oracle's count (hash layers count them too). ±Inf
// are ordinary keys (+Inf first, −Inf last among numbers). Weights: a softmax row holding a
// NaN has NaN weights everywhere; sigmoid / sqrtsoftplus weights are NaN only where the
// selected score is NaN (a NaN in the selected sum skips the renormalisation); softmax rows
// holding +Inf (or only −Inf) and selected scores of ±Inf have no defined weights and are not
// asserted (RoutingVerdict::weight_rows_outside_domain counts them).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/oracle/routing_judge.h"
#include "bufferlab/properties/routing_generators.h"
#include "cpu_backend.h"

namespace bufferlab {
namespace {

using gen::RoutingCase;
using testing::cpu_backend;

struct Prepared {
  oracle::RoutingOps ops;
  oracle::RouterInputs router_in;
  oracle::TopKHostInputs topk_in;
};

Prepared prepare(const RoutingCase& c) {
  Prepared p{oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash), {}, {}};
  const gen::RoutingTensors t = gen::routing_tensors(c);
  p.router_in = {t.x_bf16, t.x_f32, t.weight};
  p.topk_in = {t.bias, t.token_ids, t.tid2eid};
  return p;
}

oracle::RoutingVerdict run_chain(const RoutingCase& c) {
  const Prepared p = prepare(c);
  const Workspace ws =
      cpu_backend().allocate(oracle::routing_footprint_layout(p.ops), p.ops.pool_bytes);
  const auto out = oracle::run_routing_chain(cpu_backend(), ws, p.ops, p.router_in, p.topk_in);
  return oracle::judge_routing_chain(p.ops, p.router_in, p.topk_in, out, oracle::kUnitRoundoffCpu,
                                     "cpu", c.seed);
}

struct TopKRun {
  Prepared p;
  oracle::StoredLogits logits;
  oracle::TopKOutputs out;
  oracle::RoutingVerdict verdict;
};

TopKRun run_topk_alone(const RoutingCase& c, bool nonfinite) {
  TopKRun r{prepare(c), {}, {}, {}};
  const std::vector<float> l = gen::topk_logits(c, nonfinite);
  if (c.precision == RouterPrecision::bf16)
    for (float v : l) r.logits.bf16.push_back(f32_to_bf16_bits(v));
  else
    r.logits.f32 = l;
  const Workspace ws =
      cpu_backend().allocate(oracle::routing_footprint_layout(r.p.ops), r.p.ops.pool_bytes);
  r.out = oracle::run_topk(cpu_backend(), ws, r.p.ops.topk, r.logits, r.p.topk_in);
  r.verdict = oracle::judge_topk(r.p.ops.topk, r.logits, r.p.topk_in, r.out, "cpu", c.seed);
  return r;
}

RoutingCase ci_case() { return *gen::routing_case(gen::RoutingRanges{}); }

void tag(const RoutingCase& c) {
  RC_TAG(to_string(c.pattern), c.config.scoring_func);
  RC_LOG() << c.describe() << "\n";
}

// FP32-gate and FP32-routing: set, order and exact ties against the exact logits of the stored
// inputs with u = 2^-24 — the property B14 breaks.
RC_GTEST_PROP(RoutingProperty, Fp32PathsAreTieStable, ()) {
  RoutingCase c = ci_case();
  c.precision = *rc::gen::element(RouterPrecision::fp32_gate, RouterPrecision::fp32_routing);
  tag(c);
  const auto v = run_chain(c);
  RC_LOG() << oracle::format_verdict(v);
  RC_ASSERT(v.passed());
}

// The BF16 path agrees above its larger bound (half a BF16 ULP of each logit added).
RC_GTEST_PROP(RoutingProperty, Bf16PathAgreesAboveItsLargerBound, ()) {
  RoutingCase c = ci_case();
  c.precision = RouterPrecision::bf16;
  tag(c);
  const auto v = run_chain(c);
  RC_LOG() << oracle::format_verdict(v);
  RC_ASSERT(v.passed());
}

// Invariants of the top-k on its own stored logits (many exact ties, ±0): the judge (selected
// ≥ unselected under the total order, exact ties to the lower index, weights within their
// bound, hash ids = table), weights ≥ 0, and renormalised weights summing to
// routed_scaling_factor within Σ of their bounds (+ the FP64 sum of ≤ 32 terms: 32·2^-53 = 2^-48
// relative, taken as 2^-47).
RC_GTEST_PROP(RoutingProperty, TopKInvariants, ()) {
  const RoutingCase c = ci_case();
  tag(c);
  const TopKRun r = run_topk_alone(c, false);
  RC_LOG() << oracle::format_verdict(r.verdict);
  RC_ASSERT(r.verdict.passed());
  const auto& op = r.p.ops.topk;
  const uint64_t k = op.shape().top_k;
  const std::vector<double> l = r.logits.values();
  // Finite logits: every weight is a number ≥ 0 — softmax + norm_topk_prob included, whose
  // renormalised form (routing.h) has no 0/0 however far a hash layer's selection lies below
  // the row maximum.
  const auto want = oracle::weights_of_ids(op, l, r.p.topk_in.bias, r.out.ids, op.norm_topk_prob);
  for (size_t i = 0; i < want.size(); ++i) {
    RC_ASSERT(!std::isnan(want[i]));
    RC_ASSERT(r.out.weights[i] >= 0.0f);
  }
  const auto bounds = oracle::topk_weight_bounds(op, l, r.out.ids);
  const auto scores = oracle::weights_of_ids(op, l, r.p.topk_in.bias, r.out.ids, false);
  const bool softmax = op.scoring == MoeScoring::softmax;
  bool far_below = false;  // a hash row whose selection lies past FP32's exp range below the max
  for (uint64_t t = 0; t < op.shape().rows && op.norm_topk_prob; ++t) {
    double sum = 0.0, bound = 0.0, raw = 0.0;
    double row_max = -INFINITY, sel_max = -INFINITY;
    for (uint64_t e = 0; e < op.shape().experts; ++e)
      row_max = std::max(row_max, l[t * op.shape().experts + e]);
    for (uint64_t j = 0; j < k; ++j) {
      sum += r.out.weights[t * k + j];
      bound += bounds[t * k + j];
      raw += scores[t * k + j] / op.routed_scaling_factor;
      sel_max = std::max(sel_max, l[t * op.shape().experts + r.out.ids[t * k + j]]);
    }
    far_below |= softmax && op.hash && row_max - sel_max > 104.0;
    // Not renormalised: sigmoid / sqrtsoftplus sums ≤ 1e-20 (2e-20: either decision near it).
    if (!softmax && !(raw > 2e-20)) continue;
    RC_ASSERT(std::fabs(sum - op.routed_scaling_factor) <=
              bound + 0x1p-47 * op.routed_scaling_factor);
  }
  RC_CLASSIFY(far_below, "hash softmax+norm, selection > 104 below the row max");
}

// Hash + softmax + norm_topk_prob with the selected experts far below the row maximum (the
// generator puts them ~2^7, ~2^10 or ~2^100 below in about half the rows): weights within their
// bound of routing.h's renormalised form, finite, summing to routed_scaling_factor.
RC_GTEST_PROP(RoutingProperty, HashSoftmaxRenormalisesFarBelowTheMax, ()) {
  RoutingCase c = ci_case();
  c.hash = true;
  c.config.scoring_func = "softmax";
  c.config.use_routing_bias = false;
  c.config.norm_topk_prob = true;
  if (c.config.routed_scaling_factor == 6.0) c.config.routed_scaling_factor = 2.5;
  tag(c);
  const TopKRun r = run_topk_alone(c, false);
  RC_LOG() << oracle::format_verdict(r.verdict);
  RC_ASSERT(r.verdict.passed());
  for (float w : r.out.weights) RC_ASSERT(std::isfinite(w));
  // How far below the row maximum the selections lie (the literal form is 0/0 in FP32 past
  // ~104, in FP64 past ~745).
  const auto [rows, experts, routed, top_k, vocab] = r.p.ops.topk.shape();
  const std::vector<double> l = r.logits.values();
  double gap = 0.0;
  for (uint64_t t = 0; t < rows; ++t) {
    double row_max = -INFINITY, sel_max = -INFINITY;
    for (uint64_t e = 0; e < experts; ++e) row_max = std::max(row_max, l[t * experts + e]);
    for (uint64_t j = 0; j < top_k; ++j)
      sel_max = std::max(sel_max, l[t * experts + r.out.ids[t * top_k + j]]);
    gap = std::max(gap, row_max - sel_max);
  }
  RC_CLASSIFY(gap > 745.0, "a selection > 745 below its row max");
  RC_CLASSIFY(gap > 104.0 && gap <= 745.0, "a selection 104..745 below its row max");
}

// NaN / ±Inf logits: the defined behaviour above, NaN keys counted as the oracle counts them.
RC_GTEST_PROP(RoutingProperty, NanAndInfLogitsFollowTheDefinedOrder, ()) {
  const RoutingCase c = ci_case();
  tag(c);
  const TopKRun r = run_topk_alone(c, true);
  RC_LOG() << oracle::format_verdict(r.verdict);
  RC_ASSERT(r.verdict.passed());
  const auto ref = oracle::select_topk(r.p.ops.topk, {r.logits.values(), r.p.topk_in.bias,
                                                      r.p.topk_in.token_ids, r.p.topk_in.tid2eid});
  RC_ASSERT(r.out.diagnostics.nan_keys == ref.nan_keys);
}

// The top-k refuses E' > kMaxScoredExperts or top_k > kMaxTopK with an Error.
RC_GTEST_PROP(RoutingProperty, TopKRefusesBeyondItsLimits, ()) {
  RoutingCase c;
  c.rows = *rc::gen::inRange<uint64_t>(1, 4);
  c.config.hidden_size = 1;
  c.config.vocab_size = 1;
  const bool wide = *rc::gen::arbitrary<bool>();
  c.config.num_experts = wide ? *rc::gen::inRange<uint64_t>(kMaxScoredExperts + 1, 1400)
                              : *rc::gen::inRange<uint64_t>(kMaxTopK + 9, 200);  // top_k ≤ E'
  c.config.num_experts_per_tok = wide ? *rc::gen::inRange<uint64_t>(1, kMaxTopK + 1)
                                      : *rc::gen::inRange<uint64_t>(kMaxTopK + 1, kMaxTopK + 9);
  c.config.scoring_func = *rc::gen::element<std::string>("softmax", "sigmoid", "sqrtsoftplus");
  c.seed = *rc::gen::arbitrary<uint64_t>();
  RC_LOG() << c.describe() << "\n";
  bool refused = false;
  try {
    run_topk_alone(c, false);
  } catch (const Error& e) {
    refused = true;
    RC_LOG() << e.what() << "\n";
  }
  RC_ASSERT(refused);
}

}  // namespace
}  // namespace bufferlab
