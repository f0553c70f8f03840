// End-to-end tests of `bufferlab compare`: the real binary (BUFFERLAB_CLI_PATH) over a tiny
// preset — agreement exit code, skip on a machine without a GPU, errors, --json, and the
// --dump files (NPY headers and a manifest that parses).
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
class CliCompare : public bufferlab::testing::CliCompareTest {};

TEST_F(CliCompare, TinyDenseAgrees) {
  const CompareRun r = run_compare("--op rmsnorm --preset tiny-dense --tokens 5 --seed 3");
  expect_exit(r, 0, {"AGREE", "rows=5", "seed=3"});
}

TEST_F(CliCompare, EveryVariantAgreesOnTinyMoe) {
  for (const char* v : {"add", "f32", "unit", "norm"}) {
    const CompareRun r =
        run_compare(std::string("--op rmsnorm --preset tiny-moe --tokens 7 --variant ") + v);
    EXPECT_EQ(r.exit_code, 0) << v << "\n" << r.output;
  }
}

TEST_F(CliCompare, CudaSkipsWithAReasonOrAgrees) {
  const CompareRun r = run_compare("--op rmsnorm --preset tiny-dense --tokens 5 --backend cuda");
  if (bufferlab::testing::expect_skipped_or_agreed(r)) {
    EXPECT_GT(r.output.size(), std::string("skipped: \n").size());
  }
}

TEST_F(CliCompare, BadInputExitsTwoWithError) {
  in_process_ = true;
  for (const char* args :
       {"--op rmsnorm --preset no-such-model", "--op nope --preset tiny-dense",
        "--op rmsnorm --preset tiny-dense --variant nope",
        "--op rmsnorm --preset tiny-dense --tokens 0",
        "--op rmsnorm --preset tiny-dense --tokens -1",
        // the dense sizing has no FP32 router input: the op does not fit the arena
        "--op rmsnorm --preset tiny-dense --variant f32"}) {
    bufferlab::testing::expect_refused(run_compare(args), args, "error:");
  }
}

