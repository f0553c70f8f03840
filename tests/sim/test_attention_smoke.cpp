// The CUDA attention kernels on the kernel simulator (cuda-sim), each op on a tiny workspace
// against a naive FP64 loop written here, within a bound derived next to each check; every
// launch also passes the simulator's checkers (footprint, bounds, initialisation, races,
// barriers, the re-run's determinism): a finding throws KernelCheckFailure and fails the test.
// A smoke test of this backend's kernels until the shared attention kernel bodies
// (tests/kernels/) and the oracle land; it also gives the cuda-sim label's coverage check a
// launch of every attention kernel.
//
// Covered: MRoPE with t ≠ h ≠ w (sectioned and interleaved), interleaved pairs, partial
// rotary, qk_norm, an attention factor ≠ 1, phantom rows, the cache write from the scratch
// and from qkv_output (K bit-equal to the staged K), slots outside the cache skipped, GQA
// groups 2 and 4, sliding windows across a tile boundary, sinks, prefix keys through a
// shuffled block table, several 64-key tiles, split-K + merge, padding rows, the gate. Keys
// no row may see hold NaN: any read of one would show in the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend_under_test.h"
#include "bf16_shorthands.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/oracle/pool_placement.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::bf;
using testing::fl;
using testing::Rig;
using Bits = std::vector<uint16_t>;

constexpr double kU = 0x1p-24;  // FP32 unit roundoff
constexpr double kBf = 0x1p-8;  // BF16 round-to-nearest: |bf16(x) − x| ≤ 2^-8·|x|
constexpr uint16_t kNanBits = 0x7FC0;

// Config A: nq 4, nkv 2 (GQA group 2), hd 80 (> one 64-thread pass), partial rotary 0.5 (rd
// 40), qk_norm, gated, MRoPE sections 5/10/5 (sectioned or interleaved).
ModelConfig config_a(bool mrope_interleaved) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 64;
  c.vocab_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 80;
  c.partial_rotary_factor = 0.5;
  c.qk_norm = true;
  c.attn_gated = true;
  c.mrope_section = {5, 10, 5};
  c.mrope_interleaved = mrope_interleaved;
  c.rms_norm_eps = 1e-6;
  return c;
}

// Config B: nq 4, nkv 1 (group 4), hd 16, full rotary with interleaved pairs, sinks, sliding
// window 5 on sliding layers.
ModelConfig config_b() {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 64;
  c.vocab_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.head_dim = 16;
  c.rope_interleaved = true;
  c.attn_sinks = true;
  c.sliding_window = 5;
  return c;
}

std::mt19937& rng() {
  static std::mt19937 g(17);
  return g;
}
float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }
Bits random_bits(uint64_t n, float lo = -1.0f, float hi = 1.0f) {
  Bits b(n);
  for (auto& v : b) v = bf(uniform(lo, hi));
  return b;
}

// The RoPE table operand: inv_freq_i = 10000^(-2i/rd) in FP32, then the attention factor.
std::vector<float> rope_table(const AttnGeometry& g, float af) {
  std::vector<float> t(g.rope_entries());
  for (uint64_t i = 0; i < g.rotary_dim / 2; ++i)
    t[i] = static_cast<float>(
        std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(g.rotary_dim)));
  t.back() = af;
  return t;
}

// The position stream of frequency i (docs/spec/attention.md §2), written independently.
uint64_t stream_of(const AttnGeometry& g, uint64_t i) {
  if (!g.mrope) return 0;
  const auto& s = g.mrope_section;
  if (g.mrope_interleaved)
    return (i % 3 == 1 && i < 3 * s[1]) ? 1 : (i % 3 == 2 && i < 3 * s[2]) ? 2 : 0;
  return i < s[0] ? 0 : i < s[0] + s[1] ? 1 : i < s[0] + s[1] + s[2] ? 2 : 0;
}

