// Properties of Gated DeltaNet (docs/spec/numerics.md §5, §9; core ops/gdn.h) on the CPU backend,
// over the cases of properties/gdn_mamba2_generators.h (kd = vd = 128 chunked or forced recurrent,
// other head sizes 8..96 on the recurrence, GQA 1..4, kernel 2..4, 1..4 sequences, L at the
// chunk edges 1, 63, 64, 65, 127 often, α / β regimes, parallel keys, zero states):
//   1. the chunked algorithm in FP64 equals the recurrence in FP64 within 1e-12 of the output
//      (state) scale, any head size (the identity docs/spec/numerics.md §5 states);
//   2. every stage of the CPU backend passes oracle::judge_gdn on its own stored inputs, on
//      either path, on a poisoned arena (the whole call and faithful-vs-exact are reported);
//   3. splitting one sequence and carrying its state (conv tail + S from the first run) is
//      bit-identical to one pass at a multiple of 64 (chunked) or anywhere (recurrence); at
//      another split of the chunked path the part started from the carried state passes its
//      judge (the distance to the one-pass output is reported, not asserted);
//   4. n co-dispatched sequences in one call equal each sequence run alone, bit for bit (every
//      stored array, the chunk regions included);
//   5. B15: the §4.5 carve of the corrected sizing's nt holds every stream's regions of a
//      co-dispatched prefill (n·L ≤ m), bound on a real layout too;
//   6. M-GDNCARRY fails a state-stage check on a fixed set of cases with L ≥ 128.
// Every property has a planted-bug twin (suite GdnPlanted) that must fail with the expected
// check: an FP64 output moved just past 1e-12 or the chunked form started from a zero state, a
// stored stage output left poisoned, a split without the carried conv tail, a sequence run
// with its neighbour's state, the B15 sizing (a span outside gdn_fla_scratch, and run_gdn
// refusing the layout), and M-GDNCARRY itself.
//
// Cost: gen::gdn_call_cost ≤ 2^23 per case (gen::ci_gdn_ranges; formulas and timings in
// gdn_mamba2_generators.h), the FP64 identity 2^24, the twins 2^19; the
// judge evaluates it a few times over (faithful, exact, each stage).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
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
#include "report_checks.h"

