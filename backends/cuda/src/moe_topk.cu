// CUDA MoE top-k selection (docs/spec/numerics.md §2; the semantics of oracle/src/routing.cpp):
// one warp per token row, expert e = lane + 32·i held by lane `lane` in key[i] (E' ≤ 1024, so
// i < 32 and the keys stay in registers). With router groups the warp first stages its keys in
// dynamic shared memory (launched only then), scores each group (lanes stride over groups),
// keeps the g best and drops the other groups' experts from the candidates. Each of the top_k
// rounds takes every lane's best remaining expert and reduces them with a butterfly under THE total
// order (key descending, then index ascending; NaN below every number, NaNs by index): a strict
// total order, so every lane agrees on the winner. Keys and weights use the accurate expf / log1pf
// / IEEE division and sqrt (no fast-math intrinsics); sums run in a fixed order.
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "moe_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpSize * kWarpsPerBlock;
constexpr int kPerLane = 32;  // 1024 experts / 32 lanes
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kNone = 0xFFFFFFFFu;

__device__ float load_logit(const TopKLaunch& a, uint64_t at) {
  return a.logits_f32 != nullptr ? a.logits_f32[at] : bf16_bits_to_f32(a.logits_bf16[at]);
}

// s = f(l): sigmoid 1/(1 + e^-l); sqrtsoftplus √(max(l, 0) + log1p(e^-|l|)) (stable for
// large |l|; a NaN logit gives NaN through the log1p term). Softmax keys are the logit.
__device__ float routing_score(TopKScoring scoring, float l) {
  if (scoring == TopKScoring::sigmoid) return 1.0f / (1.0f + expf(-l));
  if (scoring == TopKScoring::sqrtsoftplus)
    return sqrtf((l > 0.0f ? l : 0.0f) + log1pf(expf(-fabsf(l))));
  return l;
}

// The total order of oracle/routing.h; the mutant sends exact ties to the higher index.
__device__ bool ranks_before(float a, uint32_t i, float b, uint32_t j, bool ties_to_higher) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan || b_nan) return a_nan == b_nan ? i < j : b_nan;
  if (a != b) return a > b;
  return ties_to_higher ? i > j : i < j;
}

// (key, index) candidate: kNone ranks below everything.
__device__ bool better(float a, uint32_t i, float b, uint32_t j, bool ties_to_higher) {
  if (i == kNone) return false;
  if (j == kNone) return true;
  return ranks_before(a, i, b, j, ties_to_higher);
}

