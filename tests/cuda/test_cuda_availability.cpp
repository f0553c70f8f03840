// Whether CUDA can run here: the reason the CUDA tests skip is a sentence, and the backend
// factory refuses the CUDA backend with it.
#include <gtest/gtest.h>

#include <string>

#include "bufferlab/core/backend.h"
#include "bufferlab/cuda/cuda_backend.h"

namespace bufferlab {
namespace {

TEST(CudaAvailability, ReasonIsEmptyOrASentence) {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) {
    EXPECT_GT(reason.size(), 10u);
    EXPECT_THROW(make_cuda_backend(), BackendUnavailable);
    GTEST_SKIP() << reason;
  }
  EXPECT_NO_THROW(make_cuda_backend());
}

}  // namespace
}  // namespace bufferlab
