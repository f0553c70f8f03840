// CpuBackend's mHC kernels (spec/numerics.md §3–§4, core ops/mhc.h) on small cases against
// plain double loops written here. Every tolerance is derived next to its check from the FP32
// (u = 2^-24) and BF16 (u8 = 2^-8) unit roundoffs; none is tuned:
//   - pre / head: the mix GEMV and rsqrt errors through σ' ≤ 1/4 into pre and post, through
//     the γ_hc sum into the block input (plus its BF16 store); comb by the spec's acceptance
//     criteria: column sums (FP64-summed) within (hc + 1)·2^-24 of 1, the Sinkhorn class check
//     (cross ratios against the double kernel K) and the Birkhoff–Hopf row bound;
//   - post: γ_(hc+1) of the terms' magnitudes (low-rank form γ_2), in place == out of place bit
//     for bit, B13 = the BF16 rounding of the spec result;
//   - low rank: split (FP32) and slab (BF16) paths each against the double loop under a
//     first-order bound that carries every storage rounding through the chain, hence against
//     each other within the sum of the two;
//   - non-finite tokens (NaN outputs, counted, others identical), huge (2^100) and zero streams,
//     hc = 1 and 16, M-SKCOL, and the hc / iteration range errors.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

constexpr double kU = 0x1p-24;         // FP32 unit roundoff
constexpr double kU8 = 0x1p-8;         // BF16 unit roundoff (8 significant bits, round to nearest)
constexpr double kSecondOrder = 1.01;  // covers the products of first-order terms in a bound

double gamma(double n) { return n * kU / (1.0 - n * kU); }
uint16_t bf(float v) { return f32_to_bf16_bits(v); }
float fl(uint16_t b) { return bf16_bits_to_f32(b); }
bool bf_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }
double sigma(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double silu(double z) { return z * sigma(z); }

// FP32 σ = 1/(1 + e^-z): expf within 1 ULP (2u relative), the add (≤ 3u on 1 + e) and the
// division leave ≤ 4u relative; σ' ≤ 1/4 carries an input error dz.
double sigmoid_error(double z, double dz) { return 0.25 * dz + 4 * kU * sigma(z); }

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

// n deterministic values in [-scale, scale) (+ offset), on a grid of 2^16 steps.
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

ModelConfig mhc_config(uint64_t hc, uint64_t h, uint64_t r = 0, uint64_t iters = 20) {
  ModelConfig c;
  c.hidden_size = h;
  c.vocab_size = 16;
  c.hc_mult = hc;
  c.hc_lowrank = r;
  c.hc_sinkhorn_iters = iters;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  return c;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b, uint64_t begin, uint64_t end) {
  return std::memcmp(a.data() + begin, b.data() + begin, (end - begin) * sizeof(T)) == 0;
}

// A launch with hc outside 1..kMaxHcMult is refused before anything is bound or written: an
// Error naming the op's parameters and the range (an allocated footprint, nothing uploaded).
template <class Op, class Call>
void expect_hc_refused(const Op& op, Call call) {
  Rig rig({op.accesses()}, uint64_t{1} << 20);
  try {
    call(*rig.backend, rig.ws, op);
    ADD_FAILURE() << op.params() << " accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(op.params()), std::string::npos) << m;
    EXPECT_NE(m.find("outside the kernels' range"), std::string::npos) << m;
  }
}

// ============================================================== Sinkhorn-form pre and head

struct PreInputs {
  Floats x, fn, scale, bias;
};

// Streams in [-1, 1); fn in ±√(3/K) so each mix value has unit variance; moderate biases.
PreInputs pre_inputs(uint64_t rows, uint64_t hc, uint64_t h, uint64_t mix, uint64_t seed) {
  const uint64_t K = hc * h;
  PreInputs in;
  in.x = values(rows * K, seed, 1.0f);
  in.fn = values(mix * K, seed + 1, static_cast<float>(std::sqrt(3.0 / static_cast<double>(K))));
  in.scale = {0.8f, 1.1f, 1.5f};
  in.bias = values(mix, seed + 2, 0.5f);
  return in;
}

struct PreRun {
  Floats post, comb;
  Bits block_in;
  HcDiagnostics diag;
};

PreRun run_pre(HcPreOp op, const PreInputs& in, Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
  Rig rig({op.accesses()}, pool);
  rig.backend->set_kernel_mutant(mutant);
  rig.put(op.streams, in.x);
  rig.put(op.fn, in.fn);
  rig.put(op.scale, in.scale);
  rig.put(op.bias, in.bias);
  PreRun run;
  run.diag = rig.backend->hc_pre(rig.ws, op);
  run.post = rig.get<float>(op.post);
  run.comb = rig.get<float>(op.comb);
  run.block_in = rig.get<uint16_t>(op.block_in);
  return run;
}

// Per token: mix_m = r·Σ fn·x and mix_abs_m = r·Σ|fn·x| (double), r the flattened RMS factor.
void mix_reference(const float* x, uint64_t K, const float* fn, uint64_t rows, double eps,
                   double* mix, double* mix_abs) {
  double ss = 0.0;
  for (uint64_t k = 0; k < K; ++k) ss += double{x[k]} * x[k];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(K) + eps);
  for (uint64_t m = 0; m < rows; ++m) {
    double acc = 0.0, abs_acc = 0.0;
    for (uint64_t k = 0; k < K; ++k) {
      const double p = double{fn[m * K + k]} * x[k];
      acc += p;
      abs_acc += std::fabs(p);
    }
    mix[m] = r * acc;
    mix_abs[m] = r * abs_acc;
  }
}

// |fl32(mix) − mix|: the FP32 dot (γ_K·r·Σ|fn·x|), rs = rsqrt of an FP32 sum of squares
// ((γ_K + 3u)/2 + 2u relative, through the division by K, the eps add, sqrt and the reciprocal)
// and the final product (u); |mix| ≤ mix_abs.
double mix_error(double mix_abs, uint64_t K) {
  const double g = gamma(static_cast<double>(K));
  return kSecondOrder * (1.5 * g + 4.5 * kU) * mix_abs;
}

// |Δz| of z = mix·s + b: |s|·Δmix plus the product and the sum rounded (u each).
double logit_error(double mix, double mix_abs, double s, double b, uint64_t K) {
  return kSecondOrder * (std::fabs(s) * mix_error(mix_abs, K) + kU * std::fabs(mix * s) +
                         kU * std::fabs(mix * s + b));
}

// K = row softmax (max-subtracted) + eps of hc×hc logits; then the spec's Sinkhorn order.
Doubles kernel_of(const double* l, uint64_t hc, double eps) {
  Doubles k(hc * hc);
  for (uint64_t i = 0; i < hc; ++i) {
    double m = l[i * hc];
    for (uint64_t j = 1; j < hc; ++j) m = std::max(m, l[i * hc + j]);
    double sum = 0.0;
    for (uint64_t j = 0; j < hc; ++j) sum += std::exp(l[i * hc + j] - m);
    for (uint64_t j = 0; j < hc; ++j) k[i * hc + j] = std::exp(l[i * hc + j] - m) / sum + eps;
  }
  return k;
}

