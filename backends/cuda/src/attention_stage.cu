// CUDA attention staging and KV-cache write (docs/spec/attention.md §2–§3, ops/attention.h).
//   stage:  one warp per (row, head), 4 warps a block: the Q copy and the K scratch apply the
//           stage function (attn_device::stage_head) to the head row, the V scratch copies it;
//           phantom rows (tokens..rows−1 of the FP8 path) are written zero.
//   cache:  one warp per (row, KV head): the slot comes from `slots` (outside the cache: the
//           row is skipped, nothing read or written); K through the same stage_head when the
//           source is qkv_output (decode, verify), else copied from the K scratch; V copied.
// Every output element is written by exactly one lane; the warp's only collective is the
// qk_norm factor's shuffle, so the whole warp takes the same branches around stage_head.
#include <algorithm>
#include <cstdint>

#include "attention_kernels.h"
#include "cuda_check.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace attn_device;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarpSize;
constexpr uint64_t kMaxBlocks = 65535 * 4;

unsigned blocks_for(uint64_t items, uint64_t per_block) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + per_block - 1) / per_block)));
}

// SwapHW: kernel mutant M-MROPE (attn_device::stage_head).
template <bool SwapHW>
__global__ void __launch_bounds__(kThreads) attn_stage_kernel(AttnStageLaunch a) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const uint64_t hd = a.stage.hd, width = a.heads * hd, n = a.rows * a.heads;
  const uint64_t warp0 = blockIdx.x * uint64_t{kWarps} + threadIdx.x / kWarpSize;
  for (uint64_t item = warp0; item < n; item += uint64_t{gridDim.x} * kWarps) {
    const uint64_t row = item / a.heads, head = item % a.heads;
    uint16_t* dst = a.dst + row * width + head * hd;
    if (row >= a.tokens) {  // phantom row
      for (uint64_t d = lane; d < hd; d += kWarpSize) dst[d] = 0;
      continue;
    }
    const uint16_t* x = a.src + row * a.src_stride + a.col0 + head * hd;
    if (a.staged) {
      stage_head<SwapHW>(x, row, a.stage, lane, StageToBf16{dst});
    } else {
      for (uint64_t d = lane; d < hd; d += kWarpSize) dst[d] = x[d];
    }
  }
}

template <bool SwapHW>
__global__ void __launch_bounds__(kThreads) attn_cache_write_kernel(AttnCacheWriteLaunch a) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const uint64_t hd = a.stage.hd, n = a.rows * a.nkv;
  const uint64_t warp0 = blockIdx.x * uint64_t{kWarps} + threadIdx.x / kWarpSize;
  for (uint64_t item = warp0; item < n; item += uint64_t{gridDim.x} * kWarps) {
    const uint64_t row = item / a.nkv, head = item % a.nkv;
    const int64_t slot = a.slots[row];
    // Warp-uniform: a padding row (slot < 0) or a slot past the cache is never dereferenced.
    if (slot < 0 || static_cast<uint64_t>(slot) >= a.cache_slots) continue;
    const uint64_t at = (static_cast<uint64_t>(slot) * a.nkv + head) * hd;
    const uint16_t* k = a.k_src + row * a.src_stride + a.k_col0 + head * hd;
    const uint16_t* v = a.v_src + row * a.src_stride + a.v_col0 + head * hd;
    if (a.staged) {
      stage_head<SwapHW>(k, row, a.stage, lane, StageToBf16{a.k_cache + at});
    } else {
      for (uint64_t d = lane; d < hd; d += kWarpSize) a.k_cache[at + d] = k[d];
    }
    for (uint64_t d = lane; d < hd; d += kWarpSize) a.v_cache[at + d] = v[d];
  }
}

}  // namespace

void launch_attn_stage(const AttnStageLaunch& a, cudaStream_t stream, Mutant mutant) {
  const uint64_t items = a.rows * a.heads;
  if (items == 0 || a.stage.hd == 0) return;
  const auto kernel =
      mutant == Mutant::M_MROPE ? attn_stage_kernel<true> : attn_stage_kernel<false>;
  BL_LAUNCH_NAMED("attn_stage_kernel", kernel, blocks_for(items, kWarps), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_attn_cache_write(const AttnCacheWriteLaunch& a, cudaStream_t stream, Mutant mutant) {
  const uint64_t items = a.rows * a.nkv;
  if (items == 0 || a.stage.hd == 0) return;
  const auto kernel =
      mutant == Mutant::M_MROPE ? attn_cache_write_kernel<true> : attn_cache_write_kernel<false>;
  BL_LAUNCH_NAMED("attn_cache_write_kernel", kernel, blocks_for(items, kWarps), kThreads, 0, stream,
                  a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
