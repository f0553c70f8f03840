// CpuBackend's MoE routing and FFN kernels (spec/numerics.md §2, §8) on small cases checked
// against plain double loops or numbers worked by hand: the router on every precision path
// (and kernel mutant B14), top-k ties, NaN keys, M-TIE, hash clamping and the weights of every
// scoring function (against the FP64 oracle on the same stored logits), THE gather order, the
// grouped expert GEMMs, SwiGLU with a limit, the combine with zero experts (and in place), each
// GemmOp epilogue and the LM head's source rows. Shapes cross the GEMM tile edges (kTileM 64,
// kTileN 128, kTileK 128) and the grouping chunk (2^16 slots).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/pool_placement.h"
#include "bufferlab/oracle/routing.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Ids = std::vector<uint32_t>;
using Floats = std::vector<float>;

constexpr uint16_t kPoison = 0xFFFF;  // a BF16 element the arena poison left alone

uint16_t bf(float v) { return f32_to_bf16_bits(v); }
float fl(uint16_t b) { return bf16_bits_to_f32(b); }

// A backend and a workspace whose arena holds every arena tensor of the given accesses
// (the footprint, like oracle::footprint_layout) and a pool of `pool_bytes`, poisoned.
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

// Deterministic small integers (or halves) so that every FP32 sum below is exact.
Bits small_ints(uint64_t n, uint64_t seed, int span, float unit = 1.0f) {
  Bits v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    b = bf(unit * static_cast<float>(static_cast<int>((s >> 33) % (2 * span + 1)) - span));
  }
  return v;
}

ModelConfig moe_config(uint64_t hidden, uint64_t experts, uint64_t top_k, uint64_t zero = 0,
                       uint64_t intermediate = 8) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.vocab_size = 16;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.zero_expert_num = zero;
  c.moe_intermediate_size = intermediate;
  return c;
}

// ---- router ----

// The exact logits Σ_k x·w in double of x [rows, K] (BF16 bits or FP32) and w [E', K].
std::vector<double> plain_logits(const Bits& x_bf16, const Floats& x_f32, const Bits& w,
                                 uint64_t rows, uint64_t K, uint64_t E) {
  std::vector<double> out(rows * E);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t e = 0; e < E; ++e) {
      double acc = 0.0;
      for (uint64_t k = 0; k < K; ++k)
        acc +=
            (x_f32.empty() ? fl(x_bf16[t * K + k]) : x_f32[t * K + k]) * double{fl(w[e * K + k])};
      out[t * E + e] = acc;
    }
  return out;
}

struct RouterRun {
  Bits logits_bf16;
  Floats logits_f32;
};

RouterRun run_router(MoeRouterOp op, const Bits& x_bf16, const Floats& x_f32, const Bits& w,
                     Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.weight});
  Rig rig({op.accesses()}, pool);
  rig.backend->set_kernel_mutant(mutant);
  if (op.precision == RouterPrecision::fp32_routing)
    rig.put(op.input, x_f32);
  else
    rig.put(op.input, x_bf16);
  rig.put(op.weight, w);
  rig.backend->execute(rig.ws, op);
  RouterRun r;
  if (op.precision == RouterPrecision::bf16)
    r.logits_bf16 = rig.get<uint16_t>(op.logits);
  else
    r.logits_f32 = rig.get<float>(op.logits);
  return r;
}

// 70 rows × 300 × 130 experts crosses every tile edge; integer data keeps every FP32 sum
// exact (|Σ| ≤ 300·2·2), so each path must store exactly the rounding of the exact logit.
TEST(CpuMoeRouter, EveryPathStoresTheRoundedExactLogit) {
  const ModelConfig c = moe_config(300, 128, 2, /*zero=*/2);
  const uint64_t rows = 70, K = 300, E = 130;
  const Bits x = small_ints(rows * K, 1, 2), w = small_ints(E * K, 2, 2);
  Floats x32(x.size());
  for (size_t i = 0; i < x.size(); ++i) x32[i] = fl(x[i]) + 0.25f;  // not what the BF16 x holds
  const std::vector<double> want = plain_logits(x, {}, w, rows, K, E);
  const std::vector<double> want32 = plain_logits({}, x32, w, rows, K, E);

  const RouterRun b = run_router(MoeRouterOp::make(c, rows, RouterPrecision::bf16), x, {}, w);
  const RouterRun g = run_router(MoeRouterOp::make(c, rows, RouterPrecision::fp32_gate), x, {}, w);
  const RouterRun r =
      run_router(MoeRouterOp::make(c, rows, RouterPrecision::fp32_routing), {}, x32, w);
  for (uint64_t i = 0; i < rows * E; ++i) {
    ASSERT_EQ(b.logits_bf16[i], bf(static_cast<float>(want[i]))) << i;
    ASSERT_EQ(g.logits_f32[i], static_cast<float>(want[i])) << i;
    ASSERT_EQ(r.logits_f32[i], static_cast<float>(want32[i])) << i;
  }
}