void normalise_columns(Doubles& c, uint64_t hc, double eps) {
  for (uint64_t j = 0; j < hc; ++j) {
    double sum = 0.0;
    for (uint64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
    for (uint64_t i = 0; i < hc; ++i) c[i * hc + j] /= eps + sum;
  }
}

void normalise_rows(Doubles& c, uint64_t hc, double eps) {
  for (uint64_t i = 0; i < hc; ++i) {
    double sum = 0.0;
    for (uint64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
    for (uint64_t j = 0; j < hc; ++j) c[i * hc + j] /= eps + sum;
  }
}

Doubles sinkhorn_reference(Doubles c, uint64_t hc, uint64_t iters, double eps, bool final_exact) {
  normalise_columns(c, hc, eps);
  for (uint64_t t = 1; t < iters; ++t) {
    normalise_rows(c, hc, eps);
    normalise_columns(c, hc, eps);
  }
  if (final_exact) normalise_columns(c, hc, 0.0);
  return c;
}

struct PreRef {
  Doubles mix, mix_abs;         // [rows, mix]
  Doubles pre, pre_err;         // [rows, hc]: the double pre weights and |fl32(pre) − pre|
  Doubles post, post_err;       // [rows, hc]
  Doubles kernel, comb;         // [rows, hc, hc]
  Doubles kernel_log_err;       // [rows]: bound on |log K_fp32 − log K|
  Doubles block_in, block_err;  // [rows, h]: Σ pre_i·x_i and the FP32 error bound before the store
};

// The double loop of numerics §3 (mix_rows = mix for the pre step, hc for the head).
PreRef pre_reference(uint64_t rows, uint64_t hc, uint64_t h, uint64_t mix_rows, uint64_t iters,
                     double rms_eps, double hc_eps, const PreInputs& in, bool head = false) {
  const uint64_t K = hc * h;
  PreRef ref;
  ref.mix.resize(rows * mix_rows);
  ref.mix_abs.resize(rows * mix_rows);
  ref.pre.resize(rows * hc);
  ref.pre_err.resize(rows * hc);
  ref.post.resize(rows * hc);
  ref.post_err.resize(rows * hc);
  ref.kernel.resize(rows * hc * hc);
  ref.comb.resize(rows * hc * hc);
  ref.kernel_log_err.resize(rows);
  ref.block_in.resize(rows * h);
  ref.block_err.resize(rows * h);
  const double s0 = in.scale[0];
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.x.data() + t * K;
    double* mix = ref.mix.data() + t * mix_rows;
    double* mix_abs = ref.mix_abs.data() + t * mix_rows;
    mix_reference(x, K, in.fn.data(), mix_rows, rms_eps, mix, mix_abs);
    for (uint64_t i = 0; i < hc; ++i) {
      const double z = mix[i] * s0 + in.bias[i];
      ref.pre[t * hc + i] = sigma(z) + hc_eps;
      const double dz = logit_error(mix[i], mix_abs[i], s0, in.bias[i], K);
      ref.pre_err[t * hc + i] = sigmoid_error(z, dz) + kU * (sigma(z) + hc_eps);  // + the eps add
    }
    for (uint64_t d = 0; d < h; ++d) {
      double y = 0.0, err = 0.0, abs_sum = 0.0;
      for (uint64_t i = 0; i < hc; ++i) {
        const double xi = x[i * h + d];
        y += ref.pre[t * hc + i] * xi;
        abs_sum += std::fabs(ref.pre[t * hc + i] * xi);
        err += ref.pre_err[t * hc + i] * std::fabs(xi);
      }
      ref.block_in[t * h + d] = y;
      ref.block_err[t * h + d] = kSecondOrder * (err + gamma(static_cast<double>(hc)) * abs_sum);
    }
    if (head) continue;
    const double s1 = in.scale[1], s2 = in.scale[2];
    for (uint64_t i = 0; i < hc; ++i) {
      const double z = mix[hc + i] * s1 + in.bias[hc + i];
      ref.post[t * hc + i] = 2.0 * sigma(z);
      ref.post_err[t * hc + i] =
          2.0 * sigmoid_error(z, logit_error(mix[hc + i], mix_abs[hc + i], s1, in.bias[hc + i], K));
    }
    Doubles logits(hc * hc);
    double dl = 0.0, spread = 0.0;
    for (uint64_t k = 0; k < hc * hc; ++k) {
      const uint64_t m = 2 * hc + k;
      logits[k] = mix[m] * s2 + in.bias[m];
      dl = std::max(dl, logit_error(mix[m], mix_abs[m], s2, in.bias[m], K));
    }
    for (uint64_t i = 0; i < hc; ++i) {
      const double* row = logits.data() + i * hc;
      const double m = *std::max_element(row, row + hc);
      for (uint64_t j = 0; j < hc; ++j) spread = std::max(spread, m - row[j]);
    }
    // log K_ij moves by ≤ 2·max|Δl| (the logit and the row's log-sum-exp), plus the rounded
    // l − m (u·|l − m|), expf (2u), the division and the eps add (u each), and the row sum's
    // rounding γ_hc (not a pure row scaling because eps is added after it).
    ref.kernel_log_err[t] =
        kSecondOrder * (2 * dl + kU * spread + 4 * kU + gamma(static_cast<double>(hc)));
    const Doubles k = kernel_of(logits.data(), hc, hc_eps);
    const Doubles c = sinkhorn_reference(k, hc, iters, hc_eps, true);
    std::copy(k.begin(), k.end(), ref.kernel.begin() + static_cast<int64_t>(t * hc * hc));
    std::copy(c.begin(), c.end(), ref.comb.begin() + static_cast<int64_t>(t * hc * hc));
  }
  return ref;
}

// |stored BF16 − y| ≤ err + u8·(|y| + err) (the FP32 error, then the round to nearest).
void expect_bf16_within(uint16_t got, double want, double err, const std::string& what) {
  const double bound = err + kU8 * (std::fabs(want) + err);
  EXPECT_LE(std::fabs(double{fl(got)} - want), bound)
      << what << " got " << fl(got) << " want " << want;
}

// The Birkhoff–Hopf row bound of numerics §3 for the spec's Sinkhorn of K, widened by
// k_log_err (Δ by 4·k_log_err, log(max ρ₀/min ρ₀) by 2·k_log_err) and, for an FP32 run
// (u > 0), the derived arithmetic slack min(2γ/(1 − κ), 4tγ) + 2γ (γ = (hc + 1)·u) in the
// exponent plus the spec's 4·2^-24. The spec's formula ignores hc_eps; it holds here because
// the inputs' logits span a few units, so every column sum stays ≫ eps (with logit ranges of
// tens a column summing to a few eps breaks it: the oracle's sinkhorn_row_bound carries the
// eps-corrected recursion for the general case). The FP64 reference is held to it too.
double row_bound(const double* K, uint64_t hc, uint64_t iters, double eps, double k_log_err,
                 double u) {
  double delta = 0.0;
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j)
      for (uint64_t k = 0; k < hc; ++k)
        for (uint64_t l = 0; l < hc; ++l)
          delta = std::max(
              delta, std::log(K[i * hc + k] * K[j * hc + l] / (K[j * hc + k] * K[i * hc + l])));
  delta += 4 * k_log_err;
  const double kappa = std::tanh(delta / 4);
  Doubles c0(K, K + hc * hc);
  normalise_columns(c0, hc, eps);
  double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
  for (uint64_t i = 0; i < hc; ++i) {
    double rho = 0.0;
    for (uint64_t j = 0; j < hc; ++j) rho += c0[i * hc + j];
    lo = std::min(lo, rho);
    hi = std::max(hi, rho);
  }
  const double log_rho0 = std::log(hi / lo) + 2 * k_log_err;
  const double t = static_cast<double>(iters - 1);
  const double g = static_cast<double>(hc + 1) * u;
  const double slack = u > 0 ? std::min(2 * g / (1 - kappa), 4 * t * g) + 2 * g : 0.0;
  return std::expm1(std::pow(kappa, 2 * t) * log_rho0 + slack) + (u > 0 ? 4 * u : 0.0);
}

