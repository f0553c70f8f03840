// FP64 oracle of MoE routing: router logits and their bounds, top-k selection, tie stability.
#include "bufferlab/oracle/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// The value an FP32 store holds. A value past FLT_MAX is past the rounding threshold to Inf
// (up to half an ULP, which the bounds do not cover anyway: domain Σ|x·w| < FLT_MAX).
double stored_f32(double v) {
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) return std::copysign(INFINITY, v);
  return static_cast<float>(v);
}

// FP64 → FP32 → BF16 is innocuous double rounding (53 ≥ 2·24 + 2, 24 ≥ 2·8 + 2; Figueroa
// 1995): the result is the BF16 rounding of the FP64 value.
double stored_bf16_value(double v) { return round_to_bf16(static_cast<float>(stored_f32(v))); }

// Half a BF16 ULP at magnitude m: BF16 keeps 8 significant bits over FP32's exponent range, so
// within the binade [2^p, 2^(p+1)) (p ≥ −126; below, the subnormal spacing of 2^-126) the ULP
// is 2^(p−7). A value rounded from anything of magnitude ≤ m moves by at most this much.
double half_bf16_ulp(double m) {
  if (m == 0.0 || !std::isfinite(m)) return m;
  int ex = 0;
  std::frexp(m, &ex);  // m = f·2^ex, f in [0.5, 1): p = ex − 1
  return std::ldexp(1.0, std::max(ex - 1, -126) - 8);
}

// max(l, 0) + log1p(e^-|l|): e^-|l| ≤ 1 never overflows.
double softplus(double l) { return std::max(l, 0.0) + std::log1p(std::exp(-std::fabs(l))); }

double derivative(MoeScoring scoring, double l) {
  if (scoring == MoeScoring::sigmoid) return sigmoid(l) * (1.0 - sigmoid(l));
  const double sp = softplus(l);  // d/dl √softplus(l) = σ/(2√softplus): softplus′ = σ
  return sp == 0.0 ? 0.0 : sigmoid(l) / (2.0 * std::sqrt(sp));  // → 0 as l → −∞
}

// sup |f′| over [lo, hi]. Both derivatives are positive and unimodal: σ′ = σ(1 − σ) peaks at
// l = 0 (σ = 1/2); (√softplus)′ peaks at l* ≈ 0.92142245 (found numerically, unimodality
// checked on a grid in test_oracle_routing.cpp). The sup is at the peak clamped into [lo, hi].
double sup_derivative(MoeScoring scoring, double lo, double hi) {
  constexpr double kSqrtSoftplusPeak = 0.9214224541602128;
  const double peak = scoring == MoeScoring::sigmoid ? 0.0 : kSqrtSoftplusPeak;
  return derivative(scoring, std::clamp(peak, lo, hi));
}

// Softmax over the whole row; NaN everywhere when the row holds a NaN (routing.h).
std::vector<double> softmax_row(const double* l, uint64_t n) {
  std::vector<double> p(n, NAN);
  if (std::any_of(l, l + n, [](double v) { return std::isnan(v); })) return p;
  const double m = *std::max_element(l, l + n);
  double sum = 0.0;
  for (uint64_t e = 0; e < n; ++e) sum += p[e] = std::exp(l[e] - m);
  for (double& v : p) v /= sum;
  return p;
}

struct RowSelection {
  std::vector<uint32_t> ids;
  std::vector<double> weights;
};

// The oracle's order of the row's experts under the total order.
std::vector<uint32_t> ranked(const double* keys, uint64_t n) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t i, uint32_t j) { return ranks_before(keys[i], i, keys[j], j); });
  return order;
}

// The two best experts of [begin, begin + n) under the total order: their keys, best first.
std::pair<double, double> best_two(const double* keys, uint64_t begin, uint64_t n) {
  uint64_t a = begin, b = begin + 1;
  if (ranks_before(keys[b], static_cast<uint32_t>(b), keys[a], static_cast<uint32_t>(a)))
    std::swap(a, b);
  for (uint64_t e = begin + 2; e < begin + n; ++e) {
    const auto id = static_cast<uint32_t>(e);
    if (ranks_before(keys[e], id, keys[a], static_cast<uint32_t>(a))) {
      b = a;
      a = e;
    } else if (ranks_before(keys[e], id, keys[b], static_cast<uint32_t>(b))) {
      b = e;
    }
  }
  return {keys[a], keys[b]};
}

