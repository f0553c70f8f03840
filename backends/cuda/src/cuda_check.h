// Checking of every CUDA runtime call: a failure becomes a bufferlab::Error naming the call,
// where it was made, and the runtime's error name and string. Private to the CUDA backend.
#pragma once

#include "cuda_platform.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#define BUFFERLAB_CUDA_CHECK(call) ::bufferlab::cuda::check((call), #call, __FILE__, __LINE__)