// Rounded data: the FP32 result lies within γ_K·Σ|x·w| of the exact logit (any order).
TEST(CpuMoeRouter, Fp32LogitsWithinTheDotProductBound) {
  const ModelConfig c = moe_config(257, 5, 2);
  const uint64_t rows = 3, K = 257, E = 5;
  Floats x(rows * K);
  Bits w(E * K);
  for (uint64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 1.3f;
  for (uint64_t i = 0; i < w.size(); ++i) w[i] = bf(std::cos(0.11f * static_cast<float>(i)));
  const RouterRun r =
      run_router(MoeRouterOp::make(c, rows, RouterPrecision::fp32_routing), {}, x, w);
  const double gamma = K * 0x1p-24 / (1.0 - K * 0x1p-24);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t e = 0; e < E; ++e) {
      double exact = 0.0, abs_sum = 0.0;
      for (uint64_t k = 0; k < K; ++k) {
        const double p = double{x[t * K + k]} * fl(w[e * K + k]);
        exact += p;
        abs_sum += std::fabs(p);
      }
      EXPECT_LE(std::fabs(r.logits_f32[t * E + e] - exact), gamma * abs_sum) << t << "," << e;
    }
}

// x = [1, 1], Wg rows [1, 3·2^-9], [0.5, −0.25]: l0 = 1.005859375 is FP32-exact, and rounds to
// 1.0078125 in BF16 (0.75 ULP above 1). B14 stores that BF16 value on the FP32 paths.
TEST(CpuMoeRouter, MutantB14RoundsFp32LogitsThroughBf16) {
  const ModelConfig c = moe_config(2, 2, 1);
  const Bits w = {bf(1.0f), bf(3.0f / 512.0f), bf(0.5f), bf(-0.25f)};
  const Bits x = {bf(1.0f), bf(1.0f)};
  const Floats x32 = {1.0f, 1.0f};
  for (RouterPrecision p : {RouterPrecision::fp32_gate, RouterPrecision::fp32_routing}) {
    const MoeRouterOp op = MoeRouterOp::make(c, 1, p);
    EXPECT_EQ(run_router(op, x, x32, w).logits_f32, (Floats{1.005859375f, 0.25f}));
    EXPECT_EQ(run_router(op, x, x32, w, Mutant::B14).logits_f32, (Floats{1.0078125f, 0.25f}));
  }
  const MoeRouterOp op = MoeRouterOp::make(c, 1, RouterPrecision::bf16);
  EXPECT_EQ(run_router(op, x, {}, w).logits_bf16, (Bits{bf(1.0078125f), bf(0.25f)}));
}

// ---- top-k ----

struct TopKCase {
  Floats logits;                 // [rows, E'] FP32 (gate_logits_f32), or
  Bits logits_bf16;              // BF16 (gate_logits)
  Floats bias;                   // [E'] when use_bias
  std::vector<uint32_t> tokens;  // hash
  std::vector<int32_t> table;    // hash
};

struct TopKRun {
  Ids ids;
  Floats weights;
  TopKDiagnostics diag;
};

TopKRun run_topk(MoeTopKOp op, const TopKCase& in, Mutant mutant = Mutant::none) {
  const uint64_t pool = oracle::place_in_pool({&op.bias, &op.tid2eid});
  Rig rig({op.accesses()}, pool);
  rig.backend->set_kernel_mutant(mutant);
  if (op.logits.dtype == DType::f32)
    rig.put(op.logits, in.logits);
  else
    rig.put(op.logits, in.logits_bf16);
  if (op.use_bias) rig.put(op.bias, in.bias);
  if (op.hash) {
    rig.put(op.token_ids, in.tokens);
    rig.put(op.tid2eid, in.table);
  }
  TopKRun r;
  r.diag = rig.backend->moe_topk(rig.ws, op);
  r.ids = rig.get<uint32_t>(op.ids);
  r.weights = rig.get<float>(op.weights);
  return r;
}

