// FP64 oracle of MoE routing (docs/spec/numerics.md §2): the router GEMM (MoeRouterOp), top-k
// selection (MoeTopKOp) and the tie-stability check that judges a backend's selected ids
// against the oracle under the derived per-expert bounds. Host copies of the operands carry
// BF16 as raw bits.
//
// The one total order (every backend and the oracle): key descending, then expert index
// ascending — an exact tie goes to the LOWER index. The key is the logit for softmax and
// s + bias (s = f(logit)) for sigmoid / sqrtsoftplus.
//
// Defined behaviour for NaN: a NaN key ranks below every number, −Inf included; NaN keys rank
// among themselves by index. The top-k oracle counts them (TopKReference::nan_keys). A row of
// softmax logits holding a NaN has NaN weights everywhere (the softmax of the whole row is
// NaN); sigmoid / sqrtsoftplus weights are NaN only where the selected score is NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/bounds.h"  // kUnitRoundoffCpu, kUnitRoundoffDeviceGemm
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// ---- Router GEMM ----

struct RouterInputs {
  std::vector<uint16_t> x_bf16;  // norm_output bf16 [rows, hidden]: bf16 and fp32_gate paths
  std::vector<float> x_f32;      // moe_router_in_f32 [rows, hidden]: fp32_routing path
  std::vector<uint16_t> weight;  // Wg bf16 [E', hidden]
};

// logits[t, e] = Σ_k x[t,k]·Wg[e,k] in FP64, [rows, E'] (extents from op.shape(); sizes
// checked, Error otherwise). Only the x of op.precision's path is read. faithful rounds each
// logit as the path stores it: BF16 on the bf16 path, FP32 otherwise.
std::vector<double> router_logits(const MoeRouterOp& op, const RouterInputs& in, Mode mode);

// Per-logit bound [rows, E'] of the backend's stored logit against the EXACT oracle logit:
// e = γ_K·Σ_k|x_k·w_k|, γ_K = K·u/(1 − K·u), K = hidden, u = kUnitRoundoffCpu or
// kUnitRoundoffDeviceGemm; the bf16 path adds half a BF16 ULP of the stored logit. +Inf when
// K·u ≥ 1. Domain: Σ|x·w| < FLT_MAX (an FP32 overflow is outside any bound).
std::vector<double> router_logit_bounds(const MoeRouterOp& op, const RouterInputs& in, double u);

// ---- Top-k selection ----

struct TopKInputs {
  std::vector<double> logits;       // [rows, E'], e.g. router_logits() or the stored logits
  std::vector<float> bias;          // f32 [E'] when op.use_bias, else not read
  std::vector<uint32_t> token_ids;  // [rows] when op.hash, else not read
  std::vector<int32_t> tid2eid;     // [vocab, top_k] when op.hash, else not read
};

struct TopKReference {
  std::vector<uint32_t> ids;    // [rows, top_k] in selection order
  std::vector<double> weights;  // [rows, top_k] in selection order, FP64
  std::vector<double> keys;     // [rows, E'] what each expert is ranked by (hash layers too)
  uint64_t nan_keys = 0;        // diagnostic: NaN keys over all rows (ranked last, by definition)
  // Grouped ops only (op.grouped()), else empty:
  std::vector<double> group_scores;   // [rows, G] the sum of each group's two best keys
  std::vector<uint32_t> kept_groups;  // [rows, g] the kept groups, best first
};

// The total order above: does expert i (key a) rank before expert j (key b)?
bool ranks_before(double a, uint32_t i, double b, uint32_t j);

// s = f(l) of op.scoring for sigmoid (1/(1+e^-l)) and sqrtsoftplus (√(max(l,0) + log1p(e^-|l|)),
// finite for every finite l). Softmax is a row function: the identity here.
double routing_score(MoeScoring scoring, double logit);

// ---- Group-limited routing (docs/spec/numerics.md §2) ----