// The spec's acceptance of an FP32 comb (numerics §3): (a) every column sums (in FP64) to 1
// within (hc + 1)·2^-24; (b) the class check: C = D1·(K∘E)·D2 with |log E| ≤ k_log_err +
// (2·iters + 1)·u, so every cross ratio of log(C/K) is within 4× that; (c) row sums within
// the Birkhoff–Hopf bound (the FP64 reference is held to the bound too).
void expect_comb_accepted(const Floats& comb, const PreRef& ref, uint64_t rows, uint64_t hc,
                          uint64_t iters, double hc_eps) {
  const double col_tol = static_cast<double>(hc + 1) * kU;
  for (uint64_t t = 0; t < rows; ++t) {
    const float* c = comb.data() + t * hc * hc;
    const double* k = ref.kernel.data() + t * hc * hc;
    for (uint64_t j = 0; j < hc; ++j) {
      double sum = 0.0;
      for (uint64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
      EXPECT_LE(std::fabs(sum - 1.0), col_tol) << "token " << t << " column " << j;
    }
    auto lr = [&](uint64_t i, uint64_t j) { return std::log(c[i * hc + j] / k[i * hc + j]); };
    const double class_tol =
        4 * kSecondOrder * (ref.kernel_log_err[t] + static_cast<double>(2 * iters + 1) * kU);
    for (uint64_t i = 0; i < hc; ++i)
      for (uint64_t j = 0; j < hc; ++j) {
        ASSERT_GT(c[i * hc + j], 0.0f) << "token " << t << " (" << i << "," << j << ")";
        const double q = lr(i, j) - lr(i, 0) - lr(0, j) + lr(0, 0);
        EXPECT_LE(std::fabs(q), class_tol) << "token " << t << " (" << i << "," << j << ")";
      }
    const double bound32 = row_bound(k, hc, iters, hc_eps, ref.kernel_log_err[t], kU);
    const double bound64 = row_bound(k, hc, iters, hc_eps, 0.0, 0.0);
    for (uint64_t i = 0; i < hc; ++i) {
      double rho = 0.0, rho64 = 0.0;
      for (uint64_t j = 0; j < hc; ++j) {
        rho += c[i * hc + j];
        rho64 += ref.comb[t * hc * hc + i * hc + j];
      }
      EXPECT_LE(std::fabs(rho - 1.0), bound32) << "token " << t << " row " << i;
      EXPECT_LE(std::fabs(rho64 - 1.0), bound64) << "reference, token " << t << " row " << i;
    }
  }
}

void check_pre_case(uint64_t rows, uint64_t hc, uint64_t h, uint64_t seed) {
  SCOPED_TRACE("hc=" + std::to_string(hc) + " h=" + std::to_string(h));
  const ModelConfig c = mhc_config(hc, h);
  const HcPreOp op = HcPreOp::make(c, rows);
  const auto& s = op.shape();
  const PreInputs in = pre_inputs(rows, hc, h, s.mix, seed);
  const PreRun run = run_pre(op, in);
  const PreRef ref = pre_reference(rows, hc, h, s.mix, s.iters, op.rms_eps, op.hc_eps, in);
  EXPECT_EQ(run.diag.nonfinite_tokens, 0u);
  for (uint64_t k = 0; k < rows * hc; ++k)
    EXPECT_LE(std::fabs(run.post[k] - ref.post[k]), ref.post_err[k]) << "post " << k;
  for (uint64_t k = 0; k < rows * h; ++k)
    expect_bf16_within(run.block_in[k], ref.block_in[k], ref.block_err[k],
                       "block_in " + std::to_string(k));
  expect_comb_accepted(run.comb, ref, rows, hc, s.iters, op.hc_eps);
}

// h·hc = 1200 crosses the 512-value chunks of the mix GEMV and of the block-input sum.
TEST(CpuMhcPre, MatchesTheDoubleLoopHc4) { check_pre_case(5, 4, 300, 1); }

// hc = 16: the 288-row mix vector and the 16×16 comb in the stack arrays.
TEST(CpuMhcPre, MatchesTheDoubleLoopHc16) { check_pre_case(3, 16, 40, 2); }

// hc = 1: the Sinkhorn of a 1×1 matrix is exactly 1 (x/x); y = bf16(pre_0·x).
TEST(CpuMhcPre, HcOneGivesCombOne) {
  check_pre_case(4, 1, 700, 3);
  const HcPreOp op = HcPreOp::make(mhc_config(1, 700), 4);
  const PreRun run = run_pre(op, pre_inputs(4, 1, 700, op.shape().mix, 3));
  EXPECT_EQ(run.comb, Floats(4, 1.0f));
}

// M-SKCOL leaves the last column normalisation with hc_eps in its denominator, so the column
// sums are Σ/(1e-6 + Σ) ≈ 1 − 1e-6: outside the (hc + 1)·2^-24 ≈ 3e-7 the spec allows.
TEST(CpuMhcPre, MutantSkcolBreaksTheColumnSums) {
  const uint64_t rows = 4, hc = 4, h = 64;
  const HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  ASSERT_EQ(op.hc_eps, 1e-6);
  const PreInputs in = pre_inputs(rows, hc, h, op.shape().mix, 4);
  auto worst = [&](const Floats& comb) {
    double w = 0.0;
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t j = 0; j < hc; ++j) {
        double sum = 0.0;
        for (uint64_t i = 0; i < hc; ++i) sum += comb[t * hc * hc + i * hc + j];
        w = std::max(w, std::fabs(sum - 1.0));
      }
    return w;
  };
  const double tol = (hc + 1) * kU;
  const PreRun good = run_pre(op, in);
  const PreRun bad = run_pre(op, in, Mutant::M_SKCOL);
  EXPECT_LE(worst(good.comb), tol);
  EXPECT_GT(worst(bad.comb), tol);
  EXPECT_GT(worst(bad.comb), 0.5e-6);
  EXPECT_EQ(bad.post, good.post);  // only the comb changes
  EXPECT_EQ(bad.block_in, good.block_in);
}

