// End-to-end tests of `bufferlab compare --op gdn|ssd`: the real binary (BUFFERLAB_CLI_PATH) on
// the tiny GDN and Mamba presets — agreement on both paths and with co-dispatched sequences,
// the kernel mutants M-GDNCARRY / M-SSDSTATE caught at their stage, the sizing mutant B15
// caught by the verifier on gdn_fla_scratch before anything runs, refusals (exit 2), the CUDA
// skip (77), --json and the --dump files.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "cli_runner.h"

namespace {

using namespace bufferlab::testing::compare_names;  // cli_checks.h

// Runs `bufferlab compare ARGS` (run_compare), in-process when a test sets in_process_.
class CliCompareSsm : public bufferlab::testing::CliCompareTest {};

TEST_F(CliCompareSsm, BothOpsAgreeOnBothPathsOfTheTinyPresets) {
  for (const char* args : {
           "--op gdn --preset tiny-gdn --tokens 70",  // chunked (kd = vd = 128): two chunks
           "--op gdn --preset tiny-gdn --tokens 9 --streams 2 --path recurrent --alpha near-zero "
           "--beta near-one --zero-state",
           "--op gdn --preset tiny-gdn --tokens 5 --streams 3 --parallel-keys --alpha near-one",
           "--op ssd --preset tiny-mamba --tokens 70 --streams 2",
           "--op ssd --preset tiny-mamba --tokens 6 --path recurrent --dt tiny --zero-state",
           "--op ssd --preset tiny-mamba --tokens 9 --dt large",
       }) {
    bufferlab::testing::expect_agreed(run_compare(args), args,
                                      {"\nAGREE\n", "real arena (sizing corrected", "peak memory",
                                       "re-run: bufferlab compare --op "});
  }
}

TEST_F(CliCompareSsm, TheHeaderSaysWhichPathAndWorkspace) {
  const CompareRun g = run_compare("--op gdn --preset tiny-gdn --tokens 3 --streams 2");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_TRUE(contains(g.output, "chunked path (auto: kd = vd = 128)")) << g.output;
  EXPECT_TRUE(contains(g.output, "2 sequences of 3 tokens")) << g.output;
  EXPECT_TRUE(contains(g.output, "m = 6, nt = 17)")) << g.output;  // cdiv(6, 64) + 16
  EXPECT_TRUE(contains(g.output,
                       "re-run: bufferlab compare --op gdn --preset tiny-gdn "
                       "--tokens 3 --seed 1 --backend cpu --streams 2"))
      << g.output;
  const CompareRun s = run_compare("--op ssd --preset tiny-mamba --tokens 65 --path chunked");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_TRUE(contains(s.output, "chunked path (forced by --path)")) << s.output;
  EXPECT_TRUE(contains(s.output, "m = 65, nc = 3)")) << s.output;  // cdiv(65, 64) + 1
}

TEST_F(CliCompareSsm, KernelMutantsAreCaughtAtTheirStage) {
  const CompareRun carry =
      run_compare("--op gdn --preset tiny-gdn --tokens 65 --streams 2 --mutant M-GDNCARRY");
  expect_exit(carry, 1,
              {"kernel mutant M-GDNCARRY is active",
               "(state)  ",  // a state-pass check fails
               "first bad final state (state)", "at (sequence ", "DISAGREE (seed 1)",
               "--mutant M-GDNCARRY"});

  const CompareRun state =
      run_compare("--op ssd --preset tiny-mamba --tokens 70 --mutant M-SSDSTATE");
  expect_exit(state, 1,
              {"first bad y (scan)",
               "token 64",  // the second chunk's first
               "DISAGREE (seed 1)"});
}

// B15: nt = cdiv(m, 64) without the 16 of slack; 3 streams of 65 tokens need 3·2 chunks,
// m = 195 gives 4: the verifier sees the last stream's regions run off gdn_fla_scratch.
TEST_F(CliCompareSsm, SizingMutantB15IsABoundsFindingOnTheFlaScratch) {
  const CompareRun r =
      run_compare("--op gdn --preset tiny-gdn --mutant B15 --streams 3 --tokens 65");
  expect_exit(r, 1,
              {"finding: bounds on gdn_fla_scratch", "sizing corrected+B15", "codispatch(n=3,L=65)",
               "m = 195, nt = 4)", "DISAGREE: the workspace cannot hold the op"});
  EXPECT_FALSE(contains(r.output, "kernel mutant B15")) << r.output;  // not a backend mutant

  const json jr = json_report(
      run_compare("--op gdn --preset tiny-gdn --mutant B15 --streams 3 --tokens 65 --json"), 1);
  EXPECT_FALSE(jr.at("agree").get<bool>());
  EXPECT_EQ(jr.at("mutant"), "B15");
  ASSERT_FALSE(jr.at("findings").empty());
  EXPECT_TRUE(contains(jr.at("findings")[0].get<std::string>(), "gdn_fla_scratch"));

  // Whole chunks per stream: the carve is long enough, the run agrees and says why.
  const CompareRun fits =
      run_compare("--op gdn --preset tiny-gdn --mutant B15 --streams 2 --tokens 64");
  expect_exit(fits, 0, {"note: sizing mutant B15"});
}

TEST_F(CliCompareSsm, BadInputExitsTwoWithError) {
  in_process_ = true;
  // A GDN config with kd = 64: the recurrence only.
  const fs::path small_heads = dir_ / "gdn64.json";
  {
    const auto cfg =
        bufferlab::testing::run_cli({"config", "--preset", "tiny-gdn", "--json"}, dir_);
    ASSERT_EQ(cfg.exit_code, 0) << cfg.err;
    json c = json::parse(cfg.out);
    c["config"]["linear_key_head_dim"] = 64;
    bufferlab::testing::write_file(small_heads, c.dump());
  }
  const std::string kd64 = "--config " + small_heads.string();
  for (const std::string& args : {
           std::string("--op gdn --preset tiny-mamba --tokens 4"),  // not a GDN model
           std::string("--op ssd --preset tiny-gdn --tokens 4"),    // not a Mamba model
           "--op gdn " + kd64 + " --tokens 4 --path chunked",       // kd != 128
           std::string("--op gdn --preset tiny-gdn --path split"),
           std::string("--op ssd --preset tiny-mamba --path bf16"),
           std::string("--op gdn --preset tiny-gdn --streams 0"),
           std::string("--op gdn --preset tiny-gdn --streams huge"),  // hc-* values, not a count
           std::string("--op gdn --preset tiny-gdn --alpha sometimes"),
           std::string("--op gdn --preset tiny-gdn --dt large"),       // ssd's
           std::string("--op ssd --preset tiny-mamba --alpha mixed"),  // gdn's
           std::string("--op ssd --preset tiny-mamba --parallel-keys"),
           std::string("--op ssd --preset tiny-mamba --dt huge"),
           std::string("--op rmsnorm --preset tiny-gdn --zero-state"),
           std::string("--op hc-pre --preset tiny-mhc --alpha mixed"),
           std::string("--op gdn --preset tiny-gdn --mutant M-SSDSTATE"),  // ssd's mutant
           std::string("--op ssd --preset tiny-mamba --mutant M-GDNCARRY"),
           std::string("--op ssd --preset tiny-mamba --mutant B15"),  // gdn's sizing mutant
           std::string("--op gdn --preset tiny-gdn --mutant B13"),
           std::string("--op gdn --preset tiny-gdn --mutant B9"),  // neither kernel nor gdn's
           std::string("--op gdn --preset tiny-gdn --mutant M-GDNCARRY --path recurrent"),
           std::string("--op gdn --preset tiny-gdn --mutant B15 --path recurrent"),
           std::string("--op ssd --preset tiny-mamba --mutant M-SSDSTATE --path recurrent"),
           std::string("--op rmsnorm --preset tiny-gdn --mutant B15"),
       }) {
    bufferlab::testing::expect_refused(run_compare(args), args);
  }
  EXPECT_TRUE(contains(run_compare("--op gdn --preset tiny-mamba").output, "no Gated DeltaNet"));
  EXPECT_TRUE(
      contains(run_compare("--op gdn " + kd64 + " --path chunked").output, "kd = vd = 128"));
  // Without --path, a kd = 64 model runs the recurrence.
  const CompareRun rec = run_compare("--op gdn " + kd64 + " --tokens 4");
  expect_exit(rec, 0, {"recurrent path (auto: not kd = vd = 128)"});
}

TEST_F(CliCompareSsm, CudaSkipsWithAReasonOrAgrees) {
  for (const char* args : {"--op gdn --preset tiny-gdn --tokens 5 --backend cuda",
                           "--op ssd --preset tiny-mamba --tokens 5 --backend cuda"}) {
    bufferlab::testing::expect_skipped_or_agreed(run_compare(args), std::string(args) + "\n");
  }
}

TEST_F(CliCompareSsm, JsonReportParses) {
  const json j =
      json_report(run_compare("--op ssd --preset tiny-mamba --tokens 9 --streams 2 --json"));
  EXPECT_TRUE(j.at("agree").get<bool>());
  expect_fields(j, {{"tokens", 9},
                    {"streams", 2},
                    {"rows", 18},
                    {"path", "chunked"},
                    {"workspace", "real"},
                    {"sizing", "corrected"},
                    {"ssd_chunks", 2},  // cdiv(18, 64) + 1
                    {"mutant", "none"}});
  EXPECT_GT(j.at("elapsed_s").get<double>(), 0.0);
  EXPECT_GT(j.at("peak_rss_bytes").get<uint64_t>(), 0u);
  EXPECT_GT(j.at("arena_bytes").get<uint64_t>(), 0u);
  bool has_scan = false;
  for (const auto& c : j.at("checks")) has_scan |= c.at("tensor") == "y (scan)";
  EXPECT_TRUE(has_scan) << j.dump(2);

  const json jb = json_report(
      run_compare("--op gdn --preset tiny-gdn --tokens 3 --zero-state --mutant M-GDNCARRY --json"),
      1);
  EXPECT_FALSE(jb.at("agree").get<bool>());
  EXPECT_EQ(jb.at("path"), "chunked");
  EXPECT_TRUE(jb.at("zero_state").get<bool>());
  bool named = false;
  for (const auto& c : jb.at("checks"))
    if (!c.at("passed").get<bool>()) {
      named |= contains(c.at("tensor").get<std::string>(), "(state)");
      EXPECT_TRUE(c.contains("first_bad")) << c.dump(2);
    }
  EXPECT_TRUE(named) << jb.dump(2);
}

// The dump's NPY files; this test checks neither the header alignment nor the BF16 format name.
constexpr bufferlab::testing::NpyChecks kSsmDumpNpyChecks{.header_aligned_to_64 = false,
                                                          .bf16_named = false};

TEST_F(CliCompareSsm, DumpWritesEveryStageAndTheOracle) {
  const fs::path gdn = dir_ / "gdn";
  const json m = dump_manifest(
      run_compare("--op gdn --preset tiny-gdn --tokens 65 --streams 2 --seed 4 --dump " +
                  gdn.string()),
      gdn);
  expect_fields(m,
                {{"op", "gdn"}, {"seed", 4}, {"tokens", 65}, {"streams", 2}, {"path", "chunked"}});
  EXPECT_TRUE(m.at("report").at("agree").get<bool>());
  expect_lists_files(
      m, {"input_deinterleaved.npy", "input_ba.npy", "input_state.npy", "backend_conv.npy",
          "backend_gates.npy", "backend_gc.npy", "backend_W.npy", "backend_U.npy", "backend_S.npy",
          "backend_uc.npy", "backend_state.npy", "backend_core.npy", "backend_normed.npy",
          "oracle_faithful_core.npy", "oracle_exact_state.npy"});
  // 2 streams · 2 chunks · nv = 4 regions of [64, kd = 128].
  EXPECT_EQ(m.at("files").at("backend_W.npy").at("shape"), json::array({16, 64, 128}));
  EXPECT_EQ(m.at("files").at("backend_core.npy").at("npy_dtype"), "<u2");
  expect_npy_files(gdn, m, kSsmDumpNpyChecks);

  const fs::path ssd = dir_ / "ssd";
  const json ms = dump_manifest(
      run_compare("--op ssd --preset tiny-mamba --tokens 70 --streams 2 --dump " + ssd.string()),
      ssd);
  EXPECT_EQ(ms.at("op"), "ssd");
  expect_lists_files(ms, {"input_zxbcdt.npy", "input_D.npy", "backend_xbc.npy",
                          "backend_seq0_dt.npy", "backend_seq1_dA_cumsum.npy",
                          "backend_seq1_CB.npy", "backend_state.npy", "backend_y.npy",
                          "backend_normed.npy", "oracle_faithful_y.npy", "oracle_exact_state.npy"});
  // H = 6 heads, 2 chunks of 64 for 70 tokens.
  EXPECT_EQ(ms.at("files").at("backend_seq0_dt.npy").at("shape"), json::array({6, 2, 64}));
  expect_npy_files(ssd, ms, kSsmDumpNpyChecks);
}

}  // namespace
