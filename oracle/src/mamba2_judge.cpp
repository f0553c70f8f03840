// Per-stage judgement of one Mamba-2 call against the faithful oracle (mamba2_judge.h): every
// stage on the backend's own stored inputs under the bounds of mamba2_bounds.cpp; the scratch the
// scan reads equal to what cumsum / bmm stored; the entries past a partial chunk exactly 0; the
// whole call reported against the faithful and exact references.
#include "bufferlab/oracle/mamba2_judge.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <functional>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/mhc.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace mamba2_detail {
namespace {

template <class T>
std::vector<T> part(const std::vector<T>& v, uint64_t index, uint64_t size) {
  if (v.size() < (index + 1) * size)
    throw Error(fmt::format("judge_ssd: a stored tensor of {} elements has no part {} of {}",
                            v.size(), index, size));
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(index * size),
                        v.begin() + static_cast<std::ptrdiff_t>((index + 1) * size));
}

std::vector<double> stored_bounds(const std::vector<double>& value, std::vector<double> e) {
  for (size_t i = 0; i < e.size(); ++i) e[i] = stored_bf16(value[i], e[i]);
  return e;
}

// Coordinate namers for the layouts the judge compares in.
struct Coords {
  Mamba2Dims d;
  uint64_t nch;

  // [rows, d_inner] and [rows, d_xbc] rows: (sequence, token).
  std::string token(uint64_t row) const {
    return fmt::format("sequence {}, token {}", row / d.L, row % d.L);
  }
  Where inner() const {
    return [*this](uint64_t row, uint64_t col) {
      return fmt::format("{}, head {}, dim {}", token(row), col / d.geom.P, col % d.geom.P);
    };
  }
  Where xbc() const {
    return [*this](uint64_t row, uint64_t col) {
      const Mamba2Geometry& g = d.geom;
      if (col < g.d_inner)
        return fmt::format("{}, x of head {}, dim {}", token(row), col / g.P, col % g.P);
      const uint64_t k = col - g.d_inner, part = k / (g.G * g.N), r = k % (g.G * g.N);
      return fmt::format("{}, {} of group {}, n {}", token(row), part == 0 ? "B" : "C", r / g.N,
                         r % g.N);
    };
  }
  Where tail() const {
    return [*this](uint64_t row, uint64_t col) {
      return fmt::format("sequence {}, channel {}, tail slot {}", row / d.geom.d_xbc,
                         row % d.geom.d_xbc, col);
    };
  }
  // [sequences·H, chunks·64]: (sequence, head) rows, token columns.
  Where heads() const {
    return [*this](uint64_t row, uint64_t col) {
      return fmt::format("sequence {}, token {}, head {}", row / d.geom.H, col, row % d.geom.H);
    };
  }
  // [sequences·chunks·G·64, 64]: CB rows (t), columns (s).
  Where cb() const {
    return [*this](uint64_t row, uint64_t col) {
      const uint64_t t = row % kChunk, cg = row / kChunk, g = cg % d.geom.G, bc = cg / d.geom.G;
      const uint64_t c = bc % nch, b = bc / nch;
      return fmt::format("sequence {}, chunk {}, group {}, token {}, source token {}", b, c, g,
                         c * kChunk + t, c * kChunk + col);
    };
  }
  // [sequences·H·P, N].
  Where state() const {
    return [*this](uint64_t row, uint64_t col) {
      const uint64_t P = d.geom.P, H = d.geom.H;
      return fmt::format("sequence {}, head {}, dim {}, state {}", row / (H * P), (row / P) % H,
                         row % P, col);
    };
  }
};

void fail(TensorComparison& c, uint64_t row, uint64_t col, float got, std::string reason) {
  ++c.failures;
  if (!c.first_bad)
    c.first_bad = Mismatch{row, col, got, 0.0, std::bit_cast<uint32_t>(got), std::move(reason)};
}

Tolerance exact(std::string formula) {
  Tolerance t;
  t.formula = std::move(formula);
  return t;
}