// A NaN, +Inf or −Inf anywhere in a token's streams: every output of that token NaN, counted
// once; the other tokens bit-identical to a clean run.
TEST(CpuMhcPre, NonFiniteTokenIsNanAndCounted) {
  const uint64_t rows = 4, hc = 4, h = 96, bad = 2, K = hc * h;
  const HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  const PreInputs clean = pre_inputs(rows, hc, h, op.shape().mix, 5);
  const PreRun ok = run_pre(op, clean);
  EXPECT_EQ(ok.diag.nonfinite_tokens, 0u);
  for (float poison :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    PreInputs in = clean;
    in.x[bad * K + 3 * h + 17] = poison;
    const PreRun run = run_pre(op, in);
    EXPECT_EQ(run.diag.nonfinite_tokens, 1u) << poison;
    for (uint64_t i = 0; i < hc; ++i) EXPECT_TRUE(std::isnan(run.post[bad * hc + i]));
    for (uint64_t k = 0; k < hc * hc; ++k) EXPECT_TRUE(std::isnan(run.comb[bad * hc * hc + k]));
    for (uint64_t d = 0; d < h; ++d) EXPECT_TRUE(bf_nan(run.block_in[bad * h + d]));
    for (uint64_t t = 0; t < rows; ++t) {
      if (t == bad) continue;
      EXPECT_TRUE(same_bits(run.post, ok.post, t * hc, (t + 1) * hc)) << t;
      EXPECT_TRUE(same_bits(run.comb, ok.comb, t * hc * hc, (t + 1) * hc * hc)) << t;
      EXPECT_TRUE(same_bits(run.block_in, ok.block_in, t * h, (t + 1) * h)) << t;
    }
  }
}

// Streams ×2^100 (≈ 1e30): the kernel reads x·2^-e exactly, so with rms_eps = 0 (which makes
// the definition exactly scale-invariant) post and comb are bit-identical to the unscaled run
// and the block input is exactly 2^100 times its (the BF16 rounding commutes with 2^100). With
// the model's eps = 1e-6 the small run's rsqrt sees eps/ms more (ms = mean x² ≈ 1/3), moving
// post by at most |s1|/4·|mix|·eps/ms on top of both runs' FP32 bounds.
TEST(CpuMhcPre, HugeStreamsScaleInvariant) {
  const uint64_t rows = 3, hc = 4, h = 200, K = hc * h;
  HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  const PreInputs small = pre_inputs(rows, hc, h, op.shape().mix, 6);
  PreInputs huge = small;
  for (float& v : huge.x) v = std::ldexp(v, 100);
  {
    HcPreOp exact = op;
    exact.rms_eps = 0.0;
    const PreRun a = run_pre(exact, small), b = run_pre(exact, huge);
    EXPECT_EQ(b.diag.nonfinite_tokens, 0u);
    EXPECT_TRUE(same_bits(a.post, b.post, 0, a.post.size()));
    EXPECT_TRUE(same_bits(a.comb, b.comb, 0, a.comb.size()));
    for (uint64_t k = 0; k < rows * h; ++k)
      ASSERT_EQ(fl(b.block_in[k]), std::ldexp(fl(a.block_in[k]), 100)) << k;
  }
  const PreRun a = run_pre(op, small), b = run_pre(op, huge);
  const PreRef ref =
      pre_reference(rows, hc, h, op.shape().mix, op.shape().iters, op.rms_eps, op.hc_eps, small);
  for (uint64_t t = 0; t < rows; ++t) {
    double ms = 0.0;
    for (uint64_t k = 0; k < K; ++k) ms += double{small.x[t * K + k]} * small.x[t * K + k] / K;
    for (uint64_t i = 0; i < hc; ++i) {
      const uint64_t k = t * hc + i;
      const double eps_shift =
          0.25 * std::fabs(small.scale[1] * ref.mix[t * op.shape().mix + hc + i]) * op.rms_eps / ms;
      ASSERT_TRUE(std::isfinite(b.post[k]));
      EXPECT_LE(std::fabs(b.post[k] - a.post[k]), 2 * ref.post_err[k] + eps_shift) << k;
    }
  }
  for (float v : b.comb) ASSERT_TRUE(std::isfinite(v));
  for (uint16_t v : b.block_in) ASSERT_TRUE(std::isfinite(fl(v)));
}

// Zero streams: r = 1/sqrt(eps), mix = 0, so pre/post/comb come from the biases alone and the
// block input is +0 everywhere.
TEST(CpuMhcPre, ZeroStreams) {
  const uint64_t rows = 2, hc = 4, h = 32;
  const HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  PreInputs in = pre_inputs(rows, hc, h, op.shape().mix, 7);
  std::fill(in.x.begin(), in.x.end(), 0.0f);
  const PreRun run = run_pre(op, in);
  const PreRef ref =
      pre_reference(rows, hc, h, op.shape().mix, op.shape().iters, op.rms_eps, op.hc_eps, in);
  EXPECT_EQ(run.diag.nonfinite_tokens, 0u);
  EXPECT_EQ(run.block_in, Bits(rows * h, 0));
  for (uint64_t k = 0; k < rows * hc; ++k) {
    EXPECT_EQ(ref.mix[k / hc * op.shape().mix + hc + k % hc], 0.0);
    EXPECT_LE(std::fabs(run.post[k] - ref.post[k]), ref.post_err[k]) << k;
  }
  expect_comb_accepted(run.comb, ref, rows, hc, op.shape().iters, op.hc_eps);
}

TEST(CpuMhcPre, RefusesZeroIterations) {
  const HcPreOp op = HcPreOp::make(mhc_config(4, 8, 0, /*iters=*/0), 2);
  EXPECT_THROW(run_pre(op, pre_inputs(2, 4, 8, op.shape().mix, 9)), Error);
}

// ---- head

struct HeadRun {
  Bits y;
  HcDiagnostics diag;
};

HeadRun run_head(HcHeadOp op, const PreInputs& in) {
  const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
  Rig rig({op.accesses()}, pool);
  rig.put(op.streams, in.x);
  rig.put(op.fn, in.fn);
  rig.put(op.scale, Floats{in.scale[0]});
  rig.put(op.bias, Floats(in.bias.begin(), in.bias.begin() + static_cast<int64_t>(op.shape().hc)));
  HeadRun run;
  run.diag = rig.backend->hc_head(rig.ws, op);
  run.y = rig.get<uint16_t>(op.output);
  return run;
}

