// The SSD core in FP64 — the definition (the recurrence) and the chunked form — and the whole
// Mamba-2 call in `exact` / `faithful` mode (docs/spec/numerics.md §6, ops/mamba2.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/mhc.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace mamba2_detail {
namespace {

template <class T>
std::span<const T> part_view(const std::vector<T>& v, uint64_t index, uint64_t size) {
  return std::span<const T>(v).subspan(index * size, size);
}

}  // namespace

// h_t = exp(dt_t·A)·h_(t−1) + dt_t·x_t·B_tᵀ, y_t = h_t·C_t + D·x_t per head; with bounds, the
// companion recursion derived in mamba2_bounds.cpp ("recurrence").
Mamba2CoreResult recurrence_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                 std::span<const double> dt, std::span<const double> A,
                                 std::span<const double> D, std::span<const double> state,
                                 const BoundModel* bm, std::span<const double> dt_error,
                                 CoreBounds* bounds) {
  const Columns col = Columns::of(dims);
  const uint64_t L = dims.L, H = dims.geom.H, P = col.P, N = col.N, PN = mul(P, N);
  require_size("xbc", xbc.size(), mul(L, col.d_xbc));
  require_size("dt", dt.size(), mul(L, H));
  require_size("A", A.size(), H);
  require_size("D", D.size(), H);
  require_size("state", state.size(), mul(H, PN));
  const bool with_bounds = bm != nullptr && bounds != nullptr;
  if (with_bounds) require_size("dt error", dt_error.size(), mul(L, H));

  Mamba2CoreResult r;
  r.y.assign(mul(L, col.d_inner), 0.0);
  r.state.assign(state.begin(), state.end());
  if (with_bounds) {
    bounds->y.assign(r.y.size(), 0.0);
    bounds->state.assign(r.state.size(), 0.0);
  }
  const double u = with_bounds ? bm->fp32_u : 0.0, us = with_bounds ? sum_u(*bm) : 0.0;
  const double eta = with_bounds ? 2.0 * bm->exp_ulps * u : 0.0;
  const double g3 = gamma(3.0, us), g3_64 = gamma(3.0, kU64) + 4.0 * kU64;
  const double gy = gamma(static_cast<double>(N + 2), us),
               gy64 = gamma(static_cast<double>(N + 2), kU64);
  constexpr double kExpAbs = 0x1p-126;
  for (uint64_t h = 0; h < H; ++h) {
    const uint64_t g = col.group(h);
    double* hs = r.state.data() + h * PN;
    double* E = with_bounds ? bounds->state.data() + h * PN : nullptr;
    for (uint64_t t = 0; t < L; ++t) {
      const double* row = xbc.data() + t * col.d_xbc;
      const double* x = row + col.x(h);
      const double* B = row + col.B(g);
      const double* C = row + col.C(g);
      const double d = dt[t * H + h], arg = d * A[h], a = std::exp(arg);
      double eps_a = 0.0, e_dt = 0.0;
      if (with_bounds) {
        e_dt = dt_error[t * H + h];
        const double delta = std::fabs(A[h]) * e_dt * (1.0 + eta) * (1.0 + u) +
                             std::fabs(arg) * ((1.0 + eta) * (1.0 + u) - 1.0);
        eps_a = arg + delta < -110.0 ? 0.0 : std::expm1(delta) * (1.0 + eta) + eta;
      }
      for (uint64_t p = 0; p < P; ++p) {
        double* hp = hs + p * N;
        const double dx = d * x[p];
        double y = 0.0;
        for (uint64_t n = 0; n < N; ++n) {
          const double prev = hp[n];
          hp[n] = a * prev + dx * B[n];
          y += hp[n] * C[n];
          if (!with_bounds) continue;
          double* Ep = E + p * N;
          const double xb = std::fabs(x[p] * B[n]), mag = a * std::fabs(prev) + d * xb;
          Ep[n] = (1.0 + g3) * ((a * (1.0 + eps_a) + kExpAbs) * Ep[n] +
                                (a * eps_a + kExpAbs) * std::fabs(prev) + e_dt * xb) +
                  g3 * mag + 3.0 * kUnderflowPerOp + g3_64 * mag;
        }
        const uint64_t out = t * col.d_inner + col.x(h) + p;
        r.y[out] = y + D[h] * x[p];
        if (!with_bounds) continue;
        double ce = 0.0, mag = std::fabs(D[h] * x[p]);
        for (uint64_t n = 0; n < N; ++n) {
          ce += std::fabs(C[n]) * E[p * N + n];
          mag += std::fabs(hp[n] * C[n]);
        }
        bounds->y[out] = (1.0 + gy) * ce + gy * mag +
                         static_cast<double>(2 * N + 2) * kUnderflowPerOp + gy64 * mag;
      }
    }
  }
  return r;
}

}  // namespace mamba2_detail

