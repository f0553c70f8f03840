// GDN stage references in FP64 (docs/spec/numerics.md §5, the pins of ops/gdn.h). No rounding
// here: the callers round where a backend stores BF16 (gdn_reference.cpp, gdn_judge.cpp).
#include "bufferlab/oracle/gdn_stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "oracle_common.h"

namespace bufferlab::oracle::gdn_detail {

void require_size(const char* what, uint64_t got, uint64_t want) {
  if (got != want)
    throw Error(fmt::format("GDN oracle: {} holds {} elements, expected {}", what, got, want));
}

std::vector<double> widen_f32(std::span<const float> v) { return {v.begin(), v.end()}; }

std::vector<double> widen_bf16_bits(std::span<const uint16_t> v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_bits_to_f32(v[i]);
  return out;
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
double log_alpha(double a) {
  return std::log(std::max(a, static_cast<double>(kGdnAlphaFloor)));  // NaN stays NaN
}

ChunkGrid::ChunkGrid(const GdnDims& d)
    : sequences(d.sequences), L(d.L), cps(cdiv(d.L, kChunk)), nv(d.geom.nv) {}

double conv_input(const GdnDims& d, std::span<const uint16_t> deint,
                  std::span<const uint16_t> conv_state, uint64_t b, uint64_t c, int64_t i) {
  const GdnGeometry& g = d.geom;
  const int64_t T = static_cast<int64_t>(g.kernel - 1);
  if (i < 0) return bf16_bits_to_f32(conv_state[(b * g.conv_dim + c) * (g.kernel - 1) + (T + i)]);
  return bf16_bits_to_f32(deint[(b * d.L + static_cast<uint64_t>(i)) * g.qkvz + c]);
}

namespace {

// Column offsets of the Q, K, V blocks of a conv row (ops/gdn.h layouts).
struct ConvCols {
  uint64_t k0, v0;
  explicit ConvCols(const GdnGeometry& g) : k0(g.nk * g.kd), v0(2 * g.nk * g.kd) {}
};

}  // namespace

ConvRef conv_stage(const GdnDims& d, std::span<const uint16_t> deint,
                   std::span<const uint16_t> conv_w, std::span<const uint16_t> conv_state) {
  const GdnGeometry& g = d.geom;
  const uint64_t C = g.conv_dim, K = g.kernel, T = K - 1, rows = d.rows();
  require_size("deint", deint.size(), mul(rows, g.qkvz));
  require_size("conv_w", conv_w.size(), mul(C, K));
  require_size("conv_state", conv_state.size(), mul(mul(d.sequences, C), T));
  ConvRef r;
  r.out.assign(mul(rows, C), 0.0);
  r.tail.assign(conv_state.size(), 0.0);
  for (uint64_t b = 0; b < d.sequences; ++b)
    for (uint64_t c = 0; c < C; ++c) {
      auto x = [&](int64_t i) { return conv_input(d, deint, conv_state, b, c, i); };
      for (uint64_t t = 0; t < d.L; ++t) {
        double s = 0.0;
        for (uint64_t j = 0; j < K; ++j)
          s += static_cast<double>(bf16_bits_to_f32(conv_w[c * K + j])) *
               x(static_cast<int64_t>(t + j) - static_cast<int64_t>(T));
        r.out[(b * d.L + t) * C + c] = silu(s);
      }
      for (uint64_t s = 0; s < T; ++s)
        r.tail[(b * C + c) * T + s] =
            x(static_cast<int64_t>(d.L) - static_cast<int64_t>(T) + static_cast<int64_t>(s));
    }
  return r;
}

std::vector<double> gates_stage(const GdnDims& d, std::span<const uint16_t> ba,
                                std::span<const float> a_log, std::span<const float> dt_bias) {
  const uint64_t nv = d.geom.nv, rows = d.rows();
  require_size("ba", ba.size(), mul(rows, 2 * nv));
  require_size("a_log", a_log.size(), nv);
  require_size("dt_bias", dt_bias.size(), nv);
  std::vector<double> out(mul(rows, 2 * nv));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t v = 0; v < nv; ++v) {
      const double b = bf16_bits_to_f32(ba[t * 2 * nv + v]);
      const double a = bf16_bits_to_f32(ba[t * 2 * nv + nv + v]);
      out[(t * nv + v) * 2] = sigmoid(b);
      out[(t * nv + v) * 2 + 1] =
          std::exp(-std::exp(static_cast<double>(a_log[v])) * softplus(a + dt_bias[v]));
    }
  return out;
}

Qk normalise_qk(const GdnDims& d, std::span<const double> conv) {
  const GdnGeometry& g = d.geom;
  const uint64_t rows = d.rows(), kd = g.kd;
  require_size("conv", conv.size(), mul(rows, g.conv_dim));
  const ConvCols cols(g);
  const double eps = kGdnL2Eps, scale = 1.0 / std::sqrt(static_cast<double>(kd));
  Qk r;
  r.q.resize(mul(rows, g.nk * kd));
  r.k.resize(r.q.size());
  auto normalise = [&](const double* x, double s, double* out) {
    const double n = s / std::sqrt(dot(x, x, kd) + eps);
    for (uint64_t j = 0; j < kd; ++j) out[j] = x[j] * n;
  };
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t h = 0; h < g.nk; ++h) {
      const double* row = conv.data() + t * g.conv_dim;
      normalise(row + h * kd, scale, r.q.data() + (t * g.nk + h) * kd);
      normalise(row + cols.k0 + h * kd, 1.0, r.k.data() + (t * g.nk + h) * kd);
    }
  return r;
}

