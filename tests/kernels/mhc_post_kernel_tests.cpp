// The mHC expand and post ops (docs/spec/numerics.md §3–§4, core ops/mhc.h) and every mHC op's hc
// range errors, on the backend under test (tests/support/backend_under_test.h):
//   - expand: every stream is the BF16 row, bit for bit (judged by the oracle's exact check);
//   - post (Sinkhorn and low-rank forms): judged against the oracle's FP64 hc_post under
//     mhc_post_bounds (γ_(hc+1) of the terms' magnitudes, low-rank form γ_2); in place == out
//     of place bit for bit; B13 = the BF16 rounding of the spec result, caught by the judge;
//   - hc = 0 and hc = kMaxMhcMult + 1 refused by every op (the CPU's message names the range).
// On a backend other than the CPU also against the CPU: expand bit for bit, post within the sum
// of the two backends' bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "cpu_backend.h"
#include "mhc_kernel_support.h"
#include "moe_kernel_support.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::bf16_float;
using testing::expect_passed;
using testing::KernelTest;
using testing::mhc_config;
using testing::MutantScope;
using testing::Rig;
using testing::same_bits;
using testing::seeded_bf16_values;
using testing::seeded_values;

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;

class MhcPostKernel : public KernelTest {
 protected:
  static oracle::BoundModel bounds() { return testing::bounds_for(on_cpu()); }
};
class MhcExpandKernel : public MhcPostKernel {};
class MhcErrorsKernel : public MhcPostKernel {};

// ============================================================== expand

Floats run_expand(Backend& backend, const MhcExpandOp& op, const Bits& x) {
  Rig rig(backend, {op.accesses()}, 0);
  rig.put(op.input, x);
  backend.mhc_expand(rig.ws, op);
  return rig.get<float>(op.streams);
}

TEST_F(MhcExpandKernel, EveryStreamIsTheBf16Row) {
  for (auto [rows, hc, h, seed, scale] :
       {std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, float>{3, 1, 37, 15, 3.0f},
        {3, 4, 37, 15, 3.0f},
        {3, kMaxMhcMult, 37, 15, 3.0f},
        {9, 3, 130, 41, 4.0f}}) {
    const MhcExpandOp op = MhcExpandOp::make(mhc_config(hc, h), rows);
    const Bits x = seeded_bf16_values(rows * h, seed, scale);
    const Floats s = run_expand(backend(), op, x);
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t i = 0; i < hc; ++i)
        for (uint64_t d = 0; d < h; ++d)
          ASSERT_EQ(s[(t * hc + i) * h + d], bf16_float(x[t * h + d])) << t << "," << i << "," << d;
    if (!on_cpu()) {
      const Floats c = run_expand(testing::cpu_backend(), op, x);
      EXPECT_TRUE(same_bits(s, c, 0, s.size())) << op.params() << " vs cpu";
    }
  }
  const MhcExpandOp op = MhcExpandOp::make(mhc_config(3, 130), 9);
  const Bits in = oracle::generate_mhc_expand_input(op, 34);
  expect_passed(
      oracle::judge_mhc_expand(op, in, run_expand(backend(), op, in), backend().name(), 34));
}

// ============================================================== post

// Seeded post inputs: post in offset ± scale, comb likewise (Sinkhorn form only), streams in
// ±x_scale, block_out BF16 in ±bo_scale.
struct PostScales {
  float post, post_offset, comb, comb_offset, x, block_out;
};
constexpr PostScales kNearOne{0.9f, 1.0f, 0.5f, 0.5f, 4.0f, 0.25f};  // post ∈ (0.1, 1.9)
constexpr PostScales kWide{2.0f, 0.0f, 1.0f, 0.0f, 3.0f, 2.0f};      // signed post and comb

oracle::MhcPostInputs seeded_post_inputs(const MhcPostOp& op, uint64_t seed, const PostScales& s) {
  const auto& d = op.shape();
  oracle::MhcPostInputs in;
  in.post = seeded_values(d.rows * d.hc, seed, s.post, s.post_offset);
  if (!d.lowrank) in.comb = seeded_values(d.rows * d.hc * d.hc, seed + 1, s.comb, s.comb_offset);
  in.streams = seeded_values(d.rows * d.hc * d.h, seed + 2, s.x);
  in.block_out = seeded_bf16_values(d.rows * d.h, seed + 3, s.block_out);
  return in;
}

// Runs `op` with its `out` where the op says (streams: in place) and returns `out`.
Floats run_post(Backend& backend, const MhcPostOp& op, const oracle::MhcPostInputs& in,
                Mutant mutant = Mutant::none) {
  Rig rig(backend, {op.accesses()}, 0);
  rig.put(op.post, in.post);
  if (!op.shape().lowrank) rig.put(op.comb, in.comb);
  rig.put(op.block_out, in.block_out);
  rig.put(op.streams, in.streams);
  {
    MutantScope scope(backend, mutant);
    backend.mhc_post(rig.ws, op);
  }
  return rig.get<float>(op.out);
}

