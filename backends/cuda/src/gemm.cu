// CUDA elementwise kernels around the cuBLAS GEMMs: the swiglu / accumulate epilogues of the
// BF16 GemmOp kinds (FP32 GEMM result in the staging area, one BF16 rounding), the BF16 →
// FP32 widening of the router weight on the FP32-routing path, and the B14 mutant's rounding
// of FP32 logits to BF16. Grid-stride loops, accurate expf.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cuda_check.h"
#include "moe_kernels.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 65535;

unsigned blocks_for(uint64_t items) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads)));
}

__global__ void gemm_epilogue_kernel(const float* acc, uint16_t* out, uint64_t rows, uint64_t cols,
                                     uint64_t out_stride, bool swiglu) {
  const uint64_t n = rows * cols;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = i / cols, c = i % cols;
    uint16_t* o = out + r * out_stride + c;
    const float a = acc[i];
    const float prev = bf16_bits_to_f32(*o);
    const float v = swiglu ? a / (1.0f + expf(-a)) * prev : a + prev;
    *o = f32_to_bf16_bits(v);
  }
}

__global__ void widen_kernel(const uint16_t* src, float* dst, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    dst[i] = bf16_bits_to_f32(src[i]);
}

__global__ void round_kernel(float* v, uint64_t rows, uint64_t cols, uint64_t stride) {
  const uint64_t n = rows * cols;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    float* p = v + (i / cols) * stride + i % cols;
    *p = round_to_bf16(*p);
  }
}

}  // namespace

void launch_gemm_epilogue(const float* acc, uint16_t* out, uint64_t rows, uint64_t cols,
                          uint64_t out_stride, bool swiglu, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  BL_LAUNCH(gemm_epilogue_kernel, blocks_for(rows * cols), kThreads, 0, stream, acc, out, rows,
            cols, out_stride, swiglu);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_widen_bf16(const uint16_t* src, float* dst, uint64_t n, cudaStream_t stream) {
  if (n == 0) return;
  BL_LAUNCH(widen_kernel, blocks_for(n), kThreads, 0, stream, src, dst, n);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

void launch_round_to_bf16(float* v, uint64_t rows, uint64_t cols, uint64_t stride,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  BL_LAUNCH(round_kernel, blocks_for(rows * cols), kThreads, 0, stream, v, rows, cols, stride);
  BUFFERLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