// Group scores [rows, G] of keys [rows, E']: each group's two best keys under the total order,
// summed in FP64 larger first; NaN when either is NaN (the group then ranks last). Groups rank
// by ranks_before on these scores (score descending, group index ascending).
std::vector<double> group_scores(const MoeTopKOp& op, const std::vector<double>& keys);

// Bounds [rows, G] of a backend's FP32 group scores, when each key it ranks lies within its bound
// of the oracle's key (score_key_bounds): the sum of the group's two LARGEST key bounds (whichever
// two experts the backend finds best, their perturbed sum lies within that of the oracle's top-2
// sum — derivation in routing.cpp) plus the FP32 rounding of the sum.
std::vector<double> group_score_bounds(const MoeTopKOp& op, const std::vector<double>& keys,
                                       const std::vector<double>& key_bounds);

// Selection and weights of docs/spec/numerics.md §2 (sizes checked, Error otherwise; a token id ≥
// vocab is an Error):
//   softmax: select by logit; weight = softmax over ALL E' logits, gathered;
//   sigmoid / sqrtsoftplus: select by s + bias (s alone without op.use_bias); weight = s;
//   grouped (op.grouped()): first the topk_groups best groups by group_scores; top_k by key
//     among their experts only;
//   hash: ids = tid2eid[token_id], read as unsigned, ids ≥ E (routed experts) clamped to 0,
//     so a negative entry becomes 0 too; weights from the scoring of the selected logits;
//   then: if norm_topk_prob divide by the sum of the selected weights (sigmoid /
//   sqrtsoftplus only when that sum > 1e-20); times routed_scaling_factor.
// Softmax with norm_topk_prob is evaluated in the form it reduces to exactly (the softmax's
// common factor e^m/Σ_all cancels in the renormalisation):
//   w_i = e^(l_i − m_sel) / Σ_{j selected} e^(l_j − m_sel),  m_sel = the largest SELECTED logit,
// so the largest term is e⁰ = 1 and no selected set yields 0/0 — a hash layer's selected
// logits may lie arbitrarily far below the row maximum, where the literal form underflows
// every selected weight to 0 (docs/findings.md, "softmax renormalisation of hash-selected
// experts"). Top-k by logit always selects the row maximum, so m_sel = max there. A row holding
// a NaN still has NaN weights everywhere; a selected set of only −Inf logits gives
// (−Inf) − (−Inf) = NaN.
// Zero experts (ids E..E'-1) are ordinary columns here; the combine adds their identity term.
TopKReference select_topk(const MoeTopKOp& op, const TopKInputs& in);

// Absolute slack for FP32 underflow in the evaluation of s = f(l), which the relative γ_10·|s|
// does not cover: 2^-126 for sigmoid, 2^-74 for sqrtsoftplus, 0 for softmax (a logit key).
// Derivation in routing.cpp.
double score_underflow_slack(MoeScoring scoring);

// Bounds [rows, E'] of the keys the top-k kernel ranks by, from the per-logit bounds (the
// tie-stability bounds of docs/spec/numerics.md §2): softmax ranks logits, so the logit bounds;
// sigmoid / sqrtsoftplus: e_s = sup|f′|·e over [l − e, l + e] + the FP32 evaluation of f (γ_10·|f|
// + score_underflow_slack) + the FP32 rounding of s + bias (u·|s + bias|), u = 2^-24. The one
// source of the key bounds: the judges use it as it is. Derivation in routing.cpp.
std::vector<double> score_key_bounds(const MoeTopKOp& op, const std::vector<double>& logits,
                                     const std::vector<double>& logit_bounds,
                                     const std::vector<float>& bias);

// ---- Tie stability ----

// "i provably ranks before j" given keys and bounds: key_i − key_j > e_i + e_j; with
// e_i + e_j = 0 the backend ranks these very values, so the total order decides (exact ties
// to the lower index); a number is always before a NaN, NaNs by index.
struct TieViolation {
  uint64_t row = 0;
  uint32_t before = 0, after = 0;  // expert `before` provably ranks before `after`, ...
  double before_key = 0.0, after_key = 0.0;
  double before_bound = 0.0, after_bound = 0.0;
  std::string reason;  // ... but the backend did not: "set", "order", "id out of range", ...
};

