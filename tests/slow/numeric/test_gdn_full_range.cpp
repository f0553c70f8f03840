// The GDN properties of tests/property/test_gdn_properties.cpp over their FULL ranges (label
// slow): T up to 4096 tokens per sequence, up to 16 co-dispatched streams (one case in three
// with L % 64 ≠ 0 and 8..16 streams, B15's condition), head sizes up to 256 on the recurrence,
// up to 8 key heads. Oracle work is capped at 2^30 multiply-adds per case
// (gen::full_gdn_ranges; the judge evaluates it a few times over); each property runs kCases
// cases (RC_PARAMS="seed=..." still picks the seed). Deeper: `bufferlab fuzz`.
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
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/properties/gdn_mamba2_generators.h"
#include "cpu_backend.h"
#include "gdn_mamba2_property_bodies.h"
#include "rapidcheck_cases.h"
#include "report_checks.h"

// Its own namespace: test_mamba2_full_range.cpp, its twin, names its kCases and uses the same
// shared bodies.
namespace bufferlab::gdn_full_range {
namespace {

constexpr int kCases = 20;
using namespace testing::gdn_mamba2;  // the bodies both families share (tests/support)
using testing::check_many;

TEST(GdnFullRange, CpuStagesPassTheJudge) {
  check_many(
      [] {
        stages_pass_the_judge(cpu_backend(), gen::full_gdn_ranges(), "8+ streams", "few streams");
      },
      kCases);
}

TEST(GdnFullRange, Fp64ChunkedEqualsRecurrence) {
  check_many(
      [] {
        const auto c = draw(identity_ranges(gen::full_gdn_ranges()));
        assert_within_identity(fp64_pair(c, gen::gdn_inputs(c)));
      },
      kCases);
}

// Many streams of L % 64 ≠ 0 in one call, each equal to itself alone (backend work only).
TEST(GdnFullRange, ManyCoDispatchedStreamsEqualEachAlone) {
  check_many([] { sequences_equal_each_alone(cpu_backend(), gen::full_gdn_ranges()); }, kCases);
}

// Long sequences split at a multiple of 64 (chunked) or anywhere (recurrence): bit-identical.
TEST(GdnFullRange, LongSequenceSplitAtAChunkEdgeIsBitIdentical) {
  check_many([] { long_split_is_bit_identical(cpu_backend(), gen::full_gdn_ranges()); }, kCases);
}

// B15's carve over the full range of co-dispatched prefills (static: no allocation): the
// corrected nt holds every stream's regions for n ≤ 16, n·L ≤ m ≤ 65536.
TEST(GdnFullRange, CorrectedCarveHoldsEveryStreamsRegions) {
  check_many(
      [] {
        ModelConfig config = preset("tiny-gdn");
        config.linear_num_key_heads = *rc::gen::inRange<U>(1, 5);
        config.linear_num_value_heads = config.linear_num_key_heads * *rc::gen::inRange<U>(1, 5);
        const U n = *rc::gen::inRange<U>(1, 17);
        const U L = *rc::gen::inRange<U>(1, 65536 / n + 1);
        const U m = *rc::gen::inRange<U>(n * L, std::min<U>(65536, n * L + 4096) + 1);
        RC_LOG() << "n " << n << " L " << L << " m " << m << "\n";
        const auto sizes = BufferSizes::from_config(config, RunShape{m, 65536, 16, 32}, Target{},
                                                    Sizing::corrected());
        const GdnGeometry g = GdnGeometry::of(config);
        for (const auto stage :
             {GdnChunkOp::Stage::wu, GdnChunkOp::Stage::state, GdnChunkOp::Stage::output}) {
          const auto op = GdnChunkOp::make(stage, g, 0, n, L, sizes.params.gdn_chunks);
          for (const Access& a : op.accesses())
            if (a.tensor.space == Space::arena && a.tensor.buffer == BufferId::gdn_fla_scratch)
              RC_ASSERT(a.end() <= sizes.gdn_fla_scratch);
        }
      },
      500);
}

}  // namespace
}  // namespace bufferlab::gdn_full_range
