// The memory-bound kernel of sim_bench_kernels.cpp compiled without the instrumentation
// (bench/CMakeLists.txt: BUFFERLAB_CUDA_SIM but no -fsanitize=thread): the simulator still
// launches it, one fiber per thread, but its loads and stores reach no checker. The baseline
// of the checkers' overhead.
#include "cuda_platform.h"
#include "sim_bench_kernels.h"

namespace bufferlab::sim_bench {

#include "sim_bench_copy_kernel.inc"

int launch_copy_unchecked(const float* src, float* dst, unsigned blocks, unsigned threads,
                          int per_thread) {
  BL_LAUNCH(copy_scaled_kernel, blocks, threads, 0, nullptr, src, dst, per_thread);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bufferlab::sim_bench