// The stored chunk arrays of every sequence, checked entry by entry past the partial chunk.
TensorComparison zero_tails(const Mamba2Dims& d, const Mamba2Run& run) {
  const uint64_t nch = chunks_of(d.L), H = d.geom.H, G = d.geom.G;
  TensorComparison c = property("past-partial-chunk entries = 0 (dt, dA_cumsum, CB)", d.sequences,
                                mul(mul(H, 2), nch * kChunk) + nch * G * kChunk * kChunk,
                                "exactly 0 past the sequence (ops/mamba2.h)");
  const uint64_t last = nch - 1;
  for (uint64_t b = 0; b < run.sequences.size(); ++b) {
    const Mamba2Run::Sequence& s = run.sequences[b];
    for (const auto& [name, arr] : {std::pair{"dt", &s.dt}, std::pair{"dA_cumsum", &s.da}})
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t i = 0; i < kChunk; ++i) {
          if (chunk_row_valid(d, last, i)) continue;
          const float v = (*arr)[(h * nch + last) * kChunk + i];
          if (v != 0.0f)
            fail(c, b, h, v,
                 fmt::format("{} {} past the sequence at (sequence {}, token {}, head {})", name, v,
                             b, last * kChunk + i, h));
        }
    for (uint64_t g = 0; g < G; ++g)
      for (uint64_t t = 0; t < kChunk; ++t)
        for (uint64_t u = 0; u < kChunk; ++u) {
          if (chunk_row_valid(d, last, t) && chunk_row_valid(d, last, u)) continue;
          const float v = s.cb[((last * G + g) * kChunk + t) * kChunk + u];
          if (v != 0.0f)
            fail(c, b, t, v,
                 fmt::format("CB {} past the sequence at (sequence {}, chunk {}, group {}, token "
                             "{}, source token {})",
                             v, b, last, g, last * kChunk + t, last * kChunk + u));
        }
  }
  return c;
}

std::vector<uint8_t> valid_heads_mask(const Mamba2Dims& d) {
  const uint64_t nch = chunks_of(d.L);
  std::vector<uint8_t> m(mul(mul(d.sequences, d.geom.H), nch * kChunk));
  for (size_t i = 0; i < m.size(); ++i) m[i] = (i % (nch * kChunk)) < d.L;
  return m;
}

std::vector<uint8_t> valid_cb_mask(const Mamba2Dims& d) {
  const uint64_t nch = chunks_of(d.L), per = mul(d.geom.G, kChunk * kChunk);
  std::vector<uint8_t> m(mul(mul(d.sequences, nch), per));
  for (size_t i = 0; i < m.size(); ++i) {
    const uint64_t c = (i / per) % nch, t = (i / kChunk) % kChunk, s = i % kChunk;
    m[i] = chunk_row_valid(d, c, t) && chunk_row_valid(d, c, s);
  }
  return m;
}

void require_run(const Mamba2Plan& plan, const Mamba2Run& run) {
  const Mamba2Dims& d = plan.dims;
  const Mamba2Geometry& g = d.geom;
  const uint64_t rows = d.rows(), state = mul(d.sequences, mul(g.H, mul(g.P, g.N)));
  if (run.path != plan.path) throw Error("judge_ssd: the run took the other path than the plan");
  require_size("run xbc", run.xbc.size(), mul(rows, g.d_xbc));
  require_size("run conv_state", run.conv_state.size(),
               mul(d.sequences, mul(g.d_xbc, g.kernel - 1)));
  require_size("run y", run.y.size(), mul(rows, g.d_inner));
  require_size("run normed", run.normed.size(), mul(rows, g.d_inner));
  require_size("run state_in", run.state_in.size(), state);
  require_size("run state", run.state.size(), state);
  if (plan.path == Mamba2Path::recurrent) return;
  require_size("run sequences", run.sequences.size(), d.sequences);
  const uint64_t nch = chunks_of(d.L), heads = mul(mul(g.H, nch), kChunk),
                 cb = mul(mul(nch, g.G), kChunk * kChunk);
  for (const Mamba2Run::Sequence& s : run.sequences) {
    for (const auto* v : {&s.dt, &s.da, &s.dt_before_scan, &s.da_before_scan})
      require_size("run dt / dA_cumsum", v->size(), heads);
    require_size("run CB", s.cb.size(), cb);
    require_size("run CB before the scan", s.cb_before_scan.size(), cb);
  }
}

std::string params_of(const Mamba2Plan& plan) {
  const Mamba2Dims& d = plan.dims;
  const std::string nc = plan.path == Mamba2Path::chunked && !plan.chunk.empty()
                             ? fmt::format(",nc={}", plan.chunk.front().carve.nc)
                             : "";
  return fmt::format("mamba2_ssd_{}(sequences={},L={},{}{},eps={:g})",
                     plan.path == Mamba2Path::chunked ? "chunked" : "recurrent", d.sequences, d.L,
                     d.geom.to_string(), nc, d.eps);
}

