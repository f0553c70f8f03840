// Judges of MoE routing: router logits, top-k ids / weights / NaN keys, the router → top-k chain.
#include "bufferlab/oracle/routing_judge.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"

namespace bufferlab::oracle {
namespace {

constexpr double kU = kFp32UnitRoundoff;  // the top-k's own arithmetic
// Two subnormal FP32 ULPs: a result that underflows is off by at most this, absolutely.
constexpr double kTiny = 0x1p-148;

double gamma(double k) { return oracle::gamma(k, kU); }

// One backend element as the comparison rules see it (compare.h's rules, per-element bound).
struct Got {
  double value = 0.0;
  uint64_t bits = 0;
  bool poison = false;
};

Got got_f32(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  return {f, b, b == 0xFFFFFFFFu};
}
Got got_bf16(uint16_t b) { return {bf16_bits_to_f32(b), b, b == 0xFFFFu}; }

std::string routing_disagreement(const Got& got, double want, double bound) {
  if (got.poison) return fmt::format("unwritten (poison bits {:#x})", got.bits);
  const bool got_nan = std::isnan(got.value), want_nan = std::isnan(want);
  if (got_nan || want_nan) return got_nan && want_nan ? "" : "NaN mismatch";
  if (std::isinf(got.value) || std::isinf(want)) return got.value == want ? "" : "Inf mismatch";
  const double diff = std::fabs(got.value - want);
  if (!(diff <= bound)) return fmt::format("|delta| {:.6g} > bound {:.6g}", diff, bound);
  return "";
}

// compare.h's metrics and rules with one bound per element; a NaN bound leaves the element
// unasserted (counted in `skipped`).
template <class GetElement>
TensorComparison compare_skipping_nan_bounds(std::string name, std::string dtype, uint64_t n,
                                             uint64_t cols, const std::vector<double>& want,
                                             const std::vector<double>& bound, std::string formula,
                                             GetElement get, uint64_t* skipped = nullptr) {
  if (cols == 0 || n != want.size() || n != bound.size() || n % cols != 0)
    throw Error(
        fmt::format("compare {}: {} backend elements, {} oracle values, {} bounds, rows "
                    "of {}",
                    name, n, want.size(), bound.size(), cols));
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = std::move(dtype);
  c.rows = n / cols;
  c.cols = cols;
  c.tol.formula = std::move(formula);
  c.tol.abs = bound.empty() ? 0.0 : *std::max_element(bound.begin(), bound.end());
  double err_sq = 0.0, ref_sq = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    const Got g = get(i);
    const double w = want[i];
    if (!std::isfinite(w)) ++c.nonfinite;
    if (!g.poison && std::isfinite(g.value) && std::isfinite(w)) {
      const double diff = std::fabs(g.value - w);
      c.max_abs = std::max(c.max_abs, diff);
      if (w != 0.0) c.max_rel = std::max(c.max_rel, diff / std::fabs(w));
      err_sq += diff * diff;
      ref_sq += w * w;
    }
    if (std::isnan(bound[i]) && !g.poison) {
      if (skipped) ++*skipped;
      continue;
    }
    std::string why = routing_disagreement(g, w, bound[i]);
    if (why.empty()) continue;
    ++c.failures;
    if (!c.first_bad) c.first_bad = Mismatch{i / cols, i % cols, g.value, w, g.bits, why};
  }
  if (err_sq > 0.0) c.nmse = ref_sq > 0.0 ? err_sq / ref_sq : INFINITY;
  return c;
}

// A violation count and the first violation of a tie check as a comparison of the ids: its
// first bad element names the row and the two `what`s (experts, or groups for the group step)
// with their keys (group scores) and bounds. col = the one that should have ranked first.
TensorComparison violations_comparison(std::string name, uint64_t rows, uint64_t failures,
                                       const std::optional<TieViolation>& first, uint64_t top_k,
                                       std::string formula, const char* what) {
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = "u32";
  c.rows = rows;
  c.cols = top_k;
  c.tol.formula = std::move(formula);
  c.failures = failures;
  if (first) {
    const TieViolation& v = *first;
    c.first_bad =
        Mismatch{v.row,
                 v.before,
                 v.after_key,
                 v.before_key,
                 v.after,
                 fmt::format("{}: {} {} (key {:.9g}, bound {:.3g}) ranks before {} {} "
                             "(key {:.9g}, bound {:.3g}), gap {:.3g}",
                             v.reason, what, v.before, v.before_key, v.before_bound, what, v.after,
                             v.after_key, v.after_bound, v.before_key - v.after_key)};
  }
  return c;
}

TensorComparison ids_comparison(std::string name, const TieCheck& check, uint64_t top_k,
                                std::string formula) {
  return violations_comparison(std::move(name), check.rows.size(), check.failures, check.first_bad,
                               top_k, std::move(formula), "expert");
}

// The group step of a grouped tie check as its own comparison (keys = group scores).
TensorComparison groups_comparison(std::string name, const TieCheck& check, uint64_t top_k,
                                   std::string formula) {
  return violations_comparison(std::move(name), check.rows.size(), check.group_failures,
                               check.first_group_bad, top_k, std::move(formula), "group");
}

constexpr const char* kGroupFormula =
    "group A before B when S_A - S_B > eS_A + eS_B; S = sum of the group's two best keys, eS = "
    "its two largest key bounds + u*(|S| + them); a group g others provably outrank is out";

TensorComparison exact_count(std::string name, uint64_t got, uint64_t want) {
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = "u64";
  c.rows = c.cols = 1;
  c.tol.formula = "exact";
  c.max_abs = std::fabs(static_cast<double>(got) - static_cast<double>(want));
  if (got != want) {
    c.failures = 1;
    c.first_bad =
        Mismatch{0, 0, static_cast<double>(got), static_cast<double>(want), got, "differs"};
  }
  return c;
}

// Hash layers select by table: the ids must equal the clamped table, element by element.
TensorComparison hash_ids(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                          uint64_t top_k) {
  TensorComparison c;
  c.name = "topk_ids = clamped tid2eid";
  c.dtype = "u32";
  c.rows = got.size() / top_k;
  c.cols = top_k;
  c.tol.formula = "exact: tid2eid[token_id] read unsigned, ids >= E clamped to 0";
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    ++c.failures;
    if (!c.first_bad)
      c.first_bad = Mismatch{i / top_k,
                             i % top_k,
                             static_cast<double>(got[i]),
                             static_cast<double>(want[i]),
                             got[i],
                             "id differs from the table"};
  }
  if (got.size() != want.size()) ++c.failures;
  return c;
}

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

