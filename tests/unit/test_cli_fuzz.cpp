// End-to-end tests of `bufferlab fuzz`: a clean run, the B9 mutant caught and saved as a
// replayable case, and the --shard / GoogleTest-sharding option handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/properties/fuzz_engine.h"
#include "cli_runner.h"

namespace {

using nlohmann::json;

// Sets (or unsets) an environment variable for the scope, restoring it afterwards: the
// child `bufferlab` inherits the test's environment.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// `bufferlab fuzz`; run, expect_error and written() come from CliCommandTest.
class CliFuzz : public bufferlab::testing::CliCommandTest {
 protected:
  CliFuzz() : CliCommandTest("fuzz") {}
};

// The default seed's first 50 cases under the corrected sizing.
TEST_F(CliFuzz, FiftyCasesAreClean) {
  const auto r = run({"--cases", "50", "--shard", "0/1", "--out", (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fuzz: 50 cases"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed 1,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cases/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no failure"), std::string::npos) << r.out;
  EXPECT_TRUE(written().empty());
}

// B9: decode metadata sized for max(max_batch_size, 32) rows instead of the padded rung.
// It only bites when max_batch_size is not a rung itself (and above 32): the shrunk case
// must sit just above a rung. --stop-on keeps the run going past failures of other kinds.
TEST_F(CliFuzz, MutantB9IsCaughtAndSavedAsAReplayableCase) {
  const auto r = run({"--mutant", "B9", "--stop-on", "overlap:scratch", "--seconds", "60", "--seed",
                      "1", "--shard", "0/1", "--out", (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto files = written();
  ASSERT_EQ(files.size(), 1u);
  const std::string name = files[0].filename().string();
  EXPECT_NE(name.find("seed1"), std::string::npos) << name;
  EXPECT_NE(name.find("shard0of1"), std::string::npos) << name;
  EXPECT_NE(r.out.find(name), std::string::npos) << r.out;

  const json j = json::parse(bufferlab::testing::read_file(files[0]));
  EXPECT_EQ(j.at("seed"), 1);
  EXPECT_EQ(j.at("sizing"), "corrected+B9");
  EXPECT_EQ(j.at("failure_kind"), "overlap:scratch");
  EXPECT_FALSE(j.at("findings").empty() && j.at("sizing_failures").empty()) << j.dump(1);
  EXPECT_TRUE(j.contains("original"));
  const bufferlab::fuzz::FuzzCase shrunk = bufferlab::fuzz::case_from_json(j);
  const uint64_t bs = shrunk.shape.max_batch_size;
  // The rungs of docs/spec/buffers.md §2, written out by hand.
  const std::vector<uint64_t> rungs = {2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  EXPECT_GT(bs, 32u) << j.dump(1);
  EXPECT_LT(bs, 128u) << j.dump(1);
  EXPECT_EQ(std::count(rungs.begin(), rungs.end(), bs), 0) << "max_batch_size " << bs;
  // The original case replays too.
  EXPECT_NO_THROW(bufferlab::fuzz::case_from_json(j.at("original")));
}

// Finding F9 (docs/findings.md): the fuzzer finds MLA's q width shortfall under `spec` on its
// own — no family, no hint — in a bounded run (seed 1 stops at case 432, well under a second).
// With the generator's old tie head_dim = nope + rope, the same run (and 20,000 cases) finds
// nothing: the untied MLA head_dim is what makes this test pass.
TEST_F(CliFuzz, SpecSizingFindsTheMlaQWidthShortfallOnItsOwn) {
  const auto r = run({"--sizing", "spec", "--seed", "1", "--cases", "2000", "--stop-on",
                      "bounds:qkv_output", "--shard", "0/1", "--out", (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("bounds:qkv_output"), std::string::npos) << r.out;
  const auto files = written();
  ASSERT_EQ(files.size(), 1u);
  const json j = json::parse(bufferlab::testing::read_file(files[0]));
  EXPECT_EQ(j.at("failure_kind"), "bounds:qkv_output");
  const json& c = j.at("config").at("config");
  EXPECT_GT(c.at("kv_lora_rank").get<uint64_t>(), 0u) << "an MLA model";
  EXPECT_LT(c.at("head_dim").get<uint64_t>(),
            c.at("qk_nope_head_dim").get<uint64_t>() + c.at("qk_rope_head_dim").get<uint64_t>())
      << "head_dim below nope + rope";
  // The shrunk case is clean under corrected (F9-mla-q-width).
  const bufferlab::fuzz::FuzzCase shrunk = bufferlab::fuzz::case_from_json(j);
  EXPECT_FALSE(bufferlab::fuzz::check_case(shrunk, bufferlab::Sizing::corrected()).failed());
}

TEST_F(CliFuzz, ShardOptionErrorsExitTwo) {
  in_process_ = true;
  expect_error({"--cases", "1", "--shard", "2/2"}, "--shard");
  expect_error({"--cases", "1", "--shard", "0/0"}, "--shard");
  expect_error({"--cases", "1", "--shard", "1"}, "--shard");
  expect_error({"--cases", "1", "--shard", "a/2"}, "--shard");
  expect_error({"--cases", "1", "--shard", "-1/2"}, "--shard");
}

TEST_F(CliFuzz, GoogleTestShardingVariablesChooseTheShard) {
  {
    ScopedEnv index("GTEST_SHARD_INDEX", "1");
    ScopedEnv total("GTEST_TOTAL_SHARDS", "3");
    const auto r = run({"--cases", "5", "--seed", "2", "--out", (dir_ / "out").string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("shard 1/3"), std::string::npos) << r.out;
    // --shard wins over the environment.
    const auto o = run({"--cases", "5", "--shard", "0/2", "--out", (dir_ / "out").string()});
    EXPECT_NE(o.out.find("shard 0/2"), std::string::npos) << o.out << o.err;
  }
  {
    ScopedEnv index("GTEST_SHARD_INDEX", "3");
    ScopedEnv total("GTEST_TOTAL_SHARDS", "3");
    expect_error({"--cases", "1"}, "GTEST_SHARD_INDEX");
  }
  {
    ScopedEnv index("GTEST_SHARD_INDEX", "0");
    ScopedEnv total("GTEST_TOTAL_SHARDS", nullptr);
    expect_error({"--cases", "1"}, "GTEST_TOTAL_SHARDS");
  }
}

TEST_F(CliFuzz, BadOptionsExitTwo) {
  in_process_ = true;
  expect_error({"--cases", "1", "--shard", "0/1", "--family", "transformer-xl"}, "transformer-xl");
  expect_error({"--seconds", "-1", "--shard", "0/1"}, "--seconds");
  expect_error({"--seconds", "0", "--shard", "0/1"}, "--seconds");
  expect_error({"--cases", "0", "--shard", "0/1"}, "--cases");
  expect_error({"--cases", "1", "--shard", "0/1", "--pass-kind", "encode"}, "encode");
  expect_error({"--cases", "1", "--shard", "0/1", "--corpus", (dir_ / "none").string()}, "none");
  expect_error({"--cases", "1", "--shard", "0/1", "--mutant", "B9", "--sizing", "spec"}, "B9");
}

}  // namespace
