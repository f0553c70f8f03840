// cub::DeviceRadixSort::SortPairs over a cub::DoubleBuffer, the one CUB algorithm the backend
// calls (the MoE grouping), for the simulator (cub_standin.cpp): CUB's documented contract —
// a stable LSD radix sort of the bits [begin_bit, end_bit) of the keys, the temporary-storage
// query when d_temp_storage is null, the result in the buffers the selector names — with its
// accesses checked like a kernel's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bufferlab/cuda_sim/runtime_shim.h"

namespace bufferlab::sim::device::cub {

template <class T>
struct DoubleBuffer {
  T* d_buffers[2] = {nullptr, nullptr};
  int selector = 0;
  DoubleBuffer() = default;
  DoubleBuffer(T* current, T* alternate) : d_buffers{current, alternate} {}
  T* Current() const { return d_buffers[selector]; }
  T* Alternate() const { return d_buffers[selector ^ 1]; }
};

// The 32-bit key / 32-bit value instance the backend uses.
cudaError_t sort_pairs_u32(void* temp, size_t& temp_bytes, DoubleBuffer<uint32_t>& keys,
                           DoubleBuffer<uint32_t>& values, int n, int begin_bit, int end_bit,
                           cudaStream_t stream);

struct DeviceRadixSort {
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, DoubleBuffer<uint32_t>& keys,
                               DoubleBuffer<uint32_t>& values, int n, int begin_bit = 0,
                               int end_bit = 32, cudaStream_t stream = nullptr) {
    return sort_pairs_u32(temp, temp_bytes, keys, values, n, begin_bit, end_bit, stream);
  }
};

}  // namespace bufferlab::sim::device::cub
