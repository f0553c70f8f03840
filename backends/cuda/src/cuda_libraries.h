// The library headers (cuBLAS, CUB) for the files that call them: the real ones for the
// device build, the simulator's stand-ins (already in device_api.h) for BUFFERLAB_CUDA_SIM.
#pragma once

#include "cuda_platform.h"

#if !defined(BUFFERLAB_CUDA_SIM)
#include <cublas_v2.h>
#if defined(__CUDACC__)
#include <cub/device/device_radix_sort.cuh>
#endif
#endif
