// CudaBackend's mHC hyper-connection ops (spec/numerics.md §3–§4, core ops/mhc.h).
//
// Suite CudaMhc (small shapes, run under compute-sanitizer too): the properties that need no
// oracle, each exact or with a bound derived next to it —
//   expand:   every stream is the BF16 row, bit for bit, and equal to the CPU's;
//   post:     in place == out of place bit for bit (both forms, B13 too); B13 stores BF16
//             values and changes the result; CUDA vs CPU within 2·γ_(hc+1)·Σ|terms|;
//   pre/head/low-rank norm: a token holding NaN / ±Inf writes NaN to every output, is counted
//             once, and leaves every other token bit-identical to a clean run; streams ×2^100
//             (rms_eps = 0) give bit-identical post / comb / normed and a block input exactly
//             2^100 times larger (the power-of-two scaling is exact);
//   Sinkhorn: every comb column sums (FP64) to 1 within (hc + 1)·2^-24, entries ≥ 0, for
//             hc = 1, 4, 16 and iters = 1, 3, 20; M-SKCOL breaks the column sums (hc_eps =
//             1e-3 makes the missing normalisation visible) — the mutant is caught;
//   errors:   hc = 0 and hc = 17 refused by every op; iters = 0 refused;
//   memory:   execute() of every mHC op allocates no device memory (cudaMemGetInfo).
// Suite CudaMhcOracle: every op against the FP64 oracle judges and the CPU backend (T = 64 on
// the split path, T = 65 on the slab path among them).
//
// Without a usable GPU every test is SKIPPED with cuda_unavailable_reason().
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;

constexpr double kU = 0x1p-24;  // FP32 unit roundoff

double gamma(double n) { return n * kU / (1.0 - n * kU); }
float fl(uint16_t b) { return bf16_bits_to_f32(b); }
bool bf_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n deterministic values in [-scale, scale), on a grid of 2^16 steps.
Floats values(uint64_t n, uint64_t seed, float scale) {
  Floats v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const auto q = static_cast<int64_t>(mix64(i * 0x100000001B3ull + seed) >> 48) - 32768;
    v[i] = scale * static_cast<float>(q) / 32768.0f;
  }
  return v;
}

Bits bf16_values(uint64_t n, uint64_t seed, float scale) {
  const Floats v = values(n, seed, scale);
  Bits b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = f32_to_bf16_bits(v[i]);
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

// A workspace on `backend` whose arena holds every arena tensor of the given accesses and a
// weight pool of `pool_bytes`, poisoned (NaN) so an unwritten output fails.
struct Rig {
  Backend* backend = nullptr;
  Workspace ws;

  Rig(Backend& b, const std::vector<std::vector<Access>>& ops, uint64_t pool_bytes) : backend(&b) {
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
    backend->synchronize();
    backend->download(ws, t, host.data());
    return host;
  }
};

class CudaMhc : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu_ = make_cuda_backend();
    cpu_ = make_backend("cpu");
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

// ============================================================== pre and head

struct PreInputs {
  Floats x, fn, scale, bias;
};

// Streams in [-1, 1); fn in ±√(3/K) (unit-variance mix values); moderate biases.
PreInputs pre_inputs(uint64_t rows, uint64_t hc, uint64_t h, uint64_t mix_rows, uint64_t seed,
                     uint64_t scales = 3) {
  const uint64_t K = hc * h;
  PreInputs in;
  in.x = values(rows * K, seed, 1.0f);
  in.fn =
      values(mix_rows * K, seed + 1, static_cast<float>(std::sqrt(3.0 / static_cast<double>(K))));
  in.scale = Floats{0.8f, 1.1f, 1.5f};
  in.scale.resize(scales);
  in.bias = values(mix_rows, seed + 2, 0.5f);
  return in;
}

struct PreRun {
  Floats post, comb;
  Bits block_in;
  HcDiagnostics diag;
};

PreRun run_pre(Backend& backend, HcPreOp op, const PreInputs& in, Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
  Rig rig(backend, {op.accesses()}, pool);
  rig.put(op.streams, in.x);
  rig.put(op.fn, in.fn);
  rig.put(op.scale, in.scale);
  rig.put(op.bias, in.bias);
  backend.set_kernel_mutant(mutant);
  PreRun run;
  try {
    run.diag = backend.hc_pre(rig.ws, op);
  } catch (...) {
    backend.set_kernel_mutant(Mutant::none);
    throw;
  }
  backend.set_kernel_mutant(Mutant::none);
  run.post = rig.get<float>(op.post);
  run.comb = rig.get<float>(op.comb);
  run.block_in = rig.get<uint16_t>(op.block_in);
  return run;
}

struct HeadRun {
  Bits y;
  HcDiagnostics diag;
};

HeadRun run_head(Backend& backend, HcHeadOp op, const PreInputs& in) {
  const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
  Rig rig(backend, {op.accesses()}, pool);
  rig.put(op.streams, in.x);
  rig.put(op.fn, in.fn);
  rig.put(op.scale, in.scale);
  rig.put(op.bias, in.bias);
  HeadRun run;
  run.diag = backend.hc_head(rig.ws, op);
  run.y = rig.get<uint16_t>(op.output);
  return run;
}

// Column sums (FP64) within (hc + 1)·2^-24 of 1 and non-negative finite entries; returns the
// largest column-sum error seen.
double check_columns(const Floats& comb, uint64_t rows, uint64_t hc, bool expect_exact,
                     const std::string& what) {
  double worst = 0.0;
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t j = 0; j < hc; ++j) {
      double sum = 0.0;
      for (uint64_t i = 0; i < hc; ++i) {
        const float c = comb[(t * hc + i) * hc + j];
        EXPECT_TRUE(std::isfinite(c) && c >= 0.0f)
            << what << " t=" << t << " (" << i << "," << j << ") = " << c;
        sum += c;
      }
      worst = std::max(worst, std::fabs(sum - 1.0));
      if (expect_exact) {
        EXPECT_LE(std::fabs(sum - 1.0), static_cast<double>(hc + 1) * kU)
            << what << " t=" << t << " column " << j;
      }
    }
  return worst;
}

