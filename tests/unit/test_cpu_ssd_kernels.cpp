// CpuBackend's Mamba-2 kernels (spec/numerics.md §6, core ops/mamba2.h) on small cases against
// plain double loops written here. Every tolerance is derived next to its check from the FP32
// (u = 2^-24) and BF16 (u8 = 2^-8) unit roundoffs; none is tuned:
//   - conv1d: γ_(K+1) of the tap magnitudes through silu, plus its BF16 store; the new tail
//     state bit for bit (it is a copy of BF16 inputs), L < K−1 included;
//   - cumsum: dt inside the clamp of the FP32 softplus interval (huge, tiny, > 20 inputs),
//     dA_cumsum γ_(i+3) of Σ|dt·A| from the STORED dt, zeros past a partial chunk;
//   - bmm: γ_N of Σ|C·B| over the full square, zeros outside;
//   - scan: from the STORED dt / dA_cumsum / CB, a first-order bound that carries the FP32
//     error of the state from chunk to chunk (output and final state);
//   - recurrence: a first-order bound through the dt, decay and state errors per token;
//   - chunked (3 stages) and recurrence each against the exact double recurrence under a written
//     chain bound; gated norm; M-SSDSTATE; the configuration errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Stage = SsdChunkOp::Stage;

constexpr uint64_t kC = SsdCarve::kChunk;
constexpr double kU = 0x1p-24;         // FP32 unit roundoff
constexpr double kU8 = 0x1p-8;         // BF16 unit roundoff (8 significant bits, round to nearest)
constexpr double kSecondOrder = 1.01;  // covers the products of first-order terms in a bound

double gamma(double n) { return n * kU / (1.0 - n * kU); }
uint16_t bf(float v) { return f32_to_bf16_bits(v); }
double fl(uint16_t b) { return bf16_bits_to_f32(b); }
double silu(double z) { return z / (1.0 + std::exp(-z)); }

// A stored BF16 value within `err` (the FP32 error before the store) of `ref`: the RNE store
// adds at most u8 of the FP32 value, itself within |ref| + err.
double bf16_tol(double ref, double err) {
  return kSecondOrder * (err + kU8 * (std::fabs(ref) + err));
}

// A backend and a workspace whose arena holds every arena tensor of the given accesses and a
// weight pool of `pool_bytes`; the arena is poisoned (NaN) so an unwritten output fails.
struct Rig {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  Workspace ws;

  Rig(const std::vector<std::vector<Access>>& ops, uint64_t pool_bytes) {
    BufferSizes sizes;
    for (const auto& accesses : ops)
      for (const Access& a : accesses) {
        if (a.tensor.space != Space::arena) continue;
        uint64_t& bytes = sizes.bytes(a.tensor.buffer);
        bytes = std::max(bytes, a.tensor.offset + a.tensor.bytes());
      }
    ws = backend->allocate(Layout::build(sizes), pool_bytes);
    backend->poison(ws);
  }
  template <class T>
  void put(const TensorRef& t, const std::vector<T>& host) {
    ASSERT_EQ(host.size() * sizeof(T), t.bytes()) << t.to_string();
    backend->upload(ws, t, host.data());
  }
  template <class T>
  std::vector<T> get(const TensorRef& t) {
    std::vector<T> host(t.bytes() / sizeof(T));
    backend->download(ws, t, host.data());
    return host;
  }
};

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n deterministic values in [offset − scale, offset + scale), on a grid of 2^16 steps.
Floats values(uint64_t n, uint64_t seed, float scale, float offset = 0.0f) {
  Floats v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const auto q = static_cast<int64_t>(mix64(i * 0x100000001B3ull + seed) >> 48) - 32768;
    v[i] = offset + scale * static_cast<float>(q) / 32768.0f;
  }
  return v;
}

Bits bf16_values(uint64_t n, uint64_t seed, float scale, float offset = 0.0f) {
  Bits b(n);
  const Floats v = values(n, seed, scale, offset);
  for (uint64_t i = 0; i < n; ++i) b[i] = bf(v[i]);
  return b;
}

Mamba2Geometry geometry(uint64_t H, uint64_t P, uint64_t N, uint64_t groups, uint64_t K = 4) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.mamba_num_heads = H;
  c.mamba_head_dim = P;
  c.ssm_state_size = N;
  c.n_groups = groups;
  c.conv_kernel = K;
  return Mamba2Geometry::of(c);
}

// ============================================================== inputs and the exact recurrence

// One layer's SSD inputs for S sequences of L tokens: in_proj rows (dt_raw at d_inner + d_xbc
// + h), the conv output xBC, the f32 weights and the initial states [S, H, P, N]. dt_raw in
// [−4, −2] and A_log in [−2, 0] keep dt·|A| ≤ 0.13: a chunk decays by e^-0.15 .. e^-8, so the
// state carried between chunks is visible in y.
struct SsdInputs {
  Mamba2Geometry g;
  uint64_t S = 1, L = 0;
  Bits zxbcdt, xbc;
  Floats a_log, dt_bias, D, state;

