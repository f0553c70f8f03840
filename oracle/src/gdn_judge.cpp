// Per-stage judgement of one GDN call against the faithful oracle fed the backend's own stored
// inputs (docs/spec/numerics.md §9), under the derived bounds of gdn_bounds.cpp.
#include "bufferlab/oracle/gdn_judge.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/gdn_stages.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace gdn_detail {
namespace {

// Names the first bad element of a [rows, cols] comparison in the call's coordinates (Where,
// located: oracle_common.h).
struct Coordinates {
  GdnGeometry g;
  ChunkGrid grid;
  explicit Coordinates(const GdnDims& d) : g(d.geom), grid(d) {}

  std::string channel(uint64_t c) const {
    const uint64_t qk = g.nk * g.kd;
    if (c < qk) return fmt::format("q head {}, dim {}", c / g.kd, c % g.kd);
    if (c < 2 * qk) return fmt::format("k head {}, dim {}", (c - qk) / g.kd, (c - qk) % g.kd);
    return fmt::format("v head {}, dim {}", (c - 2 * qk) / g.vd, (c - 2 * qk) % g.vd);
  }
  // Region r = (b·cps + c)·nv + v, row i of it.
  std::string region_row(uint64_t r, uint64_t i) const {
    const uint64_t b = r / (grid.cps * grid.nv), c = (r / grid.nv) % grid.cps, v = r % grid.nv;
    if (i >= grid.rows_in(c))
      return fmt::format("sequence {}, chunk {}, head {}, row {} past the chunk's end", b, c, v, i);
    return fmt::format("token {}, head {} (sequence {}, chunk {}, row {})", grid.token(b, c, i), v,
                       b, c, i);
  }

  Where token_head_dim() const {
    return [vd = g.vd](uint64_t t, uint64_t col) {
      return fmt::format("token {}, head {}, dim {}", t, col / vd, col % vd);
    };
  }
  Where conv() const {
    return [this](uint64_t t, uint64_t c) { return fmt::format("token {}, {}", t, channel(c)); };
  }
  Where conv_tail() const {
    return [this](uint64_t row, uint64_t s) {
      return fmt::format("sequence {}, {}, slot {}", row / g.conv_dim, channel(row % g.conv_dim),
                         s);
    };
  }
  Where gates() const {
    return [](uint64_t t, uint64_t col) {
      return fmt::format("token {}, head {}, {}", t, col / 2, col % 2 == 0 ? "beta" : "alpha");
    };
  }
  Where gc() const {
    return [this](uint64_t r, uint64_t i) { return region_row(r, i); };
  }
  // W, U, uc: [regions·64, width].
  Where chunk_rows() const {
    return [this](uint64_t row, uint64_t col) {
      return fmt::format("{}, dim {}", region_row(row / kChunk, row % kChunk), col);
    };
  }
  // S: [regions·kd, vd].
  Where snapshots() const {
    return [this](uint64_t row, uint64_t col) {
      const uint64_t r = row / g.kd, j = row % g.kd;
      const uint64_t b = r / (grid.cps * grid.nv), c = (r / grid.nv) % grid.cps, v = r % grid.nv;
      return fmt::format("sequence {}, chunk {} entry, head {}, k-dim {}, v-dim {}", b, c, v, j,
                         col);
    };
  }
  // State: [sequences·nv·kd, vd].
  Where state() const {
    return [this](uint64_t row, uint64_t col) {
      return fmt::format("sequence {}, head {}, k-dim {}, v-dim {}", row / (g.nv * g.kd),
                         (row / g.kd) % g.nv, row % g.kd, col);
    };
  }
};

// Valid rows of the region arrays (rows past a partial chunk's end are checked on their own).
std::vector<uint8_t> valid_rows(const ChunkGrid& grid, uint64_t width) {
  std::vector<uint8_t> mask(grid.regions() * kChunk * width, 0);
  for (uint64_t r = 0; r < grid.regions(); ++r) {
    const uint64_t n = grid.rows_in((r / grid.nv) % grid.cps);
    std::fill(mask.begin() + static_cast<std::ptrdiff_t>(r * kChunk * width),
              mask.begin() + static_cast<std::ptrdiff_t>((r * kChunk + n) * width), 1);
  }
  return mask;
}

class Judge {
 public:
  Judge(AgreementReport& r, std::vector<GdnCheckSlack>* slack) : r_(r), slack_(slack) {}