TEST_F(CudaMhc, SinkhornColumnsSumToOneAndTheSkcolMutantIsCaught) {
  for (uint64_t hc : {1, 4, 16})
    for (uint64_t iters : {1, 3, 20}) {
      const uint64_t rows = 7, h = 40;
      HcPreOp op = HcPreOp::make(mhc_config(hc, h, 0, iters), rows);
      // hc_eps = 1e-3: the eps column normalisations leave column sums s/(eps + s) ≈ 1 − 1e-3,
      // far outside the FP32 tolerance, so skipping the final exact one must show.
      op.hc_eps = 1e-3;
      const std::string what = op.params();
      const PreInputs in = pre_inputs(rows, hc, h, op.shape().mix, 10 * hc + iters);
      const PreRun good = run_pre(*gpu_, op, in);
      EXPECT_EQ(good.diag.nonfinite_tokens, 0u);
      check_columns(good.comb, rows, hc, true, what);
      const PreRun bad = run_pre(*gpu_, op, in, Mutant::M_SKCOL);
      const double worst = check_columns(bad.comb, rows, hc, false, what + " M-SKCOL");
      EXPECT_GT(worst, 1e-4) << what << ": M-SKCOL not caught by the column sums";
      // The mutant touches only the comb.
      EXPECT_TRUE(same_bits(good.post, bad.post, 0, good.post.size())) << what;
      EXPECT_TRUE(same_bits(good.block_in, bad.block_in, 0, good.block_in.size())) << what;
    }
}

TEST_F(CudaMhc, PreNonFiniteTokensAreNanCountedAndIsolated) {
  const uint64_t rows = 6, hc = 4, h = 96, K = hc * h;
  const HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  const PreInputs clean = pre_inputs(rows, hc, h, op.shape().mix, 21);
  PreInputs dirty = clean;
  dirty.x[1 * K + 5] = std::numeric_limits<float>::quiet_NaN();
  dirty.x[3 * K + 2 * h + 17] = std::numeric_limits<float>::infinity();
  dirty.x[4 * K + K - 1] = -std::numeric_limits<float>::infinity();
  const PreRun a = run_pre(*gpu_, op, clean), b = run_pre(*gpu_, op, dirty);
  EXPECT_EQ(a.diag.nonfinite_tokens, 0u);
  EXPECT_EQ(b.diag.nonfinite_tokens, 3u);
  for (uint64_t t = 0; t < rows; ++t) {
    const bool bad = t == 1 || t == 3 || t == 4;
    if (bad) {
      for (uint64_t i = 0; i < hc; ++i) EXPECT_TRUE(std::isnan(b.post[t * hc + i])) << t;
      for (uint64_t k = 0; k < hc * hc; ++k) EXPECT_TRUE(std::isnan(b.comb[t * hc * hc + k])) << t;
      for (uint64_t d = 0; d < h; ++d) EXPECT_TRUE(bf_nan(b.block_in[t * h + d])) << t;
    } else {
      EXPECT_TRUE(same_bits(a.post, b.post, t * hc, (t + 1) * hc)) << t;
      EXPECT_TRUE(same_bits(a.comb, b.comb, t * hc * hc, (t + 1) * hc * hc)) << t;
      EXPECT_TRUE(same_bits(a.block_in, b.block_in, t * h, (t + 1) * h)) << t;
    }
  }
  // The head counts and isolates the same way.
  const HcHeadOp head = HcHeadOp::make(mhc_config(hc, h), rows);
  const PreInputs hclean = pre_inputs(rows, hc, h, hc, 22, 1);
  PreInputs hdirty = hclean;
  hdirty.x[2 * K] = std::numeric_limits<float>::quiet_NaN();
  const HeadRun ha = run_head(*gpu_, head, hclean), hb = run_head(*gpu_, head, hdirty);
  EXPECT_EQ(ha.diag.nonfinite_tokens, 0u);
  EXPECT_EQ(hb.diag.nonfinite_tokens, 1u);
  for (uint64_t t = 0; t < rows; ++t) {
    if (t == 2) {
      for (uint64_t d = 0; d < h; ++d) EXPECT_TRUE(bf_nan(hb.y[t * h + d])) << d;
    } else {
      EXPECT_TRUE(same_bits(ha.y, hb.y, t * h, (t + 1) * h)) << t;
    }
  }
}

// Streams ×2^100 (x² overflows FP32 without the power-of-two scaling): with rms_eps = 0 every
// operation is exactly scale-equivariant, so post and comb keep their bits and the block input
// is exactly 2^100 times larger (the BF16 rounding commutes with a power of two).
TEST_F(CudaMhc, HugeStreamsAreExactlyScaleInvariant) {
  const uint64_t rows = 5, hc = 4, h = 64;
  HcPreOp op = HcPreOp::make(mhc_config(hc, h), rows);
  op.rms_eps = 0.0;
  const PreInputs small = pre_inputs(rows, hc, h, op.shape().mix, 31);
  PreInputs huge = small;
  for (float& v : huge.x) v = std::ldexp(v, 100);
  const PreRun a = run_pre(*gpu_, op, small), b = run_pre(*gpu_, op, huge);
  EXPECT_EQ(b.diag.nonfinite_tokens, 0u);
  EXPECT_TRUE(same_bits(a.post, b.post, 0, a.post.size()));
  EXPECT_TRUE(same_bits(a.comb, b.comb, 0, a.comb.size()));
  for (uint64_t k = 0; k < rows * h; ++k)
    ASSERT_EQ(fl(b.block_in[k]), std::ldexp(fl(a.block_in[k]), 100)) << k;

  HcHeadOp head = HcHeadOp::make(mhc_config(hc, h), rows);
  head.rms_eps = 0.0;
  const PreInputs hsmall = pre_inputs(rows, hc, h, hc, 32, 1);
  PreInputs hhuge = hsmall;
  for (float& v : hhuge.x) v = std::ldexp(v, 100);
  const HeadRun ha = run_head(*gpu_, head, hsmall), hb = run_head(*gpu_, head, hhuge);
  for (uint64_t k = 0; k < rows * h; ++k) ASSERT_EQ(fl(hb.y[k]), std::ldexp(fl(ha.y[k]), 100)) << k;

  // With the default rms_eps huge streams stay finite (eps/s² underflows harmlessly).
  const PreRun c = run_pre(*gpu_, HcPreOp::make(mhc_config(hc, h), rows), huge);
  for (float v : c.post) EXPECT_TRUE(std::isfinite(v));
  for (float v : c.comb) EXPECT_TRUE(std::isfinite(v));
}