  uint64_t rows() const { return S * L; }
  uint64_t group(uint64_t h) const { return h / (g.H / g.G); }
  double raw(uint64_t r, uint64_t h) const {
    return fl(zxbcdt[r * g.in_proj + g.d_inner + g.d_xbc + h]);
  }
  double x(uint64_t r, uint64_t h, uint64_t p) const { return fl(xbc[r * g.d_xbc + h * g.P + p]); }
  double B(uint64_t r, uint64_t grp, uint64_t n) const {
    return fl(xbc[r * g.d_xbc + g.d_inner + grp * g.N + n]);
  }
  double C(uint64_t r, uint64_t grp, uint64_t n) const {
    return fl(xbc[r * g.d_xbc + g.d_inner + g.G * g.N + grp * g.N + n]);
  }
  double A(uint64_t h) const { return -std::exp(double{a_log[h]}); }
};

SsdInputs ssd_inputs(const Mamba2Geometry& g, uint64_t S, uint64_t L, uint64_t seed) {
  SsdInputs in;
  in.g = g;
  in.S = S;
  in.L = L;
  const uint64_t rows = S * L;
  in.zxbcdt = bf16_values(rows * g.in_proj, seed, 1.0f);
  const Bits raw = bf16_values(rows * g.H, seed + 1, 1.0f, -3.0f);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t h = 0; h < g.H; ++h)
      in.zxbcdt[r * g.in_proj + g.d_inner + g.d_xbc + h] = raw[r * g.H + h];
  in.xbc = bf16_values(rows * g.d_xbc, seed + 2, 1.0f);
  in.a_log = values(g.H, seed + 3, 1.0f, -1.0f);
  in.dt_bias = values(g.H, seed + 4, 0.25f, -0.25f);
  in.D = values(g.H, seed + 5, 1.0f);
  in.state = values(S * g.H * g.P * g.N, seed + 6, 0.5f);
  return in;
}

double softplus(double v) { return v > double{kSoftplusThreshold} ? v : std::log1p(std::exp(v)); }
double clamp_dt(double v) { return std::clamp(v, double{kSsdDtMin}, double{kSsdDtMax}); }

// dt's relative FP32 error: the add v = raw + bias is within u|v|, carried by softplus' slope
// σ(v), and σ(v)·|v| ≤ softplus(v)·(v > 0 ? 1 : |v|) (σ ≤ 1 ≤ softplus/v above 0, σ ≤ softplus
// below); expf and log1pf add 2u each (the exp error through log1p again scaled by σ ≤
// softplus). Above 20 softplus is v itself. The clamp only shrinks the error.
double dt_relative_error(double v) { return kU * ((v > 0.0 ? 1.0 : std::fabs(v)) + 4.0); }

// The interval holding the FP32 dt: the clamp is monotone, so dt lies between the clamps of the
// FP32 softplus interval's ends.
struct DtInterval {
  double lo, hi, ref;
};
DtInterval dt_interval(double raw, float bias) {
  const double v = raw + double{bias};
  const double sp = softplus(v);
  const double e = kSecondOrder * dt_relative_error(v);
  return {clamp_dt(sp * (1.0 - e)), clamp_dt(sp * (1.0 + e)), clamp_dt(sp)};
}

// The definition in double (numerics §6), token by token per (sequence, head), with the
// magnitudes every chain bound scales: y_abs = Σ_n |h|·|C| + |D·x| with |h| carried as
// exp(dt·A)·|h| + dt·|x|·|B|; S_dA = max over (sequence, head) of Σ_t |dt_t·A|; R = max |v|.
struct RecRef {
  Doubles y, y_abs;          // [rows, d_inner]
  Doubles state, state_abs;  // [S, H, P, N]
  double sum_da = 0.0, max_v = 0.0;
};

RecRef recurrence_reference(const SsdInputs& in) {
  const auto& g = in.g;
  const uint64_t P = g.P, N = g.N;
  RecRef ref;
  ref.y.assign(in.rows() * g.d_inner, 0.0);
  ref.y_abs = ref.y;
  ref.state.assign(in.state.begin(), in.state.end());
  for (double& v : ref.state_abs = ref.state) v = std::fabs(v);
  for (uint64_t s = 0; s < in.S; ++s)
    for (uint64_t h = 0; h < g.H; ++h) {
      const uint64_t grp = in.group(h);
      double* st = ref.state.data() + (s * g.H + h) * P * N;
      double* sa = ref.state_abs.data() + (s * g.H + h) * P * N;
      double sum_da = 0.0;
      for (uint64_t i = 0; i < in.L; ++i) {
        const uint64_t r = s * in.L + i;
        const double v = in.raw(r, h) + double{in.dt_bias[h]};
        ref.max_v = std::max(ref.max_v, std::fabs(v));
        const double dt = clamp_dt(softplus(v));
        sum_da += std::fabs(dt * in.A(h));
        const double decay = std::exp(dt * in.A(h));
        for (uint64_t p = 0; p < P; ++p) {
          const double xp = in.x(r, h, p);
          double y = double{in.D[h]} * xp, ya = std::fabs(y);
          for (uint64_t n = 0; n < N; ++n) {
            double& hv = st[p * N + n];
            hv = decay * hv + dt * xp * in.B(r, grp, n);
            sa[p * N + n] = decay * sa[p * N + n] + std::fabs(dt * xp * in.B(r, grp, n));
            y += hv * in.C(r, grp, n);
            ya += sa[p * N + n] * std::fabs(in.C(r, grp, n));
          }
          ref.y[r * g.d_inner + h * P + p] = y;
          ref.y_abs[r * g.d_inner + h * P + p] = ya;
        }
      }
      ref.sum_da = std::max(ref.sum_da, sum_da);
    }
  return ref;
}