// The same op with `out` in another arena buffer (out of place).
MhcPostOp out_of_place(MhcPostOp op, BufferId buffer) {
  op.out = arena_tensor(buffer, 0, op.streams.shape, DType::f32);
  return op;
}

// In place == out of place (spec and B13), the spec result judged, B13 = the BF16 rounding of
// the very FP32 value the spec kernel stores (so representable) and different somewhere; on
// another backend also against the CPU within the sum of the two bounds.
void check_post_case(Backend& backend, const oracle::BoundModel& bm, bool cpu, uint64_t rows,
                     uint64_t hc, uint64_t h, uint64_t r, uint64_t seed, const PostScales& scales,
                     BufferId apart_buffer) {
  const MhcPostOp op = MhcPostOp::make(mhc_config(hc, h, r), rows);
  ASSERT_EQ(op.shape().lowrank, r > 0);
  const MhcPostOp apart = out_of_place(op, apart_buffer);
  const std::string what = op.params();
  SCOPED_TRACE(what);
  const oracle::MhcPostInputs in = seeded_post_inputs(op, seed, scales);
  const Floats out = run_post(backend, op, in), out_apart = run_post(backend, apart, in);
  EXPECT_TRUE(same_bits(out, out_apart, 0, out.size())) << "in place != out of place";
  const Floats b13 = run_post(backend, op, in, Mutant::B13);
  EXPECT_TRUE(same_bits(b13, run_post(backend, apart, in, Mutant::B13), 0, b13.size())) << "B13";
  bool changed = false;
  for (uint64_t k = 0; k < b13.size(); ++k) {
    ASSERT_EQ(b13[k], round_to_bf16(out[k])) << "B13 element " << k;
    ASSERT_EQ(b13[k], round_to_bf16(b13[k])) << "B13 element " << k;  // representable
    changed = changed || b13[k] != out[k];
  }
  EXPECT_TRUE(changed) << "B13 left every value unchanged (mutant not caught)";
  expect_passed(oracle::judge_mhc_post(op, in, out, backend.name(), seed, bm));
  if (cpu) return;
  const Floats on_cpu = run_post(testing::cpu_backend(), op, in);
  const std::vector<double> bound = testing::sum(
      oracle::mhc_post_bounds(op, in, bm), oracle::mhc_post_bounds(op, in, oracle::cpu_bounds()));
  expect_passed(oracle::compare_f32_bounded(what + " hc_streams vs cpu", out, oracle::widen(on_cpu),
                                            h, {bound, {}, "b_cpu + b"}));
}

// h = 600 crosses the 256-column chunks of the Sinkhorn form and the 512 of the low-rank form.
TEST_F(MhcPostKernel, SinkhornFormInPlaceEqualsOutOfPlace) {
  const BufferId apart = BufferId::splitk_workspace;
  check_post_case(backend(), bounds(), on_cpu(), 3, 4, 600, 0, 20, kNearOne, apart);
  check_post_case(backend(), bounds(), on_cpu(), 2, 1, 70, 0, 21, kNearOne, apart);
  check_post_case(backend(), bounds(), on_cpu(), 2, kMaxMhcMult, 300, 0, 22, kNearOne, apart);
}

TEST_F(MhcPostKernel, LowRankFormInPlaceEqualsOutOfPlace) {
  const BufferId apart = BufferId::splitk_workspace;
  check_post_case(backend(), bounds(), on_cpu(), 3, 4, 600, 3, 23, kNearOne, apart);
  check_post_case(backend(), bounds(), on_cpu(), 2, kMaxMhcMult, 64, 3, 24, kNearOne, apart);
}

// Signed post and comb, out of place in hc_lowrank_scratch.
TEST_F(MhcPostKernel, BothFormsSignedInputsAndB13) {
  const BufferId apart = BufferId::hc_lowrank_scratch;
  check_post_case(backend(), bounds(), on_cpu(), 5, 4, 70, 0, 51, kWide, apart);   // Sinkhorn
  check_post_case(backend(), bounds(), on_cpu(), 5, 4, 70, 8, 52, kWide, apart);   // low-rank
  check_post_case(backend(), bounds(), on_cpu(), 3, 16, 33, 0, 53, kWide, apart);  // hc = 16
  check_post_case(backend(), bounds(), on_cpu(), 2, 1, 9, 0, 54, kWide, apart);    // hc = 1
}