// From 1024 rows the pre / head kernel runs 4 tokens per block (another thread mapping and
// reduction tree than the 1-token blocks below 1024). With inputs whose products and sums are
// exact in FP32 (x on a 1/8 grid in [-1, 1], fn on a 1/16 grid in [-1, 1]: every product is a
// multiple of 2^-7 and every partial sum of ≤ 160 of them below 2^8 — 15 bits) the summation
// order cannot matter, so both mappings must give the same bits token for token; a NaN in the
// last full block and the 1-token tail block stay isolated and counted.
TEST_F(CudaMhc, BatchedBlocksMatchSingleTokenBlocksBitForBit) {
  const uint64_t hc = 4, h = 40, K = hc * h, big = 1029, small = 1000;
  const auto grid = [](uint64_t n, uint64_t seed, int64_t steps) {  // k/steps, |k| ≤ steps
    Floats v(n);
    for (uint64_t i = 0; i < n; ++i) {
      const auto k = static_cast<int64_t>(mix64(i + seed) % static_cast<uint64_t>(2 * steps + 1));
      v[i] = static_cast<float>(k - steps) / static_cast<float>(steps);
    }
    return v;
  };
  const HcPreOp op_big = HcPreOp::make(mhc_config(hc, h), big);
  const HcPreOp op_small = HcPreOp::make(mhc_config(hc, h), small);
  PreInputs in{grid(big * K, 71, 8),
               grid(op_big.shape().mix * K, 72, 16),
               {0.8f, 1.1f, 1.5f},
               values(op_big.shape().mix, 73, 0.5f)};
  in.x[1027 * K + 9] = std::numeric_limits<float>::quiet_NaN();     // last full block, token 3
  in.x[1028 * K + K - 1] = std::numeric_limits<float>::infinity();  // the 1-token tail block
  PreInputs first = in;
  first.x.resize(small * K);
  const PreRun a = run_pre(*gpu_, op_big, in), b = run_pre(*gpu_, op_small, first);
  EXPECT_EQ(a.diag.nonfinite_tokens, 2u);
  EXPECT_EQ(b.diag.nonfinite_tokens, 0u);
  EXPECT_TRUE(same_bits(a.post, b.post, 0, small * hc));
  EXPECT_TRUE(same_bits(a.comb, b.comb, 0, small * hc * hc));
  EXPECT_TRUE(same_bits(a.block_in, b.block_in, 0, small * h));
  check_columns(Floats(a.comb.begin(), a.comb.begin() + 1027 * hc * hc), 1027, hc, true,
                op_big.params());
  for (uint64_t t = 1027; t < big; ++t) {
    for (uint64_t i = 0; i < hc; ++i) EXPECT_TRUE(std::isnan(a.post[t * hc + i])) << t;
    for (uint64_t d = 0; d < h; ++d) EXPECT_TRUE(bf_nan(a.block_in[t * h + d])) << t;
  }
  for (uint64_t t = small; t < 1027; ++t)
    EXPECT_FALSE(bf_nan(a.block_in[t * h])) << t;  // the other batched tokens were written

  const HcHeadOp head_big = HcHeadOp::make(mhc_config(hc, h), big);
  const HcHeadOp head_small = HcHeadOp::make(mhc_config(hc, h), small);
  PreInputs hin{in.x, grid(hc * K, 74, 16), {0.9f}, values(hc, 75, 0.5f)};
  PreInputs hfirst = hin;
  hfirst.x.resize(small * K);
  const HeadRun ha = run_head(*gpu_, head_big, hin), hb = run_head(*gpu_, head_small, hfirst);
  EXPECT_EQ(ha.diag.nonfinite_tokens, 2u);
  EXPECT_TRUE(same_bits(ha.y, hb.y, 0, small * h));
}

TEST_F(CudaMhc, PreRefusesZeroIterationsAndABadMix) {
  const HcPreOp zero = HcPreOp::make(mhc_config(4, 32, 0, 0), 3);
  EXPECT_THROW(run_pre(*gpu_, zero, pre_inputs(3, 4, 32, zero.shape().mix, 1)), Error);
  HcPreOp bad_mix = HcPreOp::make(mhc_config(4, 32), 3);
  bad_mix.dims.mix = 23;
  bad_mix.fn.shape = {23, 4 * 32};
  bad_mix.bias.shape = {23};
  EXPECT_THROW(run_pre(*gpu_, bad_mix, pre_inputs(3, 4, 32, 23, 1)), Error);
}

// ============================================================== expand and post

TEST_F(CudaMhc, ExpandCopiesTheBf16RowExactly) {
  const uint64_t rows = 9, hc = 3, h = 130;
  const HcExpandOp op = HcExpandOp::make(mhc_config(hc, h), rows);
  const Bits in = bf16_values(rows * h, 41, 4.0f);
  Rig g(*gpu_, {op.accesses()}, 0), c(*cpu_, {op.accesses()}, 0);
  g.put(op.input, in);
  c.put(op.input, in);
  gpu_->hc_expand(g.ws, op);
  cpu_->hc_expand(c.ws, op);
  const Floats gs = g.get<float>(op.streams), cs = c.get<float>(op.streams);
  EXPECT_TRUE(same_bits(gs, cs, 0, gs.size()));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t i = 0; i < hc; ++i)
      for (uint64_t d = 0; d < h; ++d) ASSERT_EQ(gs[(t * hc + i) * h + d], fl(in[t * h + d]));
}