// The written chain bound of either path against the exact recurrence, relative to the
// magnitudes: dt's relative error u(R + 4); every exponent (a stored cumsum of ≤ 64 products
// or a product of per-token exps) off by at most 3·S_dA·(u(R + 4) + γ_67) in all, plus 2u per
// exp; the products and sums of one chunk γ_(N + 80), compounded over the chunks (and γ_(5L)
// for the token-by-token path). ρ·magnitude, then the BF16 store for y.
double chain_rho(const SsdInputs& in, const RecRef& ref) {
  const double chunks = static_cast<double>(cdiv(in.L, kC));
  const double dt_rel = kU * (ref.max_v + 4.0);
  return kSecondOrder * (dt_rel + 3.0 * ref.sum_da * (dt_rel + gamma(67)) +
                         gamma(chunks * (static_cast<double>(in.g.N) + 80.0) +
                               5.0 * static_cast<double>(in.L) + static_cast<double>(in.g.N)));
}

// ============================================================== runs

struct ChunkRun {
  uint64_t nc = 0;
  Floats dt, da, cb, state;  // dt / da from the span base: element (h·nc + c)·64 + i
  Bits y;                    // [L, d_inner]
};

// The three stages of one sequence (S = 1) at rows [row0, row0 + L), on one workspace.
ChunkRun run_chunked(const SsdInputs& in, uint64_t row0 = 0, Mutant mutant = Mutant::none,
                     uint64_t extra_nc = 1) {
  ChunkRun run;
  run.nc = cdiv(in.L, kC) + extra_nc;
  SsdChunkOp cumsum = SsdChunkOp::make(Stage::cumsum, in.g, row0, in.L, run.nc);
  const uint64_t pool =
      oracle::place_in_pool({&cumsum.a_log, &cumsum.dt_bias, &cumsum.D, &cumsum.state});
  SsdChunkOp bmm = cumsum, scan = cumsum;
  bmm.stage = Stage::bmm;
  scan.stage = Stage::scan;
  Rig rig({cumsum.accesses(), bmm.accesses(), scan.accesses()}, pool);
  rig.backend->set_kernel_mutant(mutant);
  rig.put(cumsum.zxbcdt_rows(), in.zxbcdt);
  rig.put(cumsum.xbc_rows(), in.xbc);
  rig.put(cumsum.a_log, in.a_log);
  rig.put(cumsum.dt_bias, in.dt_bias);
  rig.put(cumsum.D, in.D);
  rig.put(cumsum.state, in.state);
  rig.backend->ssd_chunk(rig.ws, cumsum);
  rig.backend->ssd_chunk(rig.ws, bmm);
  rig.backend->ssd_chunk(rig.ws, scan);
  run.dt = rig.get<float>(cumsum.dt_span());
  run.da = rig.get<float>(cumsum.da_span());
  run.cb = rig.get<float>(cumsum.cb());
  run.state = rig.get<float>(cumsum.state);
  run.y = rig.get<uint16_t>(cumsum.output_rows());
  return run;
}

struct RecRun {
  Floats state;
  Bits y;
};

RecRun run_recurrent(const SsdInputs& in, uint64_t row0 = 0) {
  Mamba2RecurrentOp op = Mamba2RecurrentOp::make(in.g, row0, in.rows(), in.S);
  const uint64_t pool = oracle::place_in_pool({&op.state, &op.a_log, &op.dt_bias, &op.D});
  Rig rig({op.accesses()}, pool);
  rig.put(op.zxbcdt, in.zxbcdt);
  rig.put(op.xbc, in.xbc);
  rig.put(op.a_log, in.a_log);
  rig.put(op.dt_bias, in.dt_bias);
  rig.put(op.D, in.D);
  rig.put(op.state, in.state);
  rig.backend->mamba2_recurrent(rig.ws, op);
  return {rig.get<float>(op.state), rig.get<uint16_t>(op.output)};
}

// ============================================================== checks

// Counts failed element checks and keeps the first description (built only on failure).
struct Mismatches {
  uint64_t count = 0;
  std::string first;
  template <class Describe>
  void expect(bool ok, Describe describe) {
    if (!ok && count++ == 0) first = describe();
  }
};

bool near(double got, double ref, double tol) { return std::fabs(got - ref) <= tol; }

std::string at(const char* what, uint64_t a, uint64_t b, uint64_t c, double got, double ref,
               double tol) {
  return std::string(what) + "[" + std::to_string(a) + "][" + std::to_string(b) + "][" +
         std::to_string(c) + "] = " + std::to_string(got) + ", want " + std::to_string(ref) +
         " ± " + std::to_string(tol);
}

uint64_t chunk_rows(uint64_t L, uint64_t c) { return std::min(kC, L - c * kC); }

