// Properties of the low-rank mHC pre step (docs/spec/numerics.md §4, §9) on the CPU backend, over
// the cases of properties/mhc_generators.h (hc 1..16, r up to 512, zero / huge streams, NaN /
// ±Inf):
//   - the split path (T ≤ 64, FP32) and the GEMM path (BF16 intermediates, slabs of ≤ 2048
//     rows) each agree, stage by stage on their own stored inputs, with the faithful oracle of
//     their own precision (oracle::judge_mhc_lowrank), on poisoned arenas;
//   - on the same inputs the two paths' block inputs agree within the BF16 bound
//     (oracle::compare_mhc_lowrank_paths);
//   - T = 64 (split and GEMM) and T = 65 (GEMM) in every CI run;
//   - a token with a NaN / ±Inf stream value has NaN in every output and scratch row, is
//     counted, and leaves every other token bit-identical to a clean run.
// Planted-bug twins (suite MhcLowRankPlanted) must fail with the expected finding: a block
// input left poisoned, a scratch tensor clobbered between two stages, a stage output beyond its
// bound, the two paths apart by more than their bound, a leaked NaN.
//
// Cost: gen::mhc_op_cost(lowrank) = T·hc·h·(2r + hc) ≤ 2^26 multiply-adds per case (formula in
// mhc_generators.h); the judge evaluates each stage's oracle and bound and the whole chain
// twice (faithful, exact).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/properties/mhc_generators.h"
#include "contains.h"
#include "cpu_backend.h"
#include "findings.h"
#include "mhc_property_support.h"
#include "report_checks.h"