void check_head_case(uint64_t rows, uint64_t hc, uint64_t h, uint64_t seed) {
  SCOPED_TRACE("hc=" + std::to_string(hc));
  const HcHeadOp op = HcHeadOp::make(mhc_config(hc, h), rows);
  const PreInputs in = pre_inputs(rows, hc, h, hc, seed);  // fn [hc, hc·h], bias [hc]
  const HeadRun run = run_head(op, in);
  const PreRef ref = pre_reference(rows, hc, h, hc, 1, op.rms_eps, op.hc_eps, in, /*head=*/true);
  EXPECT_EQ(run.diag.nonfinite_tokens, 0u);
  for (uint64_t k = 0; k < rows * h; ++k)
    expect_bf16_within(run.y[k], ref.block_in[k], ref.block_err[k], "head " + std::to_string(k));
}

TEST(CpuMhcHead, MatchesTheDoubleLoop) {
  check_head_case(5, 4, 300, 10);
  check_head_case(2, 1, 64, 11);
  check_head_case(2, 16, 40, 12);
}

TEST(CpuMhcHead, NonFiniteHugeAndZeroStreams) {
  const uint64_t rows = 3, hc = 4, h = 64, K = hc * h;
  HcHeadOp op = HcHeadOp::make(mhc_config(hc, h), rows);
  const PreInputs clean = pre_inputs(rows, hc, h, hc, 13);
  const HeadRun ok = run_head(op, clean);
  PreInputs in = clean;
  in.x[1 * K + 5] = std::numeric_limits<float>::infinity();
  const HeadRun bad = run_head(op, in);
  EXPECT_EQ(bad.diag.nonfinite_tokens, 1u);
  for (uint64_t d = 0; d < h; ++d) EXPECT_TRUE(bf_nan(bad.y[h + d]));
  EXPECT_TRUE(same_bits(bad.y, ok.y, 0, h));
  EXPECT_TRUE(same_bits(bad.y, ok.y, 2 * h, 3 * h));

  op.rms_eps = 0.0;  // exactly scale-invariant: y scales by exactly 2^100
  PreInputs huge = clean;
  for (float& v : huge.x) v = std::ldexp(v, 100);
  const HeadRun a = run_head(op, clean), b = run_head(op, huge);
  for (uint64_t k = 0; k < rows * h; ++k) ASSERT_EQ(fl(b.y[k]), std::ldexp(fl(a.y[k]), 100)) << k;

  op.rms_eps = 1e-6;
  PreInputs zero = clean;
  std::fill(zero.x.begin(), zero.x.end(), 0.0f);
  EXPECT_EQ(run_head(op, zero).y, Bits(rows * h, 0));
}

// ---- expand

TEST(CpuMhcExpand, EveryStreamIsTheBf16Row) {
  for (uint64_t hc : {uint64_t{1}, uint64_t{4}, kMaxHcMult}) {
    const uint64_t rows = 3, h = 37;
    const HcExpandOp op = HcExpandOp::make(mhc_config(hc, h), rows);
    Rig rig({op.accesses()}, 0);
    const Bits x = bf16_values(rows * h, 15, 3.0f);
    rig.put(op.input, x);
    rig.backend->hc_expand(rig.ws, op);
    const Floats s = rig.get<float>(op.streams);
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t i = 0; i < hc; ++i)
        for (uint64_t d = 0; d < h; ++d)
          ASSERT_EQ(s[(t * hc + i) * h + d], fl(x[t * h + d])) << t << "," << i << "," << d;
  }
}

// ============================================================== post

struct PostInputs {
  Floats post, comb, x;
  Bits block_out;
};

PostInputs post_inputs(const HcPostOp& op, uint64_t seed) {
  const auto& s = op.shape();
  PostInputs in;
  in.post = values(s.rows * s.hc, seed, 0.9f, 1.0f);
  if (!s.lowrank) in.comb = values(s.rows * s.hc * s.hc, seed + 1, 0.5f, 0.5f);
  in.x = values(s.rows * s.hc * s.h, seed + 2, 4.0f);
  in.block_out = bf16_values(s.rows * s.h, seed + 3, 0.25f);
  return in;
}

// Runs the op in place (out = streams, as made) or out of place (out in splitk_workspace).
Floats run_post(const HcPostOp& made, const PostInputs& in, bool in_place,
                Mutant mutant = Mutant::none) {
  HcPostOp op = made;
  if (!in_place) op.out = arena_tensor(BufferId::splitk_workspace, 0, op.streams.shape, DType::f32);
  Rig rig({op.accesses()}, 0);
  rig.backend->set_kernel_mutant(mutant);
  rig.put(op.post, in.post);
  if (!op.shape().lowrank) rig.put(op.comb, in.comb);
  rig.put(op.block_out, in.block_out);
  rig.put(op.streams, in.x);
  rig.backend->hc_post(rig.ws, op);
  return rig.get<float>(op.out);
}

void check_post_case(uint64_t rows, uint64_t hc, uint64_t h, bool lowrank, uint64_t seed) {
  SCOPED_TRACE("hc=" + std::to_string(hc) + (lowrank ? " lowrank" : " sinkhorn"));
  const HcPostOp op = HcPostOp::make(mhc_config(hc, h, lowrank ? 3 : 0), rows);
  ASSERT_EQ(op.shape().lowrank, lowrank);
  const PostInputs in = post_inputs(op, seed);
  const Floats out = run_post(op, in, /*in_place=*/false);
  const Floats same = run_post(op, in, /*in_place=*/true);
  EXPECT_TRUE(same_bits(out, same, 0, out.size()));
  const Floats b13 = run_post(op, in, false, Mutant::B13);
  EXPECT_TRUE(same_bits(b13, run_post(op, in, true, Mutant::B13), 0, b13.size()));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t j = 0; j < hc; ++j)
      for (uint64_t d = 0; d < h; ++d) {
        const uint64_t at = (t * hc + j) * h + d;
        const double bo = fl(in.block_out[t * h + d]);
        double want = 0.0, err = 0.0;
        if (lowrank) {
          // x + post·bo: two roundings, γ_2 of the terms' magnitudes.
          const double p = double{in.post[t * hc + j]} * bo;
          want = in.x[at] + p;
          err = gamma(2) * (std::fabs(in.x[at]) + std::fabs(p));
        } else {
          // post_j·bo + Σ_i comb_ij·x_i in order: hc + 1 products and hc sums, γ_(hc+1).
          double abs_sum = std::fabs(double{in.post[t * hc + j]} * bo);
          want = in.post[t * hc + j] * bo;
          for (uint64_t i = 0; i < hc; ++i) {
            const double term = double{in.comb[(t * hc + i) * hc + j]} * in.x[(t * hc + i) * h + d];
            want += term;
            abs_sum += std::fabs(term);
          }
          err = gamma(static_cast<double>(hc + 1)) * abs_sum;
        }
        ASSERT_LE(std::fabs(out[at] - want), err) << t << "," << j << "," << d;
        // B13: the BF16 rounding of the very FP32 value the spec kernel stores.
        ASSERT_EQ(b13[at], round_to_bf16(out[at])) << at;
        ASSERT_EQ(b13[at], round_to_bf16(b13[at])) << at;  // representable
      }
}

// h = 600 crosses the 256-column chunks of the Sinkhorn form and the 512 of the low-rank form.
TEST(CpuMhcPost, SinkhornFormInPlaceEqualsOutOfPlace) {
  check_post_case(3, 4, 600, false, 20);
  check_post_case(2, 1, 70, false, 21);
  check_post_case(2, kMaxHcMult, 300, false, 22);
}