// The chunked stages, sequence by sequence, assembled into one comparison per check.
void judge_chunked(const Mamba2Dims& d, const Mamba2Inputs& in, const Mamba2Run& run,
                   std::span<const double> dt_rows, std::span<const double> dt_err,
                   std::span<const double> A, std::span<const double> D, const BoundModel& bm,
                   AgreementReport& r) {
  const Mamba2Geometry& g = d.geom;
  Mamba2Dims one = d;
  one.sequences = 1;
  const Coords at{d, chunks_of(d.L)};
  const uint64_t xrows = mul(d.L, g.d_xbc), drows = mul(d.L, g.H);
  const uint64_t cols = chunks_of(d.L) * kChunk;
  std::vector<float> dt_got, da_got, cb_got, dt_read, da_read, cb_read, state_read;
  std::vector<double> dt_want, dt_bound, da_want, da_bound, cb_want, cb_bound, dt_stored, da_stored,
      cb_stored, y_want, y_bound, st_want, st_bound;
  const std::vector<double> xbc = widen_bf16(run.xbc), state_in = widen(in.state);
  for (uint64_t b = 0; b < d.sequences; ++b) {
    const Mamba2Run::Sequence& s = run.sequences[b];
    const std::vector<double> xb = part(xbc, b, xrows);
    append(dt_got, s.dt);
    append(dt_want, dt_to_chunks(one, dt_rows.subspan(b * drows, drows)));
    append(dt_bound, dt_to_chunks(one, dt_err.subspan(b * drows, drows)));
    const std::vector<double> dt_s = widen(s.dt);
    append(da_got, s.da);
    append(da_want, cumsum_fp64(one, dt_s, A));
    append(da_bound, cumsum_bounds(one, dt_s, A, bm));
    append(cb_got, s.cb);
    append(cb_want, bmm_fp64(one, xb));
    append(cb_bound, bmm_bounds(one, xb, bm));
    append(dt_read, s.dt_before_scan);
    append(da_read, s.da_before_scan);
    append(cb_read, s.cb_before_scan);
    append(state_read, s.state_in);
    append(dt_stored, dt_s);
    append(da_stored, widen(s.da));
    append(cb_stored, widen(s.cb));
    // The scan on what it read.
    const std::vector<double> dt_r = widen(s.dt_before_scan), da_r = widen(s.da_before_scan),
                              cb_r = widen(s.cb_before_scan), st_r = widen(s.state_in);
    CoreBounds cbnd;
    const Mamba2CoreResult core =
        scan_fp64(one, ScanInputs{xb, dt_r, da_r, cb_r, D, st_r}, &bm, &cbnd);
    const std::vector<double> y = rounded_bf16(core.y);
    append(y_want, y);
    append(y_bound, stored_bounds(core.y, cbnd.y));
    append(st_want, core.state);
    append(st_bound, cbnd.state);
  }
  const std::vector<uint8_t> hm = valid_heads_mask(d), cm = valid_cb_mask(d);
  r.checks.push_back(located(compare_f32_bounded("dt (cumsum)", dt_got, dt_want, cols,
                                                 {dt_bound, hm, dt_bounds_formula()}),
                             at.heads()));
  r.checks.push_back(located(compare_f32_bounded("dA_cumsum (cumsum)", da_got, da_want, cols,
                                                 {da_bound, hm, cumsum_bounds_formula()}),
                             at.heads()));
  r.checks.push_back(located(compare_f32_bounded("CB (bmm)", cb_got, cb_want, kChunk,
                                                 {cb_bound, cm, bmm_bounds_formula()}),
                             at.cb()));
  r.checks.push_back(zero_tails(d, run));
  const Tolerance same = exact("exact: the scan reads what cumsum / bmm stored");
  r.checks.push_back(
      located(compare_f32("dt intact (scan input)", dt_read, dt_stored, cols, same), at.heads()));
  r.checks.push_back(located(
      compare_f32("dA_cumsum intact (scan input)", da_read, da_stored, cols, same), at.heads()));
  r.checks.push_back(
      located(compare_f32("CB intact (scan input)", cb_read, cb_stored, kChunk, same), at.cb()));
  r.checks.push_back(located(compare_f32("state intact (scan input)", state_read, state_in, g.N,
                                         exact("exact: the scan reads the uploaded state")),
                             at.state()));
  r.checks.push_back(located(compare_bf16_bounded("y (scan)", run.y, y_want, g.d_inner,
                                                  {y_bound, {}, scan_bounds_formula()}),
                             at.inner()));
  r.checks.push_back(located(compare_f32_bounded("final state (scan)", run.state, st_want, g.N,
                                                 {st_bound, {}, scan_bounds_formula()}),
                             at.state()));
}