struct PostInputs {
  Floats post, comb, x;
  Bits block_out;
};

PostInputs post_inputs(const HcPostOp& op, uint64_t seed) {
  const auto& d = op.shape();
  PostInputs in;
  in.post = values(d.rows * d.hc, seed, 2.0f);
  if (!d.lowrank) in.comb = values(d.rows * d.hc * d.hc, seed + 1, 1.0f);
  in.x = values(d.rows * d.hc * d.h, seed + 2, 3.0f);
  in.block_out = bf16_values(d.rows * d.h, seed + 3, 2.0f);
  return in;
}

// Runs `op` with its `out` where the op says (streams: in place) and returns `out`.
Floats run_post(Backend& backend, const HcPostOp& op, const PostInputs& in,
                Mutant mutant = Mutant::none) {
  Rig rig(backend, {op.accesses()}, 0);
  rig.put(op.post, in.post);
  if (!op.shape().lowrank) rig.put(op.comb, in.comb);
  rig.put(op.block_out, in.block_out);
  rig.put(op.streams, in.x);
  backend.set_kernel_mutant(mutant);
  backend.hc_post(rig.ws, op);
  backend.set_kernel_mutant(Mutant::none);
  return rig.get<float>(op.out);
}

// The exact value and Σ|terms| of one output (the FP32 error of any evaluation order, FMA or
// not, is ≤ γ_(hc+1)·Σ|terms|).
struct Exact {
  double value = 0.0, magnitude = 0.0;
};
Exact post_exact(const HcPostOp& op, const PostInputs& in, uint64_t t, uint64_t j, uint64_t d) {
  const auto& s = op.shape();
  const double bo = fl(in.block_out[t * s.h + d]);
  Exact e;
  const double p = double{in.post[t * s.hc + j]} * bo;
  e.value = p;
  e.magnitude = std::fabs(p);
  if (s.lowrank) {
    const double x = in.x[(t * s.hc + j) * s.h + d];
    e.value += x;
    e.magnitude += std::fabs(x);
    return e;
  }
  for (uint64_t i = 0; i < s.hc; ++i) {
    const double v = double{in.comb[(t * s.hc + i) * s.hc + j]} * in.x[(t * s.hc + i) * s.h + d];
    e.value += v;
    e.magnitude += std::fabs(v);
  }
  return e;
}

void check_post_form(Backend& gpu, Backend& cpu, uint64_t rows, uint64_t hc, uint64_t h, uint64_t r,
                     uint64_t seed) {
  const HcPostOp op = HcPostOp::make(mhc_config(hc, h, r), rows);
  HcPostOp apart = op;  // out of place: a separate f32 tensor of the same shape
  apart.out = arena_tensor(BufferId::hc_lowrank_scratch, 0, {rows, hc, h}, DType::f32);
  const PostInputs in = post_inputs(op, seed);
  const std::string what = op.params();

  const Floats in_place = run_post(gpu, op, in), out_of_place = run_post(gpu, apart, in);
  EXPECT_TRUE(same_bits(in_place, out_of_place, 0, in_place.size())) << what;
  const Floats b13 = run_post(gpu, op, in, Mutant::B13);
  const Floats b13_apart = run_post(gpu, apart, in, Mutant::B13);
  EXPECT_TRUE(same_bits(b13, b13_apart, 0, b13.size())) << what << " B13";
  bool changed = false;
  for (uint64_t k = 0; k < b13.size(); ++k) {
    ASSERT_EQ(b13[k], round_to_bf16(in_place[k])) << what << " B13 element " << k;
    changed = changed || b13[k] != in_place[k];
  }
  EXPECT_TRUE(changed) << what << ": B13 left every value unchanged (mutant not caught)";

  // CUDA and CPU each within γ_(hc+1)·Σ|terms| of the exact value (γ_2 in the low-rank form).
  const Floats on_cpu = run_post(cpu, op, in);
  const double g = gamma(static_cast<double>(r > 0 ? 2 : hc + 1));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t j = 0; j < hc; ++j)
      for (uint64_t d = 0; d < h; ++d) {
        const uint64_t k = (t * hc + j) * h + d;
        const Exact e = post_exact(op, in, t, j, d);
        ASSERT_LE(std::fabs(in_place[k] - e.value), g * e.magnitude) << what << " element " << k;
        ASSERT_LE(std::fabs(double{in_place[k]} - on_cpu[k]), 2 * g * e.magnitude)
            << what << " cuda-cpu element " << k;
      }
}

TEST_F(CudaMhc, PostInPlaceIsOutOfPlaceAndB13IsCaught) {
  check_post_form(*gpu_, *cpu_, 5, 4, 70, 0, 51);   // Sinkhorn form
  check_post_form(*gpu_, *cpu_, 5, 4, 70, 8, 52);   // low-rank form
  check_post_form(*gpu_, *cpu_, 3, 16, 33, 0, 53);  // hc = 16
  check_post_form(*gpu_, *cpu_, 2, 1, 9, 0, 54);    // hc = 1
}

// ============================================================== low-rank norm

struct LowRankWeights {
  Floats norm_w, w_down_inject, w_up;
};

LowRankWeights lowrank_weights(uint64_t hc, uint64_t h, uint64_t r, uint64_t seed) {
  const uint64_t K = hc * h;
  LowRankWeights w;
  w.norm_w = values(K, seed, 0.25f);
  w.w_down_inject =
      values((r + hc) * K, seed + 1, static_cast<float>(std::sqrt(3.0 / static_cast<double>(K))));
  w.w_up = values(K * r, seed + 2, static_cast<float>(std::sqrt(3.0 / static_cast<double>(r))));
  return w;
}

