// End-to-end tests of `bufferlab fuzz --numeric attention`: short clean runs on the CPU backend
// and on the kernel simulator for a few seeds (the cases are capped per backend:
// tools/fuzz/fuzz_numeric_attention.cpp), the family in the list the unknown-family error
// prints, and the option errors (exit 2): a kernel mutant of another family, a sizing mutant.
// No attention kernel mutant exists yet; when one does, its caught-and-replayed test belongs
// here (test_cli_fuzz_numeric_ssm.cpp's expect_mutant_caught is the model).
#include <gtest/gtest.h>

#include <string>

#include "bufferlab/backends/backend_factory.h"
#include "cli_runner.h"

namespace {

class CliFuzzNumericAttention : public bufferlab::testing::CliCommandTest {
 protected:
  CliFuzzNumericAttention() : CliCommandTest("fuzz") {}

  // Returns stdout.
  std::string expect_clean(const std::string& backend, const std::string& seed,
                           const std::string& cases) {
    const auto r = run({"--numeric", "attention", "--backend", backend, "--seed", seed, "--cases",
                        cases, "--shard", "0/1", "--out", out_dir()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("fuzz --numeric attention: " + cases + " cases in "), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("seed " + seed + ", shard 0/1, backend " + backend + ": no failure"),
              std::string::npos)
        << r.out;
    EXPECT_TRUE(written().empty()) << "a clean run writes no failure";
    return r.out;
  }
};

TEST_F(CliFuzzNumericAttention, CasesPassOnTheCpu) {
  for (const char* seed : {"1", "2", "5"}) expect_clean("cpu", seed, "6");
}

TEST_F(CliFuzzNumericAttention, CasesPassOnTheSimulator) {
  if (!bufferlab::cuda_sim_backend_built()) GTEST_SKIP() << "this build has no CUDA simulator";
  for (const char* seed : {"1", "3"}) {
    const std::string out = expect_clean("cuda-sim", seed, "6");
    // The simulator's activity line names the attention kernels the cases launched.
    EXPECT_NE(out.find("cuda-sim: "), std::string::npos) << out;
    EXPECT_NE(out.find("attn_cache_write_kernel"), std::string::npos) << out;
  }
}

// Case i is a pure function of (seed, i): a case re-run alone by --skip passes as it did.
TEST_F(CliFuzzNumericAttention, ACaseRerunsAloneBySkip) {
  const auto r = run(
      {"--numeric", "attention", "--seed", "2", "--skip", "3", "--cases", "1", "--out", out_dir()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fuzz --numeric attention: 1 cases in "), std::string::npos) << r.out;
}

TEST_F(CliFuzzNumericAttention, BadOptionsExitTwo) {
  in_process_ = true;
  expect_error({"--numeric", "mla", "--cases", "1"},
               "unknown numeric family (known: routing, experts, mhc, gdn, ssd, attention)");
  expect_error({"--numeric", "attention", "--cases", "1", "--mutant", "M-TIE"},
               "changes the routing kernels; --numeric attention runs none of them (use "
               "--numeric routing)");
  expect_error({"--numeric", "attention", "--cases", "1", "--mutant", "B9"}, "B9");
  expect_error({"--numeric", "attention", "--cases", "1", "--pass-kind", "decode"},
               "--pass-kind applies to the plan fuzz, not to --numeric");
}

}  // namespace
