// The mHC case generator: dimensions drawn small or up to the ranges, then halved under the
// cost cap (mhc_op_cost, documented in the header).
#include "bufferlab/properties/mhc_generators.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/checked.h"

namespace bufferlab::gen {
namespace {

using U = uint64_t;

constexpr U kSplitMaxRows = MhcSplitCarve::kMaxRows;  // docs/spec/numerics.md §4 (core ops/mhc.h)

// Log-uniform in [min, max]: an octave [2^e, 2^(e+1)) first, then a value in it.
U log_uniform(U min, U max) {
  min = std::clamp<U>(min, 1, max);
  const int bottom = std::bit_width(min) - 1, top = std::bit_width(max) - 1;
  const int e = *rc::gen::inRange(bottom, top + 1);
  const U lo = std::max(min, U{1} << e);
  const U hi = std::min(max, (U{1} << e << 1) - 1);
  return *rc::gen::inRange<U>(lo, hi + 1);
}

// Mostly small values (the shapes that exercise edges and keep the average case cheap),
// otherwise log-uniform up to max.
U small_or_up_to(U min, U small, U max) {
  return *rc::gen::arbitrary<bool>() ? log_uniform(min, std::max(min, std::min(small, max)))
                                     : log_uniform(min, max);
}

// A favoured value (clamped to max) or any value up to max.
U favoured_or_up_to(std::initializer_list<U> favoured, U max) {
  const std::vector<U> values(favoured);
  return std::min(max,
                  *rc::gen::oneOf(rc::gen::elementOf(values), rc::gen::inRange<U>(1, max + 1)));
}

U draw_rows(const MhcRanges& r) {
  const U lo = r.min_rows, hi = std::max(r.min_rows, r.max_rows);
  U rows = *rc::gen::oneOf(rc::gen::inRange<U>(lo, std::min(hi, lo + 8) + 1),
                           rc::gen::inRange<U>(lo, hi + 1));
  if (r.slab_boundary && *rc::gen::element(false, false, true)) {
    const U boundary = *rc::gen::element(U{2049}, U{2048}, U{4097});
    if (boundary >= lo && boundary <= hi) rows = boundary;
  }
  return rows;
}

// L in [0.01, 60]: the spec's frontier ranges, or log-uniform between.
double draw_logit_range() {
  if (*rc::gen::arbitrary<bool>()) return *rc::gen::element(4.0, 0.01, 1.0, 20.0, 60.0);
  return 0.01 * std::pow(6000.0, *rc::gen::inRange(0, 1001) / 1000.0);
}

oracle::MhcInputProfile draw_profile(MhcOpKind kind, U rows, U hc, U h) {
  using M = oracle::MhcStreamMagnitude;
  oracle::MhcInputProfile p;
  p.magnitude = *rc::gen::element(M::normal, M::normal, M::normal, M::zero, M::huge);
  p.scale = std::ldexp(1.0, *rc::gen::inRange(-8, 9));
  p.logit_range = draw_logit_range();
  if (kind == MhcOpKind::expand || !*rc::gen::element(false, false, false, false, true)) return p;
  const int n = *rc::gen::inRange(1, 4);
  for (int k = 0; k < n; ++k) {
    oracle::MhcNonFinite bad;
    bad.token = *rc::gen::inRange<U>(0, rows);
    bad.stream = *rc::gen::inRange<U>(0, hc);
    bad.dim = *rc::gen::inRange<U>(0, h);
    bad.value = *rc::gen::element(std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity());
    p.nonfinite.push_back(bad);
  }
  return p;
}

// Halves the larger of h and r (r only in the low-rank form), then rows (down to min_rows),
// until the case's cost fits the cap.
void fit_cost(MhcCase& c, const MhcRanges& r) {
  ModelConfig& m = c.config;
  const bool lowrank = c.kind == MhcOpKind::lowrank;
  while (c.cost() > r.cost_cap) {
    if (lowrank && m.hc_lowrank > 1 && m.hc_lowrank >= m.hidden_size)
      m.hc_lowrank /= 2;
    else if (m.hidden_size > 1)
      m.hidden_size /= 2;
    else if (c.rows > r.min_rows)
      c.rows = std::max(r.min_rows, c.rows / 2);
    else
      return;  // hc alone over the cap: the ranges are inconsistent
  }
}

}  // namespace

const char* to_string(MhcOpKind k) {
  switch (k) {
    case MhcOpKind::pre:
      return "pre";
    case MhcOpKind::post:
      return "post";
    case MhcOpKind::head:
      return "head";
    case MhcOpKind::expand:
      return "expand";
    case MhcOpKind::lowrank:
      return "lowrank";
  }
  return "?";
}

uint64_t mhc_op_cost(MhcOpKind kind, uint64_t rows, uint64_t hc, uint64_t h, uint64_t r) {
  const Size th = Size(rows) * hc * h;
  switch (kind) {
    case MhcOpKind::pre:
      return (th * hc * (Size(hc) + 2)).value();
    case MhcOpKind::post:
      return (th * (Size(hc) + 1)).value();
    case MhcOpKind::head:
      return (th * hc).value();
    case MhcOpKind::expand:
      return th.value();
    case MhcOpKind::lowrank:
      return (th * (Size(r) * 2 + hc)).value();
  }
  return 0;
}

MhcRanges ci_mhc_ranges() { return {}; }

MhcRanges full_mhc_ranges() {
  MhcRanges r;
  r.max_hidden = 7168;
  r.max_rows = 4097;
  r.cost_cap = uint64_t{1} << 28;
  r.slab_boundary = true;
  return r;
}

oracle::MhcLowRankDims MhcCase::lowrank_dims() const {
  return {rows, hc(), h(), r(), config.rms_norm_eps};
}

std::string MhcCase::describe() const {
  std::string bad;
  for (const auto& b : profile.nonfinite)
    bad += fmt::format("{}({},{},{})", bad.empty() ? "" : ",", b.token, b.stream, b.dim) +
           fmt::format("={}", b.value);
  static constexpr const char* kMagnitude[] = {"normal", "zero", "huge"};
  return fmt::format(
      "kind={} rows={} hc={} h={} r={} path={} iters={} hc_eps={} rms_eps={} streams={} "
      "scale=2^{} logit_range={} nonfinite=[{}] seed={}",
      to_string(kind), rows, hc(), h(), r(), r() > 0 ? oracle::to_string(path) : "-",
      config.hc_sinkhorn_iters, config.hc_eps, config.rms_norm_eps,
      kMagnitude[static_cast<int>(profile.magnitude)], std::ilogb(profile.scale),
      profile.logit_range, bad, seed);
}

void showValue(const MhcCase& c, std::ostream& os) { os << c.describe(); }

rc::Gen<MhcCase> hc_case(MhcOpKind kind, const MhcRanges& r) {
  return rc::gen::exec([kind, r] {
    MhcCase c;
    c.kind = kind;
    ModelConfig& m = c.config;
    m.vocab_size = 16;
    m.hc_mult = favoured_or_up_to({4, 1, 2, 16}, r.max_mhc);
    m.hidden_size = small_or_up_to(r.min_hidden, 64, r.max_hidden);
    c.rows = draw_rows(r);
    const bool lowrank =
        kind == MhcOpKind::lowrank || (kind == MhcOpKind::post && *rc::gen::element(0, 0, 1) == 1);
    if (lowrank)
      m.hc_lowrank = *rc::gen::element(false, false, false, false, false, false, false, true)
                         ? r.max_lowrank
                         : small_or_up_to(1, 64, r.max_lowrank);
    m.hc_sinkhorn_iters = favoured_or_up_to({20, 1, 2, 50}, r.max_iters);
    m.hc_eps = *rc::gen::element(1e-6, 0.0);
    m.rms_norm_eps = 1e-6;
    fit_cost(c, r);
    if (kind == MhcOpKind::lowrank)
      c.path = c.rows > kSplitMaxRows
                   ? oracle::MhcLowRankPath::slab
                   : *rc::gen::element(oracle::MhcLowRankPath::split, oracle::MhcLowRankPath::slab);
    c.profile = draw_profile(kind, c.rows, m.hc_mult, m.hidden_size);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    return c;
  });
}

oracle::MhcPreInputs mhc_pre_inputs(const MhcCase& c) {
  return oracle::generate_mhc_pre_inputs(MhcPreOp::make(c.config, c.rows), c.seed, c.profile);
}

oracle::MhcPostInputs mhc_post_inputs(const MhcCase& c) {
  return oracle::generate_mhc_post_inputs(MhcPostOp::make(c.config, c.rows), c.seed, c.profile);
}

oracle::MhcHeadInputs mhc_head_inputs(const MhcCase& c) {
  return oracle::generate_mhc_head_inputs(MhcHeadOp::make(c.config, c.rows), c.seed, c.profile);
}

std::vector<uint16_t> mhc_expand_input(const MhcCase& c) {
  return oracle::generate_mhc_expand_input(MhcExpandOp::make(c.config, c.rows), c.seed);
}

oracle::MhcLowRankInputs mhc_lowrank_inputs(const MhcCase& c) {
  return oracle::generate_mhc_lowrank_inputs(c.lowrank_dims(), c.seed, c.profile);
}

}  // namespace bufferlab::gen
