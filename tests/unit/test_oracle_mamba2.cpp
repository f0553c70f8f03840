// The FP64 oracle of Mamba-2 SSD (oracle/ssd*.h): the chunked form equals the recurrence in
// FP64, the generator and its regimes, a token range with its carried state, and the judge —
// on a perfect run built from the oracle, on the CPU backend, with planted bugs and the
// M-SSDSTATE kernel mutant.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "fp64_diffs.h"
#include "gdn_mamba2_geometry.h"

namespace bufferlab::oracle {
namespace {

using fp64_diffs::max_abs;
using fp64_diffs::max_diff;

// The shared minimal Mamba-2 config, its gated norm at eps 1e-5.
ModelConfig mamba2_config(uint64_t H, uint64_t P, uint64_t N, uint64_t groups, uint64_t K = 4) {
  ModelConfig c = bufferlab::testing::mamba2_config(H, P, N, groups, K);
  c.rms_norm_eps = 1e-5;
  return c;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> a_of(const Mamba2Inputs& in) {
  std::vector<double> A;
  for (float v : in.a_log) A.push_back(-std::exp(static_cast<double>(v)));
  return A;
}

const char* regime_name(Mamba2DtRegime r) {
  return r == Mamba2DtRegime::typical ? "typical" : r == Mamba2DtRegime::large ? "large" : "tiny";
}

const TensorComparison* check(const AgreementReport& r, const std::string& name) {
  for (const auto& c : r.checks)
    if (c.name == name) return &c;
  ADD_FAILURE() << "no check named " << name;
  return nullptr;
}

std::string failing(const AgreementReport& r) {
  std::string s;
  for (const auto& c : r.checks)
    if (!c.passed()) s += c.name + "; ";
  return s;
}

// --- FP64 identities ---------------------------------------------------------------------------

TEST(OracleSsdFp64, ChunkedEqualsRecurrence) {
  for (uint64_t groups : {1u, 2u})
    for (Mamba2DtRegime regime :
         {Mamba2DtRegime::typical, Mamba2DtRegime::large, Mamba2DtRegime::tiny})
      for (uint64_t L : {1u, 63u, 64u, 65u, 127u, 200u}) {
        SCOPED_TRACE(::testing::Message()
                     << "G " << groups << ", dt " << regime_name(regime) << ", L " << L);
        const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, groups), 1, L);
        const Mamba2Inputs in = generate_mamba2_inputs(d, 7 + L, {regime, false, 1.0});
        const Mamba2Reference ex = mamba2_reference(d, in, Mode::exact);
        const std::vector<double> A = a_of(in), D = to_double(in.D), state = to_double(in.state);
        ASSERT_GT(max_abs(state), 0.0);
        const Mamba2CoreResult rec = mamba2_recurrence_fp64(d, ex.xbc, ex.dt, A, D, state);
        const Mamba2CoreResult chk = mamba2_chunked_fp64(d, ex.xbc, ex.dt, A, D, state);
        EXPECT_LE(max_diff(chk.y, rec.y), 1e-12 * max_abs(rec.y));
        EXPECT_LE(max_diff(chk.state, rec.state), 1e-12 * max_abs(rec.state));
        EXPECT_GT(max_abs(rec.state), 0.0);
        // exact mode is the recurrence on the same xBC and dt.
        EXPECT_EQ(max_diff(ex.y, rec.y), 0.0);
      }
}

TEST(OracleSsdFp64, OneTokenByHand) {
  // H = P = N = 1: h = e^(dt·A)·h0 + dt·x·B, y = h·C + D·x.
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(1, 1, 1, 1), 1, 1);
  const std::vector<double> xbc = {0.5, 2.0, -3.0}, dt = {0.25}, A = {-2.0}, D = {1.5},
                            state = {0.4};
  const double h = std::exp(-0.5) * 0.4 + 0.25 * 0.5 * 2.0;
  for (const Mamba2CoreResult& r : {mamba2_recurrence_fp64(d, xbc, dt, A, D, state),
                                    mamba2_chunked_fp64(d, xbc, dt, A, D, state)}) {
    EXPECT_NEAR(r.state[0], h, 1e-15);
    EXPECT_NEAR(r.y[0], -3.0 * h + 1.5 * 0.5, 1e-15);
  }
}

