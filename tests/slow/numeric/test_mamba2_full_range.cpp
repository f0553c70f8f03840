// The SSD properties of tests/property/test_mamba2_properties.cpp over their FULL ranges (label
// slow): T up to 4096 tokens per sequence, up to 16 sequences (one case in three with L % 64 ≠ 0
// and 8..16 sequences), H up to 32, P up to 128, N up to 256. Oracle work is capped at 2^30
// multiply-adds per case (gen::full_mamba2_ranges); each property runs kCases cases
// (RC_PARAMS="seed=..." still picks the seed). Deeper: `bufferlab fuzz`.
// Built into bufferlab_slow_numeric_tests (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "bufferlab/properties/gdn_mamba2_generators.h"
#include "cpu_backend.h"
#include "gdn_mamba2_property_bodies.h"
#include "rapidcheck_cases.h"
#include "report_checks.h"

// Its own namespace: test_gdn_full_range.cpp, its twin, names its kCases and uses the same
// shared bodies.
namespace bufferlab::mamba2_full_range {
namespace {

constexpr int kCases = 20;
using namespace testing::gdn_mamba2;  // the bodies both families share (tests/support)
using testing::check_many;

TEST(SsdFullRange, CpuStagesPassTheJudge) {
  check_many(
      [] {
        stages_pass_the_judge(cpu_backend(), gen::full_mamba2_ranges(), "8+ sequences",
                              "few sequences");
      },
      kCases);
}

// One sequence per case, up to 4096 tokens.
TEST(SsdFullRange, Fp64ChunkedEqualsRecurrence) {
  check_many(
      [] {
        gen::Mamba2Ranges r = identity_ranges(gen::full_mamba2_ranges());
        r.many_streams = false;
        gen::Mamba2Case c = draw(r);
        c.sequences = 1;
        assert_within_identity(fp64_pair(c, gen::mamba2_inputs(c)));
      },
      kCases);
}

TEST(SsdFullRange, ManySequencesEqualEachAlone) {
  check_many([] { sequences_equal_each_alone(cpu_backend(), gen::full_mamba2_ranges()); }, kCases);
}

TEST(SsdFullRange, LongSequenceSplitAtAChunkEdgeIsBitIdentical) {
  check_many([] { long_split_is_bit_identical(cpu_backend(), gen::full_mamba2_ranges()); }, kCases);
}

}  // namespace
}  // namespace bufferlab::mamba2_full_range
