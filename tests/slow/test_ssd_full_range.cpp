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
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/ssd.h"
#include "bufferlab/oracle/ssd_harness.h"
#include "bufferlab/oracle/ssd_judge.h"
#include "bufferlab/properties/ssm_generators.h"

namespace bufferlab {
namespace {

using gen::SsdCase;
using oracle::Mode;
using oracle::SsdPath;
using U = uint64_t;

constexpr int kCases = 20;
constexpr U kChunk = SsdCarve::kChunk;

template <class Testable>
void check_many(Testable&& testable, int cases = kCases) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  const auto result = rc::detail::checkTestable(std::forward<Testable>(testable), metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream ss;
    rc::detail::printResultMessage(result, ss);
    FAIL() << ss.str();
  }
}

Backend& cpu() {
  static const std::unique_ptr<Backend> backend = make_cpu_backend();
  return *backend;
}

SsdCase draw(gen::SsdRanges r = gen::full_ssd_ranges()) {
  SsdCase c = *gen::ssd_case(r);
  RC_LOG() << c.describe() << "\n";
  return c;
}

struct Call {
  oracle::SsdPlan plan;
  oracle::SsdRun run;
};

Call run_call(const oracle::SsdDims& dims, SsdPath path, const oracle::SsdInputs& in) {
  Call c{oracle::plan_ssd(dims, path), {}};
  const Workspace ws = oracle::allocate_ssd_footprint(cpu(), c.plan);
  c.run = oracle::run_ssd(cpu(), ws, c.plan, in);
  return c;
}

void require_passed(const oracle::AgreementReport& r) {
  RC_LOG() << oracle::format_report(r);
  RC_ASSERT(r.passed());
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
std::span<const T> rows_of(const std::vector<T>& v, U row0, U rows, U cols) {
  return std::span<const T>(v).subspan(row0 * cols, rows * cols);
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

bool within_identity(const std::vector<double>& got, const std::vector<double>& want) {
  const double tol = 1e-12 * max_abs(want);
  if (got.size() != want.size()) return false;
  for (U e = 0; e < got.size(); ++e)
    if (!(std::fabs(got[e] - want[e]) <= tol)) {
      RC_LOG() << "element " << e << ": " << got[e] << " vs " << want[e] << "\n";
      return false;
    }
  return true;
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
