// CUDA Mamba-2 conv1d and gated RMSNorm (docs/spec/numerics.md §6, ops/mamba2.h).
//   conv:  one thread per (row, channel), consecutive threads on consecutive channels (the
//          xBC columns of a row are read coalesced); bias first, then the K taps ascending in
//          an fmaf chain — each product of two BF16 values is exact in FP32, so the chain rounds
//          exactly where "acc + w·x" does. Inputs before a sequence's first row come from its
//          tail. A second kernel, one thread per (sequence, channel), then shifts the tail:
//          running it after the conv (stream order) means the conv reads only old tails.
//   norm:  one block per (row, group); pass 1 sums g² per thread in column order, a
//          warp-shuffle tree then the warps in index order combine them (fixed order, so the
//          result is deterministic); pass 2 recomputes g (the same operations, the same bits)
//          and stores (g·r)·w. r = 1/sqrtf(mean + eps), not rsqrtf, as the CPU computes it.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "mamba2_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace mamba2_device;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr uint64_t kMaxBlocks = 65535 * 4;

unsigned blocks_for(uint64_t items, uint64_t per_block) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + per_block - 1) / per_block)));
}

__device__ float bf(uint16_t b) { return bf16_bits_to_f32(b); }

__global__ void __launch_bounds__(kThreads) mamba2_conv_kernel(Mamba2ConvLaunch a) {
  const uint64_t n = a.rows * a.channels, tail = a.kernel - 1;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / a.channels, c = item % a.channels;
    const uint64_t seq = t / a.L, i = t % a.L;
    const uint16_t* w = a.weight + c * a.kernel;
    const uint16_t* old_tail = a.state + (seq * a.channels + c) * tail;
    const uint16_t* column = a.input + seq * a.L * a.in_stride + a.in_col + c;
    float acc = bf(a.bias[c]);
    for (uint64_t j = 0; j < a.kernel; ++j) {
      // x[i − (K−1) + j] is element i + j of (old tail ++ the sequence's inputs).
      const uint64_t q = i + j;
      const float x = q < tail ? bf(old_tail[q]) : bf(column[(q - tail) * a.in_stride]);
      acc = fmaf(bf(w[j]), x, acc);
    }
    a.output[item] = f32_to_bf16_bits(silu(acc));
  }
}

// new tail[j] = element L + j of (old tail ++ inputs), j ascending: the old entry read at
// L + j > j has not been overwritten yet, so the shift is safe in place.
__global__ void __launch_bounds__(kThreads) mamba2_conv_tail_kernel(Mamba2ConvLaunch a) {
  const uint64_t n = a.sequences * a.channels, tail = a.kernel - 1;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t seq = item / a.channels, c = item % a.channels;
    uint16_t* st = a.state + item * tail;  // item = seq·channels + c
    const uint16_t* column = a.input + seq * a.L * a.in_stride + a.in_col + c;
    for (uint64_t j = 0; j < tail; ++j) {
      const uint64_t q = a.L + j;
      st[j] = q < tail ? st[q] : column[(q - tail) * a.in_stride];
    }
  }
}

__device__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The sum of `v` over the block, returned to every thread; every thread of the block calls
// it. The second barrier orders the read of `total` before the next call's writes.
__device__ float block_sum(float v) {
  BL_SHARED(float[kWarps], warp_partials);
  BL_SHARED(float, total);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_sum(v);
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < kWarps ? warp_partials[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  const float result = total;
  __syncthreads();
  return result;
}

__device__ float gate(uint16_t o, uint16_t z) { return __fmul_rn(bf(o), silu(bf(z))); }

__global__ void __launch_bounds__(kThreads) mamba2_gated_norm_kernel(Mamba2GatedNormLaunch a) {
  const uint64_t groups = a.d_inner / a.group_size, n = a.rows * groups;
  for (uint64_t item = blockIdx.x; item < n; item += gridDim.x) {
    const uint64_t row = item / groups, col0 = (item % groups) * a.group_size;
    const uint16_t* o = a.input + row * a.d_inner + col0;
    const uint16_t* z = a.z + row * a.z_stride + col0;
    float sq = 0.0f;
    for (uint64_t k = threadIdx.x; k < a.group_size; k += kThreads) {
      const float g = gate(o[k], z[k]);
      sq = fmaf(g, g, sq);
    }
    const float mean = block_sum(sq) / static_cast<float>(a.group_size);
    const float r = 1.0f / sqrtf(__fadd_rn(mean, a.eps));
    uint16_t* y = a.output + row * a.d_inner + col0;
    for (uint64_t k = threadIdx.x; k < a.group_size; k += kThreads)
      y[k] = f32_to_bf16_bits(__fmul_rn(__fmul_rn(gate(o[k], z[k]), r), bf(a.weight[col0 + k])));
  }
}

}  // namespace

void launch_mamba2_conv(const Mamba2ConvLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * a.channels;
  if (items == 0 || a.kernel == 0 || a.L == 0) return;
  BL_LAUNCH(mamba2_conv_kernel, blocks_for(items, kThreads), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
  const uint64_t tails = a.sequences * a.channels;
  if (tails == 0 || a.kernel == 1) return;
  BL_LAUNCH(mamba2_conv_tail_kernel, blocks_for(tails, kThreads), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mamba2_gated_norm(const Mamba2GatedNormLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.group_size == 0 || a.d_inner == 0) return;
  const uint64_t blocks = a.rows * (a.d_inner / a.group_size);
  BL_LAUNCH(mamba2_gated_norm_kernel, blocks_for(blocks, 1), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
