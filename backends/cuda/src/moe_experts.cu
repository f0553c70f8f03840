// CUDA kernels of the routed experts (docs/spec/numerics.md §2, moe.h): the expert grouping
// (a stable cub::DeviceRadixSort of (min(id, E), slot) pairs, then the per-expert row
// offsets read off the sorted keys), row gathers / scatters by slot, the SwiGLU product and
// the weighted combine. Simple grid-stride kernels; rows move 16 bytes at a time when every
// row start is 16-byte aligned.
#include "cuda_libraries.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "moe_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 65535;

unsigned blocks_for(uint64_t items, uint64_t per_block = kThreads) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + per_block - 1) / per_block)));
}

// Bits needed for keys in [0, experts].
int key_bits(uint64_t experts) {
  int bits = 1;
  while (bits < 32 && (uint64_t{1} << bits) <= experts) ++bits;
  return bits;
}

__global__ void make_sort_pairs(const uint32_t* ids, uint64_t slots, uint32_t experts,
                                uint32_t* keys, uint32_t* values) {
  for (uint64_t s = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; s < slots;
       s += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t id = ids[s];
    keys[s] = id < experts ? id : experts;
    values[s] = static_cast<uint32_t>(s);
  }
}

// offsets[e] = the first i with sorted[i] ≥ e (n when none), e ∈ [0, experts]: index i writes
// the experts in (sorted[i−1], sorted[i]] (i = n: (sorted[n−1], experts]), each e exactly once.
__global__ void offsets_from_sorted(const uint32_t* sorted, uint64_t n, uint32_t experts,
                                    uint32_t* offsets) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i <= n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t lo = i == 0 ? 0u : sorted[i - 1] + 1u;
    const uint32_t hi = i == n ? experts : sorted[i];
    for (uint32_t e = lo; e <= hi; ++e) offsets[e] = static_cast<uint32_t>(i);
  }
}

template <typename V>
__global__ void row_gather_kernel(RowGatherLaunch a) {
  constexpr uint64_t kPer = sizeof(V) / sizeof(uint16_t);
  uint64_t count = a.count;
  if (a.device_count != nullptr && *a.device_count < count) count = *a.device_count;
  const uint64_t units = a.width / kPer;
  for (uint64_t g = blockIdx.x; g < count; g += gridDim.x) {
    const uint64_t src_row = a.slot_of[g] / a.divisor;
    const V* src = reinterpret_cast<const V*>(a.src + src_row * a.src_stride);
    V* dst = reinterpret_cast<V*>(a.dst + g * a.dst_stride);
    for (uint64_t c = threadIdx.x; c < units; c += blockDim.x) dst[c] = src[c];
  }
}

template <typename V>
__global__ void row_scatter_kernel(RowScatterLaunch a) {
  constexpr uint64_t kPer = sizeof(V) / sizeof(uint16_t);
  const uint64_t units = a.width / kPer;
  for (uint64_t g = blockIdx.x; g < a.count; g += gridDim.x) {
    const V* src = reinterpret_cast<const V*>(a.src + g * a.src_stride);
    V* dst = reinterpret_cast<V*>(a.dst + static_cast<uint64_t>(a.slot_of[g]) * a.dst_stride);
    for (uint64_t c = threadIdx.x; c < units; c += blockDim.x) dst[c] = src[c];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16-byte units when the width and both strides are multiples of 8 BF16 values and both
// bases are 16-byte aligned; one value at a time otherwise.
bool vector_rows(const void* src, const void* dst, uint64_t width, uint64_t src_stride,
                 uint64_t dst_stride) {
  return width % 8 == 0 && src_stride % 8 == 0 && dst_stride % 8 == 0 && aligned16(src) &&
         aligned16(dst);
}

__device__ float silu(float g) { return g / (1.0f + expf(-g)); }

__global__ void swiglu_kernel(uint16_t* gate, const uint16_t* up, uint64_t n, float limit) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    float g = bf16_bits_to_f32(gate[i]);
    float u = bf16_bits_to_f32(up[i]);
    if (limit > 0.0f) {  // comparisons keep a NaN a NaN
      g = g > limit ? limit : g;
      u = u > limit ? limit : (u < -limit ? -limit : u);
    }
    gate[i] = f32_to_bf16_bits(silu(g) * u);
  }
}