MoeTopKOp topk_op(uint64_t rows, uint64_t experts, uint64_t top_k, const char* scoring,
                  bool hash = false, bool logits_f32 = true) {
  ModelConfig c = moe_config(8, experts, top_k);
  c.scoring_func = scoring;
  return MoeTopKOp::make(c, rows, logits_f32, hash);
}

// The FP64 oracle on the very logits the kernel read: ids equal, weights within FP32 rounding
// (a few ULPs of every step: 1e-6 relative).
void expect_matches_oracle(const MoeTopKOp& op, const TopKCase& in, const TopKRun& r) {
  oracle::TopKInputs oi;
  for (float v : in.logits) oi.logits.push_back(v);
  for (uint16_t b : in.logits_bf16) oi.logits.push_back(fl(b));
  oi.bias = in.bias;
  oi.token_ids = in.tokens;
  oi.tid2eid = in.table;
  const oracle::TopKReference ref = oracle::select_topk(op, oi);
  EXPECT_EQ(r.ids, ref.ids) << op.params();
  EXPECT_EQ(r.diag.nan_keys, ref.nan_keys) << op.params();
  ASSERT_EQ(r.weights.size(), ref.weights.size());
  for (size_t i = 0; i < r.weights.size(); ++i)
    EXPECT_NEAR(r.weights[i], ref.weights[i], 1e-6 * std::fabs(ref.weights[i]) + 1e-30)
        << op.params() << " weight " << i;
}

// Row [1, 3, 3, 0, 3, −1], top 2: the three 3s tie; the lower indices win, in index order.
// M-TIE sends exact ties to the HIGHER index: [4, 2].
TEST(CpuMoeTopK, ExactTiesGoToTheLowerIndexAndMutantFlipsThem) {
  const MoeTopKOp op = topk_op(1, 6, 2, "softmax");
  const TopKCase in{{1, 3, 3, 0, 3, -1}, {}, {}, {}, {}};
  EXPECT_EQ(run_topk(op, in).ids, (Ids{1, 2}));
  EXPECT_EQ(run_topk(op, in, Mutant::M_TIE).ids, (Ids{4, 2}));
  expect_matches_oracle(op, in, run_topk(op, in));
}

// NaN keys rank after every number (−Inf included), among themselves by index, and are
// counted over all rows: row 0 [NaN, −Inf, 0.5, NaN] → 2, 1, 0; row 1 [NaN ×4] → 0, 1, 2.
// M-TIE leaves the NaN rule alone.
TEST(CpuMoeTopK, NanKeysRankLastAndAreCounted) {
  const float nan = std::nanf(""), inf = INFINITY;
  const MoeTopKOp op = topk_op(2, 4, 3, "softmax");
  const TopKCase in{{nan, -inf, 0.5f, nan, nan, nan, nan, nan}, {}, {}, {}, {}};
  for (Mutant m : {Mutant::none, Mutant::M_TIE}) {
    const TopKRun r = run_topk(op, in, m);
    EXPECT_EQ(r.ids, (Ids{2, 1, 0, 0, 1, 2}));
    EXPECT_EQ(r.diag.nan_keys, 6u);
    for (float w : r.weights) EXPECT_TRUE(std::isnan(w));  // softmax of a NaN row
  }
  // sigmoid: a NaN bias makes a NaN key too; the weight stays s (finite).
  MoeTopKOp sig = topk_op(1, 4, 2, "sigmoid");
  sig.use_bias = true;
  const TopKCase b{{2.0f, 1.0f, 0.0f, -1.0f}, {}, {nan, 0.0f, 0.0f, 0.0f}, {}, {}};
  const TopKRun r = run_topk(sig, b);
  EXPECT_EQ(r.ids, (Ids{1, 2}));
  EXPECT_EQ(r.diag.nan_keys, 1u);
  expect_matches_oracle(sig, b, r);
}

// softmax (norm + scale 2.5), over BF16 and FP32 logits; E' = 300 > a tile, 37 rows.
TEST(CpuMoeTopK, SoftmaxWeightsMatchTheOracle) {
  for (bool f32 : {true, false}) {
    MoeTopKOp op = topk_op(37, 300, 8, "softmax", false, f32);
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    for (uint64_t i = 0; i < 37 * 300; ++i) {
      const float v = 4.0f * std::sin(0.731f * static_cast<float>(i) + 0.3f);
      if (f32)
        in.logits.push_back(v);
      else
        in.logits_bf16.push_back(bf(v));
    }
    expect_matches_oracle(op, in, run_topk(op, in));
    op.norm_topk_prob = false;
    expect_matches_oracle(op, in, run_topk(op, in));
  }
}