void require_groups(const MoeTopKOp& op) {
  const std::string why = op.group_error();
  if (!why.empty()) throw Error(op.params() + ": " + why);
}

// Renormalised softmax weights of the selected ids (routing.h): e^(l_i − m_sel) over their sum,
// m_sel = the largest selected logit. softmax_i / Σ_sel softmax_j = e^(l_i − m)/Σ_sel e^(l_j − m)
// for any m (the factor e^(m − m')/Σ_all cancels), so this IS the softmax over all E' logits
// renormalised over the selection — evaluated where the largest term is 1 and the sum ≥ 1.
// A NaN in the row: NaN everywhere (as the softmax of the row).
std::vector<double> renormalised_softmax(const double* l, uint64_t n,
                                         const std::vector<uint32_t>& ids) {
  std::vector<double> w(ids.size(), NAN);
  if (std::any_of(l, l + n, [](double v) { return std::isnan(v); })) return w;
  double m_sel = -INFINITY;
  for (uint32_t id : ids) m_sel = std::max(m_sel, l[id]);
  double sum = 0.0;
  for (size_t j = 0; j < ids.size(); ++j) sum += w[j] = std::exp(l[ids[j]] - m_sel);
  for (double& v : w) v /= sum;
  return w;
}

void normalise_and_scale(const MoeTopKOp& op, std::vector<double>& w) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  // Softmax with norm_topk_prob arrives renormalised already (renormalised_softmax).
  if (op.norm_topk_prob && op.scoring != MoeScoring::softmax && sum > 1e-20)
    for (double& v : w) v /= sum;
  for (double& v : w) v *= op.routed_scaling_factor;
}

}  // namespace

// ---- Router GEMM ----

// BF16·BF16 and FP32·BF16 products are exact in FP64 (16 and 32 significant bits ≤ 53); the
// FP64 sum of K terms is within γ_K(2^-53)·Σ|x·w|, far below any FP32 bound.
std::vector<double> router_logits(const MoeRouterOp& op, const RouterInputs& in, Mode mode) {
  const auto [rows, hidden, experts] = op.shape();
  const bool f32_in = op.precision == RouterPrecision::fp32_routing;
  require_size(op.params(), f32_in ? "x_f32" : "x_bf16",
               f32_in ? in.x_f32.size() : in.x_bf16.size(), (Size(rows) * hidden).value());
  require_size(op.params(), "weight", in.weight.size(), (Size(experts) * hidden).value());

  std::vector<double> logits((Size(rows) * experts).value());
  for (uint64_t t = 0; t < rows; ++t) {
    for (uint64_t e = 0; e < experts; ++e) {
      double acc = 0.0;
      for (uint64_t k = 0; k < hidden; ++k) {
        const double x =
            f32_in ? in.x_f32[t * hidden + k] : bf16_bits_to_f32(in.x_bf16[t * hidden + k]);
        acc += x * bf16_bits_to_f32(in.weight[e * hidden + k]);
      }
      if (mode == Mode::faithful)
        acc = op.precision == RouterPrecision::bf16 ? stored_bf16_value(acc) : stored_f32(acc);
      logits[t * experts + e] = acc;
    }
  }
  return logits;
}