TEST(CpuMhcPost, LowRankFormInPlaceEqualsOutOfPlace) {
  check_post_case(3, 4, 600, true, 23);
  check_post_case(2, kMaxHcMult, 64, true, 24);
}

// ============================================================== low-rank pre

struct LowRankWeights {
  Floats norm_w, w_down, w_inject, w_up;  // FP32, the split path's
};

LowRankWeights lowrank_weights(uint64_t hc, uint64_t h, uint64_t r, uint64_t seed) {
  const uint64_t K = hc * h;
  LowRankWeights w;
  w.norm_w = values(hc * h, seed, 0.3f);
  const auto down = static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(K)));
  w.w_down = values(r * K, seed + 1, down);
  w.w_inject = values(hc * K, seed + 2, down);
  w.w_up =
      values(K * r, seed + 3, static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(r))));
  return w;
}

Bits to_bf16(const Floats& v) {
  Bits b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = bf(v[i]);
  return b;
}

struct LowRankRun {
  Floats normed_f32;   // split
  Bits normed_bf16;    // slab
  Bits block_in;       // [T, h]
  Floats post;         // [T, hc]
  HcDiagnostics diag;  // summed over every stage of the run
};

using SplitStage = HcLowRankSplitOp::Stage;
using SlabStage = HcLowRankSlabOp::Stage;

LowRankRun run_split(const ModelConfig& c, uint64_t T, const Floats& x, const LowRankWeights& w) {
  HcLowRankSplitOp ops[3] = {HcLowRankSplitOp::make(SplitStage::norm, c, T),
                             HcLowRankSplitOp::make(SplitStage::down, c, T),
                             HcLowRankSplitOp::make(SplitStage::collapse, c, T)};
  HcLowRankSplitOp& t = ops[0];
  const uint64_t pool = oracle::place_in_pool({&t.norm_w, &t.w_down_inject, &t.w_up});
  for (auto& op : ops) {
    op.norm_w = t.norm_w;
    op.w_down_inject = t.w_down_inject;
    op.w_up = t.w_up;
  }
  Rig rig({ops[0].accesses(), ops[1].accesses(), ops[2].accesses()}, pool);
  Floats down_inject = w.w_down;
  down_inject.insert(down_inject.end(), w.w_inject.begin(), w.w_inject.end());
  rig.put(t.streams, x);
  rig.put(t.norm_w, w.norm_w);
  rig.put(t.w_down_inject, down_inject);
  rig.put(t.w_up, w.w_up);
  LowRankRun run;
  for (const auto& op : ops)
    run.diag.nonfinite_tokens += rig.backend->hc_lowrank_split(rig.ws, op).nonfinite_tokens;
  run.normed_f32 = rig.get<float>(t.normed);
  run.block_in = rig.get<uint16_t>(ops[2].block_in);
  run.post = rig.get<float>(ops[1].post);
  return run;
}

// The GEMM path over m tokens in slabs of HcGemmCarve::slab_rows, every stage of a slab in
// order, the weights the BF16 roundings of w.
LowRankRun run_slab(const ModelConfig& c, uint64_t m, const Floats& x, const LowRankWeights& w) {
  const uint64_t hc = c.hc_mult, h = c.hidden_size;
  const uint64_t slab = HcGemmCarve::make(m, hc, h, c.hc_lowrank).slab_rows;
  HcLowRankSlabOp t = HcLowRankSlabOp::make(SlabStage::norm, c, m, 0, slab);
  const uint64_t pool = oracle::place_in_pool({&t.norm_w, &t.w_down, &t.w_inject, &t.w_up});
  const SlabStage stages[] = {SlabStage::norm, SlabStage::down, SlabStage::inject, SlabStage::up,
                              SlabStage::collapse};
  std::vector<HcLowRankSlabOp> ops;
  for (uint64_t row0 = 0; row0 < m; row0 += slab)
    for (SlabStage s : stages) {
      HcLowRankSlabOp op = HcLowRankSlabOp::make(s, c, m, row0, std::min(slab, m - row0));
      op.norm_w = t.norm_w;
      op.w_down = t.w_down;
      op.w_inject = t.w_inject;
      op.w_up = t.w_up;
      ops.push_back(op);
    }
  std::vector<std::vector<Access>> accesses;
  for (const auto& op : ops) accesses.push_back(op.accesses());
  const TensorRef streams = arena_tensor(BufferId::hc_streams, 0, {m, hc, h}, DType::f32);
  const TensorRef block_in = arena_tensor(BufferId::norm_output, 0, {m, h}, DType::bf16);
  const TensorRef post = arena_tensor(BufferId::hc_post, 0, {m, hc}, DType::f32);
  accesses.push_back({{streams, AccessKind::read, "@hc"},
                      {block_in, AccessKind::write, "norm"},
                      {post, AccessKind::write, "hc_post"}});
  Rig rig(accesses, pool);
  rig.put(streams, x);
  rig.put(t.norm_w, w.norm_w);
  rig.put(t.w_down, to_bf16(w.w_down));
  rig.put(t.w_inject, to_bf16(w.w_inject));
  rig.put(t.w_up, to_bf16(w.w_up));
  LowRankRun run;
  for (const auto& op : ops) {
    run.diag.nonfinite_tokens += rig.backend->hc_lowrank_slab(rig.ws, op).nonfinite_tokens;
    if (op.stage == SlabStage::norm) {
      const Bits n = rig.get<uint16_t>(op.normed);
      run.normed_bf16.insert(run.normed_bf16.end(), n.begin(), n.end());
    }
  }
  run.block_in = rig.get<uint16_t>(block_in);
  run.post = rig.get<float>(post);
  return run;
}

// The double loop of numerics §4 on the FP32 weights, and for a path whose weights and stored
// intermediates carry relative roundings θw and θs (BF16 slab: u8, u8; FP32 split: 0, 0)
// first-order error bounds of its outputs, each FP32 operation included:
//   n:    (x̂·rs)·(1 + w): rs relative (γ_h + 3u)/2 + 2u, three products → e32 = that + 3u;
//         θn = e32 + θs(1 + e32) with the normed store.
//   z = W_down·n:  |Δz| ≤ ((1 + θn)(1 + θw)(1 + γ_K) − 1)·Σ|W n|   (same for inj = W_inject·n)
//   low = silu(z/hc): silu' ≤ 1.1, the division u, silu in FP32 4u, the store θs.
//   up = W_up·low: Σ|W_up|·Δlow·(1 + θw) + ((1 + θw)(1 + γ_r) − 1)·Σ|W_up·low|, the store θs.
//   y = (1/hc)·Σ_i σ(up)·n: Δσ = Δup/4 + 4uσ, times |n|(1 + θn), plus σ·θn·|n|, the γ_hc sum
//         and the 1/hc product (2u: 1/hc itself rounded for hc not a power of two).
//   post = 2σ(inj/hc): inj stored (θs), the division u, 2·Δσ.
// All are multiplied by 1.01 for the second-order terms. The stored BF16 y then adds
// u8·(|y| + Δy) (expect_bf16_within).
struct LowRankRef {
  Doubles y, y_err, post, post_err;
};