constexpr const char* kRouterFormula =
    "|stored - exact| <= gamma_K*sum|x*w|, gamma_K = K*u/(1-K*u), K = hidden (+ half a BF16 ULP "
    "of |l|+e on the bf16 path)";
constexpr const char* kWeightFormula =
    "topk_weight_bounds: exp/sum/div (softmax, gamma_E' sum) or gamma_10 (f), renormalisation "
    "(gamma_k sum, one div; softmax: exp(l_i - m_sel) over the selected, gamma_k sum, one div), "
    "gamma_3 scaling";

}  // namespace

std::string format_verdict(const RoutingVerdict& v) {
  return format_report_body(v.report) + format_tie_checks(v) + format_outcome(v.report);
}

std::string format_tie_checks(const RoutingVerdict& v) {
  std::string out;
  const auto line = [&](const char* what, const std::optional<TieCheck>& c) {
    if (!c) return;
    out += fmt::format(
        "  {}: {} rows, {} failing, sets differing from the oracle's {}, cuts "
        "within the bound {}\n",
        what, c->rows.size(), c->failures, c->sets_differ, c->cut_unresolved);
  };
  const auto group_line = [&](const char* what, const std::optional<TieCheck>& c) {
    if (!c || !c->grouped) return;
    out += fmt::format(
        "  {}: {} rows, {} failing, rows selecting outside the oracle's kept groups {}, group "
        "cuts within the bound {}\n",
        what, c->rows.size(), c->group_failures, c->groups_differ, c->group_cut_unresolved);
  };
  group_line("group step", v.ties);
  group_line("group step on stored logits", v.stored_ties);
  line("tie check", v.ties);
  line("tie check on stored logits", v.stored_ties);
  line("exact-tie rule", v.exact_ties);
  if (v.weight_rows_outside_domain > 0)
    out += fmt::format("  weights not asserted on {} rows (outside the defined domain)\n",
                       v.weight_rows_outside_domain);
  return out;
}