// Higham, "Accuracy and Stability of Numerical Algorithms", §3.1: an FP32 dot product of length
// K in any summation order (sequential, SIMD lanes, split-K, warp trees) is within
// γ_K·Σ|x_k·w_k| of the exact value, counting one rounding per product and at most K − 1
// additions on every path, + the underflow floor (bounds.h) of the K products (only added
// later: amplifier 1; additions landing in the subnormals are exact), K·2^-150: tiny products
// (or a logit of cancelling terms) can be subnormal. The bf16 path then stores the FP32 value v̂
// (|v̂| ≤ |l| + e) in BF16: half a BF16 ULP at |l| + e more.
std::vector<double> router_logit_bounds(const MoeRouterOp& op, const RouterInputs& in, double u) {
  const uint64_t hidden = op.shape().hidden;
  const double g = gamma(static_cast<double>(hidden), u);
  RouterInputs abs_in = in;  // Σ|x·w| is the router GEMM over |x| and |w|
  for (uint16_t& b : abs_in.x_bf16) b &= 0x7FFFu;
  for (float& v : abs_in.x_f32) v = std::fabs(v);
  for (uint16_t& b : abs_in.weight) b &= 0x7FFFu;
  const std::vector<double> sum_abs = router_logits(op, abs_in, Mode::exact);
  const std::vector<double> logits = router_logits(op, in, Mode::exact);

  std::vector<double> bounds(sum_abs.size());
  for (size_t i = 0; i < bounds.size(); ++i) {
    const double e = fp32_bound(g * sum_abs[i], static_cast<double>(hidden));
    bounds[i] =
        op.precision == RouterPrecision::bf16 ? e + half_bf16_ulp(std::fabs(logits[i]) + e) : e;
  }
  return bounds;
}

// ---- Top-k selection ----

bool ranks_before(double a, uint32_t i, double b, uint32_t j) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan || b_nan) return a_nan == b_nan ? i < j : b_nan;  // numbers before NaN
  if (a != b) return a > b;
  return i < j;
}

double routing_score(MoeScoring scoring, double logit) {
  switch (scoring) {
    case MoeScoring::sigmoid:
      return sigmoid(logit);
    case MoeScoring::sqrtsoftplus:
      return std::sqrt(softplus(logit));
    case MoeScoring::softmax:
      break;
  }
  return logit;
}

TopKReference select_topk(const MoeTopKOp& op, const TopKInputs& in) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::string params = op.params();
  if (top_k == 0 || top_k > experts)
    throw Error(fmt::format("{}: top_k must be in [1, experts]", params));
  require_size(params, "logits", in.logits.size(), (Size(rows) * experts).value());
  if (op.use_bias) require_size(params, "bias", in.bias.size(), experts);
  if (op.hash) {
    require_size(params, "token_ids", in.token_ids.size(), rows);
    require_size(params, "tid2eid", in.tid2eid.size(), (Size(vocab) * top_k).value());
  }
  require_groups(op);
  const bool softmax = op.scoring == MoeScoring::softmax;

  TopKReference ref;
  if (op.grouped()) ref.group_scores.resize((Size(rows) * op.groups).value());
  ref.ids.reserve(rows * top_k);
  ref.weights.reserve(rows * top_k);
  ref.keys.resize(rows * experts);
  for (uint64_t t = 0; t < rows; ++t) {
    const double* l = in.logits.data() + t * experts;
    double* key = ref.keys.data() + t * experts;
    std::vector<double> score(experts);
    for (uint64_t e = 0; e < experts; ++e) {
      score[e] = routing_score(op.scoring, l[e]);
      key[e] = softmax ? l[e] : score[e] + (op.use_bias ? double{in.bias[e]} : 0.0);
      ref.nan_keys += std::isnan(key[e]) ? 1 : 0;
    }
    const bool renormalised_softmax_weights = softmax && op.norm_topk_prob;
    if (softmax && !renormalised_softmax_weights) score = softmax_row(l, experts);

    std::vector<uint32_t> ids;
    if (op.hash) {
      const uint32_t token = in.token_ids[t];
      if (token >= vocab)
        throw Error(fmt::format("{}: token_ids[{}] = {} is not below vocab", params, t, token));
      for (uint64_t j = 0; j < top_k; ++j) {
        const auto id = static_cast<uint32_t>(in.tid2eid[token * top_k + j]);
        ids.push_back(id >= routed ? 0u : id);
      }
    } else if (op.grouped()) {
      // The g best groups by their top-2 sums, then top_k by key among their experts.
      const uint64_t G = op.groups, size = op.group_size();
      double* gs = ref.group_scores.data() + t * G;
      for (uint64_t q = 0; q < G; ++q) {
        const auto [first, second] = best_two(key, q * size, size);
        gs[q] = first + second;
      }
      std::vector<uint32_t> groups = ranked(gs, G);
      groups.resize(op.topk_groups);
      ref.kept_groups.insert(ref.kept_groups.end(), groups.begin(), groups.end());
      for (uint32_t e : ranked(key, experts)) {
        if (ids.size() == top_k) break;
        if (std::find(groups.begin(), groups.end(), e / size) != groups.end()) ids.push_back(e);
      }
    } else {
      ids = ranked(key, experts);
      ids.resize(top_k);
    }
    std::vector<double> w;
    if (renormalised_softmax_weights)
      w = renormalised_softmax(l, experts, ids);
    else
      for (uint32_t id : ids) w.push_back(score[id]);
    normalise_and_scale(op, w);
    ref.ids.insert(ref.ids.end(), ids.begin(), ids.end());
    ref.weights.insert(ref.weights.end(), w.begin(), w.end());
  }
  return ref;
}

