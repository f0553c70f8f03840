// scripts/ctest-skips.sh, the last line of the README's test command: from a LastTest.log
// as ctest writes it (GoogleTest's "Skipped" message inside each skipped test's output), one
// line counting the skipped tests per reason. The log below is written by hand in that form.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;

class CtestSkips : public bufferlab::testing::TempDirTest {
 protected:
  // One test's block of LastTest.log; `skip_reason` empty = a test that passed.
  static std::string block(int index, const std::string& name, const std::string& skip_reason) {
    std::string b = std::to_string(index) + "/9 Testing: " + name + "\n" + std::to_string(index) +
                    "/9 Test: " + name + "\nOutput:\n----------\n[ RUN      ] " + name + "\n";
    if (skip_reason.empty())
      return b + "[       OK ] " + name + " (0 ms)\n<end of output>\nTest Passed.\n\n";
    return b + "../tests/support/backend_under_test.h:30: Skipped\n" + skip_reason +
           "\n[  SKIPPED ] " + name + " (0 ms)\n<end of output>\nTest Time =   0.01 sec\n" +
           "----------\nTest Pass Reason:\nSkip regular expression found in output. "
           "Regex=[\\[  SKIPPED \\]]\n\n";
  }

  std::string summary(const std::string& log) {
    fs::create_directories(dir_ / "Testing" / "Temporary");
    bufferlab::testing::write_file(dir_ / "Testing" / "Temporary" / "LastTest.log", log);
    const fs::path script =
        fs::path(BUFFERLAB_CONFIGS_DIR) / ".." / ".." / "scripts" / "ctest-skips.sh";
    const std::string cmd = "bash " + bufferlab::testing::shell_quote(script.string()) + " " +
                            bufferlab::testing::shell_quote(dir_.string());
    std::string out;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    std::array<char, 4096> buf{};
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;) out.append(buf.data(), n);
    EXPECT_EQ(pclose(pipe), 0);
    return out;
  }
};

TEST_F(CtestSkips, OneLineCountingTheSkippedTestsPerReason) {
  const std::string no_gpu = "no CUDA driver installed (libcuda not found)";
  EXPECT_EQ(summary(block(1, "cuda.A.B", no_gpu) + block(2, "Unit.Passes", "") +
                    block(3, "cuda.A.C", no_gpu) + block(4, "cuda.A.D", no_gpu)),
            "skipped: 3 tests: " + no_gpu + "\n");
  EXPECT_EQ(summary(block(1, "cuda.A.B", no_gpu) + block(2, "Cli.X", "a CUDA device is here") +
                    block(3, "cuda.A.C", no_gpu)),
            "skipped: 3 tests: 2 × " + no_gpu + "; 1 × a CUDA device is here\n");
}

TEST_F(CtestSkips, ZeroWhenNoTestWasSkipped) {
  EXPECT_EQ(summary(block(1, "Unit.Passes", "") + block(2, "Unit.Also", "")), "skipped: 0 tests\n");
  EXPECT_EQ(summary(""), "skipped: 0 tests\n");  // an empty log
}

}  // namespace