// ---- Router ----

AgreementReport judge_router(const MoeRouterOp& op, const RouterInputs& in,
                             const StoredLogits& stored, double u, const std::string& backend,
                             uint64_t seed) {
  const std::vector<double> exact = router_logits(op, in, Mode::exact);
  const std::vector<double> bounds = router_logit_bounds(op, in, u);
  const uint64_t cols = op.shape().experts;
  AgreementReport r{"moe_router", op.params(), backend, seed, {}, {}};
  const std::string formula = fmt::format("{}, u = 2^{}", kRouterFormula, std::ilogb(u));
  if (op.precision == RouterPrecision::bf16) {
    r.checks.push_back(
        compare_skipping_nan_bounds("gate_logits", "bf16", stored.bf16.size(), cols, exact, bounds,
                                    formula, [&](uint64_t i) { return got_bf16(stored.bf16[i]); }));
  } else {
    r.checks.push_back(compare_skipping_nan_bounds(
        "gate_logits_f32", "f32", stored.f32.size(), cols, exact, bounds, formula,
        [&](uint64_t i) { return got_f32(stored.f32[i]); }));
  }
  return r;
}

// ---- Top-k weights ----

// Bound of FP32 weights against the FP64 weights of the same ids, from logits l the kernel
// read exactly (u = 2^-24, γ_n = n·u/(1 − n·u); kTiny = 2^-148 covers a result that underflows
// into the FP32 subnormals, 2 subnormal ULPs absolute, at every step that can underflow).
// The assumed evaluation is the standard one; reorderings of the last steps are covered by γ_3.
// Ulp counts: expf within 2 ulp = 4u relative (CUDA's documented maximum; glibc's is < 1 ulp).
//
// Exponential of a rounded difference (both softmax forms below): d = l_i − c ≤ 0 with c a
//   logit of the row (exact), d̂ = fl(d), |d̂ − d| ≤ u·|d| — an ABSOLUTE error u·|d| in the
//   exponent; ê = expf(d̂). exp is increasing and convex and d̂ ∈ [d(1+u), d(1−u)], so
//   |exp(d̂) − e^d| ≤ β = exp(d(1−u)) − e^d (≤ u·|d|·e^(d(1−u)), at most ≈ u/e), and
//     |ê − e^d| ≤ α = β(1 + 4u) + 4u·e^d + kTiny.
//
// softmax without norm_topk_prob, over all E' logits: c = m = max l. S = Σ e_i ≥ 1 (the max
//   term is e⁰); FP32 sum of E' terms in any order (Higham §3.1):
//     |Ŝ − S| ≤ σ = A + γ_E'·(S + A), A = Σ α_i.
//   p_i = e_i/S: |ê_i/Ŝ − e_i/S| ≤ (α_i + p_i·σ)/(S − σ), then the division rounds —
//   relatively, or by half a subnormal ULP when the quotient underflows (kTiny):
//     Δp_i = that + u·(p_i + that) + kTiny.
//   (A weight that underflows to 0 here is a defined result: within Δp_i of the FP64 one.)
// softmax with norm_topk_prob (routing.h: the renormalised softmax evaluated as
//   q_i = e^(d_i)/Σ_sel e^(d_j), d_i = l_i − m_sel, m_sel = the largest selected logit): c =
//   m_sel, α_i as above for the k selected terms; P = Σ_sel e^(d_j) ≥ 1 (the m_sel term is
//   e⁰ = 1, exact in FP32 too), FP32 sum of k terms in any order:
//     |P̂ − P| ≤ Π = A_sel + γ_k·(P + A_sel), A_sel = Σ_sel α_j;
//   ê_i/P̂ − e_i/P = ((ê_i − e_i)·P − e_i·(P̂ − P))/(P·P̂), |P̂| ≥ P − Π, so
//     |ê_i/P̂ − q_i| ≤ (α_i + q_i·Π)/(P − Π)   (+∞ when P ≤ Π — never: Π ≪ 1 ≤ P),
//   then the division rounds (u·(q_i + that), + kTiny should the quotient be subnormal):
//     Δq_i = (α_i + q_i·Π)/(P − Π) + u·(q_i + (α_i + q_i·Π)/(P − Π)) + kTiny.
//   No 0/0 remains: P ≥ 1. The row's other logits do not enter (a NaN among them makes every
//   weight NaN by definition — bound 0, NaN meets NaN; so does a selected set of only −Inf).
// sigmoid / sqrtsoftplus: p_i = s_i = f(l_i), evaluated within γ_10·|s_i| (routing.cpp's
//   derivation of score_key_bounds with an exact logit) + score_underflow_slack + kTiny:
//   Δp_i = γ_10·s_i + score_underflow_slack + kTiny.
// renormalisation (norm_topk_prob, sigmoid / sqrtsoftplus when P > 1e-20): P = Σ_sel p_j over k
//   terms: |P̂ − P| ≤ Π = ΣΔp_j + γ_k·(P + ΣΔp_j); q_i = p_i/P:
//     Δq_i = (Δp_i + q_i·Π)/(P − Π) (+∞ when P ≤ Π), then + u·(q_i + Δq_i) + kTiny for the
//     division (kTiny: a subnormal quotient).
//   When |P − 1e-20| ≤ Π + u·1e-20 (FP32's 1e-20 included) the kernel may decide either way:
//   the bound then also covers the other decision (weights_of_ids both ways).
// scaling: w_i = rsf·q_i with rsf converted to FP32 (u), one product (u) and one reassociation
//   (rsf/P first, u): Δw_i = rsf·Δq_i + γ_3·rsf·(q_i + Δq_i) + kTiny.
// Outside the defined domain (NaN bound, not asserted): a softmax row holding +Inf or whose
// maximum is −Inf; a selected ±Inf sigmoid / sqrtsoftplus score.
std::vector<double> topk_weight_bounds(const MoeTopKOp& op, const std::vector<double>& logits,
                                       const std::vector<uint32_t>& ids) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  if (logits.size() != (Size(rows) * experts).value() || ids.size() != (Size(rows) * top_k).value())
    throw Error(op.params() + ": topk_weight_bounds: logits or ids do not fit the op");
  const bool softmax = op.scoring == MoeScoring::softmax;
  const bool renormalised_softmax = softmax && op.norm_topk_prob;
  const double rsf = std::fabs(op.routed_scaling_factor);
  // |ê − e^d| for d = l − c ≤ 0 (above); e^d returned through ex.
  const auto exp_error = [](double d, double& ex) {
    ex = std::exp(d);
    const double beta = std::exp(d * (1.0 - kU)) - ex;
    return beta * (1.0 + 4.0 * kU) + 4.0 * kU * ex + kTiny;
  };
  // Scaling of a weight q within dq: the final bound.
  const auto scaled = [&](double q, double dq) {
    return rsf * dq + gamma(3.0) * rsf * (std::fabs(q) + dq) + kTiny;
  };
  std::vector<double> out(ids.size(), NAN);
  for (uint64_t t = 0; t < rows; ++t) {
    const double* l = logits.data() + t * experts;
    const uint32_t* id = ids.data() + t * top_k;
    const auto logit_of = [&](uint64_t j) { return l[id[j] < experts ? id[j] : 0]; };
    std::vector<double> p(top_k), dp(top_k);
    bool domain = true;
    if (softmax) {
      const double m = *std::max_element(l, l + experts, [](double a, double b) {
        return std::isnan(b) ? false : std::isnan(a) || a < b;
      });
      bool has_nan = false;
      for (uint64_t e = 0; e < experts; ++e) has_nan |= std::isnan(l[e]);
      if (has_nan) {  // defined: every weight NaN (routing.h); the bound is not used
        for (uint64_t j = 0; j < top_k; ++j) out[t * top_k + j] = 0.0;
        continue;
      }
      if (!std::isfinite(m)) continue;  // +Inf present or every logit −Inf: outside the domain
      if (renormalised_softmax) {
        double m_sel = -INFINITY;
        for (uint64_t j = 0; j < top_k; ++j) m_sel = std::max(m_sel, logit_of(j));
        if (m_sel == -INFINITY) {  // (−Inf) − (−Inf): NaN by definition, bound 0
          for (uint64_t j = 0; j < top_k; ++j) out[t * top_k + j] = 0.0;
          continue;
        }
        std::vector<double> ex(top_k), alpha(top_k);
        double P = 0.0, A = 0.0;
        for (uint64_t j = 0; j < top_k; ++j) {
          alpha[j] = exp_error(logit_of(j) - m_sel, ex[j]);
          P += ex[j];
          A += alpha[j];
        }
        const double Pi = A + gamma(static_cast<double>(top_k)) * (P + A);
        for (uint64_t j = 0; j < top_k; ++j) {
          const double q = ex[j] / P;
          const double d = P > Pi ? (alpha[j] + q * Pi) / (P - Pi) : INFINITY;
          out[t * top_k + j] = scaled(q, d + kU * (q + d) + kTiny);
        }
        continue;
      }
      double S = 0.0, A = 0.0;
      std::vector<double> ex(experts), alpha(experts);
      for (uint64_t e = 0; e < experts; ++e) {
        alpha[e] = exp_error(l[e] - m, ex[e]);
        S += ex[e];
        A += alpha[e];
      }
      const double sigma = A + gamma(static_cast<double>(experts)) * (S + A);
      for (uint64_t j = 0; j < top_k; ++j) {
        const uint32_t e = id[j] < experts ? id[j] : 0;
        p[j] = ex[e] / S;
        const double d = S > sigma ? (alpha[e] + p[j] * sigma) / (S - sigma) : INFINITY;
        dp[j] = d + kU * (p[j] + d) + kTiny;
      }
    } else {
      for (uint64_t j = 0; j < top_k; ++j) {
        p[j] = routing_score(op.scoring, logit_of(j));
        domain &= !std::isinf(p[j]);
        dp[j] = gamma(10.0) * std::fabs(p[j]) + score_underflow_slack(op.scoring) + kTiny;
      }
    }
    if (!domain) continue;
    const double P = std::accumulate(p.begin(), p.end(), 0.0);
    const double dP = std::accumulate(dp.begin(), dp.end(), 0.0);
    const double Pi = dP + gamma(static_cast<double>(top_k)) * (P + dP);
    // Softmax here is never renormalised (the renormalised form is handled above).
    const bool normalise = op.norm_topk_prob && !softmax && P > 1e-20;
    const bool ambiguous = op.norm_topk_prob && !softmax && std::isfinite(P) &&
                           std::fabs(P - 1e-20) <= Pi + kU * 1e-20;
    // The weight and its bound under one decision.
    const auto weight = [&](uint64_t j, bool norm, double& w) {
      double q = p[j], dq = dp[j];
      if (norm) {
        q = p[j] / P;
        dq = P > Pi ? (dp[j] + q * Pi) / (P - Pi) : INFINITY;
        dq += kU * (q + dq) + kTiny;
      }
      w = rsf * q;
      return scaled(q, dq);
    };
    for (uint64_t j = 0; j < top_k; ++j) {
      double w = 0.0, w_other = 0.0;
      double b = weight(j, normalise, w);
      if (ambiguous) {
        const double b_other = weight(j, !normalise, w_other);
        b = std::max(b, std::fabs(w - w_other) + b_other);
      }
      out[t * top_k + j] = std::isnan(p[j]) ? 0.0 : b;
    }
  }
  return out;
}