std::vector<double> gc_stage(const GdnDims& d, std::span<const double> gates) {
  const ChunkGrid grid(d);
  const uint64_t nv = d.geom.nv;
  require_size("gates", gates.size(), mul(d.rows(), 2 * nv));
  std::vector<double> gc(mul(grid.regions(), kChunk), 0.0);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t c = 0; c < grid.cps; ++c)
      for (uint64_t v = 0; v < nv; ++v) {
        double acc = 0.0;
        double* out = gc.data() + grid.region(b, c, v) * kChunk;
        for (uint64_t i = 0; i < grid.rows_in(c); ++i) {
          acc += log_alpha(gates[(grid.token(b, c, i) * nv + v) * 2 + 1]);
          out[i] = acc;
        }
      }
  return gc;
}

Wu wu_stage(const GdnDims& d, const Qk& qk, std::span<const double> conv,
            std::span<const double> gates, std::span<const double> gc) {
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv;
  require_size("gc", gc.size(), mul(grid.regions(), kChunk));
  const ConvCols cols(g);
  Wu r;
  r.W.assign(mul(grid.regions(), kChunk * kd), 0.0);
  r.U.assign(mul(grid.regions(), kChunk * vd), 0.0);
  std::vector<double> L(kChunk * kChunk);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t c = 0; c < grid.cps; ++c)
      for (uint64_t v = 0; v < nv; ++v) {
        const uint64_t reg = grid.region(b, c, v), n = grid.rows_in(c), h = key_head(g, v);
        const double* gr = gc.data() + reg * kChunk;
        auto key = [&](uint64_t i) { return k_row(qk, g, grid.token(b, c, i), h); };
        auto beta = [&](uint64_t i) { return gates[(grid.token(b, c, i) * nv + v) * 2]; };
        for (uint64_t i = 0; i < n; ++i)
          for (uint64_t l = 0; l < i; ++l)
            L[i * kChunk + l] = beta(i) * std::exp(gr[i] - gr[l]) * dot(key(i), key(l), kd);
        double* W = r.W.data() + reg * kChunk * kd;
        double* U = r.U.data() + reg * kChunk * vd;
        for (uint64_t i = 0; i < n; ++i) {
          const double* vv = conv.data() + grid.token(b, c, i) * g.conv_dim + cols.v0 + v * vd;
          const double bw = beta(i) * std::exp(gr[i]);
          for (uint64_t j = 0; j < kd; ++j) W[i * kd + j] = bw * key(i)[j];
          for (uint64_t j = 0; j < vd; ++j) U[i * vd + j] = beta(i) * vv[j];
          for (uint64_t l = 0; l < i; ++l) {
            const double a = L[i * kChunk + l];
            for (uint64_t j = 0; j < kd; ++j) W[i * kd + j] -= a * W[l * kd + j];
            for (uint64_t j = 0; j < vd; ++j) U[i * vd + j] -= a * U[l * vd + j];
          }
        }
      }
  return r;
}

