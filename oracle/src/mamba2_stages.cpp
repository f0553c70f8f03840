// The Mamba-2 stages in FP64 on given inputs (ops/mamba2.h pins every layout and formula):
// conv1d, dt, dA_cumsum, CB, the chunked scan and the gated norm. The scan optionally carries
// the error companion of mamba2_bounds.cpp alongside its values (the bound of every output needs
// the magnitudes of the very terms the value sums).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "oracle_common.h"

namespace bufferlab::oracle::mamba2_detail {
uint64_t chunks_of(uint64_t L) { return cdiv(L, kChunk); }

void require_size(const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    throw Error(fmt::format("Mamba-2 oracle: {} holds {} elements, {} expected", what, got, want));
}

Columns Columns::of(const Mamba2Dims& dims) {
  const Mamba2Geometry& g = dims.geom;
  if (g.ng == 0 || g.G == 0 || g.H % g.G != 0)
    throw Error(fmt::format("Mamba-2 oracle: {} heads in {} groups", g.H, g.ng));
  return {g.d_inner, g.d_xbc, g.in_proj, g.P, g.N, g.G, g.H / g.G};
}

double softplus_fp64(double x) {
  return x > static_cast<double>(kSoftplusThreshold) ? x : std::log1p(std::exp(x));
}
double sigmoid_fp64(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu_fp64(double x) { return x * sigmoid_fp64(x); }
double clamp_dt(double v) {
  return std::min(std::max(v, static_cast<double>(kMamba2DtMin)),
                  static_cast<double>(kMamba2DtMax));
}

bool chunk_row_valid(const Mamba2Dims& dims, uint64_t chunk, uint64_t i) {
  return chunk * kChunk + i < dims.L;
}

// --- conv1d ------------------------------------------------------------------------------------

ConvResult conv_fp64(const Mamba2Dims& dims, const Mamba2Inputs& in, bool with_terms) {
  const Mamba2Geometry& g = dims.geom;
  const uint64_t K = g.kernel, T = K - 1, C = g.d_xbc, L = dims.L, rows = dims.rows();
  require_size("zxbcdt", in.zxbcdt.size(), mul(rows, g.in_proj));
  require_size("conv_w", in.conv_w.size(), mul(C, K));
  require_size("conv_b", in.conv_b.size(), C);
  require_size("conv_state", in.conv_state.size(), mul(dims.sequences, mul(C, T)));
  ConvResult r;
  r.out.resize(mul(rows, C));
  r.tail.resize(in.conv_state.size());
  if (with_terms) {
    r.pre.resize(r.out.size());
    r.abs_sum.resize(r.out.size());
  }
  for (uint64_t b = 0; b < dims.sequences; ++b) {
    for (uint64_t c = 0; c < C; ++c) {
      const uint16_t* tail = in.conv_state.data() + (b * C + c) * T;
      // Input τ of channel c (τ < 0: the tail, oldest first).
      auto x = [&](int64_t tau) {
        return tau >= 0 ? bf16_value(in.zxbcdt[(b * L + static_cast<uint64_t>(tau)) * g.in_proj +
                                               g.d_inner + c])
                        : bf16_value(tail[static_cast<int64_t>(T) + tau]);
      };
      const double bias = bf16_value(in.conv_b[c]);
      for (uint64_t t = 0; t < L; ++t) {
        double a = bias, abs_sum = std::fabs(bias);
        for (uint64_t j = 0; j < K; ++j) {
          const double v = bf16_value(in.conv_w[c * K + j]) *
                           x(static_cast<int64_t>(t + j) - static_cast<int64_t>(T));
          a += v;
          abs_sum += std::fabs(v);
        }
        const uint64_t e = (b * L + t) * C + c;
        r.out[e] = silu_fp64(a);
        if (with_terms) {
          r.pre[e] = a;
          r.abs_sum[e] = abs_sum;
        }
      }
      for (uint64_t j = 0; j < T; ++j)
        r.tail[(b * C + c) * T + j] = x(static_cast<int64_t>(L + j) - static_cast<int64_t>(T));
    }
  }
  return r;
}

// --- dt, A, dA_cumsum, CB ----------------------------------------------------------------------

std::vector<double> dt_argument(const Mamba2Dims& dims, std::span<const uint16_t> zxbcdt,
                                std::span<const float> dt_bias) {
  const Mamba2Geometry& g = dims.geom;
  const uint64_t rows = dims.rows();
  require_size("zxbcdt", zxbcdt.size(), mul(rows, g.in_proj));
  require_size("dt_bias", dt_bias.size(), g.H);
  std::vector<double> arg(mul(rows, g.H));
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t h = 0; h < g.H; ++h)  // BF16 + FP32 in FP64: exact for any sane exponents
      arg[r * g.H + h] = bf16_value(zxbcdt[r * g.in_proj + g.d_inner + g.d_xbc + h]) +
                         static_cast<double>(dt_bias[h]);
  return arg;
}

std::vector<double> dt_fp64(const Mamba2Dims&, std::span<const double> argument) {
  std::vector<double> dt(argument.size());
  for (size_t i = 0; i < dt.size(); ++i) dt[i] = clamp_dt(softplus_fp64(argument[i]));
  return dt;
}

std::vector<double> a_fp64(std::span<const float> a_log) {
  std::vector<double> A(a_log.size());
  for (size_t h = 0; h < A.size(); ++h) A[h] = -std::exp(static_cast<double>(a_log[h]));
  return A;
}

std::vector<double> dt_to_chunks(const Mamba2Dims& dims, std::span<const double> dt_rows) {
  const uint64_t H = dims.geom.H, L = dims.L, nch = chunks_of(L);
  require_size("dt rows", dt_rows.size(), mul(L, H));
  std::vector<double> out(mul(mul(H, nch), kChunk), 0.0);
  for (uint64_t h = 0; h < H; ++h)
    for (uint64_t t = 0; t < L; ++t) out[h * nch * kChunk + t] = dt_rows[t * H + h];
  return out;
}

std::vector<double> cumsum_fp64(const Mamba2Dims& dims, std::span<const double> dt_chunks,
                                std::span<const double> A) {
  const uint64_t H = dims.geom.H, nch = chunks_of(dims.L);
  require_size("dt chunks", dt_chunks.size(), mul(mul(H, nch), kChunk));
  require_size("A", A.size(), H);
  std::vector<double> cs(dt_chunks.size(), 0.0);
  for_each_head_chunk(dims, [&](uint64_t h, uint64_t c, uint64_t base) {
    double acc = 0.0;
    for (uint64_t i = 0; i < kChunk && chunk_row_valid(dims, c, i); ++i) {
      acc += dt_chunks[base + i] * A[h];
      cs[base + i] = acc;
    }
  });
  return cs;
}

std::vector<double> bmm_fp64(const Mamba2Dims& dims, std::span<const double> xbc) {
  const Columns col = Columns::of(dims);
  const uint64_t L = dims.L, nch = chunks_of(L), N = col.N;
  require_size("xbc", xbc.size(), mul(L, col.d_xbc));
  std::vector<double> cb(mul(mul(nch, col.G), kChunk * kChunk), 0.0);
  for_each_cb_pair(dims, xbc, [&](uint64_t at, const double* Ct, const double* Bs) {
    double acc = 0.0;
    for (uint64_t n = 0; n < N; ++n) acc += Ct[n] * Bs[n];
    cb[at] = acc;
  });
  return cb;
}

// --- scan --------------------------------------------------------------------------------------
//
// Per head h (group g), chunk c of rc rows, state h0 [P][N] carried in FP64:
//   y_t[p] = e^{min(cs_t,0)}·Σ_n C_t[n]·h0[p][n] + Σ_{s≤t} CB[t][s]·e^{min(cs_t−cs_s,0)}·dt_s·
//            x_s[p] + D·x_t[p];
//   h0[p][n] ← e^{min(cs_last,0)}·h0[p][n] + Σ_s e^{min(cs_last−cs_s,0)}·dt_s·x_s[p]·B_s[n].
// With bounds, E [P][N] bounds |ĥ0 − h0| of the backend's FP32 carry (zero at entry: the state
// it reads is the stored one) and every output's bound is assembled from the terms summed —
// the derivation is in mamba2_bounds.cpp ("scan"), next to exp_error.
Mamba2CoreResult scan_fp64(const Mamba2Dims& dims, const ScanInputs& in, const BoundModel* bm,
                           CoreBounds* bounds) {
  const Columns col = Columns::of(dims);
  const uint64_t L = dims.L, H = dims.geom.H, P = col.P, N = col.N, G = col.G;
  const uint64_t nch = chunks_of(L), PN = mul(P, N);
  require_size("xbc", in.xbc.size(), mul(L, col.d_xbc));
  require_size("dt chunks", in.dt.size(), mul(mul(H, nch), kChunk));
  require_size("dA_cumsum chunks", in.da.size(), mul(mul(H, nch), kChunk));
  require_size("CB", in.cb.size(), mul(mul(nch, G), kChunk * kChunk));
  require_size("D", in.D.size(), H);
  require_size("state", in.state.size(), mul(H, PN));
  const bool with_bounds = bm != nullptr && bounds != nullptr;
  const double us = with_bounds ? sum_u(*bm) : 0.0;

  Mamba2CoreResult r;
  r.y.assign(mul(L, col.d_inner), 0.0);
  r.state.assign(mul(H, PN), 0.0);
  if (with_bounds) {
    bounds->y.assign(r.y.size(), 0.0);
    bounds->state.assign(r.state.size(), 0.0);
  }
  std::vector<double> h0(PN), E(PN), next(PN), nextE(PN), mag(N);
  std::vector<double> w(kChunk), w_abs(kChunk), w_err(kChunk);
  auto x_at = [&](uint64_t token, uint64_t h, uint64_t p) {
    return in.xbc[token * col.d_xbc + col.x(h) + p];
  };
  for (uint64_t h = 0; h < H; ++h) {
    const uint64_t g = col.group(h);
    const double Dh = in.D[h];
    std::copy_n(in.state.begin() + static_cast<std::ptrdiff_t>(h * PN), PN, h0.begin());
    std::fill(E.begin(), E.end(), 0.0);
    for (uint64_t c = 0; c < nch; ++c) {
      const uint64_t t0 = c * kChunk, rc = std::min(kChunk, L - t0);
      const double* dt = in.dt.data() + (h * nch + c) * kChunk;
      const double* cs = in.da.data() + (h * nch + c) * kChunk;
      const double* cb = in.cb.data() + (c * G + g) * kChunk * kChunk;
      // Outputs of the chunk's rows.
      for (uint64_t t = 0; t < rc; ++t) {
        const double* Ct = in.xbc.data() + (t0 + t) * col.d_xbc + col.C(g);
        const double et = std::exp(std::min(cs[t], 0.0));
        const double gm = with_bounds ? gamma(static_cast<double>(N + t + 4), us) : 0.0;
        for (uint64_t s = 0; s <= t; ++s) {
          const double arg = std::min(cs[t] - cs[s], 0.0);
          w[s] = cb[t * kChunk + s] * std::exp(arg) * dt[s];
          if (!with_bounds) continue;
          const ExpError ee = exp_error(arg, /*rounded=*/true, *bm);
          w_abs[s] = std::fabs(w[s]);
          w_err[s] = w_abs[s] * ((1.0 + ee.rel) * (1.0 + gm) - 1.0) +
                     ee.abs * std::fabs(cb[t * kChunk + s] * dt[s]) * (1.0 + gm);
        }
        const ExpError e0 = with_bounds ? exp_error(std::min(cs[t], 0.0), false, *bm) : ExpError{};
        for (uint64_t p = 0; p < P; ++p) {
          const double* hp = h0.data() + p * N;
          double inter = 0.0, intra = 0.0;
          for (uint64_t n = 0; n < N; ++n) inter += Ct[n] * hp[n];
          for (uint64_t s = 0; s <= t; ++s) intra += w[s] * x_at(t0 + s, h, p);
          const double xt = x_at(t0 + t, h, p);
          const uint64_t out = (t0 + t) * col.d_inner + col.x(h) + p;
          r.y[out] = et * inter + intra + Dh * xt;
          if (!with_bounds) continue;
          double inter_abs = 0.0, inter_E = 0.0, intra_abs = 0.0, intra_err = 0.0;
          const double* Ep = E.data() + p * N;
          for (uint64_t n = 0; n < N; ++n) {
            inter_abs += std::fabs(Ct[n] * hp[n]);
            inter_E += std::fabs(Ct[n]) * Ep[n];
          }
          for (uint64_t s = 0; s <= t; ++s) {
            const double ax = std::fabs(x_at(t0 + s, h, p));
            intra_abs += w_abs[s] * ax;
            intra_err += w_err[s] * ax;
          }
          const double dx = std::fabs(Dh * xt);
          const double ops = static_cast<double>(2 * N + 4 * (t + 1) + 3);
          bounds->y[out] =
              (et * (1.0 + e0.rel) + e0.abs) * (1.0 + gm) * inter_E +
              inter_abs * (et * ((1.0 + e0.rel) * (1.0 + gm) - 1.0) + e0.abs * (1.0 + gm)) +
              intra_err + gm * dx + ops * kUnderflowPerOp +
              (gamma(static_cast<double>(N + t + 4), kU64) + 4.0 * kU64) *
                  (et * inter_abs + intra_abs + dx);
        }
      }
      // The state carried to the next chunk.
      const double cl = cs[rc - 1], el = std::exp(std::min(cl, 0.0));
      const double gs = with_bounds ? gamma(static_cast<double>(rc + 3), us) : 0.0;
      for (uint64_t s = 0; s < rc; ++s) {
        const double arg = std::min(cl - cs[s], 0.0);
        w[s] = std::exp(arg) * dt[s];
        if (!with_bounds) continue;
        const ExpError ee = exp_error(arg, /*rounded=*/true, *bm);
        w_abs[s] = std::fabs(w[s]);
        w_err[s] =
            w_abs[s] * ((1.0 + ee.rel) * (1.0 + gs) - 1.0) + ee.abs * std::fabs(dt[s]) * (1.0 + gs);
      }
      const ExpError el_err = with_bounds ? exp_error(std::min(cl, 0.0), false, *bm) : ExpError{};
      for (uint64_t p = 0; p < P; ++p) {
        double* np = next.data() + p * N;
        const double* hp = h0.data() + p * N;
        for (uint64_t n = 0; n < N; ++n) np[n] = el * hp[n];
        for (uint64_t s = 0; s < rc; ++s) {
          const double* Bs = in.xbc.data() + (t0 + s) * col.d_xbc + col.B(g);
          const double coef = w[s] * x_at(t0 + s, h, p);
          for (uint64_t n = 0; n < N; ++n) np[n] += coef * Bs[n];
        }
        if (!with_bounds) continue;
        double* nE = nextE.data() + p * N;
        const double* Ep = E.data() + p * N;
        for (uint64_t n = 0; n < N; ++n) {
          nE[n] = (el * (1.0 + el_err.rel) + el_err.abs) * (1.0 + gs) * Ep[n] +
                  std::fabs(hp[n]) *
                      (el * ((1.0 + el_err.rel) * (1.0 + gs) - 1.0) + el_err.abs * (1.0 + gs));
          mag[n] = el * std::fabs(hp[n]);
        }
        for (uint64_t s = 0; s < rc; ++s) {
          const double* Bs = in.xbc.data() + (t0 + s) * col.d_xbc + col.B(g);
          const double ax = std::fabs(x_at(t0 + s, h, p));
          const double ce = w_err[s] * ax, ca = w_abs[s] * ax;
          for (uint64_t n = 0; n < N; ++n) {
            nE[n] += ce * std::fabs(Bs[n]);
            mag[n] += ca * std::fabs(Bs[n]);
          }
        }
        const double ops = static_cast<double>(4 * rc + 2);
        const double g64 = gamma(static_cast<double>(rc + 3), kU64) + 4.0 * kU64;
        for (uint64_t n = 0; n < N; ++n) nE[n] += ops * kUnderflowPerOp + g64 * mag[n];
      }
      h0.swap(next);
      if (with_bounds) E.swap(nextE);
    }
    std::copy(h0.begin(), h0.end(), r.state.begin() + static_cast<std::ptrdiff_t>(h * PN));
    if (with_bounds)
      std::copy(E.begin(), E.end(), bounds->state.begin() + static_cast<std::ptrdiff_t>(h * PN));
  }
  return r;
}

// --- gated norm --------------------------------------------------------------------------------

std::vector<double> gated_norm_fp64(const Mamba2Dims& dims, std::span<const double> y,
                                    std::span<const uint16_t> zxbcdt,
                                    std::span<const uint16_t> norm_w) {
  const Mamba2Geometry& g = dims.geom;
  const uint64_t rows = dims.rows(), D = g.d_inner, gs = D / g.G;
  require_size("y", y.size(), mul(rows, D));
  require_size("zxbcdt", zxbcdt.size(), mul(rows, g.in_proj));
  require_size("norm_w", norm_w.size(), D);
  std::vector<double> out(y.size()), gate(gs);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t k = 0; k < g.G; ++k) {
      double ss = 0.0;
      for (uint64_t i = 0; i < gs; ++i) {
        const uint64_t col = k * gs + i;
        gate[i] = y[r * D + col] * silu_fp64(bf16_value(zxbcdt[r * g.in_proj + col]));
        ss += gate[i] * gate[i];
      }
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(gs) + dims.eps);
      for (uint64_t i = 0; i < gs; ++i)
        out[r * D + k * gs + i] = gate[i] * rs * bf16_value(norm_w[k * gs + i]);
    }
  return out;
}

}  // namespace bufferlab::oracle::mamba2_detail