// cumsum: each stored dt inside its clamped FP32 interval; dA_cumsum from the STORED dt within
// γ_(i+3)·Σ_{j≤i} |dt_j·A| (A = −expf: 2u, each product u, i sequential adds); every element past
// the valid rows of a chunk exactly 0. dt / dA of head h, chunk c at (h·nc + c)·64.
void check_cumsum(const SsdInputs& in, const ChunkRun& run) {
  Mismatches bad;
  for (uint64_t h = 0; h < in.g.H; ++h)
    for (uint64_t c = 0; c < cdiv(in.L, kC); ++c) {
      const uint64_t base = (h * run.nc + c) * kC, q = chunk_rows(in.L, c);
      double cs = 0.0, cs_abs = 0.0;
      for (uint64_t i = 0; i < kC; ++i) {
        const double dt = run.dt[base + i], da = run.da[base + i];
        if (i >= q) {
          bad.expect(dt == 0.0 && da == 0.0, [&] { return at("tail dt|dA", h, c, i, dt, 0, 0); });
          continue;
        }
        const DtInterval iv = dt_interval(in.raw(c * kC + i, h), in.dt_bias[h]);
        bad.expect(dt >= iv.lo && dt <= iv.hi,
                   [&] { return at("dt", h, c, i, dt, iv.ref, iv.hi - iv.lo); });
        cs += dt * in.A(h);
        cs_abs += std::fabs(dt * in.A(h));
        const double tol = kSecondOrder * gamma(static_cast<double>(i + 3)) * cs_abs;
        bad.expect(near(da, cs, tol), [&] { return at("dA_cumsum", h, c, i, da, cs, tol); });
      }
    }
  EXPECT_EQ(bad.count, 0u) << bad.first;
}

// bmm: CB[c][g][t][s] = Σ_n C_t·B_s over the valid square within γ_N·Σ|C·B|, 0 elsewhere.
void check_cb(const SsdInputs& in, const ChunkRun& run) {
  const auto& g = in.g;
  Mismatches bad;
  for (uint64_t c = 0; c < cdiv(in.L, kC); ++c)
    for (uint64_t grp = 0; grp < g.G; ++grp) {
      const float* cb = run.cb.data() + (c * g.G + grp) * kC * kC;
      const uint64_t q = chunk_rows(in.L, c), r0 = c * kC;
      for (uint64_t t = 0; t < kC; ++t)
        for (uint64_t s = 0; s < kC; ++s) {
          const double got = cb[t * kC + s];
          double ref = 0.0, abs = 0.0;
          if (t < q && s < q)
            for (uint64_t n = 0; n < g.N; ++n) {
              ref += in.C(r0 + t, grp, n) * in.B(r0 + s, grp, n);
              abs += std::fabs(in.C(r0 + t, grp, n) * in.B(r0 + s, grp, n));
            }
          const double tol = kSecondOrder * gamma(static_cast<double>(g.N)) * abs;
          bad.expect(near(got, ref, tol),
                     [&] { return at("CB", c * g.G + grp, t, s, got, ref, tol); });
        }
    }
  EXPECT_EQ(bad.count, 0u) << bad.first;
}

// scan, from the STORED dt, dA_cumsum and CB, chunk by chunk with the double carry h0 and E, a
// bound on |h0_fp32 − h0| carried alongside:
//   y: the dot C·h0 (γ_N), exp(min(cs_t, 0)) (2u) and its product, each intra term's exp (2u),
//      two products and the rounded exponent difference (u·|cs_t − cs_s| relative), their sum
//      (γ_64), D·x and the two adds: γ_(N+72) of the magnitudes + u·Σ|term|·|Δcs| +
//      e_t·Σ|C|·E; then the BF16 store;
//   h0 ← decay·h0 + Σ_s w_s·B_s·x_s: decay·E (exp and product, 3u) + γ_(q+6) of the magnitudes
//      (|h0| + E included) + u·Σ|term|·|cs_last − cs_s|.
// `reset`: the M-SSDSTATE semantics (h0 and E restart from zero in every chunk after the first).
void check_scan(const SsdInputs& in, const ChunkRun& run, bool reset = false) {
  const auto& g = in.g;
  const uint64_t P = g.P, N = g.N;
  const double gy = gamma(static_cast<double>(N + 72));
  Mismatches bad_y, bad_state;
  for (uint64_t h = 0; h < g.H; ++h) {
    const uint64_t grp = in.group(h);
    Doubles h0(in.state.begin() + h * P * N, in.state.begin() + (h + 1) * P * N);
    Doubles E(P * N, 0.0);
    for (uint64_t c = 0; c < cdiv(in.L, kC); ++c) {
      if (reset && c > 0) {
        std::fill(h0.begin(), h0.end(), 0.0);
        std::fill(E.begin(), E.end(), 0.0);
      }
      const uint64_t q = chunk_rows(in.L, c), r0 = c * kC, base = (h * run.nc + c) * kC;
      const float* cb = run.cb.data() + (c * g.G + grp) * kC * kC;
      const auto cs = [&](uint64_t i) { return double{run.da[base + i]}; };
      const auto dt = [&](uint64_t i) { return double{run.dt[base + i]}; };
      for (uint64_t t = 0; t < q; ++t) {
        const double et = std::exp(std::min(cs(t), 0.0));
        for (uint64_t p = 0; p < P; ++p) {
          double inter = 0.0, inter_abs = 0.0, inter_err = 0.0;
          for (uint64_t n = 0; n < N; ++n) {
            const double cn = in.C(r0 + t, grp, n);
            const uint64_t k = p * N + n;
            inter += cn * h0[k];
            inter_abs += std::fabs(cn) * (std::fabs(h0[k]) + E[k]);
            inter_err += std::fabs(cn) * E[k];
          }
          double intra = 0.0, intra_abs = 0.0, intra_dcs = 0.0;
          for (uint64_t s = 0; s <= t; ++s) {
            const double term = double{cb[t * kC + s]} * std::exp(std::min(cs(t) - cs(s), 0.0)) *
                                dt(s) * in.x(r0 + s, h, p);
            intra += term;
            intra_abs += std::fabs(term);
            intra_dcs += std::fabs(term) * std::fabs(cs(t) - cs(s));
          }
          const double dx = double{in.D[h]} * in.x(r0 + t, h, p);
          const double y = et * inter + intra + dx;
          const double err = gy * (et * inter_abs + intra_abs + std::fabs(dx)) + kU * intra_dcs +
                             et * inter_err * (1.0 + gy);
          const double got = fl(run.y[(r0 + t) * g.d_inner + h * P + p]);
          const double tol = bf16_tol(y, err);
          bad_y.expect(near(got, y, tol), [&] { return at("y", r0 + t, h, p, got, y, tol); });
        }
      }
      const double cl = cs(q - 1), decay = std::exp(std::min(cl, 0.0));
      const double gs = gamma(static_cast<double>(q + 6));
      for (uint64_t p = 0; p < P; ++p)
        for (uint64_t n = 0; n < N; ++n) {
          double upd = 0.0, upd_abs = 0.0, upd_dcs = 0.0;
          for (uint64_t s = 0; s < q; ++s) {
            const double term = std::exp(std::min(cl - cs(s), 0.0)) * dt(s) * in.B(r0 + s, grp, n) *
                                in.x(r0 + s, h, p);
            upd += term;
            upd_abs += std::fabs(term);
            upd_dcs += std::fabs(term) * std::fabs(cl - cs(s));
          }
          const uint64_t k = p * N + n;
          E[k] = decay * E[k] * (1.0 + 3.0 * kU) +
                 gs * (decay * (std::fabs(h0[k]) + E[k]) + upd_abs) + kU * upd_dcs;
          h0[k] = decay * h0[k] + upd;
        }
    }
    for (uint64_t k = 0; k < P * N; ++k) {
      const double got = run.state[h * P * N + k], tol = kSecondOrder * E[k];
      bad_state.expect(near(got, h0[k], tol),
                       [&] { return at("state", h, k / N, k % N, got, h0[k], tol); });
    }
  }
  EXPECT_EQ(bad_y.count, 0u) << bad_y.first;
  EXPECT_EQ(bad_state.count, 0u) << bad_state.first;
}

