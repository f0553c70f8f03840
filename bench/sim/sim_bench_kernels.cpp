// The simulator benchmark's kernels, compiled as the backend's kernel files are for the
// simulator (bench/CMakeLists.txt gives this file their instrumentation flags): every load and
// store of device memory goes through the access checkers, as in the kernel tests.
#include "sim_bench_kernels.h"

#include "cuda_platform.h"

namespace bufferlab::sim_bench {
namespace {

constexpr unsigned kWarp = 32;

// BL_LAUNCH needs one argument; the kernel ignores it.
__global__ void empty_kernel(int) {}

__global__ void barrier_kernel(int k) {
  for (int i = 0; i < k; ++i) __syncthreads();
}

// The xor distance cycles through 1..16 so every lane meets every other within five steps.
__global__ void shuffle_kernel(float* out, int k) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < k; ++i) v += __shfl_xor_sync(0xFFFFFFFFu, v, 1 << (i % 5));
  out[threadIdx.x] = v;
}

}  // namespace

#include "sim_bench_copy_kernel.inc"

float* device_floats(size_t count) {
  void* p = nullptr;
  if (cudaMalloc(&p, count * sizeof(float)) != cudaSuccess) return nullptr;
  return static_cast<float*>(p);
}
void fill_device(float* p, size_t count) { cudaMemset(p, 0, count * sizeof(float)); }
void free_device(float* p) { cudaFree(p); }

int launch_empty(unsigned blocks, unsigned threads) {
  BL_LAUNCH(empty_kernel, blocks, threads, 0, nullptr, 0);
  return static_cast<int>(cudaGetLastError());
}

int launch_barriers(unsigned threads, int k) {
  BL_LAUNCH(barrier_kernel, 1, threads, 0, nullptr, k);
  return static_cast<int>(cudaGetLastError());
}

int launch_shuffles(float* out, int k) {
  BL_LAUNCH(shuffle_kernel, 1, kWarp, 0, nullptr, out, k);
  return static_cast<int>(cudaGetLastError());
}

int launch_copy_checked(const float* src, float* dst, unsigned blocks, unsigned threads,
                        int per_thread) {
  BL_LAUNCH(copy_scaled_kernel, blocks, threads, 0, nullptr, src, dst, per_thread);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace bufferlab::sim_bench