// S(x) of one head row in FP64 from the same inputs (stored BF16 x, w; FP32 table and
// positions), with E_d: a bound on the kernel's FP32 error before its one BF16 rounding.
//   qk_norm: ss is a sum of hd exact squares (γ_hd), then /hd, +eps, sqrt, 1/ (4 roundings),
//   x·inv, 1 + w, the product (3): n̂ = n(1 + ε_n), |ε_n| ≤ (hd + 8)u (first order; the
//   second-order terms are below u for hd ≤ 512 and are absorbed by the +16 below).
//   RoPE: θ̂ = fp32(pos)·inv_freq rounded once: |θ̂ − θ| ≤ |θ|u, so cos and sin move by ≤ |θ|u;
//   the device sin / cos are within 1 ulp (≤ u absolute on [−1, 1]); ·af, the two products
//   and the sum round 4 times. So |ŷ − y| ≤ af(|n_a| + |n_b|)(hd + |θ| + 16)u; a pass-through
//   dimension only carries ε_n.
struct StageRef {
  std::vector<double> y, err;
};
StageRef stage_ref(const uint16_t* x, const AttnGeometry& g, const std::vector<float>& rope,
                   const uint16_t* w, const uint32_t pos[3]) {
  const uint64_t hd = g.hd, half = g.rotary_dim / 2;
  std::vector<double> n(hd);
  double inv = 1.0, eps_n = 0.0;
  if (w != nullptr) {
    double ss = 0.0;
    for (uint64_t i = 0; i < hd; ++i) ss += static_cast<double>(fl(x[i])) * fl(x[i]);
    inv = 1.0 / std::sqrt(ss / static_cast<double>(hd) + static_cast<double>(g.eps));
    eps_n = (static_cast<double>(hd) + 8) * kU;
  }
  for (uint64_t i = 0; i < hd; ++i) n[i] = fl(x[i]) * inv * (w != nullptr ? 1.0 + fl(w[i]) : 1.0);
  StageRef r{std::vector<double>(n), std::vector<double>(hd)};
  for (uint64_t i = 0; i < hd; ++i) r.err[i] = std::fabs(n[i]) * eps_n + std::fabs(n[i]) * kU;
  const double af = rope[half];
  for (uint64_t i = 0; i < half; ++i) {
    const uint64_t d0 = g.rope_interleaved ? 2 * i : i,
                   d1 = g.rope_interleaved ? 2 * i + 1 : i + half;
    const double theta = static_cast<double>(static_cast<float>(pos[stream_of(g, i)])) *
                         static_cast<double>(rope[i]);
    const double c = std::cos(theta) * af, s = std::sin(theta) * af;
    r.y[d0] = n[d0] * c - n[d1] * s;
    r.y[d1] = n[d1] * c + n[d0] * s;
    const double e = af * (std::fabs(n[d0]) + std::fabs(n[d1])) *
                     (static_cast<double>(hd) + std::fabs(theta) + 16) * kU;
    r.err[d0] = r.err[d1] = e;
  }
  return r;
}

// |bf16 result − exact| ≤ 2^-8·(|exact| + E) + E, E the FP32 error bound before the rounding.
void expect_within(uint16_t got, double exact, double E, const std::string& where) {
  const double bound = kBf * (std::fabs(exact) + E) + E;
  EXPECT_LE(std::fabs(static_cast<double>(fl(got)) - exact), bound)
      << where << ": got " << fl(got) << ", exact " << exact << ", bound " << bound;
}

// Pool operands shared by the ops of a test, placed once.
struct Pool {
  TensorRef rope, q_norm, k_norm, sinks, k_cache, v_cache, positions, slots, lens, table;
  uint64_t bytes = 0;
};

// ---- staging ---------------------------------------------------------------------------