LowRankRef lowrank_reference(uint64_t T, uint64_t hc, uint64_t h, uint64_t r, double eps,
                             const Floats& x, const LowRankWeights& w, double theta_w,
                             double theta_s) {
  const uint64_t K = hc * h;
  const double e32 = (gamma(static_cast<double>(h)) + 3 * kU) / 2 + 5 * kU;
  const double theta_n = e32 + theta_s * (1 + e32);
  const double dot_rel = (1 + theta_n) * (1 + theta_w) * (1 + gamma(static_cast<double>(K))) - 1;
  const double up_rel = (1 + theta_w) * (1 + gamma(static_cast<double>(r))) - 1;
  LowRankRef ref;
  ref.y.resize(T * h);
  ref.y_err.resize(T * h);
  ref.post.resize(T * hc);
  ref.post_err.resize(T * hc);
  Doubles n(K), low(r), dlow(r);
  for (uint64_t t = 0; t < T; ++t) {
    const float* xt = x.data() + t * K;
    for (uint64_t i = 0; i < hc; ++i) {
      double ss = 0.0;
      for (uint64_t d = 0; d < h; ++d) ss += double{xt[i * h + d]} * xt[i * h + d];
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
      for (uint64_t d = 0; d < h; ++d)
        n[i * h + d] = xt[i * h + d] * rs * (1.0 + w.norm_w[i * h + d]);
    }
    for (uint64_t j = 0; j < r; ++j) {
      double z = 0.0, a = 0.0;
      for (uint64_t k = 0; k < K; ++k) {
        z += double{w.w_down[j * K + k]} * n[k];
        a += std::fabs(double{w.w_down[j * K + k]} * n[k]);
      }
      const double q = z / static_cast<double>(hc);
      low[j] = silu(q);
      const double dq = dot_rel * a / static_cast<double>(hc) + kU * std::fabs(q);
      const double d = 1.1 * dq + 4 * kU * std::fabs(low[j]);
      dlow[j] = kSecondOrder * (d + theta_s * (std::fabs(low[j]) + d));
    }
    for (uint64_t d = 0; d < h; ++d) {
      double y = 0.0, dy = 0.0, mag = 0.0;
      for (uint64_t i = 0; i < hc; ++i) {
        const uint64_t k = i * h + d;
        double up = 0.0, b = 0.0, e = 0.0;
        for (uint64_t j = 0; j < r; ++j) {
          up += double{w.w_up[k * r + j]} * low[j];
          b += std::fabs(double{w.w_up[k * r + j]} * low[j]);
          e += std::fabs(double{w.w_up[k * r + j]}) * dlow[j] * (1 + theta_w);
        }
        e += up_rel * b;
        e += theta_s * (std::fabs(up) + e);
        const double g = sigma(up), dg = sigmoid_error(up, e), an = std::fabs(n[k]);
        y += g * n[k];
        mag += g * an;
        dy += dg * an * (1 + theta_n) + g * theta_n * an;
      }
      ref.y[t * h + d] = y / static_cast<double>(hc);
      ref.y_err[t * h + d] = kSecondOrder * (dy + (gamma(static_cast<double>(hc)) + 2 * kU) * mag) /
                             static_cast<double>(hc);
    }
    for (uint64_t i = 0; i < hc; ++i) {
      double inj = 0.0, a = 0.0;
      for (uint64_t k = 0; k < K; ++k) {
        inj += double{w.w_inject[i * K + k]} * n[k];
        a += std::fabs(double{w.w_inject[i * K + k]} * n[k]);
      }
      double e = dot_rel * a;
      e += theta_s * (std::fabs(inj) + e);
      const double q = inj / static_cast<double>(hc);
      ref.post[t * hc + i] = 2 * sigma(q);
      ref.post_err[t * hc + i] =
          kSecondOrder * 2 * sigmoid_error(q, e / static_cast<double>(hc) + kU * std::fabs(q));
    }
  }
  return ref;
}

void check_lowrank_case(uint64_t T, uint64_t hc, uint64_t h, uint64_t r, uint64_t seed) {
  SCOPED_TRACE("T=" + std::to_string(T) + " hc=" + std::to_string(hc) + " h=" + std::to_string(h) +
               " r=" + std::to_string(r));
  const ModelConfig c = mhc_config(hc, h, r);
  const Floats x = values(T * hc * h, seed, 2.0f);
  const LowRankWeights w = lowrank_weights(hc, h, r, seed + 10);
  const LowRankRun split = run_split(c, T, x, w);
  const LowRankRun slab = run_slab(c, T, x, w);
  EXPECT_EQ(split.diag.nonfinite_tokens, 0u);
  EXPECT_EQ(slab.diag.nonfinite_tokens, 0u);
  // The slab's normed is the BF16 store of the very FP32 value the split path keeps.
  ASSERT_EQ(slab.normed_bf16.size(), split.normed_f32.size());
  for (size_t k = 0; k < split.normed_f32.size(); ++k)
    ASSERT_EQ(slab.normed_bf16[k], bf(split.normed_f32[k])) << k;
  const LowRankRef fp32 = lowrank_reference(T, hc, h, r, c.rms_norm_eps, x, w, 0.0, 0.0);
  const LowRankRef bf16 = lowrank_reference(T, hc, h, r, c.rms_norm_eps, x, w, kU8, kU8);
  for (uint64_t k = 0; k < T * h; ++k) {
    expect_bf16_within(split.block_in[k], fp32.y[k], fp32.y_err[k], "split y " + std::to_string(k));
    expect_bf16_within(slab.block_in[k], bf16.y[k], bf16.y_err[k], "slab y " + std::to_string(k));
    // Both against the same exact y: they agree within the sum of the two stored bounds.
    const double both = fp32.y_err[k] + kU8 * (std::fabs(fp32.y[k]) + fp32.y_err[k]) +
                        bf16.y_err[k] + kU8 * (std::fabs(bf16.y[k]) + bf16.y_err[k]);
    ASSERT_LE(std::fabs(fl(split.block_in[k]) - fl(slab.block_in[k])), both) << "y " << k;
  }
  for (uint64_t k = 0; k < T * hc; ++k) {
    EXPECT_LE(std::fabs(split.post[k] - fp32.post[k]), fp32.post_err[k]) << "split post " << k;
    EXPECT_LE(std::fabs(slab.post[k] - bf16.post[k]), bf16.post_err[k]) << "slab post " << k;
    ASSERT_LE(std::fabs(split.post[k] - slab.post[k]), fp32.post_err[k] + bf16.post_err[k]) << k;
  }
}

// T = 70 crosses the GEMM's 64-row tile, K = 256 two 128-deep panels, r = 20 a partial tile.
TEST(CpuMhcLowRank, SplitAndSlabAgreeWithinBf16Bounds) { check_lowrank_case(70, 4, 64, 20, 30); }

