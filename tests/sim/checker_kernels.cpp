// The checkers' self-test kernels: written as the backend's kernels are (cuda_platform.h,
// BL_LAUNCH, BL_SHARED) and compiled as they are for the simulator (tests/CMakeLists.txt gives
// this file the kernel files' instrumentation flags), so each bug below reaches the checker
// through the same hooks a bug in backends/cuda/src would.
#include "checker_kernels.h"

#include <cstdint>

#include "cuda_platform.h"

namespace bufferlab::sim_selftest {
namespace {

constexpr unsigned kWarp = 32;

// ---- Kernels ----

__global__ void store_one_kernel(float* p, int index) { p[index] = 1.0f; }

__global__ void copy_one_kernel(const float* in, float* out) { out[0] = in[0]; }

// A frame larger than a fiber's 256 KiB stack (stack-clash protection probes it page by page,
// so the first probe past the stack lands on the guard page); `words` bytes are touched.
__global__ void stack_hog_kernel(float* out, int words) {
  volatile float frame[96 << 10];  // 384 KiB
  for (int i = 0; i < words; ++i) frame[i] = static_cast<float>(i);
  out[0] = frame[words - 1];
}

// Every block stores 1.0f to p[index_per_block * blockIdx.x]: 0 makes all blocks share p[0].
__global__ void block_store_kernel(float* p, unsigned index_per_block) {
  p[index_per_block * blockIdx.x] = 1.0f;
}

__global__ void block_atomic_kernel(int* p) { atomicAdd(&p[0], 1); }

// The two threads of a block store to p[index_per_thread · threadIdx.x]: 0 makes them share
// p[0]; with `barrier`, thread 1 stores only after a __syncthreads() (ordered: allowed).
__global__ void pair_store_kernel(float* p, unsigned index_per_thread, bool barrier) {
  if (barrier) {
    if (threadIdx.x == 0) p[0] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 1) p[0] = 2.0f;
    return;
  }
  p[index_per_thread * threadIdx.x] = 1.0f;
}

// Thread 0 stores 1.0f to a shared value (first before a barrier, so the later load never
// meets unwritten bytes), stores it again, and thread 1 loads it: with `barrier` a
// __syncthreads() separates the second store and the load. The value stored is always the
// same, so the result is deterministic either way.
__global__ void shared_handoff_kernel(float* out, bool barrier) {
  BL_SHARED(float, value);
  if (threadIdx.x == 0) value = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) value = 1.0f;
  if (barrier) __syncthreads();
  if (threadIdx.x == 1) out[0] = value;
}

// Warp-synchronous hand-off: thread 0 stores, a __syncwarp, then a reader loads. mode 0: the
// full warp syncs and lane 1 reads (ordered: CUDA's __syncwarp is a memory barrier among its
// lanes); mode 1: lane 0 syncs alone (mask 1), lane 1 reads (a race); mode 2: warp 0 syncs and
// thread 32, of the other warp, reads (a race: __syncwarp orders nothing across warps).
__global__ void shared_warp_handoff_kernel(float* out, int mode) {
  BL_SHARED(float, value);
  if (threadIdx.x == 0) value = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) value = 1.0f;
  if (threadIdx.x < 32) {
    if (mode != 1)
      __syncwarp();
    else if (threadIdx.x == 0)
      __syncwarp(1u);
  }
  if (threadIdx.x == (mode == 2 ? 32u : 1u)) out[0] = value;
}

__global__ void shared_read_kernel(float* out, bool store_first) {
  BL_SHARED(float, value);
  if (store_first) value = 2.0f;
  out[0] = value;
}

__global__ void barrier_sites_kernel(float* out, bool diverge) {
  if (diverge) {
    if (threadIdx.x < 16) {
      __syncthreads();
    } else {
      __syncthreads();
    }
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_kernel(float* out, unsigned mask, int lane_mask, unsigned lanes) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x < lanes) v = __shfl_xor_sync(mask, v, lane_mask);
  out[threadIdx.x] = v;
}

// Block b adds 2^24 to cell b and 1 to every other cell: above 2^24 an added 1 is a tie that
// rounds away, so each cell's float sum depends on how many blocks ran before block b.
__global__ void float_sum_kernel(float* cells, unsigned count) {
  for (unsigned c = 0; c < count; ++c) atomicAdd(&cells[c], blockIdx.x == c ? 16777216.0f : 1.0f);
}