// A namespace of its own, so the using-directive below stays in this file.
namespace bufferlab::mhc_lowrank_properties {
namespace {

using gen::MhcCase;
using gen::MhcOpKind;
using oracle::MhcLowRankPath;
using namespace testing::mhc;  // the helpers both mHC property files share (tests/support)
using testing::cpu_backend;
using testing::require_passed;
using U = uint64_t;

constexpr U kSplitMaxRows = MhcSplitCarve::kMaxRows;  // docs/spec/numerics.md §4 (core ops/mhc.h)

// The planted-bug twins show that a check fails, which small cases do as well: 2^22.
gen::MhcRanges twin_ranges() {
  gen::MhcRanges r = gen::ci_mhc_ranges();
  r.cost_cap = uint64_t{1} << 22;
  return r;
}

// A case on `path`: the split path needs T ≤ 64 (rows halved until it fits; the cost only
// falls).
MhcCase draw_on(MhcLowRankPath path, gen::MhcRanges ranges = gen::ci_mhc_ranges()) {
  MhcCase c = draw(MhcOpKind::lowrank, ranges);
  c.path = path;
  if (path == MhcLowRankPath::split) c.rows = std::min(c.rows, kSplitMaxRows);
  return c;
}

// m: the max_batch_tokens the layout was carved for (0 = rows).
oracle::MhcLowRankRun run(Backend& b, const MhcCase& c, MhcLowRankPath path,
                          const oracle::MhcLowRankInputs& in, U m = 0) {
  const auto plan = oracle::plan_mhc_lowrank(c.config, c.rows, path, m);
  const Workspace ws = oracle::allocate_mhc_footprint(b, plan);
  return oracle::run_mhc_lowrank(b, ws, plan, in);
}

oracle::AgreementReport judge(const oracle::MhcLowRankRun& r, const oracle::MhcLowRankInputs& in,
                              const MhcCase& c, const char* backend = "cpu") {
  return oracle::judge_mhc_lowrank(r, in, backend, c.seed);
}

// ---- each path against its own oracle ----------------------------------------------------------

RC_GTEST_PROP(MhcLowRankProperty, SplitPathAgreesWithItsOracle, ()) {
  const MhcCase c = draw_on(MhcLowRankPath::split);
  const auto in = gen::mhc_lowrank_inputs(c);
  require_passed(judge(run(cpu_backend(), c, MhcLowRankPath::split, in), in, c));
}

// Rows up to 192 here, so some cases are the engine's T > 64 GEMM-path cases (several slabs
// only in the slow suite: slab_rows = min(m, 2048)); the layout is sometimes carved for
// m = 2048 rows, as a real workspace sized for max_batch_tokens is, when that scratch stays
// ≤ 16 MiB.
RC_GTEST_PROP(MhcLowRankProperty, GemmPathAgreesWithItsOracle, ()) {
  gen::MhcRanges ranges = gen::ci_mhc_ranges();
  ranges.max_rows = 192;
  const MhcCase c = draw_on(MhcLowRankPath::slab, ranges);
  const bool small = MhcGemmCarve::make(2048, c.hc(), c.h(), c.r()).end <= (U{16} << 20);
  const U m = small && *rc::gen::arbitrary<bool>() ? 2048 : c.rows;
  RC_TAG(c.rows > kSplitMaxRows ? "T > 64" : "T <= 64", m == c.rows ? "m = T" : "m = 2048");
  const auto in = gen::mhc_lowrank_inputs(c);
  require_passed(judge(run(cpu_backend(), c, MhcLowRankPath::slab, in, m), in, c));
}

// Both paths on the same inputs (T ≤ 64): each judged, and their block inputs within the
// BF16 bound of each other.
oracle::TensorComparison both_paths(const MhcCase& c, const oracle::MhcLowRankInputs& in) {
  const auto split = run(cpu_backend(), c, MhcLowRankPath::split, in);
  const auto slab = run(cpu_backend(), c, MhcLowRankPath::slab, in);
  require_passed(judge(split, in, c));
  require_passed(judge(slab, in, c));
  return oracle::compare_mhc_lowrank_paths(c.lowrank_dims(), in, split.collapse.block_in,
                                           slab.collapse.block_in);
}

void require_agree(const oracle::TensorComparison& paths) {
  if (!paths.passed() && paths.first_bad)
    RC_LOG() << paths.name << ": " << paths.failures << " beyond the bound, first "
             << paths.first_bad->reason << "\n";
  RC_ASSERT(paths.passed());
}

RC_GTEST_PROP(MhcLowRankProperty, SplitAndGemmPathsAgreeWithinBf16Bound, ()) {
  const MhcCase c = draw_on(MhcLowRankPath::split);
  require_agree(both_paths(c, gen::mhc_lowrank_inputs(c)));
}

// T = 64 — the last split-path row count, run on both paths and compared — and T = 65, the
// first the engine sends through the GEMMs. Cost: rows fixed, r / h halved to fit 2^24 (the
// row count is the point here; the other properties reach 2^26).
RC_GTEST_PROP(MhcLowRankProperty, RowCounts64And65, ()) {
  gen::MhcRanges ranges = gen::ci_mhc_ranges();
  ranges.cost_cap = uint64_t{1} << 24;
  ranges.min_rows = 64;
  ranges.max_rows = 65;
  const MhcCase c = draw(MhcOpKind::lowrank, ranges);
  RC_TAG(c.rows);
  const auto in = gen::mhc_lowrank_inputs(c);
  if (c.rows == 65) {
    require_passed(judge(run(cpu_backend(), c, MhcLowRankPath::slab, in), in, c));
    return;
  }
  require_agree(both_paths(c, in));
}

// ---- non-finite tokens --------------------------------------------------------------------------

// One [rows, width] output of the run with planted NaN / ±Inf against the clean run's: the
// planted tokens all NaN, every other token bit-identical.
template <class T>
void isolation(Findings& f, const std::string& name, const std::vector<T>& dirty,
               const std::vector<T>& clean, U width, const std::set<U>& bad) {
  for (U e = 0; e < dirty.size(); ++e) {
    const U t = e / width;
    bool nan = false, same = false;
    if constexpr (sizeof(T) == 2) {
      nan = bf16_is_nan(dirty[e]);
      same = dirty[e] == clean[e];
    } else {
      nan = std::isnan(dirty[e]);
      same = std::bit_cast<uint32_t>(dirty[e]) == std::bit_cast<uint32_t>(clean[e]);
    }
    if (bad.count(t) && !nan)
      f.push_back(
          {name + ": non-finite token not NaN", fmt::format("token {}, col {}", t, e % width)});
    if (!bad.count(t) && !same)
      f.push_back({name + ": other token differs from the clean run",
                   fmt::format("token {}, col {}", t, e % width)});
  }
}

void isolation(Findings& f, const std::string& name, const oracle::MhcScratch& dirty,
               const oracle::MhcScratch& clean, U width, const std::set<U>& bad) {
  if (dirty.bf16.empty())
    isolation(f, name, dirty.f32, clean.f32, width, bad);
  else
    isolation(f, name, dirty.bf16, clean.bf16, width, bad);
}

// Every output and scratch row a stage stores (docs/spec/numerics.md §3 / oracle/mhc.h: "a token
// whose streams hold a NaN or ±Inf gets NaN in every output of that token"), and the count.
Findings isolation_findings(const oracle::MhcLowRankRun& dirty, const oracle::MhcLowRankRun& clean,
                            const std::set<U>& bad) {
  const auto& d = dirty.dims;
  Findings f;
  if (dirty.diagnostics.nonfinite_tokens != bad.size())
    f.push_back(
        {"non-finite token count",
         fmt::format("{} counted, {} planted", dirty.diagnostics.nonfinite_tokens, bad.size())});
  isolation(f, "hc_normed", dirty.norm.normed, clean.norm.normed, d.hc * d.h, bad);
  isolation(f, "hc_low", dirty.down.low, clean.down.low, d.r, bad);
  isolation(f, "norm_output", dirty.collapse.block_in, clean.collapse.block_in, d.h, bad);
  if (dirty.path == MhcLowRankPath::split) {
    isolation(f, "hc_post", dirty.down.post, clean.down.post, d.hc, bad);
  } else {
    isolation(f, "hc_inj_pre", dirty.inject.inj_pre, clean.inject.inj_pre, d.hc, bad);
    isolation(f, "hc_up_pre", dirty.up.up_pre, clean.up.up_pre, d.hc * d.h, bad);
    isolation(f, "hc_post", dirty.collapse.post, clean.collapse.post, d.hc, bad);
  }
  return f;
}

struct DirtyAndClean {
  MhcCase c;
  oracle::MhcLowRankInputs in;
  oracle::MhcLowRankRun dirty, clean;
};

DirtyAndClean dirty_and_clean(gen::MhcRanges ranges = gen::ci_mhc_ranges()) {
  DirtyAndClean r{draw_nonfinite(MhcOpKind::lowrank, ranges), {}, {}, {}};
  MhcCase clean = r.c;
  clean.profile.nonfinite.clear();
  r.in = gen::mhc_lowrank_inputs(r.c);
  r.dirty = run(cpu_backend(), r.c, r.c.path, r.in);
  r.clean = run(cpu_backend(), clean, clean.path, gen::mhc_lowrank_inputs(clean));
  return r;
}

// Cost: two runs and one judge per case; isolation needs no large case: 2^24.
RC_GTEST_PROP(MhcLowRankProperty, NonFiniteTokensAreNanCountedAndIsolated, ()) {
  gen::MhcRanges ranges = gen::ci_mhc_ranges();
  ranges.cost_cap = uint64_t{1} << 24;
  const DirtyAndClean r = dirty_and_clean(ranges);
  RC_TAG(oracle::to_string(r.c.path));
  const Findings f = isolation_findings(r.dirty, r.clean, bad_tokens(r.c.profile));
  for (const auto& x : f) RC_LOG() << "finding: " << x.check << ": " << x.where << "\n";
  RC_ASSERT(f.empty());
  require_passed(judge(r.dirty, r.in, r.c));
}

// ==== Planted bugs
// ==================================================================================

RC_GTEST_PROP(MhcLowRankPlanted, BlockInputLeftPoisonedFailsAtItsTokenAndDim, ()) {
  const MhcCase c = draw(MhcOpKind::lowrank, twin_ranges());
  const auto in = gen::mhc_lowrank_inputs(c);
  auto r = run(cpu_backend(), c, c.path, in);
  const U t = *rc::gen::inRange<U>(0, c.rows), d = *rc::gen::inRange<U>(0, c.h());
  r.collapse.block_in[t * c.h() + d] = 0xFFFF;
  const auto report = judge(r, in, c, "planted");
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("norm_output (collapse)"));
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(contains(bad->first_bad->reason, "unwritten"));
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, dim {})", t, d)));
}