std::vector<double> weights_of_ids(const MoeTopKOp& op, const std::vector<double>& logits,
                                   const std::vector<float>& bias, const std::vector<uint32_t>& ids,
                                   bool normalise) {
  // select_topk's hash rule weighs a chosen set: a table of the ids, one token per row.
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  MoeTopKOp chosen = op;
  chosen.hash = true;
  chosen.groups = chosen.topk_groups = 1;  // the ids are chosen already
  chosen.norm_topk_prob = normalise;
  chosen.dims.routed_experts = experts;  // clamp nothing but ids ≥ E'
  chosen.dims.vocab = rows;
  TopKInputs in{logits, bias, std::vector<uint32_t>(rows), {}};
  std::iota(in.token_ids.begin(), in.token_ids.end(), 0u);
  for (uint32_t id : ids) in.tid2eid.push_back(static_cast<int32_t>(id < experts ? id : 0));
  return select_topk(chosen, in).weights;
}

// ---- Exact ties ----

TieCheck exact_tie_check(const MoeTopKOp& op, const std::vector<double>& logits,
                         const std::vector<float>& bias, const std::vector<uint32_t>& ids) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  TieCheck check;
  check.rows.resize(rows);
  for (uint64_t t = 0; t < rows; ++t) {
    const double* l = logits.data() + t * experts;
    const uint32_t* id = ids.data() + t * top_k;
    const auto group_has_selected = [&](uint64_t group) {
      return std::any_of(id, id + top_k,
                         [&](uint32_t e) { return e < experts && e / op.group_size() == group; });
    };
    std::optional<TieViolation> bad;
    for (uint64_t pj = 0; pj < top_k && !bad; ++pj) {
      const uint32_t j = id[pj];
      if (j >= experts) continue;  // the bounded check reports invalid ids
      for (uint32_t i = 0; i < j && !bad; ++i) {
        if (!same_value(l[i], l[j])) continue;
        if (op.use_bias && !same_value(bias[i], bias[j])) continue;
        const auto pi = static_cast<uint64_t>(std::find(id, id + top_k, i) - id);
        if (pi < pj) continue;
        // With groups an unselected i competes only if its group was kept: i's group holds a
        // selected expert (j's own group, or another).
        if (pi == top_k && op.grouped() && !group_has_selected(i / op.group_size())) continue;
        bad = TieViolation{t,
                           i,
                           j,
                           l[i],
                           l[j],
                           0.0,
                           0.0,
                           pi == top_k ? "exact tie: the higher index selected without the lower"
                                       : "exact tie: the higher index listed first"};
        (pi == top_k ? check.rows[t].set_ok : check.rows[t].order_ok) = false;
      }
    }
    if (!bad) continue;
    ++check.failures;
    if (!check.first_bad) check.first_bad = bad;
  }
  return check;
}

