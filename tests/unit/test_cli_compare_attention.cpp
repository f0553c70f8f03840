// End-to-end tests of `bufferlab compare --op attn-prefill|attn-decode`: the real binary
// (BUFFERLAB_CLI_PATH) on the tiny presets and on small passes of real ones (Qwen3-Next: gated,
// partial rotary, qk_norm; gpt-oss: both layer kinds, sinks, yarn; Qwen2.5-VL: MRoPE) — every
// stage AGREEs on the CPU backend and on the kernel simulator, chunked prefill judges every
// chunk, --streams co-dispatches sequences, --json carries the pass's fields, and the option
// errors exit 2 naming the option.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/backends/backend_factory.h"
#include "cli_checks.h"
#include "cli_runner.h"

namespace {

using bufferlab::testing::contains;
using bufferlab::testing::expect_agreed;
using bufferlab::testing::expect_exit;
using bufferlab::testing::expect_fields;
using bufferlab::testing::expect_refused;
using bufferlab::testing::json_report;
using nlohmann::json;

class CliCompareAttention : public bufferlab::testing::CliCompareTest {};

TEST_F(CliCompareAttention, TinyPresetsAgreeOnTheCpu) {
  for (const char* args : {
           "--op attn-prefill --preset tiny-dense --tokens 9",
           "--op attn-prefill --preset tiny-gdn --tokens 7 --context 20",   // gated, qk_norm
           "--op attn-decode --preset tiny-dense --tokens 3 --context 40",  // split-K + merge
           "--op attn-decode --preset tiny-gdn --tokens 1",
       }) {
    expect_agreed(run_compare(args), args,
                  {"\nAGREE\n", "cache intact (cores)", "attn_output rows",
                   "re-run: bufferlab compare --op "});
  }
}

// Qwen3-Next's full-attention layer: gated, partial rotary 0.25, qk_norm, a cached prefix.
TEST_F(CliCompareAttention, Qwen3NextPrefillAfterACachedPrefixAgrees) {
  const std::string args = "--op attn-prefill --preset qwen3-next-80b --tokens 24 --context 40";
  expect_agreed(run_compare(args), args,
                {"compare attn-prefill: nq=16,nkv=2,hd=256,", "gated",
                 "1 stream of 24 tokens after 40 cached", "full layer", "on qwen3-next-80b",
                 "  gate  ", "\nAGREE\n"});
}

// gpt-oss alternates sliding (W = 128) and full layers: --layer judges either; with 300 cached
// keys the sliding rows see only the last 128.
TEST_F(CliCompareAttention, GptOssDecodeAgreesOnBothLayerKinds) {
  const std::string full =
      "--op attn-decode --preset gpt-oss-20b --tokens 4 --context 300 "
      "--layer full";
  expect_agreed(run_compare(full), full,
                {"compare attn-decode: nq=64,nkv=8,hd=64,", "W=128",
                 "4 decode rows of 300 cached keys each", "full layer", "\nAGREE\n"});
  const std::string sliding =
      "--op attn-decode --preset gpt-oss-20b --tokens 4 --context 300 "
      "--layer sliding";
  expect_agreed(run_compare(sliding), sliding,
                {"sliding layer (W = 128)", "--layer sliding", "\nAGREE\n"});
}

// Qwen2.5-VL: MRoPE with t != h != w positions (attention_inputs.h): the seeded h and w
// streams run up to P + 11 past the sequence position, below the run shape's max_seq_len.
TEST_F(CliCompareAttention, Qwen25VlMropePrefillAgrees) {
  const std::string args = "--op attn-prefill --preset qwen2.5-vl-7b --tokens 16";
  expect_agreed(run_compare(args), args, {"on qwen2.5-vl-7b", "\nAGREE\n"});
}

TEST_F(CliCompareAttention, ChunkedPrefillJudgesEveryChunk) {
  const std::string args = "--op attn-prefill --preset tiny-gdn --tokens 7 --context 20 --chunk 3";
  expect_agreed(run_compare(args), args,
                {"1 stream of 7 tokens after 20 cached, in 3 chunks of 3",
                 "attn (prefill core) [chunk 1/3]", "attn (prefill core) [chunk 3/3]",
                 "cache write (prefill) [chunk 2/3]", "--chunk 3", "\nAGREE\n"});
}

TEST_F(CliCompareAttention, StreamsAreCoDispatched) {
  const std::string args =
      "--op attn-prefill --preset tiny-dense --tokens 4 --streams 3 --context 5";
  expect_agreed(
      run_compare(args), args,
      {"3 streams of 4 tokens after 5 cached", "streams=3,L=4", "--streams 3", "\nAGREE\n"});
}

TEST_F(CliCompareAttention, JsonReportCarriesThePass) {
  const json p = json_report(
      run_compare("--op attn-prefill --preset tiny-gdn --tokens 6 --context 9 --chunk 4 "
                  "--streams 2 --json"));
  EXPECT_TRUE(p.at("agree").get<bool>()) << p.dump(1);
  EXPECT_NE(p.at("params").get<std::string>().find("streams=2,L=4"), std::string::npos)
      << p.dump(1);  // the first chunk's pass: 2 streams of 4 rows (then of 2)
  expect_fields(p, {{"op", "attn-prefill"},
                    {"model", "tiny-gdn"},
                    {"tokens", 6},
                    {"layer", "full"},
                    {"streams", 2},
                    {"context", 9},
                    {"chunks", 2},
                    {"mutant", "none"}});
  bool has_core = false;
  for (const auto& c : p.at("checks"))
    has_core |= c.at("tensor") == "attn (prefill core) [chunk 2/2]";
  EXPECT_TRUE(has_core) << p.dump(1);

  const json d = json_report(
      run_compare("--op attn-decode --preset tiny-dense --tokens 2 --context 33 --json"));
  EXPECT_TRUE(d.at("agree").get<bool>()) << d.dump(1);
  expect_fields(d, {{"op", "attn-decode"}, {"tokens", 2}, {"layer", "full"}, {"context", 33}});
  // The split count is the launch's (splitk_splits of the default target, nq = 6, R = 2).
  const uint64_t splits = d.at("splits").get<uint64_t>();
  EXPECT_GT(splits, 1u) << d.dump(1);
  EXPECT_NE(d.at("params").get<std::string>().find("R=2,live=2,S=" + std::to_string(splits)),
            std::string::npos)
      << d.dump(1);
}

TEST_F(CliCompareAttention, OptionErrorsExitTwoNamingTheOption) {
  expect_refused(run_compare("--op attn-prefill --preset tiny-dense --tokens 4 --layer sliding"),
                 "--layer sliding on tiny-dense",
                 "--layer sliding: tiny-dense has no sliding window (sliding_window = 0)");
  expect_refused(run_compare("--op gdn --preset tiny-gdn --tokens 4 --context 3"),
                 "--context on gdn",
                 "--context applies to attn-prefill and attn-decode only, not --op gdn");
  expect_refused(run_compare("--op attn-prefill --preset tiny-dense --tokens 4 --chunk 0"),
                 "--chunk 0", "--chunk 0: a chunk needs at least one token");
  expect_refused(run_compare("--op attn-decode --preset tiny-dense --tokens 4 --chunk 2"),
                 "--chunk on attn-decode", "--chunk applies to attn-prefill only");
  expect_refused(run_compare("--op attn-prefill --preset tiny-dense --tokens 4 --layer middle"),
                 "--layer middle", "--layer: unknown layer kind 'middle' (known: full, sliding)");
}

TEST_F(CliCompareAttention, AModelWithoutAttentionLayersIsRefused) {
  for (const char* op : {"attn-prefill", "attn-decode"}) {
    const std::string args = std::string("--op ") + op + " --preset tiny-mla --tokens 4";
    expect_refused(
        run_compare(args), args,
        std::string("tiny-mla has no grouped-query attention layer: --op ") + op + " needs one");
  }
}

// The CUDA kernels on the kernel simulator, tiny shapes (every launch runs twice there).
class CliCompareAttentionCudaSim : public bufferlab::testing::CliCompareTest {
 protected:
  void SetUp() override {
    CliCompareTest::SetUp();
    if (!bufferlab::cuda_sim_backend_built()) GTEST_SKIP() << "this build has no CUDA simulator";
  }
};

TEST_F(CliCompareAttentionCudaSim, TinyPassesAgreeOnTheSimulator) {
  for (const char* args : {
           "--op attn-prefill --preset tiny-dense --tokens 5 --backend cuda-sim",
           "--op attn-prefill --preset tiny-gdn --tokens 5 --context 18 --chunk 2 --streams 2 "
           "--backend cuda-sim",
           "--op attn-decode --preset tiny-dense --tokens 3 --context 40 --backend cuda-sim",
           "--op attn-decode --preset tiny-gdn --tokens 2 --context 17 --backend cuda-sim",
       }) {
    expect_agreed(run_compare(args), args,
                  {"\nAGREE\n", "cuda-sim: ", "attn_cache_write_kernel", "--backend cuda-sim"});
  }
}

TEST_F(CliCompareAttentionCudaSim, OptionErrorsAreTheSame) {
  expect_refused(
      run_compare("--op attn-decode --preset tiny-dense --tokens 2 --layer sliding --backend "
                  "cuda-sim"),
      "--layer sliding on the simulator", "--layer sliding: tiny-dense has no sliding window");
  expect_refused(run_compare("--op attn-prefill --preset tiny-mla --tokens 2 --backend cuda-sim"),
                 "tiny-mla on the simulator", "has no grouped-query attention layer");
}

}  // namespace
