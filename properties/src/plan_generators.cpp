// Generators of launchable passes, paths and whole fuzz cases (see plan_generators.h).
#include "bufferlab/properties/plan_generators.h"

#include <algorithm>
#include <set>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/properties/generators.h"

namespace bufferlab {
namespace plan {

void showValue(const Pass& pass, std::ostream& os) { os << pass.to_string(); }
void showValue(const Paths& paths, std::ostream& os) { os << paths.to_string(); }

}  // namespace plan

namespace fuzz {

void showValue(const FuzzCase& c, std::ostream& os) {
  os << case_to_json(c, Sizing::corrected()).dump();
}

}  // namespace fuzz

namespace gen {
namespace {

using plan::Pass;
using plan::PassKind;

constexpr uint64_t kRungs[] = {2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
constexpr uint64_t kVerifyRowCap = 160;  // docs/spec/buffers.md §2 VERIFY_ROW_CAP

// A value in [lo, hi]; shrinks towards lo.
uint64_t in(uint64_t lo, uint64_t hi) { return *rc::gen::inRange<uint64_t>(lo, hi + 1); }

uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi) { return std::min(std::max(v, lo), hi); }

// A value at or next to a multiple of `unit` inside [1, hi] (hi ≥ 1).
uint64_t near_multiple(uint64_t unit, uint64_t hi) {
  const uint64_t k = in(1, std::max<uint64_t>(hi / unit, 1));
  const int d = *rc::gen::element(0, -1, 1);
  return clamp(k * unit + static_cast<uint64_t>(d), 1, hi);
}

// A row count in [1, hi] biased to the boundaries sizing bugs live at: hi itself, hi − 1,
// multiples of 16 and 64 and their neighbours, small values. Shrinks towards a uniform draw
// and then towards 1.
uint64_t boundary_value(uint64_t hi) {
  switch (*rc::gen::inRange(0, 6)) {
    case 0:
      return in(1, hi);
    case 1:
      return hi;
    case 2:
      return hi > 1 ? hi - 1 : 1;
    case 3:
      return near_multiple(16, hi);
    case 4:
      return near_multiple(64, hi);
    default:
      return in(1, std::min<uint64_t>(hi, 130));
  }
}

// The largest n ≤ limit with rung(n) + extra ≤ m, or 0 when there is none. rung(n) − n is
// at most 32 below 128 and 0 above, so the scan is short.
uint64_t largest_n(uint64_t limit, uint64_t m, uint64_t extra) {
  for (uint64_t n = std::min(limit, m); n >= 1; --n)
    if (padded_batch_rung(n) + extra <= m) return n;
  return 0;
}

// A live-sequence count in [1, nmax]: uniform, nmax, or at/next to a rung.
uint64_t batch_n(uint64_t nmax) {
  std::vector<uint64_t> edges;
  for (uint64_t r : kRungs)
    for (uint64_t v : {r - 1, r, r + 1})
      if (v >= 1 && v <= nmax) edges.push_back(v);
  switch (*rc::gen::inRange(0, 3)) {
    case 0:
      return in(1, nmax);
    case 1:
      return nmax;
    default:
      return edges.empty() ? nmax : *rc::gen::elementOf(edges);
  }
}

}  // namespace

rc::Gen<RunShape> plan_run_shape() {
  return rc::gen::exec([] {
    RunShape s = *run_shape();
    // m % 16 ≠ 0 with a small m (B4, B15 live there).
    if (*rc::gen::inRange(0, 4) == 0) s.max_batch_tokens = 16 * in(0, 600) + in(1, 15);
    // max_batch_size between rungs above 32 (B9 lives there).
    if (*rc::gen::inRange(0, 4) == 0)
      s.max_batch_size = *rc::gen::element<uint64_t>(33, 36, 47, 49, 63, 65, 95, 97, 127, 129);
    return s;
  });
}

bool can_launch(PassKind kind, const RunShape& s) {
  const uint64_t m = s.max_batch_tokens;
  switch (kind) {
    case PassKind::prefill:
    case PassKind::verify:
      return m >= 1;
    case PassKind::decode:
      return largest_n(s.max_batch_size, m, 0) >= 1;
    case PassKind::mixed:
      return largest_n(s.max_batch_size, m, 1) >= 1;
    case PassKind::codispatch:
      return m >= 2;
  }
  return false;
}

rc::Gen<Pass> prefill_pass(const RunShape& shape) {
  const uint64_t m = shape.max_batch_tokens;
  return rc::gen::exec([m] { return Pass::prefill(boundary_value(m)); });
}

rc::Gen<Pass> decode_pass(const RunShape& shape) {
  const uint64_t nmax = largest_n(shape.max_batch_size, shape.max_batch_tokens, 0);
  return rc::gen::exec([nmax] { return Pass::decode(batch_n(nmax)); });
}

rc::Gen<Pass> verify_pass(const RunShape& shape) {
  const uint64_t vmax = std::min<uint64_t>(kVerifyRowCap, shape.max_batch_tokens);
  return rc::gen::exec([vmax] {
    std::set<uint64_t> edges = {1, 2, vmax, vmax - 1};
    for (uint64_t e : {15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 159})
      edges.insert(e);
    std::vector<uint64_t> valid;
    for (uint64_t e : edges)
      if (e >= 1 && e <= vmax) valid.push_back(e);
    const uint64_t rows = *rc::gen::arbitrary<bool>() ? in(1, vmax) : *rc::gen::elementOf(valid);
    return Pass::verify(rows);
  });
}

rc::Gen<Pass> mixed_pass(const RunShape& shape) {
  const uint64_t m = shape.max_batch_tokens;
  const uint64_t nmax = largest_n(shape.max_batch_size, m, 1);
  return rc::gen::exec([m, nmax] {
    const uint64_t n = batch_n(nmax);
    const uint64_t tmax = m - padded_batch_rung(n);
    uint64_t t = boundary_value(tmax);
    if (*rc::gen::inRange(0, 4) == 0)
      t = clamp(*rc::gen::element<uint64_t>(1, 16, 64, 65), 1, tmax);
    return Pass::mixed(n, t);
  });
}

rc::Gen<Pass> codispatch_pass(const RunShape& shape) {
  const uint64_t m = shape.max_batch_tokens;
  return rc::gen::exec([m] {
    const uint64_t n = in(2, std::min<uint64_t>(8, m));
    const uint64_t Lmax = m / n;
    uint64_t L = boundary_value(Lmax);
    if (*rc::gen::inRange(0, 4) == 0)
      L = clamp(*rc::gen::element<uint64_t>(1, 63, 64, 65), 1, Lmax);
    return Pass::codispatch(n, L);
  });
}

rc::Gen<Pass> pass_of_kind(PassKind kind, const RunShape& shape) {
  switch (kind) {
    case PassKind::prefill:
      return prefill_pass(shape);
    case PassKind::decode:
      return decode_pass(shape);
    case PassKind::verify:
      return verify_pass(shape);
    case PassKind::mixed:
      return mixed_pass(shape);
    case PassKind::codispatch:
      return codispatch_pass(shape);
  }
  return prefill_pass(shape);
}

rc::Gen<Pass> launchable_pass(const RunShape& shape, const std::vector<PassKind>& kinds) {
  std::vector<PassKind> ok;
  for (PassKind k : kinds.empty() ? plan::all_pass_kinds() : kinds)
    if (can_launch(k, shape)) ok.push_back(k);
  if (ok.empty()) return prefill_pass(shape);
  return rc::gen::exec([ok, shape] {
    const PassKind kind = *rc::gen::elementOf(ok);
    return *pass_of_kind(kind, shape);
  });
}

rc::Gen<plan::Paths> paths(const ModelConfig& config, const Target& target) {
  return rc::gen::elementOf(plan::all_paths(config, target));
}

rc::Gen<fuzz::FuzzCase> fuzz_case(const CaseSpace& space) {
  const auto& known = family_names();
  for (const auto& f : space.families)
    if (std::find(known.begin(), known.end(), f) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error("unknown family '" + f + "' (known: " + list + ")");
    }
  const std::vector<std::string> families = space.families.empty() ? known : space.families;
  return rc::gen::exec([space, families] {
    fuzz::FuzzCase c;
    c.family = *rc::gen::elementOf(families);
    c.config = *config_of_family(c.family);
    c.shape = *plan_run_shape();
    // A run restricted to some pass kinds gets one of them: m < 3 cannot launch a mixed step
    // (decode and co-dispatch need m ≥ 2), so such an m is raised to 3. Shrinking then
    // cannot wander from a co-dispatch finding to a prefill one either.
    if (!space.pass_kinds.empty() &&
        std::none_of(space.pass_kinds.begin(), space.pass_kinds.end(),
                     [&](plan::PassKind k) { return can_launch(k, c.shape); }))
      c.shape.max_batch_tokens = 3;
    c.target = space.target;
    if (space.vary_target && *rc::gen::arbitrary<bool>()) c.target = *target();
    // Q2 switches the caller turned on stay on: they select the paths it asked for.
    c.target.q2_dequant = c.target.q2_dequant || space.target.q2_dequant;
    c.target.q2_mmq = c.target.q2_mmq || space.target.q2_mmq;
    c.pass = *launchable_pass(c.shape, space.pass_kinds);
    c.paths = *paths(c.config, c.target);
    return c;
  });
}

}  // namespace gen
}  // namespace bufferlab
