// End-to-end tests of `bufferlab compare --op attn-prefill | attn-decode --mutant M-*`: the
// attention kernel mutants (docs/spec/bug-catalogue.md) on the real binary, each failing the
// run (exit 1) with the check that names it among the report's first-bad lines, on cpu and
// cuda-sim (where it is built), and the same command without --mutant agreeing (exit 0). Small
// shapes of the real presets: the contexts cross the 16-key blocks (shuffled by default),
// qwen3-next-80b has GQA 16/2, gpt-oss-20b sinks and 5 split-K parts per decode row,
// qwen2.5-vl-7b MRoPE with t != h != w.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "cli_checks.h"
#include "cli_runner.h"

namespace {

using bufferlab::testing::CliOutput;
using bufferlab::testing::expect_exit;

class CliCompareAttentionMutants : public bufferlab::testing::CliCompareTest {
 protected:
  static std::vector<std::string> backends() {
    if (bufferlab::cuda_sim_backend_built()) return {"cpu", "cuda-sim"};
    return {"cpu"};
  }

  // `args --backend B --mutant M` exits 1 naming every one of `checks` as a first-bad line;
  // `args --backend B` exits 0.
  void expect_caught(const std::string& args, const std::string& mutant,
                     const std::vector<std::string>& checks) const {
    for (const std::string& b : backends()) {
      const std::string clean = args + " --backend " + b;
      const std::string mutated = clean + " --mutant " + mutant;
      std::vector<std::string> named;
      for (const std::string& c : checks) named.push_back("first bad " + c + "[");
      named.push_back("DISAGREE");
      expect_exit(run_compare(mutated), 1, named, mutated + "\n");
      expect_exit(run_compare(clean), 0, {"AGREE"}, clean + "\n");
    }
  }
};

constexpr const char* kQwenNext =
    "--op attn-prefill --preset qwen3-next-80b --tokens 8 --context 40";
constexpr const char* kGptOssPrefill =
    "--op attn-prefill --preset gpt-oss-20b --layer full --tokens 6 --context 40";
constexpr const char* kGptOssDecode =
    "--op attn-decode --preset gpt-oss-20b --layer full --tokens 2 --context 200";
constexpr const char* kQwenVl = "--op attn-prefill --preset qwen2.5-vl-7b --tokens 6 --context 20";

TEST_F(CliCompareAttentionMutants, CausalLeakNamesTheCausalCheck) {
  expect_caught(kQwenNext, "M-CAUSAL", {"attn (prefill core, causal)", "attn (prefill core)"});
}

TEST_F(CliCompareAttentionMutants, GqaModuloNamesTheGqaMap) {
  expect_caught(kQwenNext, "M-GQA", {"attn (prefill core, GQA map)", "attn (prefill core)"});
}

TEST_F(CliCompareAttentionMutants, MergeWithoutRescaleFailsTheMerge) {
  expect_caught(kGptOssDecode, "M-MERGE", {"merge"});
}

TEST_F(CliCompareAttentionMutants, LogicalBlockFailsTheCoreOnTheShuffledCache) {
  expect_caught(kQwenNext, "M-BLOCK", {"attn (prefill core)"});
  expect_caught(kGptOssDecode, "M-BLOCK", {"partials (split-K)"});
}

TEST_F(CliCompareAttentionMutants, MropeSectionSwapFailsTheStaging) {
  expect_caught(kQwenVl, "M-MROPE", {"q (stage)", "k (stage)"});
}

TEST_F(CliCompareAttentionMutants, SinkInTheNumeratorFailsCoreAndMerge) {
  // Without sinks M-SINK changes nothing: gpt-oss-20b has them (the loader sets attn_sinks for
  // its model type, docs/spec/attention.md §1); the pass's geometry says ",sinks".
  const CliOutput probe =
      run_compare("--op attn-decode --preset gpt-oss-20b --tokens 1 --context 1");
  ASSERT_NE(probe.output.find(",sinks"), std::string::npos)
      << "gpt-oss-20b has no attention sinks:\n"
      << probe.output;
  expect_caught(kGptOssPrefill, "M-SINK", {"attn (prefill core)"});
  expect_caught(kGptOssDecode, "M-SINK", {"merge"});
}

// The acceptance command (cpu): the causal leak named at 200 tokens after 300 cached.
TEST_F(CliCompareAttentionMutants, AcceptanceCommandNamesTheCausalCheck) {
  const std::string args = "--op attn-prefill --preset qwen3-next-80b --tokens 200 --context 300";
  expect_exit(run_compare(args + " --mutant M-CAUSAL"), 1,
              {"first bad attn (prefill core, causal)[", "DISAGREE"}, args + "\n");
}

}  // namespace
