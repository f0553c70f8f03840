// The CPU attention kernels (backends/cpu/src/cpu_attention_*.cpp, ops/attention.h) on small
// hand-made workspaces, against naive FP64 loops written here independently of the kernels'
// code (docs/spec/attention.md §2, §4): the staging with qk_norm and RoPE (MRoPE with t ≠ h ≠ w,
// interleaved pairs, partial rotary), the cache write, the prefill core (co-dispatched streams,
// paged prefix on a shuffled block table, sliding window, sinks, GQA groups 2 and 4), decode
// with one split and with split-K plus the merge, padding rows, the gate. Then the bit-for-bit
// rules of §4: thread count, chunked vs one-shot prefill, block numbering, out-of-window keys
// set to NaN, MRoPE with t = h = w vs 1-D RoPE, staged vs decoded K, decode vs prefill rows.
//
// Bounds (u = 2^-24; every comparison is |got − ref| ≤ E + ½·ulp_bf16(|ref| + E): the kernel's
// FP32 value lies within E of the exact one, and its one BF16 store rounds to nearest):
//   stage, rotated pair (a, b) of the exactly normed values, angle θ = pos·inv_freq (the FP32
//     table value): E = af·(|a| + |b|)·(ε_n + (|θ| + 6)·u)·1.01, ε_n the relative error of
//     the FP32 norm: ss (hd squares summed: γ_hd), /hd, +eps, sqrt (halves it), 1/, ·x, 1+w,
//     ·(1+w): ≤ (hd/2 + 6)·u·1.01, taken as (hd + 8)·u (0 without qk_norm, exact then). The
//     angle: fp32(pos) exact (pos < 2^24), θ̂ = θ(1 + δ) moves cos/sin by ≤ |θ|·u, cosf/sinf
//     within 1 ulp (≤ 2u, glibc's documented bound) and ·af one more u; the two products and
//     the sum 3u. Not rotated: E = |n|·ε_n.
//   core: exact scores s_j from the BF16 q, k and 1/sqrt(hd); each FP32 score is off by
//     ≤ Δ = (hd + 2)·u·1.01·scale·Σ_d|q_d·k_jd| (the dot's γ_hd, the scale's rounding, the
//     multiply); the softmax weights then by a factor within e^{±2Δ}. Given the FP32 scores:
//     each e_j = expf(ŝ_j − m') carries 2u (expf, 1 ulp) + u·D (the rounded difference, D ≤ the
//     score spread + 2Δ, sink included); each of ≤ `tiles` rescales α = expf(m − m') 3u + u·D;
//     l and acc sum N + tiles + 2 terms (γ); the division u. Relative to Σ_j p_j·|v_jd|:
//     ρ = (e^{2Δ} − 1) + 2·((2 + D)·u + tiles·(3 + D)·u) + 2·γ_{N+tiles+2} + u, E = 1.01·ρ·Σ p|v|.
//     Split-K and merge add per part: o_k's division u, w_k = l_k·expf(m_k − m) (4 + D)·u, and
//     the merge's sums γ_{S+2}: ρ += 2·((4 + D)·u) + 2·γ_{S+2}.
// Each asserted check was seen failing on a planted kernel bug: RoPE sign, MRoPE section swap,
// MRoPE frequency index restarted per section, the qk_norm weight without its 1 +, rotated
// dims past rotary_dim, a V bit flipped, phantom rows left unwritten, the cache slot ^ 1, a row
// also seeing p + 1, the GQA map q % nkv, the sink left out of l, the merge without its max
// rescale, a split-K part short of its last block, padding rows left unwritten, the logical
// block used as the physical one, tiles of 32 inside a thread team, the prefix and the chunk's
// keys in separate tiles, a window one key too wide, the decode query without qk_norm, the
// gate's sigmoid of +g, a block entry ≥ num_blocks dereferenced, the table capacity not clipped.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/cpu/cpu_backend.h"

namespace bufferlab {
namespace cpu_attention_reference {
namespace {

using Bits = std::vector<uint16_t>;
constexpr double kU = 1.0 / 16777216.0;  // 2^-24
constexpr uint16_t kNanBits = 0x7FC0;

double gamma(double n) { return n * kU / (1.0 - n * kU); }
double bf(uint16_t b) { return static_cast<double>(bf16_bits_to_f32(b)); }

// ulp of a BF16 value of magnitude x (8 significant bits; subnormals share 2^-133).
double ulp_bf16(double x) {
  if (x < std::ldexp(1.0, -126)) return std::ldexp(1.0, -133);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(x))) - 7);
}

// Agreement of one kernel output with its FP64 reference: the elements outside E + ½ ulp
// (asserted none), and, measured: the largest |got − ref| / (E + ½ ulp), the elements whose
// BF16 value is not the correctly rounded reference, and the largest BF16 ulp distance to it.
struct Agreement {
  uint64_t checked = 0, bad = 0, misrounded = 0;
  uint32_t max_ulps = 0;
  double worst = 0.0;
  std::string first_bad;
  void check(uint16_t got, double ref, double E, const std::string& where) {
    const double allowed = E + 0.5 * ulp_bf16(std::fabs(ref) + E);
    const double diff = std::fabs(bf(got) - ref);
    ++checked;
    const double ratio = diff / allowed;
    if (!(ratio <= 1.0)) {
      if (bad++ == 0)
        first_bad = where + ": got " + std::to_string(bf(got)) + " ref " + std::to_string(ref) +
                    " allowed " + std::to_string(allowed);
      return;
    }
    worst = std::max(worst, ratio);
    const uint16_t rounded = f32_to_bf16_bits(static_cast<float>(ref));
    if (rounded != got) {
      ++misrounded;
      max_ulps = std::max(max_ulps, bf16_ulp_distance(rounded, got));
    }
  }
};

// Expects no element outside its bound and prints the measured agreement.
void expect_agrees(const Agreement& a, const std::string& what) {
  EXPECT_GT(a.checked, 0u) << what;
  EXPECT_EQ(a.bad, 0u) << what << ": " << a.first_bad;
  std::printf(  // NOLINT
      "[agreement] %s: %llu elements, worst |err|/bound %.3f, %llu not the correctly rounded "
      "FP64 value (at most %u BF16 ulp)\n",
      what.c_str(), static_cast<unsigned long long>(a.checked), a.worst,
      static_cast<unsigned long long>(a.misrounded), a.max_ulps);
}

// ---- The test case ---------------------------------------------------------------------------

struct Spec {
  uint64_t nq = 4, nkv = 2, hd = 16;
  double partial = 1.0;
  bool interleaved = false, qk_norm = false, gated = false, sinks = false;
  bool mrope_interleaved = false;
  std::array<uint64_t, 3> sections{0, 0, 0};  // MRoPE when any is > 0
  uint64_t window = 0;                        // sliding layer when > 0
  float af = 1.0f;
  uint64_t block_size = 8, num_blocks = 160, max_blocks = 20;  // 8 rows' tables
  uint64_t seed = 1;
};

