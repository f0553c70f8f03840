// Judges MoE routing runs (docs/spec/numerics.md §2 "Tie stability property" and §9) against the
// FP64 routing oracle (routing.h), each check on the backend's own stored inputs:
//   judge_router: stored logits vs the exact FP64 logits of the SAME stored inputs, per logit
//     within router_logit_bounds (u = kUnitRoundoffCpu or kUnitRoundoffDeviceGemm; the bf16
//     path's bound adds half a BF16 ULP of the logit);
//   judge_topk: on the logits the top-k kernel read — ids under the total order with
//     score_key_bounds (tie_stability_check), the EXACT-TIE rule, NaN keys counted as the
//     oracle counts them, weights of the backend's own ids within topk_weight_bounds; hash
//     layers: ids equal to the clamped table;
//   judge_routing_chain: router then top-k; both judges above on the chain's stored logits,
//     plus the tie-stability check of the chain's ids against the oracle keys of the EXACT
//     logits of the router's stored INPUTS with per-logit bounds — §2's property, the one that
//     catches logits stored in BF16 on an FP32 path (B14).
// Every verdict is an AgreementReport (the ids checks appear as comparisons whose first bad
// element names the row, both experts, their keys and bounds) plus the tie-check details.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/routing.h"
#include "bufferlab/oracle/routing_harness.h"

namespace bufferlab::oracle {

struct RoutingVerdict {
  AgreementReport report;
  // The bounded set/order check of the ids: against the keys of the stored logits
  // (judge_topk) or of the exact logits of the router's inputs (judge_routing_chain).
  std::optional<TieCheck> ties;
  // The chain only: the same check on the chain's stored logits.
  std::optional<TieCheck> stored_ties;
  // The exact-tie rule: two experts whose logits the top-k read are equal (and whose biases
  // are equal) are ranked by index: if the higher index is selected the lower one is too,
  // listed before it. Reason "exact tie: ...". Empty for hash layers.
  std::optional<TieCheck> exact_ties;
  uint64_t weight_rows_outside_domain = 0;  // rows whose weights are undefined (see below)

  bool passed() const { return report.passed(); }
};

// The report's table, the tie-check summaries that explain it, then the verdict line:
// format_report_body + format_tie_checks + format_outcome.
std::string format_verdict(const RoutingVerdict& v);
// The tie-check summaries alone (one line each; empty when there are none).
std::string format_tie_checks(const RoutingVerdict& v);

// ---- Router ----

AgreementReport judge_router(const MoeRouterOp& op, const RouterInputs& in,
                             const StoredLogits& stored, double u, const std::string& backend,
                             uint64_t seed);

// ---- Top-k ----

// Per-slot bounds [rows, top_k] of FP32 top-k weights of `ids` computed from `logits` (the
// values the kernel read, exact in FP64) against the FP64 weights of the same ids
// (select_topk's rule: scoring, normalisation, scaling). Derivation in routing_judge.cpp.
// Softmax with norm_topk_prob is bounded in routing.h's form e^(l_i − m_sel)/Σ_sel e^(l_j − m_sel)
// (m_sel = the largest selected logit; the sum ≥ 1, so no 0/0).
// NaN marks a row outside the defined domain (a softmax row holding +Inf or with max −Inf;
// a selected ±Inf score): its weights are not asserted.
std::vector<double> topk_weight_bounds(const MoeTopKOp& op, const std::vector<double>& logits,
                                       const std::vector<uint32_t>& ids);

// The FP64 weights of the given ids (select_topk's scoring / normalisation / scaling applied
// to a chosen set). An id ≥ E' reads expert 0 (such a row fails the ids checks anyway).
std::vector<double> weights_of_ids(const MoeTopKOp& op, const std::vector<double>& logits,
                                   const std::vector<float>& bias, const std::vector<uint32_t>& ids,
                                   bool normalise);

// The exact-tie rule on the values the kernel ranked (logits and bias), for non-hash ops.
TieCheck exact_tie_check(const MoeTopKOp& op, const std::vector<double>& logits,
                         const std::vector<float>& bias, const std::vector<uint32_t>& ids);

RoutingVerdict judge_topk(const MoeTopKOp& op, const StoredLogits& logits, const TopKHostInputs& in,
                          const TopKOutputs& out, const std::string& backend, uint64_t seed);

// ---- Router → top-k ----

RoutingVerdict judge_routing_chain(const RoutingOps& ops, const RouterInputs& router_in,
                                   const TopKHostInputs& topk_in, const ChainOutputs& out, double u,
                                   const std::string& backend, uint64_t seed);

}  // namespace bufferlab::oracle