// --- generator -------------------------------------------------------------------------------

TEST(OracleSsdInputs, DeterministicAndSeeded) {
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 2, 20);
  const Mamba2Inputs a = generate_mamba2_inputs(d, 11), b = generate_mamba2_inputs(d, 11),
                     c = generate_mamba2_inputs(d, 12);
  EXPECT_EQ(a.zxbcdt, b.zxbcdt);
  EXPECT_EQ(a.conv_w, b.conv_w);
  EXPECT_EQ(a.a_log, b.a_log);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.conv_state, b.conv_state);
  EXPECT_NE(a.zxbcdt, c.zxbcdt);
  EXPECT_NE(a.state, c.state);
  EXPECT_EQ(a.zxbcdt.size(), 40u * d.geom.in_proj);
  EXPECT_EQ(a.state.size(), 2u * 4 * 8 * 6);
  for (double A : a_of(a)) {
    EXPECT_GE(A, -8.0 * (1 + 1e-6));
    EXPECT_LE(A, -0.5 * (1 - 1e-6));
  }
  const Mamba2Inputs z = generate_mamba2_inputs(d, 11, {Mamba2DtRegime::typical, true, 1.0});
  EXPECT_TRUE(std::all_of(z.state.begin(), z.state.end(), [](float v) { return v == 0.0f; }));
  EXPECT_TRUE(
      std::all_of(z.conv_state.begin(), z.conv_state.end(), [](uint16_t v) { return v == 0; }));
}

TEST(OracleSsdInputs, DtRegimesReachTheirRanges) {
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(8, 4, 4, 1), 1, 64);
  auto dts = [&](Mamba2DtRegime r) {
    const Mamba2Inputs in = generate_mamba2_inputs(d, 5, {r, false, 1.0});
    return std::pair{mamba2_reference(d, in, Mode::exact).dt, a_of(in)};
  };
  const auto [typ, A1] = dts(Mamba2DtRegime::typical);
  EXPECT_GE(*std::min_element(typ.begin(), typ.end()), 1e-4);
  EXPECT_LE(*std::max_element(typ.begin(), typ.end()), 0.3);
  const auto [large, A2] = dts(Mamba2DtRegime::large);
  EXPECT_GT(*std::max_element(large.begin(), large.end()), 30.0);
  double most_negative = 0.0;
  for (uint64_t i = 0; i < large.size(); ++i)
    most_negative = std::min(most_negative, large[i] * A2[i % d.geom.H]);
  EXPECT_LT(most_negative, -104.0);  // exp(dt·A) below FP32's smallest subnormal
  const auto [tiny, A3] = dts(Mamba2DtRegime::tiny);
  EXPECT_LT(*std::max_element(tiny.begin(), tiny.end()), 1e-6);
  EXPECT_EQ(*std::min_element(tiny.begin(), tiny.end()), static_cast<double>(kMamba2DtMin));
}

TEST(OracleSsdInputs, BadConfigsAreErrors) {
  EXPECT_THROW(Mamba2Dims::of(mamba2_config(0, 8, 6, 1), 1, 4), Error);
  EXPECT_THROW(Mamba2Dims::of(mamba2_config(4, 8, 6, 0), 1, 4), Error);
  EXPECT_THROW(Mamba2Dims::of(mamba2_config(4, 8, 6, 3), 1, 4), Error);
  EXPECT_THROW(Mamba2Dims::of(mamba2_config(4, 8, 6, 1), 0, 4), Error);
  EXPECT_THROW(Mamba2Dims::of(mamba2_config(4, 8, 6, 1), 1, 0), Error);
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 1), 1, 10);
  const Mamba2Inputs in = generate_mamba2_inputs(d, 1);
  EXPECT_THROW(mamba2_token_range(d, in, 4, 4, in.conv_state, in.state), Error);
  EXPECT_THROW(mamba2_token_range(d, in, 0, 11, in.conv_state, in.state), Error);
  EXPECT_THROW(mamba2_sequence(d, in, 1), Error);
}