// The recurrence kernel against the definition, per token: dt relative δ (see
// dt_relative_error); exp(dt·A) relative ρ = |dt·A|·(δ + 3u) + 2u (A: 2u, the product u, expf 2u);
// h ← decay·h + (dt·x)·B with E ← decay·E + decay·(|h| + E)·(ρ + 2u) + |dt·x·B|·(δ + 3u);
// y = h·C + D·x within Σ|C|·E + γ_(N+2) of the magnitudes; then the BF16 store.
void check_recurrent(const SsdInputs& in, const RecRun& run) {
  const auto& g = in.g;
  const uint64_t P = g.P, N = g.N;
  const double gy = gamma(static_cast<double>(N + 2));
  Mismatches bad_y, bad_state;
  for (uint64_t s = 0; s < in.S; ++s)
    for (uint64_t h = 0; h < g.H; ++h) {
      const uint64_t grp = in.group(h), off = (s * g.H + h) * P * N;
      Doubles st(in.state.begin() + off, in.state.begin() + off + P * N), E(P * N, 0.0);
      for (uint64_t i = 0; i < in.L; ++i) {
        const uint64_t r = s * in.L + i;
        const double v = in.raw(r, h) + double{in.dt_bias[h]};
        const double dt = clamp_dt(softplus(v)), delta = dt_relative_error(v);
        const double decay = std::exp(dt * in.A(h));
        const double rho = std::fabs(dt * in.A(h)) * (delta + 3.0 * kU) + 2.0 * kU;
        for (uint64_t p = 0; p < P; ++p) {
          const double xp = in.x(r, h, p);
          double y = 0.0, y_abs = 0.0, y_err = 0.0;
          for (uint64_t n = 0; n < N; ++n) {
            const uint64_t k = p * N + n;
            const double add = dt * xp * in.B(r, grp, n);
            E[k] = decay * E[k] + decay * (std::fabs(st[k]) + E[k]) * (rho + 2.0 * kU) +
                   std::fabs(add) * (delta + 3.0 * kU);
            st[k] = decay * st[k] + add;
            const double cn = in.C(r, grp, n);
            y += st[k] * cn;
            y_abs += (std::fabs(st[k]) + E[k]) * std::fabs(cn);
            y_err += E[k] * std::fabs(cn);
          }
          const double dx = double{in.D[h]} * xp;
          y += dx;
          const double err = y_err + gy * (y_abs + std::fabs(dx));
          const double got = fl(run.y[r * g.d_inner + h * P + p]), tol = bf16_tol(y, err);
          bad_y.expect(near(got, y, tol), [&] { return at("y", r, h, p, got, y, tol); });
        }
      }
      for (uint64_t k = 0; k < P * N; ++k) {
        const double got = run.state[off + k], tol = kSecondOrder * E[k];
        bad_state.expect(near(got, st[k], tol),
                         [&] { return at("state", s * g.H + h, k / N, k % N, got, st[k], tol); });
      }
    }
  EXPECT_EQ(bad_y.count, 0u) << bad_y.first;
  EXPECT_EQ(bad_state.count, 0u) << bad_state.first;
}