// The oracle's generated inputs (comb a real Sinkhorn result), out of place in the weight pool;
// B13 caught by the judge.
TEST_F(MhcPostKernel, OracleFormsInPlaceAndB13) {
  for (auto [hc, h, r, rows, seed] :
       {std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>{4, 300, 0, 7, 21},
        {4, 300, 16, 7, 22},
        {16, 40, 0, 3, 23},
        {1, 9, 4, 2, 24}}) {
    const MhcPostOp op = MhcPostOp::make(mhc_config(hc, h, r), rows);
    SCOPED_TRACE(op.params());
    const oracle::MhcPostInputs in = oracle::generate_mhc_post_inputs(op, seed);
    MhcPostOp apart = op;
    const uint64_t pool = oracle::place_mhc_post_out_of_place(apart);
    const Workspace ws = oracle::allocate_mhc_footprint(backend(), apart, pool);
    const Floats got = oracle::run_mhc_post(backend(), ws, op, in);
    const Floats got_apart = oracle::run_mhc_post(backend(), ws, apart, in);
    EXPECT_TRUE(same_bits(got, got_apart, 0, got.size())) << "in place != out of place";
    expect_passed(oracle::judge_mhc_post(op, in, got, backend().name(), seed, bounds()));
    if (!on_cpu()) {
      Backend& cpu = testing::cpu_backend();
      const Floats c =
          oracle::run_mhc_post(cpu, oracle::allocate_mhc_footprint(cpu, op, 0), op, in);
      const std::vector<double> bound =
          testing::sum(oracle::mhc_post_bounds(op, in, bounds()),
                       oracle::mhc_post_bounds(op, in, oracle::cpu_bounds()));
      expect_passed(oracle::compare_f32_bounded(op.params() + " hc_streams vs cpu", got,
                                                oracle::widen(c), op.shape().h,
                                                {bound, {}, "b_cpu + b"}));
    }
    Floats b13;
    {
      MutantScope scope(backend(), Mutant::B13);
      b13 = oracle::run_mhc_post(backend(), ws, op, in);
    }
    const auto caught = oracle::judge_mhc_post(op, in, b13, backend().name(), seed, bounds());
    EXPECT_FALSE(caught.passed()) << "B13 not caught\n" << oracle::format_report(caught);
  }
}

// ============================================================== errors

// A launch with hc outside 1..kMaxMhcMult is refused before anything is bound or written: an
// Error (on the CPU naming the op's parameters and the range; an allocated footprint, nothing
// uploaded).
template <class Op, class Call>
void expect_mhc_refused(Backend& backend, bool cpu, const Op& op, Call call) {
  Rig rig(backend, {op.accesses()}, uint64_t{1} << 20);
  try {
    call(backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    if (!cpu) return;
    const std::string m = e.what();
    EXPECT_NE(m.find(op.params()), std::string::npos) << m;
    EXPECT_NE(m.find("outside the kernels' range"), std::string::npos) << m;
  }
}

using SplitStage = MhcLowRankSplitOp::Stage;
using SlabStage = MhcLowRankSlabOp::Stage;

// Every op refuses hc = 0 and hc = kMaxMhcMult + 1 (both forms of post, every low-rank stage,
// slabs of 100 and of 2 rows).
TEST_F(MhcErrorsKernel, EveryOpRefusesHcOutsideTheKernelRange) {
  Backend& b = backend();
  const bool cpu = on_cpu();
  for (uint64_t hc : {uint64_t{0}, kMaxMhcMult + 1}) {
    SCOPED_TRACE("hc=" + std::to_string(hc));
    const ModelConfig c = mhc_config(hc, 8);
    for (const ModelConfig& any : {c, mhc_config(hc, 8, 4)}) {
      expect_mhc_refused(
          b, cpu, MhcExpandOp::make(any, 2),
          [](Backend& be, const Workspace& ws, const auto& op) { be.mhc_expand(ws, op); });
      expect_mhc_refused(
          b, cpu, MhcPreOp::make(any, 2),
          [](Backend& be, const Workspace& ws, const auto& op) { be.mhc_pre(ws, op); });
      expect_mhc_refused(
          b, cpu, MhcHeadOp::make(any, 2),
          [](Backend& be, const Workspace& ws, const auto& op) { be.mhc_head(ws, op); });
    }
    for (const ModelConfig& form : {c, mhc_config(hc, 8, 2), mhc_config(hc, 8, 4)})
      expect_mhc_refused(
          b, cpu, MhcPostOp::make(form, 2),
          [](Backend& be, const Workspace& ws, const auto& op) { be.mhc_post(ws, op); });
    for (const ModelConfig& lr : {mhc_config(hc, 8, 2), mhc_config(hc, 8, 4)}) {
      for (SplitStage s : {SplitStage::norm, SplitStage::down, SplitStage::collapse})
        expect_mhc_refused(
            b, cpu, MhcLowRankSplitOp::make(s, lr, 2),
            [](Backend& be, const Workspace& ws, const auto& op) { be.mhc_lowrank_split(ws, op); });
      for (SlabStage s : {SlabStage::norm, SlabStage::down, SlabStage::inject, SlabStage::up,
                          SlabStage::collapse})
        for (uint64_t m : {uint64_t{100}, uint64_t{2}})
          expect_mhc_refused(b, cpu, MhcLowRankSlabOp::make(s, lr, m, 0, m),
                             [](Backend& be, const Workspace& ws, const auto& op) {
                               be.mhc_lowrank_slab(ws, op);
                             });
    }
  }
}

}  // namespace
}  // namespace bufferlab