struct NormRun {
  Floats normed;     // split path
  Bits normed_bf16;  // slab path
  HcDiagnostics split, slab;
};

NormRun run_norms(Backend& backend, const ModelConfig& c, uint64_t rows, const Floats& x,
                  const Floats& norm_w, double eps) {
  NormRun run;
  {
    HcLowRankSplitOp op = HcLowRankSplitOp::make(HcLowRankSplitOp::Stage::norm, c, rows);
    op.rms_eps = eps;
    const uint64_t pool = oracle::place_in_pool({&op.norm_w});
    Rig rig(backend, {op.accesses()}, pool);
    rig.put(op.streams, x);
    rig.put(op.norm_w, norm_w);
    run.split = backend.hc_lowrank_split(rig.ws, op);
    run.normed = rig.get<float>(op.normed);
  }
  {
    HcLowRankSlabOp op = HcLowRankSlabOp::make(HcLowRankSlabOp::Stage::norm, c, rows, 0, rows);
    op.rms_eps = eps;
    const uint64_t pool = oracle::place_in_pool({&op.norm_w});
    Rig rig(backend, {op.accesses()}, pool);
    rig.put(op.streams, x);
    rig.put(op.norm_w, norm_w);
    run.slab = backend.hc_lowrank_slab(rig.ws, op);
    run.normed_bf16 = rig.get<uint16_t>(op.normed);
  }
  return run;
}

TEST_F(CudaMhc, LowRankNormNonFiniteAndHugeStreams) {
  const uint64_t rows = 5, hc = 4, h = 72, r = 8, K = hc * h;
  const ModelConfig c = mhc_config(hc, h, r);
  const LowRankWeights w = lowrank_weights(hc, h, r, 61);
  const Floats clean = values(rows * K, 62, 1.0f);
  Floats dirty = clean;
  dirty[2 * K + 3 * h] = std::numeric_limits<float>::infinity();
  dirty[4 * K + 7] = std::numeric_limits<float>::quiet_NaN();
  const NormRun a = run_norms(*gpu_, c, rows, clean, w.norm_w, 1e-6);
  const NormRun b = run_norms(*gpu_, c, rows, dirty, w.norm_w, 1e-6);
  EXPECT_EQ(a.split.nonfinite_tokens, 0u);
  EXPECT_EQ(a.slab.nonfinite_tokens, 0u);
  EXPECT_EQ(b.split.nonfinite_tokens, 2u);
  EXPECT_EQ(b.slab.nonfinite_tokens, 2u);
  for (uint64_t t = 0; t < rows; ++t) {
    if (t == 2 || t == 4) {
      for (uint64_t k = t * K; k < (t + 1) * K; ++k) {
        ASSERT_TRUE(std::isnan(b.normed[k])) << k;
        ASSERT_TRUE(bf_nan(b.normed_bf16[k])) << k;
      }
    } else {
      EXPECT_TRUE(same_bits(a.normed, b.normed, t * K, (t + 1) * K)) << t;
      EXPECT_TRUE(same_bits(a.normed_bf16, b.normed_bf16, t * K, (t + 1) * K)) << t;
    }
  }
  // Per-stream scaling: ×2^100 (one stream of token 1 only, every stream elsewhere) normalises
  // to the same bits with rms_eps = 0.
  Floats huge = clean;
  for (uint64_t k = 0; k < huge.size(); ++k)
    if (k / K != 1 || (k % K) / h == 2) huge[k] = std::ldexp(clean[k], 100);
  const NormRun s = run_norms(*gpu_, c, rows, clean, w.norm_w, 0.0);
  const NormRun l = run_norms(*gpu_, c, rows, huge, w.norm_w, 0.0);
  EXPECT_EQ(l.split.nonfinite_tokens, 0u);
  EXPECT_TRUE(same_bits(s.normed, l.normed, 0, s.normed.size()));
  EXPECT_TRUE(same_bits(s.normed_bf16, l.normed_bf16, 0, s.normed_bf16.size()));
}

// ============================================================== errors and memory

template <class Op, class Call>
void expect_refused(Backend& backend, const Op& op, Call call) {
  Rig rig(backend, {op.accesses()}, uint64_t{1} << 20);
  EXPECT_THROW(call(backend, rig.ws, op), Error) << op.params();
}

TEST_F(CudaMhc, EveryOpRefusesHcOutsideTheKernelRange) {
  for (uint64_t hc : {uint64_t{0}, kMaxHcMult + 1}) {
    const ModelConfig c = mhc_config(hc, 8, 4);
    Backend& b = *gpu_;
    expect_refused(
        b, HcExpandOp::make(c, 2),
        [](Backend& be, const Workspace& ws, const HcExpandOp& op) { be.hc_expand(ws, op); });
    expect_refused(b, HcPreOp::make(c, 2),
                   [](Backend& be, const Workspace& ws, const HcPreOp& op) { be.hc_pre(ws, op); });
    expect_refused(
        b, HcHeadOp::make(c, 2),
        [](Backend& be, const Workspace& ws, const HcHeadOp& op) { be.hc_head(ws, op); });
    expect_refused(
        b, HcPostOp::make(c, 2),
        [](Backend& be, const Workspace& ws, const HcPostOp& op) { be.hc_post(ws, op); });
    for (auto stage : {HcLowRankSplitOp::Stage::norm, HcLowRankSplitOp::Stage::down,
                       HcLowRankSplitOp::Stage::collapse})
      expect_refused(b, HcLowRankSplitOp::make(stage, c, 2),
                     [](Backend& be, const Workspace& ws, const HcLowRankSplitOp& op) {
                       be.hc_lowrank_split(ws, op);
                     });
    for (auto stage : {HcLowRankSlabOp::Stage::norm, HcLowRankSlabOp::Stage::down,
                       HcLowRankSlabOp::Stage::inject, HcLowRankSlabOp::Stage::up,
                       HcLowRankSlabOp::Stage::collapse})
      expect_refused(b, HcLowRankSlabOp::make(stage, c, 2, 0, 2),
                     [](Backend& be, const Workspace& ws, const HcLowRankSlabOp& op) {
                       be.hc_lowrank_slab(ws, op);
                     });
  }
}