// m = 2100: two slabs (2048 + 52 rows) on one carve; hc = 3 (1/hc inexact), K = 288.
TEST(CpuMhcLowRank, TwoSlabsOnOneCarve) { check_lowrank_case(2100, 3, 96, 20, 31); }

TEST(CpuMhcLowRank, HcOneAndSixteen) {
  check_lowrank_case(5, 1, 40, 6, 32);
  check_lowrank_case(5, kMaxHcMult, 8, 5, 33);
}

// A non-finite token: its normed row (all streams) NaN and counted once by the norm stage;
// the later stages carry it to NaN block input and post; other tokens bit-identical.
TEST(CpuMhcLowRank, NonFiniteTokenIsNanAndCountedOnce) {
  const uint64_t T = 6, hc = 4, h = 48, r = 7, K = hc * h, bad = 4;
  const ModelConfig c = mhc_config(hc, h, r);
  const Floats clean = values(T * K, 40, 2.0f);
  const LowRankWeights w = lowrank_weights(hc, h, r, 41);
  Floats x = clean;
  x[bad * K + 2 * h + 1] = -std::numeric_limits<float>::infinity();
  const LowRankRun split_ok = run_split(c, T, clean, w), split = run_split(c, T, x, w);
  const LowRankRun slab_ok = run_slab(c, T, clean, w), slab = run_slab(c, T, x, w);
  EXPECT_EQ(split.diag.nonfinite_tokens, 1u);
  EXPECT_EQ(slab.diag.nonfinite_tokens, 1u);
  for (uint64_t k = 0; k < K; ++k) {
    EXPECT_TRUE(std::isnan(split.normed_f32[bad * K + k]));
    EXPECT_TRUE(bf_nan(slab.normed_bf16[bad * K + k]));
  }
  for (uint64_t d = 0; d < h; ++d) {
    EXPECT_TRUE(bf_nan(split.block_in[bad * h + d]));
    EXPECT_TRUE(bf_nan(slab.block_in[bad * h + d]));
  }
  for (uint64_t i = 0; i < hc; ++i) {
    EXPECT_TRUE(std::isnan(split.post[bad * hc + i]));
    EXPECT_TRUE(std::isnan(slab.post[bad * hc + i]));
  }
  for (uint64_t t = 0; t < T; ++t) {
    if (t == bad) continue;
    EXPECT_TRUE(same_bits(split.normed_f32, split_ok.normed_f32, t * K, (t + 1) * K)) << t;
    EXPECT_TRUE(same_bits(split.block_in, split_ok.block_in, t * h, (t + 1) * h)) << t;
    EXPECT_TRUE(same_bits(split.post, split_ok.post, t * hc, (t + 1) * hc)) << t;
    EXPECT_TRUE(same_bits(slab.normed_bf16, slab_ok.normed_bf16, t * K, (t + 1) * K)) << t;
    EXPECT_TRUE(same_bits(slab.block_in, slab_ok.block_in, t * h, (t + 1) * h)) << t;
    EXPECT_TRUE(same_bits(slab.post, slab_ok.post, t * hc, (t + 1) * hc)) << t;
  }
}

// Per-stream scaling: streams ×2^100 normalise to the same bits (rms_eps = 0: exactly
// scale-invariant), also when only one stream of a token is huge; zero streams give normed 0,
// block input +0 and post 2σ(0) = 1 exactly.
TEST(CpuMhcLowRank, HugeAndZeroStreams) {
  const uint64_t T = 3, hc = 4, h = 40, r = 6, K = hc * h;
  ModelConfig c = mhc_config(hc, h, r);
  c.rms_norm_eps = 0.0;
  const Floats small = values(T * K, 42, 2.0f);
  const LowRankWeights w = lowrank_weights(hc, h, r, 43);
  Floats huge = small;
  for (uint64_t k = 0; k < T * K; ++k)
    if (k / K != 1 || (k % K) / h == 2) huge[k] = std::ldexp(small[k], 100);  // token 1: stream 2
  const LowRankRun a = run_split(c, T, small, w), b = run_split(c, T, huge, w);
  EXPECT_EQ(b.diag.nonfinite_tokens, 0u);
  EXPECT_TRUE(same_bits(a.normed_f32, b.normed_f32, 0, a.normed_f32.size()));
  EXPECT_EQ(a.block_in, b.block_in);
  EXPECT_EQ(a.post, b.post);
  const LowRankRun sa = run_slab(c, T, small, w), sb = run_slab(c, T, huge, w);
  EXPECT_EQ(sa.normed_bf16, sb.normed_bf16);
  EXPECT_EQ(sa.block_in, sb.block_in);

  c.rms_norm_eps = 1e-6;
  const Floats zero(T * K, 0.0f);
  for (const LowRankRun& z : {run_split(c, T, zero, w), run_slab(c, T, zero, w)}) {
    EXPECT_EQ(z.diag.nonfinite_tokens, 0u);
    EXPECT_EQ(z.block_in, Bits(T * h, 0));
    EXPECT_EQ(z.post, Floats(T * hc, 1.0f));
  }
}

// Every op refuses hc = 0 and hc = kMaxHcMult + 1 (both forms of post, every low-rank stage).
TEST(CpuMhcErrors, EveryOpRefusesHcOutsideTheKernelRange) {
  for (uint64_t hc : {uint64_t{0}, kMaxHcMult + 1}) {
    SCOPED_TRACE("hc=" + std::to_string(hc));
    const ModelConfig c = mhc_config(hc, 8);
    const ModelConfig lr = mhc_config(hc, 8, 2);
    expect_hc_refused(HcExpandOp::make(c, 2),
                      [](Backend& b, const Workspace& ws, const auto& op) { b.hc_expand(ws, op); });
    expect_hc_refused(HcPreOp::make(c, 2),
                      [](Backend& b, const Workspace& ws, const auto& op) { b.hc_pre(ws, op); });
    expect_hc_refused(HcHeadOp::make(c, 2),
                      [](Backend& b, const Workspace& ws, const auto& op) { b.hc_head(ws, op); });
    for (const ModelConfig& form : {c, lr})
      expect_hc_refused(HcPostOp::make(form, 2),
                        [](Backend& b, const Workspace& ws, const auto& op) { b.hc_post(ws, op); });
    for (SplitStage s : {SplitStage::norm, SplitStage::down, SplitStage::collapse})
      expect_hc_refused(
          HcLowRankSplitOp::make(s, lr, 2),
          [](Backend& b, const Workspace& ws, const auto& op) { b.hc_lowrank_split(ws, op); });
    for (SlabStage s :
         {SlabStage::norm, SlabStage::down, SlabStage::inject, SlabStage::up, SlabStage::collapse})
      expect_hc_refused(
          HcLowRankSlabOp::make(s, lr, 100, 0, 100),
          [](Backend& b, const Workspace& ws, const auto& op) { b.hc_lowrank_slab(ws, op); });
  }
}

}  // namespace
}  // namespace bufferlab