StatePass state_stage(const GdnDims& d, const Qk& qk, std::span<const double> W,
                      std::span<const double> U, std::span<const double> gc,
                      std::span<const double> state_in, Carry carry,
                      std::span<const double> given_uc) {
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv, regions = grid.regions();
  require_size("W", W.size(), mul(regions, kChunk * kd));
  require_size("U", U.size(), mul(regions, kChunk * vd));
  require_size("gc", gc.size(), mul(regions, kChunk));
  require_size("state", state_in.size(), mul(mul(d.sequences, nv), kd * vd));
  if (carry == Carry::given) require_size("stored uc", given_uc.size(), mul(regions, kChunk * vd));
  StatePass r;
  r.S.assign(mul(regions, kd * vd), 0.0);
  r.uc.assign(mul(regions, kChunk * vd), 0.0);
  r.state.assign(state_in.begin(), state_in.end());
  std::vector<double> carried(kChunk * vd);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      double* S = r.state.data() + (b * nv + v) * kd * vd;
      const uint64_t h = key_head(g, v);
      for (uint64_t c = 0; c < grid.cps; ++c) {
        const uint64_t reg = grid.region(b, c, v), n = grid.rows_in(c);
        std::copy(S, S + kd * vd, r.S.data() + reg * kd * vd);
        const double* Wr = W.data() + reg * kChunk * kd;
        const double* Ur = U.data() + reg * kChunk * vd;
        double* uc = r.uc.data() + reg * kChunk * vd;
        for (uint64_t i = 0; i < n; ++i)
          for (uint64_t col = 0; col < vd; ++col) {
            double s = Ur[i * vd + col];
            for (uint64_t j = 0; j < kd; ++j) s -= Wr[i * kd + j] * S[j * vd + col];
            uc[i * vd + col] = s;
          }
        for (uint64_t e = 0; e < n * vd; ++e)
          carried[e] = carry == Carry::own           ? uc[e]
                       : carry == Carry::own_rounded ? round_bf16(uc[e])
                                                     : given_uc[reg * kChunk * vd + e];
        const double* gr = gc.data() + reg * kChunk;
        const double last = gr[n - 1], decay = std::exp(last);
        for (uint64_t e = 0; e < kd * vd; ++e) S[e] *= decay;
        for (uint64_t i = 0; i < n; ++i) {
          const double* k = k_row(qk, g, grid.token(b, c, i), h);
          const double w = std::exp(last - gr[i]);
          for (uint64_t j = 0; j < kd; ++j) {
            const double kw = k[j] * w;
            for (uint64_t col = 0; col < vd; ++col) S[j * vd + col] += kw * carried[i * vd + col];
          }
        }
      }
    }
  return r;
}

