// End-to-end tests of `bufferlab fuzz --numeric gdn|ssd`: short clean runs, the kernel mutants
// M-GDNCARRY and M-SSDSTATE caught at the first case and saved with the case's preset-free
// config, a command line that re-runs the case alone and a `compare --config` line that
// re-runs it without the fuzz, and the option errors (exit 2).
//
// Full-range cases take from milliseconds to tens of seconds; the seeds below draw small first
// cases so the file stays fast (the mutants are caught at the first case they apply to on
// every seed: a mutant run draws only such cases).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Clean: a GDN recurrence of 8 sequences of 33 tokens; an SSD chunked sequence of 63 tokens.
constexpr const char* kGdnCleanSeed = "27";
constexpr const char* kMamba2CleanSeed = "26";
// Mutant: a chunked GDN sequence of 85 tokens; a chunked SSD sequence of 139 tokens.
constexpr const char* kGdnMutantSeed = "27";
constexpr const char* kMamba2MutantSeed = "16";

// `bufferlab fuzz`, always the real binary; run, run_argv, expect_error, out_dir() and
// written(ext) come from CliCommandTest.
class CliFuzzNumericSsm : public bufferlab::testing::CliCommandTest {
 protected:
  CliFuzzNumericSsm() : CliCommandTest("fuzz") {}

  // The mutant is caught at the first case of `seed` with `finding` (the failing stage) in the
  // failure line; the failure JSON carries the case, its config and two re-run lines — the
  // fuzz case alone (by --skip), which fails the same way, and `compare --config`, which
  // DISAGREEs on the same check; without the mutant the case index runs clean.
  void expect_mutant_caught(const std::string& family, const std::string& mutant,
                            const std::string& seed, const std::string& finding) {
    const auto r = run({"--numeric", family, "--mutant", mutant, "--cases", "3", "--seed", seed,
                        "--shard", "0/1", "--out", out_dir()});
    ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("FAIL: case 0 of seed " + seed), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mutant " + mutant), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(finding), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("DISAGREE"), std::string::npos) << r.out;
    const auto files = written(".json");
    ASSERT_EQ(files.size(), 2u);  // the failure and its config
    const fs::path failure =
        dir_ / "out" / ("fuzz-numeric-" + family + "-seed" + seed + "-shard0of1-case0.json");
    const fs::path config =
        dir_ / "out" / ("fuzz-numeric-" + family + "-seed" + seed + "-shard0of1-case0.config.json");
    ASSERT_TRUE(fs::exists(failure)) << r.out;
    ASSERT_TRUE(fs::exists(config)) << r.out;

    const json j = json::parse(bufferlab::testing::read_file(failure));
    EXPECT_EQ(j.at("numeric"), family);
    EXPECT_EQ(j.at("mutant"), mutant);
    EXPECT_EQ(j.at("case_index"), 0);
    EXPECT_EQ(j.at("check"), family + "-chunked");
    EXPECT_NE(j.at("case").get<std::string>().find("seed="), std::string::npos) << j.dump(1);
    EXPECT_NE(j.at("failure").get<std::string>().find(finding), std::string::npos) << j.dump(1);
    EXPECT_TRUE(j.contains("agreement")) << j.dump(1);
    // The config is preset-free: the normalized form, read back by --config.
    EXPECT_EQ(j.at("config").at("bufferlab_config"), 1);
    EXPECT_EQ(json::parse(bufferlab::testing::read_file(config)), j.at("config"));
    EXPECT_EQ(j.at("rerun"), "bufferlab fuzz --numeric " + family + " --seed " + seed +
                                 " --skip 0 --cases 1 --mutant " + mutant);
    ASSERT_TRUE(j.contains("compare_rerun")) << j.dump(1);
    const std::string compare = j.at("compare_rerun");
    EXPECT_EQ(compare.rfind("bufferlab compare --config " + config.string() + " --op " + family, 0),
              0u)
        << compare;
    EXPECT_NE(r.out.find("compare: " + compare), std::string::npos) << r.out;

    // The compare line, with the mutant, re-runs the very case: the same check fails at the
    // same first bad element with the same backend bits (the fuzz's footprint layout and
    // compare's real arena hold the same values).
    const auto c = run_argv(bufferlab::testing::split_words(
        compare.substr(std::string("bufferlab ").size()) + " --mutant " + mutant + " --json"));
    ASSERT_EQ(c.exit_code, 1) << c.out << c.err;
    const std::string failure_line = j.at("failure");
    const std::string check = failure_line.substr(failure_line.find(": ") + 2);
    const auto first_bad = [&check](const json& report) {
      for (const auto& x : report.at("checks"))
        if (x.at("tensor") == check && x.contains("first_bad")) return x.at("first_bad");
      return json();
    };
    const json fuzz_bad = first_bad(j.at("agreement"));
    const json compare_bad = first_bad(json::parse(c.out));
    ASSERT_FALSE(fuzz_bad.is_null()) << check << "\n" << j.dump(1);
    EXPECT_EQ(compare_bad, fuzz_bad) << check << "\n" << c.out;

    fs::remove_all(dir_ / "out");
    const auto again = run({"--numeric", family, "--seed", seed, "--skip", "0", "--cases", "1",
                            "--mutant", mutant, "--shard", "0/1", "--out", out_dir()});
    EXPECT_EQ(again.exit_code, 1) << again.out << again.err;
    EXPECT_NE(again.out.find("after 1 cases"), std::string::npos) << again.out;
    EXPECT_NE(again.out.find(finding), std::string::npos) << again.out;
  }
};

