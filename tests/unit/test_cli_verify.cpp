// End-to-end tests of `bufferlab verify`: a clean tiny preset, the catalogue's four
// verifier expectations (docs/spec/bug-catalogue.md B1, B2, B4, B9) through --mutant, and
// --sizes round trips. Expectations are written from the catalogue, not from the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// `bufferlab ARGS...` (each test names the command); run and expect_error come from
// CliCommandTest.
class CliVerify : public bufferlab::testing::CliCommandTest {
 protected:
  // Runs verify --json; checks the exit code matches the report's verdict.
  json verify_json(std::vector<std::string> args, int expected_exit) {
    args.insert(args.begin(), "verify");
    args.push_back("--json");
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out.substr(0, 2000);
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 2000);
    if (!j.is_discarded()) {
      EXPECT_EQ(j.at("clean").get<bool>(), expected_exit == 0);
    }
    return j;
  }

  fs::path write(const std::string& name, const json& j) {
    const fs::path p = dir_ / name;
    bufferlab::testing::write_file(p, j.dump(2));
    return p;
  }
};

// Findings matching (check, buffer ∈ buffers).
size_t count(const json& report, const std::string& check, const std::set<std::string>& buffers) {
  size_t n = 0;
  for (const auto& f : report.at("findings"))
    if (f.at("check") == check && buffers.count(f.at("buffer").get<std::string>())) ++n;
  return n;
}