ModelConfig config_of(const Spec& s) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.vocab_size = 100;
  c.num_hidden_layers = 2;
  c.num_attention_heads = s.nq;
  c.num_key_value_heads = s.nkv;
  c.head_dim = s.hd;
  c.partial_rotary_factor = s.partial;
  c.rope_interleaved = s.interleaved;
  c.qk_norm = s.qk_norm;
  c.attn_gated = s.gated;
  c.attn_sinks = s.sinks;
  c.sliding_window = s.window;
  c.mrope_section = s.sections;
  c.mrope_interleaved = s.mrope_interleaved;
  return c;
}

Bits random_bits(std::mt19937_64& rng, uint64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Bits out(n);
  for (auto& b : out) b = f32_to_bf16_bits(static_cast<float>(dist(rng)));
  return out;
}

// The weights and the cache a case starts from, on the host.
struct World {
  Spec spec;
  ModelConfig cfg;
  AttnGeometry g;
  KvCacheGeometry cache;
  std::vector<float> rope;  // inv_freq then af
  Bits q_norm, k_norm;
  std::vector<float> sinks;
  Bits k_cache, v_cache;  // [slots, nkv, hd], NaN where nothing was written

  explicit World(const Spec& s) : spec(s), cfg(config_of(s)), g(AttnGeometry::of(cfg)) {
    cache = {s.block_size, s.num_blocks, s.max_blocks};
    std::mt19937_64 rng(s.seed);
    const uint64_t half = g.rotary_dim / 2;
    for (uint64_t i = 0; i < half; ++i)
      rope.push_back(
          static_cast<float>(std::pow(10000.0, -2.0 * double(i) / double(g.rotary_dim))));
    rope.push_back(s.af);
    q_norm = random_bits(rng, g.hd, -0.5, 0.5);
    k_norm = random_bits(rng, g.hd, -0.5, 0.5);
    std::uniform_real_distribution<double> sink(-1.0, 2.0);
    for (uint64_t q = 0; q < g.nq; ++q) sinks.push_back(static_cast<float>(sink(rng)));
    k_cache.assign(cache.slots() * g.kv_width(), kNanBits);
    v_cache = k_cache;
  }
  uint64_t slot_elems() const { return g.kv_width(); }
};

