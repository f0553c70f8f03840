// Seeded attention passes and the transformations of the invariance properties
// (attention_inputs.h states the choices).
#include "bufferlab/oracle/attention_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/seeded_random.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

enum class AttnStream : uint64_t {
  kQ = 1,
  kK,
  kV,
  kGate,
  kCacheK,
  kCacheV,
  kQNorm,
  kKNorm,
  kSinks,
  kBlocks
};

// A per-sequence list knob: empty = 0 for all, one value = the same for all, else one each.
std::vector<uint64_t> attn_expand_list(const std::vector<uint64_t>& v, uint64_t n,
                                       const char* what) {
  if (v.empty()) return std::vector<uint64_t>(n, 0);
  if (v.size() == 1) return std::vector<uint64_t>(n, v[0]);
  if (v.size() != n)
    throw Error(
        fmt::format("make_attn_case: {} holds {} values for {} sequences", what, v.size(), n));
  return v;
}

// The RoPE position of MRoPE stream s (0 = t, 1 = h, 2 = w) of the token at RoPE position P,
// row i of its part (attention_inputs.h).
uint32_t attn_mrope_position(AttnMropePattern pattern, uint64_t s, uint64_t P, uint64_t i) {
  if (pattern == AttnMropePattern::equal || s == 0) return static_cast<uint32_t>(P);
  return static_cast<uint32_t>(s == 1 ? P + 1 + i % 3 : P + 5 + i % 7);
}

uint64_t attn_u32(uint64_t v, const char* what) {
  if (v > 0xFFFFFFFFull) throw Error(fmt::format("make_attn_case: {} {} exceeds u32", what, v));
  return v;
}
int32_t attn_i32(uint64_t v, const char* what) {
  if (v > 0x7FFFFFFFull) throw Error(fmt::format("make_attn_case: {} {} exceeds i32", what, v));
  return static_cast<int32_t>(v);
}

// Fills positions [pos_streams, n] for tokens of sequence positions p[i].
std::vector<uint32_t> attn_make_positions(const AttnGeometry& g, AttnMropePattern pattern,
                                          uint64_t offset, const std::vector<uint64_t>& p) {
  const uint64_t n = p.size(), ps = g.pos_streams();
  std::vector<uint32_t> out(mul(ps, n));
  for (uint64_t s = 0; s < ps; ++s)
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t P = attn_u32(p[i] + offset + 12, "position") - 12;
      out[s * n + i] = g.mrope ? attn_mrope_position(pattern, s, P, i) : static_cast<uint32_t>(P);
    }
  return out;
}

int64_t attn_slot_of(const int32_t* table_row, uint64_t j, uint64_t bs) {
  return static_cast<int64_t>(table_row[j / bs]) * static_cast<int64_t>(bs) +
         static_cast<int64_t>(j % bs);
}

// Columns [col0, col0 + width) of rows [row0, row0 + rows) of a [·, cols] host matrix.
template <class T>
std::vector<T> attn_take_rows(const std::vector<T>& m, uint64_t cols, uint64_t row0,
                              uint64_t rows) {
  return std::vector<T>(m.begin() + static_cast<std::ptrdiff_t>(row0 * cols),
                        m.begin() + static_cast<std::ptrdiff_t>((row0 + rows) * cols));
}

// Columns [i0, i1) of each of `streams` rows of length n (positions [ps, n] → [ps, i1 − i0]).
template <class T>
std::vector<T> attn_take_columns(const std::vector<T>& m, uint64_t n, uint64_t i0, uint64_t i1) {
  std::vector<T> out;
  for (uint64_t s = 0; s * n < m.size(); ++s)
    out.insert(out.end(), m.begin() + static_cast<std::ptrdiff_t>(s * n + i0),
               m.begin() + static_cast<std::ptrdiff_t>(s * n + i1));
  return out;
}

// Positions of the prefill tokens {b·L + i : b < streams, i ∈ [i0, i1)} (or stream b alone).
std::vector<uint32_t> attn_prefill_positions(const AttnCase& c, uint64_t b0, uint64_t b1,
                                             uint64_t i0, uint64_t i1) {
  const uint64_t t = c.prefill.tokens(), L = c.prefill.L;
  std::vector<uint32_t> out;
  for (uint64_t s = 0; s < c.geom.pos_streams(); ++s)
    for (uint64_t b = b0; b < b1; ++b)
      for (uint64_t i = i0; i < i1; ++i) out.push_back(c.prefill.positions.at(s * t + b * L + i));
  return out;
}

AttnCase attn_without_parts(const AttnCase& c) {
  AttnCase out = c;
  out.decode = {};
  out.prefill = {};
  out.qkv.clear();
  return out;
}

}  // namespace