// Score-space bound of one key s + b, s = f(l), for a backend holding a logit l̂, |l̂ − l| ≤ e:
//   f(l̂) − f(l): mean value theorem, |·| ≤ d = sup_[l−e, l+e] |f′|·e.
//   FP32 evaluation of f at l̂ (u = 2^-24; ulp counts cover CUDA's documented maxima —
//   expf 2 ulp, log1pf 1 ulp, IEEE division and sqrtf — and glibc's, each taken as 2 ulp =
//   4u): sigmoid as 1/(1 + e^-l) or e^l/(1 + e^l): exp 4u, 1 + t 4u (the exp error passes at
//   most whole) + u, quotient u (+ 4u for the second form): ≤ 10u. sqrtsoftplus:
//   e^-|l| 4u, log1p passes a relative input error at most whole (t/((1 + t)·log1p t) ≤ 1)
//   and adds 4u, + max(l, 0) (non-negative terms) u, sqrt halves it and adds u: ≤ 10u.
//   With Higham's Lemma 3.1 that is |f̂ − f(l̂)| ≤ γ_10·|f(l̂)| ≤ γ_10·(|s| + d) — as long as
//   nothing underflows; the underflow slack z (score_underflow_slack, below) is absolute.
//   FP32 s + b: u·|ŝ + b| ≤ u·(|s + b| + d + γ_10·(|s| + d) + z). (A sum that lands in the
//   subnormals is exact.) Total: d + eval + z + u·(|s + b| + d + eval + z).
//
// FP32 underflow of f, which the relative γ_10·|s| does not cover (Lemma 3.1 assumes none):
//   sigmoid 1/(1 + e^-l): for l ≤ −88.7 e^-l overflows to +Inf and the FP32 result is 0, while
//     σ(l) < e^l < 2^-127; above, a subnormal quotient is off by ≤ 2^-150 (half a subnormal
//     ULP) beyond its relative bound. The form e^l/(1 + e^l) flushes e^l < 2^-149 to 0 the same
//     way. z = 2^-126.
//   sqrtsoftplus √(max(l,0) + log1p(e^-|l|)), l < 0: e^l in the FP32 subnormals (or flushed to
//     0 below 2^-150) is off by ≤ δ = 2^-148 absolute, which log1p passes at most whole (its
//     slope is ≤ 1); √(a + δ) − √a ≤ √δ = 2^-74. (For l ≥ 0 the argument is ≥ ln 2 and nothing
//     underflows.) z = 2^-74.
double score_underflow_slack(MoeScoring scoring) {
  switch (scoring) {
    case MoeScoring::sigmoid:
      return 0x1p-126;
    case MoeScoring::sqrtsoftplus:
      return 0x1p-74;
    case MoeScoring::softmax:
      break;
  }
  return 0.0;
}