// Runs the Q copy, the K scratch (FP8 path: phantom rows) and the V scratch of t tokens and
// checks them against stage_ref / the copy; returns nothing, asserts.
void check_stage(const ModelConfig& config, float af) {
  const AttnGeometry g = AttnGeometry::of(config);
  const uint64_t t = 5, rows = 16, m = 16, stride = 7;  // stride ≥ t: a gap in positions
  using Part = AttnStageOp::Part;
  Pool p;
  p.rope = pool_tensor({g.rope_entries()}, DType::f32);
  p.q_norm = pool_tensor({g.hd}, DType::bf16);
  p.k_norm = pool_tensor({g.hd}, DType::bf16);
  p.positions = pool_tensor({g.pos_streams(), stride}, DType::u32);
  p.bytes = oracle::place_in_pool({&p.rope, &p.q_norm, &p.k_norm, &p.positions});
  const AttnMetaRefs meta{p.positions, stride, {}, {}, {}};
  AttnStageOp q = AttnStageOp::make(config, Part::q_copy, 0, t, false, 0, {}, meta);
  AttnStageOp k = AttnStageOp::make(config, Part::k_scratch, 0, t, true, 0, {}, meta);
  AttnStageOp v = AttnStageOp::make(config, Part::v_scratch, 0, t, true, m, {}, meta);
  q.weights.rope = k.weights.rope = p.rope;
  if (g.qk_norm) {
    q.weights.q_norm = p.q_norm;
    k.weights.k_norm = p.k_norm;
  }
  ASSERT_EQ(k.shape().rows, rows);
  Rig rig(testing::backend_under_test(), {q.accesses(), k.accesses(), v.accesses()}, p.bytes);
  const Bits qkv = random_bits(t * g.qkv_dim, -2.0f, 2.0f);
  const Bits qn = random_bits(g.hd, -0.5f, 0.5f), kn = random_bits(g.hd, -0.5f, 0.5f);
  std::vector<uint32_t> pos(g.pos_streams() * stride);
  for (uint64_t s = 0; s < g.pos_streams(); ++s)  // t ≠ h ≠ w, large enough to turn
    for (uint64_t i = 0; i < stride; ++i)
      pos[s * stride + i] = static_cast<uint32_t>(3 + 11 * i + 29 * s);
  const std::vector<float> table = rope_table(g, af);
  rig.put(q.src, qkv);
  rig.put(p.rope, table);
  rig.put(p.positions, pos);
  if (g.qk_norm) {
    rig.put(p.q_norm, qn);
    rig.put(p.k_norm, kn);
  }
  for (const AttnStageOp* op : {&q, &k, &v}) rig.backend->execute(rig.ws, *op);
  const Bits qo = rig.get<uint16_t>(q.dst);
  const Bits ko = rig.get<uint16_t>(k.dst), kpad = rig.get<uint16_t>(k.pad);
  const Bits vo = rig.get<uint16_t>(v.dst), vpad = rig.get<uint16_t>(v.pad);
  for (uint64_t i = 0; i < t; ++i) {
    const uint32_t ps[3] = {pos[i], pos[(g.pos_streams() > 1 ? stride : 0) + i],
                            pos[(g.pos_streams() > 2 ? 2 * stride : 0) + i]};
    for (uint64_t h = 0; h < g.nq; ++h) {
      const StageRef r =
          stage_ref(&qkv[i * g.qkv_dim + h * g.hd], g, table, g.qk_norm ? qn.data() : nullptr, ps);
      for (uint64_t d = 0; d < g.hd; ++d)
        expect_within(qo[i * g.q_width() + h * g.hd + d], r.y[d], r.err[d],
                      "q row " + std::to_string(i) + " head " + std::to_string(h) + " d " +
                          std::to_string(d));
    }
    for (uint64_t h = 0; h < g.nkv; ++h) {
      const StageRef r = stage_ref(&qkv[i * g.qkv_dim + g.k_col0 + h * g.hd], g, table,
                                   g.qk_norm ? kn.data() : nullptr, ps);
      for (uint64_t d = 0; d < g.hd; ++d) {
        const uint64_t at = i * g.kv_width() + h * g.hd + d;
        expect_within(ko[at], r.y[d], r.err[d],
                      "k row " + std::to_string(i) + " d " + std::to_string(d));
        EXPECT_EQ(vo[at], qkv[i * g.qkv_dim + g.v_col0 + h * g.hd + d]) << "v copy " << at;
      }
    }
  }
  for (uint16_t b : kpad) ASSERT_EQ(b, 0u) << "phantom K rows are zero";
  for (uint16_t b : vpad) ASSERT_EQ(b, 0u) << "phantom V rows are zero";
}

TEST(CudaSimAttention, StageMropeSectionsQkNormPartialRotary) {
  check_stage(config_a(false), 1.0f);
}
TEST(CudaSimAttention, StageMropeInterleaved) { check_stage(config_a(true), 1.0f); }
TEST(CudaSimAttention, StageInterleavedPairsAttentionFactor) { check_stage(config_b(), 1.25f); }

// ---- cache write -----------------------------------------------------------------------