void judge_recurrent(const Mamba2Dims& d, const Mamba2Run& run, std::span<const double> dt_rows,
                     std::span<const double> dt_err, std::span<const double> A,
                     std::span<const double> D, const BoundModel& bm, AgreementReport& r) {
  const Mamba2Geometry& g = d.geom;
  Mamba2Dims one = d;
  one.sequences = 1;
  const Coords at{d, chunks_of(d.L)};
  const uint64_t xrows = mul(d.L, g.d_xbc), drows = mul(d.L, g.H), PN = mul(g.H, mul(g.P, g.N));
  const std::vector<double> xbc = widen_bf16(run.xbc), state_in = widen(run.state_in);
  std::vector<double> y_want, y_bound, st_want, st_bound;
  for (uint64_t b = 0; b < d.sequences; ++b) {
    CoreBounds cbnd;
    const Mamba2CoreResult core =
        recurrence_fp64(one, part(xbc, b, xrows), dt_rows.subspan(b * drows, drows), A, D,
                        part(state_in, b, PN), &bm, dt_err.subspan(b * drows, drows), &cbnd);
    append(y_want, rounded_bf16(core.y));
    append(y_bound, stored_bounds(core.y, cbnd.y));
    append(st_want, core.state);
    append(st_bound, cbnd.state);
  }
  r.checks.push_back(located(compare_bf16_bounded("y (recurrence)", run.y, y_want, g.d_inner,
                                                  {y_bound, {}, recurrence_bounds_formula()}),
                             at.inner()));
  r.checks.push_back(located(compare_f32_bounded("final state (recurrence)", run.state, st_want,
                                                 g.N, {st_bound, {}, recurrence_bounds_formula()}),
                             at.state()));
}

// conv1d from the uploaded inputs.
void judge_conv(const Mamba2Dims& d, const Mamba2Inputs& in, const Mamba2Run& run,
                const BoundModel& bm, AgreementReport& r) {
  const Mamba2Geometry& g = d.geom;
  const Coords at{d, chunks_of(d.L)};
  const ConvResult conv = conv_fp64(d, in, /*with_terms=*/true);
  r.checks.push_back(
      located(compare_bf16_bounded("conv1d (xBC)", run.xbc, rounded_bf16(conv.out), g.d_xbc,
                                   {conv_bounds(conv, bm, g.kernel), {}, conv_bounds_formula()}),
              at.xbc()));
  r.checks.push_back(
      located(compare_bf16("conv tail state", run.conv_state, conv.tail, g.kernel - 1,
                           exact("exact: the last K-1 inputs of each sequence")),
              at.tail()));
}

// dt in FP64 from zxbcdt (the chunked path's stored dt and the recurrence's own), then the
// chunked stages or the recurrence.
void judge_core(const Mamba2Dims& d, const Mamba2Inputs& in, const Mamba2Run& run,
                const BoundModel& bm, AgreementReport& r) {
  const std::vector<double> arg = dt_argument(d, in.zxbcdt, in.dt_bias);
  const std::vector<double> dt = dt_fp64(d, arg), dt_err = dt_bounds(arg, bm);
  const std::vector<double> A = a_fp64(in.a_log), D = widen(in.D);
  if (run.path == Mamba2Path::chunked)
    judge_chunked(d, in, run, dt, dt_err, A, D, bm, r);
  else
    judge_recurrent(d, run, dt, dt_err, A, D, bm, r);
}

// The gated norm on the stored y.
void judge_norm(const Mamba2Dims& d, const Mamba2Inputs& in, const Mamba2Run& run,
                const BoundModel& bm, AgreementReport& r) {
  const Coords at{d, chunks_of(d.L)};
  const std::vector<double> y = widen_bf16(run.y);
  r.checks.push_back(located(
      compare_bf16_bounded(
          "gated norm (norm_output)", run.normed,
          rounded_bf16(gated_norm_fp64(d, y, in.zxbcdt, in.norm_w)), d.geom.d_inner,
          {gated_norm_bounds(d, y, in.zxbcdt, in.norm_w, bm), {}, gated_norm_bounds_formula()}),
      at.inner()));
}

}  // namespace
}  // namespace mamba2_detail