// sigmoid and sqrtsoftplus with bias, norm and scale; logits up to ±100 (softplus(100) in FP32
// overflows unless computed stably: √100 = 10).
TEST(CpuMoeTopK, SigmoidAndSqrtSoftplusWeightsMatchTheOracle) {
  for (const char* scoring : {"sigmoid", "sqrtsoftplus"}) {
    MoeTopKOp op = topk_op(9, 64, 6, scoring);
    op.use_bias = true;
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    for (uint64_t i = 0; i < 9 * 64; ++i)
      in.logits.push_back((i % 17 == 0 ? 25.0f : 3.0f) * std::sin(1.37f * static_cast<float>(i)));
    in.logits[5] = 100.0f;
    in.logits[70] = -100.0f;
    for (uint64_t e = 0; e < 64; ++e) in.bias.push_back(0.01f * static_cast<float>(e % 7));
    const TopKRun r = run_topk(op, in);
    expect_matches_oracle(op, in, r);
    if (std::string(scoring) == "sqrtsoftplus") {
      EXPECT_EQ(r.ids[0], 5u);  // key √100 + bias beats everything in row 0
      for (float w : r.weights) EXPECT_TRUE(std::isfinite(w));
    }
    op.norm_topk_prob = false;
    expect_matches_oracle(op, in, run_topk(op, in));
  }
}

// Hash: tid2eid read as unsigned, ids ≥ routed (8) clamped to 0 — 9, 200 and −1 become 0;
// the weights come from the scoring of the selected logits. A token id ≥ vocab is an Error.
TEST(CpuMoeTopK, HashClampsIdsAndRefusesTokensPastVocab) {
  for (const char* scoring : {"softmax", "sigmoid"}) {
    MoeTopKOp op = topk_op(2, 8, 3, scoring, /*hash=*/true);
    op.norm_topk_prob = true;
    TopKCase in;
    for (uint64_t i = 0; i < 16; ++i) in.logits.push_back(0.25f * static_cast<float>(i % 5));
    in.tokens = {3, 15};
    in.table.assign(16 * 3, 1);
    in.table[3 * 3 + 0] = 7;
    in.table[3 * 3 + 1] = 9;
    in.table[3 * 3 + 2] = 5;
    in.table[15 * 3 + 0] = 200;
    in.table[15 * 3 + 1] = -1;
    in.table[15 * 3 + 2] = 2;
    const TopKRun r = run_topk(op, in);
    EXPECT_EQ(r.ids, (Ids{7, 0, 5, 0, 0, 2}));
    expect_matches_oracle(op, in, r);
    in.tokens[1] = 16;
    EXPECT_THROW(run_topk(op, in), Error);
  }
}

// Hash + softmax + norm_topk_prob with the selected experts far below the row maximum
// (docs/findings.md, "softmax renormalisation of hash-selected experts"). Row 0 [0, −120],
// token 0 → expert 1, top_k 1: the literal softmax-then-renormalise gives e^-120 = 0 in FP32
// and 0/0 = NaN; the renormalised form e^(l − m_sel)/Σ_sel is e⁰/e⁰ = 1 exactly, × 2.5.
// Row 1 [0, −1e30]: the same in FP64 too. Row 2 [0, −120, −121], experts 1 and 2: 1/(1 + e^-1)
// and e^-1/(1 + e^-1) (the gap to the row max does not enter).
TEST(CpuMoeTopK, HashSoftmaxRenormalisesExpertsFarBelowTheMax) {
  for (bool f32 : {true, false}) {
    MoeTopKOp op = topk_op(1, 2, 1, "softmax", /*hash=*/true, f32);
    op.norm_topk_prob = true;
    op.routed_scaling_factor = 2.5;
    TopKCase in;
    in.tokens = {0};
    in.table.assign(16, 0);
    in.table[0] = 1;
    const Floats row = {0.0f, -120.0f};
    if (f32)
      in.logits = row;
    else
      for (float v : row) in.logits_bf16.push_back(bf(v));
    TopKRun r = run_topk(op, in);
    EXPECT_EQ(r.ids, (Ids{1}));
    EXPECT_EQ(r.weights[0], 2.5f) << "f32 logits " << f32;
    expect_matches_oracle(op, in, r);
    if (f32) {
      in.logits = {0.0f, -1e30f};
      r = run_topk(op, in);
      EXPECT_EQ(r.weights[0], 2.5f);
      expect_matches_oracle(op, in, r);
    }
  }
  MoeTopKOp op = topk_op(1, 3, 2, "softmax", /*hash=*/true);
  op.norm_topk_prob = true;
  TopKCase in{{0.0f, -120.0f, -121.0f}, {}, {}, {0}, std::vector<int32_t>(32, 0)};
  in.table[0] = 1;
  in.table[1] = 2;
  const TopKRun r = run_topk(op, in);
  EXPECT_EQ(r.ids, (Ids{1, 2}));
  EXPECT_NEAR(r.weights[0], 0.7310585786300049, 1e-7);
  EXPECT_NEAR(r.weights[1], 0.2689414213699951, 1e-7);
  expect_matches_oracle(op, in, r);
  // Without norm_topk_prob the weight stays the softmax over all E' logits: e^-120 underflows
  // to 0 in FP32 (a defined result); no NaN.
  op.norm_topk_prob = false;
  for (float w : run_topk(op, in).weights) EXPECT_EQ(w, 0.0f);
  // A NaN anywhere in the row still makes every softmax weight NaN.
  op.norm_topk_prob = true;
  in.logits[0] = std::nanf("");
  for (float w : run_topk(op, in).weights) EXPECT_TRUE(std::isnan(w));
}