// A scratch element changed between the stage that stored it and the one that reads it (a
// finite token's, so the change is visible): the intact check of the reader names it.
RC_GTEST_PROP(MhcLowRankPlanted, ScratchClobberedBetweenStagesFails, ()) {
  const MhcCase c = draw(MhcOpKind::lowrank, twin_ranges());
  const auto tokens = finite_tokens(c);
  RC_PRE(!tokens.empty());
  const auto in = gen::mhc_lowrank_inputs(c);
  auto r = run(cpu_backend(), c, c.path, in);
  const bool low = *rc::gen::arbitrary<bool>();
  const U width = low ? c.r() : c.hc() * c.h();
  const U t = *rc::gen::elementOf(tokens), col = *rc::gen::inRange<U>(0, width);
  const U e = t * width + col;
  const bool split = c.path == MhcLowRankPath::split;
  oracle::MhcScratch& read = low ? (split ? r.collapse.low : r.up.low) : r.collapse.normed;
  if (split)
    read.f32[e] = std::nextafter(read.f32[e], INFINITY);
  else
    read.bf16[e] = static_cast<uint16_t>(read.bf16[e] ^ 0x0001u);
  const std::string name =
      low ? (split ? "hc_low intact (collapse input)" : "hc_low intact (up input)")
          : "hc_normed intact (collapse input)";
  const auto report = judge(r, in, c, "planted");
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == name);
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(bad->first_bad->row == t);
  RC_ASSERT(bad->first_bad->col == col);
}

