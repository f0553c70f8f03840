// CudaBackend: CUDA kernels on a device workspace with the same Layout as the CPU backend.
// This header is plain C++ (no CUDA headers), so host code can pick the backend.
#pragma once

#include <memory>
#include <string>

#include "bufferlab/core/backend.h"

namespace bufferlab {

// Why the CUDA backend cannot run here ("no CUDA device", "driver too old: ..."), or an
// empty string when a device is usable. Never throws, never crashes without a driver.
std::string cuda_unavailable_reason();

// Why cuBLAS, which the backend loads when it is made (not linked: backends/cuda/src/
// cublas_api.h), cannot be loaded — the library paths tried and the loader's reason — or an
// empty string when it loads and every entry point resolves. Needs no GPU.
std::string cublas_unavailable_reason();

// Throws BackendUnavailable (with cuda_unavailable_reason()) when no device is usable.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace bufferlab