// --- a token range with its carried state --------------------------------------------------

TEST(OracleSsdInputs, TokenRangeWithCarriedStateEqualsOnePass) {
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 1, 130);
  const Mamba2Inputs in = generate_mamba2_inputs(d, 21);
  const Mamba2Reference whole = mamba2_reference(d, in, Mode::exact);
  const std::vector<double> A = a_of(in), D = to_double(in.D), state = to_double(in.state);
  const Mamba2CoreResult one_pass = mamba2_recurrence_fp64(d, whole.xbc, whole.dt, A, D, state);
  const uint64_t xw = d.geom.d_xbc, H = d.geom.H, Y = d.geom.d_inner;
  for (uint64_t t : {64u, 70u}) {
    SCOPED_TRACE(::testing::Message() << "split at " << t);
    Mamba2Dims first = d, second = d;
    first.L = t;
    second.L = d.L - t;
    const Mamba2Reference r1 = mamba2_reference(
        first, mamba2_token_range(d, in, 0, t, in.conv_state, in.state), Mode::exact);
    std::vector<uint16_t> tail;  // the carried conv tail: BF16 inputs, exact
    for (double v : r1.conv_state) tail.push_back(f32_to_bf16_bits(static_cast<float>(v)));
    const Mamba2Inputs in2 = mamba2_token_range(d, in, t, d.L, tail, in.state);
    const Mamba2Reference r2 = mamba2_reference(second, in2, Mode::exact);
    // The conv and dt of the range are the one pass's rows, bit for bit.
    EXPECT_EQ(r1.xbc, std::vector<double>(whole.xbc.begin(), whole.xbc.begin() + t * xw));
    EXPECT_EQ(r2.xbc, std::vector<double>(whole.xbc.begin() + t * xw, whole.xbc.end()));
    EXPECT_EQ(r2.dt, std::vector<double>(whole.dt.begin() + t * H, whole.dt.end()));
    EXPECT_EQ(r2.conv_state, whole.conv_state);
    // The SSD over the range from the FP64 state carried out of the first one.
    const Mamba2CoreResult c1 = mamba2_chunked_fp64(first, r1.xbc, r1.dt, A, D, state);
    const Mamba2CoreResult c2 = mamba2_chunked_fp64(second, r2.xbc, r2.dt, A, D, c1.state);
    std::vector<double> y = c1.y;
    y.insert(y.end(), c2.y.begin(), c2.y.end());
    EXPECT_LE(max_diff(y, one_pass.y), 1e-12 * max_abs(one_pass.y));
    EXPECT_LE(max_diff(c2.state, one_pass.state), 1e-12 * max_abs(one_pass.state));
    const Mamba2CoreResult q1 = mamba2_recurrence_fp64(first, r1.xbc, r1.dt, A, D, state);
    const Mamba2CoreResult q2 = mamba2_recurrence_fp64(second, r2.xbc, r2.dt, A, D, q1.state);
    EXPECT_EQ(q2.state, one_pass.state);  // the same operations in the same order
    EXPECT_EQ(std::vector<double>(one_pass.y.begin() + t * Y, one_pass.y.end()), q2.y);
  }
}