TEST_F(CliVerify, TinyPresetIsCleanAndTheTableListsEveryPassKind) {
  const auto r = run({"verify", "--preset", "tiny-dense", "--max-batch-tokens", "100"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const std::string kind : {"prefill", "decode", "verify", "mixed", "codispatch", "total"})
    EXPECT_NE(r.out.find("\n" + kind + " "), std::string::npos) << kind << "\n" << r.out;
  EXPECT_NE(r.out.find("sizing:     corrected"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CLEAN"), std::string::npos) << r.out;

  const json j = verify_json({"--preset", "tiny-dense", "--max-batch-tokens", "100"}, 0);
  EXPECT_EQ(j.at("kinds").size(), 5u);
  EXPECT_TRUE(j.at("findings").empty());
  EXPECT_GT(j.at("plans").get<uint64_t>(), 0u);
  // The grid refuses the passes just past the limits (prefill m + 1, decode bs + 1).
  EXPECT_GT(j.at("kinds")[0].at("refused").get<uint64_t>(), 0u);
  EXPECT_EQ(j.at("kinds")[0].at("max_tokens"), 100);
}

// B4: FP8 GEMM rows ceil16(M) into buffers sized for m rows, m % 16 != 0.
// One report: what was checked over how many checks and distinct plans (the two counts
// labelled and consistent with the table), the result, the slack table, what to try next.
TEST_F(CliVerify, TheReportSaysWhatItCheckedAndEndsWithSlackAndNextSteps) {
  const auto r = run({"verify", "--preset", "tiny-moe", "--max-batch-tokens", "100"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  size_t at = 0;
  for (const std::string part :
       {"model:", "run shape:", "target:", "sizing:", "checked:", "bounds", "overlap", "liveness",
        "race", "read-before-write", "checks:", "distinct plans", "CLEAN", "slack", "high-water",
        "never touched", "arena:", "next:", "--sizing tight"}) {
    const size_t next = r.out.find(part, at);
    ASSERT_NE(next, std::string::npos) << "'" << part << "' after offset " << at << "\n" << r.out;
    at = next;
  }
  const json j = verify_json({"--preset", "tiny-moe", "--max-batch-tokens", "100"}, 0);
  uint64_t checks = 0, plans = 0;
  for (const auto& k : j.at("kinds")) {
    checks += k.at("checks").get<uint64_t>();
    plans += k.at("plans").get<uint64_t>();
  }
  EXPECT_EQ(j.at("checks"), checks);
  EXPECT_EQ(j.at("plans"), plans);
  EXPECT_LT(plans, checks);  // decode passes of one rung share a plan
  EXPECT_EQ(j.at("checked").size(), 7u);
  const json& slack = j.at("slack");
  EXPECT_EQ(slack.at("plans"), plans);
  EXPECT_LE(slack.at("needed_arena_bytes").get<uint64_t>(),
            slack.at("allocated_arena_bytes").get<uint64_t>());
  int64_t last = INT64_MAX;
  for (const auto& b : slack.at("buffers")) {  // most wasted first
    EXPECT_LE(b.at("wasted").get<int64_t>(), last) << b.dump();
    last = b.at("wasted").get<int64_t>();
    EXPECT_LE(b.at("high_water").get<uint64_t>(), b.at("allocated").get<uint64_t>()) << b.dump();
  }
}

TEST_F(CliVerify, MutantB4OverflowsAnFp8GemmOutput) {
  const json j = verify_json(
      {"--preset", "qwen3-next-80b", "--max-batch-tokens", "1193", "--mutant", "B4"}, 1);
  EXPECT_GT(count(j, "bounds",
                  {"qkv_output", "ssm_qkvz", "moe_output", "expert_gate_out", "expert_up_out",
                   "expert_down_out"}),
            0u)
      << j.at("findings").dump(1).substr(0, 3000);
  EXPECT_EQ(j.at("sizing"), "corrected+B4");
}

// B1: one position stream sized while multimodal RoPE uploads three.
TEST_F(CliVerify, MutantB1ShortsTheMropePositionsInScratch) {
  const json j =
      verify_json({"--preset", "qwen2.5-vl-7b", "--max-seq-len", "4096", "--mutant", "B1"}, 1);
  EXPECT_GT(count(j, "bounds", {"scratch"}) + count(j, "overlap", {"scratch"}), 0u)
      << j.at("findings").dump(1).substr(0, 3000);
}

// B2: scratch without the co-dispatch staging term: a legal pass the layout cannot stage.
TEST_F(CliVerify, MutantB2RefusesALegalCodispatch) {
  const json j =
      verify_json({"--preset", "qwen3-next-80b", "--max-seq-len", "4096", "--mutant", "B2"}, 1);
  EXPECT_GT(count(j, "ineligible", {"scratch"}), 0u) << j.at("findings").dump(1).substr(0, 3000);
}

// B9: decode metadata rows without the rung: 48 rows of positions run into seq_slot.
TEST_F(CliVerify, MutantB9OverlapsDecodeMetadata) {
  const json j =
      verify_json({"--preset", "qwen3-next-80b", "--max-batch-size", "36", "--mutant", "B9"}, 1);
  EXPECT_GT(count(j, "overlap", {"scratch"}), 0u) << j.at("findings").dump(1).substr(0, 3000);
}

// --pass prints one plan: under B9 (R = 36 while 33 sequences pad to 48 rows) the decode
// upload writes 48 positions (192 bytes) at the metadata base 32768, into seq_slot at
// 32768 + 4·36 = 32912.
TEST_F(CliVerify, OnePassPrintsItsStepsAndFindings) {
  const auto r = run({"verify", "--preset", "qwen3-next-80b", "--max-batch-size", "36", "--mutant",
                      "B9", "--pass", "decode(n=33)"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("scratch+32768 u32[48] [32768, 32960)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scratch+32912 i32[48]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overlap on scratch: bytes [32912, 32960)"), std::string::npos) << r.out;
  const auto clean = run({"verify", "--preset", "tiny-dense", "--pass", "mixed(n=3,t=20)",
                          "--paths", "proj=fp8,ffn=nvfp4"});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("CLEAN: no findings in this plan"), std::string::npos) << clean.out;
  expect_error({"verify", "--preset", "tiny-dense", "--pass", "decode(m=3)"}, "decode(m=3)");
  expect_error({"verify", "--preset", "tiny-dense", "--pass", "prefill(t=1)", "--paths", "lora=on"},
               "do not apply");
  expect_error({"verify", "--preset", "tiny-dense", "--paths", "proj=fp8"}, "--pass");
}

TEST_F(CliVerify, MutantWithSpecSizingIsAnError) {
  in_process_ = true;
  expect_error({"verify", "--preset", "tiny-dense", "--mutant", "B1", "--sizing", "spec"}, "B1");
  expect_error({"verify", "--preset", "tiny-dense", "--mutant", "B99"}, "B99");
  expect_error({"verify", "--preset", "tiny-dense", "--sizing", "tight"}, "tight");
  expect_error({"verify"}, "--preset");
  // Kernel mutants leave sizes and plans unchanged: verify refuses rather than report clean.
  expect_error({"verify", "--preset", "tiny-moe", "--mutant", "B14"}, "numerics");
  expect_error({"fuzz", "--cases", "5", "--mutant", "M-TIE"}, "numerics");
}

json plan_of(const bufferlab::testing::CliRun& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST_F(CliVerify, SizesFileRoundTripIsClean) {
  const std::vector<std::string> shape = {"--preset", "tiny-dense", "--max-batch-tokens", "64"};
  std::vector<std::string> plan = {"plan", "--sizing", "corrected", "--json"};
  plan.insert(plan.end(), shape.begin(), shape.end());
  const fs::path file = write("plan.json", plan_of(run(plan)));
  std::vector<std::string> args = shape;
  args.insert(args.end(), {"--sizes", file.string()});
  const json j = verify_json(args, 0);
  EXPECT_EQ(j.at("sizes_file").at("sizing"), "corrected");
  EXPECT_TRUE(j.at("short_buffers").empty());
}

// qkv_output = m_pad·qkv_dim·2 (docs/spec/buffers.md §3): 64 rows at m = 64; cut to 40 rows. A pass
// of T tokens writes at most ceil16(T) rows (the FP8 GEMM), so nothing with T ≤ 32 overflows; the
// grid's prefill(t=33) does on the FP8 path (48 rows), as does mixed(n=32,t=1).
TEST_F(CliVerify, SizesFileWithAShrunkBufferReportsItsSmallestPass) {
  const std::vector<std::string> shape = {"--preset", "tiny-dense", "--max-batch-tokens", "64"};
  std::vector<std::string> plan = {"plan", "--sizing", "corrected", "--json"};
  plan.insert(plan.end(), shape.begin(), shape.end());
  json p = plan_of(run(plan));
  uint64_t full = 0;
  for (auto& b : p.at("buffers"))
    if (b.at("name") == "qkv_output") {
      full = b.at("bytes").get<uint64_t>();
      ASSERT_EQ(full % 64, 0u);
      b["bytes"] = full / 64 * 40;
    }
  ASSERT_GT(full, 0u);
  const fs::path file = write("short.json", p);
  std::vector<std::string> args = shape;
  args.insert(args.end(), {"--sizes", file.string()});
  const json j = verify_json(args, 1);
  ASSERT_EQ(j.at("short_buffers").size(), 1u) << j.at("short_buffers").dump(1);
  const json& s = j.at("short_buffers")[0];
  EXPECT_EQ(s.at("buffer"), "qkv_output");
  EXPECT_EQ(s.at("bytes").get<uint64_t>(), full / 64 * 40);
  EXPECT_EQ(s.at("smallest_tokens"), 33);
  // Two grid passes have 33 tokens; ties keep the grid's order (prefill first).
  EXPECT_EQ(s.at("smallest_pass"), "prefill(t=33)");
  // ... and it is the smallest of all bounds findings on the buffer.
  for (const auto& f : j.at("findings"))
    if (f.at("buffer") == "qkv_output" && f.at("check") == "bounds") {
      EXPECT_GE(f.at("tokens").get<uint64_t>(), 33u) << f.dump();
    }

  // The text form has the section and names the pass.
  args.pop_back();
  args.push_back(file.string());
  args.insert(args.begin(), "verify");
  const auto r = run(args);
  EXPECT_EQ(r.exit_code, 1);
  const size_t at = r.out.find("short buffers");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qkv_output", at), std::string::npos);
  EXPECT_NE(r.out.find("prefill(t=33)", at), std::string::npos);
}

TEST_F(CliVerify, BadSizesFilesAreErrorsNamingTheField) {
  in_process_ = true;
  const std::vector<std::string> base = {"verify", "--preset", "tiny-dense", "--max-batch-tokens",
                                         "64"};
  json p = plan_of(run({"plan", "--preset", "tiny-dense", "--max-batch-tokens", "64", "--sizing",
                        "corrected", "--json"}));
  auto with = [&](const std::string& name, const json& j) {
    std::vector<std::string> a = base;
    a.insert(a.end(), {"--sizes", write(name, j).string()});
    return a;
  };
  json missing = p;
  auto& buffers = missing.at("buffers");
  buffers.erase(std::remove_if(buffers.begin(), buffers.end(),
                               [](const json& b) { return b.at("name") == "logits"; }),
                buffers.end());
  expect_error(with("missing.json", missing), "logits");
  json text = p;
  for (auto& b : text.at("buffers"))
    if (b.at("name") == "scratch") b["bytes"] = "12";
  expect_error(with("text.json", text), "scratch");
  json negative = p;
  for (auto& b : negative.at("buffers"))
    if (b.at("name") == "residual") b["bytes"] = -1;
  expect_error(with("negative.json", negative), "residual");
  json other_shape = p;
  other_shape["run_shape"]["max_batch_tokens"] = 128;
  expect_error(with("shape.json", other_shape), "max_batch_tokens");
  std::vector<std::string> absent = base;
  absent.insert(absent.end(), {"--sizes", (dir_ / "nope.json").string()});
  expect_error(absent, "nope.json");
}

}  // namespace
