// CudaBackend's Gated DeltaNet and Mamba-2 SSD ops against the FP64 oracle and the CPU backend
// (spec/numerics.md §5, §6, §9), over the cases of properties/ssm_generators.h (CI ranges,
// kCases per family, both paths, the chunk edges 1, 63, 64, 65, 127) plus fixed cases:
//   - every stage of the CUDA run passes the judge (judge_gdn / judge_ssd with the device bound
//     model) on its own stored inputs, on an arena poisoned before the call (an unwritten
//     element fails), and so does the CPU run of the same inputs;
//   - CPU vs CUDA: the stages both backends compute from the SAME inputs (conv1d and, for GDN,
//     the gates) agree within the sum of the two judges' bounds (each check's largest
//     per-element bound: |cpu − cuda| ≤ b_cpu + b_cuda ≤ max b_cpu + max b_cuda). Later stages
//     read each backend's own stored intermediates, so no common bound exists: each is judged,
//     their largest difference is printed;
//   - co-dispatched sequences equal each alone, and a split at a multiple of 64 equals one pass,
//     bit for bit on the device too;
//   - planted bugs: a CUDA stage output left poisoned fails its check; M-GDNCARRY fails a
//     state-stage check and M-SSDSTATE fails "y (scan)" on the device.
// Without a usable GPU every test is SKIPPED with cuda_unavailable_reason().
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/ssd.h"
#include "bufferlab/oracle/ssd_harness.h"
#include "bufferlab/oracle/ssd_judge.h"
#include "bufferlab/properties/ssm_generators.h"

namespace bufferlab {
namespace {

using oracle::GdnPath;
using oracle::SsdPath;
using U = uint64_t;

constexpr int kCases = 40;
constexpr U kChunk = 64;

// rc::detail::checkGTest with `cases` successes.
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

const oracle::TensorComparison* check_named(const oracle::AgreementReport& r,
                                            const std::string& name) {
  for (const auto& c : r.checks)
    if (c.name == name) return &c;
  return nullptr;
}

bool any_failing(const oracle::AgreementReport& r, const std::string& part) {
  return std::any_of(r.checks.begin(), r.checks.end(), [&](const auto& c) {
    return !c.passed() && c.name.find(part) != std::string::npos;
  });
}

// |a − b| ≤ bound for every element (NaN never passes); returns the largest |a − b|.
template <class T>
double max_difference(const std::vector<T>& a, const std::vector<T>& b, double bound,
                      bool& within) {
  within = a.size() == b.size();
  double worst = 0.0;
  for (U e = 0; within && e < a.size(); ++e) {
    double x = 0.0, y = 0.0;
    if constexpr (sizeof(T) == 2) {
      x = bf16_bits_to_f32(a[e]);
      y = bf16_bits_to_f32(b[e]);
    } else {
      x = a[e];
      y = b[e];
    }
    const double d = std::fabs(x - y);
    if (!(d <= bound)) within = false;
    if (std::isfinite(d)) worst = std::max(worst, d);
  }
  return worst;
}

// A stage both backends compute from the same inputs: within the sum of the two judges'
// largest bounds of that check.
template <class T>
void require_common_stage(const std::string& check, const std::vector<T>& cpu,
                          const std::vector<T>& gpu, const oracle::AgreementReport& rc,
                          const oracle::AgreementReport& rg) {
  const auto* a = check_named(rc, check);
  const auto* b = check_named(rg, check);
  RC_ASSERT(a != nullptr && b != nullptr);
  const double bound = a->tol.abs + b->tol.abs;
  bool within = false;
  const double worst = max_difference(cpu, gpu, bound, within);
  RC_LOG() << check << ": cpu vs cuda max |Δ| " << worst << " (bound " << bound << ")\n";
  RC_ASSERT(within);
}

template <class T>
void log_difference(const std::string& what, const std::vector<T>& cpu, const std::vector<T>& gpu) {
  bool within = false;
  RC_LOG() << what << ": cpu vs cuda max |Δ| "
           << max_difference(cpu, gpu, std::numeric_limits<double>::infinity(), within)
           << " (reported)\n";
}

class CudaSsm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu_ = make_cuda_backend();
    cpu_ = make_backend("cpu");
  }

  struct GdnCall {
    oracle::GdnPlan plan;
    oracle::GdnRun run;
  };
  static GdnCall run_gdn(Backend& b, const oracle::GdnDims& dims, GdnPath path,
                         const oracle::GdnInputs& in) {
    GdnCall c{oracle::plan_gdn(dims, path), {}};
    const Workspace ws = oracle::allocate_gdn_footprint(b, c.plan);
    c.run = oracle::run_gdn(b, ws, c.plan, in);
    return c;
  }

