// CUDA GDN elementwise-ish kernels (docs/spec/numerics.md §5, §1; ops/gdn.h):
//   conv1d   one thread per (row, channel) sums its K taps in j order in FP32 (inputs before
//            the sequence's first row from the OLD tail state) and applies SiLU; a second
//            kernel, after it on the same stream, gives each (sequence, channel) thread its
//            whole tail: the new tail is the last K−1 entries of [old tail | inputs], written
//            in ascending order, each entry read (at index L + i > i) before it can be
//            overwritten — no thread reads another's tail, no tail is read after a write.
//   gates    one thread per (row, value head).
//   norm     one block per (row, head): each thread reads its own columns, a fixed-order
//            block sum gives mean(o²), then each thread writes the columns it read (in place).
// Consecutive threads take consecutive channels / columns, so rows are read coalesced.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "gdn_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

using namespace gdn_device;

constexpr int kThreads = 256;
constexpr int kNormThreads = 128;
constexpr int kNormWarps = kNormThreads / kWarpSize;
constexpr uint64_t kMaxBlocks = 65535 * 4;
constexpr float kSoftplusThreshold = 20.0f;

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

__global__ void __launch_bounds__(kThreads) gdn_conv_kernel(GdnConvLaunch a) {
  const uint64_t n = a.rows * a.channels;
  const int64_t taps = static_cast<int64_t>(a.kernel), tail = taps - 1;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / a.channels, c = item % a.channels;
    const uint64_t seq = t / a.L;
    const int64_t pos = static_cast<int64_t>(t % a.L);
    const uint16_t* w = a.weight + c * a.kernel;
    const uint16_t* old_tail = a.state + (seq * a.channels + c) * static_cast<uint64_t>(tail);
    float acc = 0.0f;
    for (int64_t j = 0; j < taps; ++j) {
      const int64_t src = pos - tail + j;  // row inside the sequence; < 0: from the tail
      const uint16_t x = src >= 0
                             ? a.input[(seq * a.L + static_cast<uint64_t>(src)) * a.row_stride + c]
                             : old_tail[tail + src];
      acc += bf16_bits_to_f32(w[j]) * bf16_bits_to_f32(x);
    }
    a.output[item] = silu(acc);
  }
}

__global__ void __launch_bounds__(kThreads) gdn_conv_tail_kernel(GdnConvLaunch a) {
  const uint64_t n = a.sequences * a.channels, tail = a.kernel - 1;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t seq = item / a.channels, c = item % a.channels;
    uint16_t* state = a.state + item * tail;
    // Combined sequence [old tail (tail) | inputs (L)]; the new tail is its last `tail`
    // entries, combined index L + i for entry i (> i since L ≥ 1).
    for (uint64_t i = 0; i < tail; ++i) {
      const uint64_t src = a.L + i;
      state[i] = src < tail ? state[src] : a.input[(seq * a.L + src - tail) * a.row_stride + c];
    }
  }
}

__global__ void __launch_bounds__(kThreads) gdn_gates_kernel(GdnGatesLaunch a) {
  const uint64_t n = a.rows * a.nv;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / a.nv, h = item % a.nv;
    const float b = bf16_bits_to_f32(a.ba[t * 2 * a.nv + h]);
    const float x = bf16_bits_to_f32(a.ba[t * 2 * a.nv + a.nv + h]) + a.dt_bias[h];
    const float softplus = x > kSoftplusThreshold ? x : log1pf(expf(x));
    a.gates[2 * item] = sigmoid(b);
    a.gates[2 * item + 1] = expf(-expf(a.a_log[h]) * softplus);
  }
}

__global__ void __launch_bounds__(kNormThreads) gdn_gated_norm_kernel(GdnGatedNormLaunch a) {
  BL_SHARED(float[kNormWarps], warp_partials);
  BL_SHARED(float, total);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const uint64_t n = a.rows * a.heads;
  for (uint64_t item = blockIdx.x; item < n; item += gridDim.x) {
    const uint64_t row = item / a.heads, head = item % a.heads;
    uint16_t* o = a.io + item * a.head_dim;
    const uint16_t* z = a.z + row * a.z_row_stride + a.z_col + head * a.head_dim;
    float s = 0.0f;
    for (uint64_t d = threadIdx.x; d < a.head_dim; d += kNormThreads) {
      const float v = bf16_bits_to_f32(o[d]);
      s += v * v;
    }
    s = warp_sum(s);
    if (lane == 0) warp_partials[warp] = s;
    __syncthreads();
    if (warp == 0) {
      float t = lane < kNormWarps ? warp_partials[lane] : 0.0f;
      t = warp_sum(t);
      if (lane == 0) total = t;
    }
    __syncthreads();
    const float r = 1.0f / sqrtf(total / static_cast<float>(a.head_dim) + a.eps);
    for (uint64_t d = threadIdx.x; d < a.head_dim; d += kNormThreads) {
      const float v = bf16_bits_to_f32(o[d]);
      const float zv = bf16_bits_to_f32(z[d]);
      const float w = bf16_bits_to_f32(a.weight[d]);
      o[d] = f32_to_bf16_bits(v * r * w * silu(zv));
    }
    // `total` and the partials are rewritten by the next item only after every thread has
    // read them.
    __syncthreads();
  }
}

}  // namespace

void launch_gdn_conv(const GdnConvLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.channels == 0) return;
  BL_LAUNCH(gdn_conv_kernel, blocks_for(a.rows * a.channels), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
  if (a.kernel < 2) return;
  BL_LAUNCH(gdn_conv_tail_kernel, blocks_for(a.sequences * a.channels), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_gdn_gates(const GdnGatesLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.nv == 0) return;
  BL_LAUNCH(gdn_gates_kernel, blocks_for(a.rows * a.nv), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_gdn_gated_norm(const GdnGatedNormLaunch& a, cudaStream_t stream) {
  const uint64_t items = a.rows * a.heads;
  if (items == 0 || a.head_dim == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<uint64_t>(items, kMaxBlocks));
  BL_LAUNCH(gdn_gated_norm_kernel, blocks, kNormThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