// Scratch source copies K and V rows to their slots; qkv source stages K with the same stage
// function, so the cached K equals the K scratch of the same token bit for bit. Slots −1 and
// past the cache are skipped (their sentinel stays).
TEST(CudaSimAttention, CacheWriteScratchAndQkvSources) {
  const ModelConfig config = config_a(false);
  const AttnGeometry g = AttnGeometry::of(config);
  const uint64_t t = 4, stride = 4, kvw = g.kv_width();
  const KvCacheGeometry cache{4, 3, 3};  // 12 slots
  Pool p;
  p.rope = pool_tensor({g.rope_entries()}, DType::f32);
  p.k_norm = pool_tensor({g.hd}, DType::bf16);
  p.positions = pool_tensor({3, stride}, DType::u32);
  p.slots = pool_tensor({t}, DType::i64);
  p.k_cache = pool_tensor({cache.num_blocks, cache.block_size, g.nkv, g.hd}, DType::bf16);
  p.v_cache = p.k_cache;
  p.bytes =
      oracle::place_in_pool({&p.rope, &p.k_norm, &p.positions, &p.slots, &p.k_cache, &p.v_cache});
  AttnMetaRefs meta{p.positions, stride, p.slots, {}, {}};
  using Part = AttnStageOp::Part;
  AttnStageOp kst = AttnStageOp::make(config, Part::k_scratch, 0, t, false, 0, {}, meta);
  AttnStageOp vst = AttnStageOp::make(config, Part::v_scratch, 0, t, false, 8, {}, meta);
  kst.weights.rope = p.rope;
  kst.weights.k_norm = p.k_norm;
  using Source = AttnCacheWriteOp::Source;
  AttnCacheWriteOp from_scratch =
      AttnCacheWriteOp::make(config, Source::scratch, 0, t, 8, cache, {}, meta);
  AttnCacheWriteOp from_qkv = AttnCacheWriteOp::make(config, Source::qkv, 0, t, 0, cache, {}, meta);
  for (AttnCacheWriteOp* op : {&from_scratch, &from_qkv}) {
    op->weights.k_cache = p.k_cache;
    op->weights.v_cache = p.v_cache;
  }
  from_qkv.weights.rope = p.rope;
  from_qkv.weights.k_norm = p.k_norm;
  Rig rig(testing::backend_under_test(),
          {kst.accesses(), vst.accesses(), from_scratch.accesses(), from_qkv.accesses()}, p.bytes);
  const Bits qkv = random_bits(t * g.qkv_dim, -2.0f, 2.0f);
  std::vector<uint32_t> pos(3 * stride);
  for (uint64_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<uint32_t>(5 + 13 * i);
  rig.put(kst.src, qkv);
  rig.put(p.rope, rope_table(g, 1.0f));
  rig.put(p.k_norm, random_bits(g.hd, -0.5f, 0.5f));
  rig.put(p.positions, pos);
  const std::vector<int64_t> slots{7, -1, 2, 12};  // row 1 padding, row 3 past the 12 slots
  rig.put(p.slots, slots);
  const Bits sentinel(cache.slots() * kvw, 0x1234);
  for (const AttnCacheWriteOp* op : {&from_scratch, &from_qkv}) {
    rig.put(p.k_cache, sentinel);
    rig.put(p.v_cache, sentinel);
    rig.backend->execute(rig.ws, kst);
    rig.backend->execute(rig.ws, vst);
    rig.backend->execute(rig.ws, *op);
    const Bits kc = rig.get<uint16_t>(p.k_cache), vc = rig.get<uint16_t>(p.v_cache);
    const Bits ks = rig.get<uint16_t>(kst.dst);
    std::vector<bool> written(cache.slots(), false);
    for (uint64_t i = 0; i < t; ++i) {
      if (slots[i] < 0 || slots[i] >= static_cast<int64_t>(cache.slots())) continue;
      written[static_cast<uint64_t>(slots[i])] = true;
      for (uint64_t c = 0; c < kvw; ++c) {
        const uint64_t at = static_cast<uint64_t>(slots[i]) * kvw + c;
        EXPECT_EQ(kc[at], ks[i * kvw + c]) << op->params() << " K row " << i << " col " << c;
        EXPECT_EQ(vc[at], qkv[i * g.qkv_dim + g.v_col0 + c]) << " V row " << i << " col " << c;
      }
    }
    for (uint64_t s = 0; s < cache.slots(); ++s)
      for (uint64_t c = 0; c < kvw && !written[s]; ++c) {
        ASSERT_EQ(kc[s * kvw + c], 0x1234) << "slot " << s;
      }
  }
}

// ---- the cores -------------------------------------------------------------------------

// Exact attention of one (row, head) in FP64 from the stored BF16 q, k, v, with the bound of
// the kernel's FP32 error before its BF16 store (docs/spec/attention.md §4; u = 2^-24):
//   score: the fmaf chain over hd terms and the ·scale product, scale = fp32(1/sqrt(hd)):
//     |ŝ_j − s_j| ≤ δ = (hd + 2)u·max_j scale·Σ_d|q_d k_jd|.
//   weights p_j = e^{s_j − m}/l: perturbing every score by ≤ δ moves each p_j by a factor
//     within e^{±2δ} (≤ 2.1δ relative here); each e_j = expf(ŝ_j − m̂) adds the subtraction
//     (|s_j − m|u ≤ R·u) and expf's 2 ulp (2u); every tile's rescale α (expf of a difference,
//     2u + R·u) and the two products by α (2u) compound over the T tiles (and the sink); l
//     and acc_d are sums of n terms (γ_n each) and o = acc/l one division: relative error of
//     every weight ε ≤ 2.1δ + (2n + 8 + (T + 1)(6 + 2R))u, R = max_j |s_j − m|.
//   Split-K adds the partial's division and the merge: w_k = l_k·expf(m_k − m) (3u + R·u),
//     the sums over S parts (2γ_S) and the final division: (2S + 8 + 2R)u more.
//   |ô_d − o_d| ≤ ε·Σ_j p_j |v_jd|.
struct Key {
  const uint16_t* k;
  const uint16_t* v;
};
struct CoreRef {
  std::vector<double> o, err;
};
CoreRef core_ref(const uint16_t* q, const std::vector<Key>& keys, uint64_t hd, bool has_sink,
                 float sink, uint64_t tiles, uint64_t splits) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> s(keys.size());
  double m = has_sink ? sink : -std::numeric_limits<double>::infinity(), delta = 0.0;
  for (size_t j = 0; j < keys.size(); ++j) {
    double dot = 0.0, mag = 0.0;
    for (uint64_t d = 0; d < hd; ++d) {
      dot += static_cast<double>(fl(q[d])) * fl(keys[j].k[d]);
      mag += std::fabs(static_cast<double>(fl(q[d])) * fl(keys[j].k[d]));
    }
    s[j] = dot * scale;
    delta = std::max(delta, (static_cast<double>(hd) + 2) * kU * mag * scale);
    m = std::max(m, s[j]);
  }
  double l = has_sink ? std::exp(sink - m) : 0.0, R = has_sink ? std::fabs(sink - m) : 0.0;
  std::vector<double> e(keys.size());
  for (size_t j = 0; j < keys.size(); ++j) {
    e[j] = std::exp(s[j] - m);
    l += e[j];
    R = std::max(R, std::fabs(s[j] - m));
  }
  const double n = static_cast<double>(keys.size()), T = static_cast<double>(tiles);
  double eps = 2.1 * delta + (2 * n + 8 + (T + 1) * (6 + 2 * R)) * kU;
  if (splits > 1) eps += (2 * static_cast<double>(splits) + 8 + 2 * R) * kU;
  CoreRef r{std::vector<double>(hd, 0.0), std::vector<double>(hd, 0.0)};
  for (size_t j = 0; j < keys.size(); ++j)
    for (uint64_t d = 0; d < hd; ++d) {
      const double pv = e[j] / l * fl(keys[j].v[d]);
      r.o[d] += pv;
      r.err[d] += eps * std::fabs(pv);
    }
  return r;
}