  struct SsdCall {
    oracle::SsdPlan plan;
    oracle::SsdRun run;
  };
  static SsdCall run_ssd(Backend& b, const oracle::SsdDims& dims, SsdPath path,
                         const oracle::SsdInputs& in) {
    SsdCall c{oracle::plan_ssd(dims, path), {}};
    const Workspace ws = oracle::allocate_ssd_footprint(b, c.plan);
    c.run = oracle::run_ssd(b, ws, c.plan, in);
    return c;
  }

  // Both backends on one GDN case: each judged, the common stages compared.
  void gdn_case(const gen::GdnCase& c) {
    const auto dims = c.dims();
    const auto in = gen::gdn_inputs(c);
    const GdnCall g = run_gdn(*gpu_, dims, c.path, in);
    const GdnCall k = run_gdn(*cpu_, dims, c.path, in);
    const auto rg = oracle::judge_gdn(g.plan, in, g.run, "cuda", c.seed, oracle::device_bounds());
    const auto rc = oracle::judge_gdn(k.plan, in, k.run, "cpu", c.seed);
    RC_LOG() << oracle::format_report(rg);
    RC_ASSERT(rg.passed());
    RC_LOG() << oracle::format_report(rc);
    RC_ASSERT(rc.passed());
    require_common_stage("conv1d (ssm_conv_out_f32)", k.run.conv, g.run.conv, rc, rg);
    require_common_stage("gates (beta, alpha)", k.run.gates, g.run.gates, rc, rg);
    RC_ASSERT(k.run.conv_state == g.run.conv_state);  // exact: the last K − 1 inputs
    log_difference("core output", k.run.core, g.run.core);
    log_difference("gated norm", k.run.normed, g.run.normed);
    log_difference("final state", k.run.state, g.run.state);
  }