  void bf16(std::string name, std::span<const uint16_t> got, const std::vector<double>& want,
            uint64_t cols, const StageBounds& b, const Where& where,
            std::span<const uint8_t> mask = {}) {
    record(name, widen_bf16_bits(got), want, b.bound, mask);
    r_.checks.push_back(located(compare_bf16_bounded(std::move(name), got, want, cols,
                                                     ElementBounds{b.bound, mask, b.formula}),
                                where));
  }
  void f32(std::string name, std::span<const float> got, const std::vector<double>& want,
           uint64_t cols, const StageBounds& b, const Where& where,
           std::span<const uint8_t> mask = {}) {
    record(name, widen_f32(got), want, b.bound, mask);
    r_.checks.push_back(located(compare_f32_bounded(std::move(name), got, want, cols,
                                                    ElementBounds{b.bound, mask, b.formula}),
                                where));
  }
  // What a stage read equals what the previous stage stored, bit for bit (NaN meets NaN).
  template <class T>
  void intact(std::string name, const std::vector<T>& stored, const std::vector<T>& read,
              uint64_t cols, const Where& where) {
    Tolerance exact;
    exact.formula = "exact: the stage reads what the previous stage stored";
    if constexpr (sizeof(T) == 2)
      r_.checks.push_back(located(
          compare_bf16(std::move(name), read, widen_bf16_bits(stored), cols, exact), where));
    else
      r_.checks.push_back(
          located(compare_f32(std::move(name), read, widen_f32(stored), cols, exact), where));
  }
  void push(TensorComparison c) { r_.checks.push_back(std::move(c)); }

 private:
  void record(const std::string& name, const std::vector<double>& got,
              const std::vector<double>& want, const std::vector<double>& bound,
              std::span<const uint8_t> mask) {
    if (slack_ == nullptr || got.size() != want.size() || bound.size() != want.size()) return;
    GdnCheckSlack s{name, INFINITY, 0.0, 0.0};
    for (size_t i = 0; i < got.size(); ++i) {
      if ((!mask.empty() && mask[i] == 0) || !std::isfinite(got[i]) || !std::isfinite(want[i]))
        continue;
      const double err = std::fabs(got[i] - want[i]);
      s.max_err = std::max(s.max_err, err);
      if (std::isfinite(bound[i])) s.max_bound = std::max(s.max_bound, bound[i]);
      if (err > 0.0) s.min_ratio = std::min(s.min_ratio, bound[i] / err);
    }
    slack_->push_back(std::move(s));
  }

