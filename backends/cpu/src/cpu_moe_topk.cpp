// CPU MoE top-k selection (docs/spec/numerics.md §2, oracle/routing.h): rows in parallel, each row
// one pass over its E' experts keeping a sorted insertion buffer of the best top_k under THE total
// order (key descending, then index ascending; NaN keys after every number, by index), then the
// weights of the selected experts. Fixed stack arrays only (kMaxTopK); nothing is allocated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

// Below this many scored logits the thread start-up costs more than the rows.
constexpr uint64_t kParallelMinLogits = uint64_t{1} << 14;

// The total order; `ties_high` is kernel mutant M-TIE (exact numeric ties to the HIGHER index).
bool ranks_before(float a, uint32_t i, float b, uint32_t j, bool ties_high) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan || b_nan) return a_nan == b_nan ? i < j : b_nan;
  if (a != b) return a > b;
  return ties_high ? i > j : i < j;
}

// s = f(l) in FP32 with the accurate std::exp / std::log1p; softplus stable for large |l|.
float score_of(MoeScoring scoring, float l) {
  switch (scoring) {
    case MoeScoring::sigmoid:
      return 1.0f / (1.0f + std::exp(-l));
    case MoeScoring::sqrtsoftplus:
      return std::sqrt(std::max(l, 0.0f) + std::log1p(std::exp(-std::fabs(l))));
    case MoeScoring::softmax:
      break;
  }
  return l;
}

// One row's logits, BF16 or FP32, read as FP32.
struct RowLogits {
  const uint16_t* bf16;
  const float* f32;
  float operator[](uint64_t e) const { return f32 != nullptr ? f32[e] : bf16_bits_to_f32(bf16[e]); }
};

struct TopKParams {
  MoeScoring scoring;
  const float* bias;  // null unless use_bias
  uint64_t experts, routed, top_k, vocab;
  uint64_t groups, kept_groups;  // router groups G (1: none) and the g kept
  bool norm, hash, ties_high;
  bool group_by_best;  // kernel mutant M-GROUP: groups ranked by their single best key
  float scale;
  const uint32_t* token_ids;
  const int32_t* tid2eid;
};

float key_of(const TopKParams& q, const RowLogits& l, uint64_t e) {
  if (q.scoring == MoeScoring::softmax) return l[e];
  const float s = score_of(q.scoring, l[e]);
  return q.bias != nullptr ? s + q.bias[e] : s;
}

// Group-limited routing (docs/spec/numerics.md §2): marks the g best groups in `kept`, ranked by
// the FP32 sum of each group's two best keys (larger first) under the total order of groups
// (score descending, group index ascending, NaN last) — by the single best key under M-GROUP.
void keep_groups(const TopKParams& q, const float* keys, bool* kept) {
  const uint64_t size = q.experts / q.groups;
  float best_score[kMaxRouterGroups];
  uint32_t best_group[kMaxRouterGroups];
  uint64_t filled = 0;
  for (uint64_t g = 0; g < q.groups; ++g) {
    const float* k = keys + g * size;
    uint32_t a = 0, b = 1;  // the group's best two, by position in the group
    if (ranks_before(k[1], 1, k[0], 0, false)) std::swap(a, b);
    for (uint32_t i = 2; i < size; ++i) {
      if (ranks_before(k[i], i, k[a], a, false)) {
        b = a;
        a = i;
      } else if (ranks_before(k[i], i, k[b], b, false)) {
        b = i;
      }
    }
    const float score = q.group_by_best ? k[a] : k[a] + k[b];
    const auto id = static_cast<uint32_t>(g);
    if (filled == q.kept_groups &&
        !ranks_before(score, id, best_score[filled - 1], best_group[filled - 1], false))
      continue;
    uint64_t at = filled < q.kept_groups ? filled++ : filled - 1;
    for (; at > 0 && ranks_before(score, id, best_score[at - 1], best_group[at - 1], false); --at) {
      best_score[at] = best_score[at - 1];
      best_group[at] = best_group[at - 1];
    }
    best_score[at] = score;
    best_group[at] = id;
  }
  std::fill(kept, kept + q.groups, false);
  for (uint64_t j = 0; j < filled; ++j) kept[best_group[j]] = true;
}

// The best top_k of the row in order into ids (among the kept groups' experts when grouped);
// returns the NaN keys met.
uint64_t select_row(const TopKParams& q, const RowLogits& l, uint32_t* ids) {
  float best[kMaxTopK];
  float keys[kMaxScoredExperts];
  bool kept[kMaxRouterGroups];
  const bool grouped = q.groups > 1;
  if (grouped) {
    for (uint64_t e = 0; e < q.experts; ++e) keys[e] = key_of(q, l, e);
    keep_groups(q, keys, kept);
  }
  const uint64_t size = grouped ? q.experts / q.groups : 1;
  uint64_t filled = 0, nan_keys = 0;
  for (uint64_t e = 0; e < q.experts; ++e) {
    const float key = grouped ? keys[e] : key_of(q, l, e);
    nan_keys += std::isnan(key) ? 1 : 0;
    if (grouped && !kept[e / size]) continue;
    const auto id = static_cast<uint32_t>(e);
    if (filled == q.top_k && !ranks_before(key, id, best[filled - 1], ids[filled - 1], q.ties_high))
      continue;
    uint64_t at = filled < q.top_k ? filled++ : filled - 1;
    for (; at > 0 && ranks_before(key, id, best[at - 1], ids[at - 1], q.ties_high); --at) {
      best[at] = best[at - 1];
      ids[at] = ids[at - 1];
    }
    best[at] = key;
    ids[at] = id;
  }
  return nan_keys;
}

