// The capacity rule (bufferlab/core/capacity.h) and the run-shape limits: each target's
// device memory as its vendor states it (decimal GB, written here by hand), an arena fits
// up to exactly that many bytes, and a run shape with a zero token or sequence limit is an
// error naming the field (kv_block_size 0 stays legal: no paged KV).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/capacity.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"

namespace bufferlab {
namespace {

TEST(Capacity, EachTargetKnowsItsDeviceMemoryInDecimalGigabytes) {
  EXPECT_EQ(Target::named("h200").memory_bytes, 141'000'000'000u);
  EXPECT_EQ(Target::named("h100").memory_bytes, 80'000'000'000u);
  EXPECT_EQ(Target::named("b200").memory_bytes, 180'000'000'000u);
  EXPECT_EQ(Target::named("gb10").memory_bytes, 128'000'000'000u);
  EXPECT_TRUE(Target::named("gb10").memory_shared);
  EXPECT_FALSE(Target::named("h200").memory_shared);
  EXPECT_EQ(Target{}.memory_bytes, Target::named("h200").memory_bytes);  // the default target
}

TEST(Capacity, AnArenaFitsUpToExactlyTheDeviceMemory) {
  const Target h100 = Target::named("h100");
  EXPECT_TRUE(capacity_of(80'000'000'000u, h100).fits());
  EXPECT_FALSE(capacity_of(80'000'000'001u, h100).fits());
  EXPECT_TRUE(capacity_of(0, h100).fits());
  EXPECT_DOUBLE_EQ(capacity_of(8'000'000'000u, h100).percent(), 10.0);
  EXPECT_DOUBLE_EQ(capacity_of(160'000'000'000u, h100).percent(), 200.0);
  const Capacity c = capacity_of(123, h100);
  EXPECT_EQ(c.arena_bytes, 123u);
  EXPECT_EQ(c.memory_bytes, 80'000'000'000u);
}

TEST(Capacity, TheDefaultPresetFitsEveryTarget) {
  const ModelConfig config = preset("qwen3-next-80b");
  for (const std::string& name : Target::names()) {
    const Target t = Target::named(name);
    const Layout layout = Layout::build(BufferSizes::from_config(config, RunShape{}, t));
    const Capacity c = capacity_of(layout.arena_bytes(), t);
    EXPECT_TRUE(c.fits()) << name;
    EXPECT_GT(c.percent(), 0.0) << name;
    EXPECT_LT(c.percent(), 100.0) << name;
  }
}

void expect_shape_error(const RunShape& s, const std::string& field) {
  try {
    s.validate();
    ADD_FAILURE() << "no error for " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(RunShapeLimits, TokenAndSequenceLimitsBelowOneAreErrorsNamingTheField) {
  RunShape s;
  s.max_batch_tokens = 0;
  expect_shape_error(s, "max_batch_tokens");
  s = RunShape{};
  s.max_seq_len = 0;
  expect_shape_error(s, "max_seq_len");
  s = RunShape{};
  s.max_batch_size = 0;
  expect_shape_error(s, "max_batch_size");
  s = RunShape{};
  s.kv_block_size = 0;  // not paged
  EXPECT_NO_THROW(s.validate());
  s = RunShape{1, 1, 0, 1};  // the smallest legal shape
  EXPECT_NO_THROW(s.validate());
}

}  // namespace
}  // namespace bufferlab