  AgreementReport& r_;
  std::vector<GdnCheckSlack>* slack_;
};

// Rows past the end of a partial last chunk hold exactly 0 in W, U, uc and gc (ops/gdn.h).
TensorComparison zero_tails(const ChunkGrid& grid, const GdnGeometry& g, const GdnRun& run,
                            const Coordinates& xy) {
  TensorComparison c;
  c.name = "partial-chunk tails zero (W, U, uc, gc)";
  c.dtype = "bf16";
  c.rows = grid.regions();
  c.cols = kChunk;
  c.tol.formula = "exact: rows past a partial chunk's end are written as 0";
  auto check = [&](const char* array, uint64_t r, uint64_t i, uint64_t dim, double v,
                   uint64_t bits) {
    if (v == 0.0) return;
    ++c.failures;
    if (!c.first_bad)
      c.first_bad = Mismatch{r,
                             i,
                             v,
                             0.0,
                             bits,
                             fmt::format("{} holds {} (bits {:#x}), not 0, at ({}, dim {})", array,
                                         v, bits, xy.region_row(r, i), dim)};
  };
  auto bf = [](uint16_t b) { return static_cast<double>(bf16_bits_to_f32(b)); };
  for (uint64_t r = 0; r < grid.regions(); ++r) {
    const uint64_t n = grid.rows_in((r / grid.nv) % grid.cps);
    for (uint64_t i = n; i < kChunk; ++i) {
      for (uint64_t j = 0; j < g.kd; ++j) {
        const uint16_t b = run.W[(r * kChunk + i) * g.kd + j];
        check("W", r, i, j, bf(b), b);
      }
      for (uint64_t j = 0; j < g.vd; ++j) {
        const uint16_t bu = run.U[(r * kChunk + i) * g.vd + j];
        check("U", r, i, j, bf(bu), bu);
        const uint16_t bc = run.uc[(r * kChunk + i) * g.vd + j];
        check("uc", r, i, j, bf(bc), bc);
      }
      const float f = run.gc[r * kChunk + i];
      check("gc", r, i, 0, f, std::bit_cast<uint32_t>(f));
    }
  }
  return c;
}

std::string call_params(const GdnPlan& p) {
  const GdnDims& d = p.dims;
  std::string s = fmt::format("gdn_{}(sequences={},L={},{}",
                              p.path == GdnPath::chunked ? "chunked" : "recurrent", d.sequences,
                              d.L, d.geom.to_string());
  if (p.path == GdnPath::chunked) s += fmt::format(",nt={}", p.chunk.at(0).carve.nt);
  return s + ")";
}

void require_run(const GdnPlan& p, const GdnRun& run) {
  const GdnDims& d = p.dims;
  const GdnGeometry& g = d.geom;
  require_size("run conv", run.conv.size(), mul(d.rows(), g.conv_dim));
  require_size("run gates", run.gates.size(), mul(d.rows(), 2 * g.nv));
  require_size("run core", run.core.size(), mul(d.rows(), g.value_dim));
  require_size("run normed", run.normed.size(), mul(d.rows(), g.value_dim));
  require_size("run state", run.state.size(), run.state_in.size());
  if (run.path != p.path) throw Error("judge_gdn: the run took the other path than the plan");
  if (p.path != GdnPath::chunked) return;
  const ChunkGrid grid(d);
  const uint64_t regions = grid.regions();
  require_size("run W", run.W.size(), mul(regions, kChunk * g.kd));
  require_size("run U", run.U.size(), mul(regions, kChunk * g.vd));
  require_size("run uc", run.uc.size(), mul(regions, kChunk * g.vd));
  require_size("run S", run.S.size(), mul(regions, g.kd * g.vd));
  require_size("run gc", run.gc.size(), mul(regions, kChunk));
}

// conv1d and its tail, from the uploaded inputs.
void judge_conv(const GdnDims& d, const GdnInputs& in, const GdnRun& run, const BoundModel& bm,
                Judge& j) {
  const GdnGeometry& g = d.geom;
  const Coordinates xy(d);
  const ConvRef conv = conv_stage(d, in.deint, in.conv_w, in.conv_state);
  j.f32("conv1d (ssm_conv_out_f32)", run.conv, conv.out, g.conv_dim,
        conv_bounds(d, in.deint, in.conv_w, in.conv_state, conv, bm), xy.conv());
  Tolerance exact;
  exact.formula = "exact: the last K-1 BF16 inputs of each sequence";
  j.push(located(compare_bf16("conv tail state", run.conv_state, conv.tail, g.kernel - 1, exact),
                 xy.conv_tail()));
}

// gates, from the uploaded ba, A_log, dt_bias.
void judge_gates(const GdnDims& d, const GdnInputs& in, const GdnRun& run, const BoundModel& bm,
                 Judge& j) {
  const std::vector<double> gates = gates_stage(d, in.ba, in.a_log, in.dt_bias);
  j.f32("gates (beta, alpha)", run.gates, gates, 2 * d.geom.nv,
        gates_bounds(d, in.ba, in.a_log, in.dt_bias, gates, bm), Coordinates(d).gates());
}

// The chunked core (wu, state, output) or the recurrence, every stage on what it read: the
// STORED conv and gates.
void judge_core(const GdnDims& d, const GdnRun& run, const BoundModel& bm, Judge& j) {
  const GdnGeometry& g = d.geom;
  const Coordinates xy(d);
  const std::vector<double> s_conv = widen_f32(run.conv), s_gates = widen_f32(run.gates);
  const std::vector<double> state_in = widen_f32(run.state_in);
  const Qk qk = normalise_qk(d, s_conv);
  const uint64_t width = g.value_dim;

  if (run.path == GdnPath::chunked) {
    const ChunkGrid grid(d);
    // wu: gc from the stored gates; W, U from the stored conv, gates and the STORED gc, so an
    // error of gc is judged once, in "gc (wu)".
    j.f32("gc (wu)", run.gc, gc_stage(d, s_gates), kChunk, gc_bounds(d, s_gates, bm), xy.gc(),
          valid_rows(grid, 1));
    const std::vector<double> s_gc = widen_f32(run.gc);
    const Wu wu = wu_stage(d, qk, s_conv, s_gates, s_gc);
    const WuBounds wb = wu_bounds(d, qk, s_conv, s_gates, s_gc, wu, bm);
    j.bf16("W (wu)", run.W, rounded_bf16(wu.W), g.kd, wb.W, xy.chunk_rows(),
           valid_rows(grid, g.kd));
    j.bf16("U (wu)", run.U, rounded_bf16(wu.U), g.vd, wb.U, xy.chunk_rows(),
           valid_rows(grid, g.vd));

    // state pass on what it read; the oracle's carry continues from the backend's stored uc.
    j.intact("W intact (state input)", run.W, run.W_before_state, g.kd, xy.chunk_rows());
    j.intact("U intact (state input)", run.U, run.U_before_state, g.vd, xy.chunk_rows());
    j.intact("gc intact (state input)", run.gc, run.gc_before_state, kChunk, xy.gc());
    const std::vector<double> in_W = widen_bf16_bits(run.W_before_state);
    const std::vector<double> in_U = widen_bf16_bits(run.U_before_state);
    const std::vector<double> in_gc = widen_f32(run.gc_before_state);
    const std::vector<double> s_uc = widen_bf16_bits(run.uc);
    const StatePass pass = state_stage(d, qk, in_W, in_U, in_gc, state_in, Carry::given, s_uc);
    const StateBounds sb = state_bounds(d, qk, in_W, in_U, in_gc, s_uc, pass, bm);
    j.bf16("S snapshots (state)", run.S, rounded_bf16(pass.S), g.vd, sb.S, xy.snapshots());
    j.bf16("uc (state)", run.uc, rounded_bf16(pass.uc), g.vd, sb.uc, xy.chunk_rows(),
           valid_rows(grid, g.vd));
    j.f32("final state (state)", run.state, pass.state, g.vd, sb.state, xy.state());

    // output stage on what it read.
    j.intact("S intact (output input)", run.S, run.S_before_output, g.vd, xy.snapshots());
    j.intact("uc intact (output input)", run.uc, run.uc_before_output, g.vd, xy.chunk_rows());
    j.intact("gc intact (output input)", run.gc, run.gc_before_output, kChunk, xy.gc());
    const std::vector<double> o_S = widen_bf16_bits(run.S_before_output);
    const std::vector<double> o_uc = widen_bf16_bits(run.uc_before_output);
    const std::vector<double> o_gc = widen_f32(run.gc_before_output);
    const std::vector<double> out = output_stage(d, qk, o_S, o_uc, o_gc);
    j.bf16("core output (output)", run.core, rounded_bf16(out), width,
           output_bounds(d, qk, o_S, o_uc, o_gc, out, bm), xy.token_head_dim());
    j.push(zero_tails(grid, g, run, xy));
  } else {
    const Recurrence rec = recurrence_stage(d, qk, s_conv, s_gates, state_in);
    const RecurrenceBounds rb = recurrence_bounds(d, qk, s_conv, s_gates, state_in, bm);
    j.bf16("core output (recurrence)", run.core, rounded_bf16(rec.o), width, rb.o,
           xy.token_head_dim());
    j.f32("final state (recurrence)", run.state, rec.state, g.vd, rb.state, xy.state());
  }
}

// gated norm on the stored core output.
void judge_norm(const GdnDims& d, const GdnInputs& in, const GdnRun& run, const BoundModel& bm,
                Judge& j) {
  const std::vector<double> core = widen_bf16_bits(run.core);
  const std::vector<double> normed = gated_norm_stage(d, core, in.deint, in.norm_w);
  j.bf16("gated norm (attn_output)", run.normed, rounded_bf16(normed), d.geom.value_dim,
         gated_norm_bounds(d, core, in.norm_w, normed, bm), Coordinates(d).token_head_dim());
}

}  // namespace
}  // namespace gdn_detail