// DESIGN.md: backends allocate nothing inside execute(). After a warm-up pass over every mHC
// op (module loading, cuBLAS's first-call setup of the slab GEMMs), a second pass leaves
// device free memory exactly where it was.
TEST_F(CudaMhc, ExecuteAllocatesNothing) {
  const uint64_t hc = 4, h = 64, r = 8, split_rows = 16, slab_rows = 80;
  const ModelConfig sc = mhc_config(hc, h);
  const ModelConfig lc = mhc_config(hc, h, r);
  HcExpandOp expand = HcExpandOp::make(sc, slab_rows);
  HcPreOp pre = HcPreOp::make(sc, slab_rows);
  HcPostOp post = HcPostOp::make(sc, slab_rows);
  HcPostOp post_lr = HcPostOp::make(lc, slab_rows);
  HcHeadOp head = HcHeadOp::make(sc, slab_rows);
  std::vector<HcLowRankSplitOp> split;
  for (auto s : {HcLowRankSplitOp::Stage::norm, HcLowRankSplitOp::Stage::down,
                 HcLowRankSplitOp::Stage::collapse})
    split.push_back(HcLowRankSplitOp::make(s, lc, split_rows));
  std::vector<HcLowRankSlabOp> slab;
  for (auto s :
       {HcLowRankSlabOp::Stage::norm, HcLowRankSlabOp::Stage::down, HcLowRankSlabOp::Stage::inject,
        HcLowRankSlabOp::Stage::up, HcLowRankSlabOp::Stage::collapse})
    slab.push_back(HcLowRankSlabOp::make(s, lc, slab_rows, 0, slab_rows));
  // Every pool operand its own range (weights hold poison: the ops only need to run).
  uint64_t pool =
      oracle::place_in_pool({&pre.fn, &pre.scale, &pre.bias, &head.fn, &head.scale, &head.bias,
                             &split[0].norm_w, &split[1].w_down_inject, &split[2].w_up});
  pool = oracle::place_in_pool({&slab[0].norm_w, &slab[1].w_down, &slab[2].w_inject, &slab[3].w_up},
                               pool);
  std::vector<std::vector<Access>> all = {expand.accesses(), pre.accesses(), post.accesses(),
                                          post_lr.accesses(), head.accesses()};
  for (const auto& op : split) all.push_back(op.accesses());
  for (const auto& op : slab) all.push_back(op.accesses());
  Rig rig(*gpu_, all, pool);
  const auto run_all = [&] {
    gpu_->execute(rig.ws, expand);
    gpu_->execute(rig.ws, pre);
    gpu_->execute(rig.ws, post);
    gpu_->execute(rig.ws, post_lr);
    gpu_->execute(rig.ws, head);
    for (const auto& op : split) gpu_->execute(rig.ws, op);
    for (const auto& op : slab) gpu_->execute(rig.ws, op);
    gpu_->synchronize();
  };
  run_all();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  run_all();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before, free_after);
}

// ============================================================== against the oracle and the CPU

using oracle::Mode;