// ---- Top-k ----

RoutingVerdict judge_topk(const MoeTopKOp& op, const StoredLogits& logits, const TopKHostInputs& in,
                          const TopKOutputs& out, const std::string& backend, uint64_t seed) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::vector<double> l = logits.values();
  const TopKInputs oracle_in{l, in.bias, in.token_ids, in.tid2eid};
  const TopKReference ref = select_topk(op, oracle_in);
  RoutingVerdict v;
  v.report = {op.name(), op.params(), backend, seed, {}, {}};
  auto& checks = v.report.checks;
  if (out.ids.size() != ref.ids.size() || out.weights.size() != ref.ids.size())
    throw Error(op.params() + ": the backend returned " + std::to_string(out.ids.size()) +
                " ids / " + std::to_string(out.weights.size()) + " weights");

  if (op.hash) {
    checks.push_back(hash_ids(out.ids, ref.ids, top_k));
  } else {
    const std::vector<double> zero(l.size(), 0.0);
    const std::vector<double> kb = score_key_bounds(op, l, zero, in.bias);
    v.ties = tie_stability_check(ref.keys, kb, experts, top_k, out.ids, GroupRule::of(op));
    if (op.grouped())
      checks.push_back(groups_comparison("topk_groups (group step, stored logits)", *v.ties, top_k,
                                         kGroupFormula));
    checks.push_back(ids_comparison(
        "topk_ids (set/order, stored logits)", *v.ties, top_k,
        "i before j when key_i - key_j > e_i + e_j; e = score_key_bounds(stored logits, e_l = 0): "
        "0 for softmax; gamma_10*|s| + u*|s+b| + FP32 underflow slack (2^-126 sigmoid, "
        "2^-74 sqrtsoftplus) otherwise"));
    v.exact_ties = exact_tie_check(op, l, in.bias, out.ids);
    checks.push_back(ids_comparison("topk_ids (exact-tie rule)", *v.exact_ties, top_k,
                                    "equal logits (and bias) the kernel read: lower index first"));
  }
  checks.push_back(exact_count("nan_keys (diagnostic)", out.diagnostics.nan_keys, ref.nan_keys));

  // Weights of the backend's own ids (valid ones; a row with invalid ids failed above).
  const std::vector<double> want = weights_of_ids(op, l, in.bias, out.ids, op.norm_topk_prob);
  const std::vector<double> bound = topk_weight_bounds(op, l, out.ids);
  checks.push_back(compare_skipping_nan_bounds(
      "topk_weights", "f32", out.weights.size(), top_k, want, bound, kWeightFormula,
      [&](uint64_t i) { return got_f32(out.weights[i]); }, &v.weight_rows_outside_domain));
  v.weight_rows_outside_domain /= top_k;
  return v;
}