TEST(OracleSsdInputs, SequenceSlices) {
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 1), 3, 9);
  const Mamba2Inputs in = generate_mamba2_inputs(d, 3);
  const Mamba2Inputs s1 = mamba2_sequence(d, in, 1);
  const uint64_t row = d.geom.in_proj, st = 4 * 8 * 6, tail = d.geom.d_xbc * 3;
  EXPECT_EQ(s1.zxbcdt,
            std::vector<uint16_t>(in.zxbcdt.begin() + 9 * row, in.zxbcdt.begin() + 18 * row));
  EXPECT_EQ(s1.state, std::vector<float>(in.state.begin() + st, in.state.begin() + 2 * st));
  EXPECT_EQ(s1.conv_state,
            std::vector<uint16_t>(in.conv_state.begin() + tail, in.conv_state.begin() + 2 * tail));
  // Sequence by sequence = the batched call (the SSD runs them one after another).
  const Mamba2Reference all = mamba2_reference(d, in, Mode::faithful);
  Mamba2Dims one = d;
  one.sequences = 1;
  const Mamba2Reference r1 = mamba2_reference(one, s1, Mode::faithful);
  const uint64_t Y = d.geom.d_inner;
  EXPECT_EQ(r1.normed,
            std::vector<double>(all.normed.begin() + 9 * Y, all.normed.begin() + 18 * Y));
  EXPECT_EQ(r1.state, std::vector<double>(all.state.begin() + st, all.state.begin() + 2 * st));
}

// --- judge on a perfect run ---------------------------------------------------------------------

struct JudgeCase {
  uint64_t H, P, N, groups, sequences, L;
  Mamba2DtRegime dt;
  Mamba2Path path;
};

// Every case's inputs (seed `seed`, its dt regime) run by `run(plan, in)` pass the judge.
template <class Run>
void expect_cases_pass(const std::vector<JudgeCase>& cases, uint64_t seed, const char* label,
                       Run run) {
  for (const JudgeCase& k : cases) {
    const Mamba2Dims d = Mamba2Dims::of(mamba2_config(k.H, k.P, k.N, k.groups), k.sequences, k.L);
    const Mamba2Plan plan = plan_mamba2(d, k.path);
    const Mamba2Inputs in = generate_mamba2_inputs(d, seed, {k.dt, false, 1.0});
    const AgreementReport r = judge_mamba2(plan, in, run(plan, in), label, seed);
    EXPECT_TRUE(r.passed()) << format_report(r);
  }
}

// The cases every judge test runs, chunked (two sequences of 130, 64 tokens with a large dt, a
// 65-token tail with a tiny dt) and recurrent; each test adds its own between and after them.
const std::vector<JudgeCase> kSharedChunkedCases = {
    {4, 8, 6, 2, 2, 130, Mamba2DtRegime::typical, Mamba2Path::chunked},
    {4, 8, 6, 1, 1, 64, Mamba2DtRegime::large, Mamba2Path::chunked},
    {4, 8, 6, 2, 1, 65, Mamba2DtRegime::tiny, Mamba2Path::chunked},
};
const std::vector<JudgeCase> kSharedRecurrentCases = {
    {4, 8, 6, 2, 2, 70, Mamba2DtRegime::typical, Mamba2Path::recurrent},
    {4, 8, 6, 1, 1, 33, Mamba2DtRegime::large, Mamba2Path::recurrent},
};

std::vector<JudgeCase> joined(std::initializer_list<std::vector<JudgeCase>> parts) {
  std::vector<JudgeCase> all;
  for (const std::vector<JudgeCase>& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

TEST(OracleSsdJudge, PerfectRunAgrees) {
  const std::vector<JudgeCase> cases =
      joined({kSharedChunkedCases,
              {{2, 4, 16, 1, 3, 1, Mamba2DtRegime::typical, Mamba2Path::chunked}},
              kSharedRecurrentCases});
  expect_cases_pass(cases, 31, "perfect", perfect_mamba2_run);
}

// A chunked run of two sequences of 130 tokens (the coordinates below sit in sequence 1).
struct Planted {
  Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 2, 130);
  Mamba2Plan plan = plan_mamba2(d, Mamba2Path::chunked);
  Mamba2Inputs in = generate_mamba2_inputs(d, 41);
};

float nudge_f32(float v, int ulps) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(v) + static_cast<uint32_t>(ulps));
}