uint64_t tiles_of(int64_t lo, int64_t hi) {
  return hi < lo ? 0 : static_cast<uint64_t>(hi / 64 - lo / 64 + 1);
}

// A shuffled block table: sequence b's logical block j → a physical block of a random
// permutation of all blocks; entries past `used[b]` blocks are −1 (never needed).
std::vector<int32_t> shuffled_table(const KvCacheGeometry& c, const std::vector<uint64_t>& used) {
  std::vector<int32_t> phys(c.num_blocks);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng());
  std::vector<int32_t> table(used.size() * c.max_blocks, -1);
  uint64_t next = 0;
  for (uint64_t b = 0; b < used.size(); ++b)
    for (uint64_t j = 0; j < used[b]; ++j) table[b * c.max_blocks + j] = phys[next++];
  return table;
}
uint64_t slot_of(const std::vector<int32_t>& table, const KvCacheGeometry& c, uint64_t seq,
                 uint64_t j) {
  return static_cast<uint64_t>(table[seq * c.max_blocks + j / c.block_size]) * c.block_size +
         j % c.block_size;
}

// Prefill: 2 streams of L = 4 tokens, prefixes ctx in the cache. Visible prefix keys hold
// random values, every other cache slot NaN.
void check_prefill(const ModelConfig& config, bool sliding, std::vector<int32_t> ctx) {
  const AttnGeometry g = AttnGeometry::of(config);
  const uint64_t streams = 2, L = 4, t = streams * L, kvw = g.kv_width(), qw = g.q_width();
  const int64_t W = sliding ? static_cast<int64_t>(g.window) : 0;
  const KvCacheGeometry cache{4, 2 * 17, 17};
  std::vector<uint64_t> used(streams);
  for (uint64_t b = 0; b < streams; ++b) used[b] = (static_cast<uint64_t>(ctx[b]) + 3) / 4;
  const std::vector<int32_t> table = shuffled_table(cache, used);
  Pool p;
  p.sinks = pool_tensor({g.nq}, DType::f32);
  p.k_cache = pool_tensor({cache.num_blocks, cache.block_size, g.nkv, g.hd}, DType::bf16);
  p.v_cache = p.k_cache;
  p.lens = pool_tensor({streams}, DType::i32);
  p.table = pool_tensor({streams, cache.max_blocks}, DType::i32);
  p.bytes = oracle::place_in_pool({&p.sinks, &p.k_cache, &p.v_cache, &p.lens, &p.table});
  const PrefillLaunch launch{3, t, streams, 0, t};  // 3 decode rows before the prefill part
  AttnPrefillOp op = AttnPrefillOp::make(config, sliding, launch, t, cache, std::nullopt, {},
                                         AttnMetaRefs{{}, 0, {}, p.lens, p.table});
  op.weights.k_cache = p.k_cache;
  op.weights.v_cache = p.v_cache;
  if (g.sinks) op.weights.sinks = p.sinks;
  Rig rig(testing::backend_under_test(), {op.accesses()}, p.bytes);
  const Bits q = random_bits(t * qw), ks = random_bits(t * kvw), vs = random_bits(t * kvw);
  Bits kc(cache.slots() * kvw, kNanBits), vc = kc;
  for (uint64_t b = 0; b < streams; ++b)
    for (int64_t j = W > 0 ? std::max<int64_t>(0, ctx[b] - W + 1) : 0; j < ctx[b];
         ++j)  // keys some row sees
      for (uint64_t c = 0; c < kvw; ++c) {
        const uint64_t at = slot_of(table, cache, b, static_cast<uint64_t>(j)) * kvw + c;
        kc[at] = bf(uniform(-1.0f, 1.0f));
        vc[at] = bf(uniform(-1.0f, 1.0f));
      }
  std::vector<float> sinks(g.nq);
  for (auto& s : sinks) s = uniform(-1.0f, 2.0f);
  rig.put(op.q, q);
  for (uint64_t b = 0; b < streams; ++b) {
    rig.put(op.k[b], Bits(ks.begin() + static_cast<int64_t>(b * L * kvw),
                          ks.begin() + static_cast<int64_t>((b + 1) * L * kvw)));
    rig.put(op.v[b], Bits(vs.begin() + static_cast<int64_t>(b * L * kvw),
                          vs.begin() + static_cast<int64_t>((b + 1) * L * kvw)));
  }
  rig.put(p.k_cache, kc);
  rig.put(p.v_cache, vc);
  rig.put(p.lens, ctx);
  rig.put(p.table, table);
  if (g.sinks) rig.put(p.sinks, sinks);
  rig.backend->execute(rig.ws, op);
  const Bits out = rig.get<uint16_t>(op.out);
  for (uint64_t r = 0; r < t; ++r) {
    const uint64_t b = r / L, i = r % L;
    const int64_t pos = ctx[b] + static_cast<int64_t>(i),
                  lo = W > 0 ? std::max<int64_t>(0, pos - W + 1) : 0;
    for (uint64_t h = 0; h < g.nq; ++h) {
      const uint64_t kvh = h / g.group();
      std::vector<Key> keys;
      for (int64_t j = lo; j <= pos; ++j) {
        if (j < ctx[b]) {
          const uint64_t at = slot_of(table, cache, b, static_cast<uint64_t>(j)) * kvw + kvh * g.hd;
          keys.push_back({&kc[at], &vc[at]});
        } else {
          const uint64_t at = (b * L + static_cast<uint64_t>(j - ctx[b])) * kvw + kvh * g.hd;
          keys.push_back({&ks[at], &vs[at]});
        }
      }
      const CoreRef ref =
          core_ref(&q[r * qw + h * g.hd], keys, g.hd, g.sinks, sinks[h], tiles_of(lo, pos), 1);
      for (uint64_t d = 0; d < g.hd; ++d)
        expect_within(out[r * qw + h * g.hd + d], ref.o[d], ref.err[d],
                      "prefill row " + std::to_string(r) + " head " + std::to_string(h) + " d " +
                          std::to_string(d));
    }
  }
  // Stream 0's rows do not depend on stream 1's query, keys and values (bit for bit).
  Bits q2 = q, ks2 = ks, vs2 = vs;
  for (uint64_t c = L * qw; c < t * qw; ++c) q2[c] = bf(uniform(-1.0f, 1.0f));
  for (uint64_t c = L * kvw; c < t * kvw; ++c) {
    ks2[c] = bf(uniform(-1.0f, 1.0f));
    vs2[c] = bf(uniform(-1.0f, 1.0f));
  }
  rig.put(op.q, q2);
  rig.put(op.k[1], Bits(ks2.begin() + static_cast<int64_t>(L * kvw), ks2.end()));
  rig.put(op.v[1], Bits(vs2.begin() + static_cast<int64_t>(L * kvw), vs2.end()));
  rig.backend->execute(rig.ws, op);
  const Bits out2 = rig.get<uint16_t>(op.out);
  for (uint64_t c = 0; c < L * qw; ++c) ASSERT_EQ(out2[c], out[c]) << "stream 0 col " << c;
}