struct TieRowVerdict {
  bool set_ok = true;      // no unselected expert provably ranks before a selected one
  bool order_ok = true;    // no selected pair listed against a provable order
  bool same_set = true;    // the backend's set equals the oracle's (measured, not asserted)
  double cut_gap = 0.0;    // key_(k) − key_(k+1) in the oracle's order (+Inf when k = E')
  double cut_bound = 0.0;  // e_(k) + e_(k+1)
  // Grouped checks only:
  bool group_ok = true;          // no expert selected from a group provably outside the kept g
  bool same_groups = true;       // every selected expert is in an oracle-kept group (measured)
  double group_cut_gap = 0.0;    // S_(g) − S_(g+1) in the oracle's group order
  double group_cut_bound = 0.0;  // eS_(g) + eS_(g+1)
};

struct TieCheck {
  std::vector<TieRowVerdict> rows;
  uint64_t failures = 0;        // rows with !set_ok or !order_ok
  uint64_t sets_differ = 0;     // rows whose backend set differs from the oracle's
  uint64_t cut_unresolved = 0;  // rows whose cut is not provable (a flip there is allowed)
  std::optional<TieViolation> first_bad;
  // The group step (grouped checks only): rows with !group_ok, rows selecting outside the
  // oracle's kept groups, rows whose group cut is not provable; the first violation names the
  // groups (before/after = group indices, keys = group scores, bounds = their bounds).
  bool grouped = false;
  uint64_t group_failures = 0, groups_differ = 0, group_cut_unresolved = 0;
  std::optional<TieViolation> first_group_bad;
  bool passed() const { return failures == 0 && group_failures == 0; }
};

// The group structure a tie check judges under: G groups of cols/G consecutive experts, g kept.
struct GroupRule {
  uint64_t groups = 1, kept = 1;
  static GroupRule of(const MoeTopKOp& op) { return {op.groups, op.topk_groups}; }
};

// Judges backend ids [rows, top_k] against oracle keys and key bounds [rows, E'] (E' = cols).
// Sound pairwise form of docs/spec/numerics.md §2/§9: the backend's value of expert i lies within
// e_i of key_i, so a selected set / order is wrong only where it contradicts a provable order. This
// implies §2's set rule (cut gap > e_(k) + e_(k+1)) whenever e_(k) and e_(k+1) are the largest
// bounds on their side of the cut — with uneven bounds the cut rule alone could fail a correct
// kernel — and is §9's "selected set within the bound of the oracle's" below the cut bound.
// An invalid id (≥ cols, repeated) fails both set_ok and order_ok. Hash layers select by
// table: compare their ids exactly instead.
//
// With groups (rule.groups > 1; docs/spec/numerics.md §2's extension): group scores and their
// bounds come from the keys and key bounds (group_scores / group_score_bounds); group A provably
// ranks before B when S_A − S_B > eS_A + eS_B (the total order when both bounds are 0). A group
// that g others provably outrank is provably OUT: selecting any of its experts fails group_ok
// ("group"). A group that fewer than g others can possibly outrank is provably KEPT: only its
// unselected experts count in the set rule (an expert of an excluded group is rightly left out).
// When the group cut clears its bound, the provably kept groups are exactly the oracle's, so the
// backend's set is judged within the oracle's kept groups — the property "when the gap at the
// g-th group score exceeds the bounds of the two sums, the kept groups equal the oracle's".
TieCheck tie_stability_check(const std::vector<double>& keys, const std::vector<double>& bounds,
                             uint64_t cols, uint64_t top_k,
                             const std::vector<uint32_t>& backend_ids, GroupRule rule = {});

}  // namespace bufferlab::oracle