std::vector<double> sum(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> s(a.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

// The CUDA backend judged against the faithful oracle with the device roundoffs, and against
// the CPU: each lies within its own bound of the faithful value on the same inputs, so they
// differ by at most the sum of the two bounds, per element.
class CudaMhcOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu_ = make_cuda_backend();
    cpu_ = make_backend("cpu");
  }

  static void expect(const oracle::TensorComparison& c) {
    EXPECT_TRUE(c.passed()) << c.name << ": " << c.failures << " failures, max |Δ| " << c.max_abs
                            << ", first bad " << (c.first_bad ? c.first_bad->reason : "");
  }

  // Runs pre on both backends; returns the CUDA report (the caller expects it to pass or fail).
  oracle::AgreementReport check_pre(HcPreOp op, uint64_t seed,
                                    const oracle::HcInputProfile& profile = {}) {
    const uint64_t pool = oracle::place_hc_weights(op);
    const oracle::HcPreInputs in = oracle::generate_hc_pre_inputs(op, seed, profile);
    const Workspace gws = oracle::allocate_hc_footprint(*gpu_, op, pool);
    const Workspace cws = oracle::allocate_hc_footprint(*cpu_, op, pool);
    const oracle::HcPreOutputs g = oracle::run_hc_pre(*gpu_, gws, op, in);
    const oracle::HcPreOutputs c = oracle::run_hc_pre(*cpu_, cws, op, in);
    EXPECT_EQ(g.diagnostics.nonfinite_tokens, c.diagnostics.nonfinite_tokens) << op.params();
    const oracle::HcPreReference ref = oracle::hc_pre(op, in, Mode::faithful);
    const oracle::HcPreBounds bg = oracle::hc_pre_bounds(op, in, ref, oracle::device_bounds());
    const oracle::HcPreBounds bc = oracle::hc_pre_bounds(op, in, ref, oracle::cpu_bounds());
    const auto& d = op.shape();
    const std::vector<double> post_bound = sum(bg.post, bc.post);
    const std::vector<double> y_bound = sum(bg.block_in, bc.block_in);
    expect(oracle::compare_f32_bounded(op.params() + " hc_post cuda-cpu", g.post,
                                       oracle::widen(c.post), d.hc,
                                       {post_bound, {}, "b_cpu + b_cuda"}));
    expect(oracle::compare_bf16_bounded(op.params() + " block input cuda-cpu", g.block_in,
                                        oracle::widen_bf16(c.block_in), d.h,
                                        {y_bound, {}, "b_cpu + b_cuda"}));
    return oracle::judge_hc_pre(op, in, g, "cuda", seed, oracle::device_bounds());
  }

  void check_post(HcPostOp op, uint64_t seed) {
    const oracle::HcPostInputs in = oracle::generate_hc_post_inputs(op, seed);
    HcPostOp apart = op;
    const uint64_t pool = oracle::place_hc_post_out_of_place(apart);
    const Workspace gws = oracle::allocate_hc_footprint(*gpu_, apart, pool);
    const Workspace cws = oracle::allocate_hc_footprint(*cpu_, op, 0);
    const std::vector<float> g = oracle::run_hc_post(*gpu_, gws, op, in);
    const std::vector<float> g_apart = oracle::run_hc_post(*gpu_, gws, apart, in);
    const std::vector<float> c = oracle::run_hc_post(*cpu_, cws, op, in);
    EXPECT_TRUE(same_bits(g, g_apart, 0, g.size())) << op.params() << ": in place != out of place";
    const auto report = oracle::judge_hc_post(op, in, g, "cuda", seed, oracle::device_bounds());
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
    const std::vector<double> bound = sum(oracle::hc_post_bounds(op, in, oracle::device_bounds()),
                                          oracle::hc_post_bounds(op, in, oracle::cpu_bounds()));
    expect(oracle::compare_f32_bounded(op.params() + " hc_streams cuda-cpu", g, oracle::widen(c),
                                       op.shape().h, {bound, {}, "b_cpu + b_cuda"}));
    // B13 is caught by the judge.
    gpu_->set_kernel_mutant(Mutant::B13);
    const std::vector<float> b13 = oracle::run_hc_post(*gpu_, gws, op, in);
    gpu_->set_kernel_mutant(Mutant::none);
    const auto caught = oracle::judge_hc_post(op, in, b13, "cuda", seed, oracle::device_bounds());
    EXPECT_FALSE(caught.passed()) << op.params() << ": B13 not caught\n"
                                  << oracle::format_report(caught);
  }

  void check_head(HcHeadOp op, uint64_t seed, const oracle::HcInputProfile& profile = {}) {
    const uint64_t pool = oracle::place_hc_weights(op);
    const oracle::HcHeadInputs in = oracle::generate_hc_head_inputs(op, seed, profile);
    const Workspace gws = oracle::allocate_hc_footprint(*gpu_, op, pool);
    const Workspace cws = oracle::allocate_hc_footprint(*cpu_, op, pool);
    const oracle::HcHeadOutputs g = oracle::run_hc_head(*gpu_, gws, op, in);
    const oracle::HcHeadOutputs c = oracle::run_hc_head(*cpu_, cws, op, in);
    EXPECT_EQ(g.diagnostics.nonfinite_tokens, c.diagnostics.nonfinite_tokens) << op.params();
    const auto report = oracle::judge_hc_head(op, in, g, "cuda", seed, oracle::device_bounds());
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
    const oracle::HcHeadReference ref = oracle::hc_head(op, in, Mode::faithful);
    const std::vector<double> bound =
        sum(oracle::hc_head_bounds(op, in, ref, oracle::device_bounds()),
            oracle::hc_head_bounds(op, in, ref, oracle::cpu_bounds()));
    expect(oracle::compare_bf16_bounded(op.params() + " hidden_states cuda-cpu", g.output,
                                        oracle::widen_bf16(c.output), op.shape().h,
                                        {bound, {}, "b_cpu + b_cuda"}));
  }

  // One low-rank pass on `path` over the same inputs on both backends; the CUDA run judged
  // stage by stage. Returns {cuda, cpu} runs.
  std::pair<oracle::HcLowRankRun, oracle::HcLowRankRun> run_lowrank(
      const ModelConfig& c, uint64_t rows, oracle::HcLowRankPath path,
      const oracle::HcLowRankInputs& in, uint64_t seed) {
    const oracle::HcLowRankPlan plan = oracle::plan_hc_lowrank(c, rows, path);
    const Workspace gws = oracle::allocate_hc_footprint(*gpu_, plan);
    const Workspace cws = oracle::allocate_hc_footprint(*cpu_, plan);
    oracle::HcLowRankRun g = oracle::run_hc_lowrank(*gpu_, gws, plan, in);
    oracle::HcLowRankRun k = oracle::run_hc_lowrank(*cpu_, cws, plan, in);
    EXPECT_EQ(g.diagnostics.nonfinite_tokens, k.diagnostics.nonfinite_tokens);
    const auto report = oracle::judge_hc_lowrank(g, in, "cuda", seed, oracle::device_bounds());
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
    return {std::move(g), std::move(k)};
  }

  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaMhcOracle, PreSmallShapesAndHcLimits) {
  for (auto [rows, hc, h, iters, seed] :
       {std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>{5, 4, 256, 20, 1},
        {3, 16, 40, 20, 2},
        {4, 1, 33, 1, 3},
        {6, 2, 7, 3, 4}}) {
    const auto report = check_pre(HcPreOp::make(mhc_config(hc, h, 0, iters), rows), seed);
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
  }
}

TEST_F(CudaMhcOracle, PreLogitRangesHugeAndNonFiniteStreams) {
  for (double range : {0.01, 4.0, 20.0, 60.0}) {
    oracle::HcInputProfile p;
    p.logit_range = range;
    const auto report = check_pre(HcPreOp::make(mhc_config(4, 512), 64), 10, p);
    EXPECT_TRUE(report.passed()) << oracle::format_report(report);
  }
  oracle::HcInputProfile huge;
  huge.magnitude = oracle::HcStreamMagnitude::huge;
  const auto h = check_pre(HcPreOp::make(mhc_config(4, 128), 4), 11, huge);
  EXPECT_TRUE(h.passed()) << oracle::format_report(h);
  oracle::HcInputProfile bad;
  bad.nonfinite = {{1, 0, 3, NAN}, {4, 3, 95, INFINITY}, {5, 2, 0, -INFINITY}};
  const auto b = check_pre(HcPreOp::make(mhc_config(4, 96), 6), 12, bad);
  EXPECT_TRUE(b.passed()) << oracle::format_report(b);
}