// The largest value one step past |v − want| > bound: FP32 on the split path (beyond_f32),
// BF16 on the slab.
uint16_t beyond_bf16(double want, double bound) {
  uint16_t b = f32_to_bf16_bits(static_cast<float>(want + bound));
  auto up = [](uint16_t x) {
    if (x == 0x8000) return uint16_t{0x0001};
    return (x & 0x8000) ? static_cast<uint16_t>(x - 1) : static_cast<uint16_t>(x + 1);
  };
  while (!(static_cast<double>(bf16_bits_to_f32(b)) - want > bound)) b = up(b);
  return up(b);
}

// One element of hc_low (the down stage) beyond its bound, stored and read consistently (a
// kernel that computed it wrong): the down check fails at its token and k.
RC_GTEST_PROP(MhcLowRankPlanted, DownOutputBeyondItsBoundFailsAtItsCoordinates, ()) {
  const MhcCase c = draw(MhcOpKind::lowrank, twin_ranges());
  const auto tokens = finite_tokens(c);
  RC_PRE(!tokens.empty());
  const auto in = gen::mhc_lowrank_inputs(c);
  auto r = run(cpu_backend(), c, c.path, in);
  const bool split = c.path == MhcLowRankPath::split;
  const auto d = c.lowrank_dims();
  const auto sw = oracle::slab_weights(in.weights);
  const auto w_down = split ? oracle::widen(in.weights.w_down) : oracle::widen_bf16(sw.w_down);
  const auto normed = r.down.normed.values();
  auto want = oracle::mhc_lowrank_down(d, normed, w_down);
  if (!split)
    for (double& v : want) v = oracle::round_bf16(v);
  const auto bound = oracle::mhc_lowrank_down_bounds(d, normed, w_down, c.path).bound;
  const U t = *rc::gen::elementOf(tokens), k = *rc::gen::inRange<U>(0, c.r()), e = t * c.r() + k;
  RC_PRE(std::isfinite(want[e]) && std::fabs(want[e]) + bound[e] < 1e30);
  for (oracle::MhcScratch* s : {&r.down.low, &r.up.low, &r.collapse.low}) {
    if (s->empty()) continue;
    if (split)
      s->f32[e] = beyond_f32(want[e], bound[e]);
    else
      s->bf16[e] = beyond_bf16(want[e], bound[e]);
  }
  const auto report = judge(r, in, c, "planted");
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("hc_low (down)"));
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, k {})", t, k)));
}