TEST(CudaSimAttention, PrefillFullGqa2QkNormPrefixShuffledBlocks) {
  check_prefill(config_a(false), false, {7, 3});
}
TEST(CudaSimAttention, PrefillSlidingSinksGqa4AcrossTileBoundary) {
  check_prefill(config_b(), true, {62, 0});  // rows at p = 62..65 see keys in two tiles
}

// Decode: 3 launched rows, 2 live; one split and split-K + merge against the same exact
// reference (the query from the Q copy of the same qkv rows: the same stage function).
void check_decode(const ModelConfig& config, bool sliding, std::vector<int32_t> seq_lens,
                  uint64_t splits) {
  const AttnGeometry g = AttnGeometry::of(config);
  const uint64_t rows = seq_lens.size(), live = rows - 1, kvw = g.kv_width(), qw = g.q_width();
  const int64_t W = sliding ? static_cast<int64_t>(g.window) : 0;
  const KvCacheGeometry cache{16, 3 * 10, 10};
  std::vector<uint64_t> used(rows);
  for (uint64_t r = 0; r < rows; ++r) used[r] = (static_cast<uint64_t>(seq_lens[r]) + 15) / 16;
  const std::vector<int32_t> table = shuffled_table(cache, used);
  Pool p;
  p.rope = pool_tensor({g.rope_entries()}, DType::f32);
  p.q_norm = pool_tensor({g.hd}, DType::bf16);
  p.sinks = pool_tensor({g.nq}, DType::f32);
  p.k_cache = pool_tensor({cache.num_blocks, cache.block_size, g.nkv, g.hd}, DType::bf16);
  p.v_cache = p.k_cache;
  p.positions = pool_tensor({g.pos_streams(), rows}, DType::u32);
  p.lens = pool_tensor({rows}, DType::i32);
  p.table = pool_tensor({rows, cache.max_blocks}, DType::i32);
  p.bytes = oracle::place_in_pool(
      {&p.rope, &p.q_norm, &p.sinks, &p.k_cache, &p.v_cache, &p.positions, &p.lens, &p.table});
  const AttnMetaRefs meta{p.positions, rows, {}, p.lens, p.table};
  AttnStageOp qcopy =
      AttnStageOp::make(config, AttnStageOp::Part::q_copy, 0, rows, false, 0, {}, meta);
  qcopy.weights.rope = p.rope;
  if (g.qk_norm) qcopy.weights.q_norm = p.q_norm;
  AttnDecodeOp one = AttnDecodeOp::make(config, sliding, rows, live, 1, false, cache, {}, meta);
  AttnDecodeOp split =
      AttnDecodeOp::make(config, sliding, rows, live, splits, false, cache, {}, meta);
  SplitKMergeOp merge = SplitKMergeOp::make(config, rows, live, splits);
  for (AttnDecodeOp* op : {&one, &split}) {
    op->weights.rope = p.rope;
    op->weights.k_cache = p.k_cache;
    op->weights.v_cache = p.v_cache;
    if (g.qk_norm) op->weights.q_norm = p.q_norm;
  }
  if (g.sinks) {
    one.weights.sinks = p.sinks;
    merge.sinks = p.sinks;
  }
  Rig rig(testing::backend_under_test(),
          {qcopy.accesses(), one.accesses(), split.accesses(), merge.accesses()}, p.bytes);
  const Bits qkv = random_bits(rows * g.qkv_dim, -2.0f, 2.0f);
  Bits kc(cache.slots() * kvw, kNanBits), vc = kc;
  for (uint64_t r = 0; r < live; ++r) {
    const int64_t pos = seq_lens[r] - 1, lo = W > 0 ? std::max<int64_t>(0, pos - W + 1) : 0;
    for (int64_t j = lo; j <= pos; ++j)
      for (uint64_t c = 0; c < kvw; ++c) {
        const uint64_t at = slot_of(table, cache, r, static_cast<uint64_t>(j)) * kvw + c;
        kc[at] = bf(uniform(-1.0f, 1.0f));
        vc[at] = bf(uniform(-1.0f, 1.0f));
      }
  }
  std::vector<uint32_t> pos(g.pos_streams() * rows);
  for (uint64_t s = 0; s < g.pos_streams(); ++s)
    for (uint64_t r = 0; r < rows; ++r)
      pos[s * rows + r] = static_cast<uint32_t>(seq_lens[r] - 1) + static_cast<uint32_t>(s * 7);
  std::vector<float> sinks(g.nq);
  for (auto& s : sinks) s = uniform(-1.0f, 2.0f);
  rig.put(one.qkv, qkv);
  rig.put(p.rope, rope_table(g, 1.0f));
  rig.put(p.q_norm, random_bits(g.hd, -0.5f, 0.5f));
  rig.put(p.sinks, sinks);
  rig.put(p.k_cache, kc);
  rig.put(p.v_cache, vc);
  rig.put(p.positions, pos);
  rig.put(p.lens, seq_lens);
  rig.put(p.table, table);
  rig.backend->execute(rig.ws, qcopy);
  const Bits q = rig.get<uint16_t>(qcopy.dst);
  rig.backend->execute(rig.ws, one);
  const Bits out_one = rig.get<uint16_t>(one.out);
  rig.backend->execute(rig.ws, split);
  const std::vector<float> partials = rig.get<float>(split.out);
  rig.backend->execute(rig.ws, merge);
  const Bits out_split = rig.get<uint16_t>(merge.out);
  const uint64_t hd2 = g.hd + 2;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t h = 0; h < g.nq; ++h) {
      if (r >= live) {  // padding: zeros, and −inf / 0 in every split slot
        for (uint64_t d = 0; d < g.hd; ++d) {
          EXPECT_EQ(out_one[r * qw + h * g.hd + d], 0u);
          EXPECT_EQ(out_split[r * qw + h * g.hd + d], 0u);
        }
        for (uint64_t k = 0; k < splits; ++k) {
          const float* slot = &partials[((r * g.nq + h) * splits + k) * hd2];
          for (uint64_t d = 0; d < g.hd; ++d) EXPECT_EQ(slot[d], 0.0f);
          EXPECT_EQ(slot[g.hd], -std::numeric_limits<float>::infinity());
          EXPECT_EQ(slot[g.hd + 1], 0.0f);
        }
        continue;
      }
      const int64_t p_r = seq_lens[r] - 1, lo = W > 0 ? std::max<int64_t>(0, p_r - W + 1) : 0;
      std::vector<Key> keys;
      for (int64_t j = lo; j <= p_r; ++j) {
        const uint64_t at =
            slot_of(table, cache, r, static_cast<uint64_t>(j)) * kvw + (h / g.group()) * g.hd;
        keys.push_back({&kc[at], &vc[at]});
      }
      const uint16_t* qh = &q[r * qw + h * g.hd];
      const CoreRef ref1 = core_ref(qh, keys, g.hd, g.sinks, sinks[h], tiles_of(lo, p_r), 1);
      // Split-K: each part reduces its own tiles; bound with every tile of the row (the
      // parts' tiles number at most tiles + splits).
      const CoreRef refS =
          core_ref(qh, keys, g.hd, g.sinks, sinks[h], tiles_of(lo, p_r) + splits, splits);
      for (uint64_t d = 0; d < g.hd; ++d) {
        const std::string where = "decode row " + std::to_string(r) + " head " + std::to_string(h) +
                                  " d " + std::to_string(d);
        expect_within(out_one[r * qw + h * g.hd + d], ref1.o[d], ref1.err[d],
                      where + " (one split)");
        expect_within(out_split[r * qw + h * g.hd + d], refS.o[d], refS.err[d],
                      where + " (split-K)");
      }
    }
  }
  // Batch invariance (docs/spec/attention.md §4): row 1's query and length change, then the
  // live count drops to 1; row 0's bits stay, in both paths.
  Bits qkv2 = qkv;
  for (uint64_t c = 0; c < g.qkv_dim; ++c) qkv2[g.qkv_dim + c] = bf(uniform(-2.0f, 2.0f));
  std::vector<int32_t> lens2 = seq_lens;
  lens2[1] = std::max(1, seq_lens[1] - 2);
  rig.put(one.qkv, qkv2);
  rig.put(p.lens, lens2);
  for (uint64_t live2 : {live, uint64_t{1}}) {
    AttnDecodeOp one2 = one, split2 = split;
    SplitKMergeOp merge2 = merge;
    one2.dims.live = split2.dims.live = merge2.dims.live = live2;
    rig.backend->execute(rig.ws, one2);
    const Bits o1 = rig.get<uint16_t>(one.out);
    rig.backend->execute(rig.ws, split2);
    rig.backend->execute(rig.ws, merge2);
    const Bits oS = rig.get<uint16_t>(merge.out);
    for (uint64_t c = 0; c < qw; ++c) {
      ASSERT_EQ(o1[c], out_one[c]) << "row 0 col " << c << " with live " << live2;
      ASSERT_EQ(oS[c], out_split[c]) << "row 0 col " << c << " (split-K) with live " << live2;
    }
  }
}