__global__ void int_sum_kernel(int* cells, unsigned count) {
  for (unsigned c = 0; c < count; ++c) atomicAdd(&cells[c], blockIdx.x == c ? (1 << 24) : 1);
}

__global__ void thread_store_kernel(float* out) {
  out[threadIdx.x] = static_cast<float>(threadIdx.x);
}

// Two kernels, the same code: the attribute is the kernel's, and one must stay without it.
__global__ void dynamic_shared_kernel(float* out) {
  BL_DYNAMIC_SHARED(float, stage);
  const unsigned n = 16384;  // 64 KiB of floats
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) stage[i] = static_cast<float>(i);
  __syncthreads();
  out[threadIdx.x] = stage[n - 1 - threadIdx.x];
}
__global__ void dynamic_shared_optin_kernel(float* out) {
  BL_DYNAMIC_SHARED(float, stage);
  const unsigned n = 16384;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) stage[i] = static_cast<float>(i);
  __syncthreads();
  out[threadIdx.x] = stage[n - 1 - threadIdx.x];
}

__global__ void copy_floats_kernel(const float* src, float* dst, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    dst[i] = src[i];
}

// ---- Host helpers ----

template <class T>
T* device_array(size_t count) {
  void* p = nullptr;
  if (cudaMalloc(&p, count * sizeof(T)) != cudaSuccess) return nullptr;
  return static_cast<T*>(p);
}

template <class T>
T* zeroed_array(size_t count) {
  T* p = device_array<T>(count);
  cudaMemset(p, 0, count * sizeof(T));
  return p;
}

int finish(void* a, void* b = nullptr) {
  const int error = static_cast<int>(cudaGetLastError());
  cudaFree(a);
  cudaFree(b);
  return error;
}

template <class T>
std::vector<float> download(const T* p, size_t count) {
  std::vector<float> host(count);
  cudaMemcpy(host.data(), p, count * sizeof(float), cudaMemcpyDeviceToHost);
  return host;
}

}  // namespace

int store_past_end() {
  float* p = device_array<float>(16);
  BL_LAUNCH(store_one_kernel, 1, 1, 0, nullptr, p, 16);
  return finish(p);
}
int store_last_element() {
  float* p = device_array<float>(16);
  BL_LAUNCH(store_one_kernel, 1, 1, 0, nullptr, p, 15);
  return finish(p);
}

int load_unwritten() {
  float* in = device_array<float>(4);
  float* out = device_array<float>(4);
  BL_LAUNCH(copy_one_kernel, 1, 1, 0, nullptr, in, out);
  return finish(in, out);
}
int load_memset() {
  float* in = zeroed_array<float>(4);
  float* out = device_array<float>(4);
  BL_LAUNCH(copy_one_kernel, 1, 1, 0, nullptr, in, out);
  return finish(in, out);
}

int two_blocks_store_one_element() {
  float* p = device_array<float>(2);
  BL_LAUNCH(block_store_kernel, 2, 1, 0, nullptr, p, 0u);
  return finish(p);
}
int two_blocks_store_own_elements() {
  float* p = device_array<float>(2);
  BL_LAUNCH(block_store_kernel, 2, 1, 0, nullptr, p, 1u);
  return finish(p);
}
int two_blocks_atomic_add_one_element() {
  int* p = zeroed_array<int>(1);
  BL_LAUNCH(block_atomic_kernel, 2, 1, 0, nullptr, p);
  return finish(p);
}

int shared_store_load_no_barrier() {
  float* out = device_array<float>(1);
  BL_LAUNCH(shared_handoff_kernel, 1, 2, 0, nullptr, out, false);
  return finish(out);
}
int shared_store_load_barrier() {
  float* out = device_array<float>(1);
  BL_LAUNCH(shared_handoff_kernel, 1, 2, 0, nullptr, out, true);
  return finish(out);
}

int shared_warp_handoff(int mode) {
  float* out = device_array<float>(1);
  BL_LAUNCH(shared_warp_handoff_kernel, 1, 64, 0, nullptr, out, mode);
  return finish(out);
}