// ---- Router → top-k ----

RoutingVerdict judge_routing_chain(const RoutingOps& ops, const RouterInputs& router_in,
                                   const TopKHostInputs& topk_in, const ChainOutputs& out, double u,
                                   const std::string& backend, uint64_t seed) {
  const MoeTopKOp& op = ops.topk;
  RoutingVerdict v = judge_topk(op, out.logits, topk_in, out.topk, backend, seed);
  v.stored_ties = v.ties;
  v.report.op = "moe_routing_chain";
  v.report.params = ops.router.params() + " -> " + op.params();
  AgreementReport router = judge_router(ops.router, router_in, out.logits, u, backend, seed);
  v.report.checks.insert(v.report.checks.begin(), router.checks.begin(), router.checks.end());
  if (op.hash) {
    v.ties.reset();
    return v;
  }
  const std::vector<double> exact = router_logits(ops.router, router_in, Mode::exact);
  const std::vector<double> logit_bounds = router_logit_bounds(ops.router, router_in, u);
  const TopKReference ref = select_topk(op, {exact, topk_in.bias, {}, {}});
  const std::vector<double> kb = score_key_bounds(op, exact, logit_bounds, topk_in.bias);
  v.ties = tie_stability_check(ref.keys, kb, op.shape().experts, op.shape().top_k, out.topk.ids,
                               GroupRule::of(op));
  if (op.grouped())
    v.report.checks.push_back(
        groups_comparison(fmt::format("topk_groups (group step, tie stability, {} path)",
                                      to_string(ops.router.precision)),
                          *v.ties, op.shape().top_k, kGroupFormula));
  v.report.checks.push_back(ids_comparison(
      fmt::format("topk_ids (tie stability, {} path)", to_string(ops.router.precision)), *v.ties,
      op.shape().top_k,
      fmt::format("i before j when key*_i - key*_j > e_i + e_j; key* from the exact logits of "
                  "the stored inputs, e = score_key_bounds(router_logit_bounds, u = 2^{})",
                  std::ilogb(u))));
  return v;
}

}  // namespace bufferlab::oracle