TEST(CudaSimAttention, DecodeFullMropeQkNormSplitKThreeTiles) {
  check_decode(config_a(false), false, {150, 70, 9}, 3);
}
TEST(CudaSimAttention, DecodeSlidingSinksAcrossTileBoundary) {
  check_decode(config_b(), true, {67, 5, 30}, 2);
}

// hd = 12: key rows 24 bytes apart, so the dot takes its scalar path for misaligned rows and
// its 8-wide path plus the scalar tail for aligned ones.
ModelConfig config_b12() {
  ModelConfig c = config_b();
  c.head_dim = 12;
  return c;
}
TEST(CudaSimAttention, PrefillAndDecodeHeadDim12) {
  check_prefill(config_b12(), true, {9, 2});
  check_decode(config_b12(), true, {20, 7, 3}, 2);
}

// ---- gate ------------------------------------------------------------------------------

// y = bf16(a·(1/(1 + expf(−g)))): expf (2 ulp), the sum, the division and the product round
// once each: |ŷ − y| ≤ 5u·|y| (the sum's rounding is relative to 1 + e^−g ≥ the term).
TEST(CudaSimAttention, GateInPlace) {
  const ModelConfig config = config_a(false);
  const AttnGeometry g = AttnGeometry::of(config);
  const uint64_t rows = 3;
  const AttnGateOp op = AttnGateOp::make(config, rows);
  Rig rig(testing::backend_under_test(), {op.accesses()}, 0);
  const Bits qkv = random_bits(rows * g.qkv_dim, -4.0f, 4.0f), a = random_bits(rows * g.q_width());
  rig.put(op.gate, qkv);
  rig.put(op.attn, a);
  rig.backend->execute(rig.ws, op);
  const Bits y = rig.get<uint16_t>(op.attn);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < g.q_width(); ++c) {
      const double gv = fl(qkv[r * g.qkv_dim + g.gate_col0 + c]);
      const double exact = fl(a[r * g.q_width() + c]) / (1.0 + std::exp(-gv));
      expect_within(y[r * g.q_width() + c], exact, 5 * kU * std::fabs(exact),
                    "gate " + std::to_string(c));
    }
}

}  // namespace
}  // namespace bufferlab