TEST_F(CliCompare, JsonReportParses) {
  const CompareRun r =
      run_compare("--op rmsnorm --preset tiny-moe --tokens 3 --variant f32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(j.at("agree").get<bool>());
  EXPECT_EQ(j.at("checks").size(), 3u);
  EXPECT_EQ(j.at("checks")[1].at("tensor"), "norm_output");
  EXPECT_EQ(j.at("tokens"), 3);
}

TEST_F(CliCompare, DumpWritesNpyFilesAndAManifest) {
  const fs::path out = dir_ / "dump";
  const json manifest = dump_manifest(
      run_compare("--op rmsnorm --preset tiny-moe --tokens 5 --seed 4 --variant f32 --dump " +
                  out.string()),
      out);
  expect_fields(
      manifest,
      {{"op", "rmsnorm"}, {"seed", 4}, {"tokens", 5}, {"backend", "cpu"}, {"preset", "tiny-moe"}});
  EXPECT_NE(manifest.at("params").get<std::string>().find("rows=5"), std::string::npos);
  EXPECT_TRUE(manifest.at("report").at("agree").get<bool>());
  const uint64_t width = manifest.at("width").get<uint64_t>();

  // Every listed file exists, starts with the NPY v1.0 magic, has a 64-byte-aligned header
  // naming its dtype and shape, and holds exactly rows·width (or width) elements after it.
  bufferlab::testing::expect_npy_files(out, manifest, {.bf16_named = false});
  EXPECT_TRUE(manifest.at("files").contains("backend_norm_output.npy"));
  EXPECT_EQ(manifest.at("files").at("input_weight.npy").at("shape"),
            nlohmann::json::array({width}));
  EXPECT_EQ(manifest.at("files").at("backend_norm_output.npy").at("format"),
            "bf16 as uint16 (raw bits)");
  EXPECT_NE(read_file(out / "input_weight.npy").find("'shape': (" + std::to_string(width) + ",)"),
            std::string::npos);
}

// ---- MoE ops (issue 4): router, topk, experts, lm-head ----

TEST_F(CliCompare, EveryMoeOpAgreesOnTinyPresets) {
  for (const char* args :
       {"--op router --preset tiny-moe --tokens 9 --path bf16",
        "--op router --preset tiny-mla --tokens 9 --path fp32-routing",
        "--op topk --preset tiny-moe --tokens 9 --path fp32-gate",
        "--op topk --preset tiny-mla --tokens 9 --path fp32-routing --pattern near-ties",
        "--op topk --preset tiny-mhc --tokens 9 --path bf16 --hash",
        "--op experts --preset tiny-moe --tokens 9", "--op experts --preset tiny-mla --tokens 4",
        "--op lm-head --preset tiny-dense --tokens 5"}) {
    bufferlab::testing::expect_agreed(run_compare(args), args, {"AGREE"});
  }
}

// The command on the real preset: the router and top-k are cheap enough for CI (the
// experts and LM head of qwen3-next-80b take a minute and gigabytes: tests/slow).
TEST_F(CliCompare, Qwen3NextTopKAndRouterAgree) {
  for (const char* path : {"bf16", "fp32-gate", "fp32-routing"}) {
    for (const char* op : {"topk", "router"}) {
      const CompareRun r = run_compare(std::string("--op ") + op +
                                       " --preset qwen3-next-80b --tokens 64 --path " + path);
      EXPECT_EQ(r.exit_code, 0) << op << " " << path << "\n" << r.output;
    }
  }
}

TEST_F(CliCompare, TopKNamesTheFirstTokenWhoseSelectionDiffers) {
  // The BF16 path on near-ties flips selections below its bound: reported, not failed.
  const CompareRun r =
      run_compare("--op topk --preset qwen3-next-80b --tokens 64 --path bf16 --pattern near-ties");
  expect_exit(r, 0, {"the first is token", ", at rank "});
  EXPECT_NE(r.output.find("backend (keys of its stored logits), ranked"), std::string::npos)
      << r.output;
  // The lines that explain the near-ties come before the verdict, which ends the report.
  const size_t verdict = r.out.rfind("\nAGREE\n");
  ASSERT_NE(verdict, std::string::npos) << r.out;
  EXPECT_EQ(verdict + 7, r.out.size()) << r.out;
  EXPECT_LT(r.out.find("tokens differ from the oracle's selection"), verdict) << r.out;
  EXPECT_LT(r.out.find("tie check"), verdict) << r.out;
}

// Every op's report ends with its verdict: AGREE, DISAGREE (seed N) or "DISAGREE: the
// workspace cannot hold the op" — whatever it explains (notes, first differences) comes first.
TEST_F(CliCompare, EveryOpEndsWithItsVerdict) {
  const auto last_line = [](const std::string& out) {
    const size_t start = out.rfind('\n', out.size() >= 2 ? out.size() - 2 : 0);
    return out.substr(start == std::string::npos ? 0 : start + 1);
  };
  for (const char* args :
       {"--op rmsnorm --preset tiny-moe --tokens 4", "--op router --preset tiny-moe --tokens 4",
        "--op topk --preset tiny-moe --tokens 4 --pattern near-ties",
        "--op experts --preset tiny-moe --tokens 4", "--op lm-head --preset tiny-dense --tokens 4",
        "--op hc-pre --preset tiny-mhc --tokens 4", "--op hc-post --preset tiny-mhc --tokens 4",
        "--op hc-head --preset tiny-mhc --tokens 4", "--op hc-expand --preset tiny-mhc --tokens 4",
        "--op hc-lowrank --preset tiny-mhc-lowrank --tokens 4",
        "--op gdn --preset tiny-gdn --tokens 4", "--op ssd --preset tiny-mamba --tokens 4"}) {
    const CompareRun r = run_compare(args);
    EXPECT_EQ(last_line(r.out), "AGREE\n") << args << "\n" << r.out;
  }
  const CompareRun b13 = run_compare("--op hc-post --preset tiny-mhc --tokens 4 --mutant B13");
  EXPECT_EQ(last_line(b13.out), "DISAGREE (seed 1)\n") << b13.out;
}

TEST_F(CliCompare, KernelMutantsAreCaughtWithTheirFinding) {
  const CompareRun b14 = run_compare(
      "--op topk --preset qwen3-next-80b --tokens 64 --path fp32-gate --pattern near-ties "
      "--mutant B14");
  EXPECT_EQ(b14.exit_code, 1) << b14.output;
  EXPECT_NE(b14.output.find("first bad topk_ids (tie stability, fp32-gate path)"),
            std::string::npos)
      << b14.output;
  const CompareRun tie = run_compare(
      "--op topk --preset qwen3-next-80b --tokens 64 --path fp32-gate --pattern all-equal "
      "--mutant M-TIE");
  expect_exit(tie, 1, {"exact tie"});
  // DeepSeek-V3.2 routes by group (8 groups, keep 4): the group step is its own stage, and
  // ranking the groups by their best expert alone fails it, naming the groups.
  const CompareRun grouped = run_compare("--op topk --preset deepseek-v3.2 --tokens 64");
  expect_exit(grouped, 0, {"groups=4/8", "topk_groups (group step, tie stability, bf16 path)"});
  const CompareRun group =
      run_compare("--op topk --preset deepseek-v3.2 --tokens 64 --mutant M-GROUP");
  expect_exit(group, 1, {"first bad topk_groups (group step", "provably outrank"});
}

TEST_F(CliCompare, MoeOpsRefuseBadInput) {
  in_process_ = true;
  for (const char* args :
       {"--op topk --preset tiny-dense --tokens 4", "--op experts --preset tiny-dense --tokens 4",
        "--op topk --preset tiny-moe --path fp16", "--op topk --preset tiny-moe --pattern nope",
        "--op topk --preset tiny-moe --hash", "--op topk --preset tiny-moe --mutant B4",
        "--op softmax --preset tiny-moe"}) {
    bufferlab::testing::expect_refused(run_compare(args), args);
  }
}

TEST_F(CliCompare, MoeJsonAndDump) {
  const CompareRun r =
      run_compare("--op topk --preset tiny-moe --tokens 6 --json --dump " + (dir_ / "d").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["tokens"], 6);
  EXPECT_EQ(j["nan_keys"], 0);
  EXPECT_TRUE(j.contains("selection_rows_differing_from_oracle"));
  const json m = read_manifest(dir_ / "d");
  EXPECT_EQ(m["op"], "topk");
  EXPECT_TRUE(m["files"].contains("backend_topk_ids.npy"));
  EXPECT_TRUE(fs::exists(dir_ / "d" / "oracle_exact_logits.npy"));
}

}  // namespace