std::vector<double> score_key_bounds(const MoeTopKOp& op, const std::vector<double>& logits,
                                     const std::vector<double>& logit_bounds,
                                     const std::vector<float>& bias) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const std::string params = op.params();
  require_size(params, "logits", logits.size(), (Size(rows) * experts).value());
  require_size(params, "logit_bounds", logit_bounds.size(), logits.size());
  if (op.use_bias) require_size(params, "bias", bias.size(), experts);
  if (op.scoring == MoeScoring::softmax) return logit_bounds;

  constexpr double u = kFp32UnitRoundoff;
  const double g10 = gamma(10.0, u);
  const double z = score_underflow_slack(op.scoring);
  std::vector<double> bounds(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i], e = logit_bounds[i];
    const double b = op.use_bias ? double{bias[i % experts]} : 0.0;
    const double s = routing_score(op.scoring, l);
    const double d = sup_derivative(op.scoring, l - e, l + e) * e;
    const double eval = g10 * (std::fabs(s) + d) + z;
    bounds[i] = d + eval + u * (std::fabs(s + b) + d + eval);
  }
  return bounds;
}

// ---- Group-limited routing ----

std::vector<double> group_scores(const MoeTopKOp& op, const std::vector<double>& keys) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  require_groups(op);
  require_size(op.params(), "keys", keys.size(), (Size(rows) * experts).value());
  const uint64_t G = op.groups, size = op.group_size();
  std::vector<double> out((Size(rows) * G).value());
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t q = 0; q < G; ++q) {
      const auto [first, second] = best_two(keys.data() + t * experts, q * size, size);
      out[t * G + q] = first + second;
    }
  return out;
}

// Bound of a backend's group score Ŝ = fl(k̂_a + k̂_b), {a, b} the backend's two best of the
// group by its own keys k̂, |k̂_i − k_i| ≤ e_i. With T(v) = the largest sum of two distinct
// entries of the group:
//   T(k̂) = k̂_a + k̂_b ≤ k_a + k_b + e_a + e_b ≤ T(k) + E2,
//   T(k̂) ≥ k̂_p + k̂_q ≥ T(k) − e_p − e_q ≥ T(k) − E2    ({p, q} the oracle's top two),
// E2 = the sum of the group's two largest bounds — sound whichever two experts the backend takes
// (a near-tie inside the group may swap them). The FP32 sum then rounds once: u·|T(k̂)| ≤
// u·(|S| + E2) (an overflow to Inf is outside the domain, as for the logits). A NaN score (a NaN
// among the best two) ranks last on both sides: bound 0 there.
std::vector<double> group_score_bounds(const MoeTopKOp& op, const std::vector<double>& keys,
                                       const std::vector<double>& key_bounds) {
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  require_size(op.params(), "key_bounds", key_bounds.size(), keys.size());
  const std::vector<double> scores = group_scores(op, keys);
  const uint64_t G = op.groups, size = op.group_size();
  constexpr double u = kFp32UnitRoundoff;
  std::vector<double> out(scores.size(), 0.0);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t q = 0; q < G; ++q) {
      const double S = scores[t * G + q];
      if (std::isnan(S)) continue;
      const double* e = key_bounds.data() + t * experts + q * size;
      double first = 0.0, second = 0.0;
      for (uint64_t i = 0; i < size; ++i) {
        if (e[i] > first) {
          second = first;
          first = e[i];
        } else if (e[i] > second) {
          second = e[i];
        }
      }
      const double e2 = first + second;
      out[t * G + q] = e2 + u * (std::fabs(S) + e2);
    }
  return out;
}

// ---- Tie stability ----