std::vector<float> attn_rope_operand(const ModelConfig& config) {
  const RopeTable t = rope_table(rope_params(config));
  std::vector<float> out = t.inv_freq;
  out.push_back(static_cast<float>(t.attention_factor));
  return out;
}

AttnCase make_attn_case(const AttnCaseSpec& s, uint64_t seed) {
  if (s.streams == 0 && s.decode_rows == 0)
    throw Error("make_attn_case: no prefill streams and no decode rows");
  if (s.streams > 0 && s.L == 0) throw Error("make_attn_case: prefill streams of L = 0 tokens");
  if (s.live > s.decode_rows)
    throw Error(
        fmt::format("make_attn_case: live = {} above decode_rows = {}", s.live, s.decode_rows));
  if (s.block_size == 0) throw Error("make_attn_case: block_size = 0");
  if (s.splits == 0) throw Error("make_attn_case: splits = 0");
  if (s.sliding && s.config.sliding_window == 0)
    throw Error("make_attn_case: a sliding layer of a config with sliding_window = 0");
  AttnCase c;
  c.config = s.config;
  c.geom = AttnGeometry::of(s.config);
  c.geom.check("make_attn_case");
  c.sliding = s.sliding;
  c.max_seq_len = s.max_seq_len;
  const AttnGeometry& g = c.geom;
  const uint64_t bs = s.block_size, hd = g.hd, kvw = g.kv_width();

  // Sequences: prefill streams, then the live decode rows.
  const std::vector<uint64_t> ctx = attn_expand_list(s.context, s.streams, "context");
  const std::vector<uint64_t> dctx = attn_expand_list(s.decode_context, s.live, "decode_context");
  std::vector<uint64_t> lens, cached;  // keys in total, keys cached before the pass
  for (uint64_t b = 0; b < s.streams; ++b) {
    lens.push_back(ctx[b] + s.L);
    cached.push_back(ctx[b]);
  }
  for (uint64_t r = 0; r < s.live; ++r) {
    lens.push_back(dctx[r] + 1);
    cached.push_back(dctx[r]);
  }
  uint64_t used = 0, longest = 0;
  for (uint64_t len : lens) {
    used += cdiv(len, bs);
    longest = std::max(longest, cdiv(len, bs));
  }
  c.cache.block_size = bs;
  c.cache.num_blocks = used + s.spare_blocks;
  c.cache.max_blocks = std::max<uint64_t>(longest + s.extra_table_entries, 1);
  if (c.cache.num_blocks == 0) c.cache.num_blocks = 1;
  (void)c.cache.slots();

  std::vector<int32_t> perm(c.cache.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  if (s.shuffled_blocks) {
    SplitMix64 rng = rng_for(seed, AttnStream::kBlocks);
    for (uint64_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  }
  const uint64_t mb = c.cache.max_blocks;
  std::vector<int32_t> tables(mul(lens.size(), mb), kAttnNoBlock);
  uint64_t next = 0;
  for (uint64_t q = 0; q < lens.size(); ++q)
    for (uint64_t j = 0; j < cdiv(lens[q], bs); ++j) tables[q * mb + j] = perm[next++];

  // The cache: prefix keys of every sequence, poison elsewhere.
  c.k_cache.assign(mul(c.cache.slots(), kvw), kAttnCachePoison);
  c.v_cache = c.k_cache;
  SplitMix64 ck = rng_for(seed, AttnStream::kCacheK), cv = rng_for(seed, AttnStream::kCacheV);
  for (uint64_t q = 0; q < lens.size(); ++q)
    for (uint64_t j = 0; j < cached[q]; ++j) {
      const uint64_t slot = static_cast<uint64_t>(attn_slot_of(&tables[q * mb], j, bs));
      for (uint64_t e = 0; e < kvw; ++e) {
        c.k_cache[slot * kvw + e] = bf16_of(ck.normalish() * s.k_scale);
        c.v_cache[slot * kvw + e] = bf16_of(cv.normalish() * s.v_scale);
      }
    }

  // Prefill metadata.
  AttnPrefillPart& pf = c.prefill;
  pf.streams = s.streams;
  pf.L = s.streams > 0 ? s.L : 0;
  pf.padded_rows = s.padded_rows;
  pf.v_row0 = s.v_row0 != 0 ? s.v_row0 : pf.kv_rows();
  std::vector<uint64_t> seqpos;
  for (uint64_t b = 0; b < pf.streams; ++b) {
    pf.ctx_lens.push_back(attn_i32(ctx[b], "context"));
    pf.block_table.insert(pf.block_table.end(),
                          tables.begin() + static_cast<std::ptrdiff_t>(b * mb),
                          tables.begin() + static_cast<std::ptrdiff_t>((b + 1) * mb));
    for (uint64_t i = 0; i < pf.L; ++i) {
      seqpos.push_back(ctx[b] + i);
      pf.slots.push_back(attn_slot_of(&tables[b * mb], ctx[b] + i, bs));
    }
  }
  pf.positions = attn_make_positions(g, s.mrope, s.position_offset, seqpos);

  // Decode metadata: padding rows copy a live row's (row r mod live).
  AttnDecodePart& dp = c.decode;
  dp.rows = s.decode_rows;
  dp.live = s.live;
  dp.splits = s.verify ? 1 : s.splits;
  dp.verify = s.verify;
  seqpos.clear();
  for (uint64_t r = 0; r < dp.rows; ++r) {
    const bool live = r < dp.live;
    const uint64_t src = dp.live == 0 ? 0 : r % dp.live;
    if (dp.live == 0) {  // no live row to copy: a made-up plausible sequence of one key
      dp.seq_lens.push_back(1);
      std::vector<int32_t> row(mb, kAttnNoBlock);
      row[0] = perm[0];
      dp.block_table.insert(dp.block_table.end(), row.begin(), row.end());
      seqpos.push_back(0);
      dp.slots.push_back(-1);
      continue;
    }
    const uint64_t q = s.streams + src;
    dp.seq_lens.push_back(attn_i32(lens[q], "seq_len"));
    dp.block_table.insert(dp.block_table.end(),
                          tables.begin() + static_cast<std::ptrdiff_t>(q * mb),
                          tables.begin() + static_cast<std::ptrdiff_t>((q + 1) * mb));
    seqpos.push_back(lens[q] - 1);
    dp.slots.push_back(live ? attn_slot_of(&tables[q * mb], lens[q] - 1, bs) : -1);
  }
  dp.positions = attn_make_positions(g, s.mrope, s.position_offset, seqpos);

  // qkv_output rows: decode rows, then the prefill tokens.
  const uint64_t rows = c.pass_rows(), qd = g.qkv_dim;
  c.qkv.assign(mul(rows, qd), 0);
  SplitMix64 rq = rng_for(seed, AttnStream::kQ), rk = rng_for(seed, AttnStream::kK),
             rv = rng_for(seed, AttnStream::kV), rg = rng_for(seed, AttnStream::kGate);
  for (uint64_t r = 0; r < rows; ++r) {
    uint16_t* row = c.qkv.data() + r * qd;
    for (uint64_t e = 0; e < g.q_width(); ++e) row[e] = bf16_of(rq.normalish() * s.q_scale);
    if (g.gated)
      for (uint64_t e = 0; e < g.q_width(); ++e)
        row[g.gate_col0 + e] = bf16_of(rg.normalish() * s.gate_scale);
    for (uint64_t e = 0; e < kvw; ++e) row[g.k_col0 + e] = bf16_of(rk.normalish() * s.k_scale);
    for (uint64_t e = 0; e < kvw; ++e) row[g.v_col0 + e] = bf16_of(rv.normalish() * s.v_scale);
  }

  c.rope = attn_rope_operand(s.config);
  if (g.qk_norm) {
    SplitMix64 nq = rng_for(seed, AttnStream::kQNorm), nk = rng_for(seed, AttnStream::kKNorm);
    for (uint64_t d = 0; d < hd; ++d) c.q_norm.push_back(bf16_of(nq.normalish() * s.norm_w_scale));
    for (uint64_t d = 0; d < hd; ++d) c.k_norm.push_back(bf16_of(nk.normalish() * s.norm_w_scale));
  }
  if (g.sinks) {
    SplitMix64 rs = rng_for(seed, AttnStream::kSinks);
    for (uint64_t h = 0; h < g.nq; ++h)
      c.sinks.push_back(static_cast<float>(rs.normalish() * s.sink_scale));
  }
  return c;
}

AttnCase renumber_blocks(const AttnCase& c, uint64_t seed) {
  const uint64_t nb = c.cache.num_blocks, bs = c.cache.block_size;
  std::vector<int32_t> perm(nb);
  std::iota(perm.begin(), perm.end(), 0);
  SplitMix64 rng(splitmix64_hash(seed));
  for (uint64_t i = nb; i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  AttnCase out = c;
  const uint64_t block = mul(bs, c.geom.kv_width());
  for (uint64_t b = 0; b < nb; ++b) {
    const auto from = static_cast<std::ptrdiff_t>(b * block);
    const auto to = static_cast<std::ptrdiff_t>(static_cast<uint64_t>(perm[b]) * block);
    std::copy(c.k_cache.begin() + from,
              c.k_cache.begin() + from + static_cast<std::ptrdiff_t>(block),
              out.k_cache.begin() + to);
    std::copy(c.v_cache.begin() + from,
              c.v_cache.begin() + from + static_cast<std::ptrdiff_t>(block),
              out.v_cache.begin() + to);
  }
  const auto remap_table = [&](std::vector<int32_t>& t) {
    for (int32_t& e : t)
      if (e >= 0 && static_cast<uint64_t>(e) < nb) e = perm[static_cast<uint64_t>(e)];
  };
  const auto remap_slots = [&](std::vector<int64_t>& v) {
    for (int64_t& s : v)
      if (s >= 0 && static_cast<uint64_t>(s) < nb * bs)
        s = static_cast<int64_t>(perm[static_cast<uint64_t>(s) / bs]) * static_cast<int64_t>(bs) +
            s % static_cast<int64_t>(bs);
  };
  remap_table(out.prefill.block_table);
  remap_table(out.decode.block_table);
  remap_slots(out.prefill.slots);
  remap_slots(out.decode.slots);
  return out;
}

AttnCase prefill_stream(const AttnCase& c, uint64_t b) {
  const AttnPrefillPart& pf = c.prefill;
  if (b >= pf.streams) throw Error(fmt::format("prefill_stream: stream {} of {}", b, pf.streams));
  const uint64_t L = pf.L, mb = c.cache.max_blocks;
  AttnCase out = attn_without_parts(c);
  AttnPrefillPart& o = out.prefill;
  o.streams = 1;
  o.L = L;
  o.padded_rows = pf.padded_rows;
  o.v_row0 = pf.v_row0;
  o.ctx_lens = {pf.ctx_lens.at(b)};
  o.block_table = attn_take_rows(pf.block_table, mb, b, 1);
  o.positions = attn_prefill_positions(c, b, b + 1, 0, L);
  o.slots = attn_take_rows(pf.slots, L, b, 1);
  out.qkv = attn_take_rows(c.qkv, c.geom.qkv_dim, c.decode.rows + b * L, L);
  return out;
}

AttnCase prefill_chunk(const AttnCase& c, uint64_t i0, uint64_t i1,
                       const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache) {
  const AttnPrefillPart& pf = c.prefill;
  if (i0 >= i1 || i1 > pf.L)
    throw Error(fmt::format("prefill_chunk: rows [{}, {}) of streams of {}", i0, i1, pf.L));
  require_size("prefill_chunk", "k_cache", k_cache.size(), c.k_cache.size());
  require_size("prefill_chunk", "v_cache", v_cache.size(), c.v_cache.size());
  AttnCase out = attn_without_parts(c);
  out.k_cache = k_cache;
  out.v_cache = v_cache;
  AttnPrefillPart& o = out.prefill;
  o.streams = pf.streams;
  o.L = i1 - i0;
  o.padded_rows = pf.padded_rows;
  o.v_row0 = pf.v_row0;
  o.block_table = pf.block_table;
  for (uint64_t b = 0; b < pf.streams; ++b) {
    o.ctx_lens.push_back(pf.ctx_lens.at(b) + static_cast<int32_t>(i0));
    const uint64_t row = c.decode.rows + b * pf.L + i0;
    append(out.qkv, attn_take_rows(c.qkv, c.geom.qkv_dim, row, i1 - i0));
    for (uint64_t i = i0; i < i1; ++i) o.slots.push_back(pf.slots.at(b * pf.L + i));
  }
  o.positions = attn_prefill_positions(c, 0, pf.streams, i0, i1);
  return out;
}

AttnCase decode_row(const AttnCase& c, uint64_t r) {
  const AttnDecodePart& d = c.decode;
  if (r >= d.live) throw Error(fmt::format("decode_row: row {} of {} live", r, d.live));
  AttnCase out = attn_without_parts(c);
  AttnDecodePart& o = out.decode;
  o.rows = 1;
  o.live = 1;
  o.splits = d.splits;
  o.verify = d.verify;
  o.seq_lens = {d.seq_lens.at(r)};
  o.block_table = attn_take_rows(d.block_table, c.cache.max_blocks, r, 1);
  o.positions = attn_take_columns(d.positions, d.rows, r, r + 1);
  o.slots = {d.slots.at(r)};
  out.qkv = attn_take_rows(c.qkv, c.geom.qkv_dim, r, 1);
  return out;
}

AttnCase with_live(const AttnCase& c, uint64_t n) {
  if (n > c.decode.live)
    throw Error(fmt::format("with_live: {} live rows of {}", n, c.decode.live));
  AttnCase out = c;
  out.decode.live = n;
  for (uint64_t r = n; r < c.decode.rows; ++r) out.decode.slots[r] = -1;
  return out;
}

}  // namespace bufferlab::oracle