// Perturbs one element by k = 1, 2, 4, ... ULPs until `name` fails; returns k (0: never within
// 2^20) and checks the reason names `where` and that no other check fails but `downstream`
// (a later stage that read the unperturbed value).
template <class Mutate>
int smallest_caught(const Planted& p, const Mamba2Run& base, const std::string& name,
                    const std::string& where, Mutate mutate, const std::string& downstream = "") {
  for (int k = 1; k <= (1 << 20); k *= 2) {
    Mamba2Run run = base;
    mutate(run, k);
    const AgreementReport r = judge_mamba2(p.plan, p.in, run, "planted", 41);
    const TensorComparison* c = check(r, name);
    if (c == nullptr || c->passed()) continue;
    EXPECT_NE(c->first_bad->reason.find(where), std::string::npos) << c->first_bad->reason;
    const std::string others = failing(r);
    EXPECT_TRUE(others == name + "; " || others == name + "; " + downstream + "; ")
        << format_report(r);
    return k;
  }
  return 0;
}

void expect_planted_bugs_caught(const Planted& p, const Mamba2Run& base, const char* label) {
  // CB[seq 1][chunk 1][group 1][t = 70 − 64][s = 66 − 64], as the bmm stored (and the scan read).
  const uint64_t G = p.d.geom.G, cb = ((1 * G + 1) * 64 + 6) * 64 + 2;
  const int k_cb = smallest_caught(p, base, "CB (bmm)",
                                   "sequence 1, chunk 1, group 1, token 70, source token 66",
                                   [&](Mamba2Run& r, int k) {
                                     float& v = r.sequences[1].cb[cb];
                                     v = nudge_f32(v, k);
                                     r.sequences[1].cb_before_scan[cb] = v;
                                   });
  // y[token 70 of sequence 1][head 2][dim 3]: BF16 ULPs.
  const uint64_t y = (130 + 70) * p.d.geom.d_inner + 2 * p.d.geom.P + 3;
  const int k_y = smallest_caught(
      p, base, "y (scan)", "sequence 1, token 70, head 2, dim 3",
      [&](Mamba2Run& r, int k) { r.y[y] += static_cast<uint16_t>(k); }, "gated norm (norm_output)");
  // final state[seq 1][head 3][dim 5][n 4].
  const uint64_t st = ((4 + 3) * 8 + 5) * 6 + 4;
  const int k_st =
      smallest_caught(p, base, "final state (scan)", "sequence 1, head 3, dim 5, state 4",
                      [&](Mamba2Run& r, int k) { r.state[st] = nudge_f32(r.state[st], k); });
  EXPECT_GE(k_cb, 1);
  EXPECT_GE(k_y, 1);
  EXPECT_GE(k_st, 1);
  EXPECT_LE(k_y, 2);  // a stored BF16 y is judged within one BF16 ULP plus FP32 noise
  std::printf(
      "[%s] smallest perturbation caught: CB %d FP32 ULPs, y %d BF16 ULPs, state %d FP32 "
      "ULPs\n",
      label, k_cb, k_y, k_st);
}

