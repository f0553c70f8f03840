// CpuBackend's Gated DeltaNet kernels (spec/numerics.md §5, core ops/gdn.h) on small cases
// against plain double loops written here. Every chunk stage is checked on the backend's own
// stored inputs (numerics §9); every bound is a first-order forward-error bound derived next to
// its check from the FP32 (u = 2^-24) and BF16 (u8 = 2^-8) unit roundoffs, carried through the
// stage in double alongside the reference (the magnitudes |terms| each rounding scales):
//   - conv: γ_K of Σ|w·x| through silu' ≤ 1.1, plus silu's own rounding; the tail state is a
//     copy (bits); splitting a sequence carries the state bit for bit;
//   - gates: β and α relative errors of their FP32 formulas, the FP32 underflow floor FLT_MIN;
//     ±Inf and NaN inputs;
//   - wu / state / output: see wu_reference, state_reference, output_reference;
//   - recurrence: the per-token error of the FP32 state tracked elementwise;
//   - chunked vs recurrent: a whole-chain bound written on paper (chain_bound);
//   - gated norm: relative, no cancellation; M-GDNCARRY; launch errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using Array = GdnChunkOp::Array;
using Stage = GdnChunkOp::Stage;

constexpr double kU = 0x1p-24;         // FP32 unit roundoff
constexpr double kU8 = 0x1p-8;         // BF16 unit roundoff (8 significant bits, round to nearest)
constexpr double kSecondOrder = 1.01;  // covers the products of first-order terms in a bound
constexpr uint64_t kC = 64;            // GDN chunk
constexpr uint64_t kD = 128;           // the chunked path's kd = vd
constexpr double kInf = std::numeric_limits<double>::infinity();

