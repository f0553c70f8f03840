// CUDA fused residual add + RMSNorm (docs/spec/numerics.md §1): one block per row. Pass 1 adds,
// stores the BF16 residual and sums the squares of the STORED values; a warp-shuffle then
// block reduction gives rsqrt(mean + eps); pass 2 re-reads the row (each thread its own
// columns, so it reads its own writes) and stores the normed row. Rows whose start is 16-byte
// aligned (width % 8 == 0 and aligned bases) move 8 BF16 values per load; others fall back to
// one element per load. The storage points and operation count match the bound derived in
// oracle/src/rmsnorm.cpp (rsqrtf: ≤ 2 ulp).
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "rmsnorm_kernel.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kVector = 8;  // BF16 values per 16-byte load

__device__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The sum of `v` over the block, returned to every thread. Called once per block.
__device__ float block_sum(float v) {
  BL_SHARED(float[kWarps], warp_partials);
  BL_SHARED(float, total);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = warp_sum(v);
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < kWarps ? warp_partials[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

struct Bf16x8 {
  float v[kVector];
};

// Little-endian: element 2i is the low half of word i.
__device__ Bf16x8 unpack(uint4 q) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  Bf16x8 r;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    r.v[2 * i] = bf16_bits_to_f32(static_cast<uint16_t>(w[i] & 0xFFFFu));
    r.v[2 * i + 1] = bf16_bits_to_f32(static_cast<uint16_t>(w[i] >> 16));
  }
  return r;
}

__device__ uint4 pack(const Bf16x8& r) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = f32_to_bf16_bits(r.v[2 * i]) |
           (static_cast<uint32_t>(f32_to_bf16_bits(r.v[2 * i + 1])) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The stored BF16 value of residual + x, as FP32.
__device__ float stored_sum(float residual, float x) { return round_to_bf16(residual + x); }

__device__ float norm_scale(float sum_sq, uint64_t width, float eps) {
  // A non-finite row normalises to NaN everywhere (the defined result, oracle/rmsnorm.h).
  if (!isfinite(sum_sq)) return __int_as_float(0x7FC00000);
  return rsqrtf(sum_sq / static_cast<float>(width) + eps);
}

// Pass 1, 8 values per load: add, store, and the partial sum of squares of stored values.
__device__ float add_and_square_vec(const RmsNormLaunch& a, uint64_t at) {
  const uint64_t chunks = a.width / kVector;
  auto* residual = reinterpret_cast<uint4*>(a.residual + at);
  // No input row without the add (a.input is null then).
  const auto* input = a.add_residual ? reinterpret_cast<const uint4*>(a.input + at) : nullptr;
  float sum_sq = 0.0f;
  for (uint64_t c = threadIdx.x; c < chunks; c += kThreads) {
    Bf16x8 r = unpack(residual[c]);
    if (a.add_residual) {
      const Bf16x8 x = unpack(input[c]);
#pragma unroll
      for (int k = 0; k < kVector; ++k) r.v[k] = stored_sum(r.v[k], x.v[k]);
      residual[c] = pack(r);
    }
#pragma unroll
    for (int k = 0; k < kVector; ++k) sum_sq += r.v[k] * r.v[k];
  }
  return sum_sq;
}

__device__ float add_and_square_scalar(const RmsNormLaunch& a, uint64_t at) {
  float sum_sq = 0.0f;
  for (uint64_t j = threadIdx.x; j < a.width; j += kThreads) {
    float r = bf16_bits_to_f32(a.residual[at + j]);
    if (a.add_residual) {
      r = stored_sum(r, bf16_bits_to_f32(a.input[at + j]));
      a.residual[at + j] = f32_to_bf16_bits(r);
    }
    sum_sq += r * r;
  }
  return sum_sq;
}

// Pass 2: y = (r · inv) · (1 + w), from the stored residual.
__device__ void normalise_vec(const RmsNormLaunch& a, uint64_t at, float inv) {
  const uint64_t chunks = a.width / kVector;
  const auto* residual = reinterpret_cast<const uint4*>(a.residual + at);
  const auto* weight = reinterpret_cast<const uint4*>(a.weight);
  auto* output = reinterpret_cast<uint4*>(a.output + at);
  for (uint64_t c = threadIdx.x; c < chunks; c += kThreads) {
    const Bf16x8 r = unpack(residual[c]);
    const Bf16x8 w = unpack(weight[c]);
    Bf16x8 y;
#pragma unroll
    for (int k = 0; k < kVector; ++k) y.v[k] = (r.v[k] * inv) * (1.0f + w.v[k]);
    output[c] = pack(y);
    if (a.output_f32 != nullptr) {
      auto* out32 = reinterpret_cast<float4*>(a.output_f32 + at) + 2 * c;
      out32[0] = make_float4(y.v[0], y.v[1], y.v[2], y.v[3]);
      out32[1] = make_float4(y.v[4], y.v[5], y.v[6], y.v[7]);
    }
  }
}

__device__ void normalise_scalar(const RmsNormLaunch& a, uint64_t at, float inv) {
  for (uint64_t j = threadIdx.x; j < a.width; j += kThreads) {
    const float r = bf16_bits_to_f32(a.residual[at + j]);
    const float y = (r * inv) * (1.0f + bf16_bits_to_f32(a.weight[j]));
    a.output[at + j] = f32_to_bf16_bits(y);
    if (a.output_f32 != nullptr) a.output_f32[at + j] = y;
  }
}

template <bool kVectorPath>
__global__ void __launch_bounds__(kThreads) fused_add_rmsnorm_kernel(RmsNormLaunch a) {
  const uint64_t at = static_cast<uint64_t>(blockIdx.x) * a.width;
  if constexpr (kVectorPath) {
    const float inv = norm_scale(block_sum(add_and_square_vec(a, at)), a.width, a.eps);
    normalise_vec(a, at, inv);
  } else {
    const float inv = norm_scale(block_sum(add_and_square_scalar(a, at)), a.width, a.eps);
    normalise_scalar(a, at, inv);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool rmsnorm_vector_path(const RmsNormLaunch& a) {
  return a.width % kVector == 0 && aligned16(a.residual) && aligned16(a.weight) &&
         aligned16(a.output) && (!a.add_residual || aligned16(a.input)) &&
         (a.output_f32 == nullptr || aligned16(a.output_f32));
}

void launch_fused_add_rmsnorm(const RmsNormLaunch& a, cudaStream_t stream) {
  if (a.rows == 0 || a.width == 0) return;
  if (a.rows > 0x7FFFFFFFull)
    throw Error("rmsnorm: " + std::to_string(a.rows) + " rows exceed the grid limit 2^31 - 1");
  const dim3 grid(static_cast<unsigned>(a.rows));
  if (rmsnorm_vector_path(a))
    BL_LAUNCH(fused_add_rmsnorm_kernel<true>, grid, kThreads, 0, stream, a);
  else
    BL_LAUNCH(fused_add_rmsnorm_kernel<false>, grid, kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

cudaError_t probe_rmsnorm_kernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, fused_add_rmsnorm_kernel<false>);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