TEST(OracleSsdJudge, PlantedBugsOnAPerfectRunFailTheirChecks) {
  const Planted p;
  const Mamba2Run base = perfect_mamba2_run(p.plan, p.in);
  ASSERT_TRUE(judge_mamba2(p.plan, p.in, base, "perfect", 41).passed());
  expect_planted_bugs_caught(p, base, "perfect run");

  auto only_fails = [&](const Mamba2Run& run, const std::string& name, const std::string& where) {
    const AgreementReport r = judge_mamba2(p.plan, p.in, run, "planted", 41);
    const TensorComparison* c = check(r, name);
    ASSERT_NE(c, nullptr);
    ASSERT_FALSE(c->passed()) << format_report(r);
    EXPECT_NE(c->first_bad->reason.find(where), std::string::npos) << c->first_bad->reason;
  };
  {  // The scan read a dt other than the one cumsum stored (head 1, token 3 of sequence 0).
    Mamba2Run run = base;
    float& v = run.sequences[0].dt_before_scan[(1 * 3 + 0) * 64 + 3];
    v = nudge_f32(v, 1);
    only_fails(run, "dt intact (scan input)", "sequence 0, token 3, head 1");
  }
  {  // A nonzero dA_cumsum past the partial chunk (130 = 2·64 + 2: token 131 of head 2).
    Mamba2Run run = base;
    run.sequences[1].da[(2 * 3 + 2) * 64 + 3] = 1e-30f;
    only_fails(run, "past-partial-chunk entries = 0 (dt, dA_cumsum, CB)",
               "dA_cumsum 1e-30 past the sequence at (sequence 1, token 131, head 2)");
  }
  {  // An unwritten y element.
    Mamba2Run run = base;
    run.y[5 * p.d.geom.d_inner + 9] = 0xFFFF;
    only_fails(run, "y (scan)", "sequence 0, token 5, head 1, dim 1");
  }
  {  // dt off by far more than its bound.
    Mamba2Run run = base;
    float& v = run.sequences[0].dt[(3 * 3 + 1) * 64 + 10];
    v = nudge_f32(v, 64);
    run.sequences[0].dt_before_scan[(3 * 3 + 1) * 64 + 10] = v;
    only_fails(run, "dt (cumsum)", "sequence 0, token 74, head 3");
  }
  {  // A conv output one BF16 step off twice.
    Mamba2Run run = base;
    run.xbc[(130 + 7) * p.d.geom.d_xbc + 40] += 2;
    only_fails(run, "conv1d (xBC)", "sequence 1, token 7, B of group 1, n 2");
  }
  {  // The gated norm output.
    Mamba2Run run = base;
    run.normed[(130 + 1) * p.d.geom.d_inner + 17] += 2;
    only_fails(run, "gated norm (norm_output)", "sequence 1, token 1, head 2, dim 1");
  }
  {  // dA_cumsum off by far more than its bound (as stored and as read).
    Mamba2Run run = base;
    const uint64_t i = (0 * 3 + 2) * 64 + 1;  // head 0, chunk 2, row 1: token 129
    run.sequences[1].da[i] = nudge_f32(run.sequences[1].da[i], 4096);
    run.sequences[1].da_before_scan[i] = run.sequences[1].da[i];
    only_fails(run, "dA_cumsum (cumsum)", "sequence 1, token 129, head 0");
  }
  {  // The conv tail: one slot of sequence 1, channel 5.
    Mamba2Run run = base;
    run.conv_state[(56 + 5) * 3 + 2] ^= 1;
    only_fails(run, "conv tail state", "sequence 1, channel 5, tail slot 2");
  }
  {  // The scan read a CB other than the stored one, and a state other than the uploaded one.
    Mamba2Run run = base;
    run.sequences[0].cb_before_scan[7] = nudge_f32(run.sequences[0].cb_before_scan[7], 1);
    only_fails(run, "CB intact (scan input)",
               "sequence 0, chunk 0, group 0, token 0, source token 7");
    run = base;
    run.sequences[0].da_before_scan[64] = nudge_f32(run.sequences[0].da_before_scan[64], 1);
    only_fails(run, "dA_cumsum intact (scan input)", "sequence 0, token 64, head 0");
    run = base;
    run.sequences[1].state_in[6] = nudge_f32(run.sequences[1].state_in[6], 1);
    only_fails(run, "state intact (scan input)", "sequence 1, head 0, dim 1, state 0");
  }
}

TEST(OracleSsdJudge, PlantedBugsOnARecurrentRunFailTheirChecks) {
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 2, 40);
  const Mamba2Plan plan = plan_mamba2(d, Mamba2Path::recurrent);
  const Mamba2Inputs in = generate_mamba2_inputs(d, 43);
  const Mamba2Run base = perfect_mamba2_run(plan, in);
  ASSERT_TRUE(judge_mamba2(plan, in, base, "perfect", 43).passed());
  Mamba2Run run = base;
  run.y[(40 + 30) * d.geom.d_inner + 3 * 8 + 7] += 2;
  AgreementReport r = judge_mamba2(plan, in, run, "planted", 43);
  const TensorComparison* y = check(r, "y (recurrence)");
  ASSERT_FALSE(y->passed());
  EXPECT_NE(y->first_bad->reason.find("sequence 1, token 30, head 3, dim 7"), std::string::npos);
  run = base;
  run.state[((4 + 1) * 8 + 2) * 6 + 5] = nudge_f32(run.state[((4 + 1) * 8 + 2) * 6 + 5], 4096);
  r = judge_mamba2(plan, in, run, "planted", 43);
  const TensorComparison* st = check(r, "final state (recurrence)");
  ASSERT_FALSE(st->passed());
  EXPECT_EQ(failing(r), "final state (recurrence); ");
  EXPECT_NE(st->first_bad->reason.find("sequence 1, head 1, dim 2, state 5"), std::string::npos);
}

