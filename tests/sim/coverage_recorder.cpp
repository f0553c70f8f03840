// Records which kernels this test process launched on the simulator, for the label's kernel
// coverage check (scripts/sim_kernel_coverage.sh): when BUFFERLAB_SIM_COVERAGE names a file
// (ctest sets it for the cuda-sim tests), the kernel names are appended to it at exit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "bufferlab/cuda_sim/cuda_sim_backend.h"

namespace {

class CoverageRecorder : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = std::getenv("BUFFERLAB_SIM_COVERAGE");
    if (path == nullptr || *path == '\0') return;
    std::string lines;
    for (const auto& [kernel, count] : bufferlab::sim_counters().launches_by_kernel)
      lines += kernel + "\n";
    if (lines.empty()) return;
    // One append per process: concurrent test processes do not interleave their lines.
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    const ssize_t written = write(fd, lines.data(), lines.size());
    (void)written;
    close(fd);
  }
};

const auto* const registered = ::testing::AddGlobalTestEnvironment(new CoverageRecorder);

}  // namespace