// Either path's y and final state against the exact recurrence under the chain bound.
void check_chain(const SsdInputs& in, const RecRef& ref, const Bits& y, const Floats& state,
                 const char* path) {
  SCOPED_TRACE(path);
  const double rho = chain_rho(in, ref);
  Mismatches bad;
  for (uint64_t i = 0; i < y.size(); ++i) {
    const double got = fl(y[i]), tol = bf16_tol(ref.y[i], rho * ref.y_abs[i]);
    bad.expect(near(got, ref.y[i], tol),
               [&] { return at("y", i / in.g.d_inner, 0, i % in.g.d_inner, got, ref.y[i], tol); });
  }
  for (uint64_t k = 0; k < state.size(); ++k) {
    const double got = state[k], tol = rho * ref.state_abs[k];
    bad.expect(near(got, ref.state[k], tol),
               [&] { return at("state", 0, 0, k, got, ref.state[k], tol); });
  }
  EXPECT_EQ(bad.count, 0u) << bad.first;
}

// ============================================================== chunked SSD

struct ScanCase {
  uint64_t H, P, N, G, L, row0;
};

// L = 1, 63, 64, 65, 127; H/G = 1 and 2; P ≠ N both ways; nonzero initial states; row0 ≠ 0.
constexpr ScanCase kScanCases[] = {
    {2, 8, 16, 2, 1, 0},  {4, 16, 8, 2, 63, 0},   {2, 8, 16, 1, 64, 0},
    {4, 16, 8, 2, 65, 3}, {2, 24, 16, 1, 127, 0},
};

std::string describe(const ScanCase& k) {
  return "H=" + std::to_string(k.H) + " P=" + std::to_string(k.P) + " N=" + std::to_string(k.N) +
         " G=" + std::to_string(k.G) + " L=" + std::to_string(k.L) +
         " row0=" + std::to_string(k.row0);
}

TEST(CpuSsdChunk, StagesMatchDoubleLoops) {
  uint64_t seed = 100;
  for (const ScanCase& k : kScanCases) {
    SCOPED_TRACE(describe(k));
    const SsdInputs in = ssd_inputs(geometry(k.H, k.P, k.N, k.G), 1, k.L, seed += 10);
    const ChunkRun run = run_chunked(in, k.row0);
    check_cumsum(in, run);
    check_cb(in, run);
    check_scan(in, run);
  }
}

// P = N = kMaxSsdDim: the kernels' largest stack panels, two chunks.
TEST(CpuSsdChunk, LargestHeadDimAndStateSize) {
  const SsdInputs in = ssd_inputs(geometry(1, kMaxSsdDim, kMaxSsdDim, 1), 1, 65, 7);
  const ChunkRun run = run_chunked(in);
  check_cb(in, run);
  check_scan(in, run);
}

TEST(CpuSsdChunk, ChunkedAndRecurrenceAgreeWithTheDefinition) {
  uint64_t seed = 200;
  for (const ScanCase& k : kScanCases) {
    SCOPED_TRACE(describe(k));
    const SsdInputs in = ssd_inputs(geometry(k.H, k.P, k.N, k.G), 1, k.L, seed += 10);
    const RecRef ref = recurrence_reference(in);
    const ChunkRun chunked = run_chunked(in, k.row0);
    const RecRun rec = run_recurrent(in, k.row0);
    check_chain(in, ref, chunked.y, chunked.state, "chunked");
    check_chain(in, ref, rec.y, rec.state, "recurrent");
  }
}

// dt clamps (huge raw → 1e9, hugely negative → 1e-9), both softplus branches around 20, a
// partial last chunk (L = 65) and nc above the chunk count (the head stride is nc, not chunks).
TEST(CpuSsdCumsum, ClampsThresholdAndPartialChunk) {
  SsdInputs in = ssd_inputs(geometry(3, 8, 16, 1), 1, 65, 31);
  // 95 and 1000: exp overflows FP32 there, so only the threshold branch gives dt = v (any
  // threshold in ~17..88 rounds alike in FP32).
  const float special[] = {3e38f, -3e38f, 25.0f, 20.5f, 19.5f, -25.0f, 0.0f, 95.0f, 1000.0f};
  const auto set_raw = [&](uint64_t r, uint64_t h, float v) {
    in.zxbcdt[r * in.g.in_proj + in.g.d_inner + in.g.d_xbc + h] = bf(v);
  };
  for (uint64_t i = 0; i < std::size(special); ++i) {
    set_raw(i + 1, 0, special[i]);
    set_raw(64 - i, 2, special[i]);  // head 2: the end of chunk 0 and chunk 1's one row
  }
  const ChunkRun run = run_chunked(in, 0, Mutant::none, 2);
  check_cumsum(in, run);
  // The clamps hit exactly.
  EXPECT_EQ(run.dt[1], kSsdDtMax);
  EXPECT_EQ(run.dt[2], kSsdDtMin);
  EXPECT_EQ(run.dt[(2 * run.nc + 1) * kC], kSsdDtMax);  // head 2, chunk 1, row 64
  EXPECT_EQ(run.dt[2 * run.nc * kC + 63], kSsdDtMin);   // head 2, chunk 0, row 63
}

// ============================================================== recurrence

TEST(CpuSsdRecurrent, DecodeBatchAndSequencesMatchDoubleLoops) {
  {
    SCOPED_TRACE("decode batch: 3 sequences of one token");
    const SsdInputs in = ssd_inputs(geometry(4, 16, 8, 2), 3, 1, 41);
    check_recurrent(in, run_recurrent(in, 2));
  }
  {
    SCOPED_TRACE("2 sequences of 5 tokens, H/G = 1");
    const SsdInputs in = ssd_inputs(geometry(2, 8, 16, 2), 2, 5, 43);
    check_recurrent(in, run_recurrent(in));
  }
}