// --- the CPU backend ---------------------------------------------------------------------------

Mamba2Run cpu_run(const Mamba2Plan& plan, const Mamba2Inputs& in, Mutant mutant = Mutant::none) {
  auto backend = make_cpu_backend();
  backend->set_kernel_mutant(mutant);
  const Workspace ws = allocate_mamba2_footprint(*backend, plan);
  return run_mamba2(*backend, ws, plan, in);
}

TEST(OracleSsdJudge, CpuBackendAgrees) {
  const std::vector<JudgeCase> cases =
      joined({kSharedChunkedCases,
              {{2, 16, 4, 2, 3, 1, Mamba2DtRegime::typical, Mamba2Path::chunked},
               {6, 24, 40, 2, 1, 200, Mamba2DtRegime::typical, Mamba2Path::chunked}},
              kSharedRecurrentCases,
              {{4, 8, 6, 1, 4, 1, Mamba2DtRegime::tiny, Mamba2Path::recurrent}}});
  expect_cases_pass(cases, 51, "cpu", [](const Mamba2Plan& plan, const Mamba2Inputs& in) {
    return cpu_run(plan, in);
  });
}

TEST(OracleSsdJudge, CpuRealSizingNc) {
  // nc above the sequence's own chunk count (a sizing for a longer pass): the head stride grows.
  const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 2, 70);
  const Mamba2Plan plan = plan_mamba2(d, Mamba2Path::chunked, 5);
  const Mamba2Inputs in = generate_mamba2_inputs(d, 61);
  const AgreementReport r = judge_mamba2(plan, in, cpu_run(plan, in), "cpu", 61);
  EXPECT_TRUE(r.passed()) << format_report(r);
}

TEST(OracleSsdJudge, PlantedBugsOnTheCpuRunFailTheirChecks) {
  const Planted p;
  const Mamba2Run base = cpu_run(p.plan, p.in);
  const AgreementReport r = judge_mamba2(p.plan, p.in, base, "cpu", 41);
  ASSERT_TRUE(r.passed()) << format_report(r);
  expect_planted_bugs_caught(p, base, "cpu run");
}

TEST(OracleSsdJudge, SsdStateMutantFailsTheScan) {
  for (uint64_t L : {64u, 130u}) {
    const Mamba2Dims d = Mamba2Dims::of(mamba2_config(4, 8, 6, 2), 1, L);
    const Mamba2Plan plan = plan_mamba2(d, Mamba2Path::chunked);
    const Mamba2Inputs in = generate_mamba2_inputs(d, 71);
    const AgreementReport r =
        judge_mamba2(plan, in, cpu_run(plan, in, Mutant::M_SSDSTATE), "cpu", 71);
    const TensorComparison* y = check(r, "y (scan)");
    ASSERT_NE(y, nullptr);
    if (L <= 64) {
      EXPECT_TRUE(r.passed()) << format_report(r);  // one chunk: nothing to carry
      continue;
    }
    EXPECT_FALSE(y->passed()) << format_report(r);
    ASSERT_TRUE(y->first_bad.has_value());
    EXPECT_NE(y->first_bad->reason.find("token 64"), std::string::npos) << y->first_bad->reason;
    EXPECT_FALSE(check(r, "final state (scan)")->passed());
  }
}

}  // namespace
}  // namespace bufferlab::oracle