void judge_gdn_stage(GdnStageGroup stage, const GdnDims& dims, const GdnInputs& in,
                     const GdnRun& run, const BoundModel& bm, AgreementReport& r) {
  using namespace gdn_detail;
  Judge j(r, nullptr);
  switch (stage) {
    case GdnStageGroup::conv:
      return judge_conv(dims, in, run, bm, j);
    case GdnStageGroup::gates:
      return judge_gates(dims, in, run, bm, j);
    case GdnStageGroup::core:
      return judge_core(dims, run, bm, j);
    case GdnStageGroup::norm:
      return judge_norm(dims, in, run, bm, j);
  }
}

AgreementReport judge_gdn(const GdnPlan& plan, const GdnInputs& in, const GdnRun& run,
                          const std::string& backend, uint64_t seed, const BoundModel& bm,
                          std::vector<GdnCheckSlack>* slack) {
  using namespace gdn_detail;
  const GdnDims& d = plan.dims;
  const GdnGeometry& g = d.geom;
  require_run(plan, run);
  AgreementReport r{"gdn", call_params(plan), backend, seed, {}, {}};
  Judge j(r, slack);
  judge_conv(d, in, run, bm, j);
  judge_gates(d, in, run, bm, j);
  judge_core(d, run, bm, j);
  judge_norm(d, in, run, bm, j);
  const uint64_t width = g.value_dim;

  // Reported, never asserted: the whole call against the faithful reference from the original
  // inputs, and the faithful reference against the exact one.
  const GdnReference faithful = gdn_reference(d, in, Mode::faithful);
  const GdnReference exact_ref = gdn_reference(d, in, Mode::exact);
  r.reported.push_back(compare_bf16("whole call vs faithful (attn_output)", run.normed,
                                    faithful.normed, width, Tolerance{}, false));
  r.reported.push_back(compare_f32("whole call vs faithful (final state)", run.state,
                                   faithful.state, g.vd, Tolerance{}, false));
  r.reported.push_back(compare_f64("faithful vs exact (attn_output)", faithful.normed,
                                   exact_ref.normed, width, Tolerance{}, false));
  r.reported.push_back(compare_f64("faithful vs exact (final state)", faithful.state,
                                   exact_ref.state, g.vd, Tolerance{}, false));
  return r;
}