  void ssd_case(const gen::SsdCase& c) {
    const auto dims = c.dims();
    const auto in = gen::ssd_inputs(c);
    const SsdCall g = run_ssd(*gpu_, dims, c.path, in);
    const SsdCall k = run_ssd(*cpu_, dims, c.path, in);
    const auto rg = oracle::judge_ssd(g.plan, in, g.run, "cuda", c.seed, oracle::device_bounds());
    const auto rc = oracle::judge_ssd(k.plan, in, k.run, "cpu", c.seed);
    RC_LOG() << oracle::format_report(rg);
    RC_ASSERT(rg.passed());
    RC_LOG() << oracle::format_report(rc);
    RC_ASSERT(rc.passed());
    require_common_stage("conv1d (xBC)", k.run.xbc, g.run.xbc, rc, rg);
    RC_ASSERT(k.run.conv_state == g.run.conv_state);
    log_difference("y", k.run.y, g.run.y);
    log_difference("gated norm", k.run.normed, g.run.normed);
    log_difference("final state", k.run.state, g.run.state);
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

gen::GdnCase fixed_gdn(U nk, U kd, U nv, U vd, U kernel, U sequences, U L, GdnPath path, U seed) {
  gen::GdnCase c;
  c.config = gen::gdn_config(nk, kd, nv, vd, kernel);
  c.sequences = sequences;
  c.L = L;
  c.path = path;
  c.seed = seed;
  return c;
}

gen::SsdCase fixed_ssd(U H, U P, U N, U ng, U kernel, U sequences, U L, SsdPath path, U seed) {
  gen::SsdCase c;
  c.config = gen::ssd_config(H, P, N, ng, kernel);
  c.sequences = sequences;
  c.L = L;
  c.path = path;
  c.seed = seed;
  return c;
}

// T = 1, 63, 64, 65, 127 on both paths, GQA, co-dispatched streams (B15's shape).
TEST_F(CudaSsm, GdnFixedCasesAgree) {
  check_many(
      [this] {
        const U L = *rc::gen::element<U>(1, 63, 64, 65, 127);
        const bool chunked = *rc::gen::arbitrary<bool>();
        const gen::GdnCase c =
            chunked
                ? fixed_gdn(1, 128, 2, 128, 4, *rc::gen::inRange<U>(1, 4), L, GdnPath::chunked, L)
                : fixed_gdn(2, 64, 4, 32, 3, *rc::gen::inRange<U>(1, 4), L, GdnPath::recurrent, L);
        RC_LOG() << c.describe() << "\n";
        gdn_case(c);
      },
      20);
}

TEST_F(CudaSsm, GdnGeneratedCasesAgree) {
  check_many([this] {
    const gen::GdnCase c = *gen::gdn_case(gen::ci_gdn_ranges());
    RC_LOG() << c.describe() << "\n";
    gdn_case(c);
  });
}

TEST_F(CudaSsm, SsdFixedCasesAgree) {
  check_many(
      [this] {
        const U L = *rc::gen::element<U>(1, 63, 64, 65, 127);
        const gen::SsdCase c =
            fixed_ssd(4, 16, 32, 2, 4, *rc::gen::inRange<U>(1, 4), L,
                      *rc::gen::element(SsdPath::chunked, SsdPath::recurrent), L);
        RC_LOG() << c.describe() << "\n";
        ssd_case(c);
      },
      20);
}

TEST_F(CudaSsm, SsdGeneratedCasesAgree) {
  check_many([this] {
    const gen::SsdCase c = *gen::ssd_case(gen::ci_ssd_ranges());
    RC_LOG() << c.describe() << "\n";
    ssd_case(c);
  });
}

// Sequences co-dispatched equal each alone, and a split at 64 equals one pass, on the device.
TEST_F(CudaSsm, GdnSequencesAndSplitsAreBitIdentical) {
  for (const GdnPath path : {GdnPath::chunked, GdnPath::recurrent}) {
    const gen::GdnCase c = fixed_gdn(1, 128, 2, 128, 4, 3, 100, path, 7);
    const auto dims = c.dims();
    const auto in = gen::gdn_inputs(c);
    const GdnCall all = run_gdn(*gpu_, dims, path, in);
    const U w = dims.geom.value_dim, state = dims.geom.nv * dims.geom.kd * dims.geom.vd;
    for (U b = 0; b < c.sequences; ++b) {
      const GdnCall one = run_gdn(*gpu_, oracle::GdnDims::of(c.config, 1, c.L), path,
                                  oracle::gdn_sequence(dims, in, b));
      EXPECT_EQ(0, std::memcmp(all.run.core.data() + b * c.L * w, one.run.core.data(), c.L * w * 2))
          << gen::to_string(path) << " sequence " << b;
      EXPECT_EQ(0, std::memcmp(all.run.state.data() + b * state, one.run.state.data(), state * 4))
          << gen::to_string(path) << " sequence " << b;
    }
    const auto seq = oracle::gdn_sequence(dims, in, 0);
    const auto one_dims = oracle::GdnDims::of(c.config, 1, c.L);
    const GdnCall whole = run_gdn(*gpu_, one_dims, path, seq);
    const GdnCall first =
        run_gdn(*gpu_, oracle::GdnDims::of(c.config, 1, kChunk), path,
                oracle::gdn_token_range(one_dims, seq, 0, kChunk, seq.conv_state, seq.state));
    const GdnCall second = run_gdn(
        *gpu_, oracle::GdnDims::of(c.config, 1, c.L - kChunk), path,
        oracle::gdn_token_range(one_dims, seq, kChunk, c.L, first.run.conv_state, first.run.state));
    EXPECT_EQ(0, std::memcmp(whole.run.core.data() + kChunk * w, second.run.core.data(),
                             (c.L - kChunk) * w * 2))
        << gen::to_string(path) << ": split at 64";
    EXPECT_EQ(whole.run.state, second.run.state) << gen::to_string(path) << ": split at 64";
  }
}

TEST_F(CudaSsm, SsdSequencesAndSplitsAreBitIdentical) {
  for (const SsdPath path : {SsdPath::chunked, SsdPath::recurrent}) {
    const gen::SsdCase c = fixed_ssd(4, 16, 32, 2, 4, 3, 100, path, 7);
    const auto dims = c.dims();
    const auto in = gen::ssd_inputs(c);
    const SsdCall all = run_ssd(*gpu_, dims, path, in);
    const U w = dims.geom.d_inner, state = dims.geom.H * dims.geom.P * dims.geom.N;
    for (U b = 0; b < c.sequences; ++b) {
      const SsdCall one = run_ssd(*gpu_, oracle::SsdDims::of(c.config, 1, c.L), path,
                                  oracle::ssd_sequence(dims, in, b));
      EXPECT_EQ(0, std::memcmp(all.run.y.data() + b * c.L * w, one.run.y.data(), c.L * w * 2))
          << gen::to_string(path) << " sequence " << b;
      EXPECT_EQ(0, std::memcmp(all.run.state.data() + b * state, one.run.state.data(), state * 4))
          << gen::to_string(path) << " sequence " << b;
    }
    const auto seq = oracle::ssd_sequence(dims, in, 0);
    const auto one_dims = oracle::SsdDims::of(c.config, 1, c.L);
    const SsdCall whole = run_ssd(*gpu_, one_dims, path, seq);
    const SsdCall first =
        run_ssd(*gpu_, oracle::SsdDims::of(c.config, 1, kChunk), path,
                oracle::ssd_token_range(one_dims, seq, 0, kChunk, seq.conv_state, seq.state));
    const SsdCall second = run_ssd(
        *gpu_, oracle::SsdDims::of(c.config, 1, c.L - kChunk), path,
        oracle::ssd_token_range(one_dims, seq, kChunk, c.L, first.run.conv_state, first.run.state));
    EXPECT_EQ(0, std::memcmp(whole.run.y.data() + kChunk * w, second.run.y.data(),
                             (c.L - kChunk) * w * 2))
        << gen::to_string(path) << ": split at 64";
    EXPECT_EQ(whole.run.state, second.run.state) << gen::to_string(path) << ": split at 64";
  }
}

// ---- planted bugs on the device -------------------------------------------------------------

TEST_F(CudaSsm, PoisonedCudaOutputsFailTheirChecks) {
  const gen::GdnCase gc = fixed_gdn(1, 128, 1, 128, 4, 1, 65, GdnPath::chunked, 3);
  const auto gin = gen::gdn_inputs(gc);
  GdnCall g = run_gdn(*gpu_, gc.dims(), gc.path, gin);
  g.run.core[5] = 0xFFFF;
  g.run.W[7] = 0xFFFF;
  const auto rg = oracle::judge_gdn(g.plan, gin, g.run, "cuda", 3, oracle::device_bounds());
  for (const char* name : {"core output (output)", "W (wu)"}) {
    const auto* c = check_named(rg, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_FALSE(c->passed()) << name;
  }
  const gen::SsdCase sc = fixed_ssd(2, 16, 16, 1, 4, 1, 65, SsdPath::chunked, 3);
  const auto sin = gen::ssd_inputs(sc);
  SsdCall s = run_ssd(*gpu_, sc.dims(), sc.path, sin);
  s.run.y[3] = 0xFFFF;
  s.run.sequences[0].cb[0] = std::bit_cast<float>(0xFFFFFFFFu);
  const auto rs = oracle::judge_ssd(s.plan, sin, s.run, "cuda", 3, oracle::device_bounds());
  for (const char* name : {"y (scan)", "CB (bmm)"}) {
    const auto* c = check_named(rs, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_FALSE(c->passed()) << name;
  }
}

TEST_F(CudaSsm, KernelMutantsAreCaughtOnTheDevice) {
  gpu_->set_kernel_mutant(Mutant::M_GDNCARRY);
  for (const U L : {128, 129, 191}) {
    gen::GdnCase c = fixed_gdn(1, 128, 2, 128, 4, 1, L, GdnPath::chunked, L);
    c.profile.alpha = oracle::GdnGateRegime::near_one;
    const auto in = gen::gdn_inputs(c);
    const GdnCall g = run_gdn(*gpu_, c.dims(), c.path, in);
    const auto r = oracle::judge_gdn(g.plan, in, g.run, "cuda", c.seed, oracle::device_bounds());
    EXPECT_TRUE(any_failing(r, "(state)")) << "M-GDNCARRY, L " << L << "\n"
                                           << oracle::format_report(r);
  }
  gpu_->set_kernel_mutant(Mutant::M_SSDSTATE);
  for (const U L : {65, 128, 200}) {
    const gen::SsdCase c = fixed_ssd(2, 16, 16, 1, 4, 1, L, SsdPath::chunked, L);
    const auto in = gen::ssd_inputs(c);
    const SsdCall s = run_ssd(*gpu_, c.dims(), c.path, in);
    const auto r = oracle::judge_ssd(s.plan, in, s.run, "cuda", c.seed, oracle::device_bounds());
    const auto* y = check_named(r, "y (scan)");
    ASSERT_NE(y, nullptr);
    EXPECT_FALSE(y->passed()) << "M-SSDSTATE, L " << L << "\n" << oracle::format_report(r);
  }
  gpu_->set_kernel_mutant(Mutant::none);
}

}  // namespace
}  // namespace bufferlab