// The GEMM path's block input moved one BF16 step past the path bound of the split path's.
RC_GTEST_PROP(MhcLowRankPlanted, PathsApartBeyondTheirBoundFail, ()) {
  const MhcCase c = draw_on(MhcLowRankPath::split, twin_ranges());
  const auto tokens = finite_tokens(c);
  RC_PRE(!tokens.empty());
  const auto in = gen::mhc_lowrank_inputs(c);
  const auto split = run(cpu_backend(), c, MhcLowRankPath::split, in);
  auto slab = run(cpu_backend(), c, MhcLowRankPath::slab, in);
  RC_ASSERT(oracle::compare_mhc_lowrank_paths(c.lowrank_dims(), in, split.collapse.block_in,
                                              slab.collapse.block_in)
                .passed());
  const auto bound =
      oracle::mhc_lowrank_path_bounds(c.lowrank_dims(), in.streams, in.weights).bound;
  const U t = *rc::gen::elementOf(tokens), dim = *rc::gen::inRange<U>(0, c.h()),
          e = t * c.h() + dim;
  const double s = bf16_bits_to_f32(split.collapse.block_in[e]);
  RC_PRE(std::isfinite(bound[e]) && std::fabs(s) + bound[e] < 1e30);
  slab.collapse.block_in[e] = beyond_bf16(s, bound[e]);
  const auto cmp = oracle::compare_mhc_lowrank_paths(c.lowrank_dims(), in, split.collapse.block_in,
                                                     slab.collapse.block_in);
  RC_ASSERT(!cmp.passed());
  RC_ASSERT(cmp.name == std::string("norm_output split vs slab"));
  RC_ASSERT(cmp.failures == 1u);
  RC_ASSERT(contains(cmp.first_bad->reason, fmt::format("(token {}, dim {})", t, dim)));
}

// A NaN leaked into a finite token's block input, and a planted token's low row left finite.
RC_GTEST_PROP(MhcLowRankPlanted, LeakedOrMissingNanFailsIsolation, ()) {
  DirtyAndClean r = dirty_and_clean(twin_ranges());
  const auto bad = bad_tokens(r.c.profile);
  const auto good = finite_tokens(r.c);
  const bool leak = *rc::gen::arbitrary<bool>() && !good.empty();
  if (leak) {
    const U t = *rc::gen::elementOf(good), d = *rc::gen::inRange<U>(0, r.c.h());
    r.dirty.collapse.block_in[t * r.c.h() + d] = 0x7FC0;
  } else {
    const U t = *bad.begin(), k = *rc::gen::inRange<U>(0, r.c.r());
    oracle::MhcScratch& low = r.dirty.down.low;
    if (low.bf16.empty())
      low.f32[t * r.c.r() + k] = 0.25f;
    else
      low.bf16[t * r.c.r() + k] = 0x3E80;
  }
  const Findings f = isolation_findings(r.dirty, r.clean, bad);
  RC_ASSERT(has_finding(f, leak ? "norm_output: other token differs from the clean run"
                                : "hc_low: non-finite token not NaN"));
  auto miscounted = r.dirty;
  miscounted.diagnostics.nonfinite_tokens = 0;
  RC_ASSERT(has_finding(isolation_findings(miscounted, r.clean, bad), "non-finite token count"));
}

}  // namespace
}  // namespace bufferlab::mhc_lowrank_properties