// ============================================================== M-SSDSTATE

TEST(CpuSsdMutant, SsdStateDropsTheCarryOnlyAfterTheFirstChunk) {
  const Mamba2Geometry g = geometry(2, 8, 16, 1);
  {
    SCOPED_TRACE("L = 64: one chunk, nothing to drop");
    const SsdInputs in = ssd_inputs(g, 1, 64, 51);
    const ChunkRun ok = run_chunked(in), mut = run_chunked(in, 0, Mutant::M_SSDSTATE);
    EXPECT_EQ(mut.y, ok.y);
    EXPECT_EQ(mut.state, ok.state);
  }
  SCOPED_TRACE("L = 127");
  const SsdInputs in = ssd_inputs(g, 1, 127, 53);
  const ChunkRun ok = run_chunked(in), mut = run_chunked(in, 0, Mutant::M_SSDSTATE);
  check_scan(in, mut, /*reset=*/true);
  const uint64_t first = kC * g.d_inner;
  EXPECT_TRUE(std::equal(ok.y.begin(), ok.y.begin() + first, mut.y.begin()));
  double max_diff = 0.0, max_y = 0.0;
  for (uint64_t i = first; i < ok.y.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(fl(ok.y[i]) - fl(mut.y[i])));
    max_y = std::max(max_y, std::fabs(fl(ok.y[i])));
  }
  EXPECT_GT(max_diff, 16 * kU8 * max_y) << "the dropped carry must show beyond rounding";
}

// ============================================================== conv1d

struct ConvRun {
  Bits out, state;
};

ConvRun run_conv(const Mamba2Geometry& g, uint64_t S, uint64_t L, const Bits& input,
                 const Bits& weight, const Bits& bias, const Bits& state) {
  Mamba2ConvOp op = Mamba2ConvOp::make(g, S * L, S);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.bias, &op.state});
  Rig rig({op.accesses()}, pool);
  rig.put(op.input, input);
  rig.put(op.weight, weight);
  rig.put(op.bias, bias);
  rig.put(op.state, state);
  rig.backend->mamba2_conv(rig.ws, op);
  return {rig.get<uint16_t>(op.output), rig.get<uint16_t>(op.state)};
}

// out = silu(bias + Σ_j w_j·x_j) over [tail | rows]: the FP32 sum within γ_(K+1) of the
// magnitudes, through silu' ≤ 1.1, silu itself 4u relative (expf 2u, add, division), the BF16
// store; the new tail = the last K−1 of [tail | rows], bit for bit.
void check_conv(uint64_t S, uint64_t L, uint64_t K, uint64_t seed) {
  SCOPED_TRACE("S=" + std::to_string(S) + " L=" + std::to_string(L) + " K=" + std::to_string(K));
  const Mamba2Geometry g = geometry(4, 16, 8, 2, K);  // 96 channels: two blocks of the kernel
  const uint64_t ch = g.d_xbc, T = K - 1;
  const Bits input = bf16_values(S * L * g.in_proj, seed, 1.0f);
  const Bits weight = bf16_values(ch * K, seed + 1, 0.5f);
  const Bits bias = bf16_values(ch, seed + 2, 0.5f);
  const Bits state = bf16_values(S * ch * T, seed + 3, 1.0f);
  const ConvRun run = run_conv(g, S, L, input, weight, bias, state);
  const auto concat = [&](uint64_t s, uint64_t c, uint64_t q) {  // element q of [tail | rows]
    return q < T ? state[(s * ch + c) * T + q] : input[(s * L + q - T) * g.in_proj + g.d_inner + c];
  };
  Mismatches bad;
  for (uint64_t s = 0; s < S; ++s)
    for (uint64_t c = 0; c < ch; ++c) {
      for (uint64_t t = 0; t < L; ++t) {
        double acc = fl(bias[c]), abs = std::fabs(acc);
        for (uint64_t j = 0; j < K; ++j) {
          const double term = fl(weight[c * K + j]) * fl(concat(s, c, t + j));
          acc += term;
          abs += std::fabs(term);
        }
        const double y = silu(acc);
        const double err = 1.1 * gamma(static_cast<double>(K + 1)) * abs + 4.0 * kU * std::fabs(y);
        const double got = fl(run.out[(s * L + t) * ch + c]), tol = bf16_tol(y, err);
        bad.expect(near(got, y, tol), [&] { return at("out", s, t, c, got, y, tol); });
      }
      for (uint64_t i = 0; i < T; ++i) {
        const uint16_t want = concat(s, c, L + i), got = run.state[(s * ch + c) * T + i];
        bad.expect(got == want, [&] { return at("tail", s, c, i, fl(got), fl(want), 0); });
      }
    }
  EXPECT_EQ(bad.count, 0u) << bad.first;
}

TEST(CpuSsdConv, MatchesDoubleLoopsWithTailState) {
  check_conv(2, 2, 4, 61);  // L < K − 1: the new tail keeps part of the old one
  check_conv(2, 5, 4, 62);
  check_conv(3, 1, 3, 63);    // a decode batch
  check_conv(2, 37, 18, 64);  // taps and rows past the kernel's tiles of 16
}

