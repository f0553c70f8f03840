// `plan --sizing tight` end to end: its JSON verifies clean through `verify --sizes` (clean by
// construction), and it is tight — every touched buffer cut 16 bytes below its high-water
// mark makes `verify --sizes` exit 1 with a finding on that buffer. Run on small presets and
// a small run shape so each verify takes a fraction of a second.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/verify/high_water.h"
#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CliTight : public bufferlab::testing::CliCommandTest {
 protected:
  json run_json(std::vector<std::string> args, int expected_exit) {
    args.push_back("--json");
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out.substr(0, 2000);
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 2000);
    return j;
  }
  fs::path write(const std::string& name, const json& j) {
    const fs::path p = dir_ / name;
    bufferlab::testing::write_file(p, j.dump(2));
    return p;
  }
  std::vector<std::string> verify_sizes(const std::vector<std::string>& shape, const fs::path& f) {
    std::vector<std::string> args = {"verify"};
    args.insert(args.end(), shape.begin(), shape.end());
    args.insert(args.end(), {"--sizes", f.string()});
    return args;
  }

  // plan --sizing tight, checked clean; then each touched buffer shrunk by 16 bytes (a buffer
  // held at the 256-byte floor: 16 bytes below its mark) must fail naming it.
  void check_tight(const std::vector<std::string>& shape) {
    std::vector<std::string> plan = {"plan", "--sizing", "tight"};
    plan.insert(plan.end(), shape.begin(), shape.end());
    const json tight = run_json(plan, 0);
    ASSERT_EQ(tight.at("sizing"), "tight");
    const fs::path file = write("tight.json", tight);
    const json clean = run_json(verify_sizes(shape, file), 0);
    ASSERT_TRUE(clean.at("clean").get<bool>());
    EXPECT_EQ(clean.at("slack").at("needed_arena_bytes"), tight.at("arena_bytes"));

    size_t shrunk = 0;
    for (const json& row : clean.at("slack").at("buffers")) {
      if (!row.at("touched").get<bool>()) continue;
      const std::string name = row.at("buffer");
      const uint64_t mark = row.at("high_water");
      const uint64_t tight_bytes = row.at("tight_bytes");
      ASSERT_EQ(row.at("allocated"), tight_bytes) << name;
      // The file's bytes cut by 16; a buffer held at the 256-byte floor is cut below its mark.
      const bool floored = tight_bytes == bufferlab::verify::kTightFloor;
      if (!floored) {
        EXPECT_EQ(tight_bytes, mark) << name;
      }
      const uint64_t base = floored ? mark : tight_bytes;
      ASSERT_GT(base, 1u) << name;
      const uint64_t cut = base > 16 ? base - 16 : base - 1;
      json p = tight;
      for (json& b : p.at("buffers"))
        if (b.at("name") == name) b["bytes"] = cut;
      const json r = run_json(verify_sizes(shape, write("cut.json", p)), 1);
      bool named = false;
      for (const json& f : r.at("findings")) named = named || f.at("buffer") == name;
      EXPECT_TRUE(named) << name << " cut to " << cut << " (mark " << mark << ")";
      ++shrunk;
    }
    EXPECT_GT(shrunk, 10u);
  }
};

TEST_F(CliTight, TightMoeIsCleanAndEveryTouchedBufferIsAtItsMark) {
  check_tight({"--preset", "tiny-moe", "--max-batch-tokens", "64", "--max-seq-len", "1024",
               "--max-batch-size", "4"});
}

TEST_F(CliTight, TightGdnIsCleanAndEveryTouchedBufferIsAtItsMark) {
  check_tight({"--preset", "tiny-gdn", "--max-batch-tokens", "40", "--max-seq-len", "1024",
               "--max-batch-size", "4"});
}

TEST_F(CliTight, TableSaysCleanByConstructionAndMutantsAreRefused) {
  const auto r = run({"plan", "--preset", "tiny-dense", "--sizing", "tight"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sizing:     tight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clean over that grid by construction"), std::string::npos) << r.out;
  expect_error({"plan", "--preset", "tiny-dense", "--sizing", "tight", "--mutant", "B4"}, "tight");
}

}  // namespace
