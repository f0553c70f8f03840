// End-to-end tests of `bufferlab compare --op hc-*` (the mHC ops): the real binary
// (BUFFERLAB_CLI_PATH) on the tiny mHC presets and deepseek-v4-flash — agreement, the kernel
// mutants caught with their finding, refusals (exit 2), --json and the --dump files.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;

using bufferlab::testing::read_file;

struct CompareRun {
  int exit_code = -1;
  std::string output;  // stdout, then stderr
  std::string out;     // stdout alone
};

class CliCompareMhc : public bufferlab::testing::TempDirTest {
 protected:
  // Cheap parse / print tests run the CLI in-process (bufferlab_cli); the rest the binary.
  bool in_process_ = false;
  CompareRun run_compare(const std::string& args) {
    std::vector<std::string> argv{"compare"};
    std::istringstream words(args);
    for (std::string w; words >> w;) argv.push_back(w);
    const auto r = (in_process_ ? bufferlab::testing::run_cli_in_process(argv, dir_)
                                : bufferlab::testing::run_cli(argv, dir_));
    return {r.exit_code, r.out + r.err, r.out};
  }
};

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

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
    const CompareRun r = run_compare(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "AGREE")) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "re-run: bufferlab compare --op hc-")) << args << "\n"
                                                                          << r.output;
  }
}

// The commands.
TEST_F(CliCompareMhc, DeepSeekV4FlashPreAndLowRankAt100TokensAgree) {
  const CompareRun pre = run_compare("--op hc-pre --preset deepseek-v4-flash --tokens 64");
  EXPECT_EQ(pre.exit_code, 0) << pre.output;
  EXPECT_TRUE(contains(pre.output, "hc_pre_sinkhorn(rows=64,hc=4,h=4096")) << pre.output;
  const CompareRun low = run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 100");
  EXPECT_EQ(low.exit_code, 0) << low.output;
  // T > 64: the slab GEMM path, chosen by the token count.
  EXPECT_TRUE(contains(low.output, "slab path (chosen by the token count")) << low.output;
  EXPECT_TRUE(contains(low.output, "hc_up_pre (up)")) << low.output;
}

TEST_F(CliCompareMhc, SplitPathIsChosenUpTo64Tokens) {
  const CompareRun r = run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 12 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("path"), "split");
  EXPECT_FALSE(j.at("path_forced").get<bool>());
  EXPECT_EQ(j.at("op"), "hc_lowrank");
  EXPECT_TRUE(j.at("agree").get<bool>());
}

TEST_F(CliCompareMhc, KernelMutantsAreCaughtWithTheirFinding) {
  const CompareRun skcol =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 8 --seed 2 --mutant M-SKCOL");
  EXPECT_EQ(skcol.exit_code, 1) << skcol.output;
  EXPECT_TRUE(contains(skcol.output, "first bad hc_comb column sums")) << skcol.output;
  EXPECT_TRUE(contains(skcol.output, "column j")) << skcol.output;
  EXPECT_TRUE(contains(skcol.output, "--mutant M-SKCOL")) << skcol.output;

  const CompareRun b13 = run_compare("--op hc-post --preset tiny-mhc --tokens 8 --mutant B13");
  EXPECT_EQ(b13.exit_code, 1) << b13.output;
  EXPECT_TRUE(contains(b13.output, "first bad hc_streams (post)")) << b13.output;
  EXPECT_TRUE(contains(b13.output, "stream ")) << b13.output;
  EXPECT_TRUE(contains(b13.output, "DISAGREE (seed 1)")) << b13.output;
}

TEST_F(CliCompareMhc, SkcolWithZeroHcEpsSaysItIsInvisible) {
  const CompareRun r =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 4 --hc-eps 0 --mutant M-SKCOL");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "invisible with hc_eps = 0")) << r.output;
  const CompareRun j =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 4 --hc-eps 0 --mutant M-SKCOL --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_FALSE(nlohmann::json::parse(j.out).at("mutant_visible").get<bool>());
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
    const CompareRun r = run_compare(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "error: ")) << args << "\n" << r.output;
  }
  const CompareRun r = run_compare("--op hc-pre --preset tiny-dense --tokens 4");
  EXPECT_TRUE(contains(r.output, "hc_mult = 0")) << r.output;
}

