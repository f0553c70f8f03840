// The simulator benchmark's kernels (bench/sim/bench_sim.cpp): tiny kernels written as the
// backend's are (cuda_platform.h, BL_LAUNCH), launched through the simulator. This header is
// plain C++ (the bench file needs no CUDA names); each launcher returns cudaGetLastError()
// after its launch as an int (0: cudaSuccess).
#pragma once

#include <cstddef>

namespace bufferlab::sim_bench {

// Device memory for the kernels below (cudaMalloc / cudaMemset / cudaFree).
float* device_floats(size_t count);
void fill_device(float* p, size_t count);  // every byte written (the uninitialized-read checker)
void free_device(float* p);

// A kernel with an empty body: launch, and one fiber per thread.
int launch_empty(unsigned blocks, unsigned threads);

// One block of `threads`, each calling __syncthreads() `k` times.
int launch_barriers(unsigned threads, int k);

// One warp of 32 lanes, each doing `k` full-mask __shfl_xor_sync; lane i's result goes to
// out[i] (32 floats).
int launch_shuffles(float* out, int k);

// `blocks` × `threads` threads, each copying (×2) `per_thread` floats of src to dst, strided
// so a warp's accesses are adjacent: a memory-bound kernel. The checked launcher's kernel is
// compiled with the simulator's instrumentation (every load and store checked), the unchecked
// one's (sim_bench_kernels_unchecked.cpp) is the same source without it.
int launch_copy_checked(const float* src, float* dst, unsigned blocks, unsigned threads,
                        int per_thread);
int launch_copy_unchecked(const float* src, float* dst, unsigned blocks, unsigned threads,
                          int per_thread);

}  // namespace bufferlab::sim_bench
