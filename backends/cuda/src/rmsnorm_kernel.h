// Launcher of the CUDA fused residual add + RMSNorm kernel. The arguments carry device
// pointers already resolved (bounds-checked) by the backend and the extents of op.shape().
// Private to the CUDA backend.
#pragma once

#include "cuda_platform.h"

#include <cstdint>

namespace bufferlab::BUFFERLAB_CUDA_NS {

struct RmsNormLaunch {
  const uint16_t* input = nullptr;   // bf16 [rows, width]; null without the add
  uint16_t* residual = nullptr;      // bf16 [rows, width]
  const uint16_t* weight = nullptr;  // bf16 [width]
  uint16_t* output = nullptr;        // bf16 [rows, width]
  float* output_f32 = nullptr;       // f32 [rows, width]; null unless write_f32
  uint64_t rows = 0;
  uint64_t width = 0;
  float eps = 0.0f;
  bool add_residual = true;
};

// True when every row starts 16-byte aligned, so rows are read 8 BF16 values at a time.
bool rmsnorm_vector_path(const RmsNormLaunch& a);

// Enqueues one block per row on `stream`; launch errors throw bufferlab::Error.
void launch_fused_add_rmsnorm(const RmsNormLaunch& a, cudaStream_t stream);

// Whether the device can run this build's kernels (cudaErrorNoKernelImageForDevice otherwise).
cudaError_t probe_rmsnorm_kernel();

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