GdnRun oracle_gdn_run(const GdnPlan& plan, const GdnInputs& in) {
  using namespace gdn_detail;
  const GdnDims& d = plan.dims;
  GdnRun r;
  r.path = plan.path;
  r.state_in = in.state;
  const ConvRef conv = conv_stage(d, in.deint, in.conv_w, in.conv_state);
  r.conv = to_f32(conv.out);
  r.conv_state = to_bf16_bits(conv.tail);
  r.gates = to_f32(gates_stage(d, in.ba, in.a_log, in.dt_bias));
  const std::vector<double> s_conv = widen_f32(r.conv), s_gates = widen_f32(r.gates);
  const std::vector<double> state_in = widen_f32(in.state);
  const Qk qk = normalise_qk(d, s_conv);
  if (plan.path == GdnPath::chunked) {
    r.gc = to_f32(gc_stage(d, s_gates));
    const std::vector<double> gc = widen_f32(r.gc);
    const Wu wu = wu_stage(d, qk, s_conv, s_gates, gc);
    r.W = to_bf16_bits(wu.W);
    r.U = to_bf16_bits(wu.U);
    const StatePass pass = state_stage(d, qk, widen_bf16_bits(r.W), widen_bf16_bits(r.U), gc,
                                       state_in, Carry::own_rounded);
    r.S = to_bf16_bits(pass.S);
    r.uc = to_bf16_bits(pass.uc);
    r.state = to_f32(pass.state);
    r.W_before_state = r.W;
    r.U_before_state = r.U;
    r.gc_before_state = r.gc_before_output = r.gc;
    r.S_before_output = r.S;
    r.uc_before_output = r.uc;
    r.core = to_bf16_bits(output_stage(d, qk, widen_bf16_bits(r.S), widen_bf16_bits(r.uc), gc));
  } else {
    const Recurrence rec = recurrence_stage(d, qk, s_conv, s_gates, state_in);
    r.core = to_bf16_bits(rec.o);
    r.state = to_f32(rec.state);
  }
  r.normed = to_bf16_bits(gated_norm_stage(d, widen_bf16_bits(r.core), in.deint, in.norm_w));
  return r;
}

AgreementReport judge_gdn(const GdnPlan& plan, const GdnInputs& in, const GdnRun& run,
                          const std::string& backend, uint64_t seed, const BoundModel& bm) {
  return judge_gdn(plan, in, run, backend, seed, bm, nullptr);
}

}  // namespace bufferlab::oracle