namespace {

struct RowView {
  const double* key;
  const double* bound;
  bool provably_before(uint32_t i, uint32_t j) const {
    const double a = key[i], b = key[j], sum = bound[i] + bound[j];
    if (std::isnan(a) || std::isnan(b) || sum == 0.0) return ranks_before(a, i, b, j);
    return a - b > sum;
  }
};

std::optional<TieViolation> violation(const RowView& v, uint64_t row, uint32_t before,
                                      uint32_t after, std::string reason) {
  return TieViolation{row,          before,          after,          v.key[before],
                      v.key[after], v.bound[before], v.bound[after], std::move(reason)};
}

// The first invalid id (out of range, repeated), if any.
std::optional<TieViolation> invalid_id(const RowView& v, uint64_t row, const uint32_t* ids,
                                       uint64_t k, uint64_t cols) {
  for (uint64_t p = 0; p < k; ++p) {
    if (ids[p] >= cols)
      return TieViolation{row, ids[p], ids[p], NAN, NAN, NAN, NAN, "id out of range"};
    if (std::find(ids, ids + p, ids[p]) != ids + p)
      return violation(v, row, ids[p], ids[p], "duplicate id");
  }
  return std::nullopt;
}

// `candidate(i)`: whether unselected expert i competes (without groups every expert does; with
// groups only the experts of provably kept groups).
template <class Candidate>
std::optional<TieViolation> set_violation(const RowView& v, uint64_t row, const uint32_t* ids,
                                          uint64_t k, uint64_t cols, Candidate candidate) {
  for (uint32_t i = 0; i < cols; ++i) {
    if (!candidate(i) || std::find(ids, ids + k, i) != ids + k) continue;
    for (uint64_t p = 0; p < k; ++p)
      if (v.provably_before(i, ids[p])) return violation(v, row, i, ids[p], "set");
  }
  return std::nullopt;
}

std::optional<TieViolation> order_violation(const RowView& v, uint64_t row, const uint32_t* ids,
                                            uint64_t k) {
  for (uint64_t p = 0; p < k; ++p)
    for (uint64_t q = p + 1; q < k; ++q)
      if (v.provably_before(ids[q], ids[p])) return violation(v, row, ids[q], ids[p], "order");
  return std::nullopt;
}

// One row's groups as the tie check sees them: scores, bounds, which groups are provably
// kept / out, the oracle's kept groups, and the first selected expert from a provably-out group.
struct RowGroups {
  uint64_t size = 0;  // experts per group
  std::vector<bool> surely_kept, surely_out;
  std::vector<uint32_t> order;  // groups in the oracle's order

  RowGroups(const RowView& g, uint64_t G, uint64_t kept, uint64_t cols)
      : size(cols / G), surely_kept(G), surely_out(G), order(ranked(g.key, G)) {
    for (uint32_t a = 0; a < G; ++a) {
      uint64_t outranked_by = 0, maybe_ahead = 0;
      for (uint32_t b = 0; b < G; ++b) {
        if (a == b) continue;
        outranked_by += g.provably_before(b, a) ? 1 : 0;
        maybe_ahead += g.provably_before(a, b) ? 0 : 1;
      }
      surely_out[a] = outranked_by >= kept;
      surely_kept[a] = maybe_ahead < kept;
    }
  }
  bool oracle_kept(uint32_t group, uint64_t kept) const {
    return std::find(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), group) !=
           order.begin() + static_cast<std::ptrdiff_t>(kept);
  }
};

std::optional<TieViolation> group_violation(const RowView& g, const RowGroups& groups, uint64_t row,
                                            const uint32_t* ids, uint64_t k, uint64_t kept) {
  for (uint64_t p = 0; p < k; ++p) {
    const auto a = static_cast<uint32_t>(ids[p] / groups.size);
    if (!groups.surely_out[a]) continue;
    // Name the kept-th group that provably outranks it (the one the cut falls after).
    uint32_t named = a;
    uint64_t seen = 0;
    for (uint32_t b : groups.order)
      if (b != a && g.provably_before(b, a) && ++seen == kept) named = b;
    return TieViolation{row,
                        named,
                        a,
                        g.key[named],
                        g.key[a],
                        g.bound[named],
                        g.bound[a],
                        fmt::format("group: expert {} selected from group {}, which {} "
                                    "groups provably outrank (top {} kept)",
                                    ids[p], a, kept, kept)};
  }
  return std::nullopt;
}

}  // namespace

