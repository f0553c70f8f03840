// CUDA error → bufferlab::Error.
#include "cuda_check.h"

#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clears the last error so a recoverable failure does not resurface from the next call.
  cudaGetLastError();
  throw Error(std::string("CUDA call ") + call + " failed at " + file + ":" + std::to_string(line) +
              ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