// One row of E' logits: E' > 1024, top_k > 32 and top_k > E' are refused before any read.
TEST(CpuMoeTopK, RefusesShapesBeyondItsLimits) {
  auto run = [](uint64_t experts, uint64_t top_k) {
    const MoeTopKOp op = topk_op(1, experts, top_k, "softmax");
    TopKCase in;
    for (uint64_t e = 0; e < experts; ++e) in.logits.push_back(static_cast<float>(e % 13));
    return run_topk(op, in);
  };
  EXPECT_THROW(run(1025, 2), Error);
  EXPECT_THROW(run(64, 33), Error);
  EXPECT_THROW(run(4, 5), Error);
  const TopKRun r = run(1024, 32);  // the limits themselves run
  EXPECT_EQ(r.ids[0], 12u);
  EXPECT_EQ(r.ids[1], 25u);
}

// ---- gather, expert GEMMs ----

// ids [[2, 0], [0, 3], [2, 1]] with E = 3 routed experts (3 is a zero expert): counts 2, 1, 2,
// offsets 0, 2, 3 → gathered rows: s1 (t0) → 0, s2 (t1) → 1, s5 (t2) → 2, s0 (t0) → 3,
// s4 (t2) → 4; row 5 is left untouched.
TEST(CpuMoeGather, RowsSortedByExpertThenSlot) {
  const ModelConfig c = moe_config(3, 3, 2, /*zero=*/1);
  const MoeGatherOp op = MoeGatherOp::make(c, 3);
  Rig rig({op.accesses()}, 0);
  const Bits x = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6), bf(7), bf(8), bf(9)};
  rig.put(op.input, x);
  rig.put(op.ids, Ids{2, 0, 0, 3, 2, 1});
  rig.backend->execute(rig.ws, op);
  const Bits got = rig.get<uint16_t>(op.gathered);
  const Bits want = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6), bf(7),   bf(8),   bf(9),
                     bf(1), bf(2), bf(3), bf(7), bf(8), bf(9), kPoison, kPoison, kPoison};
  EXPECT_EQ(got, want);
}

// The gathered row of every slot, by a plain count (the definition in moe.h); −1: not gathered.
std::vector<int64_t> plain_gather_rows(const Ids& ids, uint64_t experts) {
  std::vector<int64_t> row(ids.size(), -1);
  int64_t next = 0;
  for (uint32_t e = 0; e < experts; ++e)
    for (size_t s = 0; s < ids.size(); ++s)
      if (ids[s] == e) row[s] = next++;
  return row;
}

struct ExpertCase {
  uint64_t rows, top_k, experts, zero, D, I;
};

