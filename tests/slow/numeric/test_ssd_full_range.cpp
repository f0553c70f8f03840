// The SSD properties of tests/property/test_ssd_properties.cpp over their FULL ranges (label
// slow): T up to 4096 tokens per sequence, up to 16 sequences (one case in three with L % 64 ≠ 0
// and 8..16 sequences), H up to 32, P up to 128, N up to 256. Oracle work is capped at 2^30
// multiply-adds per case (gen::full_ssd_ranges); each property runs kCases cases
// (RC_PARAMS="seed=..." still picks the seed). Deeper: `bufferlab fuzz`.
// Built into bufferlab_slow_numeric_tests (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/ssd.h"
#include "bufferlab/oracle/ssd_harness.h"
#include "bufferlab/oracle/ssd_judge.h"
#include "bufferlab/properties/ssm_generators.h"
#include "gdn_mamba2_property_bodies.h"
#include "rapidcheck_cases.h"
#include "report_checks.h"

namespace bufferlab {
namespace {

using gen::SsdCase;
using oracle::Mode;
using oracle::SsdPath;
using U = uint64_t;

constexpr int kCases = 20;
using testing::cpu_backend;
using testing::require_passed;
using testing::gdn_mamba2::kChunk;
using testing::gdn_mamba2::rows_of;
using testing::gdn_mamba2::same_bits;
using testing::gdn_mamba2::within_identity;
using Call = testing::gdn_mamba2::Call<testing::gdn_mamba2::Mamba2Family>;

void check_many(const std::function<void()>& property, int cases = kCases) {
  testing::check_many(property, cases);
}

SsdCase draw(const gen::SsdRanges& r = gen::full_ssd_ranges()) {
  return testing::gdn_mamba2::draw(r);
}

Call run_call(const oracle::SsdDims& dims, SsdPath path, const oracle::SsdInputs& in) {
  return testing::gdn_mamba2::run_call(cpu_backend(), dims, path, in);
}

TEST(SsdFullRange, CpuStagesPassTheJudge) {
  check_many([] {
    const SsdCase c = draw();
    RC_TAG(gen::to_string(c.path), c.sequences >= 8 ? "8+ sequences" : "few sequences");
    const auto in = gen::ssd_inputs(c);
    const Call call = run_call(c.dims(), c.path, in);
    require_passed(oracle::judge_ssd(call.plan, in, call.run, "cpu", c.seed));
  });
}

// One sequence per case (the FP64 functions take one), up to 4096 tokens.
TEST(SsdFullRange, Fp64ChunkedEqualsRecurrence) {
  check_many([] {
    gen::SsdRanges r = gen::full_ssd_ranges();
    r.cap_chunked_cost = true;
    r.many_streams = false;
    SsdCase c = draw(r);
    c.sequences = 1;
    const auto dims = c.dims();
    const auto in = gen::ssd_inputs(c);
    const auto ref = oracle::ssd_reference(dims, in, Mode::exact);
    std::vector<double> A(dims.geom.H), D(in.D.begin(), in.D.end());
    for (U h = 0; h < dims.geom.H; ++h) A[h] = -std::exp(static_cast<double>(in.a_log[h]));
    const std::vector<double> s0(in.state.begin(), in.state.end());
    const auto ch = oracle::ssd_chunked_fp64(dims, ref.xbc, ref.dt, A, D, s0);
    const auto re = oracle::ssd_recurrence_fp64(dims, ref.xbc, ref.dt, A, D, s0);
    RC_ASSERT(within_identity(ch.y, re.y));
    RC_ASSERT(within_identity(ch.state, re.state));
  });
}

TEST(SsdFullRange, ManySequencesEqualEachAlone) {
  check_many([] {
    gen::SsdRanges r = gen::full_ssd_ranges();
    r.cost_cap = uint64_t{1} << 28;
    SsdCase c = draw(r);
    c.sequences = std::max<U>(c.sequences, 2);
    const auto dims = c.dims();
    const auto in = gen::ssd_inputs(c);
    const Call all = run_call(dims, c.path, in);
    const U w = dims.geom.d_inner, state = dims.geom.H * dims.geom.P * dims.geom.N;
    for (U b = 0; b < c.sequences; ++b) {
      const Call one = run_call(oracle::SsdDims::of(c.config, 1, c.L), c.path,
                                oracle::ssd_sequence(dims, in, b));
      RC_LOG() << "sequence " << b << "\n";
      RC_ASSERT(
          same_bits(rows_of(all.run.y, b * c.L, c.L, w), std::span<const uint16_t>(one.run.y)));
      RC_ASSERT(same_bits(rows_of(all.run.normed, b * c.L, c.L, w),
                          std::span<const uint16_t>(one.run.normed)));
      RC_ASSERT(
          same_bits(rows_of(all.run.state, b, 1, state), std::span<const float>(one.run.state)));
    }
  });
}

TEST(SsdFullRange, LongSequenceSplitAtAChunkEdgeIsBitIdentical) {
  check_many([] {
    gen::SsdRanges r = gen::full_ssd_ranges();
    r.cost_cap = uint64_t{1} << 28;
    r.many_streams = false;
    SsdCase c = draw(r);
    c.sequences = 1;
    if (c.L <= kChunk) c.L += kChunk;
    const U at = c.path == SsdPath::chunked ? kChunk * *rc::gen::inRange<U>(1, cdiv(c.L, kChunk))
                                            : *rc::gen::inRange<U>(1, c.L);
    RC_LOG() << "split at " << at << "\n";
    const auto dims = c.dims();
    const auto in = gen::ssd_inputs(c);
    const Call whole = run_call(dims, c.path, in);
    const Call first = run_call(oracle::SsdDims::of(c.config, 1, at), c.path,
                                oracle::ssd_token_range(dims, in, 0, at, in.conv_state, in.state));
    const Call second =
        run_call(oracle::SsdDims::of(c.config, 1, c.L - at), c.path,
                 oracle::ssd_token_range(dims, in, at, c.L, first.run.conv_state, first.run.state));
    const U w = dims.geom.d_inner;
    RC_ASSERT(
        same_bits(rows_of(whole.run.y, at, c.L - at, w), std::span<const uint16_t>(second.run.y)));
    RC_ASSERT(same_bits(std::span<const float>(whole.run.state),
                        std::span<const float>(second.run.state)));
  });
}

}  // namespace
}  // namespace bufferlab