void judge_mamba2_stage(Mamba2StageGroup stage, const Mamba2Dims& dims, const Mamba2Inputs& in,
                        const Mamba2Run& run, const BoundModel& bm, AgreementReport& r) {
  using namespace mamba2_detail;
  switch (stage) {
    case Mamba2StageGroup::conv:
      return judge_conv(dims, in, run, bm, r);
    case Mamba2StageGroup::core:
      return judge_core(dims, in, run, bm, r);
    case Mamba2StageGroup::norm:
      return judge_norm(dims, in, run, bm, r);
  }
}

AgreementReport judge_mamba2(const Mamba2Plan& plan, const Mamba2Inputs& in, const Mamba2Run& run,
                             const std::string& backend, uint64_t seed, const BoundModel& bm) {
  using namespace mamba2_detail;
  const Mamba2Dims& d = plan.dims;
  const Mamba2Geometry& g = d.geom;
  require_run(plan, run);
  AgreementReport r{"mamba2_ssd", params_of(plan), backend, seed, {}, {}};
  judge_conv(d, in, run, bm, r);
  judge_core(d, in, run, bm, r);
  judge_norm(d, in, run, bm, r);

  // The whole call from the original inputs (reported).
  const Mamba2Reference faithful = mamba2_reference(d, in, Mode::faithful);
  const Mamba2Reference exact_ref = mamba2_reference(d, in, Mode::exact);
  r.reported.push_back(compare_bf16("whole call vs faithful", run.normed, faithful.normed,
                                    g.d_inner, Tolerance{}, /*asserted=*/false));
  r.reported.push_back(compare_f64("faithful vs exact", faithful.normed, exact_ref.normed,
                                   g.d_inner, Tolerance{}, /*asserted=*/false));
  return r;
}

Mamba2Run perfect_mamba2_run(const Mamba2Plan& plan, const Mamba2Inputs& in) {
  using namespace mamba2_detail;
  const Mamba2Dims& d = plan.dims;
  const Mamba2Geometry& g = d.geom;
  Mamba2Dims one = d;
  one.sequences = 1;
  const uint64_t xrows = mul(d.L, g.d_xbc), drows = mul(d.L, g.H), PN = mul(g.H, mul(g.P, g.N));
  Mamba2Run run;
  run.path = plan.path;
  const ConvResult conv = conv_fp64(d, in);
  run.xbc = to_bf16_bits(conv.out);
  run.conv_state = to_bf16_bits(conv.tail);
  const std::vector<double> xbc = widen_bf16(run.xbc);
  const std::vector<double> dt = dt_fp64(d, dt_argument(d, in.zxbcdt, in.dt_bias));
  const std::vector<double> A = a_fp64(in.a_log), D = widen(in.D);
  run.state_in = in.state;
  std::vector<double> y;
  for (uint64_t b = 0; b < d.sequences; ++b) {
    const std::vector<double> xb = part(xbc, b, xrows), dtb = part(dt, b, drows);
    const std::vector<float> st = part(in.state, b, PN);
    Mamba2CoreResult core;
    if (plan.path == Mamba2Path::chunked) {
      Mamba2Run::Sequence s;
      s.dt = to_f32(dt_to_chunks(one, dtb));
      s.da = to_f32(cumsum_fp64(one, widen(s.dt), A));
      s.cb = to_f32(bmm_fp64(one, xb));
      s.dt_before_scan = s.dt;
      s.da_before_scan = s.da;
      s.cb_before_scan = s.cb;
      s.state_in = st;
      core = scan_fp64(one, ScanInputs{xb, widen(s.dt), widen(s.da), widen(s.cb), D, widen(st)});
      s.state = to_f32(core.state);
      run.sequences.push_back(std::move(s));
    } else {
      core = recurrence_fp64(one, xb, dtb, A, D, widen(st));
    }
    append(y, core.y);
    append(run.state, to_f32(core.state));
  }
  run.y = to_bf16_bits(y);
  run.normed = to_bf16_bits(gated_norm_fp64(d, widen_bf16(run.y), in.zxbcdt, in.norm_w));
  return run;
}

}  // namespace bufferlab::oracle
