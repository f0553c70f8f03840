// What the Gated DeltaNet and Mamba-2 properties (tests/property/test_{gdn,mamba2}_properties.cpp)
// and their full-range runs (tests/slow/numeric/test_{gdn,mamba2}_full_range.cpp) share, written
// once over the two families: a family's case drawn and logged, one call run on a footprint
// layout and judged, the failing checks of a report, this file's own findings (the FP64
// identity's 1e-12 with its coordinates, bit-identical arrays), the rows of a row-major array,
// the property bodies and their planted-bug twins (poisoned stored arrays, a kernel mutant
// caught on fixed cases). A family is a traits struct (GdnFamily, Mamba2Family) naming its case,
// dims, inputs, plan and run types and the oracle's plan / allocate / run / judge for it; the
// helpers find the family from their arguments.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/gdn_judge.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mamba2_judge.h"
#include "bufferlab/properties/gdn_mamba2_generators.h"
#include "contains.h"
#include "cpu_backend.h"
#include "findings.h"
#include "report_checks.h"
#include "report_lookup.h"

namespace bufferlab::testing::gdn_mamba2 {

using U = uint64_t;
using gen::GdnCase;  // the families' cases and paths, named here for the files using this namespace
using gen::Mamba2Case;
using oracle::GdnPath;
using oracle::Mamba2Path;

inline constexpr U kChunk = 64;  // both families' chunk (GdnChunkCarve, Mamba2ChunkCarve)
static_assert(GdnChunkCarve::kChunk == kChunk && Mamba2ChunkCarve::kChunk == kChunk);
inline constexpr double kIdentityTol =
    1e-12;  // docs/spec/numerics.md §5/§6: chunked FP64 vs recurrence FP64

struct GdnFamily {
  using Case = gen::GdnCase;
  using Ranges = gen::GdnRanges;
  using Dims = oracle::GdnDims;
  using Inputs = oracle::GdnInputs;
  using Plan = oracle::GdnPlan;
  using Run = oracle::GdnRun;
  using Path = oracle::GdnPath;
  static rc::Gen<Case> cases(const Ranges& r) { return gen::gdn_case(r); }
  static Plan plan(const Dims& d, Path p) { return oracle::plan_gdn(d, p); }
  static Workspace allocate(Backend& b, const Plan& p) {
    return oracle::allocate_gdn_footprint(b, p);
  }
  static Run run(Backend& b, const Workspace& ws, const Plan& p, const Inputs& in) {
    return oracle::run_gdn(b, ws, p, in);
  }
  static oracle::AgreementReport judge(const Plan& p, const Inputs& in, const Run& r,
                                       const char* backend, U seed, const oracle::BoundModel& bm) {
    return oracle::judge_gdn(p, in, r, backend, seed, bm);
  }
  static Inputs inputs(const Case& c) { return gen::gdn_inputs(c); }
  // The conv1d output [rows, conv_width] (FP32 here).
  static const std::vector<float>& conv(const Run& r) { return r.conv; }
  static U conv_width(const Dims& d) { return d.geom.conv_dim; }
  static constexpr const char* kConvName = "conv1d";
  // A nonzero starting state that survives the call (α near one).
  static void keep_the_state_visible(Case& c) {
    c.profile.zero_state = false;
    c.profile.alpha = oracle::GdnGateRegime::near_one;
  }
  // Sequence b alone; tokens [t0, t1) of one sequence from the given conv tail and state.
  static Inputs sequence(const Dims& d, const Inputs& in, U b) {
    return oracle::gdn_sequence(d, in, b);
  }
  static Inputs token_range(const Dims& d, const Inputs& in, U t0, U t1,
                            std::span<const uint16_t> conv_state, std::span<const float> state) {
    return oracle::gdn_token_range(d, in, t0, t1, conv_state, state);
  }
  // The core output before the gated norm [rows, width], and one sequence's state elements.
  static const std::vector<uint16_t>& output(const Run& r) { return r.core; }
  static U width(const Dims& d) { return d.geom.value_dim; }
  static U state_cols(const Dims& d) { return d.geom.vd; }
  static constexpr const char* kOutputName = "core output";
  using CoreResult = oracle::GdnCoreResult;
  template <class R>
  static auto& fp64_out(R& r) {
    return r.o;
  }
  static U head_dim(const Dims& d) { return d.geom.vd; }
  static U state_size(const Dims& d) { return d.geom.nv * d.geom.kd * d.geom.vd; }
  // One sequence's state [heads][rows][state_cols], its axes named in findings.
  static U state_heads(const Dims& d) { return d.geom.nv; }
  static constexpr const char* kStateRow = "k";
  static constexpr const char* kStateCol = "v";
};

struct Mamba2Family {
  using Case = gen::Mamba2Case;
  using Ranges = gen::Mamba2Ranges;
  using Dims = oracle::Mamba2Dims;
  using Inputs = oracle::Mamba2Inputs;
  using Plan = oracle::Mamba2Plan;
  using Run = oracle::Mamba2Run;
  using Path = oracle::Mamba2Path;
  static rc::Gen<Case> cases(const Ranges& r) { return gen::mamba2_case(r); }
  static Plan plan(const Dims& d, Path p) { return oracle::plan_mamba2(d, p); }
  static Workspace allocate(Backend& b, const Plan& p) {
    return oracle::allocate_mamba2_footprint(b, p);
  }
  static Run run(Backend& b, const Workspace& ws, const Plan& p, const Inputs& in) {
    return oracle::run_mamba2(b, ws, p, in);
  }
  static oracle::AgreementReport judge(const Plan& p, const Inputs& in, const Run& r,
                                       const char* backend, U seed, const oracle::BoundModel& bm) {
    return oracle::judge_mamba2(p, in, r, backend, seed, bm);
  }
  static Inputs inputs(const Case& c) { return gen::mamba2_inputs(c); }
  // The conv1d output xBC [rows, conv_width] (BF16 here).
  static const std::vector<uint16_t>& conv(const Run& r) { return r.xbc; }
  static U conv_width(const Dims& d) { return d.geom.d_xbc; }
  static constexpr const char* kConvName = "conv1d (xBC)";
  // A nonzero starting state that survives the call (tiny dt: it decays by exp(dt·A) ≈ 1 per
  // token).
  static void keep_the_state_visible(Case& c) {
    c.profile.zero_state = false;
    c.profile.dt = oracle::Mamba2DtRegime::tiny;
  }
  // Sequence b alone; tokens [t0, t1) of one sequence from the given conv tail and state.
  static Inputs sequence(const Dims& d, const Inputs& in, U b) {
    return oracle::mamba2_sequence(d, in, b);
  }
  static Inputs token_range(const Dims& d, const Inputs& in, U t0, U t1,
                            std::span<const uint16_t> conv_state, std::span<const float> state) {
    return oracle::mamba2_token_range(d, in, t0, t1, conv_state, state);
  }
  // The core output before the gated norm [rows, width], and one sequence's state elements.
  static const std::vector<uint16_t>& output(const Run& r) { return r.y; }
  static U width(const Dims& d) { return d.geom.d_inner; }
  static U state_cols(const Dims& d) { return d.geom.N; }
  static constexpr const char* kOutputName = "y";
  using CoreResult = oracle::Mamba2CoreResult;
  template <class R>
  static auto& fp64_out(R& r) {
    return r.y;
  }
  static U head_dim(const Dims& d) { return d.geom.P; }
  static U state_size(const Dims& d) { return d.geom.H * d.geom.P * d.geom.N; }
  // One sequence's state [heads][rows][state_cols], its axes named in findings.
  static U state_heads(const Dims& d) { return d.geom.H; }
  static constexpr const char* kStateRow = "p";
  static constexpr const char* kStateCol = "n";
};

// The family of a case, ranges, dims or inputs type.
GdnFamily family_of(const gen::GdnCase&);
GdnFamily family_of(const gen::GdnRanges&);
GdnFamily family_of(const oracle::GdnDims&);
Mamba2Family family_of(const gen::Mamba2Case&);
Mamba2Family family_of(const gen::Mamba2Ranges&);
Mamba2Family family_of(const oracle::Mamba2Dims&);
GdnFamily family_of(const oracle::GdnRun&);
Mamba2Family family_of(const oracle::Mamba2Run&);
template <class T>
using FamilyOf = decltype(family_of(std::declval<const T&>()));

// A case drawn from `ranges`, logged (a shrunk failure says which case).
template <class Ranges>
typename FamilyOf<Ranges>::Case draw(const Ranges& ranges) {
  auto c = *FamilyOf<Ranges>::cases(ranges);
  RC_LOG() << c.describe() << "\n";
  return c;
}

// The planted-bug twins show that a check fails, which small cases do as well: 2^19.
template <class Ranges>
Ranges twin_ranges(Ranges r) {
  r.cost_cap = uint64_t{1} << 19;
  return r;
}

inline const char* edge_tag(U L) {
  return L % kChunk == 0 ? "L % 64 = 0" : L % kChunk == 1 ? "L % 64 = 1" : "L % 64 other";
}

template <class F>
struct Call {
  typename F::Plan plan;
  typename F::Run run;
};

// One call on a footprint layout (poisoned by the harness).
template <class Dims, class F = FamilyOf<Dims>>
Call<F> run_call(Backend& b, const Dims& dims, typename F::Path path,
                 const typename F::Inputs& in) {
  Call<F> c{F::plan(dims, path), {}};
  const Workspace ws = F::allocate(b, c.plan);
  c.run = F::run(b, ws, c.plan, in);
  return c;
}
template <class Case, class F = FamilyOf<Case>>
requires requires(const Case& c) { c.dims(); }
Call<F> run_call(Backend& b, const Case& c, const typename F::Inputs& in) {
  return run_call(b, c.dims(), c.path, in);
}

template <class F>
oracle::AgreementReport judge(const Call<F>& call, const typename F::Inputs& in, U seed,
                              const char* backend = "cpu",
                              const oracle::BoundModel& bm = oracle::cpu_bounds()) {
  return F::judge(call.plan, in, call.run, backend, seed, bm);
}

inline std::vector<std::string> failing_checks(const oracle::AgreementReport& r) {
  std::vector<std::string> names;
  for (const auto& c : r.checks)
    if (!c.passed()) names.push_back(c.name);
  return names;
}

using testing::check_named;     // report_lookup.h
using testing::cpu_backend;     // cpu_backend.h
using testing::require_passed;  // report_checks.h

// contains.h and findings.h, named here too for the files that use this namespace.
using testing::contains;
using testing::Finding;
using testing::Findings;
using testing::has_finding;
using testing::log_findings;

template <class T>
std::span<const T> rows_of(const std::vector<T>& v, U row0, U rows, U cols) {
  return std::span<const T>(v).subspan(row0 * cols, rows * cols);
}

inline double max_abs(std::span<const double> v) {
  double m = 0.0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

// |got − want| ≤ 1e-12·max|want| per element (NaN never passes); `where(e)` names element e.
template <class Where>
void identity_findings(Findings& f, const std::string& check, std::span<const double> got,
                       std::span<const double> want, Where where) {
  if (got.size() != want.size()) {
    f.push_back({check, fmt::format("{} elements, want {}", got.size(), want.size())});
    return;
  }
  const double tol = kIdentityTol * max_abs(want);
  for (U e = 0; e < got.size(); ++e)
    if (!(std::fabs(got[e] - want[e]) <= tol)) {
      f.push_back({check, fmt::format("{}: {} vs {} (|Δ| {:.3g} > {:.3g})", where(e), got[e],
                                      want[e], std::fabs(got[e] - want[e]), tol)});
      return;  // the first bad element
    }
}

// The first element where two arrays differ in their bits, if any.
template <class T>
std::optional<U> first_bit_difference(std::span<const T> a, std::span<const T> b) {
  if (a.size() != b.size()) return std::min(a.size(), b.size());
  for (U e = 0; e < a.size(); ++e)
    if (std::memcmp(&a[e], &b[e], sizeof(T)) != 0) return e;
  return std::nullopt;
}

template <class T>
void bit_findings(Findings& f, const std::string& check, std::span<const T> got,
                  std::span<const T> want, U cols) {
  if (const auto e = first_bit_difference(got, want))
    f.push_back({check, got.size() != want.size()
                            ? fmt::format("{} elements, want {}", got.size(), want.size())
                            : fmt::format("row {}, col {}", *e / cols, *e % cols)});
}

// ---- the FP64 identity (docs/spec/numerics.md §5/§6)
// -----------------------------------------------------

// Both FP64 algorithms' results of one case: the output [rows, width] and the final state
// [sequences, heads, rows, state_cols].
template <class F>
struct Fp64Pair {
  typename F::CoreResult chunked, recurrence;
};

// The chunked results against the recurrence's within 1e-12 of the scale, output and final
// state, each at its first bad element's coordinates.
template <class Dims, class F = FamilyOf<Dims>>
Findings fp64_identity_findings(const Dims& dims, const Fp64Pair<F>& p) {
  const U w = F::width(dims), hd = F::head_dim(dims), heads = F::state_heads(dims);
  const U cols = F::state_cols(dims), per_head = F::state_size(dims) / heads;
  Findings f;
  identity_findings(f, std::string(F::kOutputName) + ": chunked vs recurrence (FP64)",
                    F::fp64_out(p.chunked), F::fp64_out(p.recurrence), [&](U e) {
                      return fmt::format("token {}, head {}, dim {}", e / w, e % w / hd, e % hd);
                    });
  identity_findings(f, "final state: chunked vs recurrence (FP64)", p.chunked.state,
                    p.recurrence.state, [&](U e) {
                      return fmt::format("sequence {}, head {}, {} {}, {} {}",
                                         e / (heads * per_head), e / per_head % heads, F::kStateRow,
                                         e % per_head / cols, F::kStateCol, e % cols);
                    });
  return f;
}

// The identity as one verdict, the first bad element logged.
inline bool within_identity(std::span<const double> got, std::span<const double> want) {
  Findings f;
  identity_findings(f, "FP64 identity", got, want,
                    [](U e) { return fmt::format("element {}", e); });
  log_findings(f);
  return f.empty();
}

// Cases the FP64 identity takes: the chunked cost capped too (the FP64 chunked form runs any head
// size), the whole cost at `cost_cap` when given.
template <class Ranges>
Ranges identity_ranges(Ranges r, std::optional<U> cost_cap = std::nullopt) {
  r.cap_chunked_cost = true;
  if (cost_cap) r.cost_cap = *cost_cap;
  return r;
}

// Both FP64 algorithms on the exact conv outputs and gates of the case's inputs, the chunked one
// from a zero state when `chunked_zero_state` (a dropped carry), the recurrence from the inputs'.
inline Fp64Pair<GdnFamily> fp64_pair(const gen::GdnCase& c, const oracle::GdnInputs& in,
                                     bool chunked_zero_state = false) {
  const auto dims = c.dims();
  const oracle::GdnReference ref = oracle::gdn_reference(dims, in, oracle::Mode::exact);
  const std::vector<double> s0(in.state.begin(), in.state.end()), zero(s0.size(), 0.0);
  return {oracle::gdn_chunked_fp64(dims, ref.conv, ref.gates, chunked_zero_state ? zero : s0),
          oracle::gdn_recurrence_fp64(dims, ref.conv, ref.gates, s0)};
}

// Both FP64 algorithms, sequence by sequence, on the exact conv output and dt of the inputs:
// y [rows, d_inner] and state [sequences, H, P, N], each concatenated over the sequences; the
// chunked one from a zero state when `chunked_zero_state`.
inline Fp64Pair<Mamba2Family> fp64_pair(const gen::Mamba2Case& c, const oracle::Mamba2Inputs& in,
                                        bool chunked_zero_state = false) {
  const auto dims = c.dims();
  const auto& g = dims.geom;
  const oracle::Mamba2Reference ref = oracle::mamba2_reference(dims, in, oracle::Mode::exact);
  std::vector<double> A(g.H), D(in.D.begin(), in.D.end());
  for (U h = 0; h < g.H; ++h) A[h] = -std::exp(static_cast<double>(in.a_log[h]));
  const auto one = oracle::Mamba2Dims::of(c.config, 1, c.L);
  const U state = g.H * g.P * g.N;
  Fp64Pair<Mamba2Family> p;
  for (U b = 0; b < c.sequences; ++b) {
    const auto xbc = rows_of(ref.xbc, b * c.L, c.L, g.d_xbc);
    const auto dt = rows_of(ref.dt, b * c.L, c.L, g.H);
    const std::vector<double> s0(in.state.begin() + static_cast<std::ptrdiff_t>(b * state),
                                 in.state.begin() + static_cast<std::ptrdiff_t>((b + 1) * state));
    const std::vector<double> zero(state, 0.0);
    const auto ch = oracle::mamba2_chunked_fp64(one, xbc, dt, A, D, chunked_zero_state ? zero : s0);
    const auto re = oracle::mamba2_recurrence_fp64(one, xbc, dt, A, D, s0);
    p.chunked.y.insert(p.chunked.y.end(), ch.y.begin(), ch.y.end());
    p.chunked.state.insert(p.chunked.state.end(), ch.state.begin(), ch.state.end());
    p.recurrence.y.insert(p.recurrence.y.end(), re.y.begin(), re.y.end());
    p.recurrence.state.insert(p.recurrence.state.end(), re.state.begin(), re.state.end());
  }
  return p;
}

// Property body: the chunked results of `c` against the recurrence's within the identity.
template <class Case>
void fp64_identity_holds(const Case& c) {
  const Findings f = fp64_identity_findings(c.dims(), fp64_pair(c, FamilyOf<Case>::inputs(c)));
  log_findings(f);
  RC_ASSERT(f.empty());
}

// Both arrays of a pair within the identity (the full-range runs' verdict).
template <class F>
void assert_within_identity(const Fp64Pair<F>& p) {
  RC_ASSERT(within_identity(F::fp64_out(p.chunked), F::fp64_out(p.recurrence)));
  RC_ASSERT(within_identity(p.chunked.state, p.recurrence.state));
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return !first_bit_difference(a, b).has_value();
}

// ---- shared property bodies: one call judged, splitting a sequence, co-dispatched sequences --

// Every stage of one call of `c` on `b` passes the judge.
template <class Case, class F = FamilyOf<Case>>
void call_passes_the_judge(Backend& b, const Case& c) {
  const auto in = F::inputs(c);
  require_passed(judge(run_call(b, c.dims(), c.path, in), in, c.seed));
}

template <class F>
struct Split {
  U at = 0;
  Call<F> first, second;
};

// Tokens [0, at) then [at, L) of the case's one sequence on `b`, the second run starting from
// the first's conv tail and state (or from `tail` when given: the twin's bug).
template <class Case, class F = FamilyOf<Case>>
Split<F> run_split(Backend& b, const Case& c, const typename F::Inputs& in, U at,
                   const std::vector<uint16_t>* tail = nullptr) {
  const auto dims = c.dims();
  Split<F> s{at, {}, {}};
  const auto first_in = F::token_range(dims, in, 0, at, in.conv_state, in.state);
  s.first = run_call(b, F::Dims::of(c.config, 1, at), c.path, first_in);
  const auto second_in =
      F::token_range(dims, in, at, c.L, tail ? *tail : s.first.run.conv_state, s.first.run.state);
  s.second = run_call(b, F::Dims::of(c.config, 1, c.L - at), c.path, second_in);
  return s;
}

// The one-pass run against the split: the core output of both parts, the normed output after
// the split, the final state and conv tail, bit for bit.
template <class Case, class F = FamilyOf<Case>>
Findings split_bit_findings(const Case& c, const Call<F>& whole, const Split<F>& s) {
  const U w = F::width(c.dims()), L = c.L, at = s.at;
  const std::string out = F::kOutputName;
  const auto& a = whole.run;
  Findings f;
  bit_findings(f, out + ", tokens before the split", rows_of(F::output(a), 0, at, w),
               std::span<const uint16_t>(F::output(s.first.run)), w);
  bit_findings(f, out + ", tokens after the split", rows_of(F::output(a), at, L - at, w),
               std::span<const uint16_t>(F::output(s.second.run)), w);
  bit_findings(f, "gated norm output, tokens after the split", rows_of(a.normed, at, L - at, w),
               std::span<const uint16_t>(s.second.run.normed), w);
  bit_findings(f, "final state", std::span<const float>(a.state),
               std::span<const float>(s.second.run.state), F::state_cols(c.dims()));
  bit_findings(f, "conv tail state", std::span<const uint16_t>(a.conv_state),
               std::span<const uint16_t>(s.second.run.conv_state), 1);
  return f;
}

// One sequence of L ≥ 65 (L + 64 when drawn ≤ 64, at most doubling the cost: drawn under half
// the cap).
template <class Ranges>
typename FamilyOf<Ranges>::Case draw_split_case(Ranges ranges) {
  ranges.cost_cap /= 2;
  auto c = draw(ranges);
  c.sequences = 1;
  if (c.L <= kChunk) c.L += kChunk;
  return c;
}

// A multiple of 64 on the chunked path; anywhere on the recurrence (token by token, FP32
// state: nothing depends on where a call starts).
template <class Case, class F = FamilyOf<Case>>
U draw_bit_identical_split(const Case& c) {
  if (c.path == F::Path::chunked) return kChunk * *rc::gen::inRange<U>(1, (c.L - 1) / kChunk + 1);
  return *rc::gen::inRange<U>(1, c.L);
}

// Property: a split where draw_bit_identical_split puts it is bit-identical to one pass.
template <class Ranges>
void split_is_bit_identical(Backend& b, const Ranges& ranges) {
  const auto c = draw_split_case(ranges);
  const U at = draw_bit_identical_split(c);
  RC_TAG(gen::to_string(c.path));
  RC_LOG() << "split at " << at << "\n";
  using F = FamilyOf<Ranges>;
  const auto in = F::inputs(c);
  const Call<F> whole = run_call(b, c, in);
  const Findings f = split_bit_findings(c, whole, run_split(b, c, in, at));
  log_findings(f);
  RC_ASSERT(f.empty());
}

// At least two sequences (a drawn single one becomes two: the backend's work only, no oracle).
template <class Ranges>
typename FamilyOf<Ranges>::Case draw_codispatch_case(const Ranges& ranges) {
  auto c = draw(ranges);
  c.sequences = std::max<U>(c.sequences, 2);
  return c;
}

// Sequence b of `a` (a co-dispatched run of `c`) against `s` (the sequence alone), bit for bit:
// the conv1d output and the conv tail.
template <class Case, class F = FamilyOf<Case>>
void conv_bit_findings(Findings& f, const Case& c, const typename F::Run& a,
                       const typename F::Run& s, U b) {
  const auto dims = c.dims();
  const U L = c.L, K1 = dims.geom.kernel - 1, cw = F::conv_width(dims);
  using T = typename std::decay_t<decltype(F::conv(s))>::value_type;
  const std::string seq = fmt::format(" (sequence {})", b);
  bit_findings(f, F::kConvName + seq, rows_of(F::conv(a), b * L, L, cw),
               std::span<const T>(F::conv(s)), cw);
  bit_findings(f, "conv tail state" + seq, rows_of(a.conv_state, b, 1, cw * K1),
               std::span<const uint16_t>(s.conv_state), std::max<U>(K1, 1));
}

// The same for the core output, the gated norm output and the final state.
template <class Case, class F = FamilyOf<Case>>
void output_bit_findings(Findings& f, const Case& c, const typename F::Run& a,
                         const typename F::Run& s, U b) {
  const auto dims = c.dims();
  const U L = c.L, w = F::width(dims), state = F::state_size(dims);
  const std::string seq = fmt::format(" (sequence {})", b);
  bit_findings(f, F::kOutputName + seq, rows_of(F::output(a), b * L, L, w),
               std::span<const uint16_t>(F::output(s)), w);
  bit_findings(f, "gated norm output" + seq, rows_of(a.normed, b * L, L, w),
               std::span<const uint16_t>(s.normed), w);
  bit_findings(f, "final state" + seq, rows_of(a.state, b, 1, state),
               std::span<const float>(s.state), F::state_cols(dims));
}

// Property: sequence b of a co-dispatched call equals the same sequence alone; `findings(c,
// all, alone, b)` compares the family's stored arrays.
template <class Ranges, class Compare>
void codispatch_equals_alone(Backend& b, const Ranges& ranges, Compare findings) {
  using F = FamilyOf<Ranges>;
  const auto c = draw_codispatch_case(ranges);
  RC_TAG(gen::to_string(c.path), edge_tag(c.L));
  const auto dims = c.dims();
  const auto in = F::inputs(c);
  const Call<F> all = run_call(b, c, in);
  auto one = c;
  one.sequences = 1;
  Findings f;
  for (U s = 0; s < c.sequences; ++s) {
    const Call<F> alone = run_call(b, one.dims(), c.path, F::sequence(dims, in, s));
    const Findings fs = findings(c, all, alone, s);
    f.insert(f.end(), fs.begin(), fs.end());
  }
  log_findings(f);
  RC_ASSERT(f.empty());
}

// Property body: a drawn chunked case `c` made one sequence of L ≥ 2 and split at a drawn
// point not a multiple of 64: the second part passes its judge (its carried conv tail and state
// being inputs like any other); how far its output lies from the one-pass output is tagged, not
// asserted.
template <class Case, class F = FamilyOf<Case>>
void split_elsewhere_second_part_passes(Backend& b, Case c) {
  c.sequences = 1;
  c.L = std::max<U>(c.L, 2);
  U at = *rc::gen::inRange<U>(1, c.L);
  if (at % kChunk == 0) at -= 1;
  RC_TAG(c.L > kChunk ? "L > 64" : "L <= 64");
  RC_LOG() << "split at " << at << "\n";
  const auto in = F::inputs(c);
  const Split<F> s = run_split(b, c, in, at);
  const auto dims = c.dims();
  testing::require_passed(
      judge(s.second, F::token_range(dims, in, at, c.L, s.first.run.conv_state, s.first.run.state),
            c.seed));
  const Call<F> whole = run_call(b, c, in);
  const U w = F::width(dims);
  uint32_t ulps = 0;
  const auto tail = rows_of(F::output(whole.run), at, c.L - at, w);
  for (U e = 0; e < tail.size(); ++e)
    ulps = std::max(ulps, bf16_ulp_distance(tail[e], F::output(s.second.run)[e]));
  RC_TAG(ulps == 0 ? "identical" : ulps <= 2 ? "within 2 BF16 ULP" : "beyond 2 BF16 ULP");
}

// ---- shared planted-bug twins ---------------------------------------------------------------

// Twin of the FP64 identity: one chunked output element of `p` (the FP64 chunked and recurrent
// results of `c`) moved by twice the tolerance fails at its coordinates.
template <class Case, class F = FamilyOf<Case>>
void fp64_output_moved_past_the_tolerance_fails(const Case& c, Fp64Pair<F> p) {
  const auto dims = c.dims();
  std::vector<double>& got = F::fp64_out(p.chunked);
  const std::vector<double>& want = F::fp64_out(p.recurrence);
  const double scale = max_abs(want);
  RC_PRE(scale > 0.0);
  const U e = *rc::gen::inRange<U>(0, got.size());
  got[e] = want[e] + 2.0 * kIdentityTol * scale;
  const Findings f = fp64_identity_findings(dims, p);
  RC_ASSERT(f.size() == 1u);
  RC_ASSERT(f[0].check == std::string(F::kOutputName) + ": chunked vs recurrence (FP64)");
  const U w = F::width(dims), hd = F::head_dim(dims);
  RC_ASSERT(
      contains(f[0].where, fmt::format("token {}, head {}, dim {}", e / w, e % w / hd, e % hd)));
}

// Twin of the judge property: a stored array of a run poisoned at one element (a kernel that
// skipped it) fails the check `check(e)` names for element e.
template <class F>
struct Poisonable {
  std::string name;
  std::function<std::string(U)> check;
  std::function<void(typename F::Run&, U)> poison;
  std::function<U(const typename F::Run&)> size;
};

// The array `get(run)` returns (for a const or a mutable run), its element e failing `check(e)`.
template <class F, class Get>
Poisonable<F> poisonable_via(const std::string& name, std::function<std::string(U)> check,
                             Get get) {
  return {name, std::move(check),
          [get](typename F::Run& r, U e) {
            auto& v = get(r);
            std::memset(&v[e], 0xFF, sizeof(v[e]));
          },
          [get](const typename F::Run& r) { return static_cast<U>(get(r).size()); }};
}

// A stored array of the run, every element failing the check named `check`.
template <class R, class T, class F = FamilyOf<R>>
Poisonable<F> poisonable(const std::string& check, std::vector<T> R::*array) {
  return poisonable_via<F>(
      check, [check](U) { return check; }, [array](auto& r) -> auto& { return r.*array; });
}

// Property body: one of `targets(c)` poisoned at a drawn element of a call of `c` fails its
// check there: as unwritten, or (the check `zero_tails`, entries past the sequence) with
// `zero_tail_reason`.
template <class Case, class Targets, class F = FamilyOf<Case>>
void stage_output_left_poisoned_fails(Backend& b, const Case& c, Targets targets_of,
                                      const std::string& zero_tails, const char* zero_tail_reason) {
  const auto in = F::inputs(c);
  Call<F> call = run_call(b, c, in);
  const std::vector<Poisonable<F>> targets = targets_of(c);
  const Poisonable<F>& p = *rc::gen::elementOf(targets);
  const U e = *rc::gen::inRange<U>(0, p.size(call.run));
  const std::string expected = p.check(e);
  RC_TAG(expected);
  RC_LOG() << "poisoned " << p.name << " element " << e << "\n";
  p.poison(call.run, e);
  const auto report = judge(call, in, c.seed, "planted");
  RC_LOG() << oracle::format_report(report);
  const auto names = failing_checks(report);
  RC_ASSERT(std::find(names.begin(), names.end(), expected) != names.end());
  const auto* bad = check_named(report, expected);
  RC_ASSERT(bad->first_bad.has_value());
  RC_ASSERT(
      contains(bad->first_bad->reason, expected == zero_tails ? zero_tail_reason : "unwritten"));
}

// Twin of the split property: the second part started from a zeroed conv tail (the carried tail
// dropped) differs from one pass in the core output after the split.
template <class Ranges, class F = FamilyOf<Ranges>>
void split_without_the_carried_conv_tail_differs(Backend& b, const Ranges& ranges) {
  const auto c = draw_split_case(ranges);
  const U at = draw_bit_identical_split(c);
  const auto in = F::inputs(c);
  const Call<F> whole = run_call(b, c, in);
  const std::vector<uint16_t> fresh(in.conv_state.size(), 0);
  const Findings f = split_bit_findings(c, whole, run_split(b, c, in, at, &fresh));
  log_findings(f);
  RC_ASSERT(has_finding(f, std::string(F::kOutputName) + ", tokens after the split"));
}

// Twin of the co-dispatch property: sequence 1 run alone with sequence 0's state and conv tail
// (a kernel indexing the per-sequence state with the wrong stream) differs from the
// co-dispatched run, on a case drawn from `ranges` whose starting state shows in the outputs.
template <class Ranges, class Compare, class F = FamilyOf<Ranges>>
void sequence_with_its_neighbours_state_differs(Backend& b, const Ranges& ranges,
                                                Compare findings) {
  using Case = typename F::Case;
  Case c = draw_codispatch_case(ranges);
  F::keep_the_state_visible(c);
  const auto dims = c.dims();
  const auto in = F::inputs(c);
  const Call<F> all = run_call(b, c, in);
  Case one = c;
  one.sequences = 1;
  auto wrong = F::sequence(dims, in, 1);
  const auto neighbour = F::sequence(dims, in, 0);
  wrong.state = neighbour.state;
  wrong.conv_state = neighbour.conv_state;
  const Findings f = findings(c, all, run_call(b, one.dims(), c.path, wrong), 1);
  log_findings(f);
  RC_ASSERT(has_finding(f, "final state (sequence 1)") ||
            has_finding(f, std::string(F::kOutputName) + " (sequence 1)"));
}

// A fixed case passes its judge on `clean` and, on `mutant` (the kernel mutant `name`), fails a
// check `caught(name)` accepts; either miss is reported with the case and the report.
template <class Case, class Caught, class F = FamilyOf<Case>>
void expect_mutant_caught(Backend& clean, Backend& mutant, const char* name, const Case& c,
                          Caught caught) {
  const auto in = F::inputs(c);
  const auto ok = judge(run_call(clean, c, in), in, c.seed);
  EXPECT_TRUE(ok.passed()) << c.describe() << "\n" << oracle::format_report(ok);
  const auto report = judge(run_call(mutant, c, in), in, c.seed, name);
  const auto names = failing_checks(report);
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), caught)) << c.describe() << "\n"
                                                               << oracle::format_report(report);
}

