// cuBLAS is loaded on demand (dlopen), not linked: on any machine that builds the CUDA backend
// it must load and resolve every entry point the backend calls — without a GPU, so this runs
// in CPU-only CI too and catches a renamed or missing symbol before a GPU run does.
#include <gtest/gtest.h>

#include <string>

#include "bufferlab/cuda/cuda_backend.h"

namespace bufferlab {
namespace {

TEST(CudaCublasLoading, EveryEntryPointResolvesWithoutAGpu) {
  EXPECT_EQ(cublas_unavailable_reason(), "");
}

}  // namespace
}  // namespace bufferlab