__device__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Butterfly sum: every lane ends with the same bits (IEEE addition is commutative).
__device__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ uint32_t warp_sum_u32(uint32_t v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Group-limited routing (docs/spec/numerics.md §2): clears from `available` the experts of every
// group outside the g best, groups ranked by the FP32 sum of their two best keys (larger first)
// under the total order of groups (score descending, index ascending, NaN last) — by the single
// best key under mutant M-GROUP. `stage` is this warp's [E' keys | G scores | G kept flags].
// A group is kept iff fewer than g groups rank before it: the order is strict, so exactly g are.
// Floats of one warp's group stage: E' keys, G scores, G kept flags. The kernel's per-warp
// offset and the launch's dynamic shared memory both come from here.
constexpr uint64_t group_stage_floats(uint64_t experts, uint64_t groups) {
  return experts + 2 * groups;
}

__device__ uint32_t drop_unkept_groups(const TopKLaunch& a, const float (&key)[kPerLane],
                                       uint32_t available, uint32_t lane, float* stage) {
  const uint32_t experts = static_cast<uint32_t>(a.experts), size = experts / a.groups;
  float* keys = stage;
  float* score = stage + experts;
  float* kept = score + a.groups;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if ((available >> i) & 1u) keys[lane + kWarpSize * i] = key[i];
  __syncwarp();
  for (uint32_t g = lane; g < a.groups; g += kWarpSize) {
    const float* k = keys + g * size;
    uint32_t first = 0, second = 1;
    if (ranks_before(k[1], 1, k[0], 0, false)) {
      first = 1;
      second = 0;
    }
    for (uint32_t i = 2; i < size; ++i) {
      if (ranks_before(k[i], i, k[first], first, false)) {
        second = first;
        first = i;
      } else if (ranks_before(k[i], i, k[second], second, false)) {
        second = i;
      }
    }
    score[g] = a.group_by_best ? k[first] : k[first] + k[second];
  }
  __syncwarp();
  for (uint32_t g = lane; g < a.groups; g += kWarpSize) {
    uint32_t ahead = 0;
    for (uint32_t p = 0; p < a.groups; ++p) ahead += ranks_before(score[p], p, score[g], g, false);
    kept[g] = ahead < a.kept_groups ? 1.0f : 0.0f;
  }
  __syncwarp();
  // Not unrolled: 32 divisions in flight took the kernel from 56 to 125 registers (69 so).
#pragma unroll 1
  for (int i = 0; i < kPerLane; ++i)
    if (((available >> i) & 1u) && kept[(lane + kWarpSize * i) / size] == 0.0f)
      available &= ~(1u << i);
  return available;
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopKLaunch a) {
  BL_DYNAMIC_SHARED(float, group_stage);
  const uint64_t row = static_cast<uint64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= a.rows) return;  // uniform per warp: a warp is one row
  const uint32_t lane = threadIdx.x % kWarpSize;
  const uint64_t base = row * a.experts;
  const bool softmax = a.scoring == TopKScoring::softmax;

  // Keys (and the softmax row maximum over the non-NaN logits).
  float key[kPerLane];
  uint32_t available = 0;
  uint32_t nan_keys = 0;
  bool row_nan = false;
  float row_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const uint32_t e = lane + kWarpSize * i;
    key[i] = 0.0f;
    if (e >= a.experts) continue;
    const float l = load_logit(a, base + e);
    float k = l;
    if (!softmax) {
      k = routing_score(a.scoring, l);
      if (a.bias != nullptr) k = k + a.bias[e];
    }
    key[i] = k;
    available |= 1u << i;
    nan_keys += isnan(k) ? 1u : 0u;
    if (isnan(l))
      row_nan = true;
    else
      row_max = fmaxf(row_max, l);
  }
  nan_keys = warp_sum_u32(nan_keys);
  if (lane == 0 && nan_keys > 0) atomicAdd(a.nan_keys, static_cast<unsigned long long>(nan_keys));

  // Softmax over all E' logits: max-subtracted, accurate expf; a NaN row is NaN everywhere.
  // With norm_topk_prob the weights need only the selected logits (below): no row pass.
  const bool renormalised_softmax = softmax && a.norm_topk_prob;
  float m = 0.0f, denominator = 1.0f;
  if (softmax) row_nan = __any_sync(kFullMask, row_nan);
  if (softmax && !renormalised_softmax) {
    m = warp_max(row_max);
    float partial = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if ((available >> i) & 1u) partial += expf(key[i] - m);
    denominator = warp_sum(partial);
  }

  if (a.groups > 1 && !a.hash) {
    const uint32_t warp = threadIdx.x / kWarpSize;
    available = drop_unkept_groups(a, key, available, lane,
                                   group_stage + warp * group_stage_floats(a.experts, a.groups));
  }

  // Lane j < top_k ends up holding the j-th id.
  uint32_t my_id = 0;
  if (a.hash) {
    const uint32_t token = a.token_ids[row];
    if (token >= a.vocab) {  // uniform per warp
      if (lane == 0) atomicExch(a.error_flag, 1u);
      return;
    }
    if (lane < a.top_k) {
      const auto id =
          static_cast<uint32_t>(a.tid2eid[static_cast<uint64_t>(token) * a.top_k + lane]);
      my_id = id >= a.routed_experts ? 0u : id;
    }
  } else {
    for (uint32_t j = 0; j < a.top_k; ++j) {
      // The lane's best. Its experts e = lane + 32·i grow with the slot i, so comparing slots
      // orders them exactly as comparing expert indices does; the unrolled loop then compares
      // compile-time constants. Comparing the indices e kept 32 of them in registers across
      // the rounds (ptxas: 80 registers and a 12-byte spill; 55 and none with slots).
      float best_key = 0.0f;
      int best_slot = -1;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (((available >> i) & 1u) &&
            (best_slot < 0 || ranks_before(key[i], static_cast<uint32_t>(i), best_key,
                                           static_cast<uint32_t>(best_slot), a.ties_to_higher))) {
          best_key = key[i];
          best_slot = i;
        }
      }
      uint32_t best = best_slot < 0 ? kNone : lane + kWarpSize * static_cast<uint32_t>(best_slot);
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        const float other_key = __shfl_xor_sync(kFullMask, best_key, offset);
        const uint32_t other = __shfl_xor_sync(kFullMask, best, offset);
        if (better(other_key, other, best_key, best, a.ties_to_higher)) {
          best_key = other_key;
          best = other;
        }
      }
      // top_k ≤ E' (checked by the caller), so a candidate is always left.
      if (lane == best % kWarpSize) available &= ~(1u << (best / kWarpSize));
      if (lane == j) my_id = best;
    }
  }

  // Weights in selection order: softmax probability, or the pre-bias score s. Softmax with
  // norm_topk_prob (oracle/routing.h): e^(l_i − m_sel) / Σ_sel e^(l_j − m_sel), m_sel = the
  // largest selected logit — the renormalised softmax with its largest term 1, so a hash
  // layer's experts far below the row maximum do not underflow to 0/0.
  const float selected_logit = lane < a.top_k ? load_logit(a, base + my_id) : -INFINITY;
  const float m_sel = renormalised_softmax ? warp_max(selected_logit) : 0.0f;
  float w = 0.0f;
  if (lane < a.top_k) {
    const float l = selected_logit;
    if (softmax && row_nan)
      w = __int_as_float(0x7FC00000);
    else if (renormalised_softmax)
      w = expf(l - m_sel);
    else if (softmax)
      w = expf(l - m) / denominator;
    else
      w = routing_score(a.scoring, l);
  }
  float sum = 0.0f;  // in selection order, as the oracle sums
  for (uint32_t j = 0; j < a.top_k; ++j) sum += __shfl_sync(kFullMask, w, static_cast<int>(j));
  if (a.norm_topk_prob && (softmax || static_cast<double>(sum) > 1e-20)) w = w / sum;
  w = w * a.routed_scaling_factor;
  if (lane < a.top_k) {
    a.ids[row * a.top_k + lane] = my_id;
    a.weights[row * a.top_k + lane] = w;
  }
}

}  // namespace

void launch_topk(const TopKLaunch& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  if (a.experts > static_cast<uint64_t>(kWarpSize) * kPerLane || a.top_k > kWarpSize ||
      a.top_k == 0 || a.top_k > a.experts)
    throw Error("moe_topk: experts " + std::to_string(a.experts) + " / top_k " +
                std::to_string(a.top_k) + " outside the kernel's range");
  const uint64_t blocks = (a.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7FFFFFFFull)
    throw Error("moe_topk: " + std::to_string(a.rows) + " rows exceed the grid limit");
  // Group staging: per warp E' keys, G scores and G flags (≤ 4·(1024 + 1024)·4 B = 32 KiB).
  const size_t stage_bytes =
      a.groups > 1 ? kWarpsPerBlock * group_stage_floats(a.experts, a.groups) * sizeof(float) : 0;
  BL_LAUNCH(topk_kernel, static_cast<unsigned>(blocks), kThreads, stage_bytes, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