// Two calls of 2 and 3 rows carrying the tail equal one call of 5 rows, bit for bit.
TEST(CpuSsdConv, SplitCallsEqualOneCall) {
  const Mamba2Geometry g = geometry(4, 16, 8, 2, 4);
  const uint64_t ch = g.d_xbc, T = 3, w = g.in_proj;
  const Bits input = bf16_values(5 * w, 71, 1.0f), weight = bf16_values(ch * 4, 72, 0.5f);
  const Bits bias = bf16_values(ch, 73, 0.5f), state = bf16_values(ch * T, 74, 1.0f);
  const ConvRun whole = run_conv(g, 1, 5, input, weight, bias, state);
  const ConvRun a =
      run_conv(g, 1, 2, Bits(input.begin(), input.begin() + 2 * w), weight, bias, state);
  const ConvRun b =
      run_conv(g, 1, 3, Bits(input.begin() + 2 * w, input.end()), weight, bias, a.state);
  Bits joined = a.out;
  joined.insert(joined.end(), b.out.begin(), b.out.end());
  EXPECT_EQ(joined, whole.out);
  EXPECT_EQ(b.state, whole.state);
}

// ============================================================== gated norm

// g = o·silu(z) (silu 4u, the product u), y = g·rsqrt(mean(g²) + eps)·w: the sum of squares
// γ_(gs+1) plus 2·5u from g, the division, eps add, sqrt (half) and reciprocal, the two final
// products: relative 14u + γ_(gs+3)/2, then the BF16 store.
void check_gated_norm(uint64_t H, uint64_t P, uint64_t groups, uint64_t rows, uint64_t seed) {
  SCOPED_TRACE("d_inner=" + std::to_string(H * P) + " groups=" + std::to_string(groups));
  const Mamba2Geometry g = geometry(H, P, 8, groups);
  const uint64_t gs = g.d_inner / g.G;
  const double eps = 1e-5;
  Mamba2GatedNormOp op = Mamba2GatedNormOp::make(g, rows, eps);
  const uint64_t pool = oracle::place_in_pool({&op.weight});
  Rig rig({op.accesses()}, pool);
  const Bits o = bf16_values(rows * g.d_inner, seed, 1.0f);
  const Bits z = bf16_values(rows * g.in_proj, seed + 1, 3.0f);
  const Bits w = bf16_values(g.d_inner, seed + 2, 0.5f, 1.0f);
  rig.put(op.input, o);
  rig.put(op.z, z);
  rig.put(op.weight, w);
  rig.backend->mamba2_gated_norm(rig.ws, op);
  const Bits out = rig.get<uint16_t>(op.output);
  const double rel = 14.0 * kU + gamma(static_cast<double>(gs + 3)) / 2.0;
  Mismatches bad;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t g0 = 0; g0 < g.d_inner; g0 += gs) {
      Doubles gv(gs);
      double ss = 0.0;
      for (uint64_t i = 0; i < gs; ++i) {
        gv[i] = fl(o[r * g.d_inner + g0 + i]) * silu(fl(z[r * g.in_proj + g0 + i]));
        ss += gv[i] * gv[i];
      }
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(gs) + double{float(eps)});
      for (uint64_t i = 0; i < gs; ++i) {
        const double y = gv[i] * rs * fl(w[g0 + i]);
        const double got = fl(out[r * g.d_inner + g0 + i]), tol = bf16_tol(y, rel * std::fabs(y));
        bad.expect(near(got, y, tol), [&] { return at("y", r, g0 / gs, i, got, y, tol); });
      }
    }
  EXPECT_EQ(bad.count, 0u) << bad.first;
}

TEST(CpuSsdGatedNorm, MatchesDoubleLoops) {
  check_gated_norm(4, 16, 1, 5, 81);
  check_gated_norm(4, 16, 2, 5, 82);
  check_gated_norm(17, 256, 1, 2, 83);  // a group of 4352 > 4096: g is computed twice
}

// ============================================================== errors

// `call` throws an Error whose message names the op's parameters and contains `what`.
template <class Op, class Call>
void expect_refused(const Op& op, const char* what, Call call) {
  Rig rig({op.accesses()}, uint64_t{1} << 20);
  try {
    call(*rig.backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(op.params()), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
}

TEST(CpuSsdErrors, RefusesNoGroupsUnevenGroupsAndOversizedHeads) {
  const auto chunk = [](Backend& b, const Workspace& ws, const SsdChunkOp& op) {
    b.ssd_chunk(ws, op);
  };
  const auto rec = [](Backend& b, const Workspace& ws, const Mamba2RecurrentOp& op) {
    b.mamba2_recurrent(ws, op);
  };
  struct Bad {
    Mamba2Geometry g;
    const char *chunk_msg, *rec_msg;
  };
  const Bad cases[] = {
      // ng = 0: the chunk op's layout G = 1 finds no B / C columns; the recurrence sees ng = 0.
      {geometry(2, 8, 16, 0), "narrower than x | B | C", "n_groups = 0"},
      {geometry(3, 8, 16, 2), "not a multiple of n_groups", "not a multiple of n_groups"},
      {geometry(1, kMaxSsdDim + 1, 16, 1), "at most 256", "at most 256"},
      {geometry(1, 8, kMaxSsdDim + 1, 1), "at most 256", "at most 256"},
  };
  for (const Bad& k : cases) {
    SCOPED_TRACE(k.g.to_string());
    for (const Stage s : {Stage::cumsum, Stage::bmm, Stage::scan})
      expect_refused(SsdChunkOp::make(s, k.g, 0, 8, 2), k.chunk_msg, chunk);
    expect_refused(Mamba2RecurrentOp::make(k.g, 0, 8, 1), k.rec_msg, rec);
  }
}

}  // namespace
}  // namespace bufferlab