// This family's adapters to the shared bodies (codispatch_findings, poisonables, ...) have the
// same names in test_mamba2_properties.cpp: each file has its own namespace.
namespace bufferlab::gdn_properties {
namespace {

using namespace testing::gdn_mamba2;  // the bodies both families share (tests/support)

// ---- 1. the FP64 identity -------------------------------------------------------------------

// FP64 only, ~2.6 ns per unit for both algorithms.
RC_GTEST_PROP(GdnProperty, Fp64ChunkedEqualsRecurrence, ()) {
  const GdnCase c = draw(identity_ranges(gen::ci_gdn_ranges(), uint64_t{1} << 24));
  RC_TAG(c.chunkable() ? "kd = vd = 128" : "other head sizes", edge_tag(c.L));
  fp64_identity_holds(c);
}

// ---- 2. every stage passes the judge --------------------------------------------------------

RC_GTEST_PROP(GdnProperty, CpuStagesPassTheJudge, ()) {
  const GdnCase c = draw(gen::ci_gdn_ranges());
  RC_TAG(gen::to_string(c.path), c.chunkable() ? "kd = vd = 128" : "other head sizes",
         edge_tag(c.L));
  call_passes_the_judge(cpu_backend(), c);
}

// ---- 3. splitting a sequence ------------------------------------------------------------------

RC_GTEST_PROP(GdnProperty, SplitAtAChunkEdgeIsBitIdentical, ()) {
  testing::gdn_mamba2::split_is_bit_identical(cpu_backend(), gen::ci_gdn_ranges());
}

// Elsewhere (chunked, at % 64 ≠ 0) the parts' chunk boundaries fall elsewhere, the BF16 S / W
// / U / uc roundings differ and no bit identity holds (docs/spec/numerics.md §5: "elsewhere it
// agrees within the bound"). Asserted: the second part passes its judge — every stage within its
// derived bound of the faithful oracle fed that part's stored inputs, the carried conv tail and
// FP32 state being inputs like any other (the first part is an ordinary call, property 2's, as
// is the one-pass run). How far
// the concatenated output lies from the one-pass output is reported (tagged in BF16 ULPs),
// not asserted: no bound of the difference of two differently-chunked runs is derived. Any
// L ≥ 2 moves a boundary (L = 40 split at 17: chunks [0, 17), [17, 40) against [0, 40)).
RC_GTEST_PROP(GdnProperty, SplitElsewhereSecondPartPassesItsJudge, ()) {
  gen::GdnRanges ranges = gen::ci_gdn_ranges();
  ranges.chunked_only = true;
  ranges.cost_cap = uint64_t{1} << 22;  // three runs and a judge per case
  split_elsewhere_second_part_passes(cpu_backend(), draw(ranges));
}

// ---- 4. co-dispatched sequences -----------------------------------------------------------------

// Sequence b of the co-dispatched run against the same sequence alone: every stored array, bit
// for bit (chunk regions: stream b's slice [b·cps·nv, (b+1)·cps·nv) of the carve).
Findings codispatch_findings(const GdnCase& c, const Call<GdnFamily>& all,
                             const Call<GdnFamily>& alone, U b) {
  const auto& g = c.dims().geom;
  const U L = c.L, cps = cdiv(L, kChunk);
  const auto& a = all.run;
  const auto& s = alone.run;
  Findings f;
  const std::string seq = fmt::format(" (sequence {})", b);
  conv_bit_findings(f, c, a, s, b);
  bit_findings(f, "gates" + seq, rows_of(a.gates, b * L, L, 2 * g.nv),
               std::span<const float>(s.gates), 2 * g.nv);
  output_bit_findings(f, c, a, s, b);
  if (c.path == GdnPath::chunked) {
    const U regions = cps * g.nv;
    bit_findings(f, "W" + seq, rows_of(a.W, b * regions, regions, kChunk * g.kd),
                 std::span<const uint16_t>(s.W), kChunk * g.kd);
    bit_findings(f, "U" + seq, rows_of(a.U, b * regions, regions, kChunk * g.vd),
                 std::span<const uint16_t>(s.U), kChunk * g.vd);
    bit_findings(f, "S snapshots" + seq, rows_of(a.S, b * regions, regions, g.kd * g.vd),
                 std::span<const uint16_t>(s.S), g.kd * g.vd);
    bit_findings(f, "uc" + seq, rows_of(a.uc, b * regions, regions, kChunk * g.vd),
                 std::span<const uint16_t>(s.uc), kChunk * g.vd);
    bit_findings(f, "gc" + seq, rows_of(a.gc, b * regions, regions, kChunk),
                 std::span<const float>(s.gc), kChunk);
  }
  return f;
}

// At least two sequences (a drawn single one becomes two: the backend's work only, no oracle).

RC_GTEST_PROP(GdnProperty, CoDispatchedSequencesEqualEachAloneBitForBit, ()) {
  testing::gdn_mamba2::codispatch_equals_alone(cpu_backend(), gen::ci_gdn_ranges(),
                                               codispatch_findings);
}

// ---- 5. B15: the chunk carve of the sizing ------------------------------------------------------

// A GDN model whose layout the sizing builds for real: tiny-gdn with kd = vd = 128 and the
// drawn head counts.
ModelConfig chunked_model(U nk, U gqa) {
  ModelConfig c = preset("tiny-gdn");
  c.linear_num_key_heads = nk;
  c.linear_num_value_heads = nk * gqa;
  return c;
}

BufferSizes sized(const ModelConfig& config, U m, Sizing sizing) {
  return BufferSizes::from_config(config, RunShape{m, 4096, 16, 32}, Target{}, sizing);
}

constexpr GdnChunkOp::Array kArrays[] = {GdnChunkOp::Array::W, GdnChunkOp::Array::U,
                                         GdnChunkOp::Array::S, GdnChunkOp::Array::uc,
                                         GdnChunkOp::Array::gc};
constexpr const char* kArrayNames[] = {"W", "U", "S", "uc", "gc"};
constexpr GdnChunkOp::Stage kStages[] = {GdnChunkOp::Stage::wu, GdnChunkOp::Stage::state,
                                         GdnChunkOp::Stage::output};

// Every carve span and every gdn_fla_scratch access of the three chunk stages of n streams of
// L tokens, against the buffer's size in `sizes` (nt from the same sizing).
Findings carve_findings(const ModelConfig& config, const BufferSizes& sizes, U n, U L) {
  const GdnGeometry g = GdnGeometry::of(config);
  const U nt = sizes.params.gdn_chunks, bytes = sizes.gdn_fla_scratch;
  Findings f;
  for (const auto stage : kStages) {
    const GdnChunkOp op = GdnChunkOp::make(stage, g, 0, n, L, nt);
    for (U i = 0; i < std::size(kArrays); ++i) {
      const TensorRef t = op.span(kArrays[i]);
      if (t.buffer != BufferId::gdn_fla_scratch || t.offset + t.bytes() > bytes)
        f.push_back({"carve span inside gdn_fla_scratch",
                     fmt::format("{} {} span [{}, {}) of {} bytes (nt {}, n {}, L {})", op.name(),
                                 kArrayNames[i], t.offset, t.offset + t.bytes(), bytes, nt, n, L)});
    }
    for (const Access& a : op.accesses())
      if (a.tensor.space == Space::arena && a.tensor.buffer == BufferId::gdn_fla_scratch &&
          a.end() > bytes)
        f.push_back(
            {"access inside gdn_fla_scratch", fmt::format("{} {} ends at {} > {}", op.name(),
                                                          a.tensor.to_string(), a.end(), bytes)});
  }
  return f;
}

// Binds every chunk stage of n streams of L tokens on a real layout of `sizes`: the Error of
// the first bind that refuses, if any.
std::optional<std::string> bind_error(const ModelConfig& config, const BufferSizes& sizes, U n,
                                      U L) {
  const Workspace ws =
      cpu_backend().allocate(Layout::build(sizes), GdnGeometry::of(config).nv * kGdnChunkedHeadDim *
                                                       kGdnChunkedHeadDim * 4 * n);
  for (const auto stage : kStages) {
    try {
      (void)GdnChunkOp::make(stage, GdnGeometry::of(config), 0, n, L, sizes.params.gdn_chunks)
          .bind(ws);
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }
  return std::nullopt;
}

struct CarveCase {
  U nk = 1, gqa = 1, n = 1, L = 1, m = 1;
};

// n streams of L tokens (L % 64 ≠ 0 in half of the cases, at 1, 63, 65 often) and a
// max_batch_tokens m in [n·L, n·L + 64·4]: m = n·L in a third of the cases (the tightest).
CarveCase draw_carve_case() {
  CarveCase k;
  k.nk = *rc::gen::inRange<U>(1, 3);
  k.gqa = *rc::gen::inRange<U>(1, 3);
  k.n = *rc::gen::inRange<U>(1, 17);
  k.L = *rc::gen::oneOf(rc::gen::element<U>(1, 63, 65, 127, 129), rc::gen::inRange<U>(1, 300));
  const U tight = k.n * k.L;
  k.m = *rc::gen::element(0, 0, 1) == 1 ? tight : tight + *rc::gen::inRange<U>(0, 257);
  RC_LOG() << fmt::format("nk={} nv={} n={} L={} m={}\n", k.nk, k.nk * k.gqa, k.n, k.L, k.m);
  return k;
}

// No allocation for the static check; a real layout (m ≤ 1024) bound in one case in four.
RC_GTEST_PROP(GdnProperty, CorrectedCarveHoldsEveryStreamsRegions, ()) {
  const CarveCase k = draw_carve_case();
  const ModelConfig config = chunked_model(k.nk, k.gqa);
  const BufferSizes sizes = sized(config, k.m, Sizing::corrected());
  RC_TAG(k.n == 1 ? "one stream" : "co-dispatched",
         k.L % kChunk == 0 ? "L % 64 = 0" : "L % 64 ≠ 0");
  const Findings f = carve_findings(config, sizes, k.n, k.L);
  log_findings(f);
  RC_ASSERT(f.empty());
  if (k.m <= 1024 && *rc::gen::element(0, 0, 0, 1) == 1) {
    const auto err = bind_error(config, sizes, k.n, k.L);
    if (err) RC_LOG() << "bind refused: " << *err << "\n";
    RC_ASSERT(!err);
  }
}

// ==== Planted bugs ==============================================================================

// 1: one FP64 chunked output element moved by twice the tolerance fails at its coordinates.
RC_GTEST_PROP(GdnPlanted, Fp64OutputMovedPastTheToleranceFails, ()) {
  const GdnCase c = draw(identity_ranges(twin_ranges(gen::ci_gdn_ranges())));
  fp64_output_moved_past_the_tolerance_fails(c, fp64_pair(c, gen::gdn_inputs(c)));
}

// 1: the chunked form started from a zero state (a dropped carry) against the recurrence from
// the real one: the final state differs (α near one: the initial state survives the call).
RC_GTEST_PROP(GdnPlanted, Fp64ChunkedFromAZeroStateFails, ()) {
  GdnCase c = draw(identity_ranges(twin_ranges(gen::ci_gdn_ranges())));
  GdnFamily::keep_the_state_visible(c);
  const Findings f = fp64_identity_findings(c.dims(), fp64_pair(c, gen::gdn_inputs(c), true));
  log_findings(f);
  RC_ASSERT(has_finding(f, "final state: chunked vs recurrence (FP64)"));
}

// 2: a stored stage output left poisoned (a kernel that skipped an element) fails that
// stage's check, first at an unwritten element (a row past the end of a partial chunk fails
// the zero-tail check instead).
constexpr const char* kZeroTails = "partial-chunk tails zero (W, U, uc, gc)";

// A chunk-region array of [64][row_width] regions, whose rows past the end of the sequence
// must be zero.
template <class T>
Poisonable<GdnFamily> region_poisonable(const std::string& check,
                                        std::vector<T> oracle::GdnRun::*array, const GdnCase& c,
                                        U row_width) {
  const U L = c.L, cps = cdiv(c.L, kChunk), nv = c.nv();
  return poisonable_via<GdnFamily>(
      check,
      [=](U e) {
        const U region = e / (kChunk * row_width), row = e / row_width % kChunk;
        const U chunk = region / nv % cps;
        return chunk * kChunk + row < L ? check : std::string(kZeroTails);
      },
      [array](auto& r) -> auto& { return r.*array; });
}

std::vector<Poisonable<GdnFamily>> poisonables(const GdnCase& c) {
  using R = oracle::GdnRun;
  std::vector<Poisonable<GdnFamily>> p = {
      poisonable("conv1d (ssm_conv_out_f32)", &R::conv),
      poisonable("conv tail state", &R::conv_state),
      poisonable("gates (beta, alpha)", &R::gates),
      poisonable("gated norm (attn_output)", &R::normed),
  };
  if (c.path == GdnPath::chunked) {
    p.push_back(region_poisonable("gc (wu)", &R::gc, c, 1));
    p.push_back(region_poisonable("W (wu)", &R::W, c, c.kd()));
    p.push_back(region_poisonable("U (wu)", &R::U, c, c.vd()));
    p.push_back(poisonable("S snapshots (state)", &R::S));
    p.push_back(region_poisonable("uc (state)", &R::uc, c, c.vd()));
    p.push_back(poisonable("final state (state)", &R::state));
    p.push_back(poisonable("core output (output)", &R::core));
  } else {
    p.push_back(poisonable("core output (recurrence)", &R::core));
    p.push_back(poisonable("final state (recurrence)", &R::state));
  }
  return p;
}

RC_GTEST_PROP(GdnPlanted, StageOutputLeftPoisonedFailsItsCheck, ()) {
  stage_output_left_poisoned_fails(cpu_backend(), draw(twin_ranges(gen::ci_gdn_ranges())),
                                   poisonables, kZeroTails, "not 0");
}

// 3: the second part started from a fresh (zero) conv tail instead of the carried one: the
// first K − 1 tokens after the split see other inputs and the bit identity breaks.
RC_GTEST_PROP(GdnPlanted, SplitWithoutTheCarriedConvTailDiffers, ()) {
  split_without_the_carried_conv_tail_differs(cpu_backend(), twin_ranges(gen::ci_gdn_ranges()));
}

// 4: a sequence run alone with its neighbour's state and conv tail (a kernel indexing the
// per-sequence state with the wrong stream) differs from the co-dispatched run (α near one,
// nonzero states: the starting state shows in the first outputs).
RC_GTEST_PROP(GdnPlanted, SequenceWithItsNeighboursStateDiffers, ()) {
  sequence_with_its_neighbours_state_differs(cpu_backend(), twin_ranges(gen::ci_gdn_ranges()),
                                             codispatch_findings);
}

// 5: B15 (nt = cdiv(m, 64), no margin) — a deterministic sweep over co-dispatched prefills
// with n·L = m, L % 64 ≠ 0: some stream's regions fall outside gdn_fla_scratch, where the
// corrected sizing's never do; and the harness refuses such a layout with an Error naming
// gdn_fla_scratch.
TEST(GdnPlanted, B15CarveMissesStreamsRegions) {
  const ModelConfig config = chunked_model(1, 2);
  U caught = 0, cases = 0;
  for (U n = 2; n <= 16; ++n)
    for (U L : {1, 2, 33, 63, 65, 100, 127, 129, 191}) {
      const U m = n * L;
      ++cases;
      EXPECT_TRUE(carve_findings(config, sized(config, m, Sizing::corrected()), n, L).empty())
          << "corrected, n " << n << " L " << L;
      const BufferSizes b15 = sized(config, m, Sizing::mutant_of_corrected(Mutant::B15));
      const Findings f = carve_findings(config, b15, n, L);
      // The regions n·cdiv(L, 64) exceed B15's nt = cdiv(m, 64) exactly when the gc span (the
      // carve's last array) runs past the buffer.
      EXPECT_EQ(!f.empty(), n * cdiv(L, kChunk) > b15.params.gdn_chunks) << "n " << n << " L " << L;
      if (f.empty()) continue;
      ++caught;
      EXPECT_EQ(f[0].check, "carve span inside gdn_fla_scratch") << f[0].where;
    }
  EXPECT_GE(caught, 1u) << "no B15 case out of bounds in " << cases;

  // Two streams of 65 tokens (4 regions per head, B15's nt = 3), bound on a real B15 layout,
  // and run through the harness.
  const U n = 2, L = 65;
  const BufferSizes b15 = sized(config, n * L, Sizing::mutant_of_corrected(Mutant::B15));
  ASSERT_FALSE(carve_findings(config, b15, n, L).empty());
  const auto err = bind_error(config, b15, n, L);
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(contains(*err, "gdn_fla_scratch")) << *err;

  const auto dims = oracle::GdnDims::of(config, n, L);
  const auto plan = oracle::plan_gdn(dims, GdnPath::chunked, b15.params.gdn_chunks);
  const Workspace ws = cpu_backend().allocate(Layout::build(b15), plan.pool_bytes);
  const auto in = oracle::generate_gdn_inputs(dims, 15);
  try {
    (void)oracle::run_gdn(cpu_backend(), ws, plan, in);
    ADD_FAILURE() << "run_gdn accepted the B15 layout";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "gdn_fla_scratch")) << e.what();
  }
  // The corrected layout of the same pass runs and passes the judge.
  const BufferSizes good = sized(config, n * L, Sizing::corrected());
  const auto good_plan = oracle::plan_gdn(dims, GdnPath::chunked, good.params.gdn_chunks);
  const Workspace good_ws = cpu_backend().allocate(Layout::build(good), good_plan.pool_bytes);
  const auto run = oracle::run_gdn(cpu_backend(), good_ws, good_plan, in);
  const auto report = oracle::judge_gdn(good_plan, in, run, "cpu", 15);
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);
}