TEST_F(CliCompareMhc, CudaSkipsWithAReasonOrAgrees) {
  const CompareRun r = run_compare("--op hc-pre --preset tiny-mhc --tokens 5 --backend cuda");
  if (r.exit_code == 77) {
    EXPECT_EQ(r.output.rfind("skipped: ", 0), 0u) << r.output;
  } else {
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

TEST_F(CliCompareMhc, JsonReportParses) {
  const CompareRun r =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 6 --logit-range 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("agree").get<bool>());
  EXPECT_EQ(j.at("op"), "hc_pre");
  EXPECT_EQ(j.at("tokens"), 6);
  EXPECT_EQ(j.at("logit_range"), 8.0);
  EXPECT_EQ(j.at("streams"), "normal");
  EXPECT_EQ(j.at("mutant"), "none");
  bool has_column_sums = false;
  for (const auto& c : j.at("checks")) has_column_sums |= c.at("tensor") == "hc_comb column sums";
  EXPECT_TRUE(has_column_sums) << j.dump(2);

  const CompareRun bad =
      run_compare("--op hc-post --preset tiny-mhc --tokens 3 --mutant B13 --json");
  ASSERT_EQ(bad.exit_code, 1) << bad.output;
  const auto jb = nlohmann::json::parse(bad.out);
  EXPECT_FALSE(jb.at("agree").get<bool>());
  const std::string reason = jb.at("checks")[0].at("first_bad").at("reason");
  EXPECT_TRUE(contains(reason, "(token ")) << reason;  // coordinates of the first bad element
  EXPECT_EQ(jb.at("mutant"), "B13");
}

// Every listed file exists, is NPY v1.0 with the manifest's dtype and exactly as many
// elements as its shape says.
void expect_npy_files(const fs::path& dir, const nlohmann::json& manifest) {
  for (const auto& [file, info] : manifest.at("files").items()) {
    const std::string bytes = read_file(dir / file);
    ASSERT_GE(bytes.size(), 10u) << file;
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << file;
    const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                              static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u) << file;
    const std::string descr = info.at("npy_dtype");
    EXPECT_TRUE(contains(bytes.substr(10, header_len), "'descr': '" + descr + "'")) << file;
    uint64_t elements = 1;
    for (uint64_t d : info.at("shape")) elements *= d;
    const uint64_t item = descr == "<u2" ? 2 : descr == "<f4" ? 4 : 8;
    EXPECT_EQ(bytes.size() - 10 - header_len, elements * item) << file;
    if (descr == "<u2") {
      EXPECT_EQ(info.at("format"), "bf16 as uint16 (raw bits)") << file;
    }
  }
}

TEST_F(CliCompareMhc, DumpWritesEveryTensorAndAManifest) {
  const fs::path pre = dir_ / "pre";
  const CompareRun r =
      run_compare("--op hc-pre --preset tiny-mhc --tokens 5 --seed 4 --dump " + pre.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto m = nlohmann::json::parse(read_file(pre / "manifest.json"));
  EXPECT_EQ(m.at("op"), "hc-pre");
  EXPECT_EQ(m.at("seed"), 4);
  EXPECT_EQ(m.at("tokens"), 5);
  EXPECT_EQ(m.at("backend"), "cpu");
  EXPECT_TRUE(m.at("report").at("agree").get<bool>());
  for (const char* f :
       {"input_streams.npy", "input_fn.npy", "input_scale.npy", "input_bias.npy",
        "backend_post.npy", "backend_comb.npy", "backend_block_in.npy", "oracle_comb.npy"})
    EXPECT_TRUE(m.at("files").contains(f)) << f;
  EXPECT_EQ(m.at("files").at("backend_block_in.npy").at("npy_dtype"), "<u2");
  EXPECT_EQ(m.at("files").at("backend_comb.npy").at("shape"), nlohmann::json::array({5, 4, 4}));
  expect_npy_files(pre, m);

  const fs::path low = dir_ / "low";
  const CompareRun l =
      run_compare("--op hc-lowrank --preset tiny-mhc-lowrank --tokens 70 --dump " + low.string());
  ASSERT_EQ(l.exit_code, 0) << l.output;
  const auto ml = nlohmann::json::parse(read_file(low / "manifest.json"));
  EXPECT_EQ(ml.at("path"), "slab");
  for (const char* f :
       {"input_streams.npy", "input_norm_w.npy", "input_w_down.npy", "input_w_inject.npy",
        "input_w_up.npy", "backend_normed.npy", "backend_low.npy", "backend_inj_pre.npy",
        "backend_up_pre.npy", "backend_post.npy", "backend_block_in.npy"})
    EXPECT_TRUE(ml.at("files").contains(f)) << f;
  EXPECT_EQ(ml.at("files").at("backend_normed.npy").at("npy_dtype"), "<u2");  // BF16 on slab
  expect_npy_files(low, ml);

  const fs::path post = dir_ / "post";
  ASSERT_EQ(
      run_compare("--op hc-post --preset tiny-mhc --tokens 3 --dump " + post.string()).exit_code,
      0);
  const auto mp = nlohmann::json::parse(read_file(post / "manifest.json"));
  EXPECT_TRUE(mp.at("files").contains("backend_streams.npy"));
  EXPECT_TRUE(mp.at("files").contains("input_comb.npy"));
  expect_npy_files(post, mp);
}

}  // namespace
