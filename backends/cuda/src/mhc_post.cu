// CUDA mHC post step and expand (docs/spec/numerics.md §3 steps 6 and "Expand", §4 "Combine"):
// one thread per (token, d), grid-stride. The post thread loads all hc stream values of its
// column, the block output and the token's post / comb weights BEFORE it writes anything, and
// no other thread touches that column: in place (out == streams) and out of place give the
// same bits.
//   Sinkhorn form: out_j = post_j·bo, then += comb_ij·x_i for i in order (fmaf chain)
//   low-rank form: out_i = fmaf(post_i, bo, x_i)
// Kernel mutant B13 rounds every written value to BF16. Consecutive threads take consecutive
// d, so every stream row is read and written coalesced.
#include <algorithm>
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "cuda_check.h"
#include "mhc_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxMhc = static_cast<int>(kMaxMhcMult);
constexpr uint64_t kMaxBlocks = 65535 * 4;

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

// `streams` and `out` may be the same array: no __restrict__, and every load precedes the
// first store in program order.
__global__ void __launch_bounds__(kThreads) mhc_post_kernel(MhcPostLaunch a) {
  const uint64_t n = a.rows * a.h;
  const int hc = static_cast<int>(a.hc);
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / a.h, d = item % a.h;
    const uint64_t base = t * a.hc * a.h + d;  // stream i at base + i·h
    float x[kMaxMhc];
#pragma unroll
    for (int i = 0; i < kMaxMhc; ++i) x[i] = i < hc ? a.streams[base + i * a.h] : 0.0f;
    const float bo = bf16_bits_to_f32(a.block_out[item]);
    const float* post = a.post + t * a.hc;
    float y[kMaxMhc];
#pragma unroll
    for (int j = 0; j < kMaxMhc; ++j) y[j] = 0.0f;
    if (a.comb != nullptr) {
      const float* comb = a.comb + t * a.hc * a.hc;  // comb_ij at [i·hc + j]
#pragma unroll
      for (int j = 0; j < kMaxMhc; ++j) {
        if (j < hc) {
          float s = __fmul_rn(post[j], bo);
#pragma unroll
          for (int i = 0; i < kMaxMhc; ++i)
            if (i < hc) s = fmaf(comb[i * hc + j], x[i], s);
          y[j] = s;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kMaxMhc; ++i)
        if (i < hc) y[i] = fmaf(post[i], bo, x[i]);
    }
#pragma unroll
    for (int j = 0; j < kMaxMhc; ++j)
      if (j < hc) a.out[base + j * a.h] = a.round_bf16 ? round_to_bf16(y[j]) : y[j];
  }
}

__global__ void __launch_bounds__(kThreads)
    mhc_expand_kernel(const uint16_t* input, float* streams, uint64_t rows, uint64_t hc,
                      uint64_t h) {
  const uint64_t n = rows * h;
  for (uint64_t item = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; item < n;
       item += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t t = item / h, d = item % h;
    const float v = bf16_bits_to_f32(input[item]);
    for (uint64_t i = 0; i < hc; ++i) streams[(t * hc + i) * h + d] = v;
  }
}

void check_mhc(const char* what, uint64_t hc) {
  if (hc == 0 || hc > kMaxMhcMult)
    throw Error(std::string(what) + ": hc = " + std::to_string(hc) +
                " outside [1, kMaxHcMult = " + std::to_string(kMaxMhcMult) + "]");
}

}  // namespace

void launch_mhc_post(const MhcPostLaunch& a, cudaStream_t stream) {
  check_mhc("hc_post", a.hc);
  const uint64_t items = a.rows * a.h;
  if (items == 0) return;
  BL_LAUNCH(mhc_post_kernel, blocks_for(items), kThreads, 0, stream, a);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_mhc_expand(const uint16_t* input, float* streams, uint64_t rows, uint64_t hc,
                       uint64_t h, cudaStream_t stream) {
  check_mhc("hc_expand", hc);
  const uint64_t items = rows * h;
  if (items == 0) return;
  BL_LAUNCH(mhc_expand_kernel, blocks_for(items), kThreads, 0, stream, input, streams, rows, hc, h);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