// One block per row (grid-stride), threads over columns: each thread reads its own column
// of the input before writing that column of the output, so output == input is safe.
__global__ void combine_kernel(CombineLaunch a) {
  const uint64_t scored = a.experts + a.zero_experts;
  for (uint64_t t = blockIdx.x; t < a.rows; t += gridDim.x) {
    const uint32_t* ids = a.ids + t * a.top_k;
    const float* w = a.weights + t * a.top_k;
    for (uint64_t d = threadIdx.x; d < a.width; d += blockDim.x) {
      float acc = 0.0f;
      for (uint64_t j = 0; j < a.top_k; ++j) {
        const uint32_t id = ids[j];
        float v;
        if (id < a.experts) {
          v = bf16_bits_to_f32(a.down[(t * a.top_k + j) * a.width + d]);
        } else if (id < scored && a.input != nullptr) {
          v = bf16_bits_to_f32(a.input[t * a.width + d]);
        } else {
          if (d == threadIdx.x) atomicExch(a.error_flag, 1u);
          continue;
        }
        // Rounded product, then rounded sum (no FMA contraction): the CPU backend's
        // acc += w·v, term for term in j order.
        acc = __fadd_rn(acc, __fmul_rn(w[j], v));
      }
      a.output[t * a.width + d] = f32_to_bf16_bits(acc);
    }
  }
}

}  // namespace

size_t grouping_sort_temp_bytes(uint64_t max_slots, uint64_t max_experts) {
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr), values(nullptr, nullptr);
  size_t most = 0;
  // The temporary storage grows with the passes (key bits): ask for every width up to the
  // largest, and keep the largest answer.
  for (int bits = 1; bits <= key_bits(max_experts); ++bits) {
    size_t bytes = 0;
    BUFFERLAB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values,
                                                         static_cast<int>(max_slots), 0, bits));
    most = std::max(most, bytes);
  }
  return most;
}

const uint32_t* launch_grouping(const GroupingLaunch& a, cudaStream_t stream) {
  const auto experts = static_cast<uint32_t>(a.experts);
  cub::DoubleBuffer<uint32_t> keys(a.keys[0], a.keys[1]), values(a.values[0], a.values[1]);
  if (a.slots > 0) {
    BL_LAUNCH(make_sort_pairs, blocks_for(a.slots), kThreads, 0, stream, a.ids, a.slots, experts,
              a.keys[0], a.values[0]);
    BUFFERLAB_CUDA_CHECK(cudaGetLastError());
    const int bits = key_bits(a.experts);
    const int n = static_cast<int>(a.slots);
    size_t need = 0;
    BUFFERLAB_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(nullptr, need, keys, values, n, 0, bits, stream));
    if (need > a.temp_bytes)
      throw Error("moe grouping: the radix sort of " + std::to_string(a.slots) + " slots needs " +
                  std::to_string(need) + " temporary bytes, the fixed workspace holds " +
                  std::to_string(a.temp_bytes));
    size_t have = a.temp_bytes;
    BUFFERLAB_CUDA_CHECK(
        cub::DeviceRadixSort::SortPairs(a.temp, have, keys, values, n, 0, bits, stream));
  }
  BL_LAUNCH(offsets_from_sorted, blocks_for(a.slots + 1), kThreads, 0, stream, keys.Current(),
            a.slots, experts, a.offsets);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
  return values.Current();
}

void launch_row_gather(const RowGatherLaunch& a, cudaStream_t stream) {
  if (a.count == 0 || a.width == 0) return;
  const unsigned grid = blocks_for(a.count, 1);
  if (vector_rows(a.src, a.dst, a.width, a.src_stride, a.dst_stride))
    BL_LAUNCH(row_gather_kernel<uint4>, grid, kThreads, 0, stream, a);
  else
    BL_LAUNCH(row_gather_kernel<uint16_t>, grid, kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_row_scatter(const RowScatterLaunch& a, cudaStream_t stream) {
  if (a.count == 0 || a.width == 0) return;
  const unsigned grid = blocks_for(a.count, 1);
  if (vector_rows(a.src, a.dst, a.width, a.src_stride, a.dst_stride))
    BL_LAUNCH(row_scatter_kernel<uint4>, grid, kThreads, 0, stream, a);
  else
    BL_LAUNCH(row_scatter_kernel<uint16_t>, grid, kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_swiglu(uint16_t* gate, const uint16_t* up, uint64_t n, float limit,
                   cudaStream_t stream) {
  if (n == 0) return;
  BL_LAUNCH(swiglu_kernel, blocks_for(n), kThreads, 0, stream, gate, up, n, limit);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_combine(const CombineLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.width == 0) return;
  BL_LAUNCH(combine_kernel, blocks_for(a.rows, 1), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