// gather → gate GEMM → down GEMM (the down reads the gate output as its activation) against
// plain loops on integer data (exact FP32 sums; each stored value is the BF16 of the exact
// sum). Zero-expert slots are left untouched.
void check_expert_chain(const ExpertCase& k, uint64_t seed) {
  ModelConfig c = moe_config(k.D, k.experts, k.top_k, k.zero, k.I);
  const MoeGatherOp gather = MoeGatherOp::make(c, k.rows);
  MoeExpertGemmOp gate = MoeExpertGemmOp::make(c, k.rows, ExpertProj::gate);
  MoeExpertGemmOp down = MoeExpertGemmOp::make(c, k.rows, ExpertProj::down);
  const uint64_t pool = oracle::place_in_pool({&gate.weight, &down.weight});
  Rig rig({gather.accesses(), gate.accesses(), down.accesses()}, pool);

  const uint64_t slots = k.rows * k.top_k;
  Ids ids(slots);
  uint64_t s = seed;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<uint32_t>((s >> 33) % (k.experts + k.zero));
  }
  const Bits x = small_ints(k.rows * k.D, seed + 1, 2);
  const Bits wg = small_ints(k.experts * k.I * k.D, seed + 2, 2, 0.5f);
  const Bits wd = small_ints(k.experts * k.D * k.I, seed + 3, 1, 0.25f);
  rig.put(gather.input, x);
  rig.put(gather.ids, ids);
  rig.put(gate.weight, wg);
  rig.put(down.weight, wd);
  rig.backend->execute(rig.ws, gather);
  const Bits gathered = rig.get<uint16_t>(gather.gathered);
  rig.backend->execute(rig.ws, gate);
  rig.backend->execute(rig.ws, down);
  const Bits gate_out = rig.get<uint16_t>(gate.output);
  const Bits down_out = rig.get<uint16_t>(down.output);

  const std::vector<int64_t> grow = plain_gather_rows(ids, k.experts);
  for (uint64_t slot = 0; slot < slots; ++slot) {
    const uint64_t t = slot / k.top_k, e = ids[slot];
    if (e >= k.experts) {
      ASSERT_EQ(gate_out[slot * k.I], kPoison) << "zero-expert slot " << slot;
      // expert_down_out held the gathered rows before the down wrote it: left as it was.
      for (uint64_t d = 0; d < k.D; ++d)
        ASSERT_EQ(down_out[slot * k.D + d], gathered[slot * k.D + d]) << "zero-expert " << slot;
      continue;
    }
    for (uint64_t d = 0; d < k.D; ++d)
      ASSERT_EQ(gathered[grow[slot] * k.D + d], x[t * k.D + d]) << "slot " << slot;
    for (uint64_t n = 0; n < k.I; ++n) {
      double acc = 0.0;
      for (uint64_t d = 0; d < k.D; ++d)
        acc += double{fl(x[t * k.D + d])} * fl(wg[(e * k.I + n) * k.D + d]);
      ASSERT_EQ(gate_out[slot * k.I + n], bf(static_cast<float>(acc))) << slot << "," << n;
    }
    for (uint64_t n = 0; n < k.D; ++n) {
      double acc = 0.0;
      for (uint64_t i = 0; i < k.I; ++i)
        acc += double{fl(gate_out[slot * k.I + i])} * fl(wd[(e * k.D + n) * k.I + i]);
      // BF16 gate values times quarters: exact in FP32 while |Σ| < 2^16 (checked).
      ASSERT_LT(std::fabs(acc), 65536.0);
      ASSERT_EQ(down_out[slot * k.D + n], bf(static_cast<float>(acc))) << slot << "," << n;
    }
  }
}

// 150 tokens × top 2 over 3 experts (+1 zero): ~75 rows per expert → two M tiles; D = 130 and
// I = 136 cross the K and N tile edges.
TEST(CpuMoeExperts, GroupedGemmsMatchPlainLoopsAcrossTiles) {
  check_expert_chain({150, 2, 3, 1, 130, 136}, 11);
}

// 33,000 tokens × top 2 = 66,000 slots: more than one grouping chunk (2^16 slots); the gather
// order and the experts' rows continue across the chunk boundary.
TEST(CpuMoeExperts, GroupingAcrossChunks) { check_expert_chain({33000, 2, 5, 2, 6, 4}, 23); }

// ---- SwiGLU ----

// a = silu(g)·u, silu(g) = g/(1 + e^-g); with limit 7: g = min(g, 7), u = clamp(u, −7, 7).
// g = 10, u = −20 → silu(7)·(−7) = −48.9553 (unclamped it would be −199.9).
TEST(CpuMoeSwiglu, ClampsThenGates) {
  const Bits g = {bf(2), bf(10), bf(-3), bf(10), bf(std::nanf("")), bf(0)};
  const Bits u = {bf(3), bf(-20), bf(8), bf(1), bf(1), bf(5)};
  for (double limit : {0.0, 7.0}) {
    const SwigluOp op = SwigluOp::make(2, 3, limit, "g", "u", "a");
    Rig rig({op.accesses()}, 0);
    rig.put(op.gate, g);
    rig.put(op.up, u);
    rig.backend->execute(rig.ws, op);
    const Bits a = rig.get<uint16_t>(op.gate);
    for (size_t i = 0; i < g.size(); ++i) {
      double gv = fl(g[i]), uv = fl(u[i]);
      if (limit > 0) {
        gv = std::min(gv, limit);
        uv = std::clamp(uv, -limit, limit);
      }
      const double want = gv / (1.0 + std::exp(-gv)) * uv;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(fl(a[i]))) << i;
        continue;
      }
      // FP32 math then one BF16 store: within one BF16 ULP (2^-7 relative) of the exact value.
      EXPECT_NEAR(fl(a[i]), want, std::fabs(want) * 0x1p-7) << "limit " << limit << " i " << i;
    }
    if (limit > 0) {
      EXPECT_NEAR(fl(a[1]), -48.9553, 0.2);
    }
  }
}

