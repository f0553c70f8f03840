// End-to-end tests of `bufferlab compare --op hc-*` (the mHC ops): the real binary
// (BUFFERLAB_CLI_PATH) on the tiny mHC presets and deepseek-v4-flash — agreement, the kernel
// mutants caught with their finding, refusals (exit 2), --json and the --dump files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "cli_runner.h"

namespace {

using namespace bufferlab::testing::compare_names;  // cli_checks.h

// Runs `bufferlab compare ARGS` (run_compare), in-process when a test sets in_process_.
class CliCompareMhc : public bufferlab::testing::CliCompareTest {};

TEST_F(CliCompareMhc, EveryOpAgreesOnTinyPresets) {
  for (const char* args : {
           "--op hc-pre --preset tiny-mhc --tokens 9 --seed 3",
           "--op hc-pre --preset tiny-mhc --tokens 5 --logit-range 30 --streams huge",
           "--op hc-pre --preset tiny-mhc --tokens 5 --streams zero --hc-eps 0",
           "--op hc-post --preset tiny-mhc --tokens 9 --logit-range 0.5",
           "--op hc-post --preset tiny-mhc-lowrank --tokens 9 --streams huge",
           "--op hc-head --preset tiny-mhc --tokens 9",
           "--op hc-head --preset tiny-mhc-lowrank --tokens 4 --streams zero",
           "--op hc-expand --preset tiny-mhc --tokens 9",
           "--op hc-lowrank --preset tiny-mhc-lowrank --tokens 64",
           "--op hc-lowrank --preset tiny-mhc-lowrank --tokens 9 --path slab --streams huge",
       }) {
    bufferlab::testing::expect_agreed(run_compare(args), args,
                                      {"AGREE", "re-run: bufferlab compare --op hc-"});
  }
}

// The commands.
TEST_F(CliCompareMhc, DeepSeekV4FlashPreAndLowRankAt100TokensAgree) {
  const CompareRun pre = run_compare("--op hc-pre --preset deepseek-v4-flash --tokens 64");
  expect_exit(pre, 0, {"hc_pre_sinkhorn(rows=64,hc=4,h=4096"});
  const CompareRun low = run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 100");
  EXPECT_EQ(low.exit_code, 0) << low.output;
  // T > 64: the slab GEMM path, chosen by the token count.
  EXPECT_TRUE(contains(low.output, "slab path (chosen by the token count")) << low.output;
  EXPECT_TRUE(contains(low.output, "hc_up_pre (up)")) << low.output;
}

TEST_F(CliCompareMhc, SplitPathIsChosenUpTo64Tokens) {
  const json j =
      json_report(run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 12 --json"));
  EXPECT_EQ(j.at("path"), "split");
  EXPECT_FALSE(j.at("path_forced").get<bool>());
  EXPECT_EQ(j.at("op"), "hc_lowrank");
  EXPECT_TRUE(j.at("agree").get<bool>());
}

TEST_F(CliCompareMhc, KernelMutantsAreCaughtWithTheirFinding) {
  const CompareRun skcol =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 8 --seed 2 --mutant M-SKCOL");
  expect_exit(skcol, 1, {"first bad hc_comb column sums", "column j", "--mutant M-SKCOL"});

  const CompareRun b13 = run_compare("--op hc-post --preset tiny-mhc --tokens 8 --mutant B13");
  expect_exit(b13, 1, {"first bad hc_streams (post)", "stream ", "DISAGREE (seed 1)"});
}

TEST_F(CliCompareMhc, SkcolWithZeroHcEpsSaysItIsInvisible) {
  const CompareRun r =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 4 --hc-eps 0 --mutant M-SKCOL");
  expect_exit(r, 0, {"invisible with hc_eps = 0"});
  const CompareRun j =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 4 --hc-eps 0 --mutant M-SKCOL --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_FALSE(json::parse(j.out).at("mutant_visible").get<bool>());
}

TEST_F(CliCompareMhc, BadInputExitsTwoWithError) {
  in_process_ = true;
  for (const char* args : {
           "--op hc-pre --preset tiny-dense --tokens 4",        // hc_mult = 0
           "--op hc-post --preset tiny-moe --tokens 4",         // hc_mult = 0
           "--op hc-lowrank --preset tiny-mhc --tokens 4",      // hc_lowrank = 0
           "--op hc-pre --preset tiny-mhc-lowrank --tokens 4",  // low-rank model
           "--op hc-lowrank --preset tiny-mhc-lowrank --tokens 65 --path split",
           "--op hc-lowrank --preset tiny-mhc-lowrank --tokens 4 --path bf16",
           "--op hc-pre --preset tiny-mhc --mutant B13",       // B13 is hc-post's
           "--op hc-post --preset tiny-mhc --mutant M-SKCOL",  // M-SKCOL is hc-pre's
           "--op hc-lowrank --preset tiny-mhc-lowrank --mutant B13",
           "--op rmsnorm --preset tiny-mhc --mutant M-SKCOL",
           "--op hc-pre --preset tiny-mhc --streams nope",
           "--op hc-pre --preset tiny-mhc --logit-range 0",
           "--op hc-pre --preset tiny-mhc --logit-range abc",
           "--op hc-pre --preset tiny-mhc --hc-eps -1",
           "--op hc-head --preset tiny-mhc --logit-range 3",  // not an option of hc-head
           "--op hc-post --preset tiny-mhc --hc-eps 0",
           "--op hc-expand --preset tiny-mhc --streams huge",
           "--op hc-pre --preset tiny-mhc --path slab",
           "--op rmsnorm --preset tiny-mhc --streams huge",
       }) {
    bufferlab::testing::expect_refused(run_compare(args), args);
  }
  const CompareRun r = run_compare("--op hc-pre --preset tiny-dense --tokens 4");
  EXPECT_TRUE(contains(r.output, "hc_mult = 0")) << r.output;
}

TEST_F(CliCompareMhc, CudaSkipsWithAReasonOrAgrees) {
  const CompareRun r = run_compare("--op hc-pre --preset tiny-mhc --tokens 5 --backend cuda");
  bufferlab::testing::expect_skipped_or_agreed(r);
}

TEST_F(CliCompareMhc, JsonReportParses) {
  const json j =
      json_report(run_compare("--op hc-pre --preset tiny-mhc --tokens 6 --logit-range 8 --json"));
  EXPECT_TRUE(j.at("agree").get<bool>());
  expect_fields(j, {{"op", "hc_pre"},
                    {"tokens", 6},
                    {"logit_range", 8.0},
                    {"streams", "normal"},
                    {"mutant", "none"}});
  bool has_column_sums = false;
  for (const auto& c : j.at("checks")) has_column_sums |= c.at("tensor") == "hc_comb column sums";
  EXPECT_TRUE(has_column_sums) << j.dump(2);

  const json jb =
      json_report(run_compare("--op hc-post --preset tiny-mhc --tokens 3 --mutant B13 --json"), 1);
  EXPECT_FALSE(jb.at("agree").get<bool>());
  const std::string reason = jb.at("checks")[0].at("first_bad").at("reason");
  EXPECT_TRUE(contains(reason, "(token ")) << reason;  // coordinates of the first bad element
  EXPECT_EQ(jb.at("mutant"), "B13");
}

TEST_F(CliCompareMhc, DumpWritesEveryTensorAndAManifest) {
  const fs::path pre = dir_ / "pre";
  const json m = dump_manifest(
      run_compare("--op hc-pre --preset tiny-mhc --tokens 5 --seed 4 --dump " + pre.string()), pre);
  expect_fields(m, {{"op", "hc-pre"}, {"seed", 4}, {"tokens", 5}, {"backend", "cpu"}});
  EXPECT_TRUE(m.at("report").at("agree").get<bool>());
  expect_lists_files(
      m, {"input_streams.npy", "input_fn.npy", "input_scale.npy", "input_bias.npy",
          "backend_post.npy", "backend_comb.npy", "backend_block_in.npy", "oracle_comb.npy"});
  EXPECT_EQ(m.at("files").at("backend_block_in.npy").at("npy_dtype"), "<u2");
  EXPECT_EQ(m.at("files").at("backend_comb.npy").at("shape"), json::array({5, 4, 4}));
  expect_npy_files(pre, m);

  const fs::path low = dir_ / "low";
  const json ml = dump_manifest(
      run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 70 --dump " + low.string()),
      low);
  EXPECT_EQ(ml.at("path"), "slab");
  expect_lists_files(
      ml, {"input_streams.npy", "input_norm_w.npy", "input_w_down.npy", "input_w_inject.npy",
           "input_w_up.npy", "backend_normed.npy", "backend_low.npy", "backend_inj_pre.npy",
           "backend_up_pre.npy", "backend_post.npy", "backend_block_in.npy"});
  EXPECT_EQ(ml.at("files").at("backend_normed.npy").at("npy_dtype"), "<u2");  // BF16 on slab
  expect_npy_files(low, ml);

  const fs::path post = dir_ / "post";
  ASSERT_EQ(
      run_compare("--op hc-post --preset tiny-mhc --tokens 3 --dump " + post.string()).exit_code,
      0);
  const json mp = read_manifest(post);
  expect_lists_files(mp, {"backend_streams.npy", "input_comb.npy"});
  expect_npy_files(post, mp);
}

}  // namespace