TEST_F(CliFuzzNumericSsm, ShortRunsAreClean) {
  for (const auto& [family, seed] :
       {std::pair{"gdn", kGdnCleanSeed}, std::pair{"ssd", kMamba2CleanSeed}}) {
    const auto r = run({"--numeric", family, "--cases", "1", "--seed", seed, "--out", out_dir()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(std::string("fuzz --numeric ") + family + ": 1 cases"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("no failure"), std::string::npos) << r.out;
    EXPECT_TRUE(written(".json").empty());
  }
}

// M-GDNCARRY: the state pass carries its BF16 snapshot — a check of the state stage (the
// snapshots, uc or the final state, whichever the inputs show first).
TEST_F(CliFuzzNumericSsm, MutantGdnCarryIsCaughtAndReplays) {
  expect_mutant_caught("gdn", "M-GDNCARRY", kGdnMutantSeed, " (state)");
}

// M-SSDSTATE: the scan restarts every chunk from zero — the scan's output y.
TEST_F(CliFuzzNumericSsm, MutantSsdStateIsCaughtAndReplays) {
  expect_mutant_caught("ssd", "M-SSDSTATE", kMamba2MutantSeed, "ssd-chunked: y (scan)");
}

TEST_F(CliFuzzNumericSsm, BadOptionsExitTwo) {
  expect_error({"--numeric", "mamba", "--cases", "1"}, "gdn, ssd");
  expect_error({"--numeric", "gdn", "--cases", "1", "--mutant", "M-SSDSTATE"}, "--numeric ssd");
  expect_error({"--numeric", "ssd", "--cases", "1", "--mutant", "M-GDNCARRY"}, "--numeric gdn");
  expect_error({"--numeric", "mhc", "--cases", "1", "--mutant", "M-GDNCARRY"}, "--numeric gdn");
  expect_error({"--numeric", "routing", "--cases", "1", "--mutant", "M-SSDSTATE"}, "--numeric ssd");
  expect_error({"--numeric", "gdn", "--cases", "1", "--mutant", "B13"}, "--numeric mhc");
  expect_error({"--numeric", "gdn", "--cases", "1", "--mutant", "B15"}, "kernel mutant");
  expect_error({"--numeric", "ssd", "--cases", "0"}, "--cases");
}

TEST_F(CliFuzzNumericSsm, CudaUnavailableIsSkipped) {
  const auto r = run({"--numeric", "ssd", "--cases", "1", "--backend", "cuda", "--seed",
                      kMamba2CleanSeed, "--out", out_dir()});
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is available here";
  EXPECT_EQ(r.exit_code, 77) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("skipped: ", 0), 0u) << r.out;
}

}  // namespace