// ---- combine ----

// E = 2 routed + 2 zero experts, top 3. Row 0 ids [0, 2, 1] weights [0.5, 0.25, 2]:
// 0.5·down0 + 0.25·x0 + 2·down2. Row 1 ids [3, 1, 0] weights [1, −1, 0.75]:
// x1 − down4 + 0.75·down5. Width 3, integer data: exact.
TEST(CpuMoeCombine, AddsZeroExpertIdentityTerms) {
  const ModelConfig c = moe_config(3, 2, 3, /*zero=*/2);
  const MoeCombineOp op = MoeCombineOp::make(c, 2, /*hash=*/false);
  ASSERT_TRUE(op.reads_input);
  Rig rig({op.accesses()}, 0);
  Bits down(6 * 3, kPoison);  // zero-expert slots (1 and 3) are never written upstream
  for (uint64_t s : {0, 2, 4, 5})
    for (uint64_t d = 0; d < 3; ++d) down[s * 3 + d] = bf(static_cast<float>(s * 10 + d));
  const Bits x = {bf(1), bf(2), bf(3), bf(4), bf(5), bf(6)};
  rig.put(op.ids, Ids{0, 2, 1, 3, 1, 0});
  rig.put(op.weights, Floats{0.5f, 0.25f, 2.0f, 1.0f, -1.0f, 0.75f});
  rig.put(op.down, down);
  rig.put(op.input, x);
  rig.backend->execute(rig.ws, op);
  // row 0: 0.5·[0,1,2] + 0.25·[1,2,3] + 2·[20,21,22] = [40.25, 43, 45.75]
  // row 1: [4,5,6] − [40,41,42] + 0.75·[50,51,52] = [1.5, 2.25, 3]
  EXPECT_EQ(rig.get<uint16_t>(op.output),
            (Bits{bf(40.25f), bf(43), bf(45.75f), bf(1.5f), bf(2.25f), bf(3)}));

  rig.put(op.ids, Ids{0, 2, 4, 3, 1, 0});  // 4 ≥ E' = 4: corrupt
  EXPECT_THROW(rig.backend->execute(rig.ws, op), Error);
}

// Latent MoE combines in place of its input (ssm_ba): each row's input is read before it is
// overwritten. Hash layers never read the input: a zero-expert id there is an Error.
TEST(CpuMoeCombine, InPlaceForLatentMoeAndHashRefusesZeroExperts) {
  ModelConfig c = moe_config(8, 2, 2, /*zero=*/1);
  c.moe_latent_size = 2;
  const MoeCombineOp op = MoeCombineOp::make(c, 2, false);
  ASSERT_EQ(op.output.buffer, op.input.buffer);
  Rig rig({op.accesses()}, 0);
  Bits down(4 * 2, kPoison);
  down[0] = bf(10), down[1] = bf(20), down[6] = bf(30), down[7] = bf(40);
  rig.put(op.ids, Ids{0, 2, 2, 1});
  rig.put(op.weights, Floats{1.0f, 3.0f, 0.5f, 2.0f});
  rig.put(op.down, down);
  rig.put(op.input, Bits{bf(1), bf(2), bf(3), bf(4)});
  rig.backend->execute(rig.ws, op);
  // row 0: [10, 20] + 3·[1, 2] = [13, 26]; row 1: 0.5·[3, 4] + 2·[30, 40] = [61.5, 82]
  EXPECT_EQ(rig.get<uint16_t>(op.output), (Bits{bf(13), bf(26), bf(61.5f), bf(82)}));

  const MoeCombineOp hashed = MoeCombineOp::make(c, 2, /*hash=*/true);
  ASSERT_FALSE(hashed.reads_input);
  rig.put(hashed.ids, Ids{0, 2, 0, 1});
  EXPECT_THROW(rig.backend->execute(rig.ws, hashed), Error);
}

