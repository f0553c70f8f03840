// A new user's mistakes and questions (issue 15 item 5): a mistyped command or option is
// named with the nearest real one; every command's --help states what is required, its exit
// codes and two examples; a zero run-shape limit is an error naming the field; `plan` and
// `verify` report the arena's share of the target's memory, and an arena that cannot fit is
// a `capacity` finding (exit 1). The expected strings are written here by hand.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "common/command_help.h"
#include "common/suggest.h"
#include "contains.h"

namespace {

namespace fs = std::filesystem;
using bufferlab::testing::contains;
using nlohmann::json;

class CliUsage : public bufferlab::testing::CliCommandTest {
 protected:
  CliUsage() { in_process_ = true; }

  // exit 2, stderr "error: ..." containing `message` exactly, and nothing on stdout.
  void expect_refused(const std::vector<std::string>& argv, const std::string& message) {
    const auto r = run_argv(argv);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_TRUE(contains(r.err, message)) << "want: " << message << "\ngot:  " << r.err;
    EXPECT_EQ(r.out, "");
  }

  // A Hugging Face config whose hidden_size is 2^40: every size still fits in 64 bits at the
  // default shape (hidden_states = 2^13 · 2^40 · 2 B = 2^54 B), but the arena is petabytes.
  std::string huge_config() const {
    const json c = {{"model_type", "llama"},    {"hidden_size", uint64_t{1} << 40},
                    {"intermediate_size", 128}, {"vocab_size", 256},
                    {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                    {"num_hidden_layers", 2},   {"rms_norm_eps", 1e-5}};
    const fs::path p = dir_ / "huge.json";
    bufferlab::testing::write_file(p, c.dump());
    return p.string();
  }
};

TEST(Suggest, NearestNameWithinTwoEditsOrTheOnlyExtension) {
  using bufferlab::cli::closest_name;
  const std::vector<std::string> commands = {"presets", "config", "plan", "compare", "verify"};
  EXPECT_EQ(closest_name("plna", commands), "plan");     // a swap
  EXPECT_EQ(closest_name("verfy", commands), "verify");  // a deletion
  EXPECT_EQ(closest_name("comapre", commands), "compare");
  EXPECT_EQ(closest_name("xyzzy", commands), std::nullopt);
  EXPECT_EQ(closest_name("pl", commands), std::nullopt);  // too short to guess
  const std::vector<std::string> options = {"--max-seq-len", "--max-batch-size", "--sizing"};
  EXPECT_EQ(closest_name("--max-seq-lne", options), "--max-seq-len");
  EXPECT_EQ(closest_name("--max-seq", options), "--max-seq-len");  // the only extension
  EXPECT_EQ(closest_name("--max", options), std::nullopt);         // two extensions
}

TEST_F(CliUsage, AnUnknownCommandIsNamedWithTheNearestOne) {
  expect_refused({"plna"}, "unknown command 'plna'; did you mean 'plan'?");
  expect_refused({"verfy", "--preset", "tiny-dense"},
                 "unknown command 'verfy'; did you mean 'verify'?");
  expect_refused({"xyzzy"}, "unknown command 'xyzzy' (commands: presets, config, plan");
  expect_refused({"--bogus"}, "unknown option '--bogus'");
  expect_refused({"--verify"}, "unknown option '--verify'");
  expect_refused({"--verify"}, "did you mean 'verify'?");
  expect_refused({}, "a command is required: presets, config, plan, compare, verify");
}

TEST_F(CliUsage, AnUnknownOptionIsNamedWithTheCommandsNearestOption) {
  expect_refused({"plan", "--preset", "tiny-dense", "--max-seq-lne", "4"},
                 "unknown option '--max-seq-lne' for 'bufferlab plan'; did you mean "
                 "'--max-seq-len'?");
  expect_refused({"verify", "--preset", "tiny-dense", "--sizng=spec"},
                 "unknown option '--sizng' for 'bufferlab verify'; did you mean '--sizing'?");
  expect_refused({"compare", "--preset", "tiny-dense", "--tokenz", "4"},
                 "did you mean '--tokens'?");
  expect_refused({"plan", "--preset", "tiny-dense", "--no-such-option"},
                 "unknown option '--no-such-option' for 'bufferlab plan' (bufferlab plan --help "
                 "lists its options)");
  expect_refused({"plan", "--preset", "tiny-dense", "stray"},
                 "unexpected argument 'stray' for 'bufferlab plan'");
}

TEST_F(CliUsage, EveryCommandsHelpStatesWhatIsRequiredItsExitCodesAndTwoExamples) {
  const std::vector<std::string> need_model = {"config", "plan", "compare", "verify"};
  size_t commands = 0;
  for (const auto& help : bufferlab::cli::command_help()) {
    ++commands;
    const auto r = run_argv({help.command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << help.command << r.err;
    // The program's name, never the path it ran from (a build directory).
    EXPECT_TRUE(contains(r.out, "\nUsage: bufferlab " + help.command + " [OPTIONS]\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "Exit codes:\n  0 ")) << r.out;
    EXPECT_TRUE(contains(r.out, "\n  2   error: ")) << r.out;
    EXPECT_TRUE(contains(r.out, "Examples:\n  bufferlab " + help.command)) << r.out;
    EXPECT_EQ(help.examples.size(), 2u) << help.command;
    const bool model =
        std::find(need_model.begin(), need_model.end(), help.command) != need_model.end();
    EXPECT_EQ(contains(r.out, "Required: one of --preset NAME or --config FILE"), model) << r.out;
    if (model) {
      EXPECT_TRUE(contains(r.out, "REQUIRED unless --config")) << r.out;
      EXPECT_TRUE(contains(r.out, "REQUIRED unless --preset")) << r.out;
    }
  }
  EXPECT_EQ(commands, 7u);  // presets config plan compare verify fuzz sinkhorn
  // plan and verify name the exit code of an arena that does not fit.
  EXPECT_TRUE(contains(run_argv({"plan", "--help"}).out, "1   capacity: the arena does not fit"));
  EXPECT_TRUE(contains(run_argv({"verify", "--help"}).out, "larger than the target's memory"));
  // A command's own footer stays, before the shared part: compare's table of ops.
  const std::string compare = run_argv({"compare", "--help"}).out;
  EXPECT_LT(compare.find("\nops:\n  rmsnorm "), compare.find("Exit codes:")) << compare;
  EXPECT_TRUE(contains(compare, "\n  77  skipped: ")) << compare;
}

TEST_F(CliUsage, RunShapeLimitsBelowOneAreErrorsNamingTheField) {
  for (const std::string command : {"plan", "verify"}) {
    expect_refused({command, "--preset", "tiny-dense", "--max-seq-len", "0"}, "max_seq_len = 0");
    expect_refused({command, "--preset", "tiny-dense", "--max-batch-tokens", "0"},
                   "max_batch_tokens = 0");
    expect_refused({command, "--preset", "tiny-dense", "--max-batch-size", "0"},
                   "max_batch_size = 0");
  }
  // kv_block_size 0 is "not paged", not an error.
  EXPECT_EQ(run_argv({"plan", "--preset", "tiny-dense", "--kv-block-size", "0"}).exit_code, 0);
}

TEST_F(CliUsage, PlanAndVerifyReportTheArenasShareOfTheTargetsMemory) {
  const auto plan = run_argv({"plan", "--preset", "qwen3-next-80b"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_TRUE(contains(plan.out, "\ncapacity     arena ")) << plan.out;
  EXPECT_TRUE(contains(plan.out, " % of h200's 141 GB\n")) << plan.out;
  const auto gb10 = run_argv({"plan", "--preset", "tiny-dense", "--target", "gb10"});
  EXPECT_TRUE(contains(gb10.out, " % of gb10's 128 GB (shared with the CPU)\n")) << gb10.out;
  const auto verify = run_argv({"verify", "--preset", "tiny-dense", "--target", "h100"});
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_TRUE(contains(verify.out, "\ncapacity:   arena ")) << verify.out;
  EXPECT_TRUE(contains(verify.out, " % of h100's 80 GB\n")) << verify.out;
}

TEST_F(CliUsage, AnArenaLargerThanTheTargetIsACapacityFinding) {
  const std::string config = huge_config();
  // hidden_states alone is 2^54 B: the arena is at least that, and far above 141 GB.
  const auto plan = run_argv({"plan", "--config", config});
  EXPECT_EQ(plan.exit_code, 1) << plan.err;
  EXPECT_TRUE(contains(plan.out, ", does not fit\n")) << plan.out;
  EXPECT_TRUE(contains(plan.out, "\ncapacity: the arena does not fit the target: it needs "))
      << plan.out;
  EXPECT_TRUE(contains(plan.out, " — h200 has 141,000,000,000 B (141 GB) of device memory"))
      << plan.out;
  // --json keeps stdout one JSON document; the finding goes to stderr.
  const auto as_json = run_argv({"plan", "--config", config, "--json"});
  EXPECT_EQ(as_json.exit_code, 1);
  const json j = json::parse(as_json.out);
  EXPECT_GT(j.at("arena_bytes").get<uint64_t>(), uint64_t{1} << 54);
  EXPECT_FALSE(j.at("capacity").at("fits").get<bool>());
  EXPECT_EQ(j.at("capacity").at("arena_bytes"), j.at("arena_bytes"));
  EXPECT_EQ(j.at("capacity").at("memory_bytes").get<uint64_t>(), 141'000'000'000u);
  EXPECT_TRUE(contains(as_json.err, "capacity: the arena does not fit the target: it needs "))
      << as_json.err;
  // The sweep names the points that do not fit.
  const auto sweep = run_argv({"plan", "--config", config, "--sweep", "max-batch-tokens=1:2"});
  EXPECT_EQ(sweep.exit_code, 1);
  EXPECT_TRUE(contains(sweep.out, "of device memory (max_batch_tokens 2)")) << sweep.out;
  // verify: a finding of its own, whatever the plans say.
  const auto verify = run_argv({"verify", "--config", config});
  EXPECT_EQ(verify.exit_code, 1) << verify.err;
  EXPECT_TRUE(contains(verify.out, "\ncapacity: the arena does not fit the target: it needs "))
      << verify.out;
  EXPECT_TRUE(contains(verify.out, "the arena does not fit the target")) << verify.out;
  const auto verify_json = run_argv({"verify", "--config", config, "--json"});
  EXPECT_EQ(verify_json.exit_code, 1);
  const json v = json::parse(verify_json.out);
  EXPECT_FALSE(v.at("clean").get<bool>());
  EXPECT_FALSE(v.at("capacity").at("fits").get<bool>());
  EXPECT_EQ(v.at("capacity").at("memory_bytes").get<uint64_t>(), 141'000'000'000u);
}

// `plan` prints a table: it must not open a backend or allocate a workspace (which once kept
// 223 MB resident). The real program, its peak resident memory from wait4 (a few MB today).
TEST(PlanFootprint, PlanHoldsNoBackendMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds map shadow memory: resident size says nothing here";
#else
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl(BUFFERLAB_CLI_PATH, "bufferlab", "plan", "--preset", "qwen3-next-80b", nullptr);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(usage.ru_maxrss, 32 * 1024) << "plan peaked at " << usage.ru_maxrss << " KiB resident";
#endif
}

}  // namespace