// ---- shared full-range bodies (tests/slow/numeric) -------------------------------------------

// Every stage of a call drawn from `ranges` passes the judge on `b` (tagged by path and whether
// it co-dispatches 8 or more sequences: `many`, else `few`).
template <class Ranges>
void stages_pass_the_judge(Backend& b, const Ranges& ranges, const char* many, const char* few) {
  const auto c = draw(ranges);
  RC_TAG(gen::to_string(c.path), c.sequences >= 8 ? many : few);
  call_passes_the_judge(b, c);
}

// Sequence s of a co-dispatched call (at least two, backend work up to 2^28) equals the same
// sequence alone: the core output, the normed output and the final state, bit for bit.
template <class Ranges, class F = FamilyOf<Ranges>>
void sequences_equal_each_alone(Backend& b, Ranges r) {
  r.cost_cap = uint64_t{1} << 28;
  auto c = draw(r);
  c.sequences = std::max<U>(c.sequences, 2);
  const auto dims = c.dims();
  const auto in = F::inputs(c);
  const Call<F> all = run_call(b, dims, c.path, in);
  const U w = F::width(dims), state = F::state_size(dims);
  for (U s = 0; s < c.sequences; ++s) {
    const Call<F> one =
        run_call(b, F::Dims::of(c.config, 1, c.L), c.path, F::sequence(dims, in, s));
    RC_LOG() << "sequence " << s << "\n";
    RC_ASSERT(same_bits(rows_of(F::output(all.run), s * c.L, c.L, w),
                        std::span<const uint16_t>(F::output(one.run))));
    RC_ASSERT(same_bits(rows_of(all.run.normed, s * c.L, c.L, w),
                        std::span<const uint16_t>(one.run.normed)));
    RC_ASSERT(
        same_bits(rows_of(all.run.state, s, 1, state), std::span<const float>(one.run.state)));
  }
}

// One long sequence (up to 2^28, L > 64) split where draw_bit_identical_split puts it: the core
// output after the split and the final state equal one pass, bit for bit.
template <class Ranges, class F = FamilyOf<Ranges>>
void long_split_is_bit_identical(Backend& b, Ranges r) {
  r.cost_cap = uint64_t{1} << 28;
  r.many_streams = false;
  auto c = draw(r);
  c.sequences = 1;
  if (c.L <= kChunk) c.L += kChunk;
  const U at = draw_bit_identical_split(c);
  RC_LOG() << "split at " << at << "\n";
  const auto in = F::inputs(c);
  const Call<F> whole = run_call(b, c.dims(), c.path, in);
  const Split<F> s = run_split(b, c, in, at);
  const U w = F::width(c.dims());
  RC_ASSERT(same_bits(rows_of(F::output(whole.run), at, c.L - at, w),
                      std::span<const uint16_t>(F::output(s.second.run))));
  RC_ASSERT(same_bits(std::span<const float>(whole.run.state),
                      std::span<const float>(s.second.run.state)));
}

}  // namespace bufferlab::testing::gdn_mamba2