// ---- GemmOp epilogues ----

// 70 × 140 · (130 × 140)ᵀ crosses every tile edge; integer data keeps the FP32 product exact.
TEST(CpuGemm, EveryBf16EpilogueMatchesPlainLoops) {
  const uint64_t rows = 70, K = 140, N = 130;
  const TensorRef x = arena_tensor(BufferId::norm_output, 0, {rows, K}, DType::bf16);
  const TensorRef out = arena_tensor(BufferId::moe_output, 0, {rows, N}, DType::bf16);
  const Bits xv = small_ints(rows * K, 31, 2), wv = small_ints(N * K, 32, 2, 0.5f);
  const Bits old = small_ints(rows * N, 33, 3, 0.25f);
  std::vector<double> prod(rows * N);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (uint64_t k = 0; k < K; ++k) acc += double{fl(xv[r * K + k])} * fl(wv[n * K + k]);
      prod[r * N + n] = acc;
    }
  for (const char* kind : {"bf16", "bf16+swiglu-epilogue", "bf16+accumulate"}) {
    std::vector<Access> inputs = {{x, AccessKind::read, "x"}};
    if (std::string(kind) != "bf16") inputs.push_back({out, AccessKind::read, "y"});
    GemmOp op = GemmOp::make("dense", kind, inputs, rows, rows, K, N, BufferId::moe_output, 0,
                             DType::bf16, "y");
    const uint64_t pool = oracle::place_in_pool({&op.weight});
    Rig rig({op.accesses()}, pool);
    rig.put(x, xv);
    rig.put(op.weight, wv);
    rig.put(out, old);
    rig.backend->execute(rig.ws, op);
    const Bits got = rig.get<uint16_t>(out);
    for (uint64_t i = 0; i < rows * N; ++i) {
      const double o = fl(old[i]), p = prod[i];
      switch (op.epilogue()) {
        case GemmEpilogue::store:
          ASSERT_EQ(got[i], bf(static_cast<float>(p))) << kind << " " << i;
          break;
        case GemmEpilogue::accumulate:
          ASSERT_EQ(got[i], bf(static_cast<float>(o + p))) << kind << " " << i;
          break;
        case GemmEpilogue::swiglu: {
          const double want = p / (1.0 + std::exp(-p)) * o;
          ASSERT_NEAR(fl(got[i]), want, std::fabs(want) * 0x1p-7 + 1e-30) << kind << " " << i;
          break;
        }
      }
    }
  }
  GemmOp fp8 = GemmOp::make("dense", "fp8", {{x, AccessKind::read, "x"}}, rows, rows, K, N,
                            BufferId::moe_output, 0, DType::bf16, "y");
  Rig rig({fp8.accesses()}, oracle::place_in_pool({&fp8.weight}));
  EXPECT_THROW(rig.backend->gemm(rig.ws, fp8), Error);
}

// ---- LM head ----

// 5 input rows, 3 logits rows: row 0 reads row 0 (direct), rows 1, 2 read 2 and 4 (tail base 2,
// stride 2). vocab 130 crosses an N tile.
TEST(CpuLmHead, ReadsTheSourceRows) {
  const uint64_t rows = 5, logits_rows = 3, hidden = 20, vocab = 130;
  LmHeadOp op = LmHeadOp::make(rows, logits_rows, hidden, vocab, "test", LmHeadRows{1, 2, 2});
  Rig rig({op.accesses()}, oracle::place_in_pool({&op.table}));
  const Bits x = small_ints(rows * hidden, 41, 3), table = small_ints(vocab * hidden, 42, 2);
  rig.put(op.input, x);
  rig.put(op.table, table);
  rig.backend->execute(rig.ws, op);
  const Bits got = rig.get<uint16_t>(op.output);
  const uint64_t source[] = {0, 2, 4};
  for (uint64_t r = 0; r < logits_rows; ++r)
    for (uint64_t v = 0; v < vocab; ++v) {
      double acc = 0.0;
      for (uint64_t k = 0; k < hidden; ++k)
        acc += double{fl(x[source[r] * hidden + k])} * fl(table[v * hidden + k]);
      ASSERT_EQ(got[r * vocab + v], bf(static_cast<float>(acc))) << r << "," << v;
    }
  // A descriptor edited to read past its rows is refused, not read.
  op.source_rows.tail_stride = 3;
  EXPECT_THROW(rig.backend->execute(rig.ws, op), Error);
}

}  // namespace
}  // namespace bufferlab