int shared_load_unwritten() {
  float* out = device_array<float>(1);
  BL_LAUNCH(shared_read_kernel, 1, 1, 0, nullptr, out, false);
  return finish(out);
}
int shared_load_written() {
  float* out = device_array<float>(1);
  BL_LAUNCH(shared_read_kernel, 1, 1, 0, nullptr, out, true);
  return finish(out);
}

int barrier_two_sites() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(barrier_sites_kernel, 1, kWarp, 0, nullptr, out, true);
  return finish(out);
}
int barrier_one_site() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(barrier_sites_kernel, 1, kWarp, 0, nullptr, out, false);
  return finish(out);
}

int shuffle_mask_excludes_caller() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(shuffle_kernel, 1, kWarp, 0, nullptr, out, 0xFFFFFFFEu, 1, kWarp);
  return finish(out);
}
int shuffle_reads_outside_mask() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(shuffle_kernel, 1, kWarp, 0, nullptr, out, 0x0000FFFFu, 16, 16u);
  return finish(out);
}
int shuffle_full_warp() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(shuffle_kernel, 1, kWarp, 0, nullptr, out, 0xFFFFFFFFu, 1, kWarp);
  return finish(out);
}

int shuffle_half_warp_full_mask() {
  float* out = device_array<float>(kWarp);
  BL_LAUNCH(shuffle_kernel, 1, kWarp, 0, nullptr, out, 0xFFFFFFFFu, 1, 16u);
  return finish(out);
}
int shuffle_whole_warp_full_mask() { return shuffle_full_warp(); }

constexpr unsigned kSumBlocks = 256, kSumCells = 16;

int float_atomic_sum() {
  float* cells = zeroed_array<float>(kSumCells);
  BL_LAUNCH(float_sum_kernel, kSumBlocks, 1, 0, nullptr, cells, kSumCells);
  return finish(cells);
}
int int_atomic_sum() {
  int* cells = zeroed_array<int>(kSumCells);
  BL_LAUNCH(int_sum_kernel, kSumBlocks, 1, 0, nullptr, cells, kSumCells);
  return finish(cells);
}

int launch_threads(unsigned threads, std::vector<float>* out) {
  float* p = device_array<float>(threads);
  BL_LAUNCH(thread_store_kernel, 1, threads, 0, nullptr, p);
  const int error = static_cast<int>(cudaGetLastError());
  if (error == 0) *out = download(p, threads);
  cudaFree(p);
  return error;
}
int launch_zero_blocks() {
  float* p = device_array<float>(kWarp);
  BL_LAUNCH(thread_store_kernel, 0, kWarp, 0, nullptr, p);
  return finish(p);
}
int launch_dynamic_shared_64k(bool set_attribute, std::vector<float>* out) {
  const size_t smem = size_t{64} << 10;
  float* p = device_array<float>(kWarp);
  if (set_attribute) {
    cudaFuncSetAttribute(dynamic_shared_optin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    BL_LAUNCH(dynamic_shared_optin_kernel, 1, kWarp, smem, nullptr, p);
  } else {
    BL_LAUNCH(dynamic_shared_kernel, 1, kWarp, smem, nullptr, p);
  }
  const int error = static_cast<int>(cudaGetLastError());
  if (error == 0) *out = download(p, kWarp);
  cudaFree(p);
  return error;
}

int copy_floats(const void* src, void* dst, int n) {
  BL_LAUNCH(copy_floats_kernel, 1, kWarp, 0, nullptr, static_cast<const float*>(src),
            static_cast<float*>(dst), n);
  return static_cast<int>(cudaGetLastError());
}

int overflow_fiber_stack() {
  float* out = device_array<float>(1);
  BL_LAUNCH(stack_hog_kernel, 1, 1, 0, nullptr, out, 96 << 10);
  return finish(out);
}

int two_threads_store_one_element() {
  float* p = device_array<float>(2);
  BL_LAUNCH(pair_store_kernel, 1, 2, 0, nullptr, p, 0u, false);
  return finish(p);
}
int two_threads_store_own_elements() {
  float* p = device_array<float>(2);
  BL_LAUNCH(pair_store_kernel, 1, 2, 0, nullptr, p, 1u, false);
  return finish(p);
}
int two_threads_store_across_a_barrier() {
  float* p = device_array<float>(2);
  BL_LAUNCH(pair_store_kernel, 1, 2, 0, nullptr, p, 0u, true);
  return finish(p);
}

}  // namespace bufferlab::sim_selftest