std::vector<double> output_stage(const GdnDims& d, const Qk& qk, std::span<const double> S,
                                 std::span<const double> uc, std::span<const double> gc) {
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv, regions = grid.regions();
  require_size("S", S.size(), mul(regions, kd * vd));
  require_size("uc", uc.size(), mul(regions, kChunk * vd));
  require_size("gc", gc.size(), mul(regions, kChunk));
  std::vector<double> out(mul(d.rows(), nv * vd), 0.0);
  for_each_output_row(d, qk, S, uc, gc, [&](const OutputRow& row) {
    const auto [Sr, ur, gr] = row.at;
    const double* q = row.q;
    double* o = out.data() + row.t * nv * vd + row.v * vd;
    const double e = std::exp(gr[row.i]);
    for (uint64_t j = 0; j < kd; ++j)
      for (uint64_t col = 0; col < vd; ++col) o[col] += e * q[j] * Sr[j * vd + col];
    for (uint64_t l = 0; l <= row.i; ++l) {
      const double* k = k_row(qk, g, row.token_of(l), row.h);
      const double a = std::exp(gr[row.i] - gr[l]) * dot(q, k, kd);
      for (uint64_t col = 0; col < vd; ++col) o[col] += a * ur[l * vd + col];
    }
  });
  return out;
}

Recurrence recurrence_stage(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                            std::span<const double> gates, std::span<const double> state_in) {
  const GdnGeometry& g = d.geom;
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv;
  require_size("gates", gates.size(), mul(d.rows(), 2 * nv));
  require_size("state", state_in.size(), mul(mul(d.sequences, nv), kd * vd));
  const ConvCols cols(g);
  Recurrence r;
  r.o.assign(mul(d.rows(), nv * vd), 0.0);
  r.state.assign(state_in.begin(), state_in.end());
  std::vector<double> delta(vd);
  for (uint64_t b = 0; b < d.sequences; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      double* S = r.state.data() + (b * nv + v) * kd * vd;
      const uint64_t h = key_head(g, v);
      for (uint64_t t = b * d.L; t < (b + 1) * d.L; ++t) {
        const double* k = k_row(qk, g, t, h);
        const double* q = q_row(qk, g, t, h);
        const double* vv = conv.data() + t * g.conv_dim + cols.v0 + v * vd;
        const double beta = gates[(t * nv + v) * 2], alpha = gates[(t * nv + v) * 2 + 1];
        for (uint64_t col = 0; col < vd; ++col) {
          double y = 0.0;
          for (uint64_t j = 0; j < kd; ++j) y += S[j * vd + col] * k[j];
          delta[col] = beta * (vv[col] - alpha * y);
        }
        for (uint64_t j = 0; j < kd; ++j)
          for (uint64_t col = 0; col < vd; ++col)
            S[j * vd + col] = alpha * S[j * vd + col] + k[j] * delta[col];
        double* o = r.o.data() + t * nv * vd + v * vd;
        for (uint64_t j = 0; j < kd; ++j)
          for (uint64_t col = 0; col < vd; ++col) o[col] += S[j * vd + col] * q[j];
      }
    }
  return r;
}

std::vector<double> gated_norm_stage(const GdnDims& d, std::span<const double> core,
                                     std::span<const uint16_t> deint,
                                     std::span<const uint16_t> norm_w) {
  const GdnGeometry& g = d.geom;
  const uint64_t rows = d.rows(), nv = g.nv, vd = g.vd;
  require_size("core output", core.size(), mul(rows, nv * vd));
  require_size("deint", deint.size(), mul(rows, g.qkvz));
  require_size("norm_w", norm_w.size(), vd);
  std::vector<double> y(core.size());
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t v = 0; v < nv; ++v) {
      const double* o = core.data() + t * nv * vd + v * vd;
      const double r = 1.0 / std::sqrt(dot(o, o, vd) / static_cast<double>(vd) + d.eps);
      for (uint64_t j = 0; j < vd; ++j) {
        const double z = bf16_bits_to_f32(deint[t * g.qkvz + g.conv_dim + v * vd + j]);
        y[t * nv * vd + v * vd + j] = o[j] * r * bf16_bits_to_f32(norm_w[j]) * silu(z);
      }
    }
  return y;
}

}  // namespace bufferlab::oracle::gdn_detail