Mamba2CoreResult mamba2_recurrence_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                        std::span<const double> dt, std::span<const double> A,
                                        std::span<const double> D, std::span<const double> state) {
  using namespace mamba2_detail;
  return recurrence_fp64(dims, xbc, dt, A, D, state);
}

// cumsum, bmm and the scan chained in FP64, nothing rounded.
Mamba2CoreResult mamba2_chunked_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                     std::span<const double> dt, std::span<const double> A,
                                     std::span<const double> D, std::span<const double> state) {
  using namespace mamba2_detail;
  const std::vector<double> dt_chunks = dt_to_chunks(dims, dt);
  const std::vector<double> da = cumsum_fp64(dims, dt_chunks, A);
  const std::vector<double> cb = bmm_fp64(dims, xbc);
  return scan_fp64(dims, ScanInputs{xbc, dt_chunks, da, cb, D, state});
}

Mamba2Reference mamba2_reference(const Mamba2Dims& dims, const Mamba2Inputs& in, Mode mode) {
  using namespace mamba2_detail;
  const Mamba2Geometry& g = dims.geom;
  const bool faithful = mode == Mode::faithful;
  require_size("a_log", in.a_log.size(), g.H);
  require_size("D", in.D.size(), g.H);
  require_size("state", in.state.size(), mul(dims.sequences, mul(g.H, mul(g.P, g.N))));
  Mamba2Reference ref;
  ConvResult conv = conv_fp64(dims, in);
  ref.xbc = faithful ? rounded_bf16(std::move(conv.out)) : std::move(conv.out);
  ref.conv_state = std::move(conv.tail);
  ref.dt = dt_fp64(dims, dt_argument(dims, in.zxbcdt, in.dt_bias));
  const std::vector<double> A = a_fp64(in.a_log), D = widen(in.D), state = widen(in.state);
  Mamba2Dims one = dims;
  one.sequences = 1;
  ref.y.reserve(mul(dims.rows(), g.d_inner));
  ref.state.reserve(state.size());
  const uint64_t PN = mul(g.H, mul(g.P, g.N));
  for (uint64_t b = 0; b < dims.sequences; ++b) {
    const auto xbc = part_view(ref.xbc, b, mul(dims.L, g.d_xbc));
    const auto dt = part_view(ref.dt, b, mul(dims.L, g.H));
    const auto st = part_view(state, b, PN);
    const Mamba2CoreResult core = faithful ? mamba2_chunked_fp64(one, xbc, dt, A, D, st)
                                           : mamba2_recurrence_fp64(one, xbc, dt, A, D, st);
    ref.y.insert(ref.y.end(), core.y.begin(), core.y.end());
    ref.state.insert(ref.state.end(), core.state.begin(), core.state.end());
  }
  if (faithful) ref.y = rounded_bf16(std::move(ref.y));
  ref.normed = gated_norm_fp64(dims, ref.y, in.zxbcdt, in.norm_w);
  if (faithful) ref.normed = rounded_bf16(std::move(ref.normed));
  return ref;
}

}  // namespace bufferlab::oracle