// A block table for `seqs` sequences: physical blocks drawn from a permutation of the cache's
// (shuffled), or in order (identity).
std::vector<int32_t> block_table(const World& w, uint64_t seqs, bool shuffled, uint64_t seed) {
  std::vector<int32_t> perm(w.cache.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  if (shuffled) {
    std::mt19937_64 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
  }
  std::vector<int32_t> table(seqs * w.cache.max_blocks);
  for (uint64_t i = 0; i < table.size(); ++i) table[i] = perm.at(i);
  return table;
}

int64_t slot_of(const World& w, const std::vector<int32_t>& table, uint64_t seq, uint64_t j) {
  const uint64_t bs = w.cache.block_size;
  return int64_t{table[seq * w.cache.max_blocks + j / bs]} * int64_t(bs) + int64_t(j % bs);
}

// Fills keys [0, len) of sequence `seq` with random K and V.
void fill_prefix(World& w, const std::vector<int32_t>& table, uint64_t seq, uint64_t len,
                 std::mt19937_64& rng) {
  const uint64_t kvw = w.g.kv_width();
  for (uint64_t j = 0; j < len; ++j) {
    const uint64_t at = uint64_t(slot_of(w, table, seq, j)) * kvw;
    const Bits k = random_bits(rng, kvw, -2.0, 2.0), v = random_bits(rng, kvw, -2.0, 2.0);
    std::copy(k.begin(), k.end(), w.k_cache.begin() + int64_t(at));
    std::copy(v.begin(), v.end(), w.v_cache.begin() + int64_t(at));
  }
}

// ---- The workspace ---------------------------------------------------------------------------

struct Rig {
  std::unique_ptr<Backend> be = make_cpu_backend();
  uint64_t pool_end = 0;
  BufferSizes sizes;
  Workspace ws;

  TensorRef place(std::vector<uint64_t> shape, DType t) {
    TensorRef r = pool_tensor(std::move(shape), t);
    pool_end = (pool_end + 255) / 256 * 256;
    r.offset = pool_end;
    pool_end += r.bytes();
    return r;
  }
  void hold(const std::vector<Access>& acc) {
    for (const Access& a : acc) {
      if (a.tensor.space != Space::arena || a.tensor.elements() == 0) continue;
      uint64_t& b = sizes.bytes(a.tensor.buffer);
      b = std::max(b, a.tensor.offset + a.tensor.bytes());
    }
  }
  void allocate() {
    ws = be->allocate(Layout::build(sizes), pool_end);
    be->poison(ws);
  }
  template <class T>
  void put(const TensorRef& t, const std::vector<T>& v) {
    ASSERT_EQ(v.size(), t.elements()) << t.to_string();
    std::memcpy(ws.data<T>(t), v.data(), t.bytes());
  }
  template <class T>
  std::vector<T> get(const TensorRef& t) {
    std::vector<T> v(t.elements());
    std::memcpy(v.data(), ws.data<T>(t), t.bytes());
    return v;
  }
};

// The placed weight-pool operands shared by every op of a run.
struct Placed {
  AttnWeights w;
  explicit Placed(Rig& rig, const World& world) {
    const AttnGeometry& g = world.g;
    w.rope = rig.place({g.rope_entries()}, DType::f32);
    w.q_norm = rig.place({g.hd}, DType::bf16);
    w.k_norm = rig.place({g.hd}, DType::bf16);
    w.sinks = rig.place({g.nq}, DType::f32);
    w.k_cache =
        rig.place({world.cache.num_blocks, world.cache.block_size, g.nkv, g.hd}, DType::bf16);
    w.v_cache =
        rig.place({world.cache.num_blocks, world.cache.block_size, g.nkv, g.hd}, DType::bf16);
  }
  void upload(Rig& rig, const World& world) const {
    rig.put(w.rope, world.rope);
    rig.put(w.q_norm, world.q_norm);
    rig.put(w.k_norm, world.k_norm);
    rig.put(w.sinks, world.sinks);
    rig.put(w.k_cache, world.k_cache);
    rig.put(w.v_cache, world.v_cache);
  }
  // The op's own operands, taken from the placed set (make() leaves them at pool offset 0).
  AttnWeights pick(const AttnWeights& made) const {
    AttnWeights out;
    const auto keep = [](const TensorRef& m, const TensorRef& p) {
      return m.shape.empty() ? TensorRef{} : p;
    };
    out.rope = keep(made.rope, w.rope);
    out.q_norm = keep(made.q_norm, w.q_norm);
    out.k_norm = keep(made.k_norm, w.k_norm);
    out.sinks = keep(made.sinks, w.sinks);
    out.k_cache = keep(made.k_cache, w.k_cache);
    out.v_cache = keep(made.v_cache, w.v_cache);
    return out;
  }
};

// ---- The prefill chain: staging, cache write, core, gate -------------------------------------

struct PrefillIn {
  std::vector<uint64_t> ctx;        // per stream
  uint64_t L = 0;                   // tokens per stream
  Bits qkv;                         // [t, qkv_dim]
  std::vector<uint32_t> positions;  // [pos_streams, t]
  std::vector<int32_t> table;       // [streams, max_blocks]
  bool padded = false;              // the FP8 path's ceil16 K/V rows
  bool sliding = false;
  std::vector<int64_t> slots;  // the cache write's slots; empty: each token's through the table
};

struct PrefillOut {
  Bits q, k, v;  // Q copy [t, nq·hd]; K, V scratch [rows, nkv·hd]
  Bits k_cache, v_cache;
  Bits attn, gated;  // [t, nq·hd]
};

PrefillOut run_prefill(const World& w, const PrefillIn& in) {
  const AttnGeometry& g = w.g;
  const uint64_t streams = in.ctx.size(), t = streams * in.L;
  const uint64_t m = (t + 15) / 16 * 16;  // the V scratch row: the sizing's m ≥ ceil16(t)
  Rig rig;
  const Placed placed(rig, w);
  AttnMetaRefs meta;
  meta.positions = rig.place({g.pos_streams(), t}, DType::u32);
  meta.pos_stride = t;
  meta.slots = rig.place({t}, DType::i64);
  meta.lens = rig.place({streams}, DType::i32);
  meta.block_table = rig.place({streams, w.cache.max_blocks}, DType::i32);
  using Part = AttnStageOp::Part;
  std::vector<AttnStageOp> stage;
  for (Part part : {Part::q_copy, Part::k_scratch, Part::v_scratch}) {
    AttnStageOp op =
        AttnStageOp::make(w.cfg, part, 0, t, in.padded, part == Part::v_scratch ? m : 0, {}, meta);
    op.weights = placed.pick(op.weights);
    stage.push_back(op);
  }
  AttnCacheWriteOp write =
      AttnCacheWriteOp::make(w.cfg, AttnCacheWriteOp::Source::scratch, 0, t, m, w.cache, {}, meta);
  write.weights = placed.pick(write.weights);
  AttnPrefillOp core = AttnPrefillOp::make(w.cfg, in.sliding, {0, t, streams, 0, t}, m, w.cache,
                                           std::nullopt, {}, meta);
  core.weights = placed.pick(core.weights);
  const AttnGateOp gate = AttnGateOp::make(w.cfg, t);
  for (const auto& op : stage) rig.hold(op.accesses());
  rig.hold(write.accesses());
  rig.hold(core.accesses());
  if (w.g.gated) rig.hold(gate.accesses());
  rig.allocate();
  placed.upload(rig, w);
  rig.put(stage[0].src, in.qkv);
  rig.put(meta.positions, in.positions);
  std::vector<int64_t> slots(t);
  std::vector<int32_t> lens(streams);
  for (uint64_t b = 0; b < streams; ++b) {
    lens[b] = int32_t(in.ctx[b]);
    for (uint64_t i = 0; i < in.L && in.slots.empty(); ++i)
      slots[b * in.L + i] = slot_of(w, in.table, b, in.ctx[b] + i);
  }
  if (!in.slots.empty()) slots = in.slots;
  rig.put(meta.slots, slots);
  rig.put(meta.lens, lens);
  rig.put(meta.block_table, in.table);
  PrefillOut out;
  for (const auto& op : stage) rig.be->attn_stage(rig.ws, op);
  rig.be->attn_cache_write(rig.ws, write);
  rig.be->attn_prefill(rig.ws, core);
  out.q = rig.get<uint16_t>(stage[0].dst);
  const auto whole = [&](const AttnStageOp& op) {
    TensorRef r = op.dst;
    r.shape[0] = op.shape().rows;
    return rig.get<uint16_t>(r);
  };
  out.k = whole(stage[1]);
  out.v = whole(stage[2]);
  out.k_cache = rig.get<uint16_t>(placed.w.k_cache);
  out.v_cache = rig.get<uint16_t>(placed.w.v_cache);
  out.attn = rig.get<uint16_t>(core.out);
  if (w.g.gated) {
    rig.be->attn_gate(rig.ws, gate);
    out.gated = rig.get<uint16_t>(core.out);
  }
  return out;
}

// ---- The FP64 references ---------------------------------------------------------------------

// Token positions for MRoPE cases: t, h and w differ (a text token would have them equal).
std::vector<uint32_t> positions_for(const World& w, const std::vector<uint64_t>& pos,
                                    bool equal_streams = false) {
  const uint64_t n = pos.size();
  std::vector<uint32_t> out(w.g.pos_streams() * n);
  for (uint64_t s = 0; s < w.g.pos_streams(); ++s)
    for (uint64_t i = 0; i < n; ++i)
      out[s * n + i] = uint32_t(pos[i] + (equal_streams ? 0 : 37 * s * (i % 5 + 1)));
  return out;
}

// S(x) of one head in FP64, with E per element (the header's bound), into the agreement.
void check_stage(const World& w, const uint16_t* x, const std::array<uint32_t, 3>& pos,
                 const uint16_t* norm, const uint16_t* got, Agreement& agr,
                 const std::string& where) {
  const AttnGeometry& g = w.g;
  const uint64_t hd = g.hd, half = g.rotary_dim / 2;
  std::vector<double> n(hd);
  double eps_n = 0.0;
  if (norm != nullptr) {
    double ss = 0.0;
    for (uint64_t i = 0; i < hd; ++i) ss += bf(x[i]) * bf(x[i]);
    const double inv = 1.0 / std::sqrt(ss / double(hd) + double(g.eps));
    for (uint64_t i = 0; i < hd; ++i) n[i] = bf(x[i]) * inv * (1.0 + bf(norm[i]));
    eps_n = double(hd + 8) * kU;
  } else {
    for (uint64_t i = 0; i < hd; ++i) n[i] = bf(x[i]);
  }
  std::vector<double> y = n, E(hd);
  for (uint64_t i = 0; i < hd; ++i) E[i] = std::fabs(n[i]) * eps_n;
  const double af = w.rope[half];
  for (uint64_t i = 0; i < half; ++i) {
    uint64_t stream = 0;  // the MRoPE rule, written out again
    const auto& s = g.mrope_section;
    if (g.mrope && g.mrope_interleaved) {
      stream = (i % 3 == 1 && i < 3 * s[1]) ? 1 : (i % 3 == 2 && i < 3 * s[2]) ? 2 : 0;
    } else if (g.mrope) {
      stream = i < s[0] ? 0 : i < s[0] + s[1] ? 1 : i < s[0] + s[1] + s[2] ? 2 : 0;
    }
    const double theta = double(pos[stream]) * double(w.rope[i]);
    const uint64_t ia = g.rope_interleaved ? 2 * i : i,
                   ib = g.rope_interleaved ? 2 * i + 1 : i + half;
    const double a = n[ia], b = n[ib], c = std::cos(theta) * af, sn = std::sin(theta) * af;
    y[ia] = a * c - b * sn;
    y[ib] = b * c + a * sn;
    const double e =
        af * (std::fabs(a) + std::fabs(b)) * (eps_n + (std::fabs(theta) + 6) * kU) * 1.01;
    E[ia] = E[ib] = e;
  }
  for (uint64_t i = 0; i < hd; ++i) agr.check(got[i], y[i], E[i], where + " d" + std::to_string(i));
}

// One (row, head) of the core in FP64: keys (K, V head rows) in ascending position order, the
// tiles they span, an optional sink; E per dimension (the header's bound, `splits` > 1 adding
// the merge's terms).
void check_core(uint64_t hd, const uint16_t* q, const std::vector<const uint16_t*>& ks,
                const std::vector<const uint16_t*>& vs, uint64_t tiles, const float* sink,
                uint64_t splits, const uint16_t* got, Agreement& agr, const std::string& where) {
  const uint64_t N = ks.size();
  const double scale = 1.0 / std::sqrt(double(hd));
  std::vector<double> s(N);
  double delta = 0.0, hi = -INFINITY, lo = INFINITY;
  for (uint64_t j = 0; j < N; ++j) {
    double dot = 0.0, mag = 0.0;
    for (uint64_t d = 0; d < hd; ++d) {
      dot += bf(q[d]) * bf(ks[j][d]);
      mag += std::fabs(bf(q[d]) * bf(ks[j][d]));
    }
    s[j] = dot * scale;
    delta = std::max(delta, double(hd + 2) * kU * 1.01 * scale * mag);
    hi = std::max(hi, s[j]);
    lo = std::min(lo, s[j]);
  }
  if (sink != nullptr) {
    hi = std::max(hi, double(*sink));
    lo = std::min(lo, double(*sink));
  }
  double Z = 0.0;
  std::vector<double> p(N);
  for (uint64_t j = 0; j < N; ++j) Z += p[j] = std::exp(s[j] - hi);
  if (sink != nullptr) Z += std::exp(double(*sink) - hi);
  const double D = (hi - lo) + 2 * delta;
  double rho = std::expm1(2 * delta) + 2 * ((2 + D) * kU + double(tiles) * (3 + D) * kU) +
               2 * gamma(double(N + tiles + 2)) + kU;
  if (splits > 1) rho += 2 * (4 + D) * kU + 2 * gamma(double(splits + 2));
  for (uint64_t d = 0; d < hd; ++d) {
    double o = 0.0, mag = 0.0;
    for (uint64_t j = 0; j < N; ++j) {
      o += p[j] / Z * bf(vs[j][d]);
      mag += p[j] / Z * std::fabs(bf(vs[j][d]));
    }
    agr.check(got[d], o, 1.01 * rho * mag, where + " d" + std::to_string(d));
  }
}

uint64_t tiles_of(uint64_t lo, uint64_t p) { return p / kAttnKeyTile - lo / kAttnKeyTile + 1; }

// Checks a prefill run against the references: staging, cache write, core, gate.
void check_prefill(const World& w, const PrefillIn& in, const PrefillOut& out, bool window_on) {
  const AttnGeometry& g = w.g;
  const uint64_t hd = g.hd, t = in.ctx.size() * in.L, kvw = g.kv_width(), qw = g.q_width();
  Agreement q_agr, k_agr, core_agr, gate_agr;
  uint64_t v_bad = 0, pass_bad = 0, cache_bad = 0, phantom_bad = 0;
  for (uint64_t r = 0; r < t; ++r) {
    const uint16_t* row = in.qkv.data() + r * g.qkv_dim;
    std::array<uint32_t, 3> pos{0, 0, 0};
    for (uint64_t s = 0; s < g.pos_streams(); ++s) pos[s] = in.positions[s * t + r];
    for (uint64_t h = 0; h < g.nq; ++h)
      check_stage(w, row + h * hd, pos, g.qk_norm ? w.q_norm.data() : nullptr,
                  out.q.data() + r * qw + h * hd, q_agr, "q r" + std::to_string(r));
    for (uint64_t h = 0; h < g.nkv; ++h) {
      check_stage(w, row + g.k_col0 + h * hd, pos, g.qk_norm ? w.k_norm.data() : nullptr,
                  out.k.data() + r * kvw + h * hd, k_agr, "k r" + std::to_string(r));
      for (uint64_t d = 0; d < hd; ++d) {
        v_bad += out.v[r * kvw + h * hd + d] != row[g.v_col0 + h * hd + d];
        // Without qk_norm the dimensions past rotary_dim are the input's bits.
        if (!g.qk_norm && d >= g.rotary_dim)
          pass_bad += out.k[r * kvw + h * hd + d] != row[g.k_col0 + h * hd + d];
      }
    }
  }
  for (uint64_t i = t * kvw; i < out.k.size(); ++i) phantom_bad += out.k[i] != 0 || out.v[i] != 0;
  // The cache write: each token's scratch rows at its slot.
  for (uint64_t b = 0; b < in.ctx.size(); ++b)
    for (uint64_t i = 0; i < in.L; ++i) {
      const uint64_t slot = uint64_t(slot_of(w, in.table, b, in.ctx[b] + i)), r = b * in.L + i;
      for (uint64_t e = 0; e < kvw; ++e)
        cache_bad += out.k_cache[slot * kvw + e] != out.k[r * kvw + e] ||
                     out.v_cache[slot * kvw + e] != out.v[r * kvw + e];
    }
  // The core, keys read through the logical positions of the (reference's own) cache copy.
  for (uint64_t b = 0; b < in.ctx.size(); ++b)
    for (uint64_t i = 0; i < in.L; ++i) {
      const uint64_t p = in.ctx[b] + i, r = b * in.L + i;
      const uint64_t lo = window_on && p + 1 > g.window ? p + 1 - g.window : 0;
      for (uint64_t q = 0; q < g.nq; ++q) {
        const uint64_t kvh = q / (g.nq / g.nkv);
        std::vector<const uint16_t*> ks, vs;
        for (uint64_t j = lo; j <= p; ++j) {
          if (j < in.ctx[b]) {
            const uint64_t at = uint64_t(slot_of(w, in.table, b, j)) * kvw + kvh * hd;
            ks.push_back(w.k_cache.data() + at);
            vs.push_back(w.v_cache.data() + at);
          } else {
            const uint64_t at = (b * in.L + j - in.ctx[b]) * kvw + kvh * hd;
            ks.push_back(out.k.data() + at);
            vs.push_back(out.v.data() + at);
          }
        }
        check_core(hd, out.q.data() + r * qw + q * hd, ks, vs, tiles_of(lo, p),
                   g.sinks ? &w.sinks[q] : nullptr, 1, out.attn.data() + r * qw + q * hd, core_agr,
                   "core r" + std::to_string(r) + " q" + std::to_string(q));
      }
    }
  if (g.gated)
    for (uint64_t r = 0; r < t; ++r)
      for (uint64_t c = 0; c < qw; ++c) {
        const double a = bf(out.attn[r * qw + c]), gt = bf(in.qkv[r * g.qkv_dim + g.gate_col0 + c]);
        // FP32: expf (2u), 1+ (u), 1/ (u), a· (u): 5u relative, 1.01 over.
        const double y = a / (1.0 + std::exp(-gt));
        gate_agr.check(out.gated[r * qw + c], y, std::fabs(y) * 5 * kU * 1.01, "gate");
      }
  expect_agrees(q_agr, "stage Q");
  expect_agrees(k_agr, "stage K");
  EXPECT_EQ(v_bad, 0u) << "V scratch is not the qkv V bits";
  EXPECT_EQ(pass_bad, 0u) << "dimensions past rotary_dim changed";
  EXPECT_EQ(phantom_bad, 0u) << "phantom rows not zero";
  EXPECT_EQ(cache_bad, 0u) << "cache write differs from the scratch";
  expect_agrees(core_agr, "prefill core");
  if (g.gated) expect_agrees(gate_agr, "gate");
}

// A prefill case: streams with the given prefixes, L tokens each, random qkv rows.
PrefillIn prefill_case(World& w, std::vector<uint64_t> ctx, uint64_t L, bool shuffled = true) {
  PrefillIn in;
  in.ctx = std::move(ctx);
  in.L = L;
  const uint64_t t = in.ctx.size() * L;
  std::mt19937_64 rng(w.spec.seed * 7 + 3);
  in.qkv = random_bits(rng, t * w.g.qkv_dim, -2.0, 2.0);
  std::vector<uint64_t> pos(t);
  for (uint64_t b = 0; b < in.ctx.size(); ++b)
    for (uint64_t i = 0; i < L; ++i) pos[b * L + i] = in.ctx[b] + i;
  in.positions = positions_for(w, pos);
  in.table = block_table(w, in.ctx.size(), shuffled, w.spec.seed + 11);
  for (uint64_t b = 0; b < in.ctx.size(); ++b) fill_prefix(w, in.table, b, in.ctx[b], rng);
  in.sliding = w.spec.window > 0;
  return in;
}

// ---- Decode ------------------------------------------------------------------------------------

struct DecodeIn {
  uint64_t rows = 0, live = 0, splits = 1;
  Bits qkv;                         // [rows, qkv_dim]
  std::vector<uint32_t> positions;  // [pos_streams, rows]
  std::vector<int32_t> seq_lens;    // [rows]
  std::vector<int32_t> table;       // [rows, max_blocks]
  std::vector<int64_t> slots;       // [rows]: the slot of key seq_len − 1 (padding: −1)
  bool sliding = false;
};

struct DecodeOut {
  Bits q;  // the Q copy of the same rows (the stage function the decode core calls)
  Bits k_cache, v_cache;
  std::vector<float> partials;
  Bits out;
};

DecodeOut run_decode(const World& w, const DecodeIn& in) {
  const AttnGeometry& g = w.g;
  Rig rig;
  const Placed placed(rig, w);
  AttnMetaRefs meta;
  meta.positions = rig.place({g.pos_streams(), in.rows}, DType::u32);
  meta.pos_stride = in.rows;
  meta.slots = rig.place({in.rows}, DType::i64);
  meta.lens = rig.place({in.rows}, DType::i32);
  meta.block_table = rig.place({in.rows, w.cache.max_blocks}, DType::i32);
  AttnStageOp stage =
      AttnStageOp::make(w.cfg, AttnStageOp::Part::q_copy, 0, in.rows, false, 0, {}, meta);
  stage.weights = placed.pick(stage.weights);
  AttnCacheWriteOp write = AttnCacheWriteOp::make(w.cfg, AttnCacheWriteOp::Source::qkv, 0, in.rows,
                                                  0, w.cache, {}, meta);
  write.weights = placed.pick(write.weights);
  AttnDecodeOp core =
      AttnDecodeOp::make(w.cfg, in.sliding, in.rows, in.live, in.splits, false, w.cache, {}, meta);
  core.weights = placed.pick(core.weights);
  SplitKMergeOp merge = SplitKMergeOp::make(w.cfg, in.rows, in.live, in.splits);
  if (w.g.sinks) merge.sinks = placed.w.sinks;
  rig.hold(stage.accesses());
  rig.hold(write.accesses());
  rig.hold(core.accesses());
  if (in.splits > 1) rig.hold(merge.accesses());
  rig.allocate();
  placed.upload(rig, w);
  rig.put(core.qkv, in.qkv);
  rig.put(meta.positions, in.positions);
  rig.put(meta.slots, in.slots);
  rig.put(meta.lens, in.seq_lens);
  rig.put(meta.block_table, in.table);
  DecodeOut out;
  rig.be->attn_stage(rig.ws, stage);
  rig.be->attn_cache_write(rig.ws, write);
  rig.be->attn_decode(rig.ws, core);
  out.q = rig.get<uint16_t>(stage.dst);
  out.k_cache = rig.get<uint16_t>(placed.w.k_cache);
  out.v_cache = rig.get<uint16_t>(placed.w.v_cache);
  if (in.splits > 1) {
    out.partials = rig.get<float>(core.out);
    rig.be->splitk_merge(rig.ws, merge);
    out.out = rig.get<uint16_t>(merge.out);
  } else {
    out.out = rig.get<uint16_t>(core.out);
  }
  return out;
}

// `rows` decode rows, the first `live` of them with seq_lens `lens` (their prefix in the
// cache); padding rows carry metadata that would fault if read (block entries far outside the
// cache, a huge seq_len).
DecodeIn decode_case(World& w, uint64_t rows, const std::vector<uint64_t>& lens, uint64_t splits,
                     bool shuffled = true) {
  DecodeIn in;
  in.rows = rows;
  in.live = lens.size();
  in.splits = splits;
  std::mt19937_64 rng(w.spec.seed * 13 + 5);
  in.qkv = random_bits(rng, rows * w.g.qkv_dim, -2.0, 2.0);
  in.table = block_table(w, rows, shuffled, w.spec.seed + 17);
  std::vector<uint64_t> pos(rows, 0);
  in.seq_lens.assign(rows, 0);
  in.slots.assign(rows, -1);
  for (uint64_t r = 0; r < rows; ++r) {
    if (r < in.live) {
      fill_prefix(w, in.table, r, lens[r] - 1, rng);
      in.seq_lens[r] = int32_t(lens[r]);
      pos[r] = lens[r] - 1;
      in.slots[r] = slot_of(w, in.table, r, lens[r] - 1);
    } else {
      in.seq_lens[r] = 1 << 30;
      for (uint64_t e = 0; e < w.cache.max_blocks; ++e)
        in.table[r * w.cache.max_blocks + e] = (e % 2 == 0) ? -7 : 1 << 29;
    }
  }
  in.positions = positions_for(w, pos);
  in.sliding = w.spec.window > 0;
  return in;
}

void check_decode(const World& w, const DecodeIn& in, const DecodeOut& out) {
  const AttnGeometry& g = w.g;
  const uint64_t hd = g.hd, kvw = g.kv_width(), qw = g.q_width();
  Agreement k_agr, core_agr;
  uint64_t v_bad = 0, pad_bad = 0;
  for (uint64_t r = 0; r < in.live; ++r) {
    const uint16_t* row = in.qkv.data() + r * g.qkv_dim;
    std::array<uint32_t, 3> pos{0, 0, 0};
    for (uint64_t s = 0; s < g.pos_streams(); ++s) pos[s] = in.positions[s * in.rows + r];
    const uint64_t slot = uint64_t(in.slots[r]);
    for (uint64_t h = 0; h < g.nkv; ++h) {
      check_stage(w, row + g.k_col0 + h * hd, pos, g.qk_norm ? w.k_norm.data() : nullptr,
                  out.k_cache.data() + slot * kvw + h * hd, k_agr, "cache K r" + std::to_string(r));
      for (uint64_t d = 0; d < hd; ++d)
        v_bad += out.v_cache[slot * kvw + h * hd + d] != row[g.v_col0 + h * hd + d];
    }
    const uint64_t p = uint64_t(in.seq_lens[r]) - 1;
    const uint64_t lo = in.sliding && p + 1 > g.window ? p + 1 - g.window : 0;
    for (uint64_t q = 0; q < g.nq; ++q) {
      const uint64_t kvh = q / (g.nq / g.nkv);
      std::vector<const uint16_t*> ks, vs;
      for (uint64_t j = lo; j <= p; ++j) {
        const uint64_t at = uint64_t(slot_of(w, in.table, r, j)) * kvw + kvh * hd;
        ks.push_back(out.k_cache.data() + at);
        vs.push_back(out.v_cache.data() + at);
      }
      check_core(hd, out.q.data() + r * qw + q * hd, ks, vs, tiles_of(lo, p),
                 g.sinks ? &w.sinks[q] : nullptr, in.splits, out.out.data() + r * qw + q * hd,
                 core_agr, "decode r" + std::to_string(r) + " q" + std::to_string(q));
    }
  }
  for (uint64_t r = in.live; r < in.rows; ++r)
    for (uint64_t c = 0; c < qw; ++c) pad_bad += out.out[r * qw + c] != 0;
  if (in.splits > 1) {
    const uint64_t per_row = g.nq * in.splits * (hd + 2);
    for (uint64_t r = in.live; r < in.rows; ++r)
      for (uint64_t k = 0; k < g.nq * in.splits; ++k) {
        const float* slot = out.partials.data() + r * per_row + k * (hd + 2);
        for (uint64_t d = 0; d < hd; ++d) pad_bad += slot[d] != 0.0f;
        pad_bad += !(std::isinf(slot[hd]) && slot[hd] < 0) || slot[hd + 1] != 0.0f;
      }
  }
  expect_agrees(k_agr, "decode cache-write K");
  EXPECT_EQ(v_bad, 0u) << "cache-write V is not the qkv V bits";
  expect_agrees(core_agr, in.splits > 1 ? "split-K + merge" : "decode one split");
  EXPECT_EQ(pad_bad, 0u) << "padding rows not zero (or partials not m = -inf, l = 0)";
}

// ---- Tests -------------------------------------------------------------------------------------

struct Named {
  const char* name;
  Spec spec;
};

std::vector<Named> prefill_specs() {
  std::vector<Named> v;
  Spec s;
  v.push_back({"plain_gqa2", s});
  s = {};
  s.nq = 8, s.nkv = 2, s.interleaved = true, s.af = 1.25f, s.seed = 2;
  v.push_back({"interleaved_gqa4_af", s});
  s = {};
  s.partial = 0.25, s.hd = 32, s.qk_norm = true, s.gated = true, s.seed = 3;
  v.push_back({"partial_qknorm_gated", s});
  s = {};
  s.partial = 0.5, s.seed = 4;
  v.push_back({"partial_passthrough", s});
  s = {};
  s.hd = 32, s.sections = {6, 5, 5}, s.seed = 5;  // rotary 32: 16 frequencies
  v.push_back({"mrope", s});
  s = {};
  s.hd = 32, s.sections = {6, 5, 5}, s.mrope_interleaved = true, s.qk_norm = true, s.seed = 6;
  v.push_back({"mrope_interleaved", s});
  s = {};
  s.window = 20, s.sinks = true, s.nq = 8, s.nkv = 2, s.seed = 7;
  v.push_back({"sliding_sinks_gqa4", s});
  s = {};
  s.nkv = 1, s.sinks = true, s.block_size = 5, s.max_blocks = 28, s.num_blocks = 240, s.seed = 8;
  v.push_back({"sinks_mqa_odd_blocks", s});
  return v;
}

TEST(CpuAttentionReference, PrefillChainAgreesWithFp64) {
  for (const Named& n : prefill_specs()) {
    SCOPED_TRACE(n.name);
    std::printf("[case] %s\n", n.name);  // NOLINT
    World w(n.spec);
    // Stream 0 without a prefix, stream 1 crossing the 64-key tile boundary, stream 2 short.
    const PrefillIn in = prefill_case(w, {0, 70, 9}, 9);
    check_prefill(w, in, run_prefill(w, in), in.sliding);
  }
}

TEST(CpuAttentionReference, PaddedKvRowsAreZero) {
  World w(Spec{});
  PrefillIn in = prefill_case(w, {3, 5}, 5);
  in.padded = true;  // t = 10: K and V written as 16 rows, 6 phantom
  const PrefillOut out = run_prefill(w, in);
  EXPECT_EQ(out.k.size(), 16 * w.g.kv_width());
  check_prefill(w, in, out, false);
}

TEST(CpuAttentionReference, DecodeOneSplitAndSplitKAgreeWithFp64) {
  for (const Named& n : prefill_specs()) {
    SCOPED_TRACE(n.name);
    std::printf("[case] %s\n", n.name);  // NOLINT
    for (uint64_t splits : {1, 3}) {
      World w(n.spec);
      // 6 rows, 4 live: one key, a tile boundary crossed, several blocks.
      const DecodeIn in = decode_case(w, 6, {1, 66, 130, 17}, splits);
      check_decode(w, in, run_decode(w, in));
    }
  }
}

TEST(CpuAttentionReference, SplitKMergeIsCloseToOneSplit) {
  Spec s;
  s.sinks = true;
  World w1(s), w3(s);
  const DecodeIn one = decode_case(w1, 4, {40, 100, 128, 7}, 1);
  const DecodeIn three = decode_case(w3, 4, {40, 100, 128, 7}, 4);
  const Bits a = run_decode(w1, one).out, b = run_decode(w3, three).out;
  uint64_t worst = 0;
  for (uint64_t i = 0; i < a.size(); ++i)
    worst = std::max<uint64_t>(worst, bf16_ulp_distance(a[i], b[i]));
  std::printf("[agreement] split-K(4)+merge vs one split: worst %llu bf16 ulp\n",  // NOLINT
              static_cast<unsigned long long>(worst));
  // Both lie within E + ½·ulp_bf16(|o| + E) of the same FP64 value o (the test above), E ≪ ulp:
  // an interval holding at most two BF16 values, three where it straddles a power of two (the
  // lower binade's spacing is half): at most 2 steps apart.
  EXPECT_LE(worst, 2u);
}

// ---- Bit-for-bit ---------------------------------------------------------------------------

TEST(CpuAttentionReference, ThreadCountDoesNotChangeABit) {
  Spec s;
  s.qk_norm = true, s.sinks = true, s.window = 50, s.sections = {3, 3, 2};
  World w(s);
  const PrefillIn in = prefill_case(w, {0, 70, 9}, 12);
  World wd(s);
  const DecodeIn din = decode_case(wd, 8, {1, 66, 130, 17, 90, 3}, 3);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const PrefillOut p1 = run_prefill(w, in);
  const DecodeOut d1 = run_decode(wd, din);
  omp_set_num_threads(2);
  const PrefillOut p2 = run_prefill(w, in);
  const DecodeOut d2 = run_decode(wd, din);
  omp_set_num_threads(saved);
  EXPECT_EQ(p1.q, p2.q);
  EXPECT_EQ(p1.k, p2.k);
  EXPECT_EQ(p1.attn, p2.attn);
  EXPECT_EQ(d1.partials.size(), d2.partials.size());
  EXPECT_EQ(std::memcmp(d1.partials.data(), d2.partials.data(), d1.partials.size() * 4), 0);
  EXPECT_EQ(d1.out, d2.out);
}

// One stream of N tokens in one launch vs the same tokens in chunks cut at `cuts` (each chunk
// reading the earlier chunks' keys from the cache): every chunk's rows are the same bits. The
// rows are BF16, which hides most FP32 reordering (a reduction in another order moves a value by
// a few FP32 ulp, which changes its BF16 rounding with a probability of about 2^-16 per
// element): the large case has enough elements (233·8·64) to show one.
void expect_chunked_equals_one_shot(const Spec& spec, uint64_t N, std::vector<uint64_t> cuts) {
  World w(spec);
  const uint64_t P = w.g.pos_streams(), qw = w.g.q_width();
  const PrefillIn whole = prefill_case(w, {0}, N);
  const PrefillOut one = run_prefill(w, whole);
  cuts.push_back(N);
  World wc = w;
  uint64_t c0 = 0;
  for (uint64_t c1 : cuts) {
    PrefillIn part = whole;
    part.ctx = {c0};
    part.L = c1 - c0;
    part.qkv.assign(whole.qkv.begin() + int64_t(c0 * w.g.qkv_dim),
                    whole.qkv.begin() + int64_t(c1 * w.g.qkv_dim));
    part.positions.assign(P * part.L, 0);
    for (uint64_t s = 0; s < P; ++s)
      for (uint64_t i = c0; i < c1; ++i)
        part.positions[s * part.L + i - c0] = whole.positions[s * N + i];
    const PrefillOut out = run_prefill(wc, part);
    wc.k_cache = out.k_cache;  // the cache as this chunk left it
    wc.v_cache = out.v_cache;
    EXPECT_TRUE(std::equal(out.q.begin(), out.q.end(), one.q.begin() + int64_t(c0 * qw)))
        << "chunk from " << c0;
    EXPECT_TRUE(std::equal(out.attn.begin(), out.attn.end(), one.attn.begin() + int64_t(c0 * qw)))
        << "chunk from " << c0;
    c0 = c1;
  }
}

TEST(CpuAttentionReference, ChunkedPrefillEqualsOneShot) {
  for (const Named& n : prefill_specs()) {
    SCOPED_TRACE(n.name);
    expect_chunked_equals_one_shot(n.spec, 100, {67});
  }
  Spec big;
  big.nq = 8, big.hd = 64, big.qk_norm = true, big.sinks = true, big.block_size = 16;
  expect_chunked_equals_one_shot(big, 300, {67, 200});
}

TEST(CpuAttentionReference, BlockNumberingDoesNotChangeABit) {
  Spec s;
  s.sinks = true, s.window = 40;
  World ws(s), wi(s);
  const PrefillIn shuffled = prefill_case(ws, {0, 70, 9}, 9, true);
  const PrefillIn identity = prefill_case(wi, {0, 70, 9}, 9, false);
  EXPECT_NE(shuffled.table, identity.table);
  EXPECT_EQ(run_prefill(ws, shuffled).attn, run_prefill(wi, identity).attn);
  World ds(s), di(s);
  const DecodeIn dshuf = decode_case(ds, 5, {1, 66, 130, 17}, 3, true);
  const DecodeIn dident = decode_case(di, 5, {1, 66, 130, 17}, 3, false);
  EXPECT_EQ(run_decode(ds, dshuf).out, run_decode(di, dident).out);
}

// Keys outside the window (and every unwritten slot: NaN from the start) are never read.
TEST(CpuAttentionReference, OutOfWindowKeysSetToNanChangeNothing) {
  Spec s;
  s.window = 24, s.sinks = true;
  World w(s);
  const PrefillIn in = prefill_case(w, {0, 70, 40}, 9);
  const PrefillOut clean = run_prefill(w, in);
  World dirty = w;
  const uint64_t kvw = w.g.kv_width();
  for (uint64_t b = 0; b < in.ctx.size(); ++b) {
    const uint64_t first_p = in.ctx[b];  // the stream's lowest query sees keys ≥ p − W + 1
    for (uint64_t j = 0; j + w.g.window < first_p + 1 && j < in.ctx[b]; ++j) {
      const uint64_t at = uint64_t(slot_of(w, in.table, b, j)) * kvw;
      std::fill_n(dirty.k_cache.begin() + int64_t(at), kvw, kNanBits);
      std::fill_n(dirty.v_cache.begin() + int64_t(at), kvw, kNanBits);
    }
  }
  EXPECT_NE(dirty.k_cache, w.k_cache);
  EXPECT_EQ(run_prefill(dirty, in).attn, clean.attn);
  World dw(s);
  const DecodeIn din = decode_case(dw, 4, {1, 66, 130, 17}, 2);
  const Bits dclean = run_decode(dw, din).out;
  World ddirty = dw;
  for (uint64_t r = 0; r < din.live; ++r)
    for (uint64_t j = 0; j + w.g.window < uint64_t(din.seq_lens[r]); ++j) {
      const uint64_t at = uint64_t(slot_of(dw, din.table, r, j)) * kvw;
      std::fill_n(ddirty.k_cache.begin() + int64_t(at), kvw, kNanBits);
      std::fill_n(ddirty.v_cache.begin() + int64_t(at), kvw, kNanBits);
    }
  EXPECT_EQ(run_decode(ddirty, din).out, dclean);
}

TEST(CpuAttentionReference, MropeWithEqualStreamsIsOneDimensionalRope) {
  Spec m;
  m.hd = 32, m.sections = {6, 5, 5}, m.qk_norm = true;
  Spec one = m;
  one.sections = {0, 0, 0};
  for (bool interleaved : {false, true}) {
    m.mrope_interleaved = interleaved;
    World wm(m), w1(one);
    PrefillIn im = prefill_case(wm, {5, 20}, 6), i1 = prefill_case(w1, {5, 20}, 6);
    std::vector<uint64_t> pos;
    for (uint64_t b = 0; b < 2; ++b)
      for (uint64_t i = 0; i < 6; ++i) pos.push_back(im.ctx[b] + i);
    im.positions = positions_for(wm, pos, true);
    ASSERT_EQ(im.qkv, i1.qkv);
    const PrefillOut a = run_prefill(wm, im), b = run_prefill(w1, i1);
    EXPECT_EQ(a.q, b.q);
    EXPECT_EQ(a.k, b.k);
  }
}

// The decode path's cache-write K (qkv source) is the prefill K scratch of the same token at the
// same position, and a decode row is the one-shot prefill row of the same position.
TEST(CpuAttentionReference, DecodeMatchesPrefillBitForBit) {
  Spec s;
  s.qk_norm = true, s.sinks = true, s.partial = 0.5, s.sections = {2, 1, 1};
  World w(s);
  const uint64_t N = 80;
  const PrefillIn pin = prefill_case(w, {0}, N);
  const PrefillOut pre = run_prefill(w, pin);
  // Decode token N − 1: its prefix (keys 0 … N − 2) in the cache as the prefill left it.
  World wd = w;
  wd.k_cache = pre.k_cache;
  wd.v_cache = pre.v_cache;
  const uint64_t kvw = w.g.kv_width(), qw = w.g.q_width();
  DecodeIn din;
  din.rows = 1, din.live = 1, din.splits = 1;
  din.qkv.assign(pin.qkv.begin() + int64_t((N - 1) * w.g.qkv_dim), pin.qkv.end());
  din.table = pin.table;
  din.seq_lens = {int32_t(N)};
  din.slots = {slot_of(w, pin.table, 0, N - 1)};
  din.positions.resize(w.g.pos_streams());
  for (uint64_t st = 0; st < w.g.pos_streams(); ++st)
    din.positions[st] = pin.positions[st * N + N - 1];
  // Overwrite the last key's slot with NaN: the decode's own cache write must restore it.
  const uint64_t at = uint64_t(din.slots[0]) * kvw;
  std::fill_n(wd.k_cache.begin() + int64_t(at), kvw, kNanBits);
  const DecodeOut dec = run_decode(wd, din);
  EXPECT_TRUE(std::equal(dec.k_cache.begin() + int64_t(at), dec.k_cache.begin() + int64_t(at + kvw),
                         pre.k.begin() + int64_t((N - 1) * kvw)));
  EXPECT_TRUE(std::equal(dec.q.begin(), dec.q.end(), pre.q.begin() + int64_t((N - 1) * qw)));
  EXPECT_TRUE(std::equal(dec.out.begin(), dec.out.end(), pre.attn.begin() + int64_t((N - 1) * qw)));
}

// Metadata the harness refuses (block entries outside the cache, a sequence longer than its
// table, slots outside the cache) never makes a kernel read or write outside the cache: such
// keys are left out (ops/attention.h), such rows not written. The outputs are the FP64
// references over the keys that remain.
TEST(CpuAttentionReference, MetadataOutsideTheCacheIsSkipped) {
  Spec s;
  s.sinks = true;
  World w(s);
  const uint64_t kvw = w.g.kv_width(), hd = w.g.hd, qw = w.g.q_width(), mb = w.cache.max_blocks;
  const uint64_t capacity = mb * w.cache.block_size, slots = w.cache.slots();
  // Decode: row 0 (40 keys) with logical blocks 2 and 3 outside the cache; row 1 a seq_len 30
  // past its table (its own key unwritten: slot −1); row 2 padding whose slot lies past the
  // cache.
  DecodeIn in = decode_case(w, 3, {40, capacity + 1}, 1);
  in.table[2] = int32_t(w.cache.num_blocks + 5);
  in.table[3] = -3;
  in.seq_lens[1] = int32_t(capacity + 30);
  in.slots[1] = -1;
  in.slots[2] = int64_t(slots + 3);
  const DecodeOut out = run_decode(w, in);
  uint64_t cache_bad = 0;
  const uint64_t own = uint64_t(in.slots[0]) * kvw;  // the one slot written
  for (uint64_t e = 0; e < w.k_cache.size(); ++e)
    if (e < own || e >= own + kvw) cache_bad += out.k_cache[e] != w.k_cache[e];
  EXPECT_EQ(cache_bad, 0u) << "a skipped row wrote the cache";
  Agreement agr;
  for (uint64_t r = 0; r < 2; ++r)
    for (uint64_t q = 0; q < w.g.nq; ++q) {
      const uint64_t kvh = q / (w.g.nq / w.g.nkv), end = r == 0 ? 40 : capacity;
      std::vector<const uint16_t*> ks, vs;
      for (uint64_t j = 0; j < end; ++j) {
        if (r == 0 && j >= 16 && j < 32) continue;  // blocks 2 and 3
        const uint64_t at = uint64_t(slot_of(w, in.table, r, j)) * kvw + kvh * hd;
        ks.push_back(out.k_cache.data() + at);
        vs.push_back(out.v_cache.data() + at);
      }
      check_core(hd, out.q.data() + r * qw + q * hd, ks, vs, tiles_of(0, end - 1), &w.sinks[q], 1,
                 out.out.data() + r * qw + q * hd, agr, "decode r" + std::to_string(r));
    }
  expect_agrees(agr, "decode with keys outside the cache left out");
  // Prefill: a prefix of 165 keys in a table of 160 (keys 160…164 left out, the chunk's own
  // keys from the scratch at 165…), logical block 5 outside the cache, the chunk's slots −1.
  World wp(s);
  PrefillIn pin = prefill_case(wp, {capacity}, 4);
  pin.ctx = {capacity + 5};
  pin.table[5] = -1;
  pin.slots.assign(4, -1);
  const PrefillOut pout = run_prefill(wp, pin);
  EXPECT_EQ(pout.k_cache, wp.k_cache) << "a skipped row wrote the cache";
  Agreement pagr;
  for (uint64_t i = 0; i < 4; ++i)
    for (uint64_t q = 0; q < w.g.nq; ++q) {
      const uint64_t kvh = q / (w.g.nq / w.g.nkv);
      std::vector<const uint16_t*> ks, vs;
      for (uint64_t j = 0; j < capacity; ++j) {
        if (j / w.cache.block_size == 5) continue;
        const uint64_t at = uint64_t(slot_of(wp, pin.table, 0, j)) * kvw + kvh * hd;
        ks.push_back(wp.k_cache.data() + at);
        vs.push_back(wp.v_cache.data() + at);
      }
      for (uint64_t j = 0; j <= i; ++j) {
        ks.push_back(pout.k.data() + j * kvw + kvh * hd);
        vs.push_back(pout.v.data() + j * kvw + kvh * hd);
      }
      check_core(hd, pout.q.data() + i * qw + q * hd, ks, vs, tiles_of(0, capacity + 5 + i),
                 &w.sinks[q], 1, pout.attn.data() + i * qw + q * hd, pagr,
                 "prefill r" + std::to_string(i));
    }
  expect_agrees(pagr, "prefill with keys outside the table left out");
}

}  // namespace
}  // namespace cpu_attention_reference
}  // namespace bufferlab