double gamma(double n) { return n * kU / (1.0 - n * kU); }
double gamma(uint64_t n) { return gamma(static_cast<double>(n)); }
uint16_t bf(float v) { return f32_to_bf16_bits(v); }
float fl(uint16_t b) { return bf16_bits_to_f32(b); }
double sigma(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double silu(double z) { return z * sigma(z); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// A stored BF16 value next to an unrounded double reference whose FP32 value is within `fp32`
// of it: the store adds ≤ u8·|fp32 value| ≤ u8·(|ref| + fp32).
double stored_bound(double ref, double fp32) {
  return kU8 * std::fabs(ref) + kSecondOrder * (1.0 + kU8) * fp32;
}

// A backend and a workspace whose arena holds every arena tensor of the given accesses and a
// weight pool of `pool_bytes`; the arena is poisoned (NaN) so an unwritten output fails.
struct Rig {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  Workspace ws;

  Rig(std::initializer_list<std::vector<Access>> ops, uint64_t pool_bytes) {
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

Bits bf16_values(uint64_t n, uint64_t seed, float scale) {
  Bits b(n);
  const Floats v = values(n, seed, scale);
  for (uint64_t i = 0; i < n; ++i) b[i] = bf(v[i]);
  return b;
}

GdnGeometry geometry(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd, uint64_t kernel = 4) {
  GdnGeometry g;
  g.nk = nk;
  g.kd = kd;
  g.nv = nv;
  g.vd = vd;
  g.kernel = kernel;
  g.qkvz = 2 * nk * kd + 2 * nv * vd;
  g.conv_dim = 2 * nk * kd + nv * vd;
  g.value_dim = nv * vd;
  return g;
}

// Column offsets of a conv output row [Q | K | V] for value head v (GQA: key head v/(nv/nk)).
struct Cols {
  uint64_t nk, kd, nv, vd;
  explicit Cols(const GdnGeometry& g) : nk(g.nk), kd(g.kd), nv(g.nv), vd(g.vd) {}
  uint64_t q(uint64_t v) const { return v / (nv / nk) * kd; }
  uint64_t k(uint64_t v) const { return nk * kd + v / (nv / nk) * kd; }
  uint64_t val(uint64_t v) const { return 2 * nk * kd + v * vd; }
};

// x·scale/sqrt(Σx² + eps) in double (eps the kernels' FP32 constant, exactly).
Doubles normalised(const float* x, uint64_t n, double scale) {
  double ss = 0.0;
  for (uint64_t i = 0; i < n; ++i) ss += double{x[i]} * x[i];
  const double inv = 1.0 / std::sqrt(ss + double{kGdnL2Eps});
  Doubles out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = x[i] * inv * scale;
  return out;
}

// FP32 relative error of a normalised component: the sum of squares (γ_n, halved by the
// sqrt), the eps add, sqrt, reciprocal and the product (u each), and the query scale (2u: the
// constant's rounding and the product).
double norm_error(uint64_t n) { return gamma(n) + 8 * kU; }

// Worst |got − ref| / bound over a family of checks, and the first element over its bound.
// NaN must meet NaN; equal values (equal infinities too) pass with any bound.
struct Verdict {
  double worst = 0.0;
  uint64_t checked = 0;
  std::string first;

  template <class Name>
  void check(double got, double ref, double bound, Name name) {
    ++checked;
    double ratio = 0.0;
    if (std::isnan(got) || std::isnan(ref))
      ratio = std::isnan(got) && std::isnan(ref) ? 0.0 : kInf;
    else if (got != ref)
      ratio = bound > 0.0 ? std::fabs(got - ref) / bound : kInf;
    worst = std::max(worst, ratio);
    if (ratio > 1.0 && first.empty())
      first = name() + ": got " + std::to_string(got) + ", reference " + std::to_string(ref) +
              ", bound " + std::to_string(bound);
  }
  void exact(bool same, const std::string& what) {
    ++checked;
    if (same) return;
    worst = kInf;
    if (first.empty()) first = what;
  }
};

// `may_be_empty`: a family that exists only in some cases (the rows past a partial chunk).
void expect_within(const Verdict& v, const std::string& what, bool may_be_empty = false) {
  if (!may_be_empty) {
    EXPECT_GT(v.checked, 0u) << what;
  }
  EXPECT_LE(v.worst, 1.0) << what << ": " << v.first;
}

std::string at(const char* array, uint64_t a, uint64_t b, uint64_t c) {
  return std::string(array) + "[" + std::to_string(a) + "][" + std::to_string(b) + "][" +
         std::to_string(c) + "]";
}

// ============================================================================= conv1d

struct ConvRun {
  Floats out;
  Bits state;
};

ConvRun run_conv(const GdnGeometry& g, uint64_t sequences, uint64_t L, const Bits& deint,
                 const Bits& weight, const Bits& state) {
  GdnConvOp op = GdnConvOp::make(g, sequences * L, sequences);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
  Rig rig({op.accesses()}, pool);
  rig.put(op.input, deint);
  rig.put(op.weight, weight);
  rig.put(op.state, state);
  rig.backend->gdn_conv(rig.ws, op);
  return {rig.get<float>(op.output), rig.get<uint16_t>(op.state)};
}

// out[t, c] = silu(Σ_j w[c, j]·x[t − (K−1) + j, c]) with x before row 0 from the tail; the FP32
// sum of exact BF16 products errs by ≤ γ_K·Σ|w·x|, carried by silu' ≤ 1.1, and silu rounds its
// exp, add and division (≤ 5u relative). The new tail: the last K−1 of [tail | x], bit for bit.
void check_conv_case(uint64_t sequences, uint64_t L, uint64_t seed) {
  const GdnGeometry g = geometry(1, 8, 2, 4, 4);
  const uint64_t K = g.kernel, T = K - 1, C = g.conv_dim, rows = sequences * L;
  const Bits deint = bf16_values(rows * g.qkvz, seed, 2.0f);
  const Bits weight = bf16_values(C * K, seed + 1, 1.0f);
  const Bits state = bf16_values(sequences * C * T, seed + 2, 2.0f);
  const ConvRun run = run_conv(g, sequences, L, deint, weight, state);
  Verdict out, tail;
  for (uint64_t s = 0; s < sequences; ++s)
    for (uint64_t c = 0; c < C; ++c) {
      // x at position p of [tail (T) | rows (L)]
      auto x = [&](uint64_t p) {
        return p < T ? fl(state[(s * C + c) * T + p]) : fl(deint[(s * L + p - T) * g.qkvz + c]);
      };
      for (uint64_t t = 0; t < L; ++t) {
        double sum = 0.0, abs_sum = 0.0;
        for (uint64_t j = 0; j < K; ++j) {
          const double p = double{fl(weight[c * K + j])} * x(t + j);
          sum += p;
          abs_sum += std::fabs(p);
        }
        const double ref = silu(sum);
        const double bound = kSecondOrder * (1.1 * gamma(K) * abs_sum + 5 * kU * std::fabs(ref));
        out.check(run.out[(s * L + t) * C + c], ref, bound, [&] { return at("out", s, t, c); });
      }
      for (uint64_t m = 0; m < T; ++m) {
        const uint64_t p = m + L;
        const uint16_t want =
            p < T ? state[(s * C + c) * T + p] : deint[(s * L + p - T) * g.qkvz + c];
        tail.exact(run.state[(s * C + c) * T + m] == want, at("tail", s, c, m));
      }
    }
  expect_within(out, "conv output");
  expect_within(tail, "conv tail state");
}

TEST(CpuGdnConv, OneSequence) { check_conv_case(1, 7, 10); }
TEST(CpuGdnConv, ShorterThanTheTailShiftsOldEntriesIn) { check_conv_case(3, 2, 11); }
TEST(CpuGdnConv, DecodeBatchOfOneTokenEach) { check_conv_case(4, 1, 12); }
TEST(CpuGdnConv, SeveralSequencesLongerThanTheKernel) { check_conv_case(2, 9, 13); }

// A sequence split into calls of 2 and 3 tokens carrying the tail state equals one call of 5,
// bit for bit (same products, same FP32 order).
TEST(CpuGdnConv, SplitSequenceCarriesTheStateExactly) {
  const GdnGeometry g = geometry(1, 8, 2, 4, 4);
  const uint64_t C = g.conv_dim, T = g.kernel - 1, W = g.qkvz;
  const Bits deint = bf16_values(5 * W, 20, 2.0f);
  const Bits weight = bf16_values(C * g.kernel, 21, 1.0f);
  const Bits state = bf16_values(C * T, 22, 2.0f);
  const ConvRun whole = run_conv(g, 1, 5, deint, weight, state);
  const Bits first_rows(deint.begin(), deint.begin() + static_cast<int64_t>(2 * W));
  const Bits last_rows(deint.begin() + static_cast<int64_t>(2 * W), deint.end());
  const ConvRun a = run_conv(g, 1, 2, first_rows, weight, state);
  const ConvRun b = run_conv(g, 1, 3, last_rows, weight, a.state);
  Floats split = a.out;
  split.insert(split.end(), b.out.begin(), b.out.end());
  EXPECT_EQ(0, std::memcmp(split.data(), whole.out.data(), split.size() * sizeof(float)));
  EXPECT_EQ(b.state, whole.state);
}

// ============================================================================= gates

// β = σ(b): expf (2u), the add and the division (u each) → ≤ 4u relative. α = exp(−X),
// X = exp(A_log)·softplus(x), x = fl(a + dt_bias): X errs by 3u (expf, product) + softplus's
// 4u + σ(x)·u·|x|/softplus(x) (the rounded sum through softplus' = σ), relative; α by
// X·rel(X) + 2u relative. Results under FLT_MIN may underflow to FP32 denormals or zero.
TEST(CpuGdnGates, MatchDoubleIncludingExtremes) {
  const uint64_t nv = 4, rows = 10;
  const GdnGeometry g = geometry(1, 8, nv, 4);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Floats b_vals = {0.0f, 1.5f, -3.0f, 100.0f, -100.0f, inf, -inf, nan, 0.3f, -0.7f};
  const Floats a_vals = {0.0f, 25.0f, 19.5f, -100.0f, 2.0f, inf, -inf, nan, -5.0f, 40.0f};
  const Floats a_log = {-2.0f, 0.0f, 1.5f, 10.0f};
  const Floats dt_bias = {0.5f, -1.0f, 2.0f, 0.0f};
  Bits ba(rows * 2 * nv);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t v = 0; v < nv; ++v) {
      ba[r * 2 * nv + v] = bf(b_vals[(r + v) % b_vals.size()]);
      ba[r * 2 * nv + nv + v] = bf(a_vals[(r + 3 * v) % a_vals.size()]);
    }
  GdnGatesOp op = GdnGatesOp::make(g, rows);
  const uint64_t pool = oracle::place_in_pool({&op.a_log, &op.dt_bias});
  Rig rig({op.accesses()}, pool);
  rig.put(op.ba, ba);
  rig.put(op.a_log, a_log);
  rig.put(op.dt_bias, dt_bias);
  rig.backend->gdn_gates(rig.ws, op);
  const Floats gates = rig.get<float>(op.gates);
  Verdict beta, alpha;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t v = 0; v < nv; ++v) {
      const double b = fl(ba[r * 2 * nv + v]);
      const double x = double{fl(ba[r * 2 * nv + nv + v])} + dt_bias[v];
      const double beta_ref = sigma(b);
      beta.check(gates[(r * nv + v) * 2], beta_ref, kSecondOrder * 4 * kU * beta_ref + FLT_MIN,
                 [&] { return at("beta", r, v, 0); });
      const double sp = softplus(x), X = std::exp(double{a_log[v]}) * sp;
      const double alpha_ref = std::exp(-X);
      const double rel_sp = 4 * kU + (sp > 0.0 ? sigma(x) * kU * std::fabs(x) / sp : 0.0);
      const double bound = kSecondOrder * alpha_ref * (X * (3 * kU + rel_sp) + 2 * kU) + FLT_MIN;
      alpha.check(gates[(r * nv + v) * 2 + 1], alpha_ref, bound,
                  [&] { return at("alpha", r, v, 0); });
    }
  expect_within(beta, "beta");
  expect_within(alpha, "alpha");
  // The extremes land where the definition puts them.
  EXPECT_EQ(gates[(5 * nv + 0) * 2], 1.0f);          // b = +Inf → β = 1
  EXPECT_EQ(gates[(6 * nv + 0) * 2], 0.0f);          // b = −Inf → β = 0
  EXPECT_TRUE(std::isnan(gates[(7 * nv + 0) * 2]));  // b = NaN
}

// ============================================================================= chunked core

struct ChunkCase {
  uint64_t nk, nv, streams, L, row0;
};

// The three stage ops and the recurrence of one call, sharing the state operand.
struct ChunkOps {
  GdnGeometry g;
  ChunkCase c;
  uint64_t cps = 0, regions = 0;
  GdnChunkOp wu, state, output;
  GdnRecurrentOp rec;
  uint64_t pool = 0;

  explicit ChunkOps(const ChunkCase& cc) : g(geometry(cc.nk, kD, cc.nv, kD)), c(cc) {
    cps = (c.L + kC - 1) / kC;
    const uint64_t nt = c.streams * cps;
    regions = nt * c.nv;
    wu = GdnChunkOp::make(Stage::wu, g, c.row0, c.streams, c.L, nt);
    state = GdnChunkOp::make(Stage::state, g, c.row0, c.streams, c.L, nt);
    output = GdnChunkOp::make(Stage::output, g, c.row0, c.streams, c.L, nt);
    rec = GdnRecurrentOp::make(g, c.row0, c.streams * c.L, c.streams);
    pool = oracle::place_in_pool({&wu.state});
    state.state = output.state = rec.state = wu.state;
  }
  uint64_t rows() const { return c.streams * c.L; }
  uint64_t region(uint64_t b, uint64_t ch, uint64_t v) const { return (b * cps + ch) * c.nv + v; }
  uint64_t first_row(uint64_t b, uint64_t ch) const { return b * c.L + ch * kC; }
  uint64_t valid(uint64_t ch) const { return std::min(kC, c.L - ch * kC); }
};

// Inputs of a call (rows relative to row0): conv in [-1, 1), gate_values except one α = 0 (the
// 1e-30 floor) in stream 1, and a state in [-0.5, 0.5).
struct ChunkInputs {
  Floats conv, gates, state;
};

// (β, α) pairs [rows·nv, 2]: β in [0.05, 0.95]; α in [0.94, 0.999], a slow decay (e^gc over a
// chunk ≈ 0.2) so the carried state still weighs in the last rows of a chunk.
Floats gate_values(uint64_t pairs, uint64_t seed) {
  const Floats beta = values(pairs, seed, 0.45f, 0.5f);
  const Floats alpha = values(pairs, seed + 1, 0.0295f, 0.9695f);
  Floats gates(pairs * 2);
  for (uint64_t k = 0; k < pairs; ++k) {
    gates[2 * k] = beta[k];
    gates[2 * k + 1] = alpha[k];
  }
  return gates;
}

ChunkInputs chunk_inputs(const ChunkOps& o, uint64_t seed) {
  const uint64_t rows = o.rows(), nv = o.c.nv;
  ChunkInputs in;
  in.conv = values(rows * o.g.conv_dim, seed, 1.0f);
  in.gates = gate_values(rows * nv, seed + 1);
  if (o.c.streams > 1 && o.c.L > 10) in.gates[((o.c.L + 10) * nv) * 2 + 1] = 0.0f;
  in.state = values(o.c.streams * nv * kD * kD, seed + 3, 0.5f);
  return in;
}

struct ChunkRun {
  Bits W, U, S, uc, out;
  Floats gc, state;
};

// wu, state and output in order on one workspace; every array downloaded after the call.
ChunkRun run_chunked(ChunkOps& o, const ChunkInputs& in, Mutant mutant = Mutant::none) {
  Rig rig({o.wu.accesses(), o.state.accesses(), o.output.accesses()}, o.pool);
  rig.backend->set_kernel_mutant(mutant);
  rig.put(o.wu.conv_rows(), in.conv);
  rig.put(o.wu.gate_rows(), in.gates);
  rig.put(o.wu.state, in.state);
  rig.backend->gdn_chunk(rig.ws, o.wu);
  rig.backend->gdn_chunk(rig.ws, o.state);
  rig.backend->gdn_chunk(rig.ws, o.output);
  ChunkRun run;
  run.W = rig.get<uint16_t>(o.wu.span(Array::W));
  run.U = rig.get<uint16_t>(o.wu.span(Array::U));
  run.S = rig.get<uint16_t>(o.wu.span(Array::S));
  run.uc = rig.get<uint16_t>(o.wu.span(Array::uc));
  run.gc = rig.get<float>(o.wu.span(Array::gc));
  run.out = rig.get<uint16_t>(o.wu.output_rows());
  run.state = rig.get<float>(o.wu.state);
  return run;
}

// wu on the call's inputs, in double: gc_i = Σ_{j≤i} log max(α_j, 1e-30); L_il = β_i·e^(gc_i −
// gc_l)·⟨k_i, k_l⟩; U_i = β_i v_i − Σ_{l<i} L_il U_l, W_i = β_i e^gc_i k_i − Σ_{l<i} L_il W_l.
// Bound. FP32 gc_i errs by gcerr_i = γ_(i+2)·Σ_{j≤i}|log α_j| (the logs and the running sum).
// Each FP32 L̂_il is within εL·Labs_il of L_il, Labs_il = β_i e^(gc_i − gc_l)·Σ_m|k_im k_lm|:
// the dot of the normalised keys (γ_kd + 2·norm_error), exp of a rounded difference (2u +
// gcerr_i + gcerr_l), two products. Row i rounds its i + 1 terms (γ_(i+1)) and its first term
// (β_i e^gc_i k_i: norm_error + gcerr_i + 3u). With ε ≥ every such local relative error and
// Uabs_i = |β_i v_i| + Σ_{l<i} Labs_il Uabs_l, the error E_i of row i obeys E_i ≤ ε·Uabs_i +
// Σ_{l<i} Labs_il·E_l, hence E_i ≤ (i + 1)·ε·Uabs_i by induction (likewise for W).
void check_wu(const ChunkOps& o, const ChunkInputs& in, const ChunkRun& run) {
  const Cols cols(o.g);
  const uint64_t nv = o.c.nv, cd = o.g.conv_dim;
  Verdict W, U, gc, tails;
  for (uint64_t b = 0; b < o.c.streams; ++b)
    for (uint64_t ch = 0; ch < o.cps; ++ch)
      for (uint64_t v = 0; v < nv; ++v) {
        const uint64_t n = o.valid(ch), row = o.first_row(b, ch), r = o.region(b, ch, v);
        std::vector<Doubles> k(n);
        Doubles beta(n), g(n), gerr(n);
        double log_sum = 0.0, cum = 0.0;
        for (uint64_t i = 0; i < n; ++i) {
          k[i] = normalised(in.conv.data() + (row + i) * cd + cols.k(v), kD, 1.0);
          beta[i] = in.gates[((row + i) * nv + v) * 2];
          const double la = std::log(
              std::max(double{in.gates[((row + i) * nv + v) * 2 + 1]}, double{kGdnAlphaFloor}));
          cum += la;
          log_sum += std::fabs(la);
          g[i] = cum;
          gerr[i] = gamma(i + 2) * log_sum;
        }
        const double eps_local = 3 * gamma(kD) + gamma(n + 1) + 20 * kU + 2 * gerr[n - 1];
        Doubles Wr(n * kD), Wabs(n * kD), Ur(n * kD), Uabs(n * kD);
        for (uint64_t i = 0; i < n; ++i) {
          const float* vrow = in.conv.data() + (row + i) * cd + cols.val(v);
          const double wscale = beta[i] * std::exp(g[i]);
          for (uint64_t j = 0; j < kD; ++j) {
            Ur[i * kD + j] = beta[i] * vrow[j];
            Uabs[i * kD + j] = std::fabs(beta[i] * vrow[j]);
            Wr[i * kD + j] = wscale * k[i][j];
            Wabs[i * kD + j] = std::fabs(wscale * k[i][j]);
          }
          for (uint64_t l = 0; l < i; ++l) {
            double dot = 0.0, dot_abs = 0.0;
            for (uint64_t m = 0; m < kD; ++m) {
              dot += k[i][m] * k[l][m];
              dot_abs += std::fabs(k[i][m] * k[l][m]);
            }
            const double e = beta[i] * std::exp(g[i] - g[l]);
            const double L = e * dot, Labs = e * dot_abs;
            for (uint64_t j = 0; j < kD; ++j) {
              Ur[i * kD + j] -= L * Ur[l * kD + j];
              Uabs[i * kD + j] += Labs * Uabs[l * kD + j];
              Wr[i * kD + j] -= L * Wr[l * kD + j];
              Wabs[i * kD + j] += Labs * Wabs[l * kD + j];
            }
          }
        }
        const uint64_t base = r * kC * kD;
        for (uint64_t i = 0; i < kC; ++i) {
          for (uint64_t j = 0; j < kD; ++j) {
            const uint64_t e = base + i * kD + j;
            if (i >= n) {
              tails.exact(run.W[e] == 0 && run.U[e] == 0, at("W/U tail", r, i, j));
              continue;
            }
            const double f = static_cast<double>(i + 1) * eps_local;
            W.check(fl(run.W[e]), Wr[i * kD + j],
                    stored_bound(Wr[i * kD + j], f * Wabs[i * kD + j]),
                    [&] { return at("W", r, i, j); });
            U.check(fl(run.U[e]), Ur[i * kD + j],
                    stored_bound(Ur[i * kD + j], f * Uabs[i * kD + j]),
                    [&] { return at("U", r, i, j); });
          }
          const float got = run.gc[r * kC + i];
          if (i >= n)
            tails.exact(got == 0.0f && !std::signbit(got), at("gc tail", r, i, 0));
          else
            gc.check(got, g[i], kSecondOrder * gerr[i], [&] { return at("gc", r, i, 0); });
        }
      }
  expect_within(W, "W");
  expect_within(U, "U");
  expect_within(gc, "gc");
  expect_within(tails, "rows past a partial chunk", true);
}

struct StateVerdicts {
  Verdict snapshot, uc, tails, final_state;
};

// The state pass on the stored W, U, gc (exact inputs here) and the initial state, per (stream,
// head) in double, the reference carry S updated from the STORED uc as the kernel's is.
// Bound. E bounds |S_fp32 − S| elementwise (E = 0 at the start). Snapshot: the store of the
// FP32 carry. uc = U − W·S: |W|·E plus the FP32 product γ_(kd+1)·(|U| + |W||S|), then its store.
// Update S' = e^gc_last·S + Σ_l k_l e^(gc_last − gc_l) uc_l: E' = e^gc_last·E + (γ_(n+2) + 2u)·
// e^gc_last|S| + Σ_l |k_l| e_l |uc_l|·(norm_error + γ_(n+2) + 4u + u·|gc_last − gc_l|) (the
// normalised key, the accumulation, exp of a rounded difference and the scaling).
StateVerdicts check_state(const ChunkOps& o, const ChunkInputs& in, const ChunkRun& run) {
  const Cols cols(o.g);
  const uint64_t nv = o.c.nv, cd = o.g.conv_dim, KK = kD * kD;
  StateVerdicts out;
  for (uint64_t b = 0; b < o.c.streams; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      const uint64_t sbase = (b * nv + v) * KK;
      Doubles S(in.state.begin() + static_cast<int64_t>(sbase),
                in.state.begin() + static_cast<int64_t>(sbase + KK));
      Doubles E(KK, 0.0), Sn(KK), En(KK);
      for (uint64_t ch = 0; ch < o.cps; ++ch) {
        const uint64_t n = o.valid(ch), row = o.first_row(b, ch), r = o.region(b, ch, v);
        for (uint64_t e = 0; e < KK; ++e)
          out.snapshot.check(fl(run.S[r * KK + e]), S[e], stored_bound(S[e], E[e]),
                             [&] { return at("S", r, e / kD, e % kD); });
        const uint16_t* Wst = run.W.data() + r * kC * kD;
        const uint16_t* Ust = run.U.data() + r * kC * kD;
        const uint16_t* ucst = run.uc.data() + r * kC * kD;
        for (uint64_t l = 0; l < kC; ++l)
          for (uint64_t j = 0; j < kD; ++j) {
            if (l >= n) {
              out.tails.exact(ucst[l * kD + j] == 0, at("uc tail", r, l, j));
              continue;
            }
            double uc = fl(Ust[l * kD + j]), abs = std::fabs(uc), prop = 0.0;
            for (uint64_t m = 0; m < kD; ++m) {
              const double w = fl(Wst[l * kD + m]);
              uc -= w * S[m * kD + j];
              abs += std::fabs(w * S[m * kD + j]);
              prop += std::fabs(w) * E[m * kD + j];
            }
            const double fp32 = prop + gamma(kD + 1) * abs;
            out.uc.check(fl(ucst[l * kD + j]), uc, stored_bound(uc, fp32),
                         [&] { return at("uc", r, l, j); });
          }
        const float* g = run.gc.data() + r * kC;
        const double last = g[n - 1], e_last = std::exp(last);
        for (uint64_t e = 0; e < KK; ++e) {
          Sn[e] = e_last * S[e];
          En[e] = e_last * E[e] + (gamma(n + 2) + 2 * kU) * e_last * std::fabs(S[e]);
        }
        for (uint64_t l = 0; l < n; ++l) {
          const Doubles k = normalised(in.conv.data() + (row + l) * cd + cols.k(v), kD, 1.0);
          const double el = std::exp(last - double{g[l]});
          const double rel =
              norm_error(kD) + gamma(n + 2) + 4 * kU + kU * std::fabs(last - double{g[l]});
          for (uint64_t m = 0; m < kD; ++m)
            for (uint64_t j = 0; j < kD; ++j) {
              const double t = k[m] * el * fl(ucst[l * kD + j]);
              Sn[m * kD + j] += t;
              En[m * kD + j] += std::fabs(t) * rel;
            }
        }
        S.swap(Sn);
        E.swap(En);
      }
      for (uint64_t e = 0; e < KK; ++e)
        out.final_state.check(run.state[sbase + e], S[e], kSecondOrder * E[e],
                              [&] { return at("state", b, v, e); });
    }
  return out;
}

// The output stage on the stored S snapshot, uc and gc, in double: O_i = e^gc_i·(q_i·S) +
// Σ_{l≤i} e^(gc_i − gc_l)·⟨q_i, k_l⟩·uc_l, q and k normalised from the conv rows.
// Bound. The terms' magnitudes Oabs = e^gc_i·Σ|q||S| + Σ_l e^(gc_i − gc_l)·Σ|q k|·|uc| each err
// by at most ε = 2·norm_error + γ_kd (the normalised vectors and a dot) + γ_(n+2) (the sum over
// l and the two parts) + 4u + u·2·max|gc| (exp of a rounded difference, the products).
void check_output(const ChunkOps& o, const ChunkInputs& in, const ChunkRun& run) {
  const Cols cols(o.g);
  const uint64_t nv = o.c.nv, cd = o.g.conv_dim, width = nv * kD;
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(kD));
  Verdict out;
  for (uint64_t b = 0; b < o.c.streams; ++b)
    for (uint64_t ch = 0; ch < o.cps; ++ch)
      for (uint64_t v = 0; v < nv; ++v) {
        const uint64_t n = o.valid(ch), row = o.first_row(b, ch), r = o.region(b, ch, v);
        std::vector<Doubles> q(n), k(n);
        for (uint64_t i = 0; i < n; ++i) {
          q[i] = normalised(in.conv.data() + (row + i) * cd + cols.q(v), kD, q_scale);
          k[i] = normalised(in.conv.data() + (row + i) * cd + cols.k(v), kD, 1.0);
        }
        const uint16_t* S = run.S.data() + r * kD * kD;
        const uint16_t* uc = run.uc.data() + r * kC * kD;
        const float* g = run.gc.data() + r * kC;
        double gmax = 0.0;
        for (uint64_t i = 0; i < n; ++i) gmax = std::max(gmax, std::fabs(double{g[i]}));
        const double eps = 2 * norm_error(kD) + gamma(kD) + gamma(n + 2) + 4 * kU + 2 * kU * gmax;
        for (uint64_t i = 0; i < n; ++i) {
          Doubles O(kD, 0.0), Oabs(kD, 0.0);
          const double ei = std::exp(double{g[i]});
          for (uint64_t m = 0; m < kD; ++m)
            for (uint64_t j = 0; j < kD; ++j) {
              const double t = q[i][m] * fl(S[m * kD + j]);
              O[j] += ei * t;
              Oabs[j] += ei * std::fabs(t);
            }
          for (uint64_t l = 0; l <= i; ++l) {
            double dot = 0.0, dot_abs = 0.0;
            for (uint64_t m = 0; m < kD; ++m) {
              dot += q[i][m] * k[l][m];
              dot_abs += std::fabs(q[i][m] * k[l][m]);
            }
            const double mil = std::exp(double{g[i]} - g[l]);
            for (uint64_t j = 0; j < kD; ++j) {
              O[j] += mil * dot * fl(uc[l * kD + j]);
              Oabs[j] += mil * dot_abs * std::fabs(fl(uc[l * kD + j]));
            }
          }
          for (uint64_t j = 0; j < kD; ++j)
            out.check(fl(run.out[(row + i) * width + v * kD + j]), O[j],
                      stored_bound(O[j], eps * Oabs[j]), [&] { return at("O", row + i, v, j); });
        }
      }
  expect_within(out, "output");
}

// The recurrence on the same inputs, in its own workspace.
struct RecRun {
  Bits out;
  Floats state;
};

RecRun run_recurrent(GdnRecurrentOp& op, uint64_t pool, const ChunkInputs& in) {
  Rig rig({op.accesses()}, pool);
  rig.put(op.conv, in.conv);
  rig.put(op.gates, in.gates);
  rig.put(op.state, in.state);
  rig.backend->gdn_recurrent(rig.ws, op);
  return {rig.get<uint16_t>(op.output), rig.get<float>(op.state)};
}

// Chunked vs recurrent, a whole-chain bound written on paper (numerics §9): each chunked output
// passes four BF16 stores (W and U, uc, the S snapshot, the output), each ≤ u8 of the magnitude
// it carries; for these inputs (random keys: |L_il| ≤ β·|⟨k_i, k_l⟩|, contracting state) the
// forward substitution and the carry amplify them by less than 2 and the recurrence's own
// output store adds one more u8: 16·u8 of the head's largest |value| covers both, normwise
// (per stream and head, so cancellation in one element does not matter).
void check_chain(const ChunkOps& o, const ChunkRun& chunked, const RecRun& rec) {
  const uint64_t nv = o.c.nv, L = o.c.L, width = nv * kD, KK = kD * kD;
  Verdict out, state;
  for (uint64_t b = 0; b < o.c.streams; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      double scale = 0.0;
      for (uint64_t t = 0; t < L; ++t)
        for (uint64_t j = 0; j < kD; ++j)
          scale = std::max(scale, std::fabs(double{fl(rec.out[(b * L + t) * width + v * kD + j])}));
      for (uint64_t t = 0; t < L; ++t)
        for (uint64_t j = 0; j < kD; ++j) {
          const uint64_t e = (b * L + t) * width + v * kD + j;
          out.check(fl(chunked.out[e]), fl(rec.out[e]), 16 * kU8 * scale,
                    [&] { return at("O", b * L + t, v, j); });
        }
      const uint64_t base = (b * nv + v) * KK;
      double sscale = 0.0;
      for (uint64_t e = 0; e < KK; ++e)
        sscale = std::max(sscale, std::fabs(double{rec.state[base + e]}));
      for (uint64_t e = 0; e < KK; ++e)
        state.check(chunked.state[base + e], rec.state[base + e], 16 * kU8 * sscale,
                    [&] { return at("state", b, v, e); });
    }
  expect_within(out, "chunked vs recurrent output");
  expect_within(state, "chunked vs recurrent final state");
}

void check_chunk_case(const ChunkCase& c, uint64_t seed) {
  SCOPED_TRACE("streams=" + std::to_string(c.streams) + " L=" + std::to_string(c.L) +
               " nk=" + std::to_string(c.nk) + " nv=" + std::to_string(c.nv) +
               " row0=" + std::to_string(c.row0));
  ChunkOps o(c);
  const ChunkInputs in = chunk_inputs(o, seed);
  const ChunkRun run = run_chunked(o, in);
  check_wu(o, in, run);
  const StateVerdicts st = check_state(o, in, run);
  expect_within(st.snapshot, "S snapshots");
  expect_within(st.uc, "uc");
  expect_within(st.tails, "uc rows past a partial chunk", true);
  expect_within(st.final_state, "final state");
  check_output(o, in, run);
  check_chain(o, run, run_recurrent(o.rec, o.pool, in));
}

TEST(CpuGdnChunk, OneToken) { check_chunk_case({1, 1, 1, 1, 0}, 100); }
TEST(CpuGdnChunk, PartialChunkTwoHeads) { check_chunk_case({1, 2, 1, 63, 0}, 101); }
TEST(CpuGdnChunk, OneFullChunk) { check_chunk_case({1, 1, 1, 64, 0}, 102); }
TEST(CpuGdnChunk, ThreeStreamsOf65AtRow3) { check_chunk_case({1, 2, 3, 65, 3}, 103); }
TEST(CpuGdnChunk, TwoChunksGqa2x4) { check_chunk_case({2, 4, 1, 127, 0}, 104); }
TEST(CpuGdnChunk, DecodeSizedStreams) { check_chunk_case({1, 2, 3, 1, 0}, 105); }

// M-GDNCARRY carries the BF16 snapshot: the same stored W, U, gc, but a final state outside
// the state pass's FP32 bound (and different from the real kernel's).
TEST(CpuGdnChunk, CarryMutantChangesTheFinalState) {
  ChunkOps o({1, 1, 1, 130, 0});
  const ChunkInputs in = chunk_inputs(o, 106);
  const ChunkRun real = run_chunked(o, in);
  const ChunkRun mutant = run_chunked(o, in, Mutant::M_GDNCARRY);
  EXPECT_EQ(real.W, mutant.W);
  EXPECT_EQ(real.U, mutant.U);
  EXPECT_NE(0, std::memcmp(real.state.data(), mutant.state.data(), real.state.size() * 4));
  EXPECT_LE(check_state(o, in, real).final_state.worst, 1.0);
  EXPECT_GT(check_state(o, in, mutant).final_state.worst, 1.0);
}

// ============================================================================= recurrence

// The recurrence in double per (sequence, head), the FP32 error E of the state tracked
// elementwise (first order, |·| of the reference values):
//   Sᵀk: Σ|k_i|E_ij + (norm_error + γ_kd)·Σ|k_i S_ij|;
//   δ = β(v − α·Sᵀk): βα·e(Sᵀk) + 3u·β(|v| + α·Σ|k S|);
//   S' = αS + k δᵀ: αE + |k|·e(δ) + norm_error·|k δ| + 2u·(α|S| + |k δ|);
//   o = S'ᵀq: Σ|q_i|E'_ij + (norm_error + γ_kd)·Σ|q_i S'_ij|, then its BF16 store.
void check_recurrence(const GdnGeometry& g, uint64_t sequences, uint64_t L, uint64_t seed) {
  SCOPED_TRACE("kd=" + std::to_string(g.kd) + " vd=" + std::to_string(g.vd) +
               " sequences=" + std::to_string(sequences) + " L=" + std::to_string(L));
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv, cd = g.conv_dim, rows = sequences * L;
  GdnRecurrentOp op = GdnRecurrentOp::make(g, 2, rows, L == 1 ? 0 : sequences);
  const uint64_t pool = oracle::place_in_pool({&op.state});
  ChunkInputs in;
  in.conv = values(rows * cd, seed, 1.0f);
  in.gates = gate_values(rows * nv, seed + 1);
  in.state = values(sequences * nv * kd * vd, seed + 3, 0.5f);
  const RecRun run = run_recurrent(op, pool, in);
  const Cols cols(g);
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(kd));
  const double ne = norm_error(kd), dot = gamma(kd);
  Verdict out, state;
  for (uint64_t s = 0; s < sequences; ++s)
    for (uint64_t v = 0; v < nv; ++v) {
      const uint64_t base = (s * nv + v) * kd * vd;
      Doubles S(in.state.begin() + static_cast<int64_t>(base),
                in.state.begin() + static_cast<int64_t>(base + kd * vd));
      Doubles E(kd * vd, 0.0);
      for (uint64_t t = 0; t < L; ++t) {
        const uint64_t row = s * L + t;
        const float* conv = in.conv.data() + row * cd;
        const Doubles q = normalised(conv + cols.q(v), kd, q_scale);
        const Doubles k = normalised(conv + cols.k(v), kd, 1.0);
        const double b = in.gates[(row * nv + v) * 2], a = in.gates[(row * nv + v) * 2 + 1];
        Doubles delta(vd), delta_err(vd);
        for (uint64_t j = 0; j < vd; ++j) {
          double sk = 0.0, sk_abs = 0.0, sk_err = 0.0;
          for (uint64_t i = 0; i < kd; ++i) {
            sk += k[i] * S[i * vd + j];
            sk_abs += std::fabs(k[i] * S[i * vd + j]);
            sk_err += std::fabs(k[i]) * E[i * vd + j];
          }
          sk_err += (ne + dot) * sk_abs;
          const double x = conv[cols.val(v) + j];
          delta[j] = b * (x - a * sk);
          delta_err[j] = b * a * sk_err + 3 * kU * b * (std::fabs(x) + a * sk_abs);
        }
        for (uint64_t i = 0; i < kd; ++i)
          for (uint64_t j = 0; j < vd; ++j) {
            const double kdj = std::fabs(k[i] * delta[j]);
            E[i * vd + j] = a * E[i * vd + j] + std::fabs(k[i]) * delta_err[j] + ne * kdj +
                            2 * kU * (a * std::fabs(S[i * vd + j]) + kdj);
            S[i * vd + j] = a * S[i * vd + j] + k[i] * delta[j];
          }
        for (uint64_t j = 0; j < vd; ++j) {
          double o = 0.0, o_abs = 0.0, o_err = 0.0;
          for (uint64_t i = 0; i < kd; ++i) {
            o += q[i] * S[i * vd + j];
            o_abs += std::fabs(q[i] * S[i * vd + j]);
            o_err += std::fabs(q[i]) * E[i * vd + j];
          }
          o_err += (ne + dot) * o_abs;
          out.check(fl(run.out[row * nv * vd + v * vd + j]), o, stored_bound(o, o_err),
                    [&] { return at("o", row, v, j); });
        }
      }
      for (uint64_t e = 0; e < kd * vd; ++e)
        state.check(run.state[base + e], S[e], kSecondOrder * E[e],
                    [&] { return at("state", s, v, e); });
    }
  expect_within(out, "recurrent output");
  expect_within(state, "recurrent final state");
}

