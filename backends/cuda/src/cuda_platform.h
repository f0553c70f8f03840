// The one include of the CUDA platform for every file of this folder, so each kernel source
// compiles twice from one text: by nvcc for the device (the real runtime, `<<<...>>>`
// launches, `__shared__` declarations) and, with BUFFERLAB_CUDA_SIM, by the host compiler for
// the kernel simulator (backends/cuda_sim: the same names from device_api.h, launches through
// its executor, shared memory in its per-block arena). On the device the macros below expand
// to exactly the code written before them: no cost (docs/architecture.md "Kernel simulator").
#pragma once

#if defined(BUFFERLAB_CUDA_SIM)

#include "bufferlab/cuda_sim/device_api.h"

// The simulated backend's symbols live in their own namespace, so one program can link both.
#define BUFFERLAB_CUDA_NS cuda_sim
namespace bufferlab {
namespace cuda_sim {}
namespace cuda = cuda_sim;                 // `cuda::` names this build's backend
using namespace ::bufferlab::sim::device;  // the CUDA names, hiding the host libm's
}  // namespace bufferlab

// `__shared__ Type name;` — one object per block, in the block's shared arena.
#define BL_SHARED(Type, name)         \
  static const char name##_site_ = 0; \
  auto& name = ::bufferlab::sim::shared_object<Type>(&name##_site_, #name)
// `extern __shared__ T name[];` — the launch's dynamic shared memory.
#define BL_DYNAMIC_SHARED(T, name) T* name = ::bufferlab::sim::dynamic_shared<T>()
// `kernel<<<grid, block, smem, stream>>>(args...)` through the simulator's executor.
#define BL_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::bufferlab::sim::launch(#kernel, kernel, (grid), (block), (smem), (stream), __VA_ARGS__)
// The same for a kernel held in a variable: `name` is what findings and coverage call it.
#define BL_LAUNCH_NAMED(name, kernel, grid, block, smem, stream, ...) \
  ::bufferlab::sim::launch((name), kernel, (grid), (block), (smem), (stream), __VA_ARGS__)

#else

#include <cuda_runtime.h>

#define BUFFERLAB_CUDA_NS cuda
#define BL_SHARED(Type, name) __shared__ ::bufferlab::cuda_type_t<Type> name
#define BL_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define BL_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#define BL_LAUNCH_NAMED(name, kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)

namespace bufferlab {
// Names an array type in a declaration (`cuda_type_t<float[4]> x;`).
template <class T>
using cuda_type_t = T;
}  // namespace bufferlab

#endif