// 6: M-GDNCARRY (the state pass carries its BF16 snapshot instead of the FP32 state) on a fixed
// set of chunked cases with L ≥ 128 (a second chunk reads the carry): α near one or mixed, zero
// and nonzero starting states, 1–2 sequences. Every case fails a state-stage check; the same
// cases pass without the mutant.
TEST(GdnPlanted, MGdnCarryFailsAStateStageCheck) {
  struct Fixed {
    U nk, gqa, sequences, L;
    oracle::GdnGateRegime alpha;
    bool zero_state;
    U seed;
  };
  using R = oracle::GdnGateRegime;
  const Fixed cases[] = {{1, 1, 1, 128, R::near_one, true, 1},
                         {1, 2, 1, 129, R::near_one, false, 2},
                         {1, 1, 2, 130, R::mixed, false, 3},
                         {2, 1, 1, 191, R::near_one, true, 4}};
  const auto mutant = make_cpu_backend();
  mutant->set_kernel_mutant(Mutant::M_GDNCARRY);
  for (const Fixed& k : cases) {
    GdnCase c;
    c.config = gen::gdn_config(k.nk, 128, k.nk * k.gqa, 128, 4);
    c.sequences = k.sequences;
    c.L = k.L;
    c.path = GdnPath::chunked;
    c.profile.alpha = k.alpha;
    c.profile.zero_state = k.zero_state;
    c.seed = k.seed;
    expect_mutant_caught(cpu_backend(), *mutant, "M-GDNCARRY", c,
                         [](const std::string& n) { return contains(n, "(state)"); });
  }
}

}  // namespace
}  // namespace bufferlab::gdn_properties