TEST(CpuGdnRecurrent, SmallHeadsTwoSequences) {
  check_recurrence(geometry(1, 32, 2, 32), 2, 20, 200);
}
TEST(CpuGdnRecurrent, KdDiffersFromVd) { check_recurrence(geometry(2, 32, 4, 48), 1, 9, 201); }
TEST(CpuGdnRecurrent, ChunkedHeadSize) { check_recurrence(geometry(1, 128, 1, 128), 1, 40, 202); }
TEST(CpuGdnRecurrent, DecodeBatch) { check_recurrence(geometry(1, 64, 2, 64), 5, 1, 203); }

// ============================================================================= gated norm

// y = o·r·w·silu(z), r = 1/sqrt(mean(o²) + eps): a product of positive-sum factors, so the FP32
// error is relative: γ_hd over the sum of squares (halved by the sqrt, counted whole), the
// division, eps add, sqrt and reciprocal, three products and silu's 5u; then the BF16 store.
TEST(CpuGdnGatedNorm, MatchesDoubleLoop) {
  const GdnGeometry g = geometry(1, 16, 2, 32);
  const uint64_t rows = 5, hd = g.vd, width = g.value_dim;
  const double eps = 1e-6;
  GdnGatedNormOp op = GdnGatedNormOp::make(g, rows, eps);
  const uint64_t pool = oracle::place_in_pool({&op.weight});
  Rig rig({op.accesses()}, pool);
  const Bits io = bf16_values(rows * width, 300, 2.0f);
  const Bits z = bf16_values(rows * g.qkvz, 301, 4.0f);
  const Bits w = bf16_values(hd, 302, 1.5f);
  rig.put(op.io, io);
  rig.put(op.z, z);
  rig.put(op.weight, w);
  rig.backend->gdn_gated_norm(rig.ws, op);
  const Bits y = rig.get<uint16_t>(op.io);
  const double rel = gamma(hd) + 16 * kU;
  Verdict v;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t h = 0; h < g.nv; ++h) {
      double ss = 0.0;
      for (uint64_t j = 0; j < hd; ++j) ss += std::pow(double{fl(io[r * width + h * hd + j])}, 2);
      const double rs =
          1.0 / std::sqrt(ss / static_cast<double>(hd) + double{static_cast<float>(eps)});
      for (uint64_t j = 0; j < hd; ++j) {
        const double zz = fl(z[r * g.qkvz + g.conv_dim + h * hd + j]);
        const double ref = fl(io[r * width + h * hd + j]) * rs * fl(w[j]) * silu(zz);
        v.check(fl(y[r * width + h * hd + j]), ref, stored_bound(ref, rel * std::fabs(ref)),
                [&] { return at("y", r, h, j); });
      }
    }
  expect_within(v, "gated norm");
}