// Hash layers: ids from the table (read as unsigned, ≥ routed clamped to 0); the NaN keys
// are still counted as the selection would have met them (oracle/routing.cpp).
uint64_t hash_row(const TopKParams& q, const RowLogits& l, uint32_t token, uint32_t* ids) {
  uint64_t nan_keys = 0;
  for (uint64_t e = 0; e < q.experts; ++e) nan_keys += std::isnan(key_of(q, l, e)) ? 1 : 0;
  for (uint64_t j = 0; j < q.top_k; ++j) {
    const auto id = static_cast<uint32_t>(q.tid2eid[token * q.top_k + j]);
    ids[j] = id >= q.routed ? 0u : id;
  }
  return nan_keys;
}

// Weights of the selected ids, then normalised and scaled (oracle/routing.h):
//   softmax without norm_topk_prob: the softmax over all E' logits (max-subtracted, FP32)
//     gathered — a weight may underflow to 0, a defined result;
//   softmax with norm_topk_prob: e^(l_i − m_sel) / Σ_sel e^(l_j − m_sel), m_sel = the largest
//     selected logit — the renormalised softmax in the form whose largest term is 1, so a hash
//     layer's experts far below the row maximum do not underflow to 0/0;
//   sigmoid / sqrtsoftplus: s = f(l) pre-bias, renormalised when Σ > 1e-20.
// A softmax row holding a NaN has NaN weights everywhere.
void weigh_row(const TopKParams& q, const RowLogits& l, const uint32_t* ids, float* w) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  if (q.scoring == MoeScoring::softmax && q.norm) {
    bool row_nan = false;
    for (uint64_t e = 0; e < q.experts; ++e) row_nan |= std::isnan(l[e]);
    float m_sel = -std::numeric_limits<float>::infinity();
    for (uint64_t j = 0; j < q.top_k; ++j) m_sel = std::max(m_sel, l[ids[j]]);
    float sum = 0.0f;
    for (uint64_t j = 0; j < q.top_k; ++j)
      sum += w[j] = row_nan ? kNan : std::exp(l[ids[j]] - m_sel);
    for (uint64_t j = 0; j < q.top_k; ++j) w[j] = w[j] / sum * q.scale;
    return;
  }
  if (q.scoring == MoeScoring::softmax) {
    float m = -std::numeric_limits<float>::infinity();
    for (uint64_t e = 0; e < q.experts; ++e) m = (std::isnan(l[e]) || l[e] > m) ? l[e] : m;
    float sum = 0.0f;
    for (uint64_t e = 0; e < q.experts; ++e) sum += std::exp(l[e] - m);
    for (uint64_t j = 0; j < q.top_k; ++j) w[j] = std::exp(l[ids[j]] - m) / sum;
  } else {
    for (uint64_t j = 0; j < q.top_k; ++j) w[j] = score_of(q.scoring, l[ids[j]]);
    if (q.norm) {
      float sum = 0.0f;
      for (uint64_t j = 0; j < q.top_k; ++j) sum += w[j];
      if (static_cast<double>(sum) > 1e-20)
        for (uint64_t j = 0; j < q.top_k; ++j) w[j] /= sum;
    }
  }
  for (uint64_t j = 0; j < q.top_k; ++j) w[j] *= q.scale;
}

void refuse_launch(const MoeTopKOp& op) {
  const auto& d = op.shape();
  const char* why = d.experts > kMaxScoredExperts ? "experts exceed kMaxScoredExperts (1024)"
                    : d.top_k > kMaxTopK          ? "top_k exceeds kMaxTopK (32)"
                    : d.top_k == 0 || d.top_k > d.experts ? "top_k must be in [1, experts]"
                                                          : nullptr;
  if (why != nullptr) throw Error(op.params() + ": " + why);
  if (const std::string groups = op.group_error(); !groups.empty())
    throw Error(op.params() + ": " + groups);
}

}  // namespace

TopKDiagnostics moe_topk(const Workspace& ws, const MoeTopKOp& op, Mutant mutant) {
  refuse_launch(op);
  const MoeTopKOp::Bound p = op.bind(ws);
  const auto [rows, experts, routed, top_k, vocab] = op.shape();
  const TopKParams q{op.scoring,
                     op.use_bias ? p.bias : nullptr,
                     experts,
                     routed,
                     top_k,
                     vocab,
                     op.groups,
                     op.topk_groups,
                     op.norm_topk_prob,
                     op.hash,
                     mutant == Mutant::M_TIE,
                     mutant == Mutant::M_GROUP,
                     static_cast<float>(op.routed_scaling_factor),
                     p.token_ids,
                     p.tid2eid};
  if (op.hash) {
    // Checked before the parallel loop: an exception may not leave an OpenMP region.
    for (uint64_t t = 0; t < rows; ++t)
      if (p.token_ids[t] >= vocab)
        throw Error(op.params() + ": token_ids[" + std::to_string(t) +
                    "] = " + std::to_string(p.token_ids[t]) + " is not below vocab");
  }

  const auto row_count = static_cast<int64_t>(rows);
  const uint64_t nan_keys =
      parallel_sum(row_count, rows * experts >= kParallelMinLogits, [&](int64_t t) {
        const auto row = static_cast<uint64_t>(t);
        const RowLogits l{p.logits_bf16 != nullptr ? p.logits_bf16 + row * experts : nullptr,
                          p.logits_f32 != nullptr ? p.logits_f32 + row * experts : nullptr};
        uint32_t* ids = p.ids + row * top_k;
        const uint64_t nan_row =
            q.hash ? hash_row(q, l, q.token_ids[row], ids) : select_row(q, l, ids);
        weigh_row(q, l, ids, p.weights + row * top_k);
        return nan_row;
      });
  return {nan_keys};
}

}  // namespace bufferlab::cpu