TieCheck tie_stability_check(const std::vector<double>& keys, const std::vector<double>& bounds,
                             uint64_t cols, uint64_t top_k,
                             const std::vector<uint32_t>& backend_ids, GroupRule rule) {
  if (cols == 0 || top_k == 0 || top_k > cols || backend_ids.size() % top_k != 0)
    throw Error(fmt::format("tie_stability_check: top_k {} / cols {} / {} ids do not fit", top_k,
                            cols, backend_ids.size()));
  const uint64_t rows = backend_ids.size() / top_k;
  require_size("tie_stability_check", "keys", keys.size(), (Size(rows) * cols).value());
  require_size("tie_stability_check", "bounds", bounds.size(), keys.size());
  const uint64_t G = rule.groups, kept = rule.kept;
  const bool grouped = G > 1;
  if (grouped &&
      (cols % G != 0 || cols / G < 2 || kept == 0 || kept > G || top_k > kept * (cols / G)))
    throw Error(
        fmt::format("tie_stability_check: {} groups, {} kept, do not fit {} experts, top_k {}", G,
                    kept, cols, top_k));
  // Group scores and bounds through the one implementation (an op that carries only the shape).
  std::vector<double> gscore, gbound;
  if (grouped) {
    MoeTopKOp shape;
    shape.dims = {rows, cols, cols, top_k, 0};
    shape.groups = G;
    shape.topk_groups = kept;
    gscore = group_scores(shape, keys);
    gbound = group_score_bounds(shape, keys, bounds);
  }

  TieCheck check;
  check.grouped = grouped;
  check.rows.resize(rows);
  for (uint64_t t = 0; t < rows; ++t) {
    const RowView v{keys.data() + t * cols, bounds.data() + t * cols};
    const uint32_t* ids = backend_ids.data() + t * top_k;
    TieRowVerdict& r = check.rows[t];
    std::optional<RowGroups> groups;
    std::optional<RowView> g;
    if (grouped) {
      g = RowView{gscore.data() + t * G, gbound.data() + t * G};
      groups.emplace(*g, G, kept, cols);
    }
    // The oracle's order of the candidates: every expert, or those of the oracle's kept groups.
    std::vector<uint32_t> order;
    for (uint32_t e : ranked(v.key, cols))
      if (!groups || groups->oracle_kept(static_cast<uint32_t>(e / groups->size), kept))
        order.push_back(e);
    r.cut_gap = INFINITY;
    if (top_k < order.size()) {
      const uint32_t a = order[top_k - 1], b = order[top_k];
      r.cut_gap = v.key[a] - v.key[b];
      r.cut_bound = v.bound[a] + v.bound[b];
      check.cut_unresolved += v.provably_before(a, b) ? 0 : 1;
    }
    std::optional<TieViolation> bad = invalid_id(v, t, ids, top_k, cols), group_bad;
    if (bad) {
      r.set_ok = r.order_ok = false;
    } else {
      std::optional<TieViolation> order_bad = order_violation(v, t, ids, top_k);
      bad = set_violation(v, t, ids, top_k, cols, [&](uint32_t i) {
        return !groups || groups->surely_kept[i / groups->size];
      });
      r.set_ok = !bad;
      r.order_ok = !order_bad;
      if (!bad) bad = std::move(order_bad);
      if (groups) {
        group_bad = group_violation(*g, *groups, t, ids, top_k, kept);
        r.group_ok = !group_bad;
      }
    }
    r.same_set = std::is_permutation(ids, ids + top_k, order.begin());
    check.sets_differ += r.same_set ? 0 : 1;
    if (groups) {
      const uint32_t a = groups->order[kept - 1];
      r.group_cut_gap = INFINITY;
      if (kept < G) {
        const uint32_t b = groups->order[kept];
        r.group_cut_gap = g->key[a] - g->key[b];
        r.group_cut_bound = g->bound[a] + g->bound[b];
        check.group_cut_unresolved += g->provably_before(a, b) ? 0 : 1;
      }
      for (uint64_t p = 0; p < top_k && r.same_groups; ++p)
        r.same_groups = ids[p] < cols &&
                        groups->oracle_kept(static_cast<uint32_t>(ids[p] / groups->size), kept);
      check.groups_differ += r.same_groups ? 0 : 1;
      if (group_bad) {
        ++check.group_failures;
        if (!check.first_group_bad) check.first_group_bad = std::move(group_bad);
      }
    }
    if (!bad) continue;
    ++check.failures;
    if (!check.first_bad) check.first_bad = std::move(bad);
  }
  return check;
}

}  // namespace bufferlab::oracle