// ============================================================================= errors

template <class Op, class Call>
void expect_refused(Op op, Call call, const std::string& needle) {
  const uint64_t pool = oracle::place_in_pool({&op.state});
  Rig rig({op.accesses()}, pool);
  try {
    call(*rig.backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CpuGdnErrors, ChunkedPathRunsKd128Only) {
  auto call = [](Backend& b, const Workspace& ws, const GdnChunkOp& op) { b.gdn_chunk(ws, op); };
  expect_refused(GdnChunkOp::make(Stage::wu, geometry(1, 64, 1, 64), 0, 1, 64, 1), call,
                 "kd = vd = 128");
  expect_refused(GdnChunkOp::make(Stage::state, geometry(1, 128, 1, 64), 0, 1, 64, 1), call,
                 "kd = vd = 128");
}

TEST(CpuGdnErrors, RecurrenceRefusesHugeHeadsAndBadGqa) {
  auto call = [](Backend& b, const Workspace& ws, const GdnRecurrentOp& op) {
    b.gdn_recurrent(ws, op);
  };
  expect_refused(GdnRecurrentOp::make(geometry(1, 512, 1, 16), 0, 2, 1), call, "at most 256");
  expect_refused(GdnRecurrentOp::make(geometry(2, 16, 3, 16), 0, 2, 1), call, "multiple of nk");
}

TEST(CpuGdnErrors, ConvRefusesKernelZero) {
  GdnConvOp op = GdnConvOp::make(geometry(1, 8, 1, 8, 0), 2, 1);
  const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
  Rig rig({op.accesses()}, pool);
  EXPECT_THROW(rig.backend->gdn_conv(rig.ws, op), Error);
}

}  // namespace
}  // namespace bufferlab