// 1030 rows: the 4-token blocks, a partial last block of 2.
TEST_F(CudaMhcOracle, PreAndHeadBatchedBlocks) {
  const auto report = check_pre(HcPreOp::make(mhc_config(4, 64), 1030), 13);
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);
  check_head(HcHeadOp::make(mhc_config(4, 64), 1030), 14);
}

TEST_F(CudaMhcOracle, SkcolMutantIsCaughtByTheColumnSums) {
  gpu_->set_kernel_mutant(Mutant::M_SKCOL);
  const auto report = check_pre(HcPreOp::make(mhc_config(4, 128), 8), 15);
  gpu_->set_kernel_mutant(Mutant::none);
  ASSERT_FALSE(report.passed()) << "M-SKCOL not caught\n" << oracle::format_report(report);
  EXPECT_NE(report.first_failure()->name.find("column sums"), std::string::npos)
      << oracle::format_report(report);
}

TEST_F(CudaMhcOracle, PostBothFormsInPlaceAndB13) {
  check_post(HcPostOp::make(mhc_config(4, 300), 7), 21);
  check_post(HcPostOp::make(mhc_config(4, 300, 16), 7), 22);
  check_post(HcPostOp::make(mhc_config(16, 40), 3), 23);
  check_post(HcPostOp::make(mhc_config(1, 9, 4), 2), 24);
}

TEST_F(CudaMhcOracle, HeadAndExpand) {
  check_head(HcHeadOp::make(mhc_config(4, 256), 5), 31);
  check_head(HcHeadOp::make(mhc_config(16, 24), 3), 32);
  oracle::HcInputProfile p;
  p.magnitude = oracle::HcStreamMagnitude::huge;
  p.nonfinite = {{2, 1, 5, NAN}};
  check_head(HcHeadOp::make(mhc_config(4, 64), 4), 33, p);

  const HcExpandOp op = HcExpandOp::make(mhc_config(3, 130), 9);
  const std::vector<uint16_t> in = oracle::generate_hc_expand_input(op, 34);
  const Workspace ws = oracle::allocate_hc_footprint(*gpu_, op, 0);
  const std::vector<float> streams = oracle::run_hc_expand(*gpu_, ws, op, in);
  const auto report = oracle::judge_hc_expand(op, in, streams, "cuda", 34);
  EXPECT_TRUE(report.passed()) << oracle::format_report(report);
}

// T = 64: the largest split pass; the same 64 tokens also on the slab path, so each CUDA path
// is compared with the CPU's OTHER path under the derived split-vs-slab bound.
TEST_F(CudaMhcOracle, LowRankSplitPathT64) {
  const ModelConfig c = mhc_config(4, 128, 16);
  const uint64_t rows = 64;
  const oracle::HcLowRankDims dims{rows, 4, 128, 16, c.rms_norm_eps};
  const oracle::HcLowRankInputs in = oracle::generate_hc_lowrank_inputs(dims, 41);
  const auto [gs, cs] = run_lowrank(c, rows, oracle::HcLowRankPath::split, in, 41);
  const auto [gb, cb] = run_lowrank(c, rows, oracle::HcLowRankPath::slab, in, 41);
  // The slab side's GEMM roundoff decides the bound model.
  expect(oracle::compare_hc_lowrank_paths(dims, in, gs.collapse.block_in, cb.collapse.block_in,
                                          oracle::cpu_bounds()));
  expect(oracle::compare_hc_lowrank_paths(dims, in, cs.collapse.block_in, gb.collapse.block_in,
                                          oracle::device_bounds()));
  expect(oracle::compare_hc_lowrank_paths(dims, in, gs.collapse.block_in, gb.collapse.block_in,
                                          oracle::device_bounds()));
}

// T = 65: one past the split path, the GEMM path's smallest pass; and two slabs (2100 rows:
// 2048 + a partial 52 on the same carve).
TEST_F(CudaMhcOracle, LowRankSlabPathT65AndTwoSlabs) {
  const ModelConfig c = mhc_config(4, 96, 16);
  for (uint64_t rows : {65, 2100}) {
    const oracle::HcLowRankDims dims{rows, 4, 96, 16, c.rms_norm_eps};
    const oracle::HcLowRankInputs in = oracle::generate_hc_lowrank_inputs(dims, 50 + rows);
    run_lowrank(c, rows, oracle::HcLowRankPath::slab, in, 50 + rows);
  }
}

TEST_F(CudaMhcOracle, LowRankNonFiniteHugeAndHcLimits) {
  oracle::HcInputProfile bad;
  bad.nonfinite = {{2, 3, 0, INFINITY}, {5, 0, 17, NAN}};
  oracle::HcInputProfile huge;
  huge.magnitude = oracle::HcStreamMagnitude::huge;
  for (const auto& profile : {bad, huge})
    for (auto path : {oracle::HcLowRankPath::split, oracle::HcLowRankPath::slab}) {
      const ModelConfig c = mhc_config(4, 40, 8);
      const oracle::HcLowRankDims dims{7, 4, 40, 8, c.rms_norm_eps};
      const oracle::HcLowRankInputs in = oracle::generate_hc_lowrank_inputs(dims, 61, profile);
      const auto [g, k] = run_lowrank(c, 7, path, in, 61);
      EXPECT_EQ(g.diagnostics.nonfinite_tokens, profile.nonfinite.size()) << to_string(path);
    }
  for (uint64_t hc : {1, 16})
    for (auto path : {oracle::HcLowRankPath::split, oracle::HcLowRankPath::slab}) {
      const ModelConfig c = mhc_config(hc, 24, 4);
      const oracle::HcLowRankDims dims{9, hc, 24, 4, c.rms_norm_eps};
      run_lowrank(c, 9, path, oracle::generate_hc_lowrank_inputs(dims, 62 + hc), 62 + hc);
    }
}

}  // namespace
}  // namespace bufferlab
