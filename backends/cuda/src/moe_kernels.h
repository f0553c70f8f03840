// Launchers of the CUDA MoE kernels (moe_topk.cu, moe_experts.cu) and the GEMM epilogues
// (gemm.cu). Arguments are device pointers already bound (bounds-checked) by the op
// descriptors and extents from op.shape(); every launcher checks its launch and enqueues on
// `stream`. Private to the CUDA backend.
#pragma once

#include "cuda_platform.h"

#include <cstddef>
#include <cstdint>

namespace bufferlab::BUFFERLAB_CUDA_NS {

// ---- Top-k (moe_topk.cu) ----

enum class TopKScoring : int { softmax = 0, sigmoid = 1, sqrtsoftplus = 2 };

struct TopKLaunch {
  const uint16_t* logits_bf16 = nullptr;   // [rows, experts], or
  const float* logits_f32 = nullptr;       // [rows, experts]
  const float* bias = nullptr;             // [experts] or null
  const uint32_t* token_ids = nullptr;     // [rows] (hash)
  const int32_t* tid2eid = nullptr;        // [vocab, top_k] (hash)
  uint32_t* ids = nullptr;                 // [rows, top_k]
  float* weights = nullptr;                // [rows, top_k]
  unsigned long long* nan_keys = nullptr;  // device counter, added to
  uint32_t* error_flag = nullptr;          // set to 1 on a token id ≥ vocab
  uint64_t rows = 0, experts = 0, routed_experts = 0, top_k = 0, vocab = 0;
  uint32_t groups = 1, kept_groups = 1;  // router groups G (1: none) and the g kept
  TopKScoring scoring = TopKScoring::softmax;
  bool norm_topk_prob = false, hash = false;
  bool ties_to_higher = false;  // mutant M-TIE
  bool group_by_best = false;   // mutant M-GROUP: groups ranked by their single best key
  float routed_scaling_factor = 1.0f;
};

// One warp per row; experts ≤ 1024 and top_k ≤ 32 (the caller refuses more); with groups > 1
// the caller has checked MoeTopKOp::group_error().
void launch_topk(const TopKLaunch& a, cudaStream_t stream);

// ---- Expert grouping, gather, experts (moe_experts.cu) ----

// Temporary storage cub::DeviceRadixSort needs to sort up to max_slots keys ≤ max_experts.
size_t grouping_sort_temp_bytes(uint64_t max_slots, uint64_t max_experts);

// The gather order of MoeGatherOp (moe.h): after this, values_out[g] is the slot of gathered
// row g (g < offsets[experts]) and offsets[e] the first gathered row of expert e, for
// e ∈ [0, experts]; offsets[experts] = the routed-slot count. Keys are min(id, experts), so
// non-routed slots sort last; the radix sort is stable, so equal experts stay in slot order.
struct GroupingLaunch {
  const uint32_t* ids = nullptr;  // [slots]
  uint64_t slots = 0, experts = 0;
  uint32_t* keys[2] = {nullptr, nullptr};    // [slots] each
  uint32_t* values[2] = {nullptr, nullptr};  // [slots] each
  void* temp = nullptr;
  size_t temp_bytes = 0;
  uint32_t* offsets = nullptr;  // [experts + 1]
};
// Returns the buffer holding the sorted values (the slot of each gathered row).
const uint32_t* launch_grouping(const GroupingLaunch& a, cudaStream_t stream);

// dst row g ← src row (slot_of[g] / divisor), for g < min(count, *device_count) where
// device_count (optional) is read on the device. Rows are `width` BF16 values; src rows are
// src_stride apart, dst rows dst_stride apart. The gather (divisor top_k) and the down
// projection's input windows (divisor 1) use it.
struct RowGatherLaunch {
  const uint16_t* src = nullptr;
  uint16_t* dst = nullptr;
  const uint32_t* slot_of = nullptr;       // [count]
  const uint32_t* device_count = nullptr;  // optional bound read on the device
  uint64_t count = 0, width = 0, src_stride = 0, dst_stride = 0, divisor = 1;
};
void launch_row_gather(const RowGatherLaunch& a, cudaStream_t stream);

// dst row slot_of[g] ← src row g, g < count (the expert GEMM outputs back to their slots).
struct RowScatterLaunch {
  const uint16_t* src = nullptr;
  uint16_t* dst = nullptr;
  const uint32_t* slot_of = nullptr;  // [count]
  uint64_t count = 0, width = 0, src_stride = 0, dst_stride = 0;
};
void launch_row_scatter(const RowScatterLaunch& a, cudaStream_t stream);

// a = silu(g) · u in place of g, FP32 math (limit > 0: g ≤ limit, u ∈ [−limit, limit]).
void launch_swiglu(uint16_t* gate, const uint16_t* up, uint64_t n, float limit,
                   cudaStream_t stream);

struct CombineLaunch {
  const uint32_t* ids = nullptr;    // [rows, top_k]
  const float* weights = nullptr;   // [rows, top_k]
  const uint16_t* down = nullptr;   // [rows·top_k, width]
  const uint16_t* input = nullptr;  // [rows, width] or null
  uint16_t* output = nullptr;       // [rows, width]; may equal input
  uint32_t* error_flag = nullptr;   // set to 1 on an id ≥ experts + zero_experts (or a
                                    // zero expert without an input)
  uint64_t rows = 0, top_k = 0, experts = 0, zero_experts = 0, width = 0;
};
void launch_combine(const CombineLaunch& a, cudaStream_t stream);

// ---- GEMM epilogues and conversions (gemm.cu) ----

// out[r, c] = bf16(acc[r, c] + out[r, c]) (accumulate) or bf16(silu(acc) · out) (swiglu),
// over rows × cols, acc FP32 rows of `cols`, out rows out_stride apart.
void launch_gemm_epilogue(const float* acc, uint16_t* out, uint64_t rows, uint64_t cols,
                          uint64_t out_stride, bool swiglu, cudaStream_t stream);
// dst[i] = (float)src[i] (BF16 → FP32, exact).
void launch_widen_bf16(const uint16_t* src, float* dst, uint64_t n, cudaStream_t stream);
// Kernel mutant B14: v ← round_to_bf16(v) over rows × cols FP32 values, rows stride apart.
void launch_round_to_bf16(float* v, uint64_t rows, uint64_t cols, uint64_t stride,
                          cudaStream_t stream);

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
