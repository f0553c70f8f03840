// "Backends allocate nothing inside execute()" (docs/architecture.md), checked on the device:
// device free memory (cudaMemGetInfo) is identical before and after a second pass over some ops,
// after a warm-up pass (module loading, cuBLAS's first-call setup). Shared by the device-only tests
// of tests/cuda/.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace bufferlab::testing {

// `run_all` executes every op once and synchronizes.
template <class Run>
void expect_no_device_allocation(const Run& run_all) {
  run_all();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  run_all();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before, free_after);
}

}  // namespace bufferlab::testing
