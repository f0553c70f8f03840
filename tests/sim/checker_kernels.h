// The checkers' self-test kernels (checker_kernels.cpp): for each checker of the simulator a
// tiny kernel with exactly that checker's bug, and its correct twin. Each function allocates
// what it needs, launches, frees, and returns cudaGetLastError() after the launch (as an int:
// this header is plain C++, the test file needs no CUDA names). The findings stay recorded
// for the test to take (backends/cuda_sim/src/findings.h).
#pragma once

#include <vector>

namespace bufferlab::sim_selftest {

// out_of_bounds: one element stored past the end of a cudaMalloc'd array; twin: the last one.
int store_past_end();
int store_last_element();

// uninitialized_read: a load of cudaMalloc'd bytes never written; twin: written by cudaMemset.
int load_unwritten();
int load_memset();

// block_write_race: two blocks store one element; twins: each block its own element, and both
// blocks atomicAdd to one element (allowed).
int two_blocks_store_one_element();
int two_blocks_store_own_elements();
int two_blocks_atomic_add_one_element();

// thread_write_race: two threads of one block store one global element between two barriers;
// twins: each its own element, and the two stores ordered by a __syncthreads().
int two_threads_store_one_element();
int two_threads_store_own_elements();
int two_threads_store_across_a_barrier();

// shared_race: thread 0 stores a shared value thread 1 loads with no barrier between; twin:
// a __syncthreads() between.
int shared_store_load_no_barrier();
int shared_store_load_barrier();
// Store, __syncwarp, load in one warp (mode 0, ordered); the reader outside the sync's mask (1)
// or in the other warp (2): races.
int shared_warp_handoff(int mode);

// shared_uninit: a load of a __shared__ value no thread stored; twin: stored first.
int shared_load_unwritten();
int shared_load_written();

// barrier_divergence: half the block waits at one __syncthreads(), half at another; twin:
// every thread at one.
int barrier_two_sites();
int barrier_one_site();

// collective_mask: a __shfl_xor_sync whose mask excludes the calling lane; one whose lanes
// read a lane outside the mask; twin: a full-mask shuffle by the full warp.
int shuffle_mask_excludes_caller();
int shuffle_reads_outside_mask();
int shuffle_full_warp();

// collective_missing: a full-mask shuffle reached only by lanes < 16 (the rest exit); twin:
// reached by every lane.
int shuffle_half_warp_full_mask();
int shuffle_whole_warp_full_mask();

// nondeterminism: float atomicAdds whose sum depends on the block order; twin: the same with
// integer atomicAdd.
int float_atomic_sum();
int int_atomic_sum();

// launch_config: 1025 threads per block (twin: 1024); a grid of 0 blocks; 64 KiB of dynamic
// shared memory without cudaFuncSetAttribute (twin: with it). Each writes through `out` the
// values the kernel stored (empty when the launch was refused).
int launch_threads(unsigned threads, std::vector<float>* out);
int launch_zero_blocks();
int launch_dynamic_shared_64k(bool set_attribute, std::vector<float>* out);

// footprint_read / footprint_write: one block copying `n` floats from `src` to `dst` (device
// addresses); the test sets the footprint around it (sim::set_footprint).
int copy_floats(const void* src, void* dst, int n);

// A kernel whose frame overflows its fiber's stack: the process dies of SIGSEGV on the guard
// page, after the simulator names the kernel (no twin: every other kernel is one).
int overflow_fiber_stack();

}  // namespace bufferlab::sim_selftest
