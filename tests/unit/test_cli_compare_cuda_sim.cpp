// End-to-end tests of `bufferlab compare --backend cuda-sim`: the CUDA kernels on the kernel
// simulator agree, the report counts the launches and the checked accesses, and --sim-seed
// is refused off the simulator. Skipped only in a build without the simulator.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/backends/backend_factory.h"
#include "cli_checks.h"
#include "cli_runner.h"

namespace {

class CliCompareCudaSim : public bufferlab::testing::CliCompareTest {
 protected:
  void SetUp() override {
    CliCompareTest::SetUp();
    if (!bufferlab::cuda_sim_backend_built()) GTEST_SKIP() << "this build has no CUDA simulator";
  }
};

TEST_F(CliCompareCudaSim, TopKAgreesAndCountsItsLaunch) {
  const auto r =
      run_compare("--op topk --preset tiny-moe --tokens 9 --backend cuda-sim --sim-seed 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cuda-sim: 1 launch of 1 kernel (topk_kernel x1)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("loads,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--backend cuda-sim"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--sim-seed 4"), std::string::npos) << "the re-run line keeps it";
}

TEST_F(CliCompareCudaSim, RmsNormJsonNamesTheSimulator) {
  const auto r =
      run_compare("--op rmsnorm --preset tiny-dense --tokens 5 --backend cuda-sim --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_TRUE(j.contains("simulator")) << r.output;
  EXPECT_NE(j["simulator"].get<std::string>().find("fused_add_rmsnorm_kernel"), std::string::npos);
}

TEST_F(CliCompareCudaSim, TheTieMutantDisagreesOnTheSimulatorToo) {
  const auto r = run_compare(
      "--op topk --preset qwen3-next-80b --tokens 16 --pattern all-equal --backend cuda-sim "
      "--mutant M-TIE");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("exact-tie rule"), std::string::npos) << r.output;
}

// The group kernel (warp-staged scores in dynamic shared memory) agrees with no finding, and
// M-GROUP fails the group step on the simulator as on the CPU.
TEST_F(CliCompareCudaSim, GroupLimitedRoutingAndItsMutant) {
  const auto good = run_compare(
      "--op topk --preset deepseek-v3.2 --tokens 64 --path fp32-gate --backend cuda-sim");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  const auto bad = run_compare(
      "--op topk --preset deepseek-v3.2 --tokens 64 --path fp32-gate --backend cuda-sim "
      "--mutant M-GROUP");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("first bad topk_groups (group step"), std::string::npos) << bad.output;
}

TEST_F(CliCompareCudaSim, SimSeedOffTheSimulatorIsRefused) {
  const std::string args = "--op rmsnorm --preset tiny-dense --backend cpu --sim-seed 2";
  bufferlab::testing::expect_refused(run_compare(args), args,
                                     "--sim-seed applies to --backend cuda-sim only");
}

}  // namespace
